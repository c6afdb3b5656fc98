"""How the ColoredMNIST chapters (03, 04, 09) show their results: the frames of Table 2, Table 7
and the comparisons, ours beside the paper's (labelled), figures in the book's style and tables
that fit the column.

Inputs are the frames that :class:`~featlib.experiments.colored_mnist.ColoredMNISTExperiment`
produces: one row per OOD-stage run, and per-round feature-learning histories. The frame
builders (:func:`table2_frame`, :func:`round_table_frame`, :func:`stop_margins`, ...) compute the
numbers; the views lay them out (:func:`table2`, :func:`round_table`, ...): one table per dataset
instead of one table with every column, ours and the paper's value in one cell (ours on the first
line, the paper's under it), labels instead of ids.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from featbook import style
from featbook import prose
from featbook.tables import Stacked, Table, Tables, paired, split_by, table
from featlib.experiments.colored_mnist import (
    FROZEN_REPEATS, TABLE2_OBJECTIVES, distinct_objectives, format_mean_std, paper_distance, select_best,
)
from featlib.experiments.labels import DATASET_LABELS, LEARNER_LABELS, OBJECTIVE_LABELS, label
from featlib.experiments.paper_values import ORACLE, TABLE2, TABLE7
from featlib.hparams import OBJECTIVE_GRIDS, PAPER_LEARNERS
from featlib.feature_learning.termination import DEFAULT_TERMINATION_THRESHOLD

#: Table 2's frozen-feature columns, the paper's learners: what the CPU computes as pieces (chapter 04).
FROZEN_LEARNERS = PAPER_LEARNERS
#: The columns FeAT's features are compared with: the paper's other learners, ERM's and Bonsai's.
BASELINES = tuple(learner for learner in PAPER_LEARNERS if learner != "ifeat")


# -- the numbers: Table 2, Table 7 and the comparisons, ours beside the paper's ----------------
def table2_frame(results: pd.DataFrame, oracle: pd.DataFrame | None = None, with_paper: bool = True,
                 with_n: bool = False, learners: Sequence[str] = (), missing: str = "not yet run",
                 score: str = "worst_test_acc") -> pd.DataFrame:
    """Table 2: rows objectives, columns (dataset, learner[, source]); "mean ± std" (%).
    Objectives of one's own (:mod:`featlib.experiments.objective_files`) follow the built-in ones, under
    their labels (:func:`featlib.experiments.labels.label`), with "-" in the paper's column.
    ``with_n``: each of our cells says over how many seeds it is ("n = 3"), for tables built from
    pieces that accumulate (:mod:`featlib.experiments.table2_pieces`), where cells can hold
    different numbers of seeds. ``learners``: columns shown for every dataset in ``results`` even
    where they have no runs yet, our cells reading ``missing`` (the paper's beside them).
    ``score``: what selects each cell's configuration
    (:func:`featlib.experiments.colored_mnist.select_best`: the test environments, or ``"val_acc"``)."""
    best = select_best(results, score=score)
    cells: dict[tuple, dict[str, str]] = {}
    done = set(zip(best["dataset"], best["learner"], best["objective"]))
    for dataset in best["dataset"].unique():  # cells of ``learners`` with no runs yet, whole columns or single cells
        for learner in learners:
            col = (DATASET_LABELS[dataset], LEARNER_LABELS[learner])
            for objective in best.loc[best["dataset"] == dataset, "objective"].unique():
                if (dataset, learner, objective) in done:
                    continue
                name = label("objective", objective)
                cells.setdefault(col + ("ours",), {})[name] = missing
                paper = TABLE2.get(dataset, {}).get(objective, {}).get(learner)
                if with_paper:
                    cells.setdefault(col + ("paper",), {})[name] = f"{paper[0]:.2f} ± {paper[1]:.2f}" if paper else "-"
    for row in best.itertuples():
        col = (DATASET_LABELS[row.dataset], LEARNER_LABELS[row.learner])
        name = label("objective", row.objective)
        cells.setdefault(col + ("ours",), {})[name] = _table2_cell(row.mean, row.std, row.n_seeds, with_n,
                                                                   getattr(row, "n_diverged", 0),
                                                                   len(configurations(results, row)))
        paper = TABLE2.get(row.dataset, {}).get(row.objective, {}).get(row.learner)
        if with_paper:
            cells.setdefault(col + ("paper",), {})[name] = (
                f"{paper[0]:.2f} ± {paper[1]:.2f}" if paper else "-")
    if oracle is not None:
        for dataset, frame in oracle.groupby("dataset"):
            if dataset not in set(best["dataset"]):  # no run of this dataset yet: no column to put it in
                continue
            values = frame["worst_test_acc"].to_numpy()
            # the oracle (one model per seed, the same for every column) in the columns with runs only:
            # a column of ``learners`` not yet run reads "not yet run" in every row
            for learner in best.loc[best["dataset"] == dataset, "learner"].unique():
                col = (DATASET_LABELS[dataset], LEARNER_LABELS[learner])
                cells.setdefault(col + ("ours",), {})["Oracle"] = _table2_cell(values.mean(), values.std(), len(values),
                                                                               with_n)
                if with_paper:
                    cells.setdefault(col + ("paper",), {})["Oracle"] = f"{ORACLE[dataset][0]:.2f} ± {ORACLE[dataset][1]:.2f}"
    frame = pd.DataFrame(cells)
    order = [OBJECTIVE_LABELS[o] for o in OBJECTIVE_LABELS if OBJECTIVE_LABELS[o] in frame.index]
    order += [r for r in frame.index if r not in order and r != "Oracle"]  # objectives of one's own
    order += ["Oracle"] if "Oracle" in frame.index else []
    frame = frame.reindex(order)
    rank = {label: i for i, label in enumerate([*DATASET_LABELS.values(), *LEARNER_LABELS.values(), "ours", "paper"])}
    frame = frame[sorted(frame.columns, key=lambda col: [rank[c] for c in col])]
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["dataset", "features", "source"])
    if not with_paper:
        frame.columns = frame.columns.droplevel("source")
    return frame.fillna("-")


def configurations(results: pd.DataFrame, row) -> pd.DataFrame:
    """The configurations (penalty weight, pre-training length) that ``results`` holds for ``row``'s cell."""
    cell = results[(results["dataset"] == row.dataset) & (results["learner"] == row.learner)
                   & (results["objective"] == row.objective)]
    return cell[["penalty_weight", "pretrain_epochs"]].drop_duplicates()


def _table2_cell(mean: float, std: float, n: int, with_n: bool, n_diverged: int = 0, n_configs: int = 0) -> str:
    """One of our cells: "mean ± std" (%); with ``with_n``, "(n = k)" after it, and the mean alone
    for one seed (a standard deviation of one value says nothing). Where configurations diverged
    (:func:`featlib.experiments.colored_mnist.select_best`), the cell says how many of how many: "(2 of 30 diverged)";
    a cell whose every configuration diverged reads "diverged"."""
    diverged = f" ({n_diverged} of {n_configs} diverged)" if n_diverged else ""
    if n_diverged and n_diverged >= n_configs:
        return f"diverged ({n_diverged} of {n_configs})"
    if not with_n:
        return format_mean_std(mean, std) + diverged
    return (f"{100 * mean:.2f}" if n == 1 else format_mean_std(mean, std)) + f" (n = {n})" + diverged


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
    (:data:`FROZEN_REPEATS`), is counted once. The claim of Sec. 5 this checks: FeAT's features
    serve the OOD objectives better than ERM's and Bonsai's (chapter 04, "What we see")."""
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


def progress_sentence(runs: pd.DataFrame, min_seeds: int = TABLE2_MIN_SEEDS) -> str:
    """Where today's protocol's Table 2 stands while it is shown apart: which seeds are complete
    (every frozen cell of both datasets), how many cells the next seed has, and when the chapter's
    table switches to it."""
    complete = whole_seeds(runs)
    cells = len(set(TABLE2)) * len(FROZEN_LEARNERS) * len(TABLE2_OBJECTIVES)
    partial = {int(s): part.groupby(["dataset", "learner", "objective"]).ngroups
               for s, part in runs.groupby("seed") if int(s) not in complete}
    done = (f"{prose.count(len(complete), 'whole seed')} ({prose.listing([str(s) for s in complete])})"
            if complete else "no whole seed yet")
    rest = "".join(f"; seed {s}: {n} of {cells} cells" for s, n in sorted(partial.items()))
    return (f"Today's protocol has {done} of its frozen columns at full size{rest}. The table above "
            f"switches to it when every cell has {prose.count(min_seeds, 'seed')}; until then these pieces "
            "rank nothing.")


def distance_table(runs: pd.DataFrame, caption: str) -> Table:
    """Each frozen column's mean distance from the paper's cells in paper standard deviations
    (:func:`featlib.experiments.colored_mnist.paper_distance`): a column per dataset, a row per
    feature column and selection rule (the test environments, Table 2's; then the validation
    environments, where the runs record them), narrow enough for a phone."""
    frozen = runs[runs["learner"].isin(FROZEN_LEARNERS)]
    rules = {"test-domain": "worst_test_acc"}
    if "val_acc" in frozen and frozen["val_acc"].notna().any():
        rules["training-domain"] = "val_acc"
    z = {rule: paper_distance(select_best(frozen, score=score)).set_index(["dataset", "learner"])
         for rule, score in rules.items()}
    datasets = [d for d in DATASET_LABELS if d in set(frozen["dataset"])]
    rows = []
    for rule, frame in z.items():
        for learner in [l for l in LEARNER_LABELS if l in set(frozen["learner"])]:
            row = {"features": LEARNER_LABELS[learner], **({"selection": rule} if len(z) > 1 else {})}
            for d in datasets:
                value = frame["z"].get((d, learner), np.nan)
                row[DATASET_LABELS[d]] = "-" if pd.isna(value) else f"{value:+.2f}".replace("-", "−")
            rows.append(row)
    return table(pd.DataFrame(rows), caption=caption,
                 note="Mean over the penalised objectives of (ours − paper) / paper's std; the paper's zero-std cell "
                      "(ColoredMNIST-025 CLOvE on ERM's features) left out. Negative: below the paper.")


def best_over_weights(results: pd.DataFrame) -> pd.DataFrame:
    """Fig. 1(b)'s curve: for each objective and pre-training length, the penalty weight with the
    best mean over seeds, with that mean and std."""
    stats = (results.groupby(["objective", "pretrain_epochs", "penalty_weight"])["worst_test_acc"]
             .agg(mean="mean", std=lambda v: float(np.std(v))).reset_index())
    return stats.loc[stats.groupby(["objective", "pretrain_epochs"])["mean"].idxmax()].reset_index(drop=True)


def plot_pretraining_curves(ax, nf_results: pd.DataFrame, feat_best: pd.DataFrame | None = None, feat_epochs=None):
    """OOD accuracy against ERM pre-training epochs per objective (ERM-NF); FeAT marked at the
    epochs its feature learning took."""
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
                label=f"FeAT features ({feat_epochs} epochs)")
    ax.set(xlabel="ERM pre-training epochs", ylabel="OOD accuracy (%), worst test env.")
    ax.legend(fontsize=style.MIN_TEXT_PT, ncol=2)
    return ax


#: Table 7's rows: (column of the rounds frame, label). The retention accuracy is Table 7's,
#: divided by k-1 (featlib.feature_learning.termination); the undivided one is ours, beside it.
ROUND_ROWS = (("train_acc", "Training acc."), ("retention_acc", "Retention acc. (Table 7's: ÷ (k−1))"),
              ("retention_acc_undivided", "Retention acc. (undivided)"), ("ood_acc", "OOD acc."))
_PAPER_ROW = {"train_acc": "train_acc", "retention_acc": "retention_acc", "ood_acc": "ood_acc"}


def round_table_frame(rounds: pd.DataFrame, dataset: str, with_paper: bool = True) -> pd.DataFrame:
    """Table 7: training, retention and OOD accuracy per round (mean ± std over the seeds that
    reached the round, %), the paper's beside ours; the retention accuracy both in the paper's
    terms (divided by k-1) and undivided; how many seeds reached and kept each round."""
    frame = rounds[rounds["dataset"] == dataset]
    out = {}
    for k, per_round in frame.groupby("round"):
        col = f"Round {k}"
        for metric, row_label in ROUND_ROWS:
            if metric not in per_round:
                continue
            values = per_round[metric].dropna().to_numpy()
            out.setdefault((col, "ours"), {})[row_label] = format_mean_std(values.mean(), values.std()) if len(values) else "-"
            if with_paper:
                paper = TABLE7[dataset].get(_PAPER_ROW.get(metric, ""), [])
                value = paper[k - 1] if k - 1 < len(paper) else None
                out.setdefault((col, "paper"), {})[row_label] = f"{value[0]:.2f} ± {value[1]:.2f}" if value else "-"
        out[(col, "ours")]["Seeds that reached it"] = str(per_round["seed"].nunique())
        out[(col, "ours")]["Seeds that kept it"] = str(int(per_round["accepted"].astype(bool).sum()))
    table = pd.DataFrame(out).fillna("")
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["round", "source"])
    return table


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


def describe_early_stop(consequence: dict | None, threshold: float = DEFAULT_TERMINATION_THRESHOLD) -> str:
    """What a seed that stops one round early hands on, in one or two sentences (from
    :func:`early_stop_consequence`); the closest seed's margin says how likely that is."""
    if consequence is None:
        return "Every seed kept a single round, so no seed could stop earlier."
    k, n = consequence["usual_rounds"], consequence["n_seeds"]
    usual = n - consequence["n_early"] - consequence.get("n_later", 0)
    kept_margin = consequence["closest_margin"]
    earlier = (f"A seed whose round {k} fell under it would hand round {k - 1}'s features to the OOD stage, whose "
               f"head scores {100 * consequence['ood_one_earlier']:.1f}% worst-test accuracy against "
               f"{100 * consequence['ood_usual']:.1f}% after round {k} (means over the seeds here), and Table 2's FeAT "
               "column would drop with it.")
    text = f"{'All' if usual == n else f'{usual} of'} {n} seeds keep {k} rounds."
    discarded = consequence.get("discarded_seed")
    if discarded is not None and -consequence["discarded_margin"] < kept_margin:
        # the nearer call is a discarded round just under the threshold: it leads
        later = consequence.get("ood_one_later", np.nan)
        text += (f" The closest call is seed {discarded}'s round {k + 1}, {-consequence['discarded_margin']:.2f} "
                 f"points under the {100 * threshold:.0f}% threshold: had it passed, the OOD stage would have had round "
                 f"{k + 1}'s features" + ("." if pd.isna(later) else
                                          f", whose head scores {100 * later:.1f}% (the mean over the seeds here).")
                 + f" On the kept side no seed came as near: the lowest, seed {consequence['closest_seed']}'s round "
                 f"{k}, scored {kept_margin:.2f} points above the threshold. {earlier}")
    else:
        text += (f" The closest call is seed {consequence['closest_seed']}, whose round {k} scored "
                 f"{kept_margin:.2f} points above the {100 * threshold:.0f}% threshold. {earlier}")
        if discarded is not None:
            later = consequence.get("ood_one_later", np.nan)
            near = -consequence["discarded_margin"] < 5  # points: a call as close as the kept rounds' usual margins
            text += (((f" The other way, seed {discarded}'s round {k + 1} came "
                       f"{-consequence['discarded_margin']:.2f} points under the threshold: had it passed, the OOD "
                       f"stage would have had round {k + 1}'s features") if near else
                      (f" The other way, no discarded round came close: the nearest, seed {discarded}'s "
                       f"round {k + 1}, scored {-consequence['discarded_margin']:.2f} points under the threshold; "
                       f"passing, it would have handed on round {k + 1}'s features"))
                     + ("." if pd.isna(later) else f", whose head scores {100 * later:.1f}% (the mean over the seeds here)."))
    if consequence["n_early"]:
        text += f" {consequence['n_early']} of {n} seeds here did stop earlier; their rows are in the table above."
    return text


def describe_stops(stops: pd.DataFrame, dataset: str, learner: str) -> str:
    """One sentence: how many rounds each seed kept and the score of the discarded round, e.g.
    "kept 2 rounds in 5 of 5 seeds (seeds 1, 2, 3, 4, 5); the discarded round scored 127.1-128.9%"."""
    frame = stops[(stops["dataset"] == dataset) & (stops["learner"] == learner)]
    if frame.empty:
        return "no seed was run"
    parts = []
    for kept, seeds in frame.groupby("rounds_kept")["seed"]:
        parts.append(f"kept {kept} round{'s' if kept != 1 else ''} in {len(seeds)} of {len(frame)} seeds "
                     f"(seed{'s' if len(seeds) != 1 else ''} {', '.join(str(s) for s in sorted(seeds))})")
    scores = 100 * frame["score"].dropna()
    span = (f"{scores.min():.1f}%" if scores.empty or f"{scores.min():.1f}" == f"{scores.max():.1f}"
            else f"{scores.min():.1f}–{scores.max():.1f}%")
    which = "the discarded round's" if len(scores) > 1 else "the one discarded round's"
    tail = ("; no round was discarded" if scores.empty else
            f"; {which} training + retention accuracy was {span} "
            f"against the threshold of {100 * frame['termination_threshold'].iloc[0]:.0f}%")
    return "; ".join(parts) + tail


def plot_set_sizes(ax, rounds: pd.DataFrame, title: str):
    """|D^a_k| and |D^r_k| (share of the training set) after each accepted round, per seed."""
    accepted = rounds[rounds["accepted"]]
    total = accepted["size_augmentation"] + accepted["size_retention"]
    for name, column, fmt in (("augmentation $D^a_k$", "size_augmentation", "o-"),
                              ("retention $D^r_k$", "size_retention", "s--")):
        share = (accepted[column] / total).groupby(accepted["round"])
        ax.errorbar(share.mean().index, 100 * share.mean(), yerr=100 * share.std().fillna(0), fmt=fmt,
                    capsize=3, label=name)
    ax.set(xlabel="round k", ylabel="% of the training set", title=title)
    ax.set_xticks(sorted(accepted["round"].unique()))
    ax.legend(fontsize=style.MIN_TEXT_PT)
    return ax


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


# -- how the pages show them -------------------------------------------------------------------
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


def pretraining_figure(nf_results: pd.DataFrame, feat_best: pd.DataFrame | None, feat_epochs, title: str):
    """Fig. 1(b): OOD accuracy against ERM pre-training epochs per objective; FeAT as stars."""
    fig, axes = style.subplots(1, 1, panel_height=3.2, extra_height=1.0)
    ax = axes[0, 0]
    plot_pretraining_curves(ax, nf_results, feat_best, feat_epochs)
    ax.get_legend().remove()
    ax.set_title(title)
    style.legend_below(fig, ax, ncol=4)
    return fig


def nf_pieces_title(nf_runs: pd.DataFrame, records: pd.DataFrame, dataset: str) -> str:
    """The title of Fig. 1(b) drawn from committed ERM-NF pieces: dataset, seeds, device, precision."""
    seeds = sorted(int(s) for s in nf_runs["seed"].unique())
    said = f"seed {seeds[0]} only" if len(seeds) == 1 else f"mean of {prose.count(len(seeds), 'seed')}"
    kept = records[(records["learner"] == "erm-nf") & (records["dataset"] == dataset)]
    device = prose.listing(sorted(prose.gpu_name(d) or str(d) for d in kept["device"].unique()))
    return f"{DATASET_LABELS[dataset]}, ERM-NF, {said} ({device}, {prose.listing(sorted(kept['precision'].unique()))})"


def _seeds(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]} only" if len(seeds) == 1 else f"seeds {prose.listing([str(s) for s in seeds])}"


def _devices(devices: pd.Series) -> str:
    """'cuda (NVIDIA H200)' as 'one NVIDIA H200'; a CPU as it is recorded."""
    return prose.listing(sorted(f"one {prose.gpu_name(d)}" if prose.gpu_name(d) else str(d) for d in devices.unique()))


def _nf_provenance(nf_runs: pd.DataFrame, records: pd.DataFrame, datasets: Sequence[str], folder: str) -> str:
    """Which committed ERM-NF pieces these are: count, datasets, objectives, seeds, device,
    precision and GPU seconds, from their records (the commits are in the folder's records and
    chapter 09, not in the narrative)."""
    kept = records[(records["learner"] == "erm-nf") & records["dataset"].isin(datasets)]
    seeds = sorted(int(s) for s in nf_runs["seed"].unique())
    present = set(nf_runs["objective"])
    objectives = [label("objective", o) for o in TABLE2[datasets[0]] if o in present]
    missing = [label("objective", o) for o in TABLE2[datasets[0]] if o not in present]
    not_yet = f"; no {prose.listing(missing, 'or')} piece yet" if missing else ""
    return (f"`{folder}`: {prose.count(len(kept), 'piece')} of the ERM-NF column on "
            f"{prose.listing(DATASET_LABELS[d] for d in datasets)} ({prose.listing(objectives)}{not_yet}), "
            f"{_seeds(seeds)}, 50,000 training images, computed on {_devices(kept['device'])} in "
            f"{prose.listing(sorted(kept['precision'].unique()))} in {prose.integer(float(kept['wall_time_s'].sum()))} s")


def nf_pieces_sentence(nf_runs: pd.DataFrame, records: pd.DataFrame, dataset: str, folder: str) -> str:
    """Chapter 03: what committed ERM-NF pieces (the whole-network runs of Fig. 1(b), from a GPU
    sitting) are, and what they can carry: under 3 seeds, how the figure looks at full size, not its verdict."""
    spread, noise, _, _ = pretraining_findings(nf_runs, None)
    text = (f"**Committed: the whole-network runs at full size** ({_nf_provenance(nf_runs, records, [dataset], folder)}). "
            f"Between an objective's best and worst pre-training length the best penalty weight's accuracy moves by "
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
        from featbook.claims import FIG1B_DEPENDENCE_POINTS

        shown = spread >= FIG1B_DEPENDENCE_POINTS
        text += (f"Over {prose.count(seeds, 'seed')}, whose own spread is about {prose.points(noise / 100, sign=False)}, "
                 + ("that is the paper's finding at full size: an objective's OOD accuracy depends on how long ERM ran "
                    "before it." if shown else
                    f"that is not the paper's finding: the dependence on ERM's length stays under the "
                    f"{prose.number(FIG1B_DEPENDENCE_POINTS, 0)} points this book asks of it."))
    return text


def nf_column_sentence(nf_runs: pd.DataFrame, records: pd.DataFrame, folder: str) -> str:
    """Chapter 04: the committed ERM-NF pieces shown apart from Table 2 while they hold fewer
    seeds than a comparison needs (3), or beside it once they do."""
    datasets = [d for d in DATASET_LABELS if d in set(nf_runs["dataset"])]
    text = f"**The whole-network column** ({_nf_provenance(nf_runs, records, datasets, folder)}). "
    joined = nf_ranked_datasets(nf_runs)
    if not joined:
        text += (f"While its cells hold fewer than {TABLE2_MIN_SEEDS} seeds, the column stands here, apart from Table 2: "
                 "it shows what the column looks like at full size, ranks nothing and enters no margin.")
    else:
        rest = [DATASET_LABELS[d] for d in TABLE2 if d not in joined]
        text += (f"Its {prose.listing(DATASET_LABELS[d] for d in joined)} cells hold {TABLE2_MIN_SEEDS} seeds or more "
                 f"each, so they stand in Table 2 above, each with its n"
                 + (f"; {prose.listing(rest)}'s cells still wait for a GPU" if rest else "")
                 + ". Like the paper's, FeAT's margin does not compare with this column.")
    best = select_best(nf_runs[nf_runs["objective"] != "erm"])
    best = best.assign(paper=[TABLE2.get(r.dataset, {}).get(r.objective, {}).get("erm-nf", (np.nan,))[0]
                              for r in best.itertuples()]).dropna(subset=["paper", "mean"])
    if len(best):
        gap = 100 * best["mean"] - best["paper"]
        far = best.loc[gap.abs().idxmax()]
        text += (f" Its penalised cells sit {prose.number(abs(gap.mean()), 1)} points "
                 f"{'above' if gap.mean() > 0 else 'below'} the paper's on average, the furthest "
                 f"{label('objective', far['objective'])} on {DATASET_LABELS[far['dataset']]} "
                 f"({prose.number(100 * far['mean'], 2)} against {prose.number(far['paper'], 2)})")
        n = int(best["n_seeds"].max())
        paper_std = TABLE2[far["dataset"]][far["objective"]]["erm-nf"][1]
        text += (f"; the paper's std for that cell is {prose.number(paper_std, 2)} points over 10 seeds"
                 + (f". Over {prose.count(n, 'seed')} this is a draw, not a verdict on whether the column reproduces."
                    if n < 3 else "."))
    return text


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


def _column_order(columns) -> list:
    rank = {label: i for i, label in enumerate(LEARNER_LABELS.values())}
    return sorted(columns, key=lambda c: rank.get(c, len(rank)))


def table2(frame: pd.DataFrame, caption: str, note: str | None = None) -> Tables:
    """Table 2 (the frame of :func:`table2_frame`) as one table per dataset: rows the
    objectives, columns the learners, each cell ours with the paper's under it."""
    out = []
    parts = split_by(frame, level=0)
    for i, (dataset, part) in enumerate(parts.items()):
        cells = paired(part, paper_prefix="") if isinstance(part.columns, pd.MultiIndex) else part
        cells = cells[_column_order(cells.columns)]
        cells.index.name = "objective"
        last = i == len(parts) - 1
        out.append(table(cells, index=True, caption=f"{caption}: {dataset}", note=note if last else None))
    return Tables(out)


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


def table2_from_pieces(pieces: dict, learners: Sequence[str]) -> tuple[str, Tables]:
    """Chapter 04's Table 2 from committed pieces (:func:`featlib.experiments.table2_pieces.load_pieces`):
    the sentence that introduces it (how many pieces, made on what, over how many seeds) and the
    tables, every column of ``learners`` shown (but ERM-NF where no piece has it), a cell without a piece
    reading *not yet run*. Where
    every cell has the same number of seeds the sentence says it once; otherwise each cell says
    its own ("n = 2")."""
    records = pieces["records"]
    counts = sorted(set(select_best(pieces["runs"])["n_seeds"])) if not pieces["runs"].empty else []
    uniform = len(counts) == 1

    def made_on(devices):
        return prose.listing(sorted({"a CPU" if d == "cpu" else (f"one {prose.gpu_name(d)}" if prose.gpu_name(d) else str(d))
                                     for d in devices}))

    nf = records["learner"] == "erm-nf"  # the ERM-NF column, from GPU sittings (with_nf_column)
    devices = made_on(records.loc[~nf, "device"])
    if nf.any():
        devices += (f"; the ERM-NF column on "
                    f"{prose.listing(DATASET_LABELS[d] for d in TABLE2 if d in set(records.loc[nf, 'dataset']))} "
                    f"on {made_on(records.loc[nf, 'device'])}, from GPU sittings")
    seeds = (f"every cell is over {prose.count(counts[0], 'seed')}" if uniform
             else "each cell says over how many seeds it is")
    nf_apart = "erm-nf" in learners and "erm-nf" not in set(records["learner"])
    over = prose.count(counts[0], "seed") if uniform else "n seeds"
    # a column with no piece at all (ERM-NF, from GPU sittings) would be "not yet run" in every row and push
    # FeAT's column off a phone's screen: it is left out here and shown apart where it has pieces
    present = set(pieces["runs"]["learner"]) if not pieces["runs"].empty else set()
    learners = [c for c in learners if c in present or c != "erm-nf"]
    frame = table2_frame(pieces["runs"], pieces["oracle"], with_n=not uniform, learners=learners,
                         missing="not yet run")
    missing = frame.astype(str).apply(lambda column: column.str.contains("not yet run")).to_numpy().any()
    intro = (f"Table 2 from the pieces committed so far ({prose.count(len(records), 'piece')}, made on {devices}); "
             f"{seeds} (the paper's are over 10)"
             + (". A cell marked *not yet run* has no piece yet at full size" if missing else ""))
    intro += ("; the whole-network ERM-NF column is not in these pieces: GPU sittings add it, and it is shown "
              "apart below." if nf_apart else ".")
    shown = table2(frame,
                   "Table 2, committed pieces",
                   note=f"Each cell: ours (mean ± std over {over}, %), the paper's value under it in grey. On frozen "
                        "features IB-IRM's bottleneck term is a constant, so it trains as IRMv1 and its cells repeat "
                        "IRMv1's, as in the paper's table; the counts of rows on this page take that row once. The "
                        "oracle is one model "
                        "per seed, trained on images without colour, the same in every column.")
    return intro, shown


def comparison(wins: pd.DataFrame, feat: str = "ifeat") -> Table:
    """Best mean OOD accuracy (%) per dataset and objective of ERM's, Bonsai's and FeAT's
    frozen features, with labels."""
    order = {d: i for i, d in enumerate(DATASET_LABELS)} | {o: i for i, o in enumerate(OBJECTIVE_LABELS)}
    wins = wins.sort_values(["dataset", "objective"], key=lambda c: c.map(order))
    frame = pd.DataFrame({
        "dataset": [DATASET_LABELS.get(d, d) for d in wins["dataset"]],
        "objective": [OBJECTIVE_LABELS.get(o, o) for o in wins["objective"]],
        **{LEARNER_LABELS[learner]: [prose.number(100 * v, 1) for v in wins[learner]]
           for learner in (*BASELINES, feat)},
    })
    return table(frame, caption="Best mean OOD accuracy (%) on frozen features")


def round_table(frame: pd.DataFrame, caption: str) -> Table:
    """Table 7 (the frame of :func:`round_table_frame`) turned so that it fits: one row
    per round, one column per quantity, ours with the paper's under it."""
    cells = paired(frame, paper_prefix="")
    turned = cells.T
    turned.index.name = "round"
    with_paper = any(isinstance(c, Stacked) and c.sub for c in turned.to_numpy().ravel())
    note = "Mean ± std over the seeds that reached the round (%)" + (
        "; the second, grey line is the paper's Table 7 where it prints a value." if with_paper else ".")
    return table(turned, index=True, caption=caption, note=note)


def stop_margin_table(margins: pd.DataFrame, caption: str) -> Table:
    """The stop, seed by seed (the frame of :func:`stop_margins`)."""
    frame = pd.DataFrame({
        "seed": margins["seed"].astype(int),
        "rounds kept": margins["rounds_kept"].astype(int),
        "last kept round: score − threshold (points)": [prose.number(v, 2, sign=True) for v in margins["kept_margin"]],
        "discarded round": [prose.MISSING if r is None or pd.isna(r) else str(int(r)) for r in margins["discarded_round"]],
        "its score − threshold (points)": [prose.number(v, 2, sign=True) for v in margins["discarded_margin"]],
        "OOD accuracy of the kept features (%)": [prose.number(100 * v, 1) for v in margins["ood_acc_of_kept"]],
    })
    return table(frame, caption=caption,
                 note="Score: training accuracy + retention accuracy (Table 7's, divided by k−1); a round is "
                      "kept when its score reaches the threshold of 130%. Round 1 is always kept (nothing is retained yet).")


_METRIC_LABELS = {"train_acc": "training acc.", "retention_acc": "retention acc. (÷ (k−1))", "ood_acc": "OOD acc."}


def table7_choices_table(comparison: pd.DataFrame, caption: str) -> Table:
    """The frame of :func:`against_table7` as a table: one row per Table 7 cell,
    one column per choice (mean ± std over seeds, and the distance to the paper in its stds under
    it), and the paper's value."""
    rows = {}
    for _, r in comparison.iterrows():
        key = (int(r["round"]), r["metric"])
        row = rows.setdefault(key, {"round": str(key[0]), "quantity": _METRIC_LABELS.get(r["metric"], r["metric"])})
        ours = prose.mean_std(r["mean"], r["std"]) if r["n_seeds"] > 1 else prose.number(r["mean"])  # no spread of one seed
        row[f"{r['choice']} (n = {int(r['n_seeds'])})"] = Stacked(ours, f"{_stds(r['z'])} paper std", paper=True)
        row["paper"] = prose.mean_std(r["paper_mean"], r["paper_std"])
    order = list(_METRIC_LABELS)
    frame = pd.DataFrame([rows[k] for k in sorted(rows, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 9))])
    columns = ["round", "quantity"] + [c for c in frame.columns if c not in ("round", "quantity", "paper")] + ["paper"]
    return table(frame[columns], caption=caption, key="ours minus the paper's, in the paper's stds",
                 note="Mean ± std over seeds (%); under it, (ours − paper) divided by the paper's std.")


def set_sizes_figure(rounds: pd.DataFrame, datasets, learner: str = "ifeat"):
    """|D^a_k| and |D^r_k| after each accepted round, one panel per dataset."""
    fig, axes = style.panels(len(datasets), max_columns=2, extra_height=0.8)
    for ax, d in zip(axes, datasets):
        shown = rounds[(rounds["learner"] == learner) & (rounds["dataset"] == d)]
        plot_set_sizes(ax, shown, f"{LEARNER_LABELS[learner]}, {DATASET_LABELS[d]}")
        if ax.get_legend():
            ax.get_legend().remove()
    style.legend_below(fig, axes, ncol=2)
    return fig


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
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=4, capsize=0, lw=0.8,
                        color=style.colour(learner, default="#999999"), label=LEARNER_LABELS[learner])
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


def _weight(w: float) -> str:
    """A penalty weight as the paper writes it: 1e4, or 5e3."""
    mantissa, exponent = f"{w:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _stds(z: float) -> str:
    """A distance in paper stds as the tables write it: "+1.3", "−0.1" (one decimal, always signed)."""
    return f"{z:+.1f}".replace("-", "\u2212")


def _over(n_seeds: int) -> str:
    """What a gap-study cell is: one seed's value, or the mean ± std over seeds."""
    return "one seed (no spread to show)" if n_seeds == 1 else f"mean ± std over {prose.count(n_seeds, 'seed')}"


def _ours(row) -> str:
    """Mean ± std over seeds in %, or the single value when one seed ran (no spread to show)."""
    return prose.mean_std(100 * row.mean, 100 * row.std) if row.n_seeds > 1 else prose.number(100 * row.mean)


def paper_cell(dataset: str, objective: str, learner: str) -> str:
    """The paper's Table 2 value of a cell as the prose writes it ("17.14 ± 0.73")."""
    mean, std = TABLE2[dataset][objective][learner]
    return prose.mean_std(mean, std)


def erm_nf_erm_table(summary: pd.DataFrame, n_seeds: int) -> Table:
    """The ERM-NF x ERM cell of ColoredMNIST-025 under each ERM risk and length
    (:func:`.gap_studies.erm_nf_erm_summary`), the paper's value beside it."""
    risks = {"sum": "sum over environments (Eq. 2; featlib preset)", "mean": "pooled mean (reference code)"}
    rows = [{"ERM risk": risks.get(r.risk, r.risk), "steps": int(r.step),
             "worst test acc. (%)": _ours(r)} for r in summary.itertuples()]
    return table(pd.DataFrame(rows), caption=f"ERM-NF with the ERM objective, {DATASET_LABELS['cmnist025']}",
                 note=f"Ours: {_over(n_seeds)}, full data. The paper's Table 2: "
                      f"{paper_cell('cmnist025', 'erm', 'erm-nf')}.", wrap=["ERM risk"])


#: Appendix F.1's penalty weights: the Table 2 protocol's for every cell but ColoredMNIST-01's CLOvE
#: cells (featlib.hparams.OBJECTIVE_GRIDS), and so for every cell the tables below flag; a gap
#: study's best weight outside them is flagged, since the protocol could not have picked it.
PROTOCOL_WEIGHTS = (1e1, 1e2, 1e3, 1e4, 1e5)


def _grid_weight(w: float) -> str:
    return _weight(w) if any(np.isclose(w, g) for g in PROTOCOL_WEIGHTS) else f"{_weight(w)} (outside the protocol's grid)"


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


def frozen_steps_conclusion(changes: pd.DataFrame) -> str:
    """The study's one sentence: what each change alone moves, and whether the best weights lie
    outside the protocol's grid."""
    if changes.empty:
        return "The study holds no cell to compare."
    parts = []
    for change, rows in changes.groupby("change", sort=False):
        moves = ", ".join(f"{OBJECTIVE_LABELS.get(r.objective, r.objective)} by "
                          f"{prose.number(100 * r.difference, 1, sign=True)} points" for r in rows.itertuples())
        parts.append(f"{change} alone moves {moves}")
    outside = sorted({_weight(w) for w in pd.concat([changes["weight_before"], changes["weight_after"]])
                      if not any(np.isclose(w, g) for g in PROTOCOL_WEIGHTS)})
    n = int(changes["n_seeds"].min())
    tail = (f"; the best weight is {', '.join(outside)} in some cells, outside the protocol's grid, so Table 2's "
            "protocol could not choose it" if outside else "")
    seeds = "one seed, so this gives a direction, not a size" if n == 1 else f"{prose.count(n, 'seed')}"
    return "; ".join(parts) + tail + f" ({seeds})."


def erm_nf_erm_conclusion(summary: pd.DataFrame) -> str:
    """The ERM-NF x ERM study's one sentence: the length alone (our summed risk) and the risk alone
    (at the longer length) each moved the cell by how much, against the paper's value."""
    cells = {(r.risk, int(r.step)): r for r in summary.itertuples()}
    steps = sorted({s for _, s in cells})
    if len(steps) < 2 or not all((risk, st) in cells for risk in ("sum", "mean") for st in steps[:2]):
        return "The study holds no pair of cells to compare."
    short, long = steps[0], steps[-1]
    length = cells["sum", short].mean - cells["sum", long].mean
    risk = cells["mean", long].mean - cells["sum", long].mean
    n = int(summary["n_seeds"].min())
    seeds = "one seed, so this gives a direction, not a size" if n == 1 else prose.count(n, "seed")
    return (f"With our summed risk, stopping at step {short:,} instead of {long:,} alone moves the cell by "
            f"{prose.number(100 * length, 1, sign=True)} points; at {long:,} steps, the pooled mean instead of the sum "
            f"alone moves it by {prose.number(100 * risk, 1, sign=True)}; both together (the reference code's ERM) give "
            f"{prose.number(100 * cells['mean', short].mean, 1)}% against the paper's "
            f"{paper_cell('cmnist025', 'erm', 'erm-nf')} ({seeds}).")


def frozen_steps_table(summary: pd.DataFrame, n_seeds: int) -> Table:
    """V-REx and Fishr heads on frozen ERM features of ColoredMNIST-01 after each number of steps,
    with and without L2 on the head (:func:`.gap_studies.frozen_steps_summary`), the paper's
    value beside each objective."""
    rows = [{"objective": OBJECTIVE_LABELS.get(r.objective, r.objective),
             "L2 on the head": "yes (featlib)" if r.head_l2 > 0 else "no",
             "steps": int(r.step), "best penalty weight": _grid_weight(r.penalty_weight),
             "worst test acc. (%)": _ours(r),
             "paper (Table 2)": paper_cell("cmnist01", r.objective, "erm")}
            for r in summary.sort_values(["objective", "head_l2", "step"], ascending=[False, False, True]).itertuples()]
    return table(pd.DataFrame(rows), caption=f"Frozen ERM features, {DATASET_LABELS['cmnist01']}: V-REx and Fishr by "
                                             "length of the OOD stage",
                 note=f"Ours: the best penalty weight of 1e1-1e6 at each length (no warm-up), {_over(n_seeds)}, full data.")


def bonsai_dro_length_table(summary: pd.DataFrame, n_seeds: int) -> Table:
    """Bonsai's frozen-feature cells of ColoredMNIST-025 with a 150- and a 500-epoch DRO round
    (:func:`.gap_studies.bonsai_dro_length_summary`), the paper's Bonsai cell beside each."""
    from featlib.hparams import TABLE6

    default = TABLE6["cmnist025"]["bonsai"]["round_epochs"][1]
    lengths = {150: "150 (Table 6)", 500: "500 (Appendix F.1's text, the Bonsai authors' script)"}
    lengths = {n: f"{text}; the book's default" if n == default else text for n, text in lengths.items()}
    rows = [{"objective": OBJECTIVE_LABELS.get(r.objective, r.objective),
             "DRO round (epochs)": lengths.get(int(r.dro_epochs), str(int(r.dro_epochs))),
             "best penalty weight": _grid_weight(r.penalty_weight), "pre-training": f"{int(r.pretrain_epochs)} epochs",
             "worst test acc. (%)": _ours(r), "paper (Table 2)": paper_cell("cmnist025", r.objective, "bonsai")}
            for r in summary.sort_values(["objective", "dro_epochs"]).itertuples()]
    return table(pd.DataFrame(rows), caption=f"Bonsai's DRO round, {DATASET_LABELS['cmnist025']}: IRMv1 and V-REx "
                                             "on its frozen features",
                 note=f"Ours: the protocol's grid (5 weights x 6 pre-training lengths, 1,000 steps) on each variant's "
                      f"features, the best configuration's {_over(n_seeds)}, full data.",
                 wrap=["DRO round (epochs)"])


def bonsai_dro_length_conclusion(summary: pd.DataFrame) -> str:
    """The study's one sentence: what the longer DRO round alone moves, objective by objective,
    against the seed-to-seed spread and the paper's Bonsai cells."""
    cells = {(r.objective, int(r.dro_epochs)): r for r in summary.itertuples()}
    objectives = [o for o in dict.fromkeys(summary["objective"]) if (o, 150) in cells and (o, 500) in cells]
    if not objectives:
        return "The study holds no pair of DRO lengths to compare."
    n = int(summary["n_seeds"].min())
    moves = ", ".join(f"{OBJECTIVE_LABELS.get(o, o)} from {prose.number(100 * cells[o, 150].mean, 1)}% to "
                      f"{prose.number(100 * cells[o, 500].mean, 1)}% (paper {paper_cell('cmnist025', o, 'bonsai')})"
                      for o in objectives)
    spread = max(100 * cells[o, d].std for o in objectives for d in (150, 500)) if n > 1 else None
    seeds = ("one seed, so this gives a direction, not a size" if n == 1 else
             f"{prose.count(n, 'seed')}, seed-to-seed standard deviation up to {prose.number(spread, 1)} points")
    return f"A 500-epoch DRO round instead of Table 6's 150 alone moves {moves} ({seeds})."


#: ``clove-01``'s variants as a reader reads them (:data:`featlib.experiments.gap_studies.CLOVE_VARIANTS`).
CLOVE_VARIANT_LABELS = {
    "protocol": "the protocol's: full batch, the head's L2",
    "no-l2": "no L2 (the authors' code)",
    "minibatch": "one 512-example minibatch per environment and step (the authors' code)",
    "reference": "both, as the authors' code runs it",
}


def clove_01_table(summary: pd.DataFrame, n_seeds: int) -> Table:
    """CLOvE on the three frozen features of ColoredMNIST-01, per variant and OOD length
    (:func:`featlib.experiments.gap_studies.clove_01_summary`), a column per feature learner and the
    paper's Table 2 cells as the last row."""
    learners = [l for l in FROZEN_LEARNERS if l in set(summary["learner"])]
    rows = []
    for (variant, step), part in summary.groupby(["variant", "step"], sort=False):
        cells = {r.learner: _ours(r) for r in part.itertuples()}
        rows.append({"CLOvE": CLOVE_VARIANT_LABELS.get(variant, variant),
                     "OOD steps": f"{int(step) + 1 if step == 500 else int(step):,}",
                     **{f"{LEARNER_LABELS[l]}'s features": cells.get(l, prose.MISSING) for l in learners}})
    rows.append({"CLOvE": "paper (Table 2)", "OOD steps": "",
                 **{f"{LEARNER_LABELS[l]}'s features": paper_cell("cmnist01", "clove", l) for l in learners}})
    return table(pd.DataFrame(rows), caption=f"CLOvE as the authors' code runs it, {DATASET_LABELS['cmnist01']}: "
                                             "the three frozen features",
                 note=f"Ours: Appendix F.1's grid (1e1 to 1e5: 5 weights x 6 pre-training lengths; Table 2's "
                      "-01 CLOvE cells take the decided grid instead) on each seed's features, the "
                      f"configuration Table 2's rule picks, {_over(n_seeds)}, full data; 501 steps is the authors' "
                      "length (scored at step 500), 2,500 the protocol's.",
                 wrap=["CLOvE"], cards=True)


def clove_01_conclusion(summary: pd.DataFrame, threshold: float | None = None) -> str:
    """The study's one sentence: per feature learner, how many of its settings land within
    ``threshold`` (default :data:`FAR_Z`) paper stds of the paper's CLOvE cell on ColoredMNIST-01,
    and their range."""
    threshold = FAR_Z if threshold is None else threshold
    if summary.empty:
        return "The study holds no settings to compare."
    parts, missed = [], []
    for learner in [l for l in FROZEN_LEARNERS if l in set(summary["learner"])]:
        values = 100 * summary.loc[summary["learner"] == learner, "mean"]
        paper, std = TABLE2["cmnist01"]["clove"][learner]
        near = int(((values - paper).abs() <= threshold * std).sum())
        text = (f"{LEARNER_LABELS[learner]}'s {prose.number(values.min())}-{prose.number(values.max())} against "
                f"{prose.mean_std(paper, std)} ({near} of {len(values)} within {prose.number(threshold, 0)} paper stds)")
        (missed if near == 0 else parts).append((learner, text))
    n = int(summary["n_seeds"].min())
    seeds = "one seed" if n == 1 else prose.count(n, "seed")
    said = f"Over the {prose.count(int(summary.groupby(['variant', 'step']).ngroups), 'setting')} ({seeds}): "
    said += prose.listing([t for _, t in parts + missed]) + "."
    if missed and parts:
        near = prose.listing([f"{LEARNER_LABELS[l]}'s" for l, _ in parts])
        far = prose.listing([f"{LEARNER_LABELS[l]}'s" for l, _ in missed])
        said += (f" CLOvE, as we run it and as the authors' code runs it, lands on the paper's cells on {near} "
                 f"features, and no variant brings {far} near the paper's: that distance is not in CLOvE's "
                 "implementation.")
    return said


CLOVE_GRID_LABELS = {"script": "the Bonsai authors' script: 1, 5, 10, 50, 100",
                     "f1": "Appendix F.1: 1e1 to 1e5 (the pieces the decided grid replaced in Table 2)"}


def clove_grid_table(summary: pd.DataFrame) -> Table:
    """The ``clove-grid-01`` study (:func:`featlib.experiments.gap_studies.clove_grid_summary`): a row
    per penalty grid, a column per feature learner, each cell ours with its distance from the
    paper's in paper stds, the summed distance, and the paper's Table 2 cells as the last row."""
    learners = [l for l in FROZEN_LEARNERS if l in set(summary["learner"])]
    rows = []
    for grid, part in summary.groupby("grid", sort=False):
        cells = {r.learner: r for r in part.itertuples()}
        seeds = sorted({int(r.n_seeds) for r in part.itertuples()})
        rows.append({"CLOvE's penalty weights": CLOVE_GRID_LABELS.get(grid, grid),
                     "seeds": prose.listing(str(s) for s in seeds),
                     **{f"{LEARNER_LABELS[l]}'s features": (f"{_ours(cells[l])} ({_stds(cells[l].z)})"
                                                            if l in cells else prose.MISSING) for l in learners},
                     "summed distance": prose.number(float(part["z"].abs().sum()), 1)})
    rows.append({"CLOvE's penalty weights": "paper (Table 2)", "seeds": "10",
                 **{f"{LEARNER_LABELS[l]}'s features": paper_cell("cmnist01", "clove", l) for l in learners},
                 "summed distance": ""})
    return table(pd.DataFrame(rows), caption=f"CLOvE's penalty weights on {DATASET_LABELS['cmnist01']}: "
                                             "the three frozen-feature cells under each grid",
                 note="Ours: the configuration Table 2's rule picks over the grid's 5 weights x 6 pre-training "
                      "lengths, mean ± std over the seeds given, full data, the protocol's 2,500 OOD steps; in "
                      "brackets its distance from the paper's cell in the paper's stds. Summed distance: the sum "
                      "of the three distances' sizes.",
                 wrap=["CLOvE's penalty weights"], cards=True)


def clove_grid_conclusion(summary: pd.DataFrame, threshold: float | None = None) -> str:
    """The study's verdict by the criterion fixed before its third seed ran: move CLOvE's
    ColoredMNIST-01 grid to the script's if all three of its cells lie within ``threshold`` (default
    :data:`FAR_Z`) paper stds of the paper's and their summed distance is below Appendix F.1's."""
    threshold = FAR_Z if threshold is None else threshold
    grids = {g: part for g, part in summary.groupby("grid")}
    if "script" not in grids:
        return "The study holds no cells to compare."

    def said(grid):
        part = grids[grid]
        zs = prose.listing(_stds(z) for z in part.sort_values(
            "learner", key=lambda c: c.map({l: i for i, l in enumerate(FROZEN_LEARNERS)}))["z"])
        return f"{zs} paper stds ({prose.number(float(part['z'].abs().sum()), 1)} in all)"

    script = grids["script"]
    text = (f"Under the script's weights the three cells (ERM's, Bonsai's and FeAT's features) lie {said('script')} "
            f"from the paper's, over {prose.count(int(script['n_seeds'].min()), 'seed')}")
    if "f1" not in grids:
        return text + "; Table 2's cells under Appendix F.1's grid are not at hand to compare."
    text += f"; under Appendix F.1's grid, {said('f1')}. "
    within = bool((script["z"].abs() <= threshold).all())
    smaller = float(script["z"].abs().sum()) < float(grids["f1"]["z"].abs().sum())
    text += (f"The criterion fixed before the third seed ran (every cell within {prose.number(threshold, 0)} paper "
             "stds, and a smaller summed distance) is "
             + ("met: the script's weights are the decision (featlib.hparams.DECISIONS), for every column alike."
                if within and smaller else "not met: Appendix F.1's grid stays."))
    if within and smaller and "clove" not in OBJECTIVE_GRIDS.get("cmnist01", {}):
        text += (" Table 2 takes them together with the 15 pieces that apply them "
                 "(featlib.hparams.OBJECTIVE_GRIDS); until then its ColoredMNIST-01 CLOvE cells are Appendix F.1's.")
    elif within and smaller:
        text += (" Table 2 applies them (featlib.hparams.OBJECTIVE_GRIDS): its ColoredMNIST-01 CLOvE cells are "
                 "this grid's, and the table's Appendix F.1 row holds the pieces they replaced.")
    edge = script["penalty_weight"].eq(script["penalty_weight"].max()).all() and len(script)
    if edge:
        text += (f" Every cell picks the script's largest weight, {prose.number(float(script['penalty_weight'].max()), 0)}: "
                 "the edge of its grid (Appendix F.1's goes on to 1e5).")
    return text


def decisions_table(decisions, evidence: bool = True) -> Table:
    """The protocol's open choices as decided (:data:`featlib.hparams.DECISIONS`): the choice, the
    value featlib runs and (``evidence``) the source and measurement that decided it; chapter 04
    shows the short form, chapter 09 the whole."""
    rows = [{"choice": name, "featlib runs": h.value, **({"why (source and evidence)": h.source} if evidence else {})}
            for name, h in decisions.items()]
    caption = ("Where the paper leaves ColoredMNIST's protocol open, and what decided it" if evidence else
               "Where the paper leaves ColoredMNIST's protocol open: what this book runs")
    return table(pd.DataFrame(rows), caption=caption, wrap=list(rows[0]), cards=evidence)


def decisions_html(decisions) -> str:
    """Chapter 09's whole form of :func:`decisions_table`: per open choice, the value featlib runs
    and its source in one short paragraph, the measurement that decided it (the part of the source
    from "Measured" on) folded under it, so that a long piece of evidence never fills a table cell."""
    import html as html_lib

    parts = []
    for name, h in decisions.items():
        source = str(h.source)
        cut = source.find(" Measured")
        head, measured = (source, "") if cut < 0 else (source[:cut], source[cut + 1:])
        block = (f'<p><strong>{html_lib.escape(name)}: {html_lib.escape(str(h.value))}.</strong> '
                 f"{html_lib.escape(head[0].upper() + head[1:])}</p>")
        if measured:
            block += (f'<details class="feat-provenance" style="margin: -0.6em 0 1.2em 0"><summary>What was measured</summary>'
                      f"<p>{html_lib.escape(measured)}</p></details>")
        parts.append(block)
    return ('<div class="feat-decisions"><p class="feat-table-caption" style="font-weight: 600">Where the paper '
            "leaves ColoredMNIST's protocol open, and what decided it</p>" + "".join(parts) + "</div>")


def presets_table(presets) -> Table:
    """The protocol presets (:data:`.cmnist_presets.PROTOCOL_PRESETS`): name, what it sets, source."""
    rows = [{"preset": name, "what it sets": presets.get(name).description, "source": presets.get(name).source}
            for name in presets.names()]
    return table(pd.DataFrame(rows), caption="Protocol presets of ColoredMNIST", wrap=["what it sets", "source"])


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


def pretraining_what_we_see(run, findings: tuple, committed: tuple | None = None,
                            committed_note: str | None = None, fetch_failed: bool = False,
                            frozen: tuple | None = None, frozen_seeds: int = 0,
                            nf: tuple | None = None, nf_seeds: int = 0,
                            frozen_against: pd.DataFrame | None = None) -> str:
    """Chapter 03's "What we see", from the numbers of :func:`pretraining_findings`, the largest
    evidence first: the committed full-scale whole-network results (``committed``, with
    ``committed_note`` saying where they come from); else the committed full-size evidence there
    is, the frozen-feature study (``frozen``, over ``frozen_seeds``) and the whole-network pieces
    of GPU sittings (``nf``, over ``nf_seeds``); then this run's, ranked only when ``run`` (a
    :class:`featbook.run_scale.RunScale`) is large enough to compare methods, else described as a
    check of the pipeline that measures nothing. ``fetch_failed``: the committed results could
    not be fetched or read (:attr:`featbook.committed.Located.failed`), so the text does not claim
    that none are committed. ``frozen_against`` (:func:`feat_against_lengths` of the frozen study)
    names the objectives FeAT's features do not lift, with both accuracies."""
    spread, noise, beats, n_objectives = findings
    if committed is not None:
        f_spread, f_noise, f_beats, f_n = committed
        where = f" ({committed_note.rstrip('.')})" if committed_note else ""
        return (f"**From the committed full-scale results**{where}: " + _fig1b_sentence(f_spread, f_noise)
                + _feat_sentence(f_beats, f_n))
    parts = []
    if frozen is not None:
        f_spread, f_noise, f_beats, f_n = frozen
        parts.append(f"**At full data size, on frozen features** (`results/cmnist-pretraining`, "
                     f"{prose.count(frozen_seeds, 'seed')}): " + _fig1b_sentence(f_spread, f_noise, frozen_seeds)
                     + (_feat_sentence(f_beats, f_n, frozen=True) if frozen_against is None or frozen_against.empty
                        else " " + feat_against_lengths_sentence(frozen_against, frozen_seeds)
                        + " (IB-IRM is left out: on frozen features it trains as IRMv1.)"))
    if nf is not None:
        n_spread, n_noise, _, _ = nf
        parts.append(f"**At full data size, the whole network** (the GPU pieces above, {prose.count(nf_seeds, 'seed')}): "
                     + _fig1b_sentence(n_spread, n_noise, nf_seeds))
    if parts and not run.can_compare_methods:
        scale = ("one seed so far: the direction of the effect, not its size over seeds"
                 if max(frozen_seeds, nf_seeds) < 3 else "")
        parts.append((f"({scale[0].upper()}{scale[1:]}.) " if scale else "")
                     + f"**This page's own run** is {run.summary}. It checks that every step runs; at its size the "
                     "accuracies are far from the full-size ones, so it measures no effect and ranks nothing.")
        return "\n\n".join(parts)
    if run.can_compare_methods:
        return "\n\n".join(parts + [
            f"**This run** ({run.summary}): " + _fig1b_sentence(spread, noise) + _feat_sentence(beats, n_objectives)
            + (" The committed full-scale results could not be read in this runtime (the note in the full-scale "
               "section says what to do)." if fetch_failed else "" if parts else
               " No full-scale results are committed yet.")])
    return (f"**This run is {run.summary}.** It shows that every objective trains at every pre-training length "
            "and that the curves are drawn; at its size the accuracies are far from the full-size ones, so it "
            "measures no effect and ranks nothing. The colab profile (`from featbook import profiles; "
            "profiles.apply(\"colab\", globals())` at the end of the parameters cell) or the full protocol shows "
            "the effect, and the full-scale section at the top of this page shows the committed results "
            + ("once they can be fetched (its note says what to do)." if fetch_failed
               else "once the repository has them."))


def frozen_columns_sentence(frozen: pd.DataFrame, pieces: str = "the committed pieces", earlier: bool = False) -> str:
    """What Table 2's committed frozen-feature columns show beside the paper's, from
    :func:`frozen_columns`: where FeAT's features give the best mean (and where the
    paper's table says so), how far our cells lie from the paper's per column, and the largest gap.
    ``pieces`` names them (the earlier protocol's, while today's has too few seeds; ``earlier``: then
    the sentence says that protocol's baselines are weaker, so its counts overstate FeAT's lead)."""
    order = {d: i for i, d in enumerate(DATASET_LABELS)}
    frozen = frozen.sort_values("dataset", key=lambda c: c.map(order)).reset_index(drop=True)
    lo, hi = int(frozen["min_seeds"].min()), int(frozen["max_seeds"].max())
    seeds = prose.count(hi, "seed") if lo == hi else f"{lo}-{hi} seeds"
    labels = {r.dataset: DATASET_LABELS.get(r.dataset, r.dataset) for r in frozen.itertuples()}
    best = [f"{r.feat_best} of {r.objectives} penalised objectives on {labels[r.dataset]} (the paper's Table 2: "
            f"{r.paper_feat_best})" for r in frozen.itertuples()]
    gaps = [f"{labels[r.dataset]}: " + ", ".join(
        f"{LEARNER_LABELS[c]} {prose.number(getattr(r, f'gap_{c}'), 1)}" for c in FROZEN_LEARNERS)
        for r in frozen.itertuples()]
    worst = frozen.loc[frozen["largest_gap"].abs().idxmax()]
    direction = "below" if worst["largest_gap"] < 0 else "above"
    text = (f"**Table 2's frozen-feature columns at full size** ({pieces}, {seeds} per cell; the "
            f"paper's cells are over 10): {LEARNER_LABELS['ifeat']}'s features give the best mean of the three "
            f"columns for {prose.listing(best)}. Our cells' mean distance from the paper's, in points, per "
            f"column: {'; '.join(gaps)}{'' if earlier else CALIBRATION}. The largest difference is "
            f"{LEARNER_LABELS[worst['largest_learner']]}'s features "
            f"with {OBJECTIVE_LABELS.get(worst['largest_objective'], worst['largest_objective'])} on "
            f"{labels[worst['dataset']]}, {prose.number(abs(worst['largest_gap']), 1)} points {direction} the paper.")
    text += (f" Over {seeds} (the paper's: 10) the counts describe these seeds: columns within a point or two of "
             "each other can change places with more.")
    if earlier:
        text += (" That protocol's baselines sit below the paper's (its Bonsai round of 150 epochs and OOD stage of "
                 "1,000 steps: chapter 09's decisions), which widens FeAT's lead by itself; today's protocol decides "
                 f"the ranking once every cell has {prose.count(TABLE2_MIN_SEEDS, 'seed')}.")
    return text + " The whole-network ERM-NF column comes from GPU sittings and is shown apart from this table."


#: Today's protocol chose its OOD stage's length (which the paper does not give) as the one that
#: brings the three frozen columns closest to the paper's table (featlib.hparams, "ood_steps"): said
#: wherever the distances from the paper's cells are quoted.
CALIBRATION = (" (the OOD stage's length, which the paper does not give, was chosen to bring the three columns "
               "closest to the paper's, so these distances are partly built in, for every column alike: chapter 09)")


def feat_what_we_see(termination: str | None, table2_committed: bool, table2_failed: bool = False,
                     frozen: pd.DataFrame | None = None, earlier: bool = False,
                     so_far: pd.DataFrame | None = None, agreement: pd.DataFrame | None = None) -> str:
    """Chapter 04's "What we see": what stops FeAT (``termination``, the sentence of
    :func:`featbook.evidence.termination_summary` on the committed rounds, or None when none are
    committed) and where Table 2 is to be read (``table2_committed``; ``table2_failed``: the committed
    Table 2 could not be fetched or read, which is not the same as none committed; ``frozen``: the
    committed pieces' frozen columns, :func:`frozen_columns`, when no whole Table 2 is
    committed; ``earlier``: they are the earlier protocol's; ``so_far``: today's protocol's runs, shown
    apart while they have too few seeds, said in a sentence that ranks nothing; ``agreement``:
    :func:`selection_agreement` of the pieces that record validation accuracy, so the section says how
    much the ranking owes to choosing cells on the test environments)."""
    parts = []
    if termination is not None:
        parts.append("**What stops FeAT** at full size is the termination check with the paper's retention "
                     "accuracy. " + termination)
    parts.append("**Table 2** is read beside the paper's from the committed full-scale results."
                 if table2_committed else
                 frozen_columns_sentence(frozen, "the earlier protocol's pieces" if earlier else "the committed pieces",
                                         earlier=earlier)
                 if frozen is not None and len(frozen) else
                 "**Table 2** at the paper's scale could not be read in this runtime (the note above Table 2 says what "
                 "to do); this page's own run only shows the protocol working." if table2_failed else
                 "**Table 2** at the paper's scale is not committed yet; this page's own run only shows the protocol "
                 "working.")
    if so_far is not None and not so_far.empty:
        parts.append(so_far_sentence(so_far))
    if frozen is not None and len(frozen) or table2_committed:
        text = ("**The selection rule.** Every Table 2 cell here is the configuration that did best on the test "
                "environments, as the paper's numbers imply (an oracle no practitioner has).")
        if agreement is not None and not agreement.empty:
            same = agreement_rows(agreement)
            text += (" Chosen without them (training-domain validation, \"Selected without the test environments\" "
                     f"above), the best of the three frozen columns stays the same in {same}: where it changes, the "
                     "oracle decides which features look best.")
        parts.append(text)
    return "\n\n".join(parts)


def so_far_sentence(runs: pd.DataFrame) -> str:
    """Today's protocol's pieces while they are shown apart: how many whole seeds, and each frozen
    column's mean distance from the paper's cells (:func:`featlib.experiments.colored_mnist.paper_distance`,
    Table 2's rule) as a range over the columns and datasets, too few seeds to rank anything."""
    whole = len(whole_seeds(runs))
    distance = paper_distance(select_best(runs[runs["learner"].isin(FROZEN_LEARNERS)])).dropna(subset=["z"])
    z = distance["z"]
    datasets = prose.listing([label for d, label in DATASET_LABELS.items() if d in set(distance["dataset"])])
    if not whole or z.empty:
        return ("**Today's protocol** has no whole seed of its frozen columns yet; its pieces so far are shown "
                "apart above.")
    return (f"**Today's protocol** (its pieces apart above, {prose.count(whole, 'whole seed')} so far) puts every "
            f"frozen column's mean distance from the paper's cells between {z.min():+.2f} and {z.max():+.2f} paper "
            f"standard deviations on {datasets}; with so few seeds this describes them and ranks nothing.")


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


def margin_table(margins: pd.DataFrame) -> Tables:
    """FeAT's margin per row of Table 2 (:func:`feat_margins`):
    one table per dataset, ours on the first line of each cell and the paper's under it."""
    out = []
    for dataset, part in margins.groupby("dataset", sort=False):
        rows = [{"objective": OBJECTIVE_LABELS.get(r.objective, r.objective),
                 "FeAT minus the best baseline": Stacked(
                     f"{prose.points(r.margin / 100, digits=2)} (vs {LEARNER_LABELS[r.best_other]})",
                     "" if pd.isna(r.paper_margin) else
                     f"paper {prose.points(r.paper_margin / 100, digits=2)} (vs {LEARNER_LABELS[r.paper_best_other]})",
                     paper=True),
                 "within one seed std": Stacked(f"{'yes' if r.tie else 'no'} ({prose.number(r.spread, 2)})",
                                                "" if pd.isna(r.paper_spread) else
                                                f"paper {'yes' if r.paper_tie else 'no'} ({prose.number(r.paper_spread, 2)})",
                                                paper=True)}
                for r in part.itertuples()]
        out.append(table(pd.DataFrame(rows), caption=f"FeAT's margin, {DATASET_LABELS[dataset]}",
                         note="Within one seed std: whether the margin is smaller than the larger of the two "
                              "cells' stds over seeds (in brackets, points), so that the seeds do not rank the "
                              "two columns."))
    return Tables(out)


def margin_sentence(margins: pd.DataFrame) -> str:
    """What the margins say: per dataset, in how many rows FeAT's features lead, and the mean margin
    ours and the paper's, so a reader sees whether ours is larger or smaller and why it matters."""
    parts = []
    for dataset, part in margins.groupby("dataset", sort=False):
        lead, paper_lead = int((part["margin"] > 0).sum()), int((part["paper_margin"] > 0).sum())
        ours, paper = part["margin"].mean(), part["paper_margin"].mean()
        said = (f"on {DATASET_LABELS[dataset]} FeAT's features lead in {lead} of {len(part)} rows (the paper: "
                f"{paper_lead}), by {ours:+.2f} points on average against the paper's {paper:+.2f}")
        if "tie" in part:
            said += (f", and in {int(part['tie'].sum())} of the {len(part)} the two columns lie within one seed std "
                     f"of each other (the paper: {int(part['paper_tie'].sum())}), a tie its seeds do not rank")
        parts.append(said)
    if not parts:
        return ""
    text = "Over the penalised objectives, " + "; ".join(parts) + "."
    by_dataset = margins.groupby("dataset", sort=False)[["margin", "paper_margin"]].mean()
    larger = [DATASET_LABELS[d] for d, r in by_dataset.iterrows() if r["margin"] > r["paper_margin"]]
    smaller = [DATASET_LABELS[d] for d, r in by_dataset.iterrows() if r["margin"] <= r["paper_margin"]]
    if larger:
        text += (f" On {prose.listing(larger)} ours is the larger margin: read it with the baseline columns' distance "
                 "from the paper's cells, since weaker baselines widen it by themselves.")
    if smaller:
        text += (f" On {prose.listing(smaller)} ours is the smaller margin: there the paper's lead of FeAT's features "
                 "is not fully reproduced.")
    return text


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


def agreement_rows(agreement: pd.DataFrame) -> str:
    """:func:`selection_agreement` as a phrase: "5 of 6 rows on ColoredMNIST-01 and 2 of 6 rows on ..."."""
    return prose.listing([f"{r.same} of {r.rows} rows on {DATASET_LABELS[r.dataset]}" for r in agreement.itertuples()])


def selection_sentence(gaps: pd.DataFrame, agreement: pd.DataFrame | None = None) -> str:
    """What test-domain selection carries per column (:func:`selection_gaps`) and, with
    ``agreement`` (:func:`selection_agreement`), whether it changes which column is best."""
    parts = []
    for dataset, part in gaps.groupby("dataset", sort=False):
        cols = ", ".join(f"{LEARNER_LABELS[r.learner]} {prose.points(r.gap / 100, sign=False)}" for r in part.itertuples())
        parts.append(f"{DATASET_LABELS[dataset]}: {cols}")
    text = ("Selecting on the test environments instead of the validation environments adds, on average over the "
            "penalised objectives, " + "; ".join(parts) + " to each column's cells.")
    if agreement is not None and not agreement.empty:
        same = prose.listing([f"in {r.same} of {r.rows} rows on {DATASET_LABELS[r.dataset]}" for r in agreement.itertuples()])
        text += (" The best of the three columns under training-domain validation is the one Table 2's rule picks "
                 f"{same}: where it differs, the oracle rule decides which features look best.")
    return text


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
                     **{f"{prose.integer(s)} steps": f"{cells.loc[s, 'z']:+.2f}" for s in steps}})
    n = int(part["n_seeds"].max()) if len(part) else 0
    rule = "on the test environments" if score == "worst_test_acc" else "on the validation environments"
    return table(pd.DataFrame(rows), caption=f"{DATASET_LABELS[dataset]}: each column's mean distance from the paper's "
                                             f"cells (paper standard deviations), selected {rule}",
                 note=f"Penalised objectives; {_over(n)}, full data; every objective on Appendix F.1's grid (the "
                      "studies precede the decided ColoredMNIST-01 CLOvE grid). 0 is the paper's table.")


def _best_by_step(part: pd.DataFrame) -> dict[int, pd.Series]:
    """One cell's runs in a length study (step > 0), Table 2's rule at each scored length:
    ``{step: best configuration's row}`` (its ``mean``, ``std``, ``n_seeds``)."""
    return {int(step): select_best(runs.drop(columns="step")).iloc[0] for step, runs in part.groupby("step")}


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
    best = {o: _best_by_step(part[part["objective"] == o]) for o in objectives}
    rows = []
    for step in steps:
        row = {"OOD steps": prose.integer(step) + (" (protocol)" if step == protocol_steps else "")}
        for objective in objectives:
            cell = best[objective][step]
            row[OBJECTIVE_LABELS[objective]] = prose.mean_std(cell["mean"], cell["std"] if n > 1 else None, scale=100)
        rows.append(row)
    paper = {OBJECTIVE_LABELS[o]: (prose.mean_std(*cell) if (cell := TABLE2.get(dataset, {}).get(o, {}).get(learner))
                                   else prose.MISSING) for o in objectives}
    rows.append({"OOD steps": "the paper's", **paper})
    return table(pd.DataFrame(rows), caption=f"{DATASET_LABELS[dataset]}, {LEARNER_LABELS[learner]}'s features: the "
                                             "cell at each length of the OOD stage",
                 note=f"Each cell: the best configuration at that length, its worst-test accuracy (%), {_over(n)}, "
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
    at = _best_by_step(part)
    paper = TABLE2.get(dataset, {}).get(objective, {}).get(learner)
    n = int(part["seed"].nunique())

    def value(step):
        return prose.mean_std(at[step]["mean"], at[step]["std"] if n > 1 else None, scale=100)

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


# -- the cells far from the paper's, and what the gap studies say of each (issue 33) -------------
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
    IB-IRM's, which repeat IRMv1's (:data:`FROZEN_REPEATS`), are taken once."""
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
    near the paper's (:func:`far_cell_verdict`)."""
    n = int(cell["n_seeds"])
    if n < 2 or pd.isna(cell.get("std")):
        return None
    spread = max(float(cell["std"]), float(cell["paper_std"]))
    interval = _T975.get(n - 1, 2.0) * spread * np.sqrt(1 / n + 1 / PAPER_SEEDS)
    gap = abs(float(cell["mean"]) - float(cell["paper"]))
    return {"gap": gap, "interval": interval, "within": bool(gap <= interval)}


def _study_value(row) -> str:
    """A study's cell as a reader reads it: "80.36 ± 2.20 (3 seeds, `frozen-steps`)"."""
    value = prose.mean_std(row["mean"], row["std"] if row["n_seeds"] > 1 else None, scale=100)
    return f"{value} ({prose.count(int(row['n_seeds']), 'seed')}, `{row['study']}`)"


def _own_seeds(cell, threshold: float = FAR_Z) -> tuple[int | None, str]:
    """Table 2's own seeds of a far cell (its ``seed_values``, where it has them): how many land
    within ``threshold`` paper stds of the paper's (None without them), and a sentence: " Table 2's
    seeds give 83.25, 81.03 and 79.00 (seeds 1, 2 and 3): 1 of 3 within that band, spread 1.74
    points against the paper's 0.66." (empty without them)."""
    values = cell.get("seed_values") if hasattr(cell, "get") else None
    if values is None or not isinstance(values, (tuple, list)) or len(values) < 2:
        return None, ""
    seeds, accuracies = zip(*values)
    near = int(sum(abs(a - cell["paper"]) <= threshold * cell["paper_std"] for a in accuracies))
    spread = (f", spread {prose.number(cell['std'])} points against the paper's {prose.number(cell['paper_std'])}"
              if cell["std"] > cell["paper_std"] else "")
    return near, (f" Table 2's seeds give {prose.listing([prose.number(a) for a in accuracies])} (seeds "
                  f"{prose.listing([str(s) for s in seeds])}): {near} of {len(values)} within that band{spread}.")


#: A far cell traced to the spread between seeds, as :func:`far_cell_verdict` says it; chapter 04's
#: list (:func:`far_cells_section`) says it once in its lead and per cell only "The spread between seeds."
SEEDS_VERDICT = ("The distance is the spread between seeds, not a setting a study varied; more seeds decide where "
                 "the mean settles.")


def far_cell_verdict(cell, evidence: pd.DataFrame, threshold: float = FAR_Z) -> dict:
    """What the committed gap studies say of one far cell (a row of :func:`far_cells`), given its
    rows of :func:`featlib.experiments.gap_studies.cell_evidence`. ``explained`` is

    - ``"seeds"`` when the protocol's own setting (as the study with the most seeds measured it)
      lands within ``threshold`` paper stds of the paper's on the study's seeds and, where the cell
      carries Table 2's own seeds (``seed_values``), at least one of those lands there too, and the
      distance lies within the interval the spread between seeds allows (:func:`seed_noise`): the
      distance is then the spread between seeds (a setting closer by more than half a paper std is
      named beside it). A study whose per-seed selection reaches the band while none of Table 2's
      seeds does shows a selection effect, not the seeds;
    - ``"study"`` when a setting other than the protocol's lands within the band, closer than its own
      study's protocol row by more than a tenth of a paper std (the closest is named, with the open
      choice it tests);
    - None otherwise.

    ``sentence`` says which, in one paragraph, with Table 2's own seeds where the cell has them."""
    from featlib.experiments.gap_studies import STUDY_CHOICES

    head = (f"**{DATASET_LABELS[cell['dataset']]}, {OBJECTIVE_LABELS[cell['objective']]} on "
            f"{LEARNER_LABELS[cell['learner']]}'s features**: ours "
            f"{prose.mean_std(cell['mean'], cell['std'] if cell['n_seeds'] > 1 else None)} "
            f"({prose.count(int(cell['n_seeds']), 'seed')}), the paper's "
            f"{prose.mean_std(cell['paper'], cell['paper_std'])}: {prose.number(cell['z'], 1, sign=True)} paper stds.")
    if evidence is None or evidence.empty:
        return {"explained": None, "sentence": f"{head} No committed study varies this cell yet: not explained."}
    near, own_seeds = _own_seeds(cell, threshold)
    gap = (100 * evidence["mean"] - cell["paper"]).abs()
    scored = evidence.assign(_gap=gap)
    within = scored[gap <= threshold * cell["paper_std"]]
    # the protocol's own setting as the study with the most seeds measured it (the closest among equals)
    protocol_rows = scored[scored["protocol"]].sort_values(["n_seeds", "_gap"], ascending=[False, True])
    own = protocol_rows.iloc[:1]
    own = own[own["_gap"] <= threshold * cell["paper_std"]]
    # a changed setting explains the cell when it lands within the band and closer to the paper than
    # its own study's protocol row by more than a tenth of a paper std (not a tie with the protocol)
    protocol_gap = scored[scored["protocol"]].groupby("study")["_gap"].min()
    closer = within["_gap"] < within["study"].map(protocol_gap).fillna(np.inf) - 0.1 * cell["paper_std"]
    changed = within[~within["protocol"] & closer].sort_values("_gap")
    band = f"within {prose.number(threshold, 0)} paper stds of the paper's"
    noise = seed_noise(cell)
    if not own.empty:
        best_own = own.iloc[0]
        own_said = f"The protocol's own setting gives {_study_value(best_own)}, {band}.{own_seeds}"
        beyond = noise is not None and not noise["within"]  # too far for the seeds, whatever one seed does
        if not beyond and (near is None or near > 0):  # the protocol itself lands near the paper's: the seeds, first
            closer = changed[changed["_gap"] < best_own["_gap"] - 0.5 * cell["paper_std"]]
            still = ("" if closer.empty else
                     f" {closer.iloc[0]['change'][0].upper()}{closer.iloc[0]['change'][1:]} gives "
                     f"{_study_value(closer.iloc[0])}, closer still ({STUDY_CHOICES.get(closer.iloc[0]['study'], '')}).")
            return {"explained": "seeds", "sentence": (
                f"{head} {own_said} {SEEDS_VERDICT}{still}")}
        if near == 0:
            own_said += (" The study's value is the best of its configurations on its own seeds, so it reaches the "
                         "band by selection, not by a seed of Table 2's.")
        if beyond:
            own_said += (f" Over {prose.count(int(cell['n_seeds']), 'seed')} our mean lies "
                         f"{prose.number(noise['gap'])} points from the paper's, outside the "
                         f"{prose.number(noise['interval'])}-point interval that the spread between seeds allows "
                         "(95%, Student's t): more seeds alone would not close it.")
    else:
        own_said = own_seeds.strip()
    if not changed.empty:
        best = changed.iloc[0]
        where = "."
        if own.empty:
            where = (", where the protocol's own setting does not come near" +
                     (f": it gives {_study_value(protocol_rows.iloc[0])}." if not protocol_rows.empty else "."))
        return {"explained": "study", "sentence": (
            f"{head} Explained by {STUDY_CHOICES.get(best['study'], best['study'])}: {best['change']} gives "
            f"{_study_value(best)}, {band}{where}{' ' + own_said if own_said else ''}")}
    spans = []
    for study, rows in evidence.groupby("study", sort=False):
        low, high = 100 * rows["mean"].min(), 100 * rows["mean"].max()
        seeds = prose.count(int(rows["n_seeds"].max()), "seed")
        values = (f"{prose.number(high)} in its one setting" if len(rows) == 1 else
                  f"{prose.number(low)} to {prose.number(high)} over its {prose.count(len(rows), 'setting')}")
        spans.append(f"`{study}` ({STUDY_CHOICES.get(study, study)}) gives {values} ({seeds})")
    if own.empty:
        said = (f"Not explained yet: {prose.listing(spans)}, none within {prose.number(threshold, 0)} paper stds "
                f"of the paper's.{' ' + own_said if own_said else ''}")
    else:
        said = (f"Not explained yet. {own_said} No setting the studies vary comes nearer: "
                f"{prose.listing(spans)}.")
    return {"explained": None, "sentence": f"{head} {said}"}


def penalty_response(runs: pd.DataFrame, cell, threshold: float = FAR_Z) -> str:
    """Where the paper's value of a far cell sits in the cell's own grid (Table 2's pieces): per
    penalty weight, the best mean over the pre-training lengths, and which weights land within
    ``threshold`` paper stds of the paper's; beside it, the paper's ERM-objective cell on the same
    features, the value the penalty moves from. A sentence, or "" when the cell's runs, its paper
    value or a second penalty weight are missing, or when every weight lands alike."""
    if runs is None or runs.empty or cell["objective"] == "erm":
        return ""
    rows = runs[(runs["dataset"] == cell["dataset"]) & (runs["learner"] == cell["learner"])
                & (runs["objective"] == cell["objective"])]
    if rows.empty:
        return ""
    by_weight = (rows.groupby(["penalty_weight", "pretrain_epochs"])["worst_test_acc"].mean()
                 .groupby(level="penalty_weight").max().sort_index() * 100)
    if len(by_weight) < 2:
        return ""
    near = [w for w, v in by_weight.items() if abs(v - cell["paper"]) <= threshold * cell["paper_std"]]
    if not near or len(near) == len(by_weight):
        return ""
    def weight(w):  # a grid to 1e5 as 1 × 10¹ ... 1 × 10⁵, the decided -01 CLOvE grid as 1, 5, ... 100
        return prose.number(w, 0) if by_weight.index.max() < 1e3 else prose.scientific(w, 0)

    values = prose.listing(f"{prose.number(v)} at {weight(w)}" for w, v in by_weight.items())
    weights, k = list(by_weight.index), len(near)
    where = (("the weakest weight" if k == 1 else f"the {k} weakest weights") if near == weights[:k] else
             ("the strongest weight" if k == 1 else f"the {k} strongest weights") if near == weights[-k:] else
             f"{'weight' if k == 1 else 'weights'} {prose.listing(weight(w) for w in near)}")
    erm = TABLE2.get(cell["dataset"], {}).get("erm", {}).get(cell["learner"])
    added = by_weight.max() - by_weight.iloc[0]
    if erm is None:
        erm_said = ""
    elif cell["paper"] <= erm[0]:
        erm_said = (f" The paper's ERM objective on the same features gives {prose.mean_std(*erm)}, above its "
                    f"{OBJECTIVE_LABELS[cell['objective']]} cell: in the paper's runs the penalty added nothing on "
                    f"these features, where in ours the stronger weights add up to {prose.number(added, 1)} points.")
    else:
        erm_said = (f" The paper's ERM objective on the same features gives {prose.mean_std(*erm)}; in ours the "
                    f"stronger weights add up to {prose.number(added, 1)} points.")
    return (f" In Table 2's own grid (best pre-training length per penalty weight, mean over its seeds) the cell "
            f"gives {values}: the paper's value lies where ours does at {where}.{erm_said}")


def _lowest_seed(cells: pd.DataFrame) -> str:
    """Where one seed is the lowest of Table 2's seeds in most far cells below the paper's, a sentence
    saying so (a seed whose features are weaker everywhere pulls every column down at once); else ""."""
    below = [c for c in cells.to_dict("records") if c["z"] < 0 and isinstance(c.get("seed_values"), tuple)
             and len(c["seed_values"]) > 1]
    if len(below) < 3:
        return ""
    lowest = pd.Series([min(c["seed_values"], key=lambda v: v[1])[0] for c in below]).value_counts()
    seed, count = int(lowest.index[0]), int(lowest.iloc[0])
    if 2 * count <= len(below):
        return ""
    return (f" Seed {seed} is the lowest of Table 2's seeds in {count} of the {len(below)} far cells below the "
            "paper's.")


def far_cells_section(runs: pd.DataFrame, studies: dict[str, pd.DataFrame], threshold: float = FAR_Z
                      ) -> tuple[str, list[dict]]:
    """Chapter 04's "cells far from the paper's": a lead sentence and one verdict per far cell
    (:func:`far_cells`, :func:`far_cell_verdict`) of ``runs``, read against the committed gap
    ``studies`` (``{name: frame}``)."""
    from featlib.experiments.gap_studies import cell_evidence

    cells = far_cells(runs, threshold)
    frozen = None if runs is None or runs.empty else runs[runs["learner"].isin(FROZEN_LEARNERS)]
    n_cells = 0 if frozen is None else select_best(frozen[frozen["objective"].isin(
        distinct_objectives(frozen["objective"].unique()))]).shape[0]
    verdicts = [far_cell_verdict(c, cell_evidence(studies, c["dataset"], c["learner"], c["objective"]), threshold)
                | {"dataset": c["dataset"], "learner": c["learner"], "objective": c["objective"], "z": c["z"]}
                for c in cells.to_dict("records")]
    for verdict, cell in zip(verdicts, cells.to_dict("records")):
        if verdict["explained"] is None:  # where the paper's value sits in the cell's own grid: a lead, not a cause
            verdict["sentence"] += penalty_response(frozen, cell, threshold)
        elif verdict["explained"] == "seeds":  # said once, in the lead
            verdict["sentence"] = verdict["sentence"].replace(SEEDS_VERDICT, "Traced to the spread between seeds.")
    seeds = whole_seeds(runs) if runs is not None and not runs.empty else []
    seeds_said = _seeds_per_dataset(frozen, len(seeds))
    zero_std = _zero_std_cells(frozen)
    if not verdicts:
        lead = (f"None of the {n_cells} frozen cells lies further than {prose.number(threshold, 0)} paper standard "
                f"deviations from the paper's ({seeds_said}).")
    else:
        kinds = [v["explained"] for v in verdicts]
        traced = [f"{kinds.count('study')} to a choice the paper leaves open" if "study" in kinds else "",
                  f"{kinds.count('seeds')} to the spread between seeds (where the protocol's own setting lands "
                  "near the paper's on a study's seeds, the distance is between seeds, not a setting a study varied; "
                  "more seeds decide where the mean settles)" if "seeds" in kinds else ""]
        traced = [t for t in traced if t]
        said = f"The gap studies (`results/cmnist-gaps`) trace {prose.listing(traced)}" if traced else ""
        if None in kinds:
            rest = f"{kinds.count(None)} {'is' if kinds.count(None) == 1 else 'are'} not explained yet"
            said = f"{said}; {rest}" if said else rest[0].upper() + rest[1:]
        lead = (f"{prose.count(len(verdicts), 'frozen cell')} of {n_cells} {'lies' if len(verdicts) == 1 else 'lie'} further than "
                f"{prose.number(threshold, 0)} paper standard deviations from the paper's "
                f"({seeds_said}). {said}.{_lowest_seed(cells)} The cells "
                "follow one by one, each with what the studies measured on it.")
    return lead + zero_std, verdicts


def _seeds_per_dataset(frozen: pd.DataFrame | None, whole: int) -> str:
    """"3 whole seeds so far, 4 on ColoredMNIST-025": the whole seeds, and a dataset that has more."""
    said = f"{prose.count(whole, 'whole seed')} so far"
    if frozen is None or frozen.empty:
        return said
    more = [f"{n} on {DATASET_LABELS[d]}" for d, part in frozen.groupby("dataset", sort=False)
            if (n := sum(frozen_cell_seeds(seed_runs, datasets=(d,)) >= 1
                         for _, seed_runs in part.groupby("seed"))) > whole]
    return said + (", " + prose.listing(more) if more else "")


def _zero_std_cells(frozen: pd.DataFrame | None) -> str:
    """The cells the paper prints with a standard deviation of 0.00, which have no distance in paper
    stds and so never count as far: a sentence giving ours beside the paper's for each ("" if none)."""
    if frozen is None or frozen.empty:
        return ""
    rows = []
    for r in select_best(frozen[frozen["objective"].isin(distinct_objectives(frozen["objective"].unique()))]).itertuples():
        paper = TABLE2.get(r.dataset, {}).get(r.objective, {}).get(r.learner)
        if paper is not None and not paper[1] > 0 and not pd.isna(r.mean):
            rows.append(f"{OBJECTIVE_LABELS[r.objective]} on {LEARNER_LABELS[r.learner]}'s features on "
                        f"{DATASET_LABELS[r.dataset]} (ours {prose.number(100 * r.mean)}, the paper's "
                        f"{prose.number(paper[0])} ± 0.00)")
    if not rows:
        return ""
    return (f" The paper prints {prose.listing(rows)} with a standard deviation of zero, so "
            f"{'that cell has' if len(rows) == 1 else 'those cells have'} no distance in paper stds and "
            f"{'is' if len(rows) == 1 else 'are'} not counted here.")
