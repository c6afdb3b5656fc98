"""Chapter 09's views (*How the numbers were made*): the protocol's decisions and presets, Table 7
under each choice of the retention accuracy, the gap studies (ERM-NF with the ERM objective, the
frozen heads' length, Bonsai's DRO round, CLOvE's implementation and grid, the OOD stage's length)
and the comparison of the OOD stage's paths and precisions, as tables and the one sentence each
study concludes with.

The numbers come from :mod:`featlib.experiments.cmnist_analysis` and
:mod:`featlib.experiments.gap_studies`; Table 7's frame and table, which chapter 04 shows too, from
:mod:`featbook.cmnist_shared`.
"""
from __future__ import annotations

from collections.abc import Sequence

import re

import numpy as np
import pandas as pd

from featbook import prose, style
from featbook.evidence import show_all as _show
from featbook.gap_study_views import (weight_label, erm_nf_erm_table, erm_nf_erm_conclusion, frozen_steps_table, frozen_steps_conclusion, bonsai_dro_length_table, bonsai_dro_length_conclusion, clove_01_table, clove_01_conclusion, clove_grid_table, clove_grid_conclusion)
from featbook.tables import Stacked, Table, Tables, table
from featlib.experiments.cmnist_analysis import FAR_Z, FROZEN_LEARNERS, best_by_step
from featlib.experiments.colored_mnist import select_best
from featlib.experiments.labels import DATASET_LABELS, LEARNER_LABELS, OBJECTIVE_LABELS
from featlib.experiments.paper_values import TABLE2


# -- the protocol's decisions and presets ----------------------------------------------------------
#: A signed decimal written with a hyphen in a hand-written source ("-1.37", "(-0.22"), not a
#: range ("3-4") nor a dataset ("-01", "-025"): :func:`_minus_signs` gives it a minus sign.
_HYPHEN_NUMBER = re.compile(r"(?<![\w.])-(?=\d+\.\d)")


def _minus_signs(text: str) -> str:
    """``text`` with the minus sign (U+2212) the tables print, where a hand-written source typed a
    hyphen before a signed decimal."""
    return _HYPHEN_NUMBER.sub("\u2212", text)


DECISIONS_CAPTION = "Where the paper leaves ColoredMNIST's protocol open, and what decided it"
#: The caption of the protocol fixed before looking (featlib.hparams.CONVERGED_PROTOCOL).
FIXED_CAPTION = "The protocol fixed before looking: each rule and why, none using the paper's numbers"


def decisions_html(decisions, caption: str = DECISIONS_CAPTION) -> str:
    """Chapter 09's whole form of chapter 04's :func:`featbook.ch04_views.decisions_table`: per open
    choice, the value featlib runs and its source in one short paragraph, the measurement that decided
    it (the part of the source from "Measured" on) folded under it, so that a long piece of evidence
    never fills a table cell; under ``caption``."""
    import html as html_lib

    parts = []
    for name, h in decisions.items():
        source = _minus_signs(str(h.source))
        cut = source.find(" Measured")
        head, measured = (source, "") if cut < 0 else (source[:cut], source[cut + 1:])
        block = (f'<p><strong>{html_lib.escape(name)}: {html_lib.escape(str(h.value))}.</strong> '
                 f"{html_lib.escape(head[0].upper() + head[1:])}</p>")
        if measured:
            block += (f'<details class="feat-provenance" style="margin: -0.6em 0 1.2em 0"><summary>What was measured</summary>'
                      f"<p>{html_lib.escape(measured)}</p></details>")
        parts.append(block)
    return ('<div class="feat-decisions"><p class="feat-table-caption" style="font-weight: 600">'
            f"{html_lib.escape(caption)}</p>" + "".join(parts) + "</div>")


def presets_table(presets) -> Table:
    """The protocol presets (:data:`.cmnist_presets.PROTOCOL_PRESETS`): name, what it sets, source."""
    rows = [{"preset": name, "what it sets": presets.get(name).description, "source": presets.get(name).source}
            for name in presets.names()]
    return table(pd.DataFrame(rows), caption="Protocol presets of ColoredMNIST", wrap=["what it sets", "source"],
                 cards=True)


# -- Table 7 under each choice ---------------------------------------------------------------------
_METRIC_LABELS = {"train_acc": "training acc.", "retention_acc": "retention acc. (÷ (k−1))", "ood_acc": "OOD acc."}


def table7_choices_table(comparison: pd.DataFrame, caption: str) -> Table:
    """The frame of :func:`~featlib.experiments.cmnist_analysis.against_table7` as a table: one row
    per Table 7 cell, one column per choice (mean ± std over seeds, and the distance to the paper in
    its stds under it), and the paper's value."""
    rows = {}
    for _, r in comparison.iterrows():
        key = (int(r["round"]), r["metric"])
        row = rows.setdefault(key, {"round": str(key[0]), "quantity": _METRIC_LABELS.get(r["metric"], r["metric"])})
        ours = prose.seed_mean(r["mean"], r["std"], r["n_seeds"])
        row[f"{r['choice']} (n = {int(r['n_seeds'])})"] = Stacked(ours, f"{prose.stds(r['z'])} paper std", paper=True)
        row["paper"] = prose.mean_std(r["paper_mean"], r["paper_std"])
    order = list(_METRIC_LABELS)
    frame = pd.DataFrame([rows[k] for k in sorted(rows, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 9))])
    columns = ["round", "quantity"] + [c for c in frame.columns if c not in ("round", "quantity", "paper")] + ["paper"]
    return table(frame[columns], caption=caption, key="ours minus the paper's, in the paper's stds",
                 note="Mean ± std over seeds (%); under it, (ours − paper) divided by the paper's std.")


# -- the OOD stage's length ------------------------------------------------------------------------
def ood_length_table(summary: pd.DataFrame, dataset: str, score: str = "worst_test_acc") -> Table:
    """An ``ood-length`` study's Table 2 at each length (:func:`featlib.experiments.gap_studies.ood_length_summary`):
    rows the learners, columns the OOD stage's lengths, each cell the column's mean distance from the
    paper's cells in paper standard deviations."""
    part = summary[(summary["dataset"] == dataset) & (summary["score"] == score)]
    steps = sorted(part["step"].unique())
    rows = []
    for learner in [l for l in LEARNER_LABELS if l in set(part["learner"])]:
        cells = part[part["learner"] == learner].set_index("step")
        rows.append({"features": LEARNER_LABELS[learner],
                     **{f"{prose.integer(s)} steps": prose.signed(cells.loc[s, 'z']) for s in steps}})
    n = int(part["n_seeds"].max()) if len(part) else 0
    rule = "on the test environments" if score == "worst_test_acc" else "on the validation environments"
    return table(pd.DataFrame(rows), caption=f"{DATASET_LABELS[dataset]}: each column's mean distance from the paper's "
                                             f"cells (paper standard deviations), selected {rule}",
                 note=f"Penalised objectives; {prose.over_seeds(n)}, full data; every objective on Appendix F.1's grid (the "
                      "studies precede the decided ColoredMNIST-01 CLOvE grid). 0 is the paper's table.")


def length_cells_table(frame: pd.DataFrame, dataset: str, learner: str, protocol_steps: int,
                       steps: Sequence[int] | None = None) -> Table:
    """A length study's cells one by one (``ood-length-025-erm``, chapter 09): a row per length of
    the OOD stage (``steps``, default every scored one), a column per objective, each cell Table 2's
    rule at that length (the configuration with the best mean worst-test accuracy over the study's
    seeds), mean ± std over seeds (%); the paper's cells in the last row. Long, not wide: it reads
    on a phone."""
    part = frame[(frame["dataset"] == dataset) & (frame["learner"] == learner) & (frame["step"] > 0)]
    steps = sorted(part["step"].unique()) if steps is None else [s for s in steps if s in set(part["step"])]
    objectives = [o for o in OBJECTIVE_LABELS if o in set(part["objective"])]
    n = int(part["seed"].nunique()) if len(part) else 0
    best = {o: best_by_step(part[part["objective"] == o]) for o in objectives}
    rows = []
    for step in steps:
        row = {"OOD steps": prose.integer(step) + (" (protocol)" if step == protocol_steps else "")}
        for objective in objectives:
            cell = best[objective][step]
            row[OBJECTIVE_LABELS[objective]] = prose.seed_mean(cell["mean"], cell["std"], n, scale=100)
        rows.append(row)
    paper = {OBJECTIVE_LABELS[o]: (prose.mean_std(*cell) if (cell := TABLE2.get(dataset, {}).get(o, {}).get(learner))
                                   else prose.MISSING) for o in objectives}
    rows.append({"OOD steps": "the paper's", **paper})
    return table(pd.DataFrame(rows), caption=f"{DATASET_LABELS[dataset]}, {LEARNER_LABELS[learner]}'s features: the "
                                             "cell at each length of the OOD stage",
                 note=f"Each cell: the best configuration at that length, its worst-test accuracy (%), {prose.over_seeds(n)}, "
                      "full data; the paper's: mean ± std over 10 seeds.")


def length_cell_sentence(frame: pd.DataFrame, dataset: str, learner: str, objective: str, protocol_steps: int,
                         threshold: float | None = None) -> str:
    """What a length study says of one cell (chapter 09): its value at the protocol's length and at
    the longest scored, how much it still rises past the protocol's, and at which lengths it lands
    within ``threshold`` paper stds of the paper's cell (default :data:`FAR_Z`, chapter 04's far
    cells' band). "" when the study lacks the cell or the protocol's length."""
    threshold = FAR_Z if threshold is None else threshold
    part = frame[(frame["dataset"] == dataset) & (frame["learner"] == learner) & (frame["objective"] == objective)
                 & (frame["step"] > 0)]
    if part.empty or protocol_steps not in set(part["step"]):
        return ""
    at = best_by_step(part)
    paper = TABLE2.get(dataset, {}).get(objective, {}).get(learner)
    n = int(part["seed"].nunique())

    def value(step):
        return prose.seed_mean(at[step]["mean"], at[step]["std"], n, scale=100)

    last = max(at)
    later = [s for s in sorted(at) if s > protocol_steps]
    said = (f"Over {prose.count(n, 'seed')}, {OBJECTIVE_LABELS[objective]} on {LEARNER_LABELS[learner]}'s features gives "
            f"{value(protocol_steps)} at the protocol's {prose.integer(protocol_steps)} steps")
    if later:
        said += ", " + prose.listing([f"{value(s)} at {prose.integer(s)}" for s in later])
        rise = 100 * (at[last]["mean"] - at[protocol_steps]["mean"])
        said += (f": {prose.number(rise, 1, sign=True)} points from the protocol's length to "
                 f"{prose.integer(last)} steps")
    said += "."
    if paper is None or not paper[1] > 0:
        return said
    near = [s for s in sorted(at) if abs(100 * at[s]["mean"] - paper[0]) <= threshold * paper[1]]
    band = f"within {prose.number(threshold, 0)} paper stds of the paper's {prose.mean_std(*paper)}"
    if not near:
        return f"{said} At no length scored does ours lie {band}."
    only = ", and there only," if len(near) < len(at) else ""
    return f"{said} At {prose.listing([prose.integer(s) for s in near])} steps{only} ours lies {band}."


# -- the OOD stage's paths and precisions ----------------------------------------------------------
def path_verdicts(comparison: pd.DataFrame, reference: str) -> str:
    """Chapter 04's verdict on the paths and precisions: per variant the sentence of
    :func:`featlib.experiments.path_comparison.verdicts`, and what it means for the protocol's
    default path and precision (:data:`featlib.experiments.colored_mnist.DEFAULT_OOD_PATH`,
    :data:`featlib.training.DEFAULT_PRECISION`). A table at 2,000 images is evidence for the
    paper's size, not proof: a precision that agrees is a candidate, not yet the default."""
    from featlib.experiments.colored_mnist import DEFAULT_OOD_PATH
    from featlib.experiments.path_comparison import Variant, verdicts
    from featlib.training import DEFAULT_PRECISION

    lines = []
    for v in verdicts(comparison, reference):
        text = v.sentence
        variant, default = Variant.parse(v.variant), Variant(DEFAULT_OOD_PATH, DEFAULT_PRECISION)
        if v.agrees is None or reference != default.name:
            lines.append(f"* {text}")
            continue
        if variant.path != default.path and variant.precision == default.precision:
            text += (f" So the {default.path} path, the default, computes the {variant.path} loop's Table 2 and stays "
                     "the default." if v.agrees else
                     f" So the {default.path} path, the default, does not compute the {variant.path} loop's Table 2: "
                     f"until that is understood, Table 2 is to be read from the {variant.path} loop.")
        elif variant.precision != default.precision and variant.path == default.path:
            text += (f" So {variant.precision} may replace {default.precision} as the default precision; the book "
                     f"keeps {default.precision} until the same judgement at 50,000 images, on a GPU where "
                     f"{variant.precision} pays, agrees as well." if v.agrees else
                     f" So {default.precision} stays the default precision.")
        lines.append(f"* {text}")
    return "\n".join(lines)


def _difference_cell(row, say_n: bool = True, identical: bool = False) -> Stacked:
    """One cell of :func:`path_comparison_tables`: the difference of the means in points ± the 95%
    paired half-width (``*`` where the interval excludes 0; ``(n = 1)`` where one seed gives no
    interval; "identical" where every seed gave the reference's accuracy), the two means (%) under
    it in grey."""
    difference = prose.number(100 * row.difference, 2, sign=True)
    if identical:
        main = "identical"
    elif row.n_seeds > 1:
        main = f"{difference}{prose.NBSP}±{prose.NBSP}{prose.number(100 * row.half_width, 2)}"
        main += f"{prose.NBSP}*" if bool(row.differs) else ""
    else:
        main = f"{difference} (n = 1)" if say_n else difference
    return Stacked(main, f"{prose.number(100 * row.reference_mean, 1)} → {prose.number(100 * row.mean, 1)}")


def path_comparison_tables(comparison: pd.DataFrame, reference: str) -> Tables:
    """The frame of :func:`featlib.experiments.path_comparison.compare` as one table per variant
    and dataset, laid out as Table 2 (rows the objectives, columns the learners):
    each cell the variant's mean minus the reference's, in points, with its 95% paired interval
    over seeds, and the two means under it."""
    from featlib.experiments.path_comparison import identical_cells

    out = []
    one_seed = set(comparison["n_seeds"]) == {1}  # said once in the note, not under every value
    datasets = [d for d in DATASET_LABELS if d in set(comparison["dataset"])]
    for variant, part in comparison.groupby("variant", sort=False):
        for dataset in datasets:
            rows = part[part["dataset"] == dataset]
            if rows.empty:
                continue
            same = identical_cells(rows)
            cells = {(r.objective, r.learner): _difference_cell(r, say_n=not one_seed, identical=bool(same.loc[r.Index]))
                     for r in rows.itertuples()}
            objectives = [o for o in OBJECTIVE_LABELS if o in set(rows["objective"])]
            learners = [l for l in LEARNER_LABELS if l in set(rows["learner"])]
            frame = pd.DataFrame({LEARNER_LABELS[l]: [cells.get((o, l), prose.MISSING) for o in objectives]
                                  for l in learners}, index=pd.Index([OBJECTIVE_LABELS[o] for o in objectives],
                                                                     name="objective"))
            out.append(table(frame, index=True, caption=f"{variant} minus {reference}: {DATASET_LABELS[dataset]}"))
    if out and one_seed:
        out[-1].note = ("Each cell: the variant's Table 2 mean minus the reference's, in points, at one seed (no "
                        "interval yet; a single seed's difference is not a judgement); under it, the reference's "
                        "mean → the variant's (%).")
    elif out:
        out[-1].note = ("Each cell: the variant's Table 2 mean minus the reference's, in points, ± the half-width of "
                        "the 95% paired interval over the seeds both have (* where it excludes 0), or \"identical\" "
                        "where every seed gave the reference's accuracy; under it, the reference's mean → the "
                        "variant's (%).")
    return Tables(out)


# -- how a Table 2 cell is chosen -------------------------------------------------------------------
_MARKERS = {"erm": "o", "bonsai": "s", "ifeat": "^", "erm_nf": "D"}


def table2_against_paper_figure(runs: pd.DataFrame, learners=FROZEN_LEARNERS, title: str | None = None):
    """Table 2 cell by cell, ours against the paper's: one panel per dataset, each cell (objective x
    learner, best configuration) a point at (the paper's mean, our mean) with the
    two standard deviations as bars, coloured by learner; on the diagonal ours equals the
    paper's. The ERM objective's cells (about 10-20%) are left out: the penalised objectives are
    where the learners differ."""
    best = select_best(runs[runs["learner"].isin(learners) & (runs["objective"] != "erm")])
    datasets = [d for d in DATASET_LABELS if d in set(best["dataset"])]
    fig, axes = style.panels(len(datasets), max_columns=2, extra_height=0.8)
    for ax, dataset in zip(axes, datasets):
        part = best[best["dataset"] == dataset]
        values = []
        for learner in learners:
            rows = part[part["learner"] == learner]
            paper = [TABLE2.get(dataset, {}).get(o, {}).get(learner, (np.nan, np.nan)) for o in rows["objective"]]
            x, xerr = np.array([m for m, _ in paper], dtype=float), np.array([e for _, e in paper], dtype=float)
            y, yerr = 100 * rows["mean"].to_numpy(), 100 * rows["std"].to_numpy()
            # a shape per column and open markers: the -025 cells near 70% lie on one another
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt=_MARKERS.get(learner, "o"), ms=5, mfc="white", mew=1.1,
                        capsize=0, lw=0.8, alpha=0.9, color=style.colour(learner, default="#999999"),
                        label=LEARNER_LABELS[learner])
            ok = np.isfinite(x)  # the limits hold every point with its bars
            values += [*(x - xerr)[ok], *(x + xerr)[ok], *(y - np.nan_to_num(yerr)), *(y + np.nan_to_num(yerr))]
        lo, hi = (min(values) - 2, max(values) + 2) if values else (0, 100)
        ax.plot([lo, hi], [lo, hi], color="#999999", lw=0.8, ls="--", zorder=0)
        ax.set(xlim=(lo, hi), ylim=(lo, hi), xlabel="the paper's Table 2 (%)", ylabel="ours (%)",
               title=DATASET_LABELS[dataset])
        ax.set_aspect("equal", adjustable="box")
    style.legend_below(fig, axes, ncol=len(learners))
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


# -- the page's evidence, each shown by one call of a visible cell ---------------------------------


def _made(study) -> str:
    from featbook.cmnist_shared import collapsed_provenance

    return collapsed_provenance(study["provenance"], size=None, what="The study")


def selection_table(by_test: pd.DataFrame, by_val: pd.DataFrame, caption: str) -> Table:
    """The configuration each rule picks per objective (frames indexed by objective, penalty weight
    and pre-training length, with the mean worst-test accuracy): the test-domain one (Table 2's)
    and the validation-selected one beside it, each with its mean worst-test accuracy (%)."""
    def side(frame):
        frame = frame.reset_index().set_index("objective")
        config = [f"{weight_label(r.penalty_weight) if r.penalty_weight else 'no penalty'}, {int(r.pretrain_epochs)} ep."
                  for r in frame.itertuples()]
        return pd.DataFrame({"configuration": config, "acc": [prose.number(100 * v) for v in frame["worst_test_acc"]]},
                            index=frame.index)
    test, val = side(by_test), side(by_val)
    order = [o for o in OBJECTIVE_LABELS if o in test.index]
    rows = [{"objective": OBJECTIVE_LABELS[o],
             "test-domain pick": Stacked(test.loc[o, "configuration"], f"{test.loc[o, 'acc']}%"),
             "validation pick": Stacked(val.loc[o, "configuration"], f"{val.loc[o, 'acc']}%")} for o in order]
    return table(pd.DataFrame(rows), caption=caption,
                 note="Each cell: the penalty weight and ERM pre-training epochs picked, and under it the mean "
                      "worst-test accuracy over seeds there (%).", key="the mean worst-test accuracy")


def show_ood_lengths(committed_gaps) -> dict:
    """The ``ood-length`` studies: each column's distance from the paper's cells per OOD length, under
    both selection rules, with how each study was made folded under it; returns the summaries."""
    from featbook import committed, evidence
    from featlib.experiments.gap_studies import ood_length_summary
    from featlib.experiments.results import load_study

    located = committed.locate(committed_gaps)
    studies = {d: committed.load(located, load_study, f"ood-length-{d[len('cmnist'):]}")
               for d in ("cmnist025", "cmnist01")}
    if not any(s is not None for s in studies.values()):
        _show(evidence.missing(located, "OOD-length study",
                               "python -m featlib.cli.gap_studies ood-length-025 --out results/cmnist-gaps"))
    summaries = {}
    for d, study in studies.items():
        if study is None:
            continue
        summary = summaries[d] = ood_length_summary(study["frame"])
        _show(ood_length_table(summary, d), ood_length_table(summary, d, score="val_acc"), _made(study))
    return summaries


def show_length_cell(committed_gaps, steps: int) -> bool:
    """The study of the one cell the length leaves open (IRMX on ColoredMNIST-025's ERM features);
    returns whether it is committed."""
    from featbook import committed, evidence
    from featlib.experiments.results import load_study

    located = committed.locate(committed_gaps)
    study = committed.load(located, load_study, "ood-length-025-erm")
    if study is None:
        _show(evidence.missing(located, "length study of the IRMX cell",
                               "python -m featlib.cli.gap_studies ood-length-025-erm --seeds 1 2 3 4 5 "
                               "--out results/cmnist-gaps"))
        return False
    _show(length_cells_table(study["frame"], "cmnist025", "erm", steps), _made(study),
          length_cell_sentence(study["frame"], "cmnist025", "erm", "irmx", steps))
    return True


def show_head_average(committed_head_average, table7_rounds):
    """Table 7's cells with the averaged and the summed head beside the paper's, on the seeds both
    have; returns the averaged head's rounds (``None`` when not committed)."""
    from featbook import committed, evidence
    from featbook.cmnist_shared import collapsed_provenance
    from featlib.experiments.cmnist_analysis import against_table7
    from featlib.experiments.results import load_rounds

    located = committed.locate(committed_head_average)
    average = committed.load(located, load_rounds)
    if average is None or table7_rounds is None:
        _show(evidence.missing([located], "iFeAT run with the averaged head",
                               "python -m featlib.cli.run_rounds --learners ifeat --head-combination average "
                               "--out results/cmnist-rounds-average-head"))
        return average
    rounds = average["rounds"].query("learner == 'ifeat'")
    for d in [d for d in DATASET_LABELS if d in set(rounds["dataset"])]:
        shared = sorted(set(rounds.query("dataset == @d")["seed"])
                        & set(table7_rounds.query("dataset == @d and learner == 'ifeat'")["seed"]))
        comparison = against_table7({"average": rounds, "sum": table7_rounds}, d, seeds=shared)
        _show(table7_choices_table(comparison, f"Table 7 at full size, {DATASET_LABELS[d]}: "
                                               f"{LEARNER_LABELS['ifeat']} with the averaged and the summed head"))
    _show(collapsed_provenance(average["provenance"], size="50,000 training images", what="The averaged head's rounds"))
    return average


def show_algorithm1(table7_rounds, head_average) -> None:
    """Algorithm 1 with every set kept, per round, with the summed head (or, where it has not run
    with it yet, the averaged head's rounds)."""
    from featbook.cmnist_shared import describe_stops, round_table, round_table_frame
    from featlib.experiments.cmnist_analysis import stop_rounds

    datasets = [] if table7_rounds is None else [d for d in DATASET_LABELS if d in set(table7_rounds["dataset"])]
    for d in datasets:
        alg1, head = table7_rounds[(table7_rounds["learner"] == "feat") & (table7_rounds["dataset"] == d)], "summed"
        if alg1.empty and head_average is not None:  # not yet run with the default head: the averaged head's
            average = head_average["rounds"]
            alg1, head = average[(average["learner"] == "feat") & (average["dataset"] == d)], "averaged"
        if alg1.empty:
            continue
        _show(f"**{DATASET_LABELS[d]}, {LEARNER_LABELS['feat']}** ({head} head, "
              f"{prose.count(alg1['seed'].nunique(), 'seed')}): {describe_stops(stop_rounds(alg1), d, 'feat')}.",
              round_table(round_table_frame(alg1, d, with_paper=False),
                          f"Full size, {DATASET_LABELS[d]}: {LEARNER_LABELS['feat']} per round, {head} head"))


def show_paths(committed_paths):
    """The comparison of the OOD stage's paths and precisions: its summary lines, and how it was made
    folded under them; returns the comparison (``None`` when not committed)."""
    import html

    from featbook import committed, evidence
    from featlib.experiments.path_comparison import load_comparison, summarise

    located = committed.locate(committed_paths)
    paths = committed.load(located, load_comparison)
    if paths is None:
        _show(evidence.missing(located, "comparison of paths and precisions",
                               "python -m featlib.cli.compare_paths --out results/cmnist-paths")
              if located.failed else
              "No comparison of paths and precisions is committed yet: `python -m featlib.cli.compare_paths "
              "--out results/cmnist-paths` makes it (about an hour per variant on 2 CPU cores), and this section "
              "shows it once it is under `results/`.")
        return None
    prov = paths["provenance"]
    made = prov["pieces"]
    devices = sorted({"a CPU" if d == "cpu" else d for p in made.values() for d in p["devices"]})
    counts = [f"{name} ({prose.count(p['pieces'], 'piece')})" for name, p in made.items()]
    line = (f"The comparison committed under results/cmnist-paths: {prose.listing(counts)}, "
            f"{prose.integer(prov['size_fields'].get('n_train', 50000))} training images, width "
            f"{prov['size_fields'].get('hidden_dim', 256)}, on {prose.listing(devices)}, compared at commit "
            f"{str(prov['commit'])[:12]}; {prose.minutes(sum(p['wall_time_s'] for p in made.values()))} of "
            "computing in all.")
    _show("\n".join(f"* {line}" for line in summarise(paths["comparison"], prov["reference"])),
          f'<details class="feat-provenance"><summary>How this was made</summary><p>{html.escape(line)}</p></details>')
    return paths


def show_gap_studies(committed_gaps, committed_clove_f1) -> dict:
    """The five gap studies, each table with how it was made folded under it, then one conclusion
    per study; returns ``{study: summary frame}`` of those committed."""
    from featbook import committed, evidence
    from featlib.experiments import gap_studies
    from featlib.experiments.cmnist_analysis import frozen_steps_changes
    from featlib.experiments.results import load_study
    from featlib.experiments.table2_pieces import load_pieces

    located = committed.locate(committed_gaps)
    gaps = {s: committed.load(located, load_study, s)
            for s in ("erm-nf-erm", "frozen-steps", "bonsai-dro-length", "clove-01", "clove-grid-01")}
    if located.failed:
        _show(located.note)
    out, lines = {}, []
    if (g := gaps["erm-nf-erm"]) is not None:
        summary = out["erm-nf-erm"] = gap_studies.erm_nf_erm_summary(g["frame"])
        _show(erm_nf_erm_table(summary, len(g["provenance"]["seeds"])), _made(g))
        lines.append(f"* **ERM-NF, ERM objective ({DATASET_LABELS['cmnist025']}):** " + erm_nf_erm_conclusion(summary))
    if (g := gaps["frozen-steps"]) is not None:
        summary = out["frozen-steps"] = gap_studies.frozen_steps_summary(g["frame"])
        _show(frozen_steps_table(summary, len(g["provenance"]["seeds"])), _made(g))
        lines.append(f"* **V-REx and Fishr on frozen ERM features ({DATASET_LABELS['cmnist01']}), one change "
                     "at a time:** " + frozen_steps_conclusion(frozen_steps_changes(summary)))
    if (g := gaps["bonsai-dro-length"]) is not None:
        summary = out["bonsai-dro-length"] = gap_studies.bonsai_dro_length_summary(g["frame"])
        _show(bonsai_dro_length_table(summary, len(g["provenance"]["seeds"])), _made(g))
        lines.append(f"* **Bonsai's DRO round ({DATASET_LABELS['cmnist025']}):** "
                     + bonsai_dro_length_conclusion(summary))
    if (g := gaps["clove-01"]) is not None:
        summary = out["clove-01"] = gap_studies.clove_01_summary(g["frame"])
        _show(clove_01_table(summary, len(g["provenance"]["seeds"])), _made(g))
        lines.append(f"* **CLOvE as the authors' code runs it ({DATASET_LABELS['cmnist01']}):** "
                     + clove_01_conclusion(summary))
    if (g := gaps["clove-grid-01"]) is not None:
        clove_f1 = committed.load(committed.locate(committed_clove_f1), load_pieces)
        summary = out["clove-grid-01"] = gap_studies.clove_grid_summary(
            g["frame"], None if clove_f1 is None else clove_f1["runs"])
        _show(clove_grid_table(summary), _made(g))
        lines.append(f"* **CLOvE's penalty weights ({DATASET_LABELS['cmnist01']}):** " + clove_grid_conclusion(summary))
    _show("\n".join(lines) if lines else evidence.missing(
        located, "gap study", "python -m featlib.cli.gap_studies <study> --out results/cmnist-gaps"))
    return out


def show_path_tables(paths) -> None:
    """Each variant's Table 2 beside the default's, cell by cell (:func:`path_comparison_tables`)."""
    if paths is not None and not paths["comparison"].empty:
        _show(path_comparison_tables(paths["comparison"], paths["provenance"]["reference"]))


def show_path_verdicts(paths) -> None:
    """Whether each variant agrees with the default on the table as a whole (:func:`path_verdicts`)."""
    if paths is not None and not paths["comparison"].empty:
        _show(path_verdicts(paths["comparison"], paths["provenance"]["reference"]))


# -- what the OOD-length studies and Fig. 9.1 show, in words ---------------------------------------
#: How the length sentences name each frozen column.
_COLUMN_NAMES = {"erm": "ERM's", "bonsai": "Bonsai's", "ifeat": "FeAT's"}


def _column(learner: str) -> str:
    return _COLUMN_NAMES.get(learner, f"{LEARNER_LABELS.get(learner, learner)}'s")


def length_effect_text(oracle: dict[str, pd.Series], base: int, chosen: int) -> str:
    """What the ``ood-length`` studies say the OOD stage's length does to each frozen column
    (chapter 09): ``oracle`` maps a dataset to its columns' mean distance from the paper's cells in
    paper stds under test-domain selection, indexed by (learner, step). Per dataset, each column's
    distance at ``base`` and at ``chosen`` steps, which columns move towards the paper's (smaller
    |distance|) and which away, and whether FeAT's column stands higher against the baselines'
    (ERM's, Bonsai's), relative to the paper's table, at ``base`` than at ``chosen`` on every
    dataset. Only what the numbers say: no column is said to stay put."""
    parts, ways, higher = [], [], []
    for dataset, z in oracle.items():
        present = set(z.index.get_level_values(0))
        learners = [l for l in [*FROZEN_LEARNERS, *sorted(present - set(FROZEN_LEARNERS))]
                    if (l, base) in z.index and (l, chosen) in z.index]
        if not learners:
            continue
        name = DATASET_LABELS.get(dataset, dataset)
        moves = prose.listing(f"{_column(l)} from {prose.signed(z[(l, base)])} to {prose.signed(z[(l, chosen)])}"
                              for l in learners)
        parts.append(f"on {name}, {moves}")
        towards, away = [], []
        for l in learners:
            before, after = abs(round(z[(l, base)], 2)), abs(round(z[(l, chosen)], 2))
            if after != before:
                (towards if after < before else away).append(_column(l))
        move = lambda ls: "moves" if len(ls) == 1 else "move"  # noqa: E731
        said = [f"{prose.listing(towards)} {move(towards)} towards the paper's cells"] if towards else []
        said += [f"{prose.listing(away)} " + ("away from them" if towards else f"{move(away)} away from the paper's cells")
                 ] if away else []
        if said:
            ways.append(f"on {name}, {' and '.join(said)}")
        if "ifeat" in learners:
            for l in (b for b in ("erm", "bonsai") if b in learners):
                higher.append(z[("ifeat", base)] - z[(l, base)] > z[("ifeat", chosen)] - z[(l, chosen)])
    if not parts:
        return f"no study scores the columns at both {prose.integer(base)} and {prose.integer(chosen)} steps."
    text = (f"the length moves every column, each by its own amount. From {prose.integer(base)} to "
            f"{prose.integer(chosen)} steps each column's mean distance from the paper's cells (in paper stds) "
            "changes as follows: " + "; ".join(parts) + ".")
    if ways:
        text += " " + ("; ".join(ways) + ".")[0].upper() + ("; ".join(ways) + ".")[1:]
    if higher and all(higher):
        text += (f" On every dataset FeAT's column stands higher against each baseline's, relative to the paper's "
                 f"table, at {prose.integer(base)} steps than at {prose.integer(chosen)}: a protocol that stops at "
                 f"{prose.integer(base)} steps widens FeAT's lead over the baselines by that alone.")
    elif higher and not any(higher):
        text += (f" On every dataset FeAT's column stands lower against each baseline's, relative to the paper's "
                 f"table, at {prose.integer(base)} steps than at {prose.integer(chosen)}: stopping there would "
                 "narrow FeAT's lead over the baselines.")
    elif higher:
        text += (" Against the baselines, FeAT's column gains from the shorter length on some dataset or baseline "
                 "and loses on another.")
    return text


def table2_against_paper_text(runs: pd.DataFrame, learners=FROZEN_LEARNERS) -> str:
    """What :func:`table2_against_paper_figure` shows, in one sentence: per dataset and frozen column,
    the penalised cells' mean distance from the paper's mean (points, ours best configuration) and
    the largest."""
    best = select_best(runs[runs["learner"].isin(learners) & (runs["objective"] != "erm")])
    parts = []
    for dataset in [d for d in DATASET_LABELS if d in set(best["dataset"])]:
        part, said = best[best["dataset"] == dataset], []
        for learner in [l for l in learners if l in set(part["learner"])]:
            rows = part[part["learner"] == learner]
            paper = np.array([TABLE2.get(dataset, {}).get(o, {}).get(learner, (np.nan, np.nan))[0]
                              for o in rows["objective"]], dtype=float)
            off = np.abs(100 * rows["mean"].to_numpy() - paper)
            off = off[np.isfinite(off)]
            if len(off):
                said.append(f"{_column(learner)} {prose.number(off.mean(), 1)} points ({prose.number(off.max(), 1)})")
        if said:
            parts.append(f"on {DATASET_LABELS[dataset]}, {prose.listing(said)}")
    if not parts:
        return ""
    return ("How far the points lie from the diagonal: on average over its penalised cells, each column lies this far "
            "from the paper's means (its farthest cell in brackets): " + "; ".join(parts) + ".")


# -- Table 2 under the protocol fixed before looking -----------------------------------------------
def show_fixed_protocol(committed_margin, table2_runs: pd.DataFrame | None, calibrated: int):
    """Table 2 under the protocol fixed before looking, from the committed margin curve
    (:func:`featbook.margin_views.committed_margin`): where each dataset converges, the table cell by
    cell beside the calibrated one, and how FeAT's verdict moves with each choice the rule made;
    the folded provenance under them. Returns what was read."""
    from featbook import margin_views
    from featlib.experiments.margin_curve import CURVE_MIN_SEEDS, TABLE_MIN_SEEDS

    found = margin_views.committed_margin(committed_margin)
    if not found.curves:
        _show(found.missing)
        return found
    whole = [d for d in found.datasets if found.whole(d)]
    short = [d for d in found.datasets if d not in whole]
    if short:
        _show("Not read yet (too few seeds for a verdict, " + str(CURVE_MIN_SEEDS) + " needed): "
              + prose.listing(f"{DATASET_LABELS[d]} ({margin_views.size_phrase(found.curves[d])})" for d in short) + ".")
    if whole:
        fewer = [d for d in whole if len(found.curves[d].seeds) < TABLE_MIN_SEEDS]
        _show(margin_views.convergence_table(found),
              *(margin_views.fixed_table(found, d, table2_runs) for d in whole),
              margin_views.choices_table(found, calibrated))
        if fewer:
            _show(f"The protocol's table has {TABLE_MIN_SEEDS} seeds; "
                  + prose.listing(f"{DATASET_LABELS[d]} has {margin_views.size_phrase(found.curves[d])}" for d in fewer)
                  + " so far, enough for the curve's verdict, not yet the table's.")
    found.show_source()
    return found
