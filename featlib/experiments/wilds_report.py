"""The frames of Table 3 (ours beside the paper's) and DFR / DFR-s that ``python -m featlib.cli.run_wilds``
writes (``table3.csv``, ``dfr_table.csv``); chapter 05 lays them out (:mod:`featbook.wilds_views`).

Our scores come from :class:`~featlib.experiments.wilds_experiment.WildsResults`; the paper's
from :data:`~featlib.experiments.paper_values.TABLE3`, always in their own, labelled column.
WILDS reports accuracies and F1 in [0, 1]; the paper (and these frames) in percent.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..data.wilds_data import WILDS_DATASETS
from .paper_values import TABLE3
from .labels import LEARNER_LABELS, OBJECTIVE_LABELS
from .wilds_experiment import WildsResults


def mean_std(mean: float, std: float) -> str:
    if mean is None or np.isnan(mean):
        return "-"
    return f"{mean:.2f} ± {std:.2f}" if std is not None and not np.isnan(std) else f"{mean:.2f}"


def _paper(dataset: str, learner: str, row: str) -> str:
    value = TABLE3.get(dataset, {}).get((learner, row))
    return "-" if value is None else mean_std(*value)


def table3_frame(results: WildsResults, dataset: str) -> pd.DataFrame:
    """Table 3's lower block for one dataset: per learner and OOD objective, our test
    score (mean ± std over seeds, at the penalty weight chosen on OOD validation) and the paper's."""
    spec = WILDS_DATASETS.get(dataset)
    selected = results.table()
    rows = []
    for _, r in selected.iterrows():
        rows.append({
            "Init.": LEARNER_LABELS[r["learner"]], "Method": OBJECTIVE_LABELS[r["objective"]],
            f"ours: {spec.metric_label}": mean_std(100 * r["test_mean"], 100 * r["test_std"]),
            "ours: OOD val.": f"{100 * r['val_mean']:.2f}",
            "penalty weight": "-" if r["objective"] in ("erm", "group_dro") else f"{r['penalty_weight']:g}",
            "seeds": int(r["seeds"]),
            f"paper: {spec.metric_label}": _paper(dataset, r["learner"], r["objective"]),
        })
    order = {m: i for i, m in enumerate(LEARNER_LABELS.values())}
    obj_order = {m: i for i, m in enumerate(OBJECTIVE_LABELS.values())}
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table = table.sort_values(["Init.", "Method"], key=lambda s: s.map(order if s.name == "Init." else obj_order))
    return table.reset_index(drop=True)


def dfr_table_frame(results: WildsResults, dataset: str) -> pd.DataFrame:
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
        rows.append({"Init.": LEARNER_LABELS[r["learner"]], "Method": OBJECTIVE_LABELS[row],
                     "ours": mean_std(100 * r["mean"], 100 * r["std"]), "C per seed": r["C"],
                     "seeds": int(r["seeds"]), "paper": _paper(dataset, r["learner"], row),
                     "what is measured": spec.metric_label if row == "dfr" else
                     f"worst-group acc. predicting '{spec.spurious_field}'"})
    return pd.DataFrame(rows)
