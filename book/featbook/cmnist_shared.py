"""The ColoredMNIST views that more than one page shows: Table 2 (chapter 04 and the page on an
objective of one's own, ``book/own_objective.md``), Table 7 and the sentence on FeAT's stop
(chapters 04 and 09), the phrase on the selection rule (chapter 04 and the introduction's claims
table, :mod:`featbook.claims`) and the provenance of the committed ERM-NF pieces (chapters 03 and 04).

The numbers come from :mod:`featlib.experiments.cmnist_analysis`; each chapter's own views are in
its module (:mod:`featbook.ch03_views`, :mod:`featbook.ch04_views`, :mod:`featbook.ch09_views`). As
there, ours and the paper's value share a cell (ours on the first line, the paper's under it), with
labels instead of ids.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from featbook import prose
from featbook.tables import Stacked, Table, Tables, paired, split_by, table
from featlib.experiments.cmnist_analysis import configurations
from featlib.experiments.colored_mnist import format_mean_std, select_best
from featlib.experiments.labels import DATASET_LABELS, LEARNER_LABELS, OBJECTIVE_LABELS, label
from featlib.experiments.paper_values import ORACLE, TABLE2, TABLE7


# -- Table 2, ours beside the paper's --------------------------------------------------------------
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


def _column_order(columns, first: Sequence[str] = ()) -> list:
    """The learners' columns in the paper's order, those of ``first`` (learner ids) ahead."""
    ahead = [LEARNER_LABELS[learner] for learner in first]
    rank = {label: i for i, label in enumerate(dict.fromkeys([*ahead, *LEARNER_LABELS.values()]))}
    return sorted(columns, key=lambda c: rank.get(c, len(rank)))


def table2(frame: pd.DataFrame, caption: str, note: str | None = None, first: Sequence[str] = ()) -> Tables:
    """Table 2 (the frame of :func:`table2_frame`) as one table per dataset: rows the
    objectives, columns the learners, each cell ours with the paper's under it. ``first``: learner
    ids whose columns come right after the objective (chapter 04 puts FeAT's there, so that a
    phone shows it without scrolling sideways)."""
    out = []
    parts = split_by(frame, level=0)
    for i, (dataset, part) in enumerate(parts.items()):
        cells = paired(part, paper_prefix="") if isinstance(part.columns, pd.MultiIndex) else part
        cells = cells[_column_order(cells.columns, first)]
        cells.index.name = "objective"
        last = i == len(parts) - 1
        out.append(table(cells, index=True, caption=f"{caption}: {dataset}", note=note if last else None))
    return Tables(out)


# -- Table 7 and FeAT's stop -----------------------------------------------------------------------
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


def collapsed_provenance(prov, size: str | None = None, what: str = "Made by") -> str:
    """HTML: how a committed result was made (:func:`featbook.evidence.provenance_line`: size,
    seeds, device, time) and its command, all in one collapsed block under its table or figure,
    so that none of it stands in the reading text. ``prov``: a provenance record, or a
    ready sentence (the Table 2 records' summary) shown as it is."""
    import html

    from featbook import evidence

    line = prov if isinstance(prov, str) else evidence.provenance_line(what, prov, size)
    block = evidence.command_block({} if isinstance(prov, str) else prov, summary="How this was made")
    if isinstance(prov, str):  # no command recorded for the whole: the sentence alone
        return (f'<details class="feat-provenance"><summary>How this was made</summary>'
                f"<p>{html.escape(line)}</p></details>")
    return block.replace("</summary>", f"</summary><p>{html.escape(line)}</p>", 1)


# -- phrases two pages share -----------------------------------------------------------------------
def agreement_rows(agreement: pd.DataFrame) -> str:
    """:func:`~featlib.experiments.cmnist_analysis.selection_agreement` as a phrase: "5 of 6 rows on
    ColoredMNIST-01 and 2 of 6 rows on ..."."""
    return prose.listing([f"{r.same} of {r.rows} rows on {DATASET_LABELS[r.dataset]}" for r in agreement.itertuples()])


def nf_provenance(nf_runs: pd.DataFrame, records: pd.DataFrame, datasets: Sequence[str], folder: str) -> str:
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
            f"{prose.seed_list(seeds)}, 50,000 training images, computed on {prose.devices(kept['device'])} in "
            f"{prose.listing(sorted(kept['precision'].unique()))} in {prose.integer(float(kept['wall_time_s'].sum()))} s")
