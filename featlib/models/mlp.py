"""The ColoredMNIST model (Sec. 6, Appendix F.1): an MLP featurizer and a linear head.

Featurizer ``Linear(392, H) - ReLU - Linear(H, H) - ReLU``, classifier ``Linear(H, 1)``,
H = 256, Xavier-uniform weights and zero biases (the protocol of the authors' code, built on
the IRM ColoredMNIST model). ``phi = featurizer`` and ``w = classifier`` are the paper's
``f = w o phi`` of Sec. 5: the feature learners train both, the OOD stage trains ``w`` on a
frozen ``phi`` (or both, "ERM-NF").
"""
from __future__ import annotations

import torch
from torch import nn

from ..validation import check_int

INPUT_DIM = 2 * 14 * 14


def xavier_linear(in_features: int, out_features: int, generator: torch.Generator) -> nn.Linear:
    """``nn.Linear`` with Xavier-uniform weights drawn from ``generator`` and zero bias."""
    layer = nn.Linear(in_features, out_features)
    nn.init.xavier_uniform_(layer.weight, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


class ColoredMNISTMLP(nn.Module):
    """``f = w o phi``: ``featurizer`` (phi) maps (n, 392) to (n, H); ``classifier`` (w) to logits.

    ``forward`` returns (n,) logits. Weights are drawn from ``torch.Generator().manual_seed(seed)``
    so a model is a function of its seed."""

    def __init__(self, hidden_dim: int = 256, input_dim: int = INPUT_DIM, seed: int = 0):
        super().__init__()
        self.hidden_dim = check_int("hidden_dim", hidden_dim, minimum=1)
        self.input_dim = check_int("input_dim", input_dim, minimum=1)
        generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
        self.featurizer = nn.Sequential(
            xavier_linear(input_dim, hidden_dim, generator), nn.ReLU(),
            xavier_linear(hidden_dim, hidden_dim, generator), nn.ReLU(),
        )
        self.classifier = xavier_linear(hidden_dim, 1, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.featurizer(x)).squeeze(-1)


def fresh_head(hidden_dim: int, seed: int, outputs: int = 1) -> nn.Linear:
    """A newly initialised classifier (FeAT's "randomly initialize w_k", Algorithm 1 line 4)."""
    return xavier_linear(hidden_dim, outputs, torch.Generator().manual_seed(seed))
