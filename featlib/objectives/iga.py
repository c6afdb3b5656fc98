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
exact and ``closed_form=True`` uses it; with a trained featurizer (ERM-NF) the gradient runs
through the whole network and the autograd penalty stays.
"""
from __future__ import annotations

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

    def closed_form_penalty(self, inputs: EnvInputs) -> torch.Tensor:
        if not self.has_closed_form(inputs.head_only):
            return self.penalty(inputs)
        features = inputs.require("features", f"{self.name} (closed form, head_only=True)")
        return alignment(head_risk_gradients(inputs.logits, inputs.targets, features))


def alignment(grads: torch.Tensor) -> torch.Tensor:
    """(*B,) ``sum_e ||g_e - mean_e g_e||^2`` for per-environment gradients ``(E, *B, P)``."""
    return (grads - grads.mean(0).detach()).pow(2).sum(-1).sum(0)
