"""IGA (Koyama & Yamaguchi, 2020, "When is invariance useful in an Out-of-Distribution
Generalization problem?", Inter-environmental Gradient Alignment).

Penalty: ``sum_e || g_e - mean_e g_e ||^2`` with ``g_e = d R_e / d theta`` over all tensors in
``params`` (concatenated). The reference code detaches the mean gradient; this does not change
the penalty's gradient, because ``sum_e (g_e - mean g) = 0`` kills the term it drops.

With run dimensions B each parameter tensor carries them in front; runs have disjoint
parameters, so the gradient of ``R_e`` summed over runs gives, in run r's slice, run r's own
gradient, and the squared norm is taken per run over all remaining dimensions.

The per-environment gradients come from ``torch.autograd.grad(create_graph=True)``, so training
differentiates twice. When the trained parameters are exactly a linear head on constant features
(``head_only=True``: the frozen-featurizer columns) and the risk is logistic, the closed form
``g_e = mean_i (sigmoid(z_i) - y_i) [h_i, 1]`` (:func:`~.closed_form.head_risk_gradients`) is
exact and ``closed_form=True`` uses it. With a trained featurizer (ERM-NF) and a caller that
passes ``env_risk`` (each environment's risk on its own rows as a function of the trained
tensors; the fast OOD stage does), ``closed_form=True`` uses :func:`hvp_alignment`: no double
backward, no padded rows.

**The first-order form.** With ``g_e = grad R_e`` and ``H_e`` its Hessian, the penalty's gradient is
``sum_e 2 H_e (g_e - mean_e g)`` (the term of the mean vanishes, as above). So each environment's
gradient is computed first-order on that environment's rows only (``torch.func.grad``), and each
``H_e v_e`` with ``v_e = 2 (g_e - mean g)`` by a Hessian-vector product: the pullback of that
gradient (``torch.func.vjp`` of ``torch.func.grad``, which gives ``g_e`` and the pullback in one
pass), outside the training graph. (Forward-over-reverse, ``torch.func.jvp``, is the textbook
alternative at about the same cost, but dynamo in torch 2.14 cannot trace its dual tensors once the
stack's sizes are dynamic.) The penalty returned has the penalty's value and, through one ordinary
backward pass, that gradient: ``P + <theta, hv> - <theta, hv>.detach()`` with ``hv = sum_e H_e v_e``
held constant. The autograd penalty instead differentiates each environment's risk through the whole
batch's graph (the other environment's rows padded with zeros) with ``create_graph=True`` and
differentiates that again. ``tests/test_gpu_paths.py`` checks the two gradients equal in float64.
"""
from __future__ import annotations

import functools

import torch

from .base import EnvInputs, Objective, logistic_risk
from .closed_form import head_risk_gradients
from .registry import OBJECTIVES


def env_gradients(inputs: EnvInputs, params, create_graph: bool = True) -> torch.Tensor:
    """(E, *B, P) the gradient of each environment's risk, flattened per run."""
    batch = tuple(inputs.batch_shape)
    for p in params:
        if tuple(p.shape[: len(batch)]) != batch or not p.requires_grad:
            raise ValueError(
                f"params must be tensors requiring grad whose leading dimensions are the run "
                f"dimensions {batch}; got shape {tuple(p.shape)}, requires_grad={p.requires_grad}"
            )
    per_env = []
    for risk in inputs.risks:
        grads = torch.autograd.grad(risk.sum(), params, create_graph=create_graph, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
        per_env.append(torch.cat([g.reshape(batch + (-1,)) for g in grads], dim=-1))
    return torch.stack(per_env)


@OBJECTIVES.register("iga")
class IGA(Objective):
    """IGA: ``sum_e R_e + lambda * sum_e ||g_e - mean_e g_e||^2`` (Koyama & Yamaguchi, 2020)."""

    name = "iga"
    first_order = False

    def penalty(self, inputs: EnvInputs) -> torch.Tensor:
        params = list(inputs.require("params", self.name))
        return alignment(env_gradients(inputs, params))

    def has_closed_form(self, head_only: bool = False) -> bool:
        return head_only and self.risk_fn is logistic_risk

    def has_first_order_form(self, head_only: bool = False, functional: bool = False) -> bool:
        return self.has_closed_form(head_only) or functional

    def closed_form_penalty(self, inputs: EnvInputs) -> torch.Tensor:
        if self.has_closed_form(inputs.head_only):
            features = inputs.require("features", f"{self.name} (closed form, head_only=True)")
            return alignment(head_risk_gradients(inputs.logits, inputs.targets, features))
        if inputs.env_risk is not None:
            params = inputs.require("params", self.name)
            return hvp_alignment(inputs.env_risk, list(params), len(inputs.logits), tuple(inputs.batch_shape))
        return self.penalty(inputs)


def hvp_alignment(env_risk, params, n_envs: int, batch: tuple[int, ...]) -> torch.Tensor:
    """(*B,) IGA's penalty with the gradient of :func:`alignment` of the per-environment
    gradients, from first-order gradients and one Hessian-vector product per environment (see
    the module docstring). ``env_risk(e, tensors)`` is environment e's risk (*B,) as a function
    of ``tensors`` (the values of ``params``, in order)."""
    tensors = tuple(p.detach() for p in params)
    with torch.no_grad():  # outside the training graph: only the values are used
        grads, pullbacks = zip(*(torch.func.vjp(torch.func.grad(functools.partial(_summed_risk, env_risk, e)), tensors)
                                 for e in range(n_envs)))
        mean = [sum(g[i] for g in grads) / n_envs for i in range(len(tensors))]
        hv = [torch.zeros_like(t) for t in tensors]
        penalty = torch.zeros(batch, dtype=tensors[0].dtype, device=tensors[0].device)
        for g, pullback in zip(grads, pullbacks):
            centred = tuple(gi - mi for gi, mi in zip(g, mean))
            penalty = penalty + sum(_per_run(c.pow(2), batch) for c in centred)
            (product,) = pullback(tuple(2 * c for c in centred))
            hv = [h + p for h, p in zip(hv, product)]
    linear = sum(_per_run(p * h, batch) for p, h in zip(params, hv))
    return penalty + (linear - linear.detach())


def _summed_risk(env_risk, e: int, tensors) -> torch.Tensor:
    return env_risk(e, tensors).sum()


def _per_run(values: torch.Tensor, batch: tuple[int, ...]) -> torch.Tensor:
    return values.reshape(*batch, -1).sum(-1)


def alignment(grads: torch.Tensor) -> torch.Tensor:
    """(*B,) ``sum_e ||g_e - mean_e g_e||^2`` for per-environment gradients ``(E, *B, P)``."""
    return (grads - grads.mean(0).detach()).pow(2).sum(-1).sum(0)
