"""Empirical risk minimisation: the sum of per-environment risks, Eq. (3)."""
from __future__ import annotations

import torch

from .base import Objective
from .registry import OBJECTIVES


@OBJECTIVES.register("erm")
class ERM(Objective):
    """ERM (Vapnik, 1991): ``sum_e R_e``; no penalty, so ``penalty_weight`` has no effect."""

    name = "erm"
    has_penalty = False

    def penalty(self, env_logits, env_targets) -> torch.Tensor:
        return env_logits[0].new_zeros(())
