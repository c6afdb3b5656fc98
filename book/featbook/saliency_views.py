"""How the saliency chapter (06) shows its results: the paper's figures, as wide as the book's
column with their colour scales, and tables of labelled, formatted measures.

The maps and scores come from :mod:`featlib.saliency` and the studies of
:mod:`featlib.experiments.saliency_cmnist` and :mod:`featlib.experiments.saliency_wilds`; this
module only draws them: GradCAM triples (Figs. 4-5, 9-12), overlay grids, and token colourings
(Figs. 6-8). :func:`plot_gradcam_triples` and :func:`plot_overlay_grid` build
``matplotlib.figure.Figure`` objects, never through pyplot's global state, and return them (or
draw into the caller's axes); Jupyter's inline backend displays a returned Figure. Token
colourings are HTML strings, wrapped by :class:`HighlightedText` so that a notebook cell (and so
Jupyter Book) renders them.
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from featbook import style
from featbook import prose
from featbook.tables import Table, table
from featlib.experiments.labels import LEARNER_LABELS
from featlib.saliency import normalise_maps

POSITIVE_RGB = (0, 160, 0)  # green: evidence for the target class (Figs. 6-8)
NEGATIVE_RGB = (220, 0, 0)  # red: evidence for the other classes
OVERLAY_ALPHA = 0.5
TRIPLE_TITLES = ("image", "GradCAM", "overlay")
#: The paper's overlay colour map (Figs. 4-5, 9-12); its colour bar is drawn with every figure.
OVERLAY_CMAP = "jet"
#: Side of one image cell of a grid, in inches (the grid is never wider than the book's column).
CELL_IN = 1.05

#: The measures of :meth:`SaliencyStudy.table` the chapter shows, with their headers.
MEASURES = {"model": "model", "epochs": "epochs", "rounds_kept": "rounds kept", "train_acc": "train acc.",
            "ood_acc": "OOD acc.", "colour_flip_rate": "flipped by a colour swap",
            "colour_share_ig": "IG share on colour", "colour_share_gradcam": "GradCAM share on colour"}


# -- drawing: GradCAM maps over images ------------------------------------------------------
def add_map_colourbar(figure: Figure, axes: Any = None, label: str = "saliency (each map scaled to [0, 1])",
                      cmap: str = OVERLAY_CMAP, cax: Any = None) -> None:
    """The colour scale of the maps: 0 (least salient) to 1 (most), along the right of ``axes``
    (taking room from them), or in the axes ``cax`` of its own."""
    mappable = ScalarMappable(Normalize(0.0, 1.0), colormaps[cmap])
    if cax is not None:
        bar = figure.colorbar(mappable, cax=cax)
    else:
        bar = figure.colorbar(mappable, ax=axes, shrink=0.6, fraction=0.05, pad=0.02)
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


# -- drawing: token colourings ---------------------------------------------------------------
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
    piece's score shows as a tooltip. ``label``/``prediction`` (Table 15's columns) head the line."""
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


# -- the chapter's tables and figures ---------------------------------------------------------
def _scale(x: float) -> str:
    """A multiplier as a reader writes it: "0.1", "0.001" (never "1e-05": then "1.0 × 10⁻⁵")."""
    text = f"{float(x):g}"
    return prose.scientific(x) if "e" in text else text


#: Multipliers of the paper's epochs (or steps) as a reader says them.
_FRACTIONS = {1.0: "all", 0.5: "half", 0.25: "a quarter", 0.2: "a fifth", 0.1: "a tenth", 0.05: "a twentieth",
              0.01: "a hundredth", 0.001: "a thousandth"}


def share_of_papers(scale: float, what: str = "epochs", whose: str = "the paper's") -> str:
    """A multiplier of the paper's training length in words: 1 -> "all the paper's epochs", 0.1 -> "a
    tenth of the paper's epochs", 0.3 -> "0.3 times the paper's epochs" (never "x 0.1" nor "1e-05")."""
    scale = float(scale)
    if scale == 1.0:
        return f"all {whose} {what}"
    if scale in _FRACTIONS:
        return f"{_FRACTIONS[scale]} of {whose} {what}"
    return f"{_scale(scale)} times {whose} {what}"


def run_size(protocol) -> str:
    """The size of chapter 06's own ColoredMNIST run as its captions and titles give it:
    "1,000 training images, a tenth of the paper's epochs" (a
    :class:`~featlib.experiments.saliency_cmnist.SaliencyProtocol`)."""
    return f"{prose.integer(protocol.n_train)} training images, {share_of_papers(protocol.epoch_scale)}"


def wilds_run_label(data_title: str, backbone: str, protocol) -> str:
    """How chapter 06's captions and titles name its own run on a WILDS dataset: the dataset with
    its kind of data (``data_title``: "Camelyon17 (fabricated data)"), then "this run" and its size:
    the backbone's name (the first words of its description, ``backbone``), the share of
    Table 12's steps (:func:`share_of_papers`) and the seed explained, from a
    :class:`~featlib.experiments.wilds_experiment.WildsProtocol`."""
    name = backbone.split(" (")[0].split(", ")[0].strip() if backbone else ""
    steps = share_of_papers(protocol.epoch_scale, "feature-learning steps", "Table 12's")
    size = ([name] if name else []) + [steps, f"seed {protocol.seed_list[0]}"]
    return f"{data_title}, this run ({', '.join(size)})"


def _title(figure: Figure, title: str, fontsize: float = 9) -> None:
    """``title`` over ``figure``, wrapped to its width (about 14 characters an inch at 9 pt), the
    figure made taller by the lines it takes."""
    import textwrap

    width, height = figure.get_size_inches()
    lines = textwrap.wrap(title, max(20, int(width * 14 * 9 / fontsize)))
    figure.set_size_inches(width, height + 0.2 * len(lines))
    figure.suptitle("\n".join(lines), fontsize=fontsize)


def history_table(history: pd.DataFrame, size: str | None = None) -> Table:
    """The trained models: epochs (and FeAT's rounds) and accuracies, formatted; ``size``
    (:func:`run_size`) names the run in the caption."""
    formats = {c: prose.percent for c in history.columns if c.endswith("acc") or "_acc" in c}
    formats |= {c: (lambda v: prose.integer(int(v))) for c in ("epochs", "rounds_kept") if c in history}
    caption = f"The models of this run ({size})" if size else "The models of this study"
    return table(history, caption=caption, formats=formats,
                 columns={c: c.replace("_", " ") for c in history.columns})


def measures_table(frame: pd.DataFrame, size: str | None = None) -> Table:
    """Per model: accuracies, the colour-swap flip rate and the shares of attribution on colour;
    ``size`` (:func:`run_size`) names the run in the caption."""
    shown = frame[[c for c in MEASURES if c in frame]]
    formats = {c: prose.percent for c in shown.columns if c not in ("model", "epochs", "rounds_kept")}
    formats |= {c: (lambda v: prose.integer(int(v))) for c in ("epochs", "rounds_kept") if c in shown}
    caption = f"This run ({size}): measured over the OOD test images" if size else "Measured over the OOD test images"
    return table(shown, caption=caption, formats=formats, columns=MEASURES)


def triples_figure(images, maps: dict, predictions: pd.DataFrame, pair: list[str], n_show: int,
                   title: str | None = None):
    """The triple of the paper's Fig. 4 (image, map, overlay) for two models side by side, one
    colour bar in a narrow column of its own (so both models' cells are the same size and on the
    same rows); ``title`` over both (the run and its size)."""
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(style.COLUMN_WIDTH, 1.0 * n_show + 0.7), layout="constrained")
    if title:
        _title(figure, title)
    blocks = figure.subfigures(1, 3, width_ratios=[1, 1, 0.26])
    for block, name in zip(blocks, pair):
        axes = block.subplots(n_show, 3, squeeze=False)
        rows = [f"y={y}, pred {p}" for y, p in zip(predictions["label"], predictions[name])]
        plot_gradcam_triples(images, maps[name], row_labels=rows, col_title=name, axes=axes)
    # placed by hand (outside the layout engine): the bar's middle 60% of the height, ticks and label beside it
    add_map_colourbar(blocks[2], cax=blocks[2].add_axes((0.04, 0.2, 0.14, 0.6)))
    return figure


def pick_rows(predictions: pd.DataFrame, pair: Sequence[str], n: int) -> list[int]:
    """Which images a triple figure shows, by a rule on the data rather than by hand: the first
    image of each label, then the first on which the two models of ``pair`` disagree, then the next
    images in order until there are ``n`` (fewer when there are fewer images); in image order."""
    chosen: list[int] = []
    for y in sorted(predictions["label"].unique()):
        chosen.append(int(np.flatnonzero(predictions["label"].to_numpy() == y)[0]))
    disagree = np.flatnonzero(predictions[pair[0]].to_numpy() != predictions[pair[1]].to_numpy())
    if len(disagree) and not set(disagree.tolist()) & set(chosen):
        chosen.append(int(disagree[0]))
    chosen = chosen[:n]
    rest = (i for i in range(len(predictions)) if i not in chosen)
    while len(chosen) < min(n, len(predictions)):
        chosen.append(next(rest))
    return sorted(chosen)


def rows_note(predictions: pd.DataFrame, pair: Sequence[str], rows: Sequence[int]) -> str:
    """What the chosen ``rows`` (:func:`pick_rows`) hold, for the text under a triple figure: how many
    of each label, and on how many the two models of ``pair`` disagree (none: the rule found no
    disagreement among the images it looked at)."""
    shown = predictions.iloc[list(rows)]
    labels = prose.listing([f"{int((shown['label'] == y).sum())} of label {y}"
                            for y in sorted(shown["label"].unique())])
    disagree = int((shown[pair[0]] != shown[pair[1]]).sum())
    looked = len(predictions)
    return (f"The rows are {labels}; the two models disagree on {disagree} of them"
            + ("" if disagree else f" (they agree on all {looked} images the rule looked at)") + ".")


def committed_studies(located) -> dict:
    """The committed saliency studies that load, the largest first, each with its ``-maps`` study
    when one was committed (``found["maps"]``)."""
    from featbook import committed
    from featlib.experiments.gap_studies import SALIENCY_STUDIES
    from featlib.experiments.results import load_study

    studies = {}
    for name in SALIENCY_STUDIES:
        found = committed.load(located, load_study, name)
        if found is not None:
            studies[name] = dict(found, maps=committed.load(located, load_study, f"{name}-maps"))
    return studies


def study_size(found: dict) -> str:
    """A committed study's size in words: its training images and its form."""
    from featlib.experiments.gap_studies import saliency_summary

    n = int(saliency_summary(found["frame"])["n_train"].iloc[0])
    return f"{prose.integer(n)} training images" + (study_form(found["frame"]) or
                                                     ", the paper's CNN on the colour-patch images")


def show_study(name: str, found: dict) -> None:
    """A committed study as chapter 06 shows it: its table of measures (mean ± std over the
    seeds), how it was made folded under it, and what it shows (:func:`direction_sentence`,
    :func:`erm_trend_sentence`)."""
    from IPython.display import HTML, Markdown, display

    from featbook import evidence
    from featlib.experiments.gap_studies import saliency_direction, saliency_summary

    summary = saliency_summary(found["frame"])
    display(committed_table(summary))
    display(HTML(evidence.made_by(evidence.provenance_line(f"The study `{name}`", found["provenance"],
                                                           study_size(found)), found["provenance"])))
    display(Markdown(direction_sentence(saliency_direction(found["frame"]), int(summary["n_train"].iloc[0]),
                                        study_form(found["frame"])) + " " + erm_trend_sentence(summary)))


def short_name(model: str) -> str:
    """"ERM 150 epochs" -> "ERM 150", "FeAT 2 rounds" -> "FeAT": column heads of a narrow grid."""
    return model.replace(" epochs", "").replace(" rounds", " r.").replace("FeAT 2 r.", "FeAT")


def overlay_figure(images, maps: dict, predictions: pd.DataFrame, head=short_name, title: str | None = None):
    """Every model's map over the same images: one column per model (its name, shortened by
    ``head``, over the first row), each cell titled by the model's prediction (``predictions``: a
    column per model, and ``label``); the true label labels the row; ``title`` over the grid."""
    titles = {name: [(f"{head(name)}\n" if i == 0 else "") + f"pred {p}"
                     for i, p in enumerate(predictions[name])] for name in maps}
    figure = plot_overlay_grid(images, maps, cell_titles=titles, row_labels=[f"label {y}" for y in predictions["label"]])
    if title:
        _title(figure, title)
    return figure


def wilds_overlay_figure(result, title: str | None = None):
    """A WILDS image dataset's explanations (:func:`featlib.experiments.saliency_wilds.explain_wilds`):
    rows the examples, columns the input, then each learner's GradCAM overlaid (the learner named
    over the first row), each cell titled by the learner's prediction; ``title`` over the grid."""
    maps = {LEARNER_LABELS[m]: result.maps[m] for m in result.learners}
    return overlay_figure(result.images, maps, result.table, head=lambda name: name.replace(" (all sets)", ""),
                          title=title)


def shares_figure(frame: pd.DataFrame, title: str | None = None):
    """Share of attribution on colour (top), colour-swap flip rate and OOD accuracy (bottom);
    ``title`` over the panels (the run and its size)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplot_mosaic([["share", "share"], ["flip", "ood"]], figsize=(style.COLUMN_WIDTH, 5.6),
                                   layout="constrained")
    if title:
        _title(fig, title, fontsize=10)
    measures = [("colour_share_ig", "integrated gradients")]
    if "colour_share_gradcam" in frame:
        measures.append(("colour_share_gradcam", "GradCAM"))
    width = 0.8 / len(measures)
    x = np.arange(len(frame))
    for i, (column, label) in enumerate(measures):
        axes["share"].bar(x + i * width, frame[column], width, yerr=frame[f"{column}_std"], label=label,
                          color=style.PALETTE[i])
    axes["share"].set_xticks(x + width * (len(measures) - 1) / 2, frame["model"])
    axes["share"].set_ylabel("share on colour")
    axes["share"].set_title("attribution on colour (mean and std over the images)")
    axes["share"].legend(loc="upper right")
    axes["flip"].bar(x, frame["colour_flip_rate"], color=style.PALETTE[3])
    axes["flip"].set(ylabel="share flipped", title="predictions flipped by a colour swap", ylim=(0, 1))
    axes["ood"].bar(x, frame["ood_acc"], color=style.PALETTE[2])
    axes["ood"].set(ylabel="accuracy", title="OOD test accuracy\n(colour agrees with the label 10% of the time)", ylim=(0, 1))
    for key in ("flip", "ood"):
        axes[key].set_xticks(x, frame["model"], rotation=35, ha="right")
    return fig


def prediction_table(result, caption: str) -> Table:
    """Table 15's layout: each explained example's label and each model's prediction."""
    return table(result.table, caption=caption, columns={"example": "example (index in the split)"})


def highlighted_example(result, i: int) -> HighlightedText:
    """Example ``i`` of a WILDS text dataset's explanations
    (:func:`featlib.experiments.saliency_wilds.explain_wilds`) as coloured tokens, one line per
    learner (green: for the predicted class)."""
    label = result.table.iloc[i]["label"]
    return HighlightedText.join([
        highlight_tokens(result.tokens[i], result.scores[m][i], label=label,
                         prediction=f"{LEARNER_LABELS[m]}: {result.table.iloc[i][LEARNER_LABELS[m]]}")
        for m in result.learners])


def token_figures(result, caption: str | None = None, title: str | None = None) -> HighlightedText:
    """Every explained text example as coloured tokens, one line per model, with the colour scale
    and ``title`` over them: one captioned figure of its own when ``caption`` is given, else a block
    for a notebook cell whose figure options give the caption (and the figure's number)."""
    blocks = HighlightedText.join([highlighted_example(result, i) for i in range(len(result.table))])
    head = f'<div class="token-title" style="font-weight: 600">{html.escape(title)}</div>' if title else ""
    if caption is None:
        return HighlightedText(f'<div class="feat-html-figure">{head}{token_scale()}{blocks.html}</div>')
    return HighlightedText(f'<figure class="feat-html-figure">{head}{token_scale()}{blocks.html}'
                           f"<figcaption>{html.escape(caption)}</figcaption></figure>")


# -- the committed full-size study (results/saliency, gap_studies saliency) ---------------------
def committed_maps(maps: pd.DataFrame, seed: int, image_size: tuple[int, int]) -> tuple[dict, pd.DataFrame]:
    """A committed ``saliency-maps`` study's seed as :func:`triples_figure` and
    :func:`overlay_figure` take it: each model's GradCAM maps brought from their coarse grid to
    the image (:func:`featlib.saliency.upsample_maps`), in the study's model order, and per image
    its label, colour and each model's prediction."""
    from featlib.saliency import upsample_maps

    part = maps[maps["seed"] == seed]
    drawn, predictions = {}, None
    for name, rows in part.groupby("model", sort=False):
        rows = rows.sort_values(["image", "row", "col"])
        n, h, w = rows["image"].nunique(), int(rows["row"].max()) + 1, int(rows["col"].max()) + 1
        drawn[name] = upsample_maps(rows["gradcam"].to_numpy(dtype=float).reshape(n, h, w), image_size)
        per_image = rows.drop_duplicates("image")
        if predictions is None:
            predictions = per_image[["label", "colour"]].reset_index(drop=True).astype(int)
        predictions[name] = per_image["prediction"].to_numpy(dtype=int)
    return drawn, predictions


def erm_trend(summary: pd.DataFrame) -> tuple[str, list[str]]:
    """What longer ERM training does to the colour measures of a committed study
    (:func:`featlib.experiments.gap_studies.saliency_summary`), from ERM's shortest to its longest
    training, a change counted only where it exceeds the larger of the two seed stds: "towards" (every
    measure moves towards colour, the paper's remark that ERM forgets features), "mixed", "away" or
    "within" (the seeds' spread), with each measure's move as a phrase; ("", []) without two ERM
    snapshots. :func:`erm_trend_sentence` (chapter 06) and the claims table read it."""
    erm = summary[summary["model"].str.startswith("ERM ")]
    if len(erm) < 2:
        return "", []
    first, last = erm.iloc[0], erm.iloc[-1]
    moves, parts = [], []
    labels = {"colour_flip_rate": "the colour-swap flip rate", "colour_share_ig": "the IG share on colour",
              "colour_share_gradcam": "the GradCAM share on colour"}
    for measure, label in labels.items():
        if measure not in summary:
            continue
        change = float(last[measure] - first[measure])
        noise = max(float(first[f"{measure}_std"]), float(last[f"{measure}_std"]))
        moves.append(0 if abs(change) <= noise else (1 if change > 0 else -1))
        parts.append(f"{label} goes from {prose.percent(first[measure])} to {prose.percent(last[measure])}")
    if not moves:
        return "", []
    trend = ("towards" if all(m > 0 for m in moves) else "mixed" if any(m > 0 for m in moves)
             else "away" if any(m < 0 for m in moves) else "within")
    return trend, parts


def erm_trend_sentence(summary: pd.DataFrame) -> str:
    """What longer ERM training does in a committed study (:func:`featlib.experiments.gap_studies.saliency_summary`),
    set against the paper's remark that ERM "even forgets certain features with longer training"
    (Sec. 6, Fig. 4): each colour measure from ERM's shortest to its longest training, the change
    counted only where it exceeds the larger of the two seed stds (:func:`erm_trend`), and whether the
    study shows ERM leaning on colour more with more epochs. Empty without two ERM snapshots."""
    trend, parts = erm_trend(summary)
    if not trend:
        return ""
    erm = summary[summary["model"].str.startswith("ERM ")]
    first, last = erm.iloc[0], erm.iloc[-1]
    said = {"towards": "ERM leans on colour more with longer training, as the paper's remark says",
            "mixed": "the measures disagree on whether longer training moves ERM towards colour",
            "away": ("longer training moves ERM a little away from colour, not towards it: this study does not show "
                     "the paper's remark that ERM forgets features with longer training"),
            "within": ("ERM's reliance on colour stays within the seeds' spread: this study does not show the paper's "
                       "remark that ERM forgets features with longer training")}[trend]
    return (f"From {first['model']} to {last['model']}: " + prose.listing(parts) + f" (means over the seeds); {said}.")


def study_form(frame: pd.DataFrame) -> str:
    """The form a committed ``saliency`` study takes, as a phrase to follow its size: empty for the
    paper's (the CNN on the colour-patch images, with GradCAM), else the form a CPU carries (Table
    2's MLP on the two-channel images, which has no convolution for GradCAM). Chapter 06 and the
    claims table both say it this way."""
    return "" if "colour_share_gradcam" in frame else ", Table 2's MLP on the two-channel images"


def committed_table(summary: pd.DataFrame) -> Table:
    """A committed ``saliency`` study (:func:`featlib.experiments.gap_studies.saliency_summary`):
    per model, each measure's mean ± std over the seeds."""
    from featlib.experiments.gap_studies import SALIENCY_MEASURES

    shown = pd.DataFrame({"model": summary["model"]})
    for measure in [m for m in SALIENCY_MEASURES if m in summary]:
        shown[MEASURES[measure]] = [f"{prose.percent(m)} ± {prose.number(100 * s, 1)}"
                                    for m, s in zip(summary[measure], summary[f"{measure}_std"])]
    n, seeds = int(summary["n_train"].iloc[0]), int(summary["n_seeds"].min())
    from featlib.experiments.labels import DATASET_LABELS

    dataset = DATASET_LABELS.get(summary["dataset"].iloc[0], summary["dataset"].iloc[0]) if "dataset" in summary else ""
    form = "Table 2's MLP on the two-channel images" if "colour_share_gradcam" not in summary else "the paper's CNN"
    return table(shown, caption=f"{dataset + ', ' if dataset else ''}{prose.integer(n)} training images, "
                                f"{prose.count(seeds, 'seed')} ({form})",
                 note="Mean ± std over the seeds (percentage points), each seed's value itself a mean over "
                      "its OOD test images.")


def direction_sentence(direction: pd.DataFrame, n_train: int, form: str = "") -> str:
    """Whether FeAT's features lean on colour less than ERM's longest-trained snapshot, seed by
    seed and measure by measure (:func:`featlib.experiments.gap_studies.saliency_direction`):
    the sentence that says what the committed study shows, and whether it ranks. ``form``
    (:func:`study_form` of the study) says when the study is not the paper's CNN, so that the
    sentence does not stand for the paper's GradCAM figure."""
    if direction.empty:
        return "The committed study has no FeAT and ERM pair to compare."
    seeds = direction["seed"].nunique()
    parts = []
    for measure, part in direction.groupby("measure", sort=False):
        held = int(part["holds"].sum())
        parts.append(f"{MEASURES[measure]}: FeAT below {part['erm_model'].iloc[0]} in {held} of {len(part)} seeds "
                     f"(FeAT minus ERM {prose.number(part['feat_minus_erm'].mean(), 1, True)} points on average)")
    held, pairs = int(direction["holds"].sum()), len(direction)
    verdict = ("The direction of the paper's Fig. 4 holds in every seed and measure" if held == pairs else
               f"The direction of the paper's Fig. 4 holds in {held} of {pairs} (seed, measure) pairs, not in all")
    size = f"at {prose.integer(n_train)} training images over {prose.count(seeds, 'seed')}"
    if form:  # not the paper's CNN: say which measures carry the direction
        size += (" in Table 2's MLP form (by the measures it has; the paper's figure is GradCAM of a CNN on the "
                 "colour-patch images)")
    rank = "" if seeds >= 3 else "; with fewer than 3 seeds it ranks nothing"
    return f"{verdict} {size}{rank}. " + "; ".join(parts) + "."


# -- chapter 06's reading of its evidence, in its own words -------------------------------------
def _form_and_size(found: dict) -> str:
    """"the MLP on two-channel images at 50,000 training images": a study's form and size."""
    from featlib.experiments.gap_studies import saliency_summary

    n = int(saliency_summary(found["frame"])["n_train"].iloc[0])
    form = ("Table 2's MLP on the two-channel images" if study_form(found["frame"])
            else "the paper's CNN on the colour-patch images")
    size = prose.integer(n) + " training images" + (" (the paper's size)" if n == PAPER_N_TRAIN else
                                                    f" (1/{PAPER_N_TRAIN // n} of the paper's)"
                                                    if n and PAPER_N_TRAIN % n == 0 else "")
    return f"{form} at {size}"


#: The paper's ColoredMNIST training set (Fig. 4 trains on all of it).
PAPER_N_TRAIN = 50000


def evidence_lead(studies: dict) -> str:
    """The first sentence of chapter 06's evidence: which forms the studies take, at which size
    and over how many seeds (:func:`committed_studies`), so that no heading has to."""
    from featlib.experiments.gap_studies import saliency_summary

    if not studies:
        return ""
    seeds = sorted({int(saliency_summary(f["frame"])["n_seeds"].min()) for f in studies.values()})
    over = prose.count(seeds[0], "seed") if len(seeds) == 1 else f"{prose.listing(map(str, seeds))} seeds"
    forms = [_form_and_size(f) for f in studies.values()]
    head = {1: "One study", 2: "Two studies", 3: "Three studies"}.get(len(forms), f"{len(forms)} studies")
    return f"{head}, each over {over}: " + prose.listing(forms) + "."


def evidence_verdict(studies: dict) -> tuple[str, str]:
    """Chapter 06's verdict in its own words, from its studies (:func:`committed_studies`):
    (whether ERM's snapshots show the paper's "forgetting", by the colour-swap flip rate from ERM's
    shortest to its longest training in each study, a rise counted only beyond the larger of the two
    seed stds; whether FeAT leans on colour less than ERM
    after its longest training, by the flip rate, in how many seeds of each study). The flip rate
    is the measure the chapter trusts. Without a study: that no verdict is given, and ""."""
    from featlib.experiments.gap_studies import saliency_direction, saliency_summary

    if not studies:
        return ("No study over several seeds could be read here, so this page gives no verdict of its own: "
                "the paper's Fig. 4 is the reference.", "")
    moves, shown, feat, lengths = [], [], [], None
    for found in studies.values():
        summary = saliency_summary(found["frame"])
        what = _short_form(found)
        erm = summary[summary["model"].str.startswith("ERM ")]
        if len(erm) >= 2 and "colour_flip_rate" in summary:
            lengths = lengths or (erm["model"].iloc[0][4:], erm["model"].iloc[-1][4:])
            first, last = erm.iloc[0], erm.iloc[-1]
            moves.append(f"{prose.percent(first['colour_flip_rate'])} to "
                         f"{prose.percent(last['colour_flip_rate'])} ({what})")
            # a rise counts only beyond the seeds' spread, as erm_trend counts it
            noise = max(first["colour_flip_rate_std"], last["colour_flip_rate_std"])
            shown.append(bool(last["colour_flip_rate"] - first["colour_flip_rate"] > noise))
        flips = saliency_direction(found["frame"])
        flips = flips[flips["measure"] == "colour_flip_rate"]
        if len(flips):
            feat.append((int(flips["holds"].sum()), len(flips), what))
    if not moves:
        forgetting = "The studies have no two ERM snapshots to compare, so they do not test ERM's forgetting."
    else:
        span = f"from {lengths[0]} to {lengths[1]} of ERM, the colour-swap flip rate goes from " + prose.listing(moves)
        if all(shown):
            forgetting = f"Both studies show ERM leaning on colour more with longer training: {span}." if len(
                shown) > 1 else f"The study shows ERM leaning on colour more with longer training: {span}."
        elif any(shown):
            forgetting = f"Only some of the studies show ERM leaning on colour more with longer training: {span}."
        else:
            who = "Neither study" if len(shown) == 2 else "No study" if len(shown) > 2 else "The study does not"
            verb = "shows" if who != "The study does not" else "show"
            forgetting = (f"{who} {verb} ERM forgetting the digit with longer training: {span}, so ERM "
                          "leans on colour no more after its longest training than after its shortest.")
    if not feat:
        return forgetting, "The studies have no FeAT and ERM pair to compare."
    parts = [f"in {held} of {n} seeds of {what}" for held, n, what in feat]
    every = all(held == n for held, n, _ in feat)
    lead = ("FeAT leans on colour less than ERM after its longest training" if every else
            "FeAT leans on colour less than ERM after its longest training only in some seeds")
    return forgetting, f"{lead}: a colour swap flips fewer of its predictions {prose.listing(parts)}."


def _short_form(found: dict) -> str:
    """"the MLP at 50,000 images" or "the CNN at 2,000 images": a study named by what it is."""
    from featlib.experiments.gap_studies import saliency_summary

    n = int(saliency_summary(found["frame"])["n_train"].iloc[0])
    return f"{'the MLP' if study_form(found['frame']) else 'the CNN'} at {prose.integer(n)} images"


def maps_title(found: dict, seed: int) -> str:
    """The title of chapter 06's figure of a study's maps: "2,000 training images, seed 1, the
    paper's CNN on the colour-patch images"."""
    from featlib.experiments.gap_studies import saliency_summary

    n = int(saliency_summary(found["frame"])["n_train"].iloc[0])
    form = study_form(found["frame"]).lstrip(", ") or "the paper's CNN on the colour-patch images"
    return f"{prose.integer(n)} training images, seed {seed}, {form}"


def peak_on_region(maps: Any, mask: Any) -> np.ndarray:
    """Per map ``(n, H, W)``: whether its brightest pixel lies inside ``mask`` ``(H, W)`` (False for an
    empty map)."""
    maps, mask = np.asarray(maps, dtype=float), np.asarray(mask, dtype=bool)
    flat = maps.reshape(len(maps), -1)
    peak = flat.argmax(axis=1)
    return mask.reshape(-1)[peak] & (flat.max(axis=1) > 0)


def maps_reading(maps: dict, predictions: pd.DataFrame, pair: Sequence[str], rows: Sequence[int],
                 mask: Any) -> str:
    """What the rows of a triple figure show, read from the maps: for each model of ``pair``, in how
    many of the shown images its map is brightest on the colour patch (``mask``, the patch grown as
    the GradCAM share grows it) rather than on the digit, then what the rows hold
    (:func:`rows_note`)."""
    rows = list(rows)
    counts = {name: int(peak_on_region(np.asarray(maps[name])[rows], mask).sum()) for name in pair}
    n = len(rows)
    a, b = (counts[name] for name in pair)
    if a == b:
        compare = "the two models do not differ here in where their maps peak"
    else:
        more, fewer = (pair[0], pair[1]) if a > b else (pair[1], pair[0])
        compare = f"the map of {more} sits on the patch more often than that of {fewer}"
    return (f"The brightest point of the map lies on the colour patch rather than on the digit in {a} of {n} "
            f"images for {pair[0]} and in {b} of {n} for {pair[1]}: {compare}. "
            + rows_note(predictions, pair, rows))


def wilds_check_note(explained: dict) -> str:
    """The one line chapter 06 shows for its WILDS part when the build has no WILDS data and the
    cell ran on fabricated stand-ins: what ran, and that it shows no result."""
    from featlib.experiments.labels import DATASET_LABELS

    names = prose.listing([DATASET_LABELS.get(n, n) for n in explained])
    examples = sorted({len(r.table) for r in explained.values()})
    per = prose.count(examples[0], "example") if len(examples) == 1 else "a few examples"
    return (f"This build has no WILDS data, so the cell above ran on fabricated stand-ins of {names} "
            f"({per} each): that only checks that the code runs, and shows no maps, tokens or predictions. "
            "With the real data it shows Table 15's predictions and the maps of Figs. 6-12.")
