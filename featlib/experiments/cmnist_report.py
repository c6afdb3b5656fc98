"""Tables and figures of the ColoredMNIST chapters, ours beside the paper's (labelled).

Inputs are the frames that :class:`~featlib.experiments.colored_mnist.ColoredMNISTExperiment`
produces: one row per OOD-stage run, and per-round feature-learning histories.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .. import style
from ..feature_learning.termination import DEFAULT_TERMINATION_THRESHOLD
from .colored_mnist import format_mean_std, select_best
from .labels import DATASET_LABELS, LEARNER_LABELS, OBJECTIVE_LABELS, label
from .paper_values import ORACLE, TABLE2, TABLE7


def table2(results: pd.DataFrame, oracle: pd.DataFrame | None = None, with_paper: bool = True,
           with_n: bool = False, learners: Sequence[str] = (), missing: str = "not yet run",
           score: str = "worst_test_acc") -> pd.DataFrame:
    """Table 2: rows objectives, columns (dataset, learner[, source]); "mean ± std" (%).
    Objectives of one's own (:mod:`featlib.experiments.objective_files`) follow the built-in ones, under
    their labels (:func:`.labels.label`), with "-" in the paper's column.
    ``with_n``: each of our cells says over how many seeds it is ("n = 3"), for tables built from
    pieces that accumulate (:mod:`.table2_pieces`), where cells can hold different numbers of seeds.
    ``learners``: columns shown for every dataset in ``results`` even where they have no runs yet,
    our cells reading ``missing`` (the paper's beside them). ``score``: what selects each cell's
    configuration (:func:`.colored_mnist.select_best`: the test environments, or ``"val_acc"``)."""
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
        cells.setdefault(col + ("ours",), {})[name] = _ours(row.mean, row.std, row.n_seeds, with_n,
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
            shown = [*best.loc[best["dataset"] == dataset, "learner"].unique(), *learners]
            for learner in dict.fromkeys(shown):
                col = (DATASET_LABELS[dataset], LEARNER_LABELS[learner])
                cells.setdefault(col + ("ours",), {})["Oracle"] = _ours(values.mean(), values.std(), len(values), with_n)
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


def _ours(mean: float, std: float, n: int, with_n: bool, n_diverged: int = 0, n_configs: int = 0) -> str:
    """One of our cells: "mean ± std" (%); with ``with_n``, "(n = k)" after it, and the mean alone
    for one seed (a standard deviation of one value says nothing). Where configurations diverged
    (:func:`.colored_mnist.select_best`), the cell says how many of how many: "(2 of 30 diverged)";
    a cell whose every configuration diverged reads "diverged"."""
    diverged = f" ({n_diverged} of {n_configs} diverged)" if n_diverged else ""
    if n_diverged and n_diverged >= n_configs:
        return f"diverged ({n_diverged} of {n_configs})"
    if not with_n:
        return format_mean_std(mean, std) + diverged
    return (f"{100 * mean:.2f}" if n == 1 else format_mean_std(mean, std)) + f" (n = {n})" + diverged


def feat_comparison(results: pd.DataFrame, feat: str = "feat", others=("erm", "bonsai")) -> pd.DataFrame:
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


def frozen_columns(results: pd.DataFrame, feat: str = "ifeat", others: Sequence[str] = ("erm", "bonsai")
                   ) -> pd.DataFrame:
    """Table 2's frozen-feature columns beside the paper's, per dataset: over the penalised
    objectives where every column has a cell, in how many ``feat``'s features give the best mean of
    the columns (``feat_best``), and in how many the paper's Table 2 says so (``paper_feat_best``,
    the same objectives); per column, the mean absolute difference of our cells from the paper's
    (``gap_<learner>``, points); the largest such difference (``largest_gap``, ours minus the paper's,
    with its ``largest_learner``/``largest_objective``); and the range of seeds behind the cells
    (``min_seeds``, ``max_seeds``). The claim of Sec. 5 this checks: FeAT's features serve the OOD
    objectives better than ERM's and Bonsai's (chapter 04, "What we see")."""
    columns = [feat, *others]
    best = select_best(results[results["learner"].isin(columns)])
    rows = []
    for dataset, part in best.groupby("dataset", sort=False):
        mean = part.set_index(["objective", "learner"])["mean"]
        objectives = [o for o in part["objective"].unique()
                      if o != "erm" and all((o, c) in mean.index for c in columns)]
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
        for row in feat_best.itertuples():
            if row.objective in colours:
                ax.plot([feat_epochs], [100 * row.mean], marker="*", markersize=14, color=colours[row.objective],
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


def round_table(rounds: pd.DataFrame, dataset: str, with_paper: bool = True) -> pd.DataFrame:
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
            "n_early": int((margins["rounds_kept"] < usual).sum()), "n_seeds": len(margins)}


def describe_early_stop(consequence: dict | None, threshold: float = DEFAULT_TERMINATION_THRESHOLD) -> str:
    """What a seed that stops one round early hands on, in one or two sentences (from
    :func:`early_stop_consequence`); the closest seed's margin says how likely that is."""
    if consequence is None:
        return "Every seed kept a single round, so no seed could stop earlier."
    k = consequence["usual_rounds"]
    text = (f"Most seeds keep {k} rounds. The closest call is seed {consequence['closest_seed']}, whose round {k} "
            f"scored {consequence['closest_margin']:.2f} points above the {100 * threshold:.0f}% threshold. A seed "
            f"whose round {k} fell under it would hand round {k - 1}'s features to the OOD stage, whose head scores "
            f"{100 * consequence['ood_one_earlier']:.1f}% worst-test accuracy against {100 * consequence['ood_usual']:.1f}% "
            f"after round {k} (means over the seeds here), and Table 2's FeAT column would drop with it.")
    n = consequence["n_early"]
    if n:
        text += f" {n} of {consequence['n_seeds']} seeds here did stop earlier; their rows are in the table above."
    else:
        text += f" None of the {consequence['n_seeds']} seeds here did."
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


def feat_margins(results: pd.DataFrame, feat: str = "ifeat", others: Sequence[str] = ("erm", "bonsai"),
                 score: str = "worst_test_acc") -> pd.DataFrame:
    """FeAT's margin per row of Table 2: for each dataset and penalised objective where every
    column has a cell, FeAT's features' cell minus the best of the ``others`` columns (points;
    positive: FeAT's features best), ours (cells selected by ``score``, :func:`select_best`) and
    the paper's, with the best other column of each. The claim of Sec. 6 it measures: the margin
    by which FeAT's features serve the OOD objectives better than ERM's and Bonsai's."""
    columns = [feat, *others]
    best = select_best(results[results["learner"].isin(columns)], score=score)
    mean = best.set_index(["dataset", "objective", "learner"])["mean"]
    rows = []
    for (dataset, objective), _ in best.groupby(["dataset", "objective"], sort=False):
        if objective == "erm" or not all((dataset, objective, c) in mean.index for c in columns):
            continue
        present = [c for c in others if pd.notna(mean[(dataset, objective, c)])]  # a cell whose every run diverged has none
        if pd.isna(mean[(dataset, objective, feat)]) or not present:
            continue
        other = max(present, key=lambda c: mean[(dataset, objective, c)])
        paper = TABLE2.get(dataset, {}).get(objective, {})
        paper_other = max(others, key=lambda c: paper.get(c, (-np.inf,))[0]) if paper else None
        rows.append({"dataset": dataset, "objective": objective,
                     "margin": 100 * (mean[(dataset, objective, feat)] - mean[(dataset, objective, other)]),
                     "best_other": other,
                     "paper_margin": (paper[feat][0] - paper[paper_other][0]) if paper and feat in paper else np.nan,
                     "paper_best_other": paper_other})
    return pd.DataFrame(rows, columns=["dataset", "objective", "margin", "best_other", "paper_margin",
                                       "paper_best_other"])


def selection_gaps(results: pd.DataFrame, learners: Sequence[str] = ("erm", "bonsai", "ifeat")) -> pd.DataFrame:
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
