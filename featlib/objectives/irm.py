"""IRMv1 (Arjovsky et al., 2019), Eq. (4)-(5) of the paper.

The penalty of environment e is the squared derivative of its risk with respect to a dummy
scalar classifier ``s`` multiplying the logits, at ``s = 1``:
``(d/ds R_e(s * f))^2 = (C_IRMv1^e)^2`` with
``C_IRMv1^e = (1/n_e) sum_i l'(y_i yhat_i) y_i yhat_i`` (Sec. 3 and Appendix D.1).

:func:`scale_gradients` computes the derivative by autograd (the reference; training then
differentiates twice); with ``closed_form=True`` the objectives use the closed form of
:mod:`featlib.objectives.closed_form` instead, for the logistic and cross-entropy risks.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .base import EnvInputs, Objective
from .closed_form import has_scale_derivative, scale_derivatives
from .registry import OBJECTIVES


def scale_gradients(objective: Objective, env_logits: Sequence[torch.Tensor], env_targets, create_graph=True):
    """(E, *B) the per-environment ``d R_e(s f) / d s`` at ``s = 1`` (= C_IRMv1^e), by autograd.

    With run dimensions B each run gets its own dummy scale, so the derivatives stay per run.
    The risk function's ``logit_dims`` (1 for binary logits ``(n,)``, 2 for multi-class logits
    ``(n, C)``) says which trailing dimensions belong to one run."""
    grads = []
    logit_dims = getattr(objective.risk_fn, "logit_dims", 1)
    for logits, targets in zip(env_logits, env_targets):
        run_shape = logits.shape[: logits.dim() - logit_dims]
        scale = torch.ones(run_shape, device=logits.device, dtype=logits.dtype, requires_grad=True)
        risk = objective.risk_fn(logits * scale.reshape(*run_shape, *(1,) * logit_dims), targets)
        (grad,) = torch.autograd.grad(risk.sum(), scale, create_graph=create_graph)
        grads.append(grad)
    return torch.stack(grads)


def irmv1_penalty(objective: Objective, inputs: EnvInputs, closed_form: bool = False) -> torch.Tensor:
    """``reduce_e (d R_e / d s |_{s=1})^2`` with the objective's ``env_reduction``; the derivative
    by autograd, or in closed form (``closed_form=True``)."""
    if closed_form:
        derivatives = scale_derivatives(objective.risk_fn, inputs.logits, inputs.targets)
    else:
        derivatives = scale_gradients(objective, inputs.logits, inputs.targets)
    return objective.reduce_envs(derivatives.pow(2))


class ScaleDerivativePenalty(Objective):
    """Objectives whose penalty contains IRMv1's term: a closed form exists for the risk
    functions of :data:`featlib.objectives.closed_form.SCALE_DERIVATIVES`."""

    first_order = False

    def has_closed_form(self, head_only: bool = False) -> bool:
        return has_scale_derivative(self.risk_fn)

    def closed_form_penalty(self, inputs: EnvInputs) -> torch.Tensor:
        if not self.has_closed_form(inputs.head_only):
            return self.penalty(inputs)
        return self.penalty(inputs, closed_form=True)


@OBJECTIVES.register("irmv1")
class IRMv1(ScaleDerivativePenalty):
    """IRMv1: ``sum_e R_e + lambda * sum_e (d R_e / d s |_{s=1})^2`` (Arjovsky et al., 2019)."""

    name = "irmv1"

    def penalty(self, inputs: EnvInputs, closed_form: bool = False) -> torch.Tensor:
        return irmv1_penalty(self, inputs, closed_form)
