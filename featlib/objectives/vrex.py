"""V-REx (Krueger et al., 2021, "Out-of-Distribution Generalization via Risk Extrapolation").

Penalty: the variance of the per-environment risks, ``Var_e(R_e)`` (unbiased, as torch's
default; with two environments ``(R_1 - R_2)^2 / 2``), as the reference code computes it.
"""
from __future__ import annotations

import torch

from .base import EnvInputs, Objective
from .registry import OBJECTIVES


def vrex_penalty(inputs: EnvInputs) -> torch.Tensor:
    """(*B,) the unbiased variance over environments of the risks ``(E, *B)``."""
    if inputs.risks.shape[0] < 2:
        raise ValueError(f"the V-REx penalty needs at least 2 environments; got {inputs.risks.shape[0]}")
    return inputs.risks.var(dim=0)


@OBJECTIVES.register("vrex")
class VREx(Objective):
    """V-REx: ``sum_e R_e + lambda * Var_e(R_e)`` (Krueger et al., 2021)."""

    name = "vrex"

    def penalty(self, inputs: EnvInputs) -> torch.Tensor:
        return vrex_penalty(inputs)
