"""Many independent runs of the ColoredMNIST model trained as one stacked model.

The paper's ColoredMNIST protocol trains thousands of tiny models (seeds x penalty weights x
pre-training lengths x objectives x feature initialisations) and the reference code trains them
one after another. Here a *stack* of runs keeps every weight with leading run dimensions and
computes all runs with batched matrix products, so one optimizer step updates every run:

* :class:`StackedMLP` -- C complete MLPs (featurizer and head) reading the same inputs; the
  first layer of all runs is one ``(n, 392) x (392, C*H)`` product. Used when the featurizer
  is trained (ERM-NF).
* :class:`StackedHeads` -- G x C linear heads on G fixed feature matrices (one per frozen
  featurizer, e.g. per seed and feature learner): logits ``(G, C, n)`` by ``torch.bmm``.

Runs never share parameters, so the gradient of the summed loss restricted to run r is run
r's own gradient, and Adam (elementwise) updates each run exactly as if it were alone
(``tests/test_stacked_training.py`` checks this against one-run-at-a-time training).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .mlp import ColoredMNISTMLP


class StackedMLP(nn.Module):
    """C copies of :class:`ColoredMNISTMLP` with their weights stacked on a leading run axis.

    ``w1 (C, in, H)``, ``b1 (C, H)``, ``w2 (C, H, H)``, ``b2 (C, H)``, ``w (C, H)``, ``b (C,)``.
    """

    def __init__(self, models: Sequence[ColoredMNISTMLP]):
        super().__init__()
        if not models:
            raise ValueError("models must be a non-empty list of ColoredMNISTMLP")
        self.hidden_dim = models[0].hidden_dim
        self.input_dim = models[0].input_dim

        def stack(get):
            return nn.Parameter(torch.stack([get(m).detach().clone() for m in models]))

        self.w1 = stack(lambda m: m.featurizer[0].weight.T)
        self.b1 = stack(lambda m: m.featurizer[0].bias)
        self.w2 = stack(lambda m: m.featurizer[2].weight.T)
        self.b2 = stack(lambda m: m.featurizer[2].bias)
        self.w = stack(lambda m: m.classifier.weight[0])
        self.b = stack(lambda m: m.classifier.bias[0])

    @property
    def batch_shape(self) -> tuple[int]:
        return (self.w.shape[0],)

    def featurizer_parameters(self) -> list[nn.Parameter]:
        return [self.w1, self.b1, self.w2, self.b2]

    def head_parameters(self) -> list[nn.Parameter]:
        return [self.w, self.b]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(n, in) -> (C, n, H). The first layer of all runs is a single matrix product."""
        c, h = self.w1.shape[0], self.hidden_dim
        first = (x @ self.w1.permute(1, 0, 2).reshape(self.input_dim, c * h)).view(-1, c, h).transpose(0, 1)
        hidden = torch.relu(first + self.b1.unsqueeze(1))
        return torch.relu(torch.baddbmm(self.b2.unsqueeze(1), hidden, self.w2))

    def head(self, features: torch.Tensor) -> torch.Tensor:
        """(C, n, H) -> (C, n) logits."""
        return torch.baddbmm(self.b.view(-1, 1, 1), features, self.w.unsqueeze(-1)).squeeze(-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (C, n) and features (C, n, H)."""
        feats = self.features(x)
        return self.head(feats), feats

    def unstack(self, run: int) -> ColoredMNISTMLP:
        """Run ``run`` as a plain :class:`ColoredMNISTMLP`."""
        model = ColoredMNISTMLP(self.hidden_dim, self.input_dim)
        with torch.no_grad():
            model.featurizer[0].weight.copy_(self.w1[run].T)
            model.featurizer[0].bias.copy_(self.b1[run])
            model.featurizer[2].weight.copy_(self.w2[run].T)
            model.featurizer[2].bias.copy_(self.b2[run])
            model.classifier.weight.copy_(self.w[run].unsqueeze(0))
            model.classifier.bias.copy_(self.b[run].view(1))
        return model.to(self.w.device)


class StackedHeads(nn.Module):
    """G x C linear heads ``w (G, C, H)``, ``b (G, C)`` on G frozen feature matrices.

    ``forward(features)`` takes features ``(G, n, H)`` (computed once per frozen featurizer) and
    returns logits ``(G, C, n)`` and the features viewed as ``(G, 1, n, H)`` (they broadcast
    over the C runs of a group without being copied)."""

    def __init__(self, heads: Sequence[Sequence[nn.Linear]]):
        super().__init__()
        if not heads or not heads[0]:
            raise ValueError("heads must be a non-empty G x C nested list of nn.Linear(H, 1)")
        self.w = nn.Parameter(torch.stack([torch.stack([h.weight[0].detach().clone() for h in row]) for row in heads]))
        self.b = nn.Parameter(torch.stack([torch.stack([h.bias[0].detach().clone() for h in row]) for row in heads]))

    @property
    def batch_shape(self) -> tuple[int, int]:
        return tuple(self.b.shape)

    def head_parameters(self) -> list[nn.Parameter]:
        return [self.w, self.b]

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = torch.baddbmm(self.b.unsqueeze(-1), self.w, features.transpose(1, 2))
        return logits, features.unsqueeze(1)

    def head(self, group: int, run: int) -> nn.Linear:
        layer = nn.Linear(self.w.shape[-1], 1).to(self.w.device)
        with torch.no_grad():
            layer.weight.copy_(self.w[group, run].unsqueeze(0))
            layer.bias.copy_(self.b[group, run].view(1))
        return layer
