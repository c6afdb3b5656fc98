"""How the WILDS chapter (05) shows its results: tables that fit the column, figures in the
book's style. The numbers come from :mod:`.wilds_report`; this module lays them out (ours and
the paper's value in one cell, labels instead of ids, no index column, no ``NaN``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from featlib import style
from featbook import prose
from featbook.tables import Stacked, Table, table
from featlib.experiments import wilds_report as report
from featlib.experiments.labels import LEARNER_LABELS


#: How a reader reads the WILDS split names (the package's ``train``, ``val``, ``test``, ``id_val``, ``id_test``).
SPLIT_LABELS = {"train": "training", "val": "OOD validation", "test": "OOD test", "id_val": "ID validation",
                "id_test": "ID test"}


def split_summary(data) -> Table:
    """Examples, domains and label shares per split, the splits named as a reader reads them."""
    frame = report.split_summary(data)
    frame["split"] = [SPLIT_LABELS.get(s, s) for s in frame["split"]]
    shares = [c for c in frame.columns if c.startswith("share of class")]
    return table(frame, caption="The WILDS splits", formats={c: lambda v: prose.percent(v, 1) for c in shares}
                 | {"examples": prose.integer})


def _stack(ours: str, paper: str) -> Stacked:
    return Stacked(ours, "" if paper in ("", "-", None) else paper, paper=True)


def table3(frame: pd.DataFrame, metric_label: str, caption: str, with_paper: bool = True) -> Table:
    """Table 3's OOD-objective rows (the frame of :func:`.wilds_report.table3`): ours with the
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
    """DFR / DFR-s rows (the frame of :func:`.wilds_report.dfr_table`); the paper's values under
    ours only ``with_paper`` (full-scale results, never a test run's)."""
    if frame.empty:
        return table(frame, caption=caption)
    shown = pd.DataFrame({
        "features": frame["Init."],
        "refit": frame["Method"],
        "test score": [_stack(o, p if with_paper else "") for o, p in zip(frame["ours"], frame["paper"])],
        "what is measured": frame["what is measured"],
        "C per seed": frame["C per seed"],
    })
    return table(shown, caption=caption, wrap=["what is measured", "C per seed"],
                 note="Ours (mean ± std over seeds), the paper's under it in grey where it prints one." if with_paper
                 else "Mean ± std over seeds.")


def rounds_table(frame: pd.DataFrame, caption: str) -> Table:
    """The feature-learning history (the frame of :func:`.wilds_report.rounds_table`)."""
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


def committed_table3(frame: pd.DataFrame, caption: str) -> Table:
    """A committed ``table3.csv`` (the frame :func:`.wilds_report.table3` wrote)."""
    metric = next((c[len("ours: "):] for c in frame.columns if c.startswith("ours: ") and c != "ours: OOD val."), "score")
    frame = frame.fillna("-").astype({c: str for c in frame.columns if c != "seeds"})
    return table3(frame, metric, caption)


def examples(data, per_group: int = 4):
    """A few raw training inputs per domain: a grid of images, or a table of texts."""
    shown = report.show_examples(data, per_group=per_group)
    if isinstance(shown, pd.DataFrame):
        return table(shown, caption="Training comments of a few domains", wrap=["text"])
    return shown


def table3_figure(results, dataset: str, with_paper: bool = True, title: str | None = None):
    """Test score per OOD objective and learner (ours, bars) with the paper's
    values (black marks; ``with_paper``: full-scale results only)."""
    fig, axes = style.subplots(1, 1, panel_height=3.0, extra_height=0.9)
    report.plot_table3(results, dataset, ax=axes[0, 0], with_paper=with_paper, title=title)
    if axes[0, 0].get_legend():
        axes[0, 0].get_legend().remove()
    style.legend_below(fig, axes[0, 0], ncol=3)
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
    return (f"{lead}: the tables on this page are this page's own "
            "run, which shows that feature learning, the OOD stage, DFR and the official metrics run through the "
            "real `wilds` loaders, and ranks nothing.")
