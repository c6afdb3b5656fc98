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

import numpy as np
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


def irmv1_population_penalty_gradient(alpha: float, betas: tuple[float, ...], u_inv: float,
                                      u_spu: float) -> tuple[float, float]:
    """The gradient of IRMv1's penalty ``sum_e (C^e)^2`` with respect to the logit's weights on v1
    and v2, ``(u_inv, u_spu)``, in the limit the proofs of Prop. 4.3 and Cor. 4.4 take (n -> inf,
    no noise, psi(x) = x): there the margin of an example of environment e is
    ``u_inv Rad(alpha) + u_spu Rad(beta_e)``, four cases with known probabilities, and
    ``C^e = E[l'(z) z]``, ``dC^e/du = E[(l''(z) z + l'(z)) r]`` for each coordinate's sign r.

    With lambda = 1e8 and the objective divided by lambda (chapter 02), an IRMv1 step moves the
    weights by minus this gradient up to the ERM term's 1e-8 share: a positive first component
    means the step lowers the invariant coefficient (Cor. 4.4's conclusion), a negative one that it
    raises it (Prop. 4.3's). The chapters' coefficients are half the logit's weights (u / 2)."""
    grad = np.zeros(2)
    for beta in betas:
        c = 0.0
        dc = np.zeros(2)
        for r_inv, p_inv in ((1.0, 1 - alpha), (-1.0, alpha)):
            for r_spu, p_spu in ((1.0, 1 - beta), (-1.0, beta)):
                z = torch.tensor(u_inv * r_inv + u_spu * r_spu, dtype=torch.float64)
                d1, d2 = float(logistic_d1(z)), float(logistic_d2(z))
                p = p_inv * p_spu
                c += p * d1 * float(z)
                dc += p * (d2 * float(z) + d1) * np.array([r_inv, r_spu])
        grad += 2 * c * dc
    return float(grad[0]), float(grad[1])


def premise_sign_change(alpha: float, betas: tuple[float, ...], upper: float | None = None,
                        tolerance: float = 1e-6) -> float | None:
    """Cor. 4.4's premise (the invariant coefficient zero, the spurious one Theta(1)) in the
    population limit: the spurious *coefficient* (u_spu / 2) at which IRMv1's first step on the
    invariant coefficient changes sign, found by bisection between 0 and ``upper`` (default: the
    spurious coefficient ERM converges to, :func:`featlib.data.erm_population_logit_weights`).
    Below it the first step lowers the invariant coefficient, as the corollary says; above it the
    step raises it. None when the sign does not change on that interval."""
    from .data.two_bit import erm_population_logit_weights

    if upper is None:
        upper = erm_population_logit_weights(alpha, betas)[1] / 2
    def falls(coefficient: float) -> bool:
        return irmv1_population_penalty_gradient(alpha, betas, 0.0, 2 * coefficient)[0] > 0
    low, high = tolerance, float(upper)
    if falls(low) == falls(high):
        return None
    while high - low > tolerance:
        mid = (low + high) / 2
        low, high = (mid, high) if falls(mid) == falls(low) else (low, mid)
    return (low + high) / 2
