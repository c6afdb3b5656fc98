"""How much of a ColoredMNIST prediction rests on colour and how much on shape (Figs. 4-5, Sec. 6).

The paper's GradCAM figures show *where* a model looks; on the standard two-channel
ColoredMNIST the spurious feature is not a place but the colour, so a pixel map cannot
separate it from the digit. This module splits the attribution by *what* is read instead.

Decomposition. A two-channel ColoredMNIST image puts the digit in channel 0 (red) or in
channel 1 (green), the other channel is zero. Re-parameterise every pixel by

    luminance    s = x0 + x1    (the digit's shape: the same whatever its colour)
    chrominance  k = x0 - x1    (+digit where red, -digit where green: the colour)

so that ``x0 = (s + k) / 2`` and ``x1 = (s - k) / 2``. The model becomes a function
``g(s, k) = f((s + k)/2, (s - k)/2)`` of two images, and integrated gradients on ``g`` from
``(0, 0)`` (the black image) give every pixel a shape attribution and a colour attribution
whose total is ``g(s, k) - g(0, 0) = f(x) - f(0)`` (completeness). A model that reads only
the colour (e.g. ``f = sum(x0) - sum(x1) = sum(k)``) has all its attribution on ``k``; a model
that reads only the shape (``f = w . (x0 + x1) = w . s``) has all of it on ``s``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from captum.attr import IntegratedGradients
from torch import nn

from ..validation import check_int
from .scores import as_float_batch, class_scores, evaluating, resolve_targets, to_numpy

__all__ = ["ColourShapeAttribution", "colour_shape_attribution", "colour_share"]


@dataclass
class ColourShapeAttribution:
    """Integrated gradients of a two-channel ColoredMNIST model split into shape and colour.

    ``shape_map`` (n, H, W): attribution of the luminance ``s = x0 + x1`` at each pixel;
    ``colour_map`` (n, H, W): attribution of the chrominance ``k = x0 - x1``; both signed, in
    units of the target-class score (``+-z/2`` for a binary logit ``z``).
    ``colour_share`` (n,): ``sum|colour_map| / (sum|colour_map| + sum|shape_map|)`` per
    example, 1 for a model that reads only the colour, 0 for one that reads only the shape,
    and 0 where both maps are all zero. ``delta`` (n,): Captum's completeness error,
    ``sum(maps) - (g(s, k) - g(0, 0))``. ``target`` (n,): the explained class."""

    shape_map: np.ndarray
    colour_map: np.ndarray
    colour_share: np.ndarray
    delta: np.ndarray
    target: np.ndarray


def colour_share(shape_map: np.ndarray, colour_map: np.ndarray) -> np.ndarray:
    """Per example ``sum|colour| / (sum|colour| + sum|shape|)``; 0 where both are all zero."""
    colour = np.abs(np.asarray(colour_map, dtype=float)).reshape(len(colour_map), -1).sum(1)
    shape = np.abs(np.asarray(shape_map, dtype=float)).reshape(len(shape_map), -1).sum(1)
    total = colour + shape
    return np.divide(colour, total, out=np.zeros_like(total), where=total > 0)


def _check_image_shape(image_shape: Any) -> tuple[int, int, int]:
    shape = tuple(image_shape) if isinstance(image_shape, (tuple, list)) else None
    if (shape is None or len(shape) != 3 or shape[0] != 2
            or not all(isinstance(s, (int, np.integer)) and s >= 1 for s in shape)):
        raise ValueError("image_shape must be (2, H, W): the two colour channels of ColoredMNIST and the "
                         f"image size; got {image_shape!r}")
    return 2, int(shape[1]), int(shape[2])


class _LuminanceChrominance(nn.Module):
    """``g(s, k) = scores(x)`` with ``x0 = (s + k)/2``, ``x1 = (s - k)/2`` laid out as the model reads x."""

    def __init__(self, scores: nn.Module, x_shape: Sequence[int]):
        super().__init__()
        self.scores = scores
        self.x_shape = tuple(x_shape)

    def forward(self, s: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        x = torch.stack(((s + k) / 2, (s - k) / 2), dim=1)  # (n, 2, H, W)
        return self.scores(x.reshape(s.shape[0], *self.x_shape[1:]))


def colour_shape_attribution(model: nn.Module, x: Any, target: Any = None, *,
                             image_shape: Sequence[int] = (2, 14, 14), n_steps: int = 32) -> ColourShapeAttribution:
    """Split ``model``'s prediction on two-channel ColoredMNIST ``x`` into shape and colour evidence.

    ``x``: flat ``(n, 2*H*W)`` inputs (as :class:`~featlib.models.ColoredMNISTMLP` reads them)
    or images ``(n, 2, H, W)``; ``image_shape=(2, H, W)`` gives the layout (channel first).
    Captum's ``IntegratedGradients`` runs on ``g(s, k)`` (see the module docstring) with the
    two inputs, zero baselines and ``n_steps`` Gauss-Legendre points; ``target=None``
    explains the predicted class."""
    x = as_float_batch("x", x, model)
    image_shape = _check_image_shape(image_shape)
    n_steps = check_int("n_steps", n_steps, minimum=1)
    if int(np.prod(x.shape[1:])) != int(np.prod(image_shape)):
        raise ValueError(f"x has {int(np.prod(x.shape[1:]))} values per example but image_shape {image_shape} "
                         f"needs {int(np.prod(image_shape))}")
    images = x.reshape(x.shape[0], *image_shape)
    s, k = images[:, 0] + images[:, 1], images[:, 0] - images[:, 1]
    scores = class_scores(model)
    g = _LuminanceChrominance(scores, x.shape)
    with evaluating(model):
        targets = resolve_targets(scores, (x,), target)
        (shape_attr, colour_attr), delta = IntegratedGradients(g).attribute(
            (s, k), baselines=(torch.zeros_like(s), torch.zeros_like(k)), target=targets, n_steps=n_steps,
            return_convergence_delta=True)
    shape_map, colour_map = to_numpy(shape_attr), to_numpy(colour_attr)
    return ColourShapeAttribution(shape_map, colour_map, colour_share(shape_map, colour_map),
                                  to_numpy(delta), to_numpy(targets))
