"""Empirical risk minimisation: the sum of per-environment risks, Eq. (2)."""
from __future__ import annotations

from .base import Objective
from .registry import OBJECTIVES


@OBJECTIVES.register("erm")
class ERM(Objective):
    """ERM (Vapnik, 1991): ``sum_e R_e``; no penalty, so ``penalty_weight`` has no effect."""

    name = "erm"
    has_penalty = False
