"""CLOvE (Wald et al., 2021, "On Calibration and Out-of-Domain Generalization").

Penalty: the MMCE calibration error (Kumar et al., 2018) with a Laplacian kernel of width
``kernel_width`` (0.4), summed over environments as the reference code does (whatever
``env_reduction``, which only sets how IRMv1-type terms combine). For environment e with n
samples, logits z_i and targets y_i:

    c_i = max(sigmoid(z_i), 1 - sigmoid(z_i))    (confidence of the predicted class)
    r_i = 1[(z_i > 0) == (y_i = 1)]              (correctness, detached)
    a_i = r_i - c_i
    MMCE_e = (1/n^2) sum_{i,j} a_i a_j exp(-|c_i - c_j| / width).

The reference code evaluates it on minibatches of 512 and, by a bug, only keeps the last
minibatch's value; we use the exact full-batch value. It is computed in O(n log n) rather than
O(n^2): after sorting c, ``exp(-(c_j - c_i)/w) = exp(-c_j/w) exp(c_i/w)`` for i <= j, so
``sum_{i,j} = sum_i a_i^2 + 2 sum_j a_j e^{-c_j/w} sum_{i<j} a_i e^{c_i/w}`` with a cumulative
sum. Sorting only permutes, so the value stays differentiable in the logits through c and a.
Pairs with exactly tied confidences get kernel 1 and no kernel gradient, as ``|c_i - c_j|``
has in autograd, so gradients equal the dense formula's even with ties. The sums run in
float64 (float32 on MPS), with the exponentials taken about c = 3/4 (c lies in [1/2, 1]), so
the cancellations between them stay accurate.
"""
from __future__ import annotations

import torch

from ..validation import check_positive
from .base import EnvInputs, Objective
from .registry import OBJECTIVES


def _before(x: torch.Tensor) -> torch.Tensor:
    """Exclusive prefix sums along the last dimension: ``sum_{i<j} x_i``."""
    return torch.cumsum(x, dim=-1) - x


def mmce(logits: torch.Tensor, targets01: torch.Tensor, kernel_width: float = 0.4) -> torch.Tensor:
    """(*B,) the exact MMCE of logits ``(*B, n)`` against targets ``(n,)`` or ``(*B, n)``."""
    prob = torch.sigmoid(logits)
    confidence = torch.where(prob >= 0.5, prob, 1 - prob)
    correct = ((logits > 0) == (targets01 > 0.5)).to(logits.dtype).detach()
    wide = torch.float32 if logits.device.type == "mps" else torch.float64  # MPS has no float64
    c, order = confidence.to(wide).sort(dim=-1)
    a = (correct - confidence).to(wide).gather(-1, order)
    # start[j]: first sorted position of j's group of tied confidences
    new = torch.cat([torch.ones_like(c[..., :1], dtype=torch.bool), c[..., 1:] != c[..., :-1]], dim=-1)
    pos = torch.arange(c.shape[-1], device=c.device).expand_as(c)
    start = torch.cummax(torch.where(new, pos, 0), dim=-1).values
    lower = _before(a * torch.exp((c - 0.75) / kernel_width)).gather(-1, start)  # c_i < c_j
    tied = _before(a) - _before(a).gather(-1, start)  # earlier i with c_i == c_j: kernel 1
    total = a.pow(2).sum(-1) + 2 * (a * (torch.exp((0.75 - c) / kernel_width) * lower + tied)).sum(-1)
    return (total / c.shape[-1] ** 2).to(logits.dtype)


@OBJECTIVES.register("clove")
class CLOvE(Objective):
    """CLOvE: ``sum_e R_e + lambda * sum_e MMCE_e`` with a Laplacian kernel (Wald et al., 2021)."""

    name = "clove"

    def __init__(self, *args, kernel_width: float = 0.4, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel_width = check_positive("kernel_width", kernel_width)

    def penalty(self, inputs: EnvInputs) -> torch.Tensor:
        per_env = [mmce(z, y, self.kernel_width) for z, y in zip(inputs.logits, inputs.targets)]
        return torch.stack(per_env).sum(0)
