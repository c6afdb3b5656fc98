"""Fishr (Rame et al., 2022, "Fishr: Invariant Gradient Variances for Out-of-Distribution
Generalization"), for a linear classifier head ``z = w.h + b`` trained with the logistic loss.

The per-sample gradients of the binary cross-entropy have a closed form,
``dl_i/dw = (sigmoid(z_i) - y_i) h_i`` and ``dl_i/db = sigmoid(z_i) - y_i``. Per environment
``v_e = mean_i g_i^2`` (elementwise, over the H + 1 entries of (w, b)) and

    penalty = sum_e || v_e - mean_e v_e ||^2.

The reference code uses this uncentred second moment; ``centered=True`` subtracts each
environment's mean gradient first, the gradient variance of the original Fishr paper. Needs
``features=`` (h, the head's input, ``(*B, n_e, H)``) and assumes the logits are the head's
output and the risk is the logistic loss.
"""
from __future__ import annotations

import torch

from .base import EnvInputs, Objective, promote, weighted_feature_means
from .registry import OBJECTIVES


def head_gradient_moments(logits, targets01, features, centered: bool = False) -> torch.Tensor:
    """(*B, H + 1) the per-entry mean square of the per-sample head gradients
    ``g_i = (sigmoid(z_i) - y_i) [h_i, 1]``: ``E[r^2 h^2]`` (minus ``E[r h]^2`` when centred)."""
    if features.shape[-2] != logits.shape[-1]:
        raise ValueError(
            f"features must have shape (*B, n_e, H) matching logits {tuple(logits.shape)}; "
            f"got {tuple(features.shape)}"
        )
    features = promote(features, logits)
    residual = torch.sigmoid(logits) - targets01.to(logits.dtype)
    second = torch.cat([weighted_feature_means(residual.pow(2), features.pow(2)),
                        residual.pow(2).mean(-1, keepdim=True)], dim=-1)
    if not centered:
        return second
    first = torch.cat([weighted_feature_means(residual, features), residual.mean(-1, keepdim=True)], dim=-1)
    return second - first.pow(2)


@OBJECTIVES.register("fishr")
class Fishr(Objective):
    """Fishr: ``sum_e R_e + lambda * sum_e ||v_e - mean_e v_e||^2`` (Rame et al., 2022)."""

    name = "fishr"

    def __init__(self, *args, centered: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.centered = bool(centered)

    def penalty(self, inputs: EnvInputs) -> torch.Tensor:
        features = inputs.require("features", self.name)
        moments = torch.stack(
            [
                head_gradient_moments(z, y, h, self.centered)
                for z, y, h in zip(inputs.logits, inputs.targets, features)
            ]
        )
        return (moments - moments.mean(0)).pow(2).sum(-1).sum(0)
