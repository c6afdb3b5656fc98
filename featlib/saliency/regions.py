"""Share of an attribution map inside a region: the number behind "looks at the patch" (Figs. 4-5).

In the paper's ColoredMNIST-025 figures the shortcut is "a colored patch at the up left"; a
model relying on it has its GradCAM mass in that corner, a model relying on the digit has it
in the centre. :func:`region_share` turns that reading into a number per example, so a
chapter can report "ERM puts 70% of its GradCAM mass on the patch, FeAT 10%" rather than
only show the pictures.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import check_int

__all__ = ["absolute_region_share", "dilate_mask", "region_share"]


def _check_mask(mask: Any, spatial: tuple[int, ...]) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != spatial:
        raise ValueError(f"mask must be a boolean array of shape {spatial} (the maps' H, W); "
                         f"got dtype {mask.dtype} and shape {mask.shape}")
    return mask


def region_share(maps: Any, mask: Any) -> np.ndarray:
    """Per example, the fraction of a non-negative map's mass inside ``mask``: ``(n,)`` in [0, 1].

    ``maps``: ``(n, H, W)`` non-negative attributions (GradCAM maps, ``saliency_map`` output
    summed over channels); ``mask``: boolean ``(H, W)``. 1 means all evidence lies in the
    region, 0 none of it; an all-zero map (no evidence anywhere, e.g. a GradCAM map whose ReLU
    removed everything) gives 0, never NaN. Signed maps: use :func:`absolute_region_share`."""
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 3:
        raise ValueError(f"maps must have shape (n, H, W); got shape {maps.shape}")
    if not np.isfinite(maps).all():
        raise ValueError("maps must be finite (no NaN or inf)")
    if (maps < 0).any():
        raise ValueError("maps must be non-negative (GradCAM or saliency maps); for signed attributions "
                         "such as integrated gradients use absolute_region_share")
    mask = _check_mask(mask, maps.shape[1:])
    total = maps.reshape(len(maps), -1).sum(1)
    inside = maps[:, mask].sum(1)
    return np.divide(inside, total, out=np.zeros_like(total), where=total > 0)


def absolute_region_share(maps: Any, mask: Any) -> np.ndarray:
    """:func:`region_share` of ``|maps|``; ``(n, C, H, W)`` maps are first summed over channels.

    For signed attributions (integrated gradients): evidence for and against the class both
    count as "the model reads this region"."""
    maps = np.abs(np.asarray(maps, dtype=float))
    if maps.ndim == 4:
        maps = maps.sum(1)
    if maps.ndim != 3:
        raise ValueError(f"maps must have shape (n, H, W) or (n, C, H, W); got shape {maps.shape}")
    return region_share(maps, mask)


def dilate_mask(mask: Any, margin: int) -> np.ndarray:
    """``mask`` grown by ``margin`` pixels in every direction (a square structuring element).

    GradCAM maps live on a coarse feature grid that is then upsampled, so their mass spills a
    pixel or two past a region's edge (a 3x3 convolution's reach plus the interpolation); a
    region share is then measured on the dilated mask, and the margin reported with it."""
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.ndim != 2:
        raise ValueError(f"mask must be a 2-D boolean array; got dtype {mask.dtype} and shape {mask.shape}")
    margin = check_int("margin", margin, minimum=0)
    out = mask.copy()
    rows, cols = np.nonzero(mask)
    height, width = mask.shape
    for r, c in zip(rows, cols):
        out[max(r - margin, 0):min(r + margin + 1, height), max(c - margin, 0):min(c + margin + 1, width)] = True
    return out
