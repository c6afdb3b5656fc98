"""Activations psi for the two-layer CNN of Eq. (1), looked up by name.

* ``identity``: psi(z) = z, the paper's setting for Theorems 4.1-4.2 and Fig. 2;
* ``relu``: psi(z) = max(z, 0);
* ``smoothed_relu``: the smoothed ReLU^q of Allen-Zhu & Li (2020), used for the non-linear
  discussion of Appendix D.2: 0 for z <= 0, z^q / (q kappa^(q-1)) on (0, kappa], and
  z - (1 - 1/q) kappa beyond; continuous with a continuous derivative.
"""
from __future__ import annotations

import torch
from torch import nn

from ..registry import Registry
from ..validation import check_int, check_positive

ACTIVATIONS: Registry[type[nn.Module]] = Registry("activation")


@ACTIVATIONS.register("identity")
class Identity(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z


@ACTIVATIONS.register("relu")
class ReLU(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.relu(z)


@ACTIVATIONS.register("smoothed_relu")
class SmoothedReLU(nn.Module):
    """Smoothed ReLU^q with polynomial part up to ``kappa`` (Allen-Zhu & Li, 2020)."""

    def __init__(self, q: int = 3, kappa: float = 0.1):
        super().__init__()
        self.q = check_int("q", q, minimum=2)
        self.kappa = check_positive("kappa", kappa)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        q, kappa = self.q, self.kappa
        positive = z.clamp(min=0.0)
        poly = positive.clamp(max=kappa) ** q / (q * kappa ** (q - 1))
        linear = (positive - kappa).clamp(min=0.0)
        return poly + linear

    def extra_repr(self) -> str:
        return f"q={self.q}, kappa={self.kappa}"


def make_activation(name: str, **kwargs) -> nn.Module:
    """Build the activation registered as ``name`` (keyword arguments go to its constructor)."""
    return ACTIVATIONS.get(name)(**kwargs)
