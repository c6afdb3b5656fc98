"""IRMv1 (Arjovsky et al., 2019), Eq. (4)-(5) of the paper.

The penalty of environment e is the squared derivative of its risk with respect to a dummy
scalar classifier ``s`` multiplying the logits, at ``s = 1``:
``(d/ds R_e(s * f))^2 = (C_IRMv1^e)^2`` with
``C_IRMv1^e = (1/n_e) sum_i l'(y_i yhat_i) y_i yhat_i`` (Sec. 3 and Appendix D.1).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .base import Objective
from .registry import OBJECTIVES


def scale_gradients(objective: Objective, env_logits: Sequence[torch.Tensor], env_targets, create_graph=True):
    """(E,) the per-environment ``d R_e(s f) / d s`` at ``s = 1`` (= C_IRMv1^e), by autograd."""
    grads = []
    for logits, targets in zip(env_logits, env_targets):
        scale = torch.ones((), device=logits.device, dtype=logits.dtype, requires_grad=True)
        risk = objective.risk_fn(logits * scale, targets)
        (grad,) = torch.autograd.grad(risk, scale, create_graph=create_graph)
        grads.append(grad)
    return torch.stack(grads)


@OBJECTIVES.register("irmv1")
class IRMv1(Objective):
    """IRMv1: ``sum_e R_e + lambda * sum_e (d R_e / d s |_{s=1})^2``."""

    name = "irmv1"

    def penalty(self, env_logits, env_targets) -> torch.Tensor:
        return scale_gradients(self, env_logits, env_targets).pow(2).sum()
