"""The small CNN of the GradCAM figures (Fig. 4 / Fig. 5) on the colour-patch ColoredMNIST.

The paper reads "ColoredMNIST-025 where the shortcuts are now concentrated to a colored patch
at the up left" with a small CNN, so that GradCAM can show where the features look (the patch
or the digit). The CNN has the interface of :class:`~featlib.models.mlp.ColoredMNISTMLP`, so
every ColoredMNIST feature learner trains either:

* ``featurizer`` (phi): ``Unflatten`` of the flat ``(n, C * S * S)`` inputs to ``(C, S, S)``
  (:class:`ImageUnflatten`: channels-last in memory on a CPU, the same values),
  three blocks ``Conv3x3 - ReLU - MaxPool2`` with 16, 32 and 64 channels, ``Flatten`` and
  ``Linear(64 * s * s, H) - ReLU`` (``s = S // 8``: 3 for 28x28 inputs, 1 for 14x14). Max
  pooling then flattening (not global average pooling) keeps where a feature fired, which is
  what separates the patch from the digit;
* ``classifier`` (w): ``Linear(H, 1)``;
* :attr:`ColoredMNISTCNN.gradcam_layer`: the third convolution, whose activations and gradients
  GradCAM weighs.

Weights are Xavier-uniform (convolutions and linear layers) with zero biases, drawn from
``torch.Generator().manual_seed(seed)``, so a model is a function of its seed.
"""
from __future__ import annotations

import torch
from torch import nn

from ..validation import check_int, check_sequence
from .mlp import xavier_linear

#: Output channels of the three convolution blocks.
CONV_CHANNELS = (16, 32, 64)


def xavier_conv(in_channels: int, out_channels: int, generator: torch.Generator) -> nn.Conv2d:
    """3x3 ``nn.Conv2d`` (padding 1) with Xavier-uniform weights drawn from ``generator``, zero bias."""
    layer = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
    nn.init.xavier_uniform_(layer.weight, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


#: The smallest image side the CNN takes: three 2x2 poolings leave at least one position.
MIN_SIDE = 2 ** len(CONV_CHANNELS)


def check_image_shape(image_shape, min_side: int = 1) -> tuple[int, int, int]:
    """A square image shape ``(C, S, S)`` with ``C >= 1`` and ``S >= min_side``."""
    shape = check_sequence("image_shape", image_shape, min_length=3)
    if len(shape) != 3 or shape[1] != shape[2]:
        raise ValueError(f"image_shape must be (channels, side, side); got {image_shape!r}")
    channels = check_int("image_shape[0]", shape[0], minimum=1)
    side = check_int("image_shape[1]", shape[1], minimum=min_side)
    return (channels, side, side)


class ImageUnflatten(nn.Unflatten):
    """``nn.Unflatten`` to ``(n, C, S, S)`` images that, on a CPU, lays them out channels-last.

    The values and the shape are those of ``nn.Unflatten``; only the memory layout differs. A
    convolution given a channels-last input runs oneDNN's NHWC kernels, and the layout carries
    through ReLU and pooling, so the CNN's full-batch step at 5,000 images takes about 0.7 of
    the contiguous layout's time on 2 CPU cores (``benchmarks/cnn_memory_format.py`` prints the
    ratio). ``Flatten`` then reads the features in the logical ``(C, s, s)`` order, so the
    linear layer sees what it saw before. On a GPU the layout is left alone: unmeasured there.
    ``channels_last=False`` keeps the contiguous layout on every device (the plain path the
    tests and the benchmark compare against). No parameters: the featurizer's state-dict keys
    are those of ``nn.Unflatten``."""

    def __init__(self, image_shape: tuple[int, int, int], channels_last: bool = True):
        super().__init__(1, image_shape)
        self.channels_last = bool(channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        images = super().forward(x)
        if self.channels_last and images.device.type == "cpu":
            return images.contiguous(memory_format=torch.channels_last)
        return images


class ColoredMNISTCNN(nn.Module):
    """``f = w o phi`` with a convolutional ``featurizer``: (n, C*S*S) -> (n, H); ``classifier``
    (n, H) -> logits; ``forward`` returns (n,) logits."""

    def __init__(self, hidden_dim: int = 256, image_shape: tuple[int, int, int] = (3, 28, 28), seed: int = 0):
        super().__init__()
        self.hidden_dim = check_int("hidden_dim", hidden_dim, minimum=1)
        self.image_shape = check_image_shape(image_shape, MIN_SIDE)
        generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
        layers: list[nn.Module] = [ImageUnflatten(self.image_shape)]
        channels, side = self.image_shape[0], self.image_shape[1]
        for out in CONV_CHANNELS:
            layers += [xavier_conv(channels, out, generator), nn.ReLU(), nn.MaxPool2d(2)]
            channels, side = out, side // 2
        layers += [nn.Flatten(), xavier_linear(channels * side * side, hidden_dim, generator), nn.ReLU()]
        self.featurizer = nn.Sequential(*layers)
        self.classifier = xavier_linear(hidden_dim, 1, generator)

    @property
    def gradcam_layer(self) -> nn.Conv2d:
        """The last convolution of ``featurizer``, the layer GradCAM explains (Fig. 4 / Fig. 5)."""
        return [m for m in self.featurizer if isinstance(m, nn.Conv2d)][-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.featurizer(x)).squeeze(-1)
