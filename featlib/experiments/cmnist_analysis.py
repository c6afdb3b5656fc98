"""ColoredMNIST's results in numbers: what chapters 03, 04 and 09, the introduction's claims table
(:mod:`featbook.claims`) and the tests compute from the frames that
:class:`~featlib.experiments.colored_mnist.ColoredMNISTExperiment` produces (one row per OOD-stage
run, and per-round feature-learning histories) and from the committed pieces
(:mod:`featlib.experiments.table2_pieces`).

* Table 2: which pieces to show (:func:`table2_pieces_choice`, :func:`frozen_cell_seeds`), the
  frozen columns beside the paper's (:func:`frozen_columns`), FeAT's margin per row
  (:func:`feat_margins`), what the test-domain selection carries (:func:`selection_gaps`,
  :func:`selection_agreement`), the ERM-NF column of GPU sittings (:func:`with_nf_column`) and the
  cells far from the paper's (:func:`far_cells`, :func:`seed_noise`);
* Fig. 1(b): OOD accuracy against the length of ERM pre-training (:func:`best_over_weights`,
  :func:`pretraining_findings`, :func:`feat_against_lengths`, :func:`feat_epochs`);
* Table 7 and FeAT's stop (:func:`against_table7`, :func:`stop_rounds`, :func:`stop_margins`,
  :func:`early_stop_consequence`);
* the gap studies' comparisons (:func:`frozen_steps_changes`, :func:`best_by_step`).

Every function returns numbers, frames or the pieces it chose; how a page lays them out and says
them is featbook's (``featbook.ch03_views``, ``ch04_views``, ``ch09_views``, ``cmnist_shared``).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from featlib.experiments.colored_mnist import TABLE2_OBJECTIVES, distinct_objectives, select_best
from featlib.experiments.labels import DATASET_LABELS, OBJECTIVE_LABELS
from featlib.experiments.paper_values import TABLE2, TABLE7
from featlib.hparams import PAPER_LEARNERS


# -- Table 2: which pieces, the frozen columns beside the paper's, FeAT's margin, the selection rule ---
#: Table 2's frozen-feature columns: what the CPU computes as pieces (chapter 04).
FROZEN_LEARNERS = PAPER_LEARNERS
#: The columns FeAT's features are compared with: the paper's other learners, ERM's and Bonsai's.
BASELINES = tuple(learner for learner in PAPER_LEARNERS if learner != "ifeat")
#: Seeds every frozen cell needs before chapter 04 shows a protocol's pieces as its Table 2: with fewer,
#: a cell's std means little and columns a point apart change places (issue 33 asks for 5, goal 10).
TABLE2_MIN_SEEDS = 3


def frozen_cell_seeds(results: pd.DataFrame, datasets: Sequence[str] = tuple(TABLE2),
                      learners: Sequence[str] = FROZEN_LEARNERS,
                      objectives: Sequence[str] = TABLE2_OBJECTIVES) -> int:
    """The fewest seeds behind any frozen-feature cell of Table 2 (every dataset, learner and
    objective; a cell without runs counts 0): how far a protocol's pieces are from a whole table."""
    if results is None or results.empty:
        return 0
    seeds = results.groupby(["dataset", "learner", "objective"])["seed"].nunique()
    return int(min(seeds.get((d, l, o), 0) for d in datasets for l in learners for o in objectives))


def whole_seeds(runs: pd.DataFrame) -> list[int]:
    """The seeds that have every frozen-feature cell of Table 2 (:func:`frozen_cell_seeds`)."""
    return [int(s) for s, part in runs.groupby("seed") if frozen_cell_seeds(part) >= 1]


def table2_pieces_choice(today: dict | None, earlier: dict | None, min_seeds: int = TABLE2_MIN_SEEDS
                         ) -> tuple[dict | None, str | None, dict | None]:
    """Which committed pieces chapter 04 (and the introduction's claims table) show as Table 2:
    today's protocol's once every frozen cell has ``min_seeds`` seeds (:func:`frozen_cell_seeds`);
    until then the earlier protocol's, with today's returned apart, to be shown as what they are
    (a table in progress, its seeds named). Returns ``(shown, which, apart)``: ``which`` is
    ``"today"``, ``"earlier"`` or ``None`` (nothing to show)."""
    def runs(p):
        return None if p is None or p["runs"].empty else p["runs"]
    if runs(today) is not None and frozen_cell_seeds(runs(today)) >= min_seeds:
        return today, "today", None
    if runs(earlier) is not None:
        return earlier, "earlier", today if runs(today) is not None else None
    if runs(today) is not None:
        return today, "today", None
    return None, None, None


def configurations(results: pd.DataFrame, row) -> pd.DataFrame:
    """The configurations (penalty weight, pre-training length) that ``results`` holds for ``row``'s cell."""
    cell = results[(results["dataset"] == row.dataset) & (results["learner"] == row.learner)
                   & (results["objective"] == row.objective)]
    return cell[["penalty_weight", "pretrain_epochs"]].drop_duplicates()


def feat_comparison(results: pd.DataFrame, feat: str = "feat", others=BASELINES) -> pd.DataFrame:
    """Per dataset and objective: does FeAT's best mean beat each other learner's?"""
    best = select_best(results).set_index(["dataset", "objective", "learner"])["mean"]
    rows = []
    for (dataset, objective), _ in best.groupby(level=[0, 1]):
        row = {"dataset": dataset, "objective": objective, feat: best.get((dataset, objective, feat), np.nan)}
        for other in others:
            value = best.get((dataset, objective, other), np.nan)
            row[other] = value
            row[f"{feat}_beats_{other}"] = bool(row[feat] > value)
        rows.append(row)
    return pd.DataFrame(rows)


def frozen_columns(results: pd.DataFrame, feat: str = "ifeat", others: Sequence[str] = BASELINES
                   ) -> pd.DataFrame:
    """Table 2's frozen-feature columns beside the paper's, per dataset: over the penalised
    objectives where every column has a cell, in how many ``feat``'s features give the best mean of
    the columns (``feat_best``), and in how many the paper's Table 2 says so (``paper_feat_best``,
    the same objectives); per column, the mean absolute difference of our cells from the paper's
    (``gap_<learner>``, points); the largest such difference (``largest_gap``, ours minus the paper's,
    with its ``largest_learner``/``largest_objective``); and the range of seeds behind the cells
    (``min_seeds``, ``max_seeds``). IB-IRM, which repeats IRMv1 on frozen features
    (:data:`~featlib.experiments.colored_mnist.FROZEN_REPEATS`), is counted once. The claim of Sec. 5
    this checks: FeAT's features serve the OOD objectives better than ERM's and Bonsai's (chapter 04,
    "What we see")."""
    columns = [feat, *others]
    best = select_best(results[results["learner"].isin(columns)])
    rows = []
    for dataset, part in best.groupby("dataset", sort=False):
        part = part[part["objective"].isin(distinct_objectives(part["objective"].unique()))]  # IB-IRM's frozen row once
        mean = part.set_index(["objective", "learner"])["mean"]
        objectives = [o for o in part["objective"].unique() if o != "erm" and all((o, c) in mean.index for c in columns)]
        paper = {o: {c: TABLE2.get(dataset, {}).get(o, {}).get(c, (np.nan,))[0] for c in columns} for o in objectives}
        part = part.assign(paper=[TABLE2.get(dataset, {}).get(r.objective, {}).get(r.learner, (np.nan,))[0]
                                  for r in part.itertuples()])
        part = part.assign(gap=100 * part["mean"] - part["paper"])
        worst = part.loc[part["gap"].abs().idxmax()] if part["gap"].notna().any() else None
        rows.append({
            "dataset": dataset, "objectives": len(objectives),
            "feat_best": sum(mean[(o, feat)] > max(mean[(o, c)] for c in others) for o in objectives),
            "paper_feat_best": sum(paper[o][feat] > max(paper[o][c] for c in others) for o in objectives),
            **{f"gap_{c}": float(part.loc[part["learner"] == c, "gap"].abs().mean()) for c in columns},
            "largest_gap": np.nan if worst is None else float(worst["gap"]),
            "largest_learner": None if worst is None else worst["learner"],
            "largest_objective": None if worst is None else worst["objective"],
            "min_seeds": int(part["n_seeds"].min()), "max_seeds": int(part["n_seeds"].max()),
        })
    return pd.DataFrame(rows)


def feat_margins(results: pd.DataFrame, feat: str = "ifeat", others: Sequence[str] = BASELINES,
                 score: str = "worst_test_acc") -> pd.DataFrame:
    """FeAT's margin per row of Table 2: for each dataset and penalised objective where every
    column has a cell, FeAT's features' cell minus the best of the ``others`` columns (points;
    positive: FeAT's features best), ours (cells selected by ``score``, :func:`select_best`) and
    the paper's, with the best other column of each. The claim of Sec. 6 it measures: the margin
    by which FeAT's features serve the OOD objectives better than ERM's and Bonsai's.

    ``spread`` is the larger of the two compared cells' stds over seeds (points; the paper's:
    ``paper_spread``), and ``tie`` says the margin is smaller than it: the two columns lie within
    one seed std of each other, so the row ranks them no more than their seeds do (``paper_tie``
    for the paper's cells)."""
    columns = [feat, *others]
    best = select_best(results[results["learner"].isin(columns)], score=score)
    mean = best.set_index(["dataset", "objective", "learner"])["mean"]
    std = best.set_index(["dataset", "objective", "learner"])["std"]
    rows = []
    for (dataset, objective), _ in best.groupby(["dataset", "objective"], sort=False):
        if objective == "erm" or not all((dataset, objective, c) in mean.index for c in columns):
            continue
        if objective not in distinct_objectives(best.loc[best["dataset"] == dataset, "objective"].unique()):
            continue  # IB-IRM on frozen features: IRMv1's row again
        present = [c for c in others if pd.notna(mean[(dataset, objective, c)])]  # a cell whose every run diverged has none
        if pd.isna(mean[(dataset, objective, feat)]) or not present:
            continue
        other = max(present, key=lambda c: mean[(dataset, objective, c)])
        paper = TABLE2.get(dataset, {}).get(objective, {})
        paper_other = max(others, key=lambda c: paper.get(c, (-np.inf,))[0]) if paper else None
        margin = 100 * (mean[(dataset, objective, feat)] - mean[(dataset, objective, other)])
        spread = 100 * np.nanmax([std[(dataset, objective, feat)], std[(dataset, objective, other)], 0.0])
        has_paper = bool(paper) and feat in paper and paper_other in paper
        paper_margin = paper[feat][0] - paper[paper_other][0] if has_paper else np.nan
        paper_spread = max(paper[feat][1], paper[paper_other][1]) if has_paper else np.nan
        rows.append({"dataset": dataset, "objective": objective, "margin": margin, "best_other": other,
                     "paper_margin": paper_margin, "paper_best_other": paper_other,
                     "spread": spread, "tie": bool(abs(margin) < spread),
                     "paper_spread": paper_spread, "paper_tie": bool(has_paper and abs(paper_margin) < paper_spread)})
    frame = pd.DataFrame(rows, columns=["dataset", "objective", "margin", "best_other", "paper_margin",
                                        "paper_best_other", "spread", "tie", "paper_spread", "paper_tie"])
    # rows in Table 2's order (datasets, then the paper's objectives), as the table above them
    order = {o: i for i, o in enumerate(OBJECTIVE_LABELS)}
    datasets = {d: i for i, d in enumerate(DATASET_LABELS)}
    return frame.sort_values(["dataset", "objective"], key=lambda c: c.map(datasets if c.name == "dataset" else order)
                             .fillna(len(order)), kind="stable", ignore_index=True)


def selection_gaps(results: pd.DataFrame, learners: Sequence[str] = FROZEN_LEARNERS) -> pd.DataFrame:
    """How much of each column's Table 2 number the test-domain ("oracle") selection carries: per
    dataset and learner, the mean over penalised objectives of the oracle cell minus the cell
    selected by training-domain validation (``val_acc``), in points, with the number of cells.
    Runs without ``val_acc`` (made before featlib 0.5) give no row."""
    if "val_acc" not in results or results["val_acc"].isna().all():
        return pd.DataFrame(columns=["dataset", "learner", "gap", "cells"])
    part = results[results["learner"].isin(learners) & (results["objective"] != "erm")]
    oracle = select_best(part).set_index(["dataset", "learner", "objective"])["mean"]
    validation = select_best(part, score="val_acc").set_index(["dataset", "learner", "objective"])["mean"]
    gap = (100 * (oracle - validation)).dropna().reset_index(name="gap")
    return (gap.groupby(["dataset", "learner"], sort=False)["gap"].agg(gap="mean", cells="count").reset_index())


def selection_agreement(results: pd.DataFrame, learners: Sequence[str] = FROZEN_LEARNERS) -> pd.DataFrame:
    """Per dataset: in how many penalised rows of Table 2 the best of the frozen columns is the same
    under training-domain validation (``val_acc``) as under Table 2's test-domain rule (``same`` of
    ``rows``). Runs without ``val_acc`` give no row."""
    if "val_acc" not in results or results["val_acc"].isna().all():
        return pd.DataFrame(columns=["dataset", "same", "rows"])
    part = results[results["learner"].isin(learners) & (results["objective"] != "erm")]
    rows = []
    for dataset, runs in part.groupby("dataset", sort=False):
        best = {rule: select_best(runs, score=score).dropna(subset=["mean"]).sort_values("mean")
                .groupby("objective")["learner"].last() for rule, score in (("test", "worst_test_acc"), ("val", "val_acc"))}
        shared = pd.Index(distinct_objectives(best["test"].index.intersection(best["val"].index)))
        rows.append({"dataset": dataset, "same": int((best["test"][shared] == best["val"][shared]).sum()),
                     "rows": len(shared)})
    return pd.DataFrame(rows, columns=["dataset", "same", "rows"])


def nf_ranked_datasets(nf_runs: pd.DataFrame) -> list[str]:
    """The datasets on which every ERM-NF cell (each of Table 2's objectives) holds at least
    :data:`TABLE2_MIN_SEEDS` seeds: the part of the GPU's column that may stand in Table 2."""
    nf_runs = nf_runs[nf_runs["learner"] == "erm-nf"]
    seeds = nf_runs.groupby(["dataset", "objective"])["seed"].nunique()
    return [d for d in TABLE2 if all(seeds.get((d, o), 0) >= TABLE2_MIN_SEEDS for o in TABLE2[d])]


def with_nf_column(pieces: dict, nf_pieces: dict | None) -> dict:
    """Chapter 04's Table 2 pieces with the ERM-NF column that GPU sittings committed
    (``results/cmnist-erm-nf-<gpu>``), for each dataset where every cell of that column holds
    :data:`TABLE2_MIN_SEEDS` seeds (:func:`nf_ranked_datasets`); elsewhere the column stays out
    (its cells read *not yet run*). The frozen pieces' oracle is kept. Only the table takes
    these: margins, distances and far cells are about the frozen columns."""
    if nf_pieces is None or nf_pieces["runs"].empty:
        return pieces
    joined = nf_ranked_datasets(nf_pieces["runs"])
    if not joined:
        return pieces
    keep = (nf_pieces["runs"]["learner"] == "erm-nf") & nf_pieces["runs"]["dataset"].isin(joined)
    kept_records = (nf_pieces["records"]["learner"] == "erm-nf") & nf_pieces["records"]["dataset"].isin(joined)
    return dict(pieces, runs=pd.concat([pieces["runs"], nf_pieces["runs"][keep]], ignore_index=True),
                records=pd.concat([pieces["records"], nf_pieces["records"][kept_records]], ignore_index=True))


# -- the cells far from the paper's (issue 33) -----------------------------------------------------
#: A frozen cell further than this many of the paper's standard deviations from the paper's value
#: is listed in chapter 04 with what the committed gap studies measured on it.
FAR_Z = 2.0


def far_cells(runs: pd.DataFrame, threshold: float = FAR_Z) -> pd.DataFrame:
    """Table 2's frozen-feature cells (Table 2's rule, :func:`select_best`) further than
    ``threshold`` paper standard deviations from the paper's value: ``dataset``, ``learner``,
    ``objective``, ``mean``, ``std`` (%, over our seeds), ``n_seeds``, ``paper``, ``paper_std``,
    ``z`` = (ours − paper) / paper std, and ``seed_values`` (each seed's accuracy, %, at the cell's
    selected configuration, as ``(seed, value)`` pairs), the furthest first. Cells the paper prints with a zero
    std (ColoredMNIST-025 CLOvE on ERM's features) have no distance in stds and are left out, and
    IB-IRM's, which repeat IRMv1's (:data:`~featlib.experiments.colored_mnist.FROZEN_REPEATS`), are taken once."""
    columns = ["dataset", "learner", "objective", "mean", "std", "n_seeds", "paper", "paper_std", "z", "seed_values"]
    frozen = runs[runs["learner"].isin(FROZEN_LEARNERS)] if runs is not None and not runs.empty else None
    if frozen is not None:  # IB-IRM's frozen cells repeat IRMv1's: each far cell once
        frozen = frozen[frozen["objective"].isin(distinct_objectives(frozen["objective"].unique()))]
    rows = []
    for r in ([] if frozen is None else select_best(frozen).itertuples()):
        paper = TABLE2.get(r.dataset, {}).get(r.objective, {}).get(r.learner)
        if paper is None or not paper[1] > 0 or pd.isna(r.mean):
            continue
        z = (100 * r.mean - paper[0]) / paper[1]
        if abs(z) > threshold:
            chosen = frozen[(frozen["dataset"] == r.dataset) & (frozen["learner"] == r.learner)
                            & (frozen["objective"] == r.objective) & (frozen["penalty_weight"] == r.penalty_weight)
                            & (frozen["pretrain_epochs"] == r.pretrain_epochs)].sort_values("seed")
            rows.append({"dataset": r.dataset, "learner": r.learner, "objective": r.objective,
                         "mean": 100 * r.mean, "std": 100 * r.std, "n_seeds": int(r.n_seeds),
                         "paper": paper[0], "paper_std": paper[1], "z": z,
                         "seed_values": tuple((int(s), 100 * float(a))
                                              for s, a in zip(chosen["seed"], chosen["worst_test_acc"]))})
    frame = pd.DataFrame(rows, columns=columns)
    return frame.reindex(frame["z"].abs().sort_values(ascending=False).index).reset_index(drop=True)


#: Seeds behind each of the paper's Table 2 cells (Sec. 6: "mean and std over 10 runs").
PAPER_SEEDS = 10

#: Student's t at 97.5% (a two-sided 95% interval) for 1 to 9 degrees of freedom; 2.0 beyond.
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def seed_noise(cell) -> dict | None:
    """Whether the seeds alone can account for a far cell's distance from the paper's: the 95%
    interval of the difference between our mean over ``n_seeds`` and the paper's over
    :data:`PAPER_SEEDS`, with a spread between seeds as wide as the wider of ours and the paper's
    (``std``, ``paper_std``, %) and Student's t at ``n_seeds`` − 1 degrees of freedom (few seeds,
    a wide interval). Returns ``{"gap", "interval", "within"}`` (points), or None under 2 seeds.
    A cell outside the interval is not "the spread between seeds" however many of its seeds land
    near the paper's (``featbook.ch04_views.far_cell_verdict``)."""
    n = int(cell["n_seeds"])
    if n < 2 or pd.isna(cell.get("std")):
        return None
    spread = max(float(cell["std"]), float(cell["paper_std"]))
    interval = _T975.get(n - 1, 2.0) * spread * np.sqrt(1 / n + 1 / PAPER_SEEDS)
    gap = abs(float(cell["mean"]) - float(cell["paper"]))
    return {"gap": gap, "interval": interval, "within": bool(gap <= interval)}


# -- Fig. 1(b): OOD accuracy against the length of ERM pre-training --------------------------------
#: Fig. 1(b)'s dependence on pre-training counts as shown when an objective's accuracy moves by at
#: least this many points, on average, between its best and worst ERM length (the paper's figure
#: moves IRMv1 by tens of points).
FIG1B_DEPENDENCE_POINTS = 5.0


def best_over_weights(results: pd.DataFrame) -> pd.DataFrame:
    """Fig. 1(b)'s curve: for each objective and pre-training length, the penalty weight with the
    best mean over seeds, with that mean and std."""
    stats = (results.groupby(["objective", "pretrain_epochs", "penalty_weight"])["worst_test_acc"]
             .agg(mean="mean", std=lambda v: float(np.std(v))).reset_index())
    return stats.loc[stats.groupby(["objective", "pretrain_epochs"])["mean"].idxmax()].reset_index(drop=True)


def pretraining_findings(nf_runs: pd.DataFrame, feat_best: pd.DataFrame | None) -> tuple[float, float, int | None, int]:
    """What Fig. 1(b) says, in numbers: the mean over penalised objectives of best minus worst
    pre-training length (points, each at its best penalty weight); the mean seed-to-seed std of
    those curves (points); how many penalised objectives score higher on FeAT's features than
    at their best length (None without FeAT); how many penalised objectives there are."""
    curves = best_over_weights(nf_runs)
    penalised = curves[curves["objective"] != "erm"]
    by_objective = penalised.groupby("objective")["mean"]
    spread = 100 * float((by_objective.max() - by_objective.min()).mean())
    noise = 100 * float(penalised["std"].mean())
    beats = None
    if feat_best is not None and len(feat_best):
        feat_mean = feat_best.set_index("objective")["mean"]
        beats = sum(bool(feat_mean.get(o, -1.0) > best) for o, best in by_objective.max().items())
    return spread, noise, beats, by_objective.ngroups


def feat_against_lengths(nf_runs: pd.DataFrame, feat_best: pd.DataFrame) -> pd.DataFrame:
    """Fig. 1(b)'s stars against its curves, per penalised objective: the pre-training length with
    the best OOD accuracy (``best_epochs``, its mean ``best_length``), FeAT's features' (``feat``) and
    the ``margin`` (points, FeAT minus the best length), largest margin first: which objectives FeAT's
    features serve better than any length, by how much, and which not."""
    curves = best_over_weights(nf_runs)
    curves = curves[curves["objective"] != "erm"]
    best = curves.loc[curves.groupby("objective")["mean"].idxmax()].set_index("objective")
    feat = feat_best.set_index("objective")["mean"]
    rows = [{"objective": o, "best_epochs": int(r["pretrain_epochs"]), "best_length": float(r["mean"]),
             "feat": float(feat[o]), "margin": 100 * float(feat[o] - r["mean"])}
            for o, r in best.iterrows() if o in feat.index and pd.notna(feat[o])]
    return (pd.DataFrame(rows, columns=["objective", "best_epochs", "best_length", "feat", "margin"])
            .sort_values("margin", ascending=False, ignore_index=True))


def feat_against_lengths_by_seed(nf_runs: pd.DataFrame, feat_runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`feat_against_lengths` seed by seed: each seed's FeAT (its best penalty weight on that
    seed) against that seed's own best pre-training length. One row per penalised objective with
    the per-seed ``margins`` (points, a dict seed -> margin), their ``mean`` and ``std`` (ddof 0),
    and ``ahead``, in how many seeds the margin is positive, of ``seeds``. ``feat_runs``: FeAT's
    runs, one row per (configuration, seed), as :func:`.colored_mnist.select_best` reads them."""
    from .colored_mnist import select_best

    per_seed = {}
    for seed, runs in nf_runs.groupby("seed"):
        mine = feat_runs[feat_runs["seed"] == seed]
        if len(mine):
            per_seed[seed] = feat_against_lengths(runs, select_best(mine)).set_index("objective")["margin"]
    rows = []
    for objective in sorted(set().union(*(m.index for m in per_seed.values())) if per_seed else ()):
        margins = {seed: float(m[objective]) for seed, m in per_seed.items() if objective in m.index}
        values = np.array(list(margins.values()))
        rows.append({"objective": objective, "margins": margins, "mean": float(values.mean()),
                     "std": float(values.std()), "ahead": int((values > 0).sum()), "seeds": len(values)})
    return pd.DataFrame(rows, columns=["objective", "margins", "mean", "std", "ahead", "seeds"])


def feat_epochs(rounds: pd.DataFrame, learner: str = "feat", dataset: str | None = None) -> int | None:
    """The epochs a feature learner's accepted rounds took, summed per seed and averaged over the
    seeds (where Fig. 1(b) puts FeAT's stars); None when ``rounds`` holds no accepted round of
    ``learner`` (of ``dataset``, when given)."""
    if rounds is None or not len(rounds):
        return None
    picked = rounds[rounds["accepted"].astype(bool)]
    if "learner" in picked:
        picked = picked[picked["learner"] == learner]
    if dataset is not None and "dataset" in picked:
        picked = picked[picked["dataset"] == dataset]
    if picked.empty:
        return None
    return int(round(picked.groupby("seed")["epochs"].sum().mean()))


def feat_epochs_spent(rounds: pd.DataFrame, learner: str = "ifeat", dataset: str | None = None,
                      seeds=None) -> int | None:
    """The epochs a feature learner's training spent: every round it trained, the one its
    termination check rolled back included, summed per seed and averaged over ``seeds`` (default:
    every seed ``rounds`` holds); None when ``rounds`` holds no round of ``learner`` (of
    ``dataset``, of those seeds)."""
    if rounds is None or not len(rounds):
        return None
    picked = rounds[rounds["learner"] == learner] if "learner" in rounds else rounds
    if dataset is not None and "dataset" in picked:
        picked = picked[picked["dataset"] == dataset]
    if seeds is not None:
        picked = picked[picked["seed"].isin(list(seeds))]
    if picked.empty:
        return None
    return int(round(picked.groupby("seed")["epochs"].sum().mean()))


# -- Table 7 and FeAT's stop -----------------------------------------------------------------------
def against_table7(rounds_by_choice: dict[str, pd.DataFrame], dataset: str, learner: str = "ifeat",
                   seeds=None) -> pd.DataFrame:
    """Each Table 7 cell (round x training / retention / OOD accuracy) of ``dataset`` under each
    choice (e.g. ``{"average": ..., "sum": ...}``: rounds frames of the same learner), as mean and
    std (%) over ``seeds`` (default: every seed a frame holds) beside the paper's, with the
    distance ``z`` = (ours − paper) / paper's std. A cell the paper prints without a value, or
    no seed of ours reached, is left out."""
    rows = []
    for choice, rounds in rounds_by_choice.items():
        frame = rounds[(rounds["dataset"] == dataset) & (rounds["learner"] == learner)]
        if seeds is not None:
            frame = frame[frame["seed"].isin(list(seeds))]
        for metric, paper_values in TABLE7[dataset].items():
            for k, paper in enumerate(paper_values, start=1):
                values = 100 * frame.loc[frame["round"] == k, metric].dropna().to_numpy()
                if paper is None or not len(values):
                    continue
                rows.append({"choice": choice, "round": k, "metric": metric, "mean": values.mean(),
                             "std": values.std(), "n_seeds": len(values), "paper_mean": paper[0],
                             "paper_std": paper[1], "z": (values.mean() - paper[0]) / paper[1]})
    return pd.DataFrame(rows)


def stop_rounds(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, learner and seed: the rounds kept, the round that was discarded (if any) and
    its training + retention accuracy (the rule's score) against the threshold."""
    rows = []
    for (dataset, learner, seed), frame in rounds.groupby(["dataset", "learner", "seed"]):
        frame = frame.sort_values("round")
        rejected = frame[~frame["accepted"].astype(bool)]
        row = {"dataset": dataset, "learner": learner, "seed": int(seed), "rounds_kept": int(frame["accepted"].astype(bool).sum())}
        if len(rejected):
            r = rejected.iloc[0]
            row.update(discarded_round=int(r["round"]), score=float(r.get("termination_score", np.nan)))
        else:
            row.update(discarded_round=None, score=np.nan)
        last_kept = frame[frame["accepted"].astype(bool)].iloc[-1]
        row["score_of_last_kept"] = float(last_kept.get("termination_score", np.nan))
        row["termination_threshold"] = (float(frame["termination_threshold"].iloc[0]) if "termination_threshold" in frame
                                        else np.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def stop_margins(rounds: pd.DataFrame, dataset: str, learner: str = "ifeat") -> pd.DataFrame:
    """The stop, seed by seed (Appendix F.1's rule): for each seed, the rounds it kept, the margin
    of the last kept round's training + retention accuracy over the threshold (points; a round 1
    has no retention accuracy and is always kept), the margin of the discarded round (negative),
    and the worst-test accuracy of the features the seed hands to the OOD stage (its last kept
    round's head). A seed whose kept round scored only just above the threshold is one that
    could have stopped a round earlier."""
    frame = rounds[(rounds["dataset"] == dataset) & (rounds["learner"] == learner)]
    rows = []
    for seed, per_seed in frame.groupby("seed"):
        per_seed = per_seed.sort_values("round")
        kept = per_seed[per_seed["accepted"].astype(bool)]
        discarded = per_seed[~per_seed["accepted"].astype(bool)]
        threshold = float(per_seed["termination_threshold"].iloc[0])
        last = kept.iloc[-1]
        row = {"seed": int(seed), "rounds_kept": len(kept), "termination_threshold": threshold,
               "kept_margin": 100 * (float(last["termination_score"]) - threshold)
               if pd.notna(last.get("termination_score")) else np.nan,
               "discarded_round": int(discarded["round"].iloc[0]) if len(discarded) else None,
               "discarded_margin": 100 * (float(discarded["termination_score"].iloc[0]) - threshold)
               if len(discarded) else np.nan,
               "ood_acc_of_kept": float(last["ood_acc"])}
        rows.append(row)
    return pd.DataFrame(rows)


def early_stop_consequence(rounds: pd.DataFrame, dataset: str, learner: str = "ifeat") -> dict | None:
    """What a seed that stopped one round earlier than most would hand on: the most common number
    of kept rounds, and the mean worst-test accuracy of the round before it (its features) against
    that of the usual last round. None when fewer than two rounds are kept."""
    margins = stop_margins(rounds, dataset, learner)
    if margins.empty:
        return None
    usual = int(margins["rounds_kept"].mode().iloc[0])
    if usual < 2:
        return None
    frame = rounds[(rounds["dataset"] == dataset) & (rounds["learner"] == learner)]
    ood = frame.groupby("round")["ood_acc"].mean()
    return {"usual_rounds": usual, "ood_usual": float(ood[usual]), "ood_one_earlier": float(ood[usual - 1]),
            "closest_margin": float(margins.loc[margins["rounds_kept"] == usual, "kept_margin"].min()),
            "closest_seed": int(margins.loc[margins.loc[margins["rounds_kept"] == usual, "kept_margin"].idxmin(), "seed"]),
            "n_early": int((margins["rounds_kept"] < usual).sum()),
            "n_later": int((margins["rounds_kept"] > usual).sum()), "n_seeds": len(margins),
            **_closest_discarded(margins[margins["rounds_kept"] == usual], ood, usual)}


def _closest_discarded(margins: pd.DataFrame, ood: pd.Series, usual: int) -> dict:
    """The other close call: the usual seeds' discarded round nearest the threshold (its seed and
    margin), and the mean worst-test accuracy of that round's features (what passing would hand on)."""
    discarded = margins.dropna(subset=["discarded_margin"])
    if discarded.empty:
        return {}
    row = discarded.loc[discarded["discarded_margin"].idxmax()]
    return {"discarded_seed": int(row["seed"]), "discarded_margin": float(row["discarded_margin"]),
            "ood_one_later": float(ood[usual + 1]) if usual + 1 in ood.index else np.nan}


# -- the gap studies' comparisons ------------------------------------------------------------------
def frozen_steps_changes(summary: pd.DataFrame, short: int = 1000, long: int = 5000) -> pd.DataFrame:
    """The frozen-steps study one change at a time: per objective, the length of the OOD stage
    (``short`` -> ``long`` steps) at the protocol's head L2, then the head's L2 (on -> off) at
    ``long`` steps. Each row: the change, the best mean before and after (fractions), the
    difference, the best weights and the number of seeds."""
    def cell(objective, l2_on, step):
        rows = summary[(summary["objective"] == objective) & ((summary["head_l2"] > 0) == l2_on)]
        if rows.empty:
            return None
        return rows.iloc[(rows["step"] - step).abs().argmin()]
    out = []
    for objective in summary["objective"].unique():
        for change, before, after in ((f"steps {short:,} → {long:,}, head L2 on", (True, short), (True, long)),
                                      (f"head L2 on → off, {long:,} steps", (True, long), (False, long))):
            a, b = cell(objective, *before), cell(objective, *after)
            if a is None or b is None:
                continue
            out.append({"objective": objective, "change": change, "before": a["mean"], "after": b["mean"],
                        "difference": b["mean"] - a["mean"], "weight_before": a["penalty_weight"],
                        "weight_after": b["penalty_weight"], "n_seeds": int(min(a["n_seeds"], b["n_seeds"]))})
    return pd.DataFrame(out)


def best_by_step(part: pd.DataFrame) -> dict[int, pd.Series]:
    """One cell's runs in a length study (step > 0), Table 2's rule at each scored length:
    ``{step: best configuration's row}`` (its ``mean``, ``std``, ``n_seeds``)."""
    return {int(step): select_best(runs.drop(columns="step")).iloc[0] for step, runs in part.groupby("step")}
