"""IRMX (Chen et al., 2022, "Pareto Invariant Risk Minimization", PAIR).

Penalty: the IRMv1 penalty plus the V-REx penalty,
``reduce_e (d R_e / d s |_{s=1})^2 + Var_e(R_e)``; the IRMv1 part follows ``env_reduction``.
"""
from __future__ import annotations

import torch

from .base import EnvInputs
from .irm import ScaleDerivativePenalty, irmv1_penalty
from .registry import OBJECTIVES
from .vrex import vrex_penalty


@OBJECTIVES.register("irmx")
class IRMX(ScaleDerivativePenalty):
    """IRMX: ``sum_e R_e + lambda * (IRMv1 penalty + Var_e(R_e))`` (Chen et al., 2022)."""

    name = "irmx"

    def penalty(self, inputs: EnvInputs, closed_form: bool = False) -> torch.Tensor:
        return irmv1_penalty(self, inputs, closed_form) + vrex_penalty(inputs)
