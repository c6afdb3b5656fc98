"""Chapter 03's views (*OOD objectives need rich features*): Fig. 1(b), OOD accuracy against the
length of ERM pre-training, drawn in the book's style with FeAT's features as stars; the training
images; the committed whole-network (ERM-NF) pieces; and the "What we see" paragraph, from the
numbers of :mod:`featlib.experiments.cmnist_analysis`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from featbook import prose, style
from featbook.cmnist_shared import nf_provenance
from featbook.tables import Table, table
from featlib.experiments.cmnist_analysis import FIG1B_DEPENDENCE_POINTS, best_over_weights, pretraining_findings
from featlib.experiments.labels import DATASET_LABELS, OBJECTIVE_LABELS, label


# -- figures ---------------------------------------------------------------------------------------
def data_grid(data, per_env: int = 8):
    """A few training images of each environment (red = channel 0, green = channel 1) with
    their noisy labels, and how often colour agrees with the label in each environment."""
    envs = list(data.train)
    fig, axes = style.subplots(len(envs), per_env, panel_height=0.95, extra_height=0.2)
    for e, env in enumerate(envs):
        images = env.images()[:per_env]
        for j, ax in enumerate(axes[e]):
            rgb = np.zeros((images.shape[-2], images.shape[-1], 3))
            rgb[..., 0], rgb[..., 1] = images[j, 0].cpu().numpy(), images[j, 1].cpu().numpy()
            ax.imshow(rgb)
            ax.set_title(f"y = {int(env.y[j])}", fontsize=style.MIN_TEXT_PT)
            ax.axis("off")
        agree = (env.colour == env.y.long()).float().mean().item()
        axes[e, 0].text(-0.15, 0.5, f"env {e + 1}\ncolour = label\n{prose.percent(agree, 0)}",
                        transform=axes[e, 0].transAxes, ha="right", va="center", fontsize=style.MIN_TEXT_PT)
    return fig


def feat_legend(feat_epochs, feat_label: str | None = None) -> str:
    """The legend entry of FeAT's stars: ``feat_label`` (what the stars are) with the epochs they
    sit at, or by default "FeAT features (450 epochs)"."""
    if not feat_label:
        return f"FeAT features ({feat_epochs} epochs)"
    from featbook.phone import wrap_label  # a long label in lines, so the legend stays in the column

    return wrap_label(f"{feat_label}; at {feat_epochs} epochs", 30)


def plot_pretraining_curves(ax, nf_results: pd.DataFrame, feat_best: pd.DataFrame | None = None, feat_epochs=None,
                            feat_label: str | None = None):
    """OOD accuracy against ERM pre-training epochs per objective (ERM-NF); FeAT marked at the
    epochs its feature learning took, named in the legend by :func:`feat_legend`."""
    curves = best_over_weights(nf_results)
    colours = {}
    for objective, frame in curves.groupby("objective", sort=False):
        line, = ax.plot(frame["pretrain_epochs"], 100 * frame["mean"], "o-", label=label("objective", objective))
        colours[objective] = line.get_color()
    if feat_best is not None and feat_epochs is not None:
        starred = [row for row in feat_best.itertuples() if row.objective in colours]
        # side by side around FeAT's epochs, so that stars of equal height do not hide one another
        width = float(np.ptp(curves["pretrain_epochs"])) or 1.0
        for i, row in enumerate(starred):
            x = feat_epochs + (i - (len(starred) - 1) / 2) * 0.03 * width
            ax.plot([x], [100 * row.mean], marker="*", markersize=14, color=colours[row.objective],
                    markeredgecolor="black", linestyle="none")
        ax.plot([], [], marker="*", color="grey", markeredgecolor="black", linestyle="none", markersize=12,
                label=feat_legend(feat_epochs, feat_label))
    ax.set(xlabel="ERM pre-training epochs", ylabel="OOD accuracy (%), worst test env.")
    ax.legend(fontsize=style.MIN_TEXT_PT, ncol=2)
    return ax


def pretraining_figure(nf_results: pd.DataFrame, feat_best: pd.DataFrame | None, feat_epochs, title: str,
                       feat_label: str | None = None):
    """Fig. 1(b): OOD accuracy against ERM pre-training epochs per objective; FeAT as stars
    (``feat_label``: what they are, in the legend)."""
    fig, axes = style.subplots(1, 1, panel_height=3.2, extra_height=1.0)
    ax = axes[0, 0]
    plot_pretraining_curves(ax, nf_results, feat_best, feat_epochs, feat_label)
    ax.get_legend().remove()
    ax.set_title(title)
    style.legend_below(fig, ax, ncol=4)
    return fig


def nf_pieces_title(nf_runs: pd.DataFrame, dataset: str) -> str:
    """The title of Fig. 1(b) drawn from committed ERM-NF pieces: the dataset, the form and the
    seeds (where and in what precision they ran is in the fold under the figure)."""
    seeds = sorted(int(s) for s in nf_runs["seed"].unique())
    said = f"seed {seeds[0]} only" if len(seeds) == 1 else f"mean of {prose.count(len(seeds), 'seed')}"
    return f"{DATASET_LABELS[dataset]}, whole networks (ERM-NF), {said}"


def nf_pieces_verdict(nf_runs: pd.DataFrame) -> str:
    """What committed whole-network runs of Fig. 1(b) carry, without where they were made: the mean
    spread between an objective's best and worst pre-training length, set against the seeds' own
    spread; under 3 seeds how the figure looks at full size, not its verdict."""
    spread, noise, _, _ = pretraining_findings(nf_runs, None)
    text = (f"Between an objective's best and worst pre-training length the best penalty weight's accuracy moves by "
            f"{prose.number(spread, 1)} points on average. ")
    seeds = nf_runs["seed"].nunique()
    if seeds == 1:
        text += ("With one seed there is no seed-to-seed spread to set that against: the figure below shows "
                 "what the paper's figure looks like at its size, and ranks nothing.")
    elif seeds < 3:
        text += (f"The {prose.count(seeds, 'seed')}' own spread, about {prose.points(noise / 100, sign=False)}, is only a rough "
                 "yardstick for that: the figure below shows what the paper's figure looks like at its size, and "
                 "ranks nothing.")
    else:
        shown = spread >= FIG1B_DEPENDENCE_POINTS
        text += (f"Over {prose.count(seeds, 'seed')}, whose own spread is about {prose.points(noise / 100, sign=False)}, "
                 + ("that is the paper's finding at full data size (the paper ran 10 seeds): an objective's "
                    "OOD accuracy depends on how long ERM ran before it." if shown else
                    f"that is not the paper's finding: the dependence on ERM's length stays under the "
                    f"{prose.number(FIG1B_DEPENDENCE_POINTS, 0)} points this book asks of it."))
    return text


def curve_shape(nf_runs: pd.DataFrame, near: float = 0.10) -> pd.DataFrame:
    """The shape of Fig. 1(b)'s curves, per penalised objective (the best penalty weight per length,
    :func:`~featlib.experiments.cmnist_analysis.best_over_weights`): its accuracy with the shortest
    pre-training (``start``), its best (``best``, after ``best_epochs``), with the longest
    (``last``), and ``flat``: every length within ``near`` of chance (50%)."""
    curves = best_over_weights(nf_runs)
    curves = curves[curves["objective"] != "erm"].sort_values("pretrain_epochs")
    rows = []
    for objective, frame in curves.groupby("objective", sort=False):
        best = frame.loc[frame["mean"].idxmax()]
        rows.append({"objective": objective, "start": float(frame["mean"].iloc[0]), "best": float(best["mean"]),
                     "best_epochs": int(best["pretrain_epochs"]), "last": float(frame["mean"].iloc[-1]),
                     "last_epochs": int(frame["pretrain_epochs"].iloc[-1]),
                     "off_chance": float((frame["mean"] - 0.5).abs().max()),
                     "flat": bool(((frame["mean"] - 0.5).abs() < near).all())})
    return pd.DataFrame(rows)


def curve_shape_sentence(nf_runs: pd.DataFrame, near: float = 0.10) -> str:
    """What Fig. 1(b)'s curves do, read from the data (:func:`curve_shape`): where the objectives
    start, which rise to a best length and fall after it (the range of best lengths, and how far
    below their best they end), which are still rising at the longest length, and which stay within
    ``near`` of chance at every length."""
    shape = curve_shape(nf_runs, near)
    if shape.empty:
        return ""
    name = lambda rows: prose.listing([OBJECTIVE_LABELS.get(o, o) for o in rows["objective"]])
    pts = lambda v: prose.number(100 * v, 1)
    first = int(best_over_weights(nf_runs)["pretrain_epochs"].min())
    text = ((f"With {first} epochs of ERM pre-training" if first else "Without ERM pre-training")
            + " every penalised objective scores "
            + f"{pts(shape['start'].min())}–{pts(shape['start'].max())}%, near chance.")
    moving = shape[~shape["flat"]]
    peaked = moving[moving["best_epochs"] < moving["last_epochs"]]
    rising = moving[moving["best_epochs"] == moving["last_epochs"]]
    if len(peaked):
        lo, hi = peaked["best_epochs"].min(), peaked["best_epochs"].max()
        when = f"{lo}" if lo == hi else f"{lo}–{hi}"
        drop = peaked["best"] - peaked["last"]
        text += (f" {name(peaked)} rise to their best after {when} epochs "
                 f"({pts(peaked['best'].min())}–{pts(peaked['best'].max())}%) and fall after it: with "
                 f"{int(peaked['last_epochs'].iloc[0])} epochs they are {pts(drop.min())}–{pts(drop.max())} points "
                 "below their best, so longer pre-training is not better past a point.")
    if len(rising):
        text += f" {name(rising)} {'is' if len(rising) == 1 else 'are'} best at the longest length."
    flat = shape[shape["flat"]]
    if len(flat):
        text += (f" {name(flat)} {'stays' if len(flat) == 1 else 'stay'} within "
                 f"{pts(flat['off_chance'].max())} points of 50% at every length: no pre-training length makes "
                 f"{'it' if len(flat) == 1 else 'them'} better than chance by much.")
    return text


def whole_network_feat_sentence(curves: "CommittedCurves") -> str:
    """What the stars of the whole-network figure are and what they can say: Table 2's FeAT column,
    a head trained on FeAT's frozen features, set against each objective's best whole-network
    length (:func:`feat_against_lengths_sentence`), and that this is two regimes side by side, so
    the frozen-feature figure is the like-for-like comparison; "" without stars."""
    if curves.runs is None or curves.feat is None or curves.full:
        return ""
    from featlib.experiments.cmnist_analysis import feat_against_lengths

    against = feat_against_lengths(curves.runs, curves.feat)
    penalised = curves.feat[curves.feat["objective"].isin(against["objective"])]
    seeds = min(int(curves.feat["n_seeds"].min()), curves.seeds)
    lo, hi = 100 * penalised["std"].min(), 100 * penalised["std"].max()
    spread = prose.number(lo, 1) if round(lo, 1) == round(hi, 1) else f"{prose.number(lo, 1)}–{prose.number(hi, 1)}"
    return (f"The stars are Table 2's FeAT column, {cell_seeds(curves.feat)} "
            f"(the seeds' spread of a cell {spread} points): each objective trains only a linear head on FeAT's "
            f"features, frozen after the {curves.feat_epochs} epochs its feature learning spent (the round its "
            "termination check rolled back included; the paper's figure puts its stars at the 300 epochs of the two "
            "rounds kept), where the curves train the whole network. "
            + feat_against_lengths_sentence(against, seeds)
            + " That is the comparison the paper's figure makes, and it sets two regimes side by side: it cannot say "
            "whether FeAT's features or the freezing makes the difference. The frozen-feature figure below compares "
            "like with like, ERM's frozen features after each length against FeAT's. (IB-IRM's star is IRMv1's: on "
            "frozen features its bottleneck term is a constant.)")


def verdict_sentence(whole: "CommittedCurves", frozen: "CommittedCurves") -> str:
    """Chapter 03's verdict on Fig. 1(b), in its two halves, from the committed curves: (1) an
    objective's OOD accuracy depends on ERM's pre-training length -- read in whole networks, the
    paper's form, where 3 seeds of them exist, else on frozen features; (2) FeAT's features need no
    length to be tuned -- like for like only in the frozen-feature study (each objective on ERM's
    frozen features after every length against FeAT's), and beside the whole-network curves from
    Table 2's frozen FeAT column, which is two regimes. A half resting on fewer than 3 seeds gives its
    direction, not a verdict."""
    from featlib.experiments.cmnist_analysis import feat_against_lengths

    def seeds_said(n: int) -> str:
        return prose.count(n, "seed") + ("" if n >= 3 else ", too few for a verdict")

    if whole.runs is not None and whole.seeds >= 3:
        form, curves = "whole networks, the paper's form", whole
    elif frozen.runs is not None:
        form, curves = "frozen features", frozen
    else:
        return "No committed run at full data size yet: this chapter has no verdict on Fig. 1(b)."
    spread, noise, _, _ = pretraining_findings(curves.runs, None)
    shown = spread >= FIG1B_DEPENDENCE_POINTS
    first = (f"First half, {'shown' if shown and curves.seeds >= 3 else 'not shown' if curves.seeds >= 3 else 'a direction'}: "
             f"in {form} ({seeds_said(curves.seeds)}), an objective's OOD accuracy moves "
             f"{prose.points(spread / 100, sign=False)} on average between its best and its worst ERM length"
             + (f", against a seed spread of {prose.points(noise / 100, sign=False)}." if curves.seeds > 1 else "."))
    parts, like = [], None
    if frozen.runs is not None and frozen.feat is not None:
        against = feat_against_lengths(frozen.runs, frozen.feat)
        ahead = int((against["margin"] > 0).sum())
        like = None if frozen.seeds < 3 else 2 * ahead > len(against)
        # "like for like" once: in the half's label when it has a verdict, else here
        parts.append(f"on frozen features{'' if like is not None else ', like for like'} ({seeds_said(frozen.seeds)}), "
                     f"FeAT's features beat every ERM length for {ahead} of {len(against)} penalised objectives")
    if whole.runs is not None and whole.feat is not None and not whole.full:
        against = feat_against_lengths(whole.runs, whole.feat)
        ahead = int((against["margin"] > 0).sum())
        parts.append(f"beside the whole-network curves, Table 2's FeAT column (a head on frozen features: another "
                     f"regime) beats the best length for {ahead} of {len(against)}")
    if not parts:
        return first + " The second half waits for runs on FeAT's features."
    said = {True: "shown like for like", False: "not shown like for like", None: "a direction"}[like]
    return first + f" Second half, {said}: " + "; ".join(parts) + "."


def own_run_note(run) -> str:
    """What chapter 03's own run (a :class:`featbook.run_scale.RunScale`) can show: at reduced size,
    that every step runs, not the effect; at a size that compares methods, its numbers beside the
    committed ones."""
    if run.can_compare_methods:
        return ("At this size the objectives' differences can be read against the seeds' spread; the numbers are "
                "this run's, beside the committed ones above, not in place of them.")
    return ("At this size the accuracies are far from the full-size ones: the run shows that every objective trains "
            "at every pre-training length and that the figure and table are drawn, and it ranks nothing. The "
            "parameters cell's defaults are the paper's protocol.")


@dataclass
class CommittedCurves:
    """Committed runs of Fig. 1(b) as chapter 03 draws them: ``runs`` (one row per run, with
    ``pretrain_epochs``; None when nothing is committed), FeAT's best per objective and its epochs
    (None without), the figure's ``title``, how many seeds, whether these are the full protocol's
    results (``full``), and what :meth:`show_source` displays under the figure: the folded
    provenance (``made_by``, HTML) or why nothing is shown (``missing``)."""

    runs: pd.DataFrame | None = None
    feat: pd.DataFrame | None = None
    feat_epochs: int | None = None
    title: str = ""
    seeds: int = 0
    full: bool = False
    made_by: str = ""
    missing: str = ""
    located: Any = None
    feat_label: str | None = None  # what the stars are, for the legend (frozen features beside whole networks)
    feat_runs: pd.DataFrame | None = None  # FeAT's runs seed by seed (the frozen study), for the per-seed margins

    @property
    def nf_seeds(self) -> int | None:
        """The seeds of committed whole-network pieces (None when none are shown, or the full results are)."""
        return None if self.runs is None or self.full else self.seeds

    def show_source(self) -> None:
        from IPython.display import HTML, Markdown, display

        if self.made_by:
            display(HTML(self.made_by))
        elif self.missing:
            display(Markdown(self.missing))


def table2_feat_cells(runs: pd.DataFrame, dataset: str, learner: str = "ifeat") -> pd.DataFrame:
    """Table 2's FeAT column on ``dataset``: per objective, the configuration Table 2's rule selects
    (:func:`~featlib.experiments.colored_mnist.select_best`, the best mean worst-test accuracy over
    the seeds), with its mean, std and seeds."""
    from featlib.experiments.colored_mnist import select_best

    return select_best(runs[(runs["learner"] == learner) & (runs["dataset"] == dataset)])


def frozen_feat_label(cells: pd.DataFrame) -> str:
    """What Fig. 3.1's stars are, for its legend: "on FeAT's frozen features (Table 2's column, 5
    seeds)" (the fewest seeds of a cell, "3-5 seeds" where the cells differ)."""
    return f"on FeAT's frozen features (Table 2's column, {cell_seeds(cells)})"


def cell_seeds(cells: pd.DataFrame) -> str:
    """The seeds behind selected cells: "5 seeds", or "3–5 seeds" where the cells differ."""
    lo, hi = int(cells["n_seeds"].min()), int(cells["n_seeds"].max())
    return prose.count(lo, "seed") if lo == hi else f"{lo}–{hi} seeds"


def table2_stars(committed_table2: str | None, committed_rounds: str | None, dataset: str
                 ) -> tuple[pd.DataFrame | None, int | None, str | None]:
    """FeAT's stars for the whole-network figure from Table 2's committed FeAT column on ``dataset``
    (:func:`table2_feat_cells`), at the epochs the feature learning of those seeds spent (the
    committed rounds, the rolled-back one included:
    :func:`~featlib.experiments.cmnist_analysis.feat_epochs_spent`), with their legend entry; three
    Nones without either folder or without such cells."""
    from featbook import committed
    from featlib.experiments.cmnist_analysis import feat_epochs_spent
    from featlib.experiments.results import load_rounds
    from featlib.experiments.table2_pieces import load_pieces

    pieces = committed.load(committed.locate(committed_table2), load_pieces) if committed_table2 else None
    rounds = committed.load(committed.locate(committed_rounds), load_rounds) if committed_rounds else None
    if pieces is None or rounds is None or pieces["runs"].empty:
        return None, None, None
    cells = table2_feat_cells(pieces["runs"], dataset)
    seeds = pieces["runs"].query("learner == 'ifeat' and dataset == @dataset")["seed"].unique()
    epochs = feat_epochs_spent(rounds["rounds"], "ifeat", dataset, seeds)
    if cells.empty or epochs is None:
        return None, None, None
    return cells, epochs, frozen_feat_label(cells)


def committed_whole_network(committed_results: str | None, committed_nf_pieces: str | None,
                            dataset: str, committed_table2: str | None = None,
                            committed_rounds: str | None = None) -> CommittedCurves:
    """Chapter 03's whole-network (ERM-NF) evidence: the full protocol's committed results when
    there are some (with FeAT's stars), else the committed ERM-NF pieces of GPU sittings with FeAT's
    stars from Table 2's committed column on frozen features (:func:`table2_stars`, when
    ``committed_table2`` and ``committed_rounds`` name them), else why none is shown."""
    from featbook import committed, evidence
    from featlib.experiments.colored_mnist import select_best
    from featlib.experiments.results import load_results
    from featlib.experiments.table2_pieces import load_pieces
    from featlib.experiments import cmnist_analysis as analysis

    located = committed.locate(committed_results)
    full = committed.load(located, load_results)
    if full is not None:
        runs = full["runs"][full["runs"]["dataset"] == dataset]
        nf = runs[runs["learner"] == "erm-nf"]
        feat = select_best(runs[runs["learner"] == "feat"]) if (runs["learner"] == "feat").any() else None
        seeds = int(nf["seed"].nunique())
        return CommittedCurves(nf, feat, analysis.feat_epochs(full["rounds"], dataset=dataset),
                               f"{DATASET_LABELS[dataset]}, committed full-scale results", seeds, True,
                               evidence.made_by(evidence.provenance_line("Committed full-scale results",
                                                                         full["provenance"], "50,000 training images"),
                                                full["provenance"]), located=located)
    located_nf = committed.locate(committed_nf_pieces)
    pieces = committed.load(located_nf, load_pieces)
    if pieces is not None:
        nf = pieces["runs"].query("dataset == @dataset and learner == 'erm-nf'")
        if len(nf):
            folder = str(committed_nf_pieces).removeprefix("../")
            feat, epochs, feat_label = table2_stars(committed_table2, committed_rounds, dataset)
            return CommittedCurves(nf, feat, epochs, nf_pieces_title(nf, dataset),
                                   int(nf["seed"].nunique()), False,
                                   evidence.made_by(nf_provenance(nf, pieces["records"], [dataset], folder)),
                                   feat_label=feat_label, located=located)
    return CommittedCurves(missing=evidence.missing([located, located_nf], "ColoredMNIST protocol",
                                                    "python -m featlib.cli.run_cmnist --out results/cmnist"),
                           located=located)


def committed_frozen(committed_pretraining: str | None, dataset: str) -> CommittedCurves:
    """Chapter 03's frozen-feature study (``gap_studies frozen-pretraining``): ERM's featurizer
    frozen after each length, and iFeAT's features as the stars; or why none is shown."""
    from featbook import committed, evidence
    from featlib.experiments.colored_mnist import select_best
    from featlib.experiments.results import load_study

    located = committed.locate(committed_pretraining)
    study = committed.load(located, load_study, "frozen-pretraining")
    if study is None:
        return CommittedCurves(missing=evidence.missing(
            located, "frozen-feature study",
            "python -m featlib.cli.gap_studies frozen-pretraining --out results/cmnist-pretraining"), located=located)
    frame = study["frame"].query("dataset == @dataset")
    runs = frame[frame["learner"] == "erm"].rename(columns={"erm_epochs": "pretrain_epochs"})
    feat_rows = frame[frame["learner"] == "ifeat"]
    feat_runs = feat_rows.assign(pretrain_epochs=0)  # FeAT's features have no ERM length of their own
    feat = select_best(feat_runs)
    seeds = int(frame["seed"].nunique())
    said = f"mean of {prose.count(seeds, 'seed')}" if seeds > 1 else f"seed {int(frame['seed'].iloc[0])} only"
    return CommittedCurves(runs, feat, int(feat_rows["erm_epochs"].iloc[0]),
                           f"{DATASET_LABELS[dataset]}, frozen features, {said}", seeds, False,
                           evidence.made_by(evidence.provenance_line("The committed frozen-feature study",
                                                                     study["provenance"], "50,000 training images"),
                                            study["provenance"]), located=located,
                           feat_runs=feat_runs)


def frozen_sentence(frozen: CommittedCurves) -> str:
    """What chapter 03's frozen-feature figure shows, from its data: the curves' shape
    (:func:`curve_shape_sentence`), how far an objective moves between its best and worst ERM length
    against the seeds' spread, and FeAT's stars against the best length."""
    if frozen.runs is None:
        return "No frozen-feature study is committed yet, so the figure above is empty."
    from featlib.experiments.cmnist_analysis import feat_against_lengths, feat_against_lengths_by_seed

    spread, noise, _, _ = pretraining_findings(frozen.runs, frozen.feat)
    seed_spread = (f"the seeds' own spread is about {prose.points(noise / 100, sign=False)}" if frozen.seeds > 1 else
                   "one seed so far, so no seed-to-seed spread to set it against")
    return (curve_shape_sentence(frozen.runs)
            + f" On average an objective moves by {prose.points(spread / 100, sign=False)} between its best and "
            f"worst ERM length ({seed_spread}). "
            + feat_against_lengths_sentence(feat_against_lengths(frozen.runs, frozen.feat), frozen.seeds)
            + (" " + seed_by_seed_sentence(feat_against_lengths_by_seed(frozen.runs, frozen.feat_runs))
               if frozen.seeds > 1 and frozen.feat_runs is not None else "")
            + " (IB-IRM is left out: on frozen features its bottleneck term is a constant, so it trains as IRMv1.) "
            f"FeAT's stars sit at the {frozen.feat_epochs} epochs its feature learning spent, the round its "
            "termination check rolled back included; the features it keeps are those of the rounds before.")


def pretraining_summary(summary: pd.DataFrame) -> Table:
    """Per objective: the best penalty weight's mean OOD accuracy without pre-training, at the
    best and at the worst pre-training length, their difference, and on FeAT's features (%)."""
    frame = pd.DataFrame({
        "objective": [OBJECTIVE_LABELS.get(o, o) for o in summary.index],
        "no pre-training": [prose.number(100 * v, 1) for v in summary["first"]],
        "best length": [prose.number(100 * v, 1) for v in summary["max"]],
        "worst length": [prose.number(100 * v, 1) for v in summary["min"]],
        "best − worst (points)": [prose.number(100 * v, 1) for v in summary["spread"]],
        "on FeAT's features": [prose.number(100 * v, 1) for v in summary["feat"]],
    })
    return table(frame, caption="OOD accuracy (%, worst test environment) of each objective")


def feat_against_lengths_sentence(against: pd.DataFrame, seeds: int | None = None) -> str:
    """Which objectives FeAT's features serve better than their best pre-training length, with the
    range of margins, and each that they do not, named with both accuracies; over fewer than 3
    ``seeds`` the sentence says that it shows a direction and ranks nothing."""
    ahead, behind = against[against["margin"] > 0], against[against["margin"] <= 0]
    text = f"FeAT's features beat the best ERM length for {len(ahead)} of the {len(against)} penalised objectives"
    if len(ahead):
        lo, hi = ahead["margin"].min(), ahead["margin"].max()
        text += (f" (by {prose.number(lo, 1)} points)" if round(lo, 1) == round(hi, 1) else
                 f" (by {prose.number(lo, 1)} to {prose.number(hi, 1)} points)")
    if len(behind):
        text += "; not " + prose.listing([
            f"{OBJECTIVE_LABELS.get(r.objective, r.objective)} ({prose.percent(r.feat)} on FeAT's features against "
            f"{prose.percent(r.best_length)} after {r.best_epochs} ERM epochs)" for r in behind.itertuples()])
    if seeds is not None and seeds < 3:
        text += f". On {prose.count(seeds, 'seed')} this is a direction, and it ranks nothing"
    return text + "."


def seed_by_seed_sentence(by_seed: pd.DataFrame) -> str:
    """How FeAT's lead over the best length holds seed by seed (a
    :func:`featlib.experiments.cmnist_analysis.feat_against_lengths_by_seed` frame): the objectives
    ahead in every seed, and each other one with its per-seed count and mean margin +- std."""
    if by_seed.empty:
        return ""
    seeds = int(by_seed["seeds"].max())
    always = by_seed[by_seed["ahead"] == by_seed["seeds"]]
    text = (f"Seed by seed ({prose.count(seeds, 'seed')}, each seed's FeAT against that seed's own best length), "
            f"FeAT's features lead in every seed for {len(always)} of the {len(by_seed)}")
    others = by_seed[by_seed["ahead"] < by_seed["seeds"]]
    if len(others):
        text += "; " + prose.listing([
            f"{OBJECTIVE_LABELS.get(r.objective, r.objective)} in {r.ahead} of {r.seeds}, by "
            f"{prose.number(round(r.mean, 1) or 0.0, 1)} ± {prose.number(round(r.std, 1) or 0.0, 1)} points on average"
            for r in others.itertuples()])  # rounded first: a mean of 1e-15 is zero, not a power of ten
    return text + "."


def _fig1b_sentence(spread: float, noise: float, n_seeds: int | None = None) -> str:
    against = ("one seed, so no seed-to-seed spread to set it against" if n_seeds == 1 else
               f"against a seed-to-seed standard deviation of {prose.number(noise, 1)} points")
    return (f"across the pre-training lengths, an objective's OOD accuracy moves by {prose.number(spread, 1)} points "
            f"on average (best minus worst length, each at its best penalty weight), {against}.")


def _feat_sentence(beats: int | None, n_objectives: int, frozen: bool = False) -> str:
    if beats is None:
        return " These results hold no run on FeAT's features."
    left_out = (" (IB-IRM is left out: on frozen features it trains as IRMv1)" if frozen else "")
    return (f" On FeAT's features {beats} of the {prose.count(n_objectives, 'penalised objective')}{left_out} beat "
            "their best pre-training length.")


