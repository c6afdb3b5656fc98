"""Tables and figures of the WILDS chapter: Table 3 (ours beside the paper's) and DFR / DFR-s.

Our scores come from :class:`~featlib.experiments.wilds_experiment.WildsResults`; the paper's
from :data:`~featlib.experiments.paper_values.TABLE3`, always in their own, labelled column.
WILDS reports accuracies and F1 in [0, 1]; the paper (and these tables) in percent.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import style
from ..data.wilds_data import WILDS_DATASETS
from .paper_values import TABLE3
from .labels import OBJECTIVE_LABELS
from .wilds_experiment import LEARNER_LABELS_BY_NAME, WildsResults


def mean_std(mean: float, std: float) -> str:
    if mean is None or np.isnan(mean):
        return "-"
    return f"{mean:.2f} ± {std:.2f}" if std is not None and not np.isnan(std) else f"{mean:.2f}"


def _paper(dataset: str, learner: str, row: str) -> str:
    value = TABLE3.get(dataset, {}).get((learner, row))
    return "-" if value is None else mean_std(*value)


def table3(results: WildsResults, dataset: str) -> pd.DataFrame:
    """Table 3's lower block for one dataset: per learner and OOD objective, our test
    score (mean ± std over seeds, at the penalty weight chosen on OOD validation) and the paper's."""
    spec = WILDS_DATASETS.get(dataset)
    selected = results.table()
    rows = []
    for _, r in selected.iterrows():
        rows.append({
            "Init.": LEARNER_LABELS_BY_NAME[r["learner"]], "Method": OBJECTIVE_LABELS[r["objective"]],
            f"ours: {spec.metric_label}": mean_std(100 * r["test_mean"], 100 * r["test_std"]),
            "ours: OOD val.": f"{100 * r['val_mean']:.2f}",
            "penalty weight": "-" if r["objective"] in ("erm", "group_dro") else f"{r['penalty_weight']:g}",
            "seeds": int(r["seeds"]),
            f"paper: {spec.metric_label}": _paper(dataset, r["learner"], r["objective"]),
        })
    order = {m: i for i, m in enumerate(LEARNER_LABELS_BY_NAME.values())}
    obj_order = {m: i for i, m in enumerate(OBJECTIVE_LABELS.values())}
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table = table.sort_values(["Init.", "Method"], key=lambda s: s.map(order if s.name == "Init." else obj_order))
    return table.reset_index(drop=True)


def dfr_table(results: WildsResults, dataset: str) -> pd.DataFrame:
    """Table 3's upper block: DFR (invariant feature quality, the dataset's metric) and DFR-s
    (spurious feature learning: worst-group accuracy at predicting the spurious attribute)."""
    spec = WILDS_DATASETS.get(dataset)
    if results.dfr.empty:
        return pd.DataFrame()
    agg = results.dfr.groupby(["learner", "target"], as_index=False).agg(
        mean=("test_metric", "mean"), std=("test_metric", "std"), C=("C", lambda c: ", ".join(f"{v:g}" for v in c)),
        seeds=("seed", "nunique"))
    rows = []
    for _, r in agg.iterrows():
        row = "dfr" if r["target"] == "label" else "dfr-s"
        rows.append({"Init.": LEARNER_LABELS_BY_NAME[r["learner"]], "Method": OBJECTIVE_LABELS[row],
                     "ours": mean_std(100 * r["mean"], 100 * r["std"]), "C per seed": r["C"],
                     "seeds": int(r["seeds"]), "paper": _paper(dataset, r["learner"], row),
                     "what is measured": spec.metric_label if row == "dfr" else
                     f"worst-group acc. predicting '{spec.spurious_field}'"})
    return pd.DataFrame(rows)


def plot_table3(results: WildsResults, dataset: str, ax=None, with_paper: bool = True, title: str | None = None):
    """Grouped bars: our test score per OOD objective and learner, with the paper's
    values as black markers (labelled as the paper's; ``with_paper``), titled ``title`` (default:
    the dataset's)."""
    spec = WILDS_DATASETS.get(dataset)
    selected = results.table()
    learners = [m for m in LEARNER_LABELS_BY_NAME if m in set(selected["learner"])]
    objectives = [o for o in OBJECTIVE_LABELS if o in set(selected["objective"])]
    ax = ax or plt.subplots(figsize=(1.6 * len(objectives) + 2, 3.4))[1]
    width = 0.8 / max(1, len(learners))
    for i, m in enumerate(learners):
        part = selected[selected["learner"] == m].set_index("objective")
        xs = np.arange(len(objectives)) + (i - (len(learners) - 1) / 2) * width
        means = [100 * part.loc[o, "test_mean"] if o in part.index else np.nan for o in objectives]
        stds = [100 * part.loc[o, "test_std"] if o in part.index else np.nan for o in objectives]
        ax.bar(xs, means, width, yerr=np.nan_to_num(stds), label=f"{LEARNER_LABELS_BY_NAME[m]} (ours)", alpha=0.85)
        if with_paper:
            paper = [TABLE3.get(dataset, {}).get((m, o), (np.nan, 0))[0] for o in objectives]
            ax.scatter(xs, paper, marker="_", s=250, color="black", zorder=3,
                       label="paper (Table 3)" if i == 0 else None)
    ax.set_xticks(np.arange(len(objectives)), [OBJECTIVE_LABELS[o] for o in objectives])
    ax.set_ylabel(f"test {spec.metric_label}")
    ax.set_title(title or f"{spec.title}: OOD objectives on learned features")
    ax.legend(ncols=2)
    return ax


def rounds_table(results: WildsResults) -> pd.DataFrame:
    """The feature-learning history: per learner, seed and round, training / retention accuracy,
    official OOD validation and test scores of the round's classifier, and acceptance."""
    keep = ["learner", "seed", "round", "steps", "train_acc", "retention_acc", "val_metric", "test_metric",
            "accepted", "size_augmentation", "size_retention"]
    table = results.rounds[[c for c in keep if c in results.rounds.columns]].copy()
    table["learner"] = table["learner"].map(LEARNER_LABELS_BY_NAME)
    return table


def split_summary(data) -> pd.DataFrame:
    """Per split: examples, training domains present (the grouper's groups) and label shares."""
    rows = []
    for split in data.splits:
        y = data.labels(split).numpy()
        groups = data.groups(split).numpy()
        rows.append({"split": split, "examples": len(y), "domains (groups)": len(np.unique(groups)),
                     **{f"share of class {c}": round(float((y == c).mean()), 3) for c in range(min(data.n_classes, 4))}})
    return pd.DataFrame(rows)


def show_examples(data, per_group: int = 4, split: str = "train"):
    """A few raw training inputs per domain: a grid of images, or a table of texts."""
    subset = data.splits[split]
    groups = data.groups(split).numpy()
    labels = data.labels(split).numpy()
    picks = [(g, np.flatnonzero(groups == g)[:per_group]) for g in np.unique(groups)[:6]]
    names = {g: data.grouper.group_str(int(g)) for g, _ in picks}
    if data.spec.modality == "text":
        rows = [{"domain": names[g], "label": int(labels[i]), "text": data.dataset.get_input(subset.indices[i])}
                for g, idx in picks for i in idx]
        return pd.DataFrame(rows)
    fig, axes = style.subplots(len(picks), per_group, panel_height=1.25, width=min(style.COLUMN_WIDTH, 1.5 * per_group + 1.6),
                               extra_height=0.2)
    for row, (g, idx) in zip(axes, picks):
        for ax, i in zip(row, list(idx) + [None] * (per_group - len(idx))):
            ax.axis("off")
            if i is not None:
                ax.imshow(data.dataset.get_input(subset.indices[i]))
                ax.set_title(f"y = {labels[i]}", fontsize=style.MIN_TEXT_PT)
        row[0].text(-0.1, 0.5, names[g], transform=row[0].transAxes, ha="right", va="center", fontsize=style.MIN_TEXT_PT)
    return fig
