"""How the saliency chapter (06) shows its results: figures as wide as the book's column with
their colour scales, and tables of labelled, formatted measures."""
from __future__ import annotations

import numpy as np
import pandas as pd

from featlib import style
from featbook import prose
from featlib.saliency import plot_gradcam_triples, plot_overlay_grid
from featlib.saliency.plot import add_map_colourbar, token_figure
from featbook.tables import Table, table

#: The measures of :meth:`SaliencyStudy.table` the chapter shows, with their headers.
MEASURES = {"model": "model", "epochs": "epochs", "rounds_kept": "rounds kept", "train_acc": "train acc.",
            "ood_acc": "OOD acc.", "colour_flip_rate": "flipped by a colour swap",
            "colour_share_ig": "IG share on colour", "colour_share_gradcam": "GradCAM share on colour"}


def history_table(history: pd.DataFrame) -> Table:
    """The trained models: epochs (and FeAT's rounds) and accuracies, formatted."""
    formats = {c: prose.percent for c in history.columns if c.endswith("acc") or "_acc" in c}
    formats |= {c: (lambda v: prose.integer(int(v))) for c in ("epochs", "rounds_kept") if c in history}
    return table(history, caption="The models of this study", formats=formats,
                 columns={c: c.replace("_", " ") for c in history.columns})


def measures_table(frame: pd.DataFrame) -> Table:
    """Per model: accuracies, the colour-swap flip rate and the shares of attribution on colour."""
    shown = frame[[c for c in MEASURES if c in frame]]
    formats = {c: prose.percent for c in shown.columns if c not in ("model", "epochs", "rounds_kept")}
    formats |= {c: (lambda v: prose.integer(int(v))) for c in ("epochs", "rounds_kept") if c in shown}
    return table(shown, caption="Measured over the OOD test images", formats=formats, columns=MEASURES)


def triples_figure(images, maps: dict, predictions: pd.DataFrame, pair: list[str], n_show: int):
    """The paper's triple (image, map, overlay) for two models side by side, one colour bar."""
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(style.COLUMN_WIDTH, 1.0 * n_show + 0.7), layout="constrained")
    blocks = figure.subfigures(1, 2)
    all_axes = []
    for block, name in zip(blocks, pair):
        axes = block.subplots(n_show, 3, squeeze=False)
        rows = [f"y={y}, pred {p}" for y, p in zip(predictions["label"], predictions[name])]
        plot_gradcam_triples(images, maps[name], row_labels=rows, col_title=name, axes=axes)
        all_axes.append(axes)
    add_map_colourbar(blocks[1], all_axes[1])
    return figure


def short_name(model: str) -> str:
    """"ERM 150 epochs" -> "ERM 150", "FeAT 2 rounds" -> "FeAT": column heads of a narrow grid."""
    return model.replace(" epochs", "").replace(" rounds", " r.").replace("FeAT 2 r.", "FeAT")


def overlay_figure(images, maps: dict, predictions: pd.DataFrame):
    """Every model's map over the same images: one column per model (its name over the first
    row), each cell titled by the model's prediction; the true label labels the row."""
    titles = {name: [(f"{short_name(name)}\n" if i == 0 else "") + f"pred {p}"
                     for i, p in enumerate(predictions[name])] for name in maps}
    return plot_overlay_grid(images, maps, cell_titles=titles, row_labels=[f"label {y}" for y in predictions["label"]])


def shares_figure(frame: pd.DataFrame):
    """Share of attribution on colour (top), colour-swap flip rate and OOD accuracy (bottom)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplot_mosaic([["share", "share"], ["flip", "ood"]], figsize=(style.COLUMN_WIDTH, 5.6),
                                   layout="constrained")
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
    axes["ood"].set(ylabel="accuracy", title="OOD test accuracy (e = 0.9)", ylim=(0, 1))
    for key in ("flip", "ood"):
        axes[key].set_xticks(x, frame["model"], rotation=35, ha="right")
    return fig


def prediction_table(result, caption: str) -> Table:
    """Table 13's layout: each explained example's label and each model's prediction."""
    return table(result.table, caption=caption, columns={"example": "example (index in the split)"})


def token_figures(result, caption: str):
    """Every explained text example as coloured tokens, one line per model, as one captioned figure."""
    from featlib.saliency import HighlightedText

    blocks = HighlightedText.join([result.highlighted(i) for i in range(len(result.table))])
    return token_figure(blocks, caption)


def what_we_see(run, map_kind: str, feat_share: float, erm_share: float, feat_flip: float, erm_flip: float) -> str:
    """Chapter 06's "What we see" from the measures of FeAT and of ERM after its longest training:
    the share of attribution on colour and the colour-swap flip rate. ``run`` is the
    :class:`featbook.run_scale.RunScale` of the study. A small run claims nothing about which model
    looks where; a run on the paper's data says "ERM reads the colour, FeAT the digit" only when
    both measures put FeAT below ERM, and says which measure disagrees otherwise."""
    text = (f"In this run ({run.summary}), the maps are {map_kind} maps. On the test images, FeAT's share of "
            f"attribution on colour was {prose.percent(feat_share)}, against {prose.percent(erm_share)} for ERM after "
            f"its longest training, and a colour swap flipped {prose.percent(feat_flip)} of FeAT's predictions against "
            f"{prose.percent(erm_flip)} of ERM's.")
    if not run.can_compare_methods:
        return text + (" At this size (a fraction of the images and epochs) the models are not the paper's: these "
                       "numbers show that every piece runs and measures what it says it measures, not which model "
                       "looks where. The colab profile (`from featbook import profiles; "
                       "profiles.apply(\"colab\", globals())` at the end of the parameters cell) or the default "
                       "parameters train the paper's models.")
    less_share, fewer_flips = feat_share < erm_share, feat_flip < erm_flip
    text += " These models are trained on the paper's data for the paper's epochs"
    if less_share and fewer_flips:
        return text + (", and both measures agree with the paper: ERM reads the colour more than FeAT does, and FeAT "
                       "keeps more of the digit.")
    if fewer_flips:
        return text + (". The flip rate agrees with the paper (a colour swap changes fewer of FeAT's predictions), "
                       "the attribution share does not; as the next paragraph says, trust the flip rate.")
    if less_share:
        return text + (". The attribution share puts less of FeAT's attribution on colour, but a colour swap changes "
                       "at least as many of FeAT's predictions as of ERM's, so by the more direct measure this run "
                       "does not show FeAT relying less on colour.")
    return text + (", yet neither measure shows the paper's pattern here: FeAT relies on colour at least as much as "
                   "ERM does.")
