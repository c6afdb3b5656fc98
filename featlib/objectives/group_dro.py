"""GroupDRO (Sagawa et al., 2020, "Distributionally Robust Neural Networks for Group Shifts").

Online weights over environments: on every call, before the loss,
``q_e <- q_e exp(eta * R_e)`` (risks detached) and q is renormalised to sum to 1; the loss is
``sum_e q_e R_e``. q starts uniform (1/E) and, with run dimensions, has shape ``(E, *B)`` so
every run keeps its own weights. There is no penalty: ``penalty_weight`` is ignored.
:meth:`reset` forgets q (call it between independent trainings).
"""
from __future__ import annotations

import torch

from ..validation import check_positive
from .base import EnvInputs, Objective
from .registry import OBJECTIVES


@OBJECTIVES.register("group_dro")
class GroupDRO(Objective):
    """GroupDRO: ``sum_e q_e R_e`` with ``q_e proportional to q_e exp(eta R_e)`` (Sagawa et al., 2020)."""

    name = "group_dro"
    has_penalty = False

    def __init__(self, *args, eta: float = 0.01, **kwargs):
        super().__init__(*args, **kwargs)
        self.eta = check_positive("eta", eta, allow_zero=True)
        self.q: torch.Tensor | None = None

    def reset(self) -> None:
        self.q = None

    def total_risk(self, risks: torch.Tensor) -> torch.Tensor:
        if self.q is None:
            self.q = torch.full_like(risks.detach(), 1.0 / risks.shape[0])
        elif self.q.shape != risks.shape:
            raise ValueError(
                f"GroupDRO keeps weights of shape {tuple(self.q.shape)} (environments, *runs) but got "
                f"risks of shape {tuple(risks.shape)}; call reset() before changing them"
            )
        q = self.q.to(risks) * torch.exp(self.eta * risks.detach())
        self.q = q / q.sum(0, keepdim=True)
        return (self.q * risks).sum(0)

    def penalty(self, inputs: EnvInputs) -> torch.Tensor:
        return torch.zeros_like(inputs.risks[0])
