"""The two-layer CNN of Eq. (1).

``f(W, x) = F_{+1}(W_{+1}, x) - F_{-1}(W_{-1}, x)`` with
``F_j(W_j, x) = (1/m) sum_r [psi(<w_{j,r}, x1>) + psi(<w_{j,r}, x2>)]``: each of the 2m filters
is applied to both patches, the second layer is fixed at +1/m and -1/m, and all filters are
initialised i.i.d. N(0, sigma_0^2).
"""
from __future__ import annotations

import torch
from torch import nn

from ..data.two_bit import INVARIANT_COORD, SPURIOUS_COORD
from ..validation import check_int, check_positive
from .activations import make_activation

#: Second-layer signs j in {+1, -1}, in the order of the first axis of ``weight``.
CLASS_SIGNS = (1.0, -1.0)


class TwoLayerCNN(nn.Module):
    """Eq. (1). ``weight`` has shape (2, m, d): ``weight[0]`` are the w_{+1,r}, ``weight[1]``
    the w_{-1,r}. Input ``x`` has shape (n, 2, d) (patches x1, x2); output: (n,) logits."""

    def __init__(
        self,
        d: int,
        m: int,
        activation: str = "identity",
        sigma_0: float = 0.01,
        seed: int = 0,
        activation_kwargs: dict | None = None,
    ):
        super().__init__()
        self.d = check_int("d", d, minimum=3)
        self.m = check_int("m", m, minimum=1)
        self.sigma_0 = check_positive("sigma_0", sigma_0)
        check_int("seed", seed, minimum=0)
        self.psi = make_activation(activation, **(activation_kwargs or {}))
        self.activation = activation
        generator = torch.Generator().manual_seed(seed)
        self.weight = nn.Parameter(torch.randn(2, self.m, self.d, generator=generator) * self.sigma_0)
        self.register_buffer("signs", torch.tensor(CLASS_SIGNS))

    def class_scores(self, x: torch.Tensor) -> torch.Tensor:
        """(n, 2): F_{+1} and F_{-1}."""
        pre = torch.einsum("npd,jrd->njpr", x, self.weight)  # <w_{j,r}, x_p>
        return self.psi(pre).sum(dim=(2, 3)) / self.m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.class_scores(x) @ self.signs

    def feature_coefficients(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Invariant and spurious feature learning (Fig. 2): the mean over j in {+-1} and
        r in [m] of <w_{j,r}, j v1> and <w_{j,r}, j v2>."""
        signed = self.weight * self.signs.view(2, 1, 1)
        return signed[..., INVARIANT_COORD].mean(), signed[..., SPURIOUS_COORD].mean()
