"""The networks a ColoredMNIST feature learner can train, by name.

* ``"mlp"``: :class:`~featlib.models.mlp.ColoredMNISTMLP`, the model of Table 2 (Appendix F.1),
  on the flattened image;
* ``"cnn"``: :class:`~featlib.models.cmnist_cnn.ColoredMNISTCNN`, the small CNN of the GradCAM
  figures (Fig. 4 / Fig. 5) on the colour-patch datasets.

Both expose ``featurizer`` (phi), ``classifier`` (w) and ``hidden_dim``, take flat
``(n, C * S * S)`` inputs and are a function of their seed.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from torch import nn

from ..registry import Registry
from .cmnist_cnn import ColoredMNISTCNN, check_image_shape
from .mlp import ColoredMNISTMLP

#: name -> ``builder(hidden_dim, image_shape, seed)``.
CMNIST_MODELS: Registry[Callable[[int, tuple[int, int, int], int], nn.Module]] = Registry("model")


@CMNIST_MODELS.register("mlp")
def _mlp(hidden_dim: int, image_shape: tuple[int, int, int], seed: int) -> nn.Module:
    return ColoredMNISTMLP(hidden_dim, input_dim=math.prod(check_image_shape(image_shape)), seed=seed)


@CMNIST_MODELS.register("cnn")
def _cnn(hidden_dim: int, image_shape: tuple[int, int, int], seed: int) -> nn.Module:
    return ColoredMNISTCNN(hidden_dim, image_shape, seed=seed)


def make_cmnist_model(name: str, image_shape: tuple[int, int, int], hidden_dim: int, seed: int) -> nn.Module:
    """A freshly initialised ColoredMNIST network ``name`` ("mlp" or "cnn") for images of shape
    ``image_shape`` with ``hidden_dim`` features, its weights drawn from ``seed``."""
    return CMNIST_MODELS.get(name)(hidden_dim, image_shape, seed)
