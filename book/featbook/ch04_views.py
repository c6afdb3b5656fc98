"""Chapter 04's views (*FeAT on ColoredMNIST*): Table 2 from the committed pieces beside the
paper's, the frozen columns' distance from it, FeAT's margin per row, what the selection rule
carries, the cells far from the paper's with what the gap studies say of each, FeAT's stop at full
data size (Table 7's rounds) and the "What we see" paragraph; figures in the book's style and
tables that fit the column.

The numbers come from :mod:`featlib.experiments.cmnist_analysis`; Table 2's frame and table and
Table 7's, which other pages show too, from :mod:`featbook.cmnist_shared`.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from featbook import prose, style
from featbook.cmnist_shared import nf_provenance, table2, table2_frame
from featbook.tables import Stacked, Table, Tables, table
from featlib.experiments.cmnist_analysis import (
    BASELINES, FAR_Z, FROZEN_LEARNERS, TABLE2_MIN_SEEDS, far_cells, frozen_cell_seeds, nf_ranked_datasets, seed_noise,
    whole_seeds,
)
from featlib.experiments.colored_mnist import TABLE2_OBJECTIVES, distinct_objectives, paper_distance, select_best
from featlib.experiments.labels import DATASET_LABELS, LEARNER_LABELS, OBJECTIVE_LABELS, label
from featlib.experiments.paper_values import TABLE2
from featlib.feature_learning.termination import DEFAULT_TERMINATION_THRESHOLD


# -- Table 2 from the committed pieces -------------------------------------------------------------
def table2_from_pieces(pieces: dict, learners: Sequence[str], first: Sequence[str] = ()) -> tuple[str, Tables]:
    """Chapter 04's Table 2 from committed pieces (:func:`featlib.experiments.table2_pieces.load_pieces`):
    the sentence that introduces it (how many pieces, made on what, over how many seeds) and the
    tables, every column of ``learners`` shown (but ERM-NF where no piece has it), a cell without a piece
    reading *not yet run*. Where
    every cell has the same number of seeds the sentence says it once; otherwise each cell says
    its own ("n = 2"). ``first``: learner ids whose columns come first (:func:`featbook.cmnist_shared.table2`).
    Chapter 04 shows the sentence folded under the table (:func:`featbook.cmnist_shared.collapsed_provenance`)."""
    records = pieces["records"]
    counts = sorted(set(select_best(pieces["runs"])["n_seeds"])) if not pieces["runs"].empty else []
    uniform = len(counts) == 1

    nf = records["learner"] == "erm-nf"  # the ERM-NF column, from GPU sittings (with_nf_column)
    devices = prose.devices(records.loc[~nf, "device"], cpu="a CPU")
    if nf.any():
        devices += (f"; the ERM-NF column on "
                    f"{prose.listing(DATASET_LABELS[d] for d in TABLE2 if d in set(records.loc[nf, 'dataset']))} "
                    f"on {prose.devices(records.loc[nf, 'device'], cpu='a CPU')}, from GPU sittings")
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
                   "Table 2 at full size (50,000 training images), ours beside the paper's",
                   first=first,
                   note=f"Each cell: ours (mean ± std over {over}, %), the paper's value under it in grey"
                        + ("; a cell reading not yet run has no run at full size yet" if missing else "")
                        + ". On frozen "
                        "features IB-IRM's bottleneck term is a constant, so it trains as IRMv1 and its cells repeat "
                        "IRMv1's, as in the paper's table; the counts of rows on this page take that row once. The "
                        "oracle is one model "
                        "per seed, trained on images without colour, the same in every column.")
    return intro, shown


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
            f"switches to it when every cell has {prose.count(min_seeds, 'seed')}; until then these runs "
            "rank nothing.")


def nf_column_sentence(nf_runs: pd.DataFrame, records: pd.DataFrame, folder: str, provenance: bool = True) -> str:
    """Chapter 04: the committed ERM-NF pieces shown apart from Table 2 while they hold fewer
    seeds than a comparison needs (3), or beside it once they do. ``provenance=False``: without
    the bracket saying how they were made (the chapter folds it under the table, :func:`nf_made`)."""
    datasets = [d for d in DATASET_LABELS if d in set(nf_runs["dataset"])]
    text = (f"**The whole-network column** ({nf_provenance(nf_runs, records, datasets, folder)}). " if provenance
            else "**The whole-network column.** ")
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


def nf_made(nf_runs: pd.DataFrame, records: pd.DataFrame, folder: str) -> str:
    """How the committed ERM-NF runs were made, for the collapsed line under their table."""
    datasets = [d for d in DATASET_LABELS if d in set(nf_runs["dataset"])]
    return nf_provenance(nf_runs, records, datasets, folder).replace("`", "") + "."


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


# -- what we see -----------------------------------------------------------------------------------
def frozen_columns_sentence(frozen: pd.DataFrame, pieces: str = "the committed pieces", earlier: bool = False,
                            nf_datasets: Sequence[str] = ()) -> str:
    """What Table 2's committed frozen-feature columns show beside the paper's, from
    :func:`~featlib.experiments.cmnist_analysis.frozen_columns`: where FeAT's features give the best mean (and where the
    paper's table says so), how far our cells lie from the paper's per column, and the largest gap.
    ``pieces`` names them (the earlier protocol's, while today's has too few seeds; ``earlier``: then
    the sentence says that protocol's baselines are weaker, so its counts overstate FeAT's lead;
    ``nf_datasets``: the datasets whose whole-network ERM-NF cells stand in the table,
    :func:`~featlib.experiments.cmnist_analysis.nf_ranked_datasets`)."""
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
    if nf_datasets:
        rest = [DATASET_LABELS[d] for d in DATASET_LABELS if d in set(frozen["dataset"]) and d not in nf_datasets]
        return text + (f" The whole-network ERM-NF column stands in the table for "
                       f"{prose.listing(DATASET_LABELS[d] for d in DATASET_LABELS if d in nf_datasets)}, where each of "
                       f"its cells holds {prose.count(TABLE2_MIN_SEEDS, 'seed')} or more"
                       + (f" ({prose.listing(rest)}'s cells wait for a GPU)" if rest else "")
                       + "; like the paper's, FeAT's margin is not compared with it.")
    return text + (" The whole-network ERM-NF column is trained on a GPU and is shown apart from this table until "
                   f"each of its cells holds {prose.count(TABLE2_MIN_SEEDS, 'seed')}.")


#: Today's protocol chose its OOD stage's length (which the paper does not give) as the one that
#: brings the three frozen columns closest to the paper's table (featlib.hparams, "ood_steps"): said
#: wherever the distances from the paper's cells are quoted.
CALIBRATION = (" (the OOD stage's length, which the paper does not give, was chosen to bring the three columns "
               "closest to the paper's, so these distances are partly built in, for every column alike: chapter 09)")


def so_far_sentence(runs: pd.DataFrame) -> str:
    """Today's protocol's pieces while they are shown apart: how many whole seeds, and each frozen
    column's mean distance from the paper's cells (:func:`featlib.experiments.colored_mnist.paper_distance`,
    Table 2's rule) as a range over the columns and datasets, too few seeds to rank anything."""
    whole = len(whole_seeds(runs))
    distance = paper_distance(select_best(runs[runs["learner"].isin(FROZEN_LEARNERS)])).dropna(subset=["z"])
    z = distance["z"]
    datasets = prose.listing([label for d, label in DATASET_LABELS.items() if d in set(distance["dataset"])])
    if not whole or z.empty:
        return ("**Today's protocol** has no whole seed of its frozen columns yet; its runs so far are shown "
                "apart above.")
    return (f"**Today's protocol** (its runs apart above, {prose.count(whole, 'whole seed')} so far) puts every "
            f"frozen column's mean distance from the paper's cells between {z.min():+.2f} and {z.max():+.2f} paper "
            f"standard deviations on {datasets}; with so few seeds this describes them and ranks nothing.")


# -- FeAT's margin and the selection rule ----------------------------------------------------------
def margin_table(margins: pd.DataFrame) -> Tables:
    """FeAT's margin per row of Table 2 (:func:`~featlib.experiments.cmnist_analysis.feat_margins`):
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


def selection_sentence(gaps: pd.DataFrame, agreement: pd.DataFrame | None = None) -> str:
    """What test-domain selection carries per column
    (:func:`~featlib.experiments.cmnist_analysis.selection_gaps`) and, with ``agreement``
    (:func:`~featlib.experiments.cmnist_analysis.selection_agreement`), whether it changes which column
    is best."""
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


# -- the cells far from the paper's, and what the gap studies say of each (issue 33) ---------------
#: A far cell traced to the spread between seeds, as :func:`far_cell_verdict` says it; chapter 04's
#: list (:func:`far_cells_section`) says it once in its lead and per cell only "The spread between seeds."
SEEDS_VERDICT = ("The distance is the spread between seeds, not a setting a study varied; more seeds decide where "
                 "the mean settles.")


def _study_value(row) -> str:
    """A study's cell as a reader reads it: "80.36 ± 2.20 (3 seeds, `frozen-steps`)"."""
    value = prose.seed_mean(row["mean"], row["std"], row["n_seeds"], scale=100)
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
            f"{prose.seed_mean(cell['mean'], cell['std'], cell['n_seeds'])} "
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


# -- FeAT's stop at full data size -----------------------------------------------------------------
def stop_margin_table(margins: pd.DataFrame, caption: str) -> Table:
    """The stop, seed by seed (the frame of :func:`~featlib.experiments.cmnist_analysis.stop_margins`)."""
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


def describe_early_stop(consequence: dict | None, threshold: float = DEFAULT_TERMINATION_THRESHOLD) -> str:
    """What a seed that stops one round early hands on, in one or two sentences (from
    :func:`~featlib.experiments.cmnist_analysis.early_stop_consequence`); the closest seed's margin says
    how likely that is."""
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


# -- the protocol's decisions ----------------------------------------------------------------------
def decisions_table(decisions, evidence: bool = True) -> Table:
    """The protocol's open choices as decided (:data:`featlib.hparams.DECISIONS`): the choice, the
    value featlib runs and (``evidence``) the source and measurement that decided it; chapter 04
    shows the short form, chapter 09 the whole."""
    rows = [{"choice": name, "featlib runs": h.value, **({"why (source and evidence)": h.source} if evidence else {})}
            for name, h in decisions.items()]
    caption = ("Where the paper leaves ColoredMNIST's protocol open, and what decided it" if evidence else
               "Where the paper leaves ColoredMNIST's protocol open: what this book runs")
    return table(pd.DataFrame(rows), caption=caption, wrap=list(rows[0]), cards=evidence)
