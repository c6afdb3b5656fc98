"""Drawing the paper's saliency figures: GradCAM triples (Figs. 4-5, 9-12) and token colouring (Figs. 6-8).

Computing lives in :mod:`featlib.saliency.attribution` and :mod:`featlib.saliency.text`; these
functions only draw. Figures are built as ``matplotlib.figure.Figure`` objects, never through
pyplot's global state, and returned (or drawn into the caller's axes); Jupyter's inline backend
displays a returned Figure. Token colourings are HTML strings, wrapped by
:class:`HighlightedText` so that a notebook cell (and so Jupyter Book) renders them.
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from .. import style

__all__ = ["HighlightedText", "POSITIVE_RGB", "NEGATIVE_RGB", "add_map_colourbar", "highlight_tokens",
           "normalise_maps", "plot_gradcam_triples", "plot_overlay_grid", "render_token_attributions", "to_rgb",
           "token_figure", "token_scale"]

POSITIVE_RGB = (0, 160, 0)  # green: evidence for the target class (Figs. 6-8)
NEGATIVE_RGB = (220, 0, 0)  # red: evidence for the other classes
OVERLAY_ALPHA = 0.5
TRIPLE_TITLES = ("image", "GradCAM", "overlay")
#: The paper's overlay colour map (Figs. 4-5, 9-12); its colour bar is drawn with every figure.
OVERLAY_CMAP = "jet"
#: Side of one image cell of a grid, in inches (the grid is never wider than the book's column).
CELL_IN = 1.05


def add_map_colourbar(figure: Figure, axes: Any, label: str = "saliency (each map scaled to [0, 1])",
                      cmap: str = OVERLAY_CMAP) -> None:
    """The colour scale of the maps: 0 (least salient) to 1 (most), along the right of ``axes``."""
    bar = figure.colorbar(ScalarMappable(Normalize(0.0, 1.0), colormaps[cmap]), ax=axes, shrink=0.6,
                          fraction=0.05, pad=0.02)
    bar.set_label(label, fontsize=style.MIN_TEXT_PT)
    bar.ax.tick_params(labelsize=style.MIN_TEXT_PT)


def _grid_size(rows: int, columns: int, extra_width: float = 0.9) -> tuple[float, float]:
    """A grid of square image cells that fits the column, with room for a colour bar."""
    cell = min(CELL_IN, (style.COLUMN_WIDTH - extra_width) / columns)
    return columns * cell + extra_width, rows * cell + 0.5


def to_rgb(images: Any) -> np.ndarray:
    """``(n, C, H, W)`` images in [0, 1] -> ``(n, H, W, 3)`` RGB for ``imshow``.

    C = 1: grey; C = 2: ColoredMNIST's red and green channels with blue 0; C = 3: RGB."""
    images = np.asarray(images, dtype=float)
    if images.ndim != 4 or images.shape[1] not in (1, 2, 3):
        raise ValueError(f"images must have shape (n, C, H, W) with C in 1, 2, 3; got shape {images.shape}")
    if not np.isfinite(images).all() or images.min() < -1e-6 or images.max() > 1 + 1e-6:
        raise ValueError("images must take values in [0, 1] (undo any normalisation before plotting); got range "
                         f"[{np.nanmin(images):.3g}, {np.nanmax(images):.3g}]")
    images = np.clip(images, 0.0, 1.0)
    if images.shape[1] == 1:
        images = np.repeat(images, 3, axis=1)
    elif images.shape[1] == 2:
        images = np.concatenate([images, np.zeros_like(images[:, :1])], axis=1)
    return images.transpose(0, 2, 3, 1)


def normalise_maps(maps: Any) -> np.ndarray:
    """Each ``(H, W)`` map of ``(n, H, W)`` rescaled to [0, 1] by its own min and max (a constant map -> 0).

    Display only: GradCAM's scale differs between examples and models, its shape is what the
    figures compare."""
    maps = np.asarray(maps, dtype=float)
    if maps.ndim != 3 or not np.isfinite(maps).all():
        raise ValueError(f"maps must be finite with shape (n, H, W); got shape {maps.shape}")
    low = maps.min(axis=(1, 2), keepdims=True)
    span = maps.max(axis=(1, 2), keepdims=True) - low
    return np.divide(maps - low, span, out=np.zeros_like(maps), where=span > 0)


def plot_gradcam_triples(images: Any, maps: Any, *, row_labels: Sequence[str] | None = None,
                         col_title: str | None = None, axes: Any = None) -> Figure:
    """The paper's GradCAM triple per example, one row each: image, map in grey, map over the image.

    Figs. 4-5 show, for each ColoredMNIST-025 sample, "the original figure, the gray-colored
    gradcam, and the gradcam" (overlaid with the jet colormap). ``images`` ``(n, C, H, W)`` in
    [0, 1] (see :func:`to_rgb`); ``maps`` ``(n, H, W)``, each normalised to [0, 1] for display
    (white / red = most salient). ``row_labels`` label the rows (e.g. "label 1, pred 0");
    ``col_title`` heads the triple (e.g. "ERM, 300 epochs"). ``axes``: an ``(n, 3)`` array of
    Axes to draw into (to put ERM and FeAT side by side in one figure); by default a new
    Figure is made. Returns the Figure."""
    rgb = to_rgb(images)
    shown = normalise_maps(maps)
    n = len(rgb)
    if shown.shape != rgb.shape[:3]:
        raise ValueError(f"maps must have shape {rgb.shape[:3]} (one (H, W) map per image); got {shown.shape}")
    if row_labels is not None and (isinstance(row_labels, str) or len(row_labels) != n):
        raise ValueError(f"row_labels must be a list of {n} strings (one per image); got {row_labels!r}")
    own = axes is None
    if own:
        figure = Figure(figsize=_grid_size(n, 3), layout="constrained")
        axes = figure.subplots(n, 3, squeeze=False)
    else:
        grid = np.asarray(axes, dtype=object)
        if grid.size != 3 * n:
            raise ValueError(f"axes must hold {n} x 3 Axes (one row per image); got {grid.size}")
        axes = grid.reshape(n, 3)
        figure = axes[0, 0].figure
    jet = colormaps[OVERLAY_CMAP]
    for row in range(n):
        ax_image, ax_map, ax_overlay = axes[row]
        ax_image.imshow(rgb[row], interpolation="nearest")
        ax_map.imshow(shown[row], cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
        ax_overlay.imshow(rgb[row], interpolation="nearest")
        ax_overlay.imshow(jet(shown[row]), alpha=OVERLAY_ALPHA, interpolation="nearest")
        for ax in axes[row]:
            ax.set_xticks([])
            ax.set_yticks([])
        if row_labels is not None:
            ax_image.set_ylabel(str(row_labels[row]), fontsize=style.MIN_TEXT_PT)
    for ax, title in zip(axes[0], TRIPLE_TITLES):
        if col_title:  # the triple's heading over its middle axes, the other titles pushed down to match
            title = f"{col_title}\n{title}" if title == "GradCAM" else f"\n{title}"
        ax.set_title(title, fontsize=9)
    if own:
        add_map_colourbar(figure, axes)
    return figure


def _rgba(score: float, scale: float) -> str:
    rgb = POSITIVE_RGB if score >= 0 else NEGATIVE_RGB
    alpha = 0.0 if scale <= 0 else min(abs(score) / scale, 1.0)
    return f"rgba({rgb[0]}, {rgb[1]}, {rgb[2]}, {alpha:.3f})"


def render_token_attributions(tokens: Sequence[str], scores: Any, *, label: Any = None, prediction: Any = None) -> str:
    """HTML of ``tokens`` with backgrounds coloured by ``scores``, as in Figs. 6-8.

    Green (:data:`POSITIVE_RGB`) for evidence for the target class, red (:data:`NEGATIVE_RGB`)
    against; opacity ``|score| / max |score|`` over this text, so the strongest token is fully
    coloured and a zero score is transparent. Text is HTML-escaped; WordPiece continuations
    (``##ing``) are joined to the previous piece without a space and without the ``##``. Each
    piece's score shows as a tooltip. ``label``/``prediction`` (Table 13's columns) head the line."""
    tokens = list(tokens)
    scores = np.asarray(scores, dtype=float)
    if any(not isinstance(token, str) for token in tokens):
        raise ValueError("tokens must be a list of strings (decode_tokens output)")
    if scores.shape != (len(tokens),) or not np.isfinite(scores).all():
        raise ValueError(f"scores must be {len(tokens)} finite numbers, one per token; got shape {scores.shape}")
    scale = float(np.abs(scores).max()) if len(scores) else 0.0
    pieces = []
    for index, (token, score) in enumerate(zip(tokens, scores)):
        continuation = token.startswith("##") and len(token) > 2 and index > 0
        text = token[2:] if continuation else token
        span = (f'<span style="background-color: {_rgba(score, scale)}; padding: 1px 0; border-radius: 2px" '
                f'title="{score:+.4g}">{html.escape(text)}</span>')
        pieces.append(span if continuation or index == 0 else " " + span)
    header = []
    if label is not None:
        header.append(f"<b>label:</b> {html.escape(str(label))}")
    if prediction is not None:
        header.append(f"<b>prediction:</b> {html.escape(str(prediction))}")
    head = f'<div style="font-size: 0.85em; color: #555">{" &middot; ".join(header)}</div>' if header else ""
    return f'<div class="token-attributions" style="margin: 0.4em 0; line-height: 1.8">{head}{"".join(pieces)}</div>'


@dataclass(frozen=True)
class HighlightedText:
    """HTML that a notebook cell displays (``_repr_html_``); ``a + b`` stacks two blocks."""

    html: str

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html

    def __add__(self, other: HighlightedText) -> HighlightedText:
        if not isinstance(other, HighlightedText):
            return NotImplemented
        return HighlightedText(self.html + other.html)

    @classmethod
    def join(cls, blocks: Sequence[HighlightedText]) -> HighlightedText:
        """Several blocks (e.g. one per example, or ERM / Bonsai / FeAT) shown one under another."""
        return cls("".join(block.html for block in blocks))


def highlight_tokens(tokens: Sequence[str], scores: Any, *, label: Any = None,
                     prediction: Any = None) -> HighlightedText:
    """:func:`render_token_attributions` wrapped for display in a notebook cell."""
    return HighlightedText(render_token_attributions(tokens, scores, label=label, prediction=prediction))


def plot_overlay_grid(images: Any, maps: dict[str, Any], *, cell_titles: dict[str, Sequence[str]] | None = None,
                      row_labels: Sequence[str] | None = None, image_title: str = "image") -> Figure:
    """One row per example: the image, then each model's map overlaid on it (one column per model).

    The compact companion of :func:`plot_gradcam_triples` for comparing several models on the
    same examples (ERM after 150 / 300 / 450 epochs, Bonsai, FeAT; or the WILDS methods of
    Figs. 9-12). ``maps``: model name -> ``(n, H, W)``; ``cell_titles``: model name -> one title
    per example (e.g. the model's prediction); by default the model name heads its column."""
    rgb = to_rgb(images)
    n, names = len(rgb), list(maps)
    shown = {name: normalise_maps(m) for name, m in maps.items()}
    for name, m in shown.items():
        if m.shape != rgb.shape[:3]:
            raise ValueError(f"maps[{name!r}] must have shape {rgb.shape[:3]}; got {m.shape}")
    if row_labels is not None and len(row_labels) != n:
        raise ValueError(f"row_labels must be a list of {n} strings (one per image); got {row_labels!r}")
    figure = Figure(figsize=_grid_size(n, 1 + len(names)), layout="constrained")
    axes = figure.subplots(n, 1 + len(names), squeeze=False)
    jet = colormaps[OVERLAY_CMAP]
    for row in range(n):
        axes[row, 0].imshow(rgb[row], interpolation="nearest")
        if row_labels is not None:
            axes[row, 0].set_ylabel(str(row_labels[row]), fontsize=style.MIN_TEXT_PT)
        for col, name in enumerate(names, start=1):
            axes[row, col].imshow(rgb[row], interpolation="nearest")
            axes[row, col].imshow(jet(shown[name][row]), alpha=OVERLAY_ALPHA, interpolation="nearest")
            if cell_titles is not None and name in cell_titles:
                axes[row, col].set_title(str(cell_titles[name][row]), fontsize=style.MIN_TEXT_PT)
        for ax in axes[row]:
            ax.set_xticks([])
            ax.set_yticks([])
    if cell_titles is None:
        axes[0, 0].set_title(image_title, fontsize=9)
        for col, name in enumerate(names, start=1):
            axes[0, col].set_title(name, fontsize=9)
    add_map_colourbar(figure, axes)
    return figure


def token_scale() -> str:
    """HTML of the token colouring's scale: red (against the predicted class) through white
    (no effect) to green (for it), opacity proportional to |score| / max |score| of the text."""
    neg, pos = NEGATIVE_RGB, POSITIVE_RGB
    gradient = (f"linear-gradient(to right, rgb({neg[0]}, {neg[1]}, {neg[2]}), rgba(255, 255, 255, 1), "
                f"rgb({pos[0]}, {pos[1]}, {pos[2]}))")
    return ('<div class="token-scale" style="display: flex; align-items: center; gap: 0.5em; font-size: 0.8em; '
            'color: #444; margin: 0.3em 0 0.6em 0">'
            "<span>against the predicted class</span>"
            f'<span style="display: inline-block; width: 10em; height: 0.9em; background: {gradient}; '
            'border: 1px solid #ccc"></span><span>for it</span>'
            "<span>(strength: the token's score over the text's largest)</span></div>")


def token_figure(blocks: HighlightedText, caption: str) -> HighlightedText:
    """Token colourings shown as a captioned figure, with their colour scale."""
    return HighlightedText(f'<figure class="feat-html-figure">{token_scale()}{blocks.html}'
                           f"<figcaption>{html.escape(caption)}</figcaption></figure>")
