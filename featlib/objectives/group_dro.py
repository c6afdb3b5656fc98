"""GroupDRO (Sagawa et al., 2020, "Distributionally Robust Neural Networks for Group Shifts").

Online weights over environments: on every call, before the loss,
``q_e <- q_e exp(eta * R_e)`` (risks detached) and q is renormalised to sum to 1; the loss is
``sum_e q_e R_e``. q starts uniform (1/E) and, with run dimensions, has shape ``(E, *B)`` so
every run keeps its own weights. There is no penalty: ``penalty_weight`` is ignored.
:meth:`reset` forgets q (call it between independent trainings).

**Minibatches of a few domains** (WILDS): with ``n_groups`` set and ``env_ids`` passed to the
call, q has one entry per group of the whole dataset, ``(n_groups, *B)``; a step multiplies
the entries of the groups in the batch by ``exp(eta R_g)``, renormalises over all groups and
returns ``sum_{g in batch} q_g R_g``, as the WILDS GroupDRO does (Koh et al., 2021).
``group_mask`` (bool, ``(n_groups,)``) marks the groups with training data; the others start
(and stay) at weight 0.
"""
from __future__ import annotations

import torch

from ..validation import check_int, check_positive
from .base import EnvInputs, Objective
from .registry import OBJECTIVES


@OBJECTIVES.register("group_dro")
class GroupDRO(Objective):
    """GroupDRO: ``sum_e q_e R_e`` with ``q_e proportional to q_e exp(eta R_e)`` (Sagawa et al., 2020)."""

    name = "group_dro"
    has_penalty = False
    stateful = True

    def __init__(self, *args, eta: float = 0.01, n_groups: int | None = None,
                 group_mask: torch.Tensor | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.eta = check_positive("eta", eta, allow_zero=True)
        self.n_groups = None if n_groups is None else check_int("n_groups", n_groups, minimum=1)
        if group_mask is not None and (self.n_groups is None or tuple(group_mask.shape) != (self.n_groups,)):
            raise ValueError(f"group_mask must be a bool tensor of shape (n_groups,) = ({n_groups},); "
                             f"got shape {tuple(group_mask.shape)}")
        self.group_mask = group_mask
        self.q: torch.Tensor | None = None

    def reset(self) -> None:
        self.q = None

    def _grouped_total_risk(self, risks: torch.Tensor, env_ids) -> torch.Tensor:
        if self.n_groups is None:
            raise ValueError("GroupDRO got env_ids but no n_groups: construct it with n_groups=<number of groups>")
        ids = torch.as_tensor(list(env_ids), device=risks.device)
        if ids.min() < 0 or ids.max() >= self.n_groups:
            raise ValueError(f"env_ids must lie in [0, {self.n_groups - 1}]; got {ids.tolist()}")
        if self.q is None:
            q = torch.ones((self.n_groups, *risks.shape[1:]), dtype=risks.dtype, device=risks.device)
            if self.group_mask is not None:
                q[~self.group_mask.to(risks.device)] = 0.0
            self.q = q / q.sum(0, keepdim=True)
        q = self.q.to(risks).clone()
        q[ids] = q[ids] * torch.exp(self.eta * risks.detach())
        self.q = q / q.sum(0, keepdim=True)
        return (self.q[ids] * risks).sum(0)

    def total_risk(self, risks: torch.Tensor, env_ids=None) -> torch.Tensor:
        if env_ids is not None:
            return self._grouped_total_risk(risks, env_ids)
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
