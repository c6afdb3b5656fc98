"""Pixel attributions through Captum: GradCAM, integrated gradients, gradient saliency.

The paper's feature-learning analysis (Sec. 6 "Feature learning analysis", Fig. 4; Appendix
F.4, Figs. 5 and 9-12) draws GradCAM maps of ERM, Bonsai and FeAT models "with
https://github.com/pytorch/captum". These functions are thin wrappers that fix the choices
the figures need and return numpy arrays:

* every model is first wrapped by :func:`~featlib.saliency.scores.class_scores`, so a
  ColoredMNIST model's ``(n,)`` binary logit ``z`` is attributed as the class score ``+-z/2``;
* ``target=None`` explains the class the model predicts (as the figures do, whose labels and
  predictions are listed in Table 15);
* the model runs in eval mode and is restored to its previous mode afterwards; Captum takes
  gradients with ``torch.autograd.grad``, so no ``.grad`` of a parameter is written.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from captum.attr import IntegratedGradients, LayerAttribution, LayerGradCam, Saliency
from torch import nn

from ..validation import check_int
from .scores import as_float_batch, class_scores, evaluating, resolve_targets, to_numpy

__all__ = ["gradcam", "integrated_gradients", "normalise_maps", "saliency_map", "upsample_maps"]


def _check_layer(model: nn.Module, layer: Any) -> nn.Module:
    if not isinstance(layer, nn.Module) or not any(module is layer for module in model.modules()):
        raise ValueError("layer must be a submodule of model (e.g. image_gradcam_layer(model) or the CNN's "
                         f"gradcam_layer); got {type(layer).__name__}")
    return layer


def _spatial_size(x: torch.Tensor, input_shape: Sequence[int] | None) -> tuple[int, int]:
    """(H, W) of the images in ``x``: from ``input_shape`` (C, H, W) for flat inputs, else x's last two dims."""
    if input_shape is None:
        if x.dim() < 3:
            raise ValueError(f"input_shape=(C, H, W) is required for flat inputs of shape {tuple(x.shape)}: "
                             "GradCAM maps are upsampled to the image size")
        return int(x.shape[-2]), int(x.shape[-1])
    shape = tuple(input_shape) if isinstance(input_shape, (tuple, list)) else None
    if shape is None or len(shape) != 3 or not all(isinstance(s, (int, np.integer)) and s >= 1 for s in shape):
        raise ValueError(f"input_shape must be (C, H, W), three positive integers; got {input_shape!r}")
    if int(np.prod(shape)) != int(np.prod(x.shape[1:])):
        raise ValueError(f"input_shape {shape} does not match the {int(np.prod(x.shape[1:]))} values per example "
                         f"of x with shape {tuple(x.shape)}")
    return int(shape[1]), int(shape[2])


def gradcam(model: nn.Module, layer: nn.Module, x: Any, target: Any = None, *,
            input_shape: Sequence[int] | None = None, upsample: bool = True) -> np.ndarray:
    """GradCAM maps ``(n, H, W)`` of ``model`` at ``layer``, the middle image of each triple in Figs. 4-5.

    Captum's ``LayerGradCam``: the layer's channels are weighted by the spatial mean of the
    target-class score's gradient and summed, ReLU'd (only evidence *for* the class is kept,
    ``relu_attributions=True``), then upsampled to the image size with
    ``LayerAttribution.interpolate`` (bilinear). Values are non-negative, in units of
    "score x activation"; they are comparable between pixels of one map, and the share of a
    map's mass inside a region (:func:`~featlib.saliency.regions.region_share`) is what the
    figures show by eye. ``layer`` must output ``(n, channels, h, w)``.

    ``x``: images ``(n, C, H, W)``, or flat inputs ``(n, C*H*W)`` as the ColoredMNIST models
    read them with ``input_shape=(C, H, W)`` naming the image size. ``target``: None (the
    predicted class), one class index, or one per example. ``upsample=False`` returns the layer's
    coarse maps ``(n, h, w)`` before the upsampling (what a result file keeps: the figure's map is
    :func:`upsample_maps` of it)."""
    x = as_float_batch("x", x, model)
    layer = _check_layer(model, layer)
    size = _spatial_size(x, input_shape)
    scores = class_scores(model)
    with evaluating(model):
        targets = resolve_targets(scores, (x,), target)
        maps = LayerGradCam(scores, layer).attribute(x, target=targets, relu_attributions=True)
        if maps.dim() != 4:
            raise ValueError("layer must output (n, channels, h, w) feature maps for GradCAM; "
                             f"its attribution has shape {tuple(maps.shape)}")
    if not upsample:
        return to_numpy(maps.detach()[:, 0])
    return upsample_maps(maps.detach()[:, 0], size)


def upsample_maps(maps: Any, size: Sequence[int]) -> np.ndarray:
    """Coarse GradCAM maps ``(n, h, w)`` upsampled bilinearly to the image ``size`` ``(H, W)``,
    as :func:`gradcam` does (Captum's ``LayerAttribution.interpolate``): the figures' maps from a
    result file's coarse ones."""
    coarse = torch.as_tensor(np.asarray(maps) if not isinstance(maps, torch.Tensor) else maps)
    if coarse.dim() != 3 or not torch.isfinite(coarse).all():
        raise ValueError(f"maps must be finite with shape (n, h, w); got shape {tuple(coarse.shape)}")
    size = tuple(int(check_int("size", s, minimum=1)) for s in size)
    coarse = coarse if coarse.is_floating_point() else coarse.float()
    return to_numpy(LayerAttribution.interpolate(coarse.unsqueeze(1), size, interpolate_mode="bilinear")[:, 0])


def normalise_maps(maps: Any) -> np.ndarray:
    """Each ``(H, W)`` map of ``(n, H, W)`` rescaled to [0, 1] by its own min and max (a constant map -> 0).

    For display: GradCAM's scale differs between examples and models, its shape is what the
    figures compare."""
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 3 or not np.isfinite(maps).all():
        raise ValueError(f"maps must be finite with shape (n, H, W); got shape {maps.shape}")
    low = maps.min(axis=(1, 2), keepdims=True)
    span = maps.max(axis=(1, 2), keepdims=True) - low
    return np.divide(maps - low, span, out=np.zeros_like(maps), where=span > 0)


def _baseline(baseline: Any, x: torch.Tensor) -> torch.Tensor:
    """None -> zeros; a number -> constant; an array of x's shape or of one example's shape."""
    if baseline is None:
        return torch.zeros_like(x)
    if isinstance(baseline, (int, float, np.integer, np.floating)) and not isinstance(baseline, bool):
        return torch.full_like(x, float(baseline))
    tensor = torch.as_tensor(baseline.detach().cpu() if isinstance(baseline, torch.Tensor) else np.asarray(baseline))
    if tuple(tensor.shape) == tuple(x.shape[1:]):
        tensor = tensor.unsqueeze(0).expand_as(x)
    if tuple(tensor.shape) != tuple(x.shape):
        raise ValueError(f"baseline must be None, a number, or an array of shape {tuple(x.shape)} or "
                         f"{tuple(x.shape[1:])}; got shape {tuple(tensor.shape)}")
    return tensor.to(device=x.device, dtype=x.dtype).contiguous()


def integrated_gradients(model: nn.Module, x: Any, target: Any = None, *, baseline: Any = None,
                         n_steps: int = 32, internal_batch_size: int | None = None) -> np.ndarray:
    """Integrated gradients of the target-class score, same shape as ``x`` (signed).

    Captum's ``IntegratedGradients`` along the straight path from ``baseline`` (default: all
    zeros, the black image) to ``x`` with ``n_steps`` Gauss-Legendre points. Completeness:
    the attributions of one example sum to ``score(x) - score(baseline)`` up to the quadrature
    error (for a binary ColoredMNIST model the score is ``+-z/2``, see ``class_scores``).
    Positive values push towards ``target``, negative values away from it."""
    x = as_float_batch("x", x, model)
    n_steps = check_int("n_steps", n_steps, minimum=1)
    if internal_batch_size is not None:
        internal_batch_size = check_int("internal_batch_size", internal_batch_size, minimum=1)
    base = _baseline(baseline, x)
    scores = class_scores(model)
    with evaluating(model):
        targets = resolve_targets(scores, (x,), target)
        attributions = IntegratedGradients(scores).attribute(
            x, baselines=base, target=targets, n_steps=n_steps, internal_batch_size=internal_batch_size)
    return to_numpy(attributions)


def saliency_map(model: nn.Module, x: Any, target: Any = None) -> np.ndarray:
    """Gradient saliency ``|d score_target / d x|``, same shape as ``x`` (non-negative).

    Captum's ``Saliency`` (Simonyan et al., the paper's reference "saliency"): how strongly an
    infinitesimal change of each input value moves the target-class score."""
    x = as_float_batch("x", x, model)
    scores = class_scores(model)
    with evaluating(model):
        targets = resolve_targets(scores, (x,), target)
        # A fresh leaf that already requires grad: Captum would otherwise flip requires_grad on
        # the caller's tensor and warn that it did.
        grads = Saliency(scores).attribute(x.clone().requires_grad_(), target=targets, abs=True)
    return to_numpy(grads)
