"""Views of the margin curve and of Table 2 under the protocol fixed before looking (chapters 04
and 09; the numbers are :mod:`featlib.experiments.margin_curve`'s).

* :func:`margin_curve_figure` -- FeAT's margin over the better baseline per objective against the
  OOD stage's length, one panel per dataset, with the per-seed spread and the lengths that matter
  marked (the authors' 501 steps, Table 2's calibrated 2,500, the converged length);
* :func:`protocols_table` -- per dataset and objective, the paper's margin beside ours under the
  calibrated protocol and under the protocol fixed before looking, each with its verdict;
* :func:`verdict_sentence` -- what holds under both protocols and what depends on the choice;
* :func:`committed_margin` -- the committed studies, read under the protocol fixed before looking,
  with :func:`curve_figure` and :func:`curve_sentence` to show them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from featbook import prose, style
from featbook.tables import Stacked, Table, table
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
    :func:`featlib.experiments.margin_curve.margins` at the converged length, which ``caption``
    names). Each row a card on a phone."""
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
                     "Fixed before looking": (prose.MISSING if late is None else _verdict(late['margin'], late['verdict']))})
    return table(pd.DataFrame(rows), caption=caption, note=note, cards=True)


def counts(verdicts: pd.Series) -> str:
    """'4 leads, 1 tie, 1 loss' from a series of verdicts."""
    return counts_phrase({v: int((verdicts == v).sum()) for v in ("lead", "tie", "loss")})


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


# -- the committed margin curve (chapters 04 and 09) -------------------------------------------------
#: The study of each dataset in the committed folder (featlib.experiments.gap_studies).
STUDY_OF = {"cmnist025": "margin-curve-025", "cmnist01": "margin-curve-01"}
COMMAND = ("for study in margin-curve-025 margin-curve-01; do python -m featlib.cli.gap_studies $study --seeds 1 2 3 "
           "--out results/cmnist-margin; done")


@dataclass
class CommittedMargin:
    """The committed margin-curve studies as chapters 04 and 09 read them: per dataset, the
    :class:`~featlib.experiments.margin_curve.Curve` under the protocol fixed before looking
    (``curves``: Appendix F.1's grid widened where a choice is on its edge, test-domain selection);
    each study's provenance and rows (``frames``, which the other rules read on demand); or why none
    is shown (``missing``)."""

    curves: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    frames: dict = field(default_factory=dict)  # each dataset's committed rows
    missing: str = ""
    located: Any = None

    @property
    def datasets(self) -> list[str]:
        return [d for d in DATASET_LABELS if d in self.curves]

    def whole(self, dataset: str) -> bool:
        """The dataset's curve has the seeds a verdict needs
        (:data:`featlib.experiments.margin_curve.CURVE_MIN_SEEDS`)."""
        from featlib.experiments.margin_curve import CURVE_MIN_SEEDS

        return dataset in self.curves and len(self.curves[dataset].seeds) >= CURVE_MIN_SEEDS

    def made_by(self) -> str:
        """One folded block: how each dataset's study was made (HTML)."""
        from featbook.cmnist_shared import collapsed_provenance

        inner = []
        for d in [d for d in self.datasets if d in self.provenance]:
            block = collapsed_provenance(self.provenance[d], size="50,000 training images",
                                         what=f"The margin curve, {DATASET_LABELS[d]}")
            inner.append(block[block.index("</summary>") + len("</summary>"):block.rindex("</details>")])
        return ('<details class="feat-provenance"><summary>How these runs were made</summary>' + "".join(inner)
                + "</details>") if inner else ""

    def show_source(self) -> None:
        from IPython.display import HTML, Markdown, display

        display(HTML(self.made_by()) if self.curves else Markdown(self.missing))


def committed_margin(folder: str | None) -> CommittedMargin:
    """The margin-curve studies committed to ``folder`` (``results/cmnist-margin``), read through
    the store's checking loader, each dataset's study on its own (a dataset may have fewer seeds)."""
    from featbook import committed, evidence
    from featlib.experiments.results import load_study

    located = committed.locate(folder)
    found = {d: committed.load(located, load_study, name) for d, name in STUDY_OF.items()}
    if not any(found.values()):
        return CommittedMargin(missing=evidence.missing(located, "margin curve", COMMAND), located=located)
    return read_studies(found, located)


def read_studies(found: dict, located: Any = None) -> CommittedMargin:
    """:class:`CommittedMargin` of each dataset's study as the store's loader returns it (``found``:
    dataset -> ``{"frame", "provenance"}``, or None where the dataset has none)."""
    from featlib.experiments import margin_curve

    found = {d: f for d, f in found.items() if f is not None}
    curves, frames = {}, {}
    for dataset, study in found.items():
        frames[dataset] = frame = study["frame"].query("dataset == @dataset")
        curves.update(margin_curve.read(frame, rule="widened"))
    return CommittedMargin(curves, {d: f["provenance"] for d, f in found.items()}, frames, located=located)


def size_phrase(curve) -> str:
    """'3 seeds' / 'seed 1 only' for a :class:`~featlib.experiments.margin_curve.Curve`."""
    return prose.count(len(curve.seeds), "seed") if len(curve.seeds) > 1 else f"seed {curve.seeds[0]} only"


def curve_figure(found: CommittedMargin, calibrated: int):
    """:func:`margin_curve_figure` of the committed curves; a panel whose dataset has fewer seeds
    than a verdict needs says so in its title, and draws no converged length."""
    import pandas as pd

    rows = pd.concat([found.curves[d].margins for d in found.datasets], ignore_index=True)
    converged = {d: found.curves[d].converged for d in found.datasets if found.whole(d)}
    fig = margin_curve_figure(rows, calibrated, converged)
    for ax, dataset in zip([a for a in fig.axes if a.get_title()], found.datasets):
        curve = found.curves[dataset]
        ax.set_title(f"{DATASET_LABELS[dataset]}, {size_phrase(curve)}"
                     + ("" if found.whole(dataset) else "\n(too few seeds: no verdict)"))
    return fig


def fixed_margins(found: CommittedMargin) -> pd.DataFrame:
    """FeAT's margins where the protocol fixed before looking reads each dataset's table (the
    converged length, else the longest scored one), for the datasets with the seeds a verdict needs."""
    parts = [found.curves[d].at(found.curves[d].length) for d in found.datasets if found.whole(d)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["dataset", "step", "objective", "best_other", "margin", "spread", "verdict", "seed_sd", "n_seeds"])


def _mean(counts) -> str:
    sd = counts["mean_margin_sd"]
    spread = f" ± {sd:.2f}" if pd.notna(sd) and sd > 0 else ""
    return f"{counts['mean_margin']:+.2f}{spread} points ({counts_phrase(counts)})"


def counts_phrase(counts) -> str:
    """'4 leads, 2 ties' from a :func:`~featlib.experiments.margin_curve.verdicts` row (or a dict
    verdict -> number)."""
    plural = {"lead": "leads", "tie": "ties", "loss": "losses"}
    return ", ".join(prose.count(int(counts[v]), v, plural[v]) for v in ("lead", "tie", "loss") if int(counts[v])) or "no row"


def _too_few(names: str, curve) -> str:
    """The sentence for a curve (or several of the same size, ``names``) too small for a verdict."""
    from featlib.experiments.margin_curve import CURVE_MIN_SEEDS

    return (f"On {names} the curve has {size_phrase(curve)} of the {CURVE_MIN_SEEDS} a verdict needs, so it ranks "
            "nothing yet: with one seed there is no spread to tell a lead from a tie.")


def curve_sentence(found: CommittedMargin, dataset: str, calibrated: int, paper_margin: float | None) -> str:
    """What the margin curve shows on ``dataset``: FeAT's mean margin over the objectives (± the
    seeds' spread of each seed's mean margin) at the authors' 501 steps, at Table 2's calibrated
    length and at the converged length, with the rule's counts, beside the paper's mean margin; or,
    with fewer seeds than a verdict needs, the size and that it ranks nothing."""
    curve = found.curves[dataset]
    name = DATASET_LABELS[dataset]
    if not found.whole(dataset):
        return _too_few(name, curve)
    paper = (f"; the paper's Table 2 gives {paper_margin:+.2f} (its mean margin over the same objectives)"
             if paper_margin is not None and pd.notna(paper_margin) else "")
    if curve.converged is None:
        where = (f"it has not converged by {prose.integer(curve.last)} steps (a cell still rises by more than its "
                 f"seed spread), so the protocol reads it there: {_mean(curve.counts_at(curve.last))}")
    else:
        where = (f"it converges at {prose.integer(curve.converged)} steps, where FeAT's margin is "
                 f"{_mean(curve.counts_at(curve.converged))}")
    return (f"On {name} ({size_phrase(curve)}), FeAT's mean margin over the better baseline is "
            f"{_mean(curve.counts_at(AUTHORS_STEPS))} at the authors' 501 steps and "
            f"{_mean(curve.counts_at(calibrated))} at the calibrated {prose.integer(calibrated)}; {where}{paper}.")


def curves_text(found: CommittedMargin, calibrated: int, paper_mean: dict) -> str:
    """Chapter 04's paragraph under the figure: :func:`curve_sentence` for each dataset with a
    committed curve, then which datasets have none yet and the study that makes it
    (``paper_mean``: the paper's mean margin per dataset)."""
    if not found.curves:
        return "Until the margin curve is committed, Table 2 is read at its calibrated length only."
    short = [d for d in found.datasets if not found.whole(d)]
    merged = len(short) > 1 and len({size_phrase(found.curves[d]) for d in short}) == 1  # one sentence for them
    said = [curve_sentence(found, d, calibrated, paper_mean.get(d)) for d in found.datasets
            if not (merged and d in short)]
    if merged:
        said.append(_too_few(" and ".join(DATASET_LABELS[d] for d in short), found.curves[short[0]]))
    for dataset in [d for d in STUDY_OF if d not in found.curves]:
        said.append(f"{DATASET_LABELS[dataset]}'s curve is not committed yet "
                    f"(the study `{STUDY_OF[dataset]}`), so it is read at the calibrated length only.")
    return " ".join(said)


# -- chapter 09: the protocol fixed before looking, cell by cell ---------------------------------------
def convergence_table(found: CommittedMargin) -> Table:
    """Per dataset with the seeds a verdict needs: where the rule fixed before looking says the
    table has converged (:func:`~featlib.experiments.margin_curve.converged_length`), and the
    evidence at the length before it: the largest rise of any cell at a later length beyond that
    later cell's seed std (points), with the cell that makes it. One row per dataset."""
    from featlib.experiments.labels import LEARNER_LABELS

    def cell(by: str) -> str:  # "cmnist025/erm/irmx at 3,000" -> "ERM's IRMX at 3,000"
        name, at = by.split(" at ")
        _, learner, objective = name.split("/")
        return f"{LEARNER_LABELS.get(learner, learner)}'s {OBJECTIVE_LABELS.get(objective, objective)} at {at}"

    rows = []
    for dataset in [d for d in found.datasets if found.whole(d)]:
        curve = found.curves[dataset]
        report = curve.report.set_index("step")
        steps = list(report.index)
        # the length before the converged one (or the last judged one): the latest still rising
        before = steps[steps.index(curve.converged) - 1] if curve.converged in steps[1:] else (
            None if curve.converged is not None else steps[-2] if len(steps) > 1 else None)
        rising = report.loc[before] if before is not None else None
        rows.append({
            "Dataset": DATASET_LABELS[dataset],
            "Converged": (f"at {prose.integer(curve.converged)} steps" if curve.converged is not None else
                          f"not within {prose.integer(curve.last)} steps"),
            "Still rising before": ("at the first length scored" if rising is None else
                                    f"at {prose.integer(before)}: {rising['rise']:.2f} points beyond its seed std, "
                                    f"{cell(rising['by'])}")})
    return table(pd.DataFrame(rows), caption="Where each dataset's table stops rising (the rule fixed before looking)",
                 note="A rise: a cell's mean at a later length minus its mean at this one, less its seed std at the "
                      "later length (points). The converged length is the first from which no cell rises so.",
                 wrap=("Still rising before",), cards=True)


def _cell(row, digits: int = 1) -> str:
    if row is None or pd.isna(row["mean"]):
        return prose.MISSING
    return f"{100 * row['mean']:.{digits}f} ± {100 * row['std']:.{digits}f}"


def fixed_table(found: CommittedMargin, dataset: str, calibrated: pd.DataFrame | None) -> Table:
    """Table 2's frozen columns on ``dataset`` under the protocol fixed before looking (the
    converged length, else the longest; Appendix F.1's grid widened where a choice sits on its edge),
    cell by cell, with the calibrated protocol's cell (``calibrated``: Table 2's runs, selected as
    Table 2 selects) under it; a chosen weight on the widest grid's edge is marked."""
    from featlib.experiments.colored_mnist import select_best
    from featlib.experiments.labels import LEARNER_LABELS
    from featlib.experiments.margin_curve import BASELINES, FEAT

    curve = found.curves[dataset]
    at = curve.cells[curve.cells["step"] == curve.length].set_index(["learner", "objective"])
    cal = None
    if calibrated is not None:
        cal = select_best(calibrated[(calibrated["dataset"] == dataset)
                                     & calibrated["learner"].isin([FEAT, *BASELINES])]).set_index(["learner", "objective"])
    rows, marked = [], False
    objectives = [o for o in OBJECTIVE_LABELS if o in set(at.index.get_level_values("objective"))]
    for objective in objectives:
        row = {"Objective": OBJECTIVE_LABELS[objective]}
        for learner in (FEAT, *BASELINES):
            mine = at.loc[(learner, objective)] if (learner, objective) in at.index else None
            text = _cell(mine)
            if mine is not None and bool(mine.get("binding", False)):
                text, marked = text + " †", True
            theirs = cal.loc[(learner, objective)] if cal is not None and (learner, objective) in cal.index else None
            row[LEARNER_LABELS[learner]] = Stacked(text, _cell(theirs)) if cal is not None else text
        rows.append(row)
    note = ("Worst-test accuracy (%), mean ± std over the curve's seeds; second line: Table 2's calibrated cell "
            "(2,500 steps, its own seeds and grid)." if cal is not None else
            "Worst-test accuracy (%), mean ± std over the curve's seeds.")
    if marked:
        note += " †: the chosen weight sits on the edge of every weight the study tried (10⁰ or 10⁶): it binds."
    steps = prose.integer(curve.length) + (" steps (converged)" if curve.converged is not None
                                           else " steps (the longest; not converged)")
    return table(pd.DataFrame(rows), caption=f"Table 2 under the protocol fixed before looking, "
                                             f"{DATASET_LABELS[dataset]}: {steps}, {size_phrase(curve)}",
                 note=note, key="Table 2's calibrated cell")


#: The choices the fixed protocol made, each read from the same runs (chapter 09's table of them):
#: (label, grid rule, selection score).
CHOICES = (("The fixed rule: F.1's grid widened at an edge", "widened", "worst_test_acc"),
           ("F.1's grid as printed, 10¹-10⁵", "f1", "worst_test_acc"),
           ("Every weight tried, 10⁰-10⁶", "widest", "worst_test_acc"),
           ("Chosen on validation, the rule's grid", "widened", "val_acc"))


def choices_table(found: CommittedMargin, calibrated: int) -> Table:
    """How FeAT's verdict moves with each choice (:data:`CHOICES`), per dataset with the seeds a
    verdict needs: its leads, ties and losses and its mean margin at the authors' 501 steps, at
    Table 2's calibrated length and where the fixed rule reads the table, each read from the
    dataset's committed rows."""
    from featlib.experiments import margin_curve

    rows = []
    for dataset in [d for d in found.datasets if found.whole(d)]:
        length = found.curves[dataset].length
        for label, rule, score in CHOICES:
            curve = (found.curves if (rule, score) == ("widened", "worst_test_acc") else
                     margin_curve.read(found.frames[dataset], rule=rule, score=score))[dataset]
            row = {"Dataset": DATASET_LABELS[dataset], "Choice": label}
            for step, name in ((AUTHORS_STEPS, "501 steps"), (calibrated, f"{prose.integer(calibrated)} (calibrated)"),
                               (length, f"{prose.integer(length)} (the rule's)")):
                counts = curve.counts_at(step)
                row[name] = f"{counts['mean_margin']:+.2f}: {counts_phrase(counts)}"
            rows.append(row)
    return table(pd.DataFrame(rows), caption="FeAT's mean margin over the better baseline, and its leads, ties and "
                                             "losses, under each choice, from the same runs",
                 note="Points, the mean over the penalised objectives (IB-IRM repeats IRMv1 on frozen features).",
                 wrap=("Choice",), cards=True)
