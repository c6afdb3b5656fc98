"""Views of the margin curve and of Table 2 under the protocol fixed before looking (chapters 04
and 09; the numbers are :mod:`featlib.experiments.margin_curve`'s).

* :func:`margin_curve_figure` -- FeAT's margin over the better baseline per objective against the
  OOD stage's length, one panel per dataset, with the per-seed spread and the lengths that matter
  marked (the authors' 501 steps, Table 2's calibrated 2,500, the converged length);
* :func:`protocols_table` -- per dataset and objective, the paper's margin beside ours under the
  calibrated protocol and under the protocol fixed before looking, each with its verdict;
* :func:`verdict_sentence` -- what holds under both protocols and what depends on the choice.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from featbook import prose, style
from featbook.tables import Table, table
from featlib.experiments.labels import DATASET_LABELS, OBJECTIVE_LABELS

#: The lengths drawn as vertical lines: the FeAT authors' run_exp.py (501 steps, scored at 500)
#: and Table 2's calibrated length (featlib.hparams.APPENDIX_F1["ood_steps"]).
AUTHORS_STEPS = 500


def margin_curve_figure(margins: pd.DataFrame, calibrated: int, converged: dict[str, int | None] | None = None,
                        title: str | None = None):
    """One panel per dataset: FeAT's margin (points) per objective against the OOD steps, the
    per-seed margins' std as error bars, zero drawn, and the authors' length, Table 2's calibrated
    length and each dataset's converged length (``converged``; None: not converged) marked."""
    datasets = [d for d in DATASET_LABELS if d in set(margins["dataset"])]
    if not datasets:
        raise ValueError("margins holds no dataset to draw")
    fig, axes = style.panels(len(datasets), max_columns=2, panel_height=2.6, extra_height=0.9)
    objectives = [o for o in OBJECTIVE_LABELS if o in set(margins["objective"])]
    colours = dict(zip(objectives, style.PALETTE))
    for ax, dataset in zip(axes, datasets):
        rows = margins[margins["dataset"] == dataset]
        for objective in objectives:
            line = rows[rows["objective"] == objective].sort_values("step")
            if line.empty:
                continue
            ax.errorbar(line["step"], line["margin"], yerr=line["seed_sd"].fillna(0), marker="o",
                        color=colours[objective], label=OBJECTIVE_LABELS[objective])
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.axvline(AUTHORS_STEPS, color="black", linestyle=":", linewidth=1, label="the authors' 501 steps")
        ax.axvline(calibrated, color="black", linestyle="--", linewidth=1, label="Table 2's calibrated length")
        length = (converged or {}).get(dataset)
        if length is not None:
            ax.axvline(length, color=style.colour("feat"), linestyle="-.", linewidth=1.2, label="converged length")
        ax.set_title(DATASET_LABELS[dataset])
        ax.set_xlabel("OOD steps")
        ax.set_ylabel("FeAT's margin (points)")
    style.legend_below(fig, axes, ncol=3)
    if title:
        fig.suptitle(title)
    return fig


def _verdict(margin: float, verdict: str) -> str:
    return f"{margin:+.2f} ({verdict})" if pd.notna(margin) else prose.MISSING


def protocols_table(calibrated: pd.DataFrame, fixed: pd.DataFrame, caption: str, note: str | None = None) -> Table:
    """Per dataset and objective: the paper's margin (``paper_margin`` of ``calibrated``, Table 2's
    :func:`feat_margins` frame, whose ``tie`` marks the rule's verdict), ours under Table 2's
    calibrated protocol, and ours under the protocol fixed before looking (``fixed``: rows of
    :func:`featlib.experiments.margin_curve.margins` at the converged length)."""
    rows = []
    fixed = fixed.set_index(["dataset", "objective"])
    for r in calibrated.itertuples():
        verdict = "tie" if r.tie else ("lead" if r.margin > 0 else "loss")
        paper = "tie" if r.paper_tie else ("lead" if r.paper_margin > 0 else "loss")
        key = (r.dataset, r.objective)
        late = fixed.loc[key] if key in fixed.index else None
        rows.append({"Dataset": DATASET_LABELS.get(r.dataset, r.dataset),
                     "Objective": OBJECTIVE_LABELS.get(r.objective, r.objective),
                     "Paper": _verdict(r.paper_margin, paper),
                     "Calibrated (2,500 steps)": _verdict(r.margin, verdict),
                     "Fixed before looking": (prose.MISSING if late is None else
                                              f"{_verdict(late['margin'], late['verdict'])}, {int(late['step']):,} "
                                              "steps")})
    return table(pd.DataFrame(rows), caption=caption, note=note, wrap=("Fixed before looking",))


def counts(verdicts: pd.Series) -> str:
    """'4 leads, 1 tie, 1 loss' from a series of verdicts."""
    plural = {"lead": "leads", "tie": "ties", "loss": "losses"}
    parts = [prose.count(n, v, plural[v]) for v in ("lead", "tie", "loss") if (n := int((verdicts == v).sum()))]
    return ", ".join(parts) or "no row"


def verdict_sentence(calibrated: pd.DataFrame, fixed: pd.DataFrame, dataset: str) -> str:
    """One sentence for ``dataset``: FeAT's rows under each protocol, and the objectives whose
    verdict changes with the protocol (what depends on the choice)."""
    cal = calibrated[calibrated["dataset"] == dataset].assign(
        verdict=lambda f: np.where(f["tie"], "tie", np.where(f["margin"] > 0, "lead", "loss")))
    late = fixed[fixed["dataset"] == dataset]
    both = cal.merge(late[["objective", "verdict"]], on="objective", suffixes=("_cal", "_fixed"))
    moved = [OBJECTIVE_LABELS.get(o, o) for o, a, b in both[["objective", "verdict_cal", "verdict_fixed"]]
             .itertuples(index=False) if a != b]
    name = DATASET_LABELS.get(dataset, dataset)
    text = (f"On {name}, FeAT's features give {counts(cal['verdict'])} under the calibrated protocol and "
            f"{counts(late['verdict'])} under the one fixed before looking")
    listed = ", ".join(moved[:-1]) + (" and " if len(moved) > 1 else "") + moved[-1] if moved else ""
    return text + (f"; the verdict depends on the protocol for {listed}." if moved else
                   "; no row's verdict depends on the protocol.")
