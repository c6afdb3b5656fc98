"""IB-IRM (Ahuja et al., 2021, "Invariance Principle Meets Information Bottleneck for OOD
Generalization").

Penalty: the IRMv1 penalty plus an information-bottleneck term, the variance of the
classifier's input features over the samples, averaged over feature dimensions and then over
environments: ``IRMv1 + ib_weight * mean_e mean_h Var_i(h_{e,i,h})``
(``features_e.var(dim=-2).mean(-1)``, unbiased, as the reference code computes it).

When the featurizer is frozen the features are constants, so the IB term is a constant and
IB-IRM trains exactly like IRMv1: this is why the paper's Table 2 lists identical IB-IRM and
IRMv1 entries in its frozen-featurizer columns.
"""
from __future__ import annotations

import torch

from ..validation import check_positive
from .base import EnvInputs, promote
from .irm import ScaleDerivativePenalty, irmv1_penalty
from .registry import OBJECTIVES


def ib_penalty(features) -> torch.Tensor:
    """(*B,) ``mean_e features_e.var(dim=-2).mean(-1)`` for features ``(*B, n_e, H)`` (in float32
    at least: bfloat16 features are promoted)."""
    return torch.stack([promote(h).var(dim=-2).mean(-1) for h in features]).mean(0)


@OBJECTIVES.register("ib_irm")
class IBIRM(ScaleDerivativePenalty):
    """IB-IRM: ``sum_e R_e + lambda * (IRMv1 + ib_weight * mean_e Var(h_e))`` (Ahuja et al., 2021)."""

    name = "ib_irm"

    def __init__(self, *args, ib_weight: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.ib_weight = check_positive("ib_weight", ib_weight, allow_zero=True)

    def penalty(self, inputs: EnvInputs, closed_form: bool = False) -> torch.Tensor:
        features = inputs.require("features", self.name)
        return irmv1_penalty(self, inputs, closed_form) + self.ib_weight * ib_penalty(features)
