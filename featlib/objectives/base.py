"""What every OOD objective shares: per-environment risks, a penalty and how they combine.

An objective maps per-environment logits and targets to

    loss = reduce_e R_e + lambda * penalty,

(Eq. 3 for ERM, Eq. 4-5 for IRMv1) where ``reduce`` is the sum over environments, as in the
paper's Eq. (3) and (5). With ``rescale=True`` and ``lambda > 1`` the loss is divided by
``lambda`` (the convention of the IRMv1 reference code that the ColoredMNIST protocol follows):
for gradient descent this is the same objective with the step size divided by ``lambda``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..validation import check_positive

RiskFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def logistic_risk(logits: torch.Tensor, targets01: torch.Tensor) -> torch.Tensor:
    """Mean logistic loss ``l(y f) = log(1 + exp(-y f))`` with y = 2 * targets01 - 1 (Eq. 3)."""
    return F.binary_cross_entropy_with_logits(logits, targets01)


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor  # scalar to minimise
    risks: torch.Tensor  # (E,) per-environment risks R_e
    penalty: torch.Tensor  # scalar penalty (0 for ERM)


class Objective:
    """Base class: subclasses implement :meth:`penalty`; ERM returns zero."""

    name = "base"
    #: False for objectives without a penalty (ERM): ``penalty_weight`` is then ignored.
    has_penalty = True

    def __init__(self, risk_fn: RiskFn = logistic_risk, rescale: bool = True):
        self.risk_fn = risk_fn
        self.rescale = rescale

    def risks(self, env_logits: Sequence[torch.Tensor], env_targets: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.stack([self.risk_fn(lg, t) for lg, t in zip(env_logits, env_targets)])

    def penalty(self, env_logits: Sequence[torch.Tensor], env_targets: Sequence[torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def __call__(
        self,
        env_logits: Sequence[torch.Tensor],
        env_targets: Sequence[torch.Tensor],
        penalty_weight: float = 0.0,
    ) -> ObjectiveOutput:
        check_positive("penalty_weight", penalty_weight, allow_zero=True)
        if len(env_logits) != len(env_targets) or not env_logits:
            raise ValueError(
                "env_logits and env_targets must be non-empty lists of the same length "
                f"(one entry per environment); got {len(env_logits)} and {len(env_targets)}"
            )
        risks = self.risks(env_logits, env_targets)
        if not self.has_penalty:
            penalty_weight = 0.0
        penalty = self.penalty(env_logits, env_targets)
        loss = risks.sum() + penalty_weight * penalty
        if self.rescale and penalty_weight > 1.0:
            loss = loss / penalty_weight
        return ObjectiveOutput(loss=loss, risks=risks.detach(), penalty=penalty.detach())
