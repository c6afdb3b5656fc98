"""Many independent runs of the ColoredMNIST model trained as one stacked model.

The paper's ColoredMNIST protocol trains thousands of tiny models (seeds x penalty weights x
pre-training lengths x objectives x learners) and the reference code trains them
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

Each model's computation is also a function of explicit parameter tensors,
``functional_forward(params, inputs)`` (``params``: name -> tensor, the names of
``named_parameters()``). ``forward`` is that function of the module's own parameters; the fast
OOD stage (:mod:`featlib.training.fast_stage`) calls it with tensors of its own (a stack that
grows as runs leave their shared ERM pre-training) and compiles it once for every stack.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from .mlp import ColoredMNISTMLP

#: ``bias_relu(x, b) = relu(x + b)``: the activation of a hidden layer with its bias, replaceable
#: by a fused (compiled) version; None keeps the reference expression of the plain path.
BiasReLU = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def stacked_mlp_features(params: Mapping[str, torch.Tensor], x: torch.Tensor,
                         bias_relu: BiasReLU | None = None) -> torch.Tensor:
    """(n, in) -> (C, n, H) for weights ``w1 (C, in, H)``, ``b1``, ``w2 (C, H, H)``, ``b2``.
    The first layer of all runs is a single matrix product. ``bias_relu=None``:
    ``relu(first + b1)`` and ``relu(baddbmm(b2, hidden, w2))``, the plain path's operations;
    otherwise each hidden layer is ``bias_relu(product, bias)``."""
    w1, b1, w2, b2 = params["w1"], params["b1"], params["w2"], params["b2"]
    c, inputs, h = w1.shape
    first = (x @ w1.permute(1, 0, 2).reshape(inputs, c * h)).view(-1, c, h).transpose(0, 1)
    b1 = b1.unsqueeze(1).to(first.dtype)  # the product's dtype: a bfloat16 product stays bfloat16
    if bias_relu is None:
        hidden = torch.relu(first + b1)
        return torch.relu(torch.baddbmm(b2.unsqueeze(1), hidden, w2))
    hidden = bias_relu(first, b1)
    second = torch.bmm(hidden, w2)
    return bias_relu(second, b2.unsqueeze(1).to(second.dtype))


def stacked_linear_head(w: torch.Tensor, b: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """(C, n, H) features -> (C, n) logits of heads ``w (C, H)``, ``b (C,)``, always in the
    head's own dtype (:func:`head_product`)."""
    return head_product(b.view(-1, 1, 1), features, w.unsqueeze(-1)).squeeze(-1)


def head_product(bias: torch.Tensor, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``baddbmm(bias, left, right)`` in the bias's (the head's) dtype, outside autocast: under a
    bfloat16 autocast the featurizer's products are bfloat16, but the head and the objective stay
    float32 (we measured bfloat16 logits taking about 2,100 distinct values on 25,000 images,
    which moves the penalties' gradients). A narrower operand is promoted; one already in that dtype
    is not copied."""
    with torch.autocast(left.device.type, enabled=False):
        return torch.baddbmm(bias, left.to(bias.dtype), right.to(bias.dtype))


class StackedMLP(nn.Module):
    """C copies of :class:`ColoredMNISTMLP` with their weights stacked on a leading run axis.

    ``w1 (C, in, H)``, ``b1 (C, H)``, ``w2 (C, H, H)``, ``b2 (C, H)``, ``w (C, H)``, ``b (C,)``.
    """

    #: The trained parameters include the featurizer: head-gradient closed forms do not apply.
    head_only = False

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
        return stacked_mlp_features(dict(self.named_parameters()), x)

    def head(self, features: torch.Tensor) -> torch.Tensor:
        """(C, n, H) -> (C, n) logits."""
        return stacked_linear_head(self.w, self.b, features)

    @staticmethod
    def functional_forward(params: Mapping[str, torch.Tensor], x: torch.Tensor,
                           bias_relu: BiasReLU | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (C, n) and features (C, n, H) of the runs whose weights are ``params``."""
        feats = stacked_mlp_features(params, x, bias_relu)
        return stacked_linear_head(params["w"], params["b"], feats), feats

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (C, n) and features (C, n, H)."""
        return self.functional_forward(dict(self.named_parameters()), x)

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

    #: The trained parameters are exactly a linear head on constant (frozen) features.
    head_only = True

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

    @staticmethod
    def functional_forward(params: Mapping[str, torch.Tensor], features: torch.Tensor,
                           bias_relu: BiasReLU | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (G, C, n) of heads ``params["w"] (G, C, H)``, ``params["b"] (G, C)`` on features
        (G, n, H), and the features as (G, 1, n, H). ``bias_relu`` is unused (no hidden layer).
        The product is in the head's dtype even under autocast (:func:`head_product`): frozen
        features are stored once, in that dtype, and never cast per step."""
        logits = head_product(params["b"].unsqueeze(-1), params["w"], features.transpose(1, 2))
        return logits, features.unsqueeze(1)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.functional_forward(dict(self.named_parameters()), features)

    def head(self, group: int, run: int) -> nn.Linear:
        layer = nn.Linear(self.w.shape[-1], 1).to(self.w.device)
        with torch.no_grad():
            layer.weight.copy_(self.w[group, run].unsqueeze(0))
            layer.bias.copy_(self.b[group, run].view(1))
        return layer
