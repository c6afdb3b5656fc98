"""How the WILDS chapter (05) shows its results: tables that fit the column, figures in the
book's style. The numbers come from :class:`~featlib.experiments.wilds_experiment.WildsResults` and
the frames of :mod:`featlib.experiments.wilds_report` (Table 3, DFR, which ``run_wilds`` also writes);
this module lays them out (ours and the paper's value in one cell, labels instead of ids, no index
column, no ``NaN``) and draws them."""
from __future__ import annotations

import numpy as np
import pandas as pd

from featbook import style
from featbook import prose
from featbook.tables import Stacked, Table, table
from featlib.data.wilds_data import WILDS_DATASETS
from featlib.evaluation.dfr import DFR_CS
from featlib.experiments.labels import LEARNER_LABELS, OBJECTIVE_LABELS
from featlib.experiments.paper_values import TABLE3


#: How a reader reads the WILDS split names (the package's ``train``, ``val``, ``test``, ``id_val``, ``id_test``).
SPLIT_LABELS = {"train": "training", "val": "OOD validation", "test": "OOD test", "id_val": "ID validation",
                "id_test": "ID test"}


def is_fabricated(data) -> bool:
    """Whether ``data`` (a loaded :class:`~featlib.data.wilds_data.WildsData`) was read from a folder
    that :func:`featlib.data.wilds_fabricate.fabricate_wilds` wrote: its marker file lies beside the
    data. Read from the data on disk, not from a notebook's parameters, so a fabricated folder
    passed as ``data_root`` is labelled fabricated even with ``fabricate=False``."""
    from pathlib import Path

    from featlib.data.wilds_fabricate import MARKER

    folder = getattr(data.dataset, "data_dir", None)
    return folder is not None and (Path(folder) / MARKER).is_file()


def data_kind(data) -> str:
    """"fabricated" or "real": how captions and titles name the data a run read (:func:`is_fabricated`)."""
    return "fabricated" if is_fabricated(data) else "real"


def data_title(data) -> str:
    """"Camelyon17 (fabricated data)": the dataset as every caption and title over it names it."""
    return f"{data.spec.title} ({data_kind(data)} data)"


def split_summary(data) -> Table:
    """Per split (named as a reader reads it): examples, training domains present (the grouper's
    groups) and label shares; the caption names the dataset and whether its data are fabricated."""
    rows = []
    for split in data.splits:
        y = data.labels(split).numpy()
        groups = data.groups(split).numpy()
        rows.append({"split": SPLIT_LABELS.get(split, split), "examples": len(y),
                     "domains (groups)": len(np.unique(groups)),
                     **{f"share of class {c}": round(float((y == c).mean()), 3) for c in range(min(data.n_classes, 4))}})
    frame = pd.DataFrame(rows)
    shares = [c for c in frame.columns if c.startswith("share of class")]
    return table(frame, caption=f"The WILDS splits of {data_title(data)}, this run",
                 formats={c: lambda v: prose.percent(v, 1) for c in shares} | {"examples": prose.integer})


def _stack(ours: str, paper: str) -> Stacked:
    return Stacked(ours, "" if paper in ("", "-", None) else paper, paper=True)


def table3(frame: pd.DataFrame, metric_label: str, caption: str, with_paper: bool = True) -> Table:
    """Table 3's OOD-objective rows (the frame of
    :func:`featlib.experiments.wilds_report.table3_frame`): ours with the
    paper's value under it (``with_paper``: full-scale results only, never a test run's), the OOD
    validation score and the selected penalty weight."""
    if frame.empty:
        return table(frame, caption=caption)
    ours, paper = f"ours: {metric_label}", f"paper: {metric_label}"
    shown = pd.DataFrame({
        "features": frame["Init."],
        "objective": frame["Method"],
        f"test {metric_label}": [_stack(o, p if with_paper else "") for o, p in zip(frame[ours], frame[paper])],
        "OOD val.": frame["ours: OOD val."],
        "penalty weight": frame["penalty weight"].replace({"-": prose.MISSING}),
        "seeds": frame["seeds"],
    })
    return table(shown, caption=caption, note=("Test score: ours (mean ± std over seeds), the paper's Table 3 under it "
                 "in grey where it prints one. " if with_paper else "Test score: mean ± std over seeds. ")
                 + "Penalty weight chosen on OOD validation.")


def dfr_table(frame: pd.DataFrame, caption: str, with_paper: bool = True) -> Table:
    """DFR / DFR-s rows (the frame of
    :func:`featlib.experiments.wilds_report.dfr_table_frame`); the paper's values under
    ours only ``with_paper`` (full-scale results, never a test run's)."""
    if frame.empty:
        return table(frame, caption=caption)
    shown = pd.DataFrame({
        "features": frame["Init."],
        "refit": frame["Method"],
        "test score": [_stack(o, p if with_paper else "") for o, p in zip(frame["ours"], frame["paper"])],
        "what is measured": frame["what is measured"],
        "chosen C, per seed": frame["C per seed"],
    })
    c_note = (" Chosen C: the inverse L1 strength of DFR's logistic regression, picked per seed from "
              f"{', '.join(f'{c:g}' for c in DFR_CS)} by worst-group accuracy on a held-out half of the fit set "
              "(the DFR authors' grid; featlib.evaluation.dfr).")
    return table(shown, caption=caption, wrap=["what is measured", "chosen C, per seed"],
                 note=("Ours (mean ± std over seeds), the paper's under it in grey where it prints one." if with_paper
                       else "Mean ± std over seeds.") + c_note)


def rounds_table_frame(results) -> pd.DataFrame:
    """The feature-learning history of :class:`~featlib.experiments.wilds_experiment.WildsResults`:
    per learner, seed and round, training / retention accuracy, official OOD validation and test
    scores of the round's classifier, and acceptance."""
    keep = ["learner", "seed", "round", "steps", "train_acc", "retention_acc", "val_metric", "test_metric",
            "accepted", "size_augmentation", "size_retention"]
    frame = results.rounds[[c for c in keep if c in results.rounds.columns]].copy()
    frame["learner"] = frame["learner"].map(dict(LEARNER_LABELS))
    return frame


def rounds_table(frame: pd.DataFrame, caption: str) -> Table:
    """The feature-learning history (the frame of :func:`rounds_table_frame`)."""
    shown = pd.DataFrame({
        "learner": frame["learner"], "seed": frame["seed"], "round": frame["round"],
        "steps": [prose.integer(v) for v in frame["steps"]],
        "train acc.": [prose.percent(v) for v in frame["train_acc"]],
        "retention acc.": [prose.percent(v) for v in frame.get("retention_acc", pd.Series([np.nan] * len(frame)))],
        "OOD val.": [prose.percent(v) for v in frame["val_metric"]],
        "OOD test": [prose.percent(v) for v in frame["test_metric"]],
        "kept": ["yes" if bool(v) else "no" for v in frame["accepted"]],
    })
    return table(shown, caption=caption)


def rounds_at_chance(frame: pd.DataFrame, n_classes: int, within: float = 0.02) -> pd.DataFrame:
    """The rounds of :func:`rounds_table_frame` whose classifier ended within ``within`` of chance
    (``1 / n_classes``) on its own training data: learner, seed, round, train_acc."""
    if frame.empty or n_classes < 2:
        return frame.iloc[0:0]
    return frame[(frame["train_acc"] - 1 / n_classes).abs() <= within]


def rounds_note(frame: pd.DataFrame, n_classes: int, full_scale: bool) -> str:
    """A sentence under the rounds table of a run at reduced size or on fabricated data: which rounds
    ended at chance on their own training data, and why that says nothing about FeAT at the paper's
    size (empty when none did, or for a run at the paper's size, whose table speaks for itself)."""
    chance = rounds_at_chance(frame, n_classes)
    if full_scale or chance.empty:
        return ""
    names = "; ".join(f"{r.learner} seed {r.seed}, round {r.round}" for r in chance.itertuples())
    count = len(chance)
    return (f"{prose.count(count, 'round')} of this run ended at chance on {'its' if count == 1 else 'their'} own "
            f"training data ({names}): from the second round on, FeAT's DRO step weighs the augmentation set, the "
            "examples the previous round got wrong, which in a run this small is a handful of images, and the "
            "WILDS default keeps every round. It shows that the round runs, not how FeAT fares at the paper's size.")


def paper_table3(dataset: str) -> Table:
    """The paper's Table 3 for one dataset, alone (no number of ours beside it): per objective (DFR
    and DFR-s first, as the paper prints them), the score on each feature learner's features, mean
    ± std over the paper's seeds; what a reader compares a full-scale run with."""
    spec = WILDS_DATASETS.get(dataset)
    cells = TABLE3.get(dataset, {})
    learners = [m for m in LEARNER_LABELS if any(k[0] == m for k in cells)]
    objectives = [o for o in ("dfr", "dfr-s", *OBJECTIVE_LABELS) if any(k[1] == o for k in cells)]
    objectives = list(dict.fromkeys(objectives))
    rows = [{"objective": OBJECTIVE_LABELS.get(o, o),
             **{LEARNER_LABELS[m]: (prose.mean_std(*cells[(m, o)]) if (m, o) in cells else prose.MISSING)
                for m in learners}} for o in objectives]
    return table(pd.DataFrame(rows), caption=f"The paper's Table 3 for {spec.title} ({spec.metric_label}): "
                 "not a result of this book", note="The paper's numbers (mean ± std over its seeds), by the features "
                 "each objective trains on; no run of ours is shown beside them until full-scale results are committed.")


def committed_table3(frame: pd.DataFrame, caption: str) -> Table:
    """A committed ``table3.csv`` (the frame :func:`featlib.experiments.wilds_report.table3_frame` wrote)."""
    metric = next((c[len("ours: "):] for c in frame.columns if c.startswith("ours: ") and c != "ours: OOD val."), "score")
    frame = frame.fillna("-").astype({c: str for c in frame.columns if c != "seeds"})
    return table3(frame, metric, caption)


def examples(data, per_group: int = 4, split: str = "train"):
    """A few raw inputs of ``split`` per domain (at most six domains): a grid of images, or a
    table of texts, titled (captioned) with the dataset and whether its data are fabricated."""
    subset = data.splits[split]
    groups = data.groups(split).numpy()
    labels = data.labels(split).numpy()
    picks = [(g, np.flatnonzero(groups == g)[:per_group]) for g in np.unique(groups)[:6]]
    names = {g: data.grouper.group_str(int(g)) for g, _ in picks}
    if data.spec.modality == "text":
        rows = [{"domain": names[g], "label": int(labels[i]), "text": data.dataset.get_input(subset.indices[i])}
                for g, idx in picks for i in idx]
        return table(pd.DataFrame(rows), caption=f"Training comments of a few domains, {data_title(data)}", wrap=["text"])
    fig, axes = style.subplots(len(picks), per_group, panel_height=1.25, width=min(style.COLUMN_WIDTH, 1.5 * per_group + 1.6),
                               extra_height=0.45)
    for row, (g, idx) in zip(axes, picks):
        for ax, i in zip(row, list(idx) + [None] * (per_group - len(idx))):
            ax.axis("off")
            if i is not None:
                ax.imshow(data.dataset.get_input(subset.indices[i]))
                ax.set_title(f"y = {labels[i]}", fontsize=style.MIN_TEXT_PT)
        row[0].text(-0.1, 0.5, names[g], transform=row[0].transAxes, ha="right", va="center", fontsize=style.MIN_TEXT_PT)
    fig.suptitle(f"{data_title(data)}: training inputs per domain", fontsize=9)
    return fig


def clipped_error(means, stds, low: float = 0.0, high: float = 100.0) -> np.ndarray:
    """Error bars of one std, cut at the score's range (every metric of Table 3 is a percentage):
    a 2 x n array for ``yerr`` whose bars never reach past ``low`` or ``high``."""
    means, stds = np.nan_to_num(np.asarray(means, float)), np.nan_to_num(np.asarray(stds, float))
    return np.vstack([np.minimum(stds, np.maximum(means - low, 0)), np.minimum(stds, np.maximum(high - means, 0))])


def table3_figure(results, dataset: str, with_paper: bool = True, title: str | None = None):
    """Grouped bars: our test score per OOD objective and learner, with the paper's values as black
    marks (labelled as the paper's; ``with_paper``: full-scale results only), titled ``title``
    (default: the dataset's); one legend under the panel."""
    spec = WILDS_DATASETS.get(dataset)
    selected = results.table()
    learners = [m for m in LEARNER_LABELS if m in set(selected["learner"])]
    objectives = [o for o in OBJECTIVE_LABELS if o in set(selected["objective"])]
    fig, axes = style.subplots(1, 1, panel_height=3.0, extra_height=0.9)
    ax = axes[0, 0]
    width = 0.8 / max(1, len(learners))
    for i, m in enumerate(learners):
        part = selected[selected["learner"] == m].set_index("objective")
        xs = np.arange(len(objectives)) + (i - (len(learners) - 1) / 2) * width
        means = [100 * part.loc[o, "test_mean"] if o in part.index else np.nan for o in objectives]
        stds = [100 * part.loc[o, "test_std"] if o in part.index else np.nan for o in objectives]
        ax.bar(xs, means, width, yerr=clipped_error(means, stds), label=f"{LEARNER_LABELS[m]} (ours)",
               alpha=0.85)
        if with_paper:
            paper = [TABLE3.get(dataset, {}).get((m, o), (np.nan, 0))[0] for o in objectives]
            ax.scatter(xs, paper, marker="_", s=250, color="black", zorder=3,
                       label="paper (Table 3)" if i == 0 else None)
    ax.set_xticks(np.arange(len(objectives)), [OBJECTIVE_LABELS[o] for o in objectives])
    ax.set_ylabel(f"test {spec.metric_label}")
    ax.set_title(title or f"{spec.title}: OOD objectives on learned features")
    style.legend_below(fig, ax, ncol=3)
    return fig


def method_label(learner: str) -> str:
    return LEARNER_LABELS.get(learner, learner)


def what_we_see(title: str, committed: bool, fetch_failed: bool = False) -> str:
    """Chapter 05's "What we see": the committed table when the dataset (``title``) has
    full-scale results committed, else what this page's own run shows, and that it ranks nothing
    (``fetch_failed``: the committed results could not be fetched or read, so it does not say that
    none are committed)."""
    if committed:
        return ("**From the committed full-scale results**: the committed table above is the one to read beside "
                "the paper's Table 3.")
    lead = (f"**The committed full-scale results for {title} could not be read in this runtime** (the note above "
            "says what to do)" if fetch_failed else f"**No full-scale results are committed yet** for {title}")
    return (f"{lead}: apart from the paper's own Table 3 above, the tables on this page are this page's own "
            "run, which shows that feature learning, the OOD stage, DFR and the official metrics run through the "
            "real `wilds` loaders, and ranks nothing.")
