"""Closed forms of Appendix D.1 for the two-layer CNN with psi(x) = x.

With the identity activation the logit is ``yhat_i = sum_j (j/m) sum_r <w_{j,r}, x_{i,1} + x_{i,2}>``
and the IRMv1 objective

    L(W) = sum_e (1/n_e) sum_i l(y_i yhat_i) + lambda sum_e (C_IRMv1^e)^2

has the gradient (Appendix D.1)

    grad_{w_{j,r}} L = sum_e j (1 + 2 lambda C^e) / (n_e m) sum_i l'_i y_i (x_{i,1} + x_{i,2})
                     + 2 lambda sum_e j C^e / (n_e m) sum_i l''_i yhat_i (x_{i,1} + x_{i,2}),

with ``l(z) = log(1 + exp(-z))``, ``l'(z) = -sigmoid(-z)`` and ``l''(z) = sigmoid(z) sigmoid(-z)``.
These functions compute the formulas directly (no autograd) so that tests can compare them
with the autograd path of :mod:`featlib.objectives`.
"""
from __future__ import annotations

import torch

from .data.two_bit import TwoBitData


def logistic_d1(z: torch.Tensor) -> torch.Tensor:
    """l'(z) for l(z) = log(1 + exp(-z))."""
    return -torch.sigmoid(-z)


def logistic_d2(z: torch.Tensor) -> torch.Tensor:
    """l''(z) for l(z) = log(1 + exp(-z))."""
    return torch.sigmoid(z) * torch.sigmoid(-z)


def c_irmv1(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """C_IRMv1^e = (1/n_e) sum_i l'(y_i yhat_i) y_i yhat_i for one environment (Sec. 3)."""
    margin = y * logits
    return (logistic_d1(margin) * margin).mean()


def irmv1_gradient_identity(weight: torch.Tensor, data: TwoBitData, penalty_weight: float) -> torch.Tensor:
    """Appendix D.1's closed-form gradient of the (unscaled) IRMv1 objective for psi(x) = x.

    ``weight``: (2, m, d) filters as in :class:`featlib.models.TwoLayerCNN`; returns (2, m, d).
    """
    m = weight.shape[1]
    signs = torch.tensor([1.0, -1.0], dtype=weight.dtype, device=weight.device)
    s = data.x.sum(dim=1)  # x_{i,1} + x_{i,2}: (n, d)
    u = (weight * signs.view(2, 1, 1)).sum(dim=(0, 1)) / m  # yhat = <u, s>
    logits = s @ u
    total = torch.zeros_like(u)
    for idx in data.env_indices():
        y_e, f_e, s_e = data.y[idx], logits[idx], s[idx]
        c_e = c_irmv1(f_e, y_e)
        margin = y_e * f_e
        erm_part = (1 + 2 * penalty_weight * c_e) * (logistic_d1(margin) * y_e) @ s_e
        curvature_part = 2 * penalty_weight * c_e * (logistic_d2(margin) * f_e) @ s_e
        total = total + (erm_part + curvature_part) / (len(idx) * m)
    # The gradient of every filter w_{j,r} is j times the same vector.
    return signs.view(2, 1, 1) * total.view(1, 1, -1).expand(2, m, -1)
