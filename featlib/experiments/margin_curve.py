"""Table 2 along the OOD stage's length, and under the protocol fixed before looking (issue 56).

Table 2's own protocol (:data:`featlib.hparams.DECISIONS`) trains every frozen-feature run 2,500
OOD steps, the length at which the three columns lay closest to the paper's, and gives CLOvE on
ColoredMNIST-01 the weights closest to the paper's cells: a calibration. The ``margin-curve``
studies (:mod:`.gap_studies`) train the whole frozen table 6,000 steps, scored every 500, on
Appendix F.1's grid widened a decade each way; this module reads Table 2 off them at every length
under a rule that uses none of the paper's numbers (:data:`featlib.hparams.CONVERGED_PROTOCOL`):

* :func:`cells` -- Table 2's cells at each scored length: each cell's configuration chosen by the
  selection rule (:func:`.colored_mnist.select_best`) on a grid, with the per-seed values of the
  chosen configuration;
* :func:`widened` -- the grid rule: Appendix F.1's weights, widened by the next decade on a side
  where a cell's choice sits on that edge, until the choice is interior or the widest grid's edge
  binds (reported);
* :func:`converged_length` -- the shortest scored length from which no cell rises, at any later
  length, by more than that later cell's seed std;
* :func:`margins` -- FeAT's margin over the better of ERM's and Bonsai's features per objective,
  with the seed spread of the per-seed margins, and the verdict (lead, tie, loss) of the rule;
* :func:`read` -- all of it for each dataset of a study, as a :class:`Curve`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..hparams import APPENDIX_F1
from .colored_mnist import distinct_objectives, select_best

#: Appendix F.1's penalty weights: the one grid the paper states.
F1_GRID = tuple(float(w) for w in APPENDIX_F1["penalty_weights"].value)
#: The widest grid the margin-curve studies try: F.1's, a decade wider each way.
WIDEST = (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6)
#: Table 2's frozen columns: FeAT's (iFeAT's) features against ERM's and Bonsai's.
FEAT, BASELINES = "ifeat", ("erm", "bonsai")
CELL = ["dataset", "learner", "objective"]
CONFIG = CELL + ["penalty_weight", "pretrain_epochs"]


def _on_grid(runs: pd.DataFrame, grid) -> pd.DataFrame:
    """The runs whose penalty weight is in ``grid`` (to float rounding); an unpenalised objective's
    runs (ERM: weight 0) are kept whatever the grid."""
    weights = runs["penalty_weight"].to_numpy(dtype=float)
    inside = np.isclose(weights[:, None], np.asarray(grid, dtype=float)[None, :], rtol=1e-9, atol=0).any(1)
    return runs[inside | (runs["objective"] == "erm")]


def _with_seeds(best: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``best`` (one row per cell) with ``seed_values``: the chosen configuration's worst-test
    accuracy per seed, a dict seed -> value."""
    per_seed = runs.merge(best[CONFIG], on=CONFIG)
    values = {key: dict(zip(group["seed"], group["worst_test_acc"]))
              for key, group in per_seed.groupby(CELL, sort=False)}
    return best.assign(seed_values=[values.get(tuple(r), {}) for r in best[CELL].itertuples(index=False)])


def widened(runs: pd.DataFrame, base=F1_GRID, widest=WIDEST, score: str = "worst_test_acc") -> pd.DataFrame:
    """Each cell of ``runs`` (one length) chosen on ``base``, and where the choice sits on an edge
    of the grid it was chosen on, chosen again on that grid widened by the next weight of
    ``widest`` on that side, until the choice is interior or ``widest``'s edge binds. Adds
    ``grid_low`` and ``grid_high`` (the grid the cell was finally chosen on) and ``binding``
    (the choice sits on an edge that ``widest`` cannot widen)."""
    rows = []
    for _, cell_runs in runs.groupby(CELL, sort=True):
        tried = cell_runs["penalty_weight"].to_numpy(dtype=float)
        # the weights this cell's runs tried of ``widest``: an edge no run went past binds
        widest_here = sorted(float(w) for w in widest if np.isclose(tried, w, rtol=1e-9, atol=0).any())
        low, high = min(base), max(base)
        while True:
            grid = [w for w in widest_here if low <= w <= high] or list(base)
            best = select_best(_on_grid(cell_runs, grid), score=score)
            chosen = float(best["penalty_weight"].iloc[0]) if best["penalty_weight"].notna().all() else np.nan
            penalised = best["objective"].iloc[0] != "erm" and not np.isnan(chosen)
            lower = [w for w in widest_here if w < low]
            higher = [w for w in widest_here if w > high]
            if penalised and np.isclose(chosen, low) and lower:
                low = lower[-1]
            elif penalised and np.isclose(chosen, high) and higher:
                high = higher[0]
            else:
                binding = penalised and (np.isclose(chosen, low) or np.isclose(chosen, high))
                rows.append(best.assign(grid_low=low, grid_high=high, binding=bool(binding)))
                break
    return pd.concat(rows, ignore_index=True)


#: The grid rules a table can be read under: the protocol fixed before looking (F.1's grid widened
#: where a choice is on its edge), Appendix F.1's grid as printed, and every weight the study tried.
GRID_RULES = {
    "widened": lambda runs, score: widened(runs, score=score),
    "f1": lambda runs, score: select_best(_on_grid(runs, F1_GRID), score=score),
    "widest": lambda runs, score: select_best(_on_grid(runs, WIDEST), score=score),
}


def cells(frame: pd.DataFrame, rule: str = "widened", score: str = "worst_test_acc") -> pd.DataFrame:
    """Table 2 at every scored length of a margin-curve (or ood-length) study's rows: per (step,
    cell) the chosen configuration (:data:`GRID_RULES` ``rule``, selected by ``score``), its mean
    and std over seeds (numpy's, ddof 0) and its per-seed values (``seed_values``). Step 0 (before
    training) is left out."""
    if rule not in GRID_RULES:
        raise ValueError(f"rule must be one of {sorted(GRID_RULES)}; got {rule!r}")
    parts = []
    for step, runs in frame[frame["step"] > 0].groupby("step", sort=True):
        runs = runs.drop(columns="step")
        parts.append(_with_seeds(GRID_RULES[rule](runs, score), runs).assign(step=int(step)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def converged_length(table: pd.DataFrame) -> tuple[int | None, pd.DataFrame]:
    """The converged length of :data:`featlib.hparams.CONVERGED_PROTOCOL` for one dataset's
    :func:`cells`: the shortest scored length L from which no penalised cell of the frozen columns
    rises at any later scored length L' by more than its seed std at L' (ddof 0); the last scored
    length, which no later length judges, is never L. Returns (L, or None where no scored length
    meets the rule: not converged within the study, and per scored length the largest such rise in
    points with the cell that makes it, ``rise`` and ``by``; a negative rise: every cell fell)."""
    penalised = table[table["objective"] != "erm"]
    steps = sorted(penalised["step"].unique())
    rows = []
    for k, step in enumerate(steps):
        worst, by = -np.inf, None
        at = penalised[penalised["step"] == step].set_index(CELL)
        for later in steps[k + 1:]:
            then = penalised[penalised["step"] == later].set_index(CELL)
            excess = 100 * (then["mean"] - at["mean"].reindex(then.index) - then["std"])
            if excess.notna().any() and excess.max() > worst:
                worst, by = float(excess.max()), "/".join(excess.idxmax()) + f" at {int(later):,}"
        rows.append({"step": int(step), "rise": worst if by else np.nan, "by": by})
    report = pd.DataFrame(rows, columns=["step", "rise", "by"])
    # the last scored length has no later one to be judged by: it is no evidence of settling
    settled = [r.step for r in report.itertuples() if r.step != steps[-1] and not (r.rise > 0)]
    return (int(settled[0]) if settled else None), report


def margins(table: pd.DataFrame, feat: str = FEAT, baselines=BASELINES) -> pd.DataFrame:
    """FeAT's margin over the better baseline per (dataset, step, penalised objective) of
    :func:`cells`: ``margin`` (points, FeAT's cell mean minus the better baseline's), ``spread``
    (the larger seed std of the two cells: the rule's yardstick), ``verdict`` ("lead" where the
    margin exceeds the spread, "loss" where it falls below minus the spread, else "tie"), and
    ``seed_sd`` (the std over seeds of the per-seed margins, the figure's error bar) with
    ``n_seeds``. IB-IRM, which is IRMv1 on frozen features, is left out (its row repeats IRMv1's)."""
    rows = []
    keep = table[(table["objective"] != "erm") & table["learner"].isin([feat, *baselines])]
    for (dataset, step, objective), group in keep.groupby(["dataset", "step", "objective"], sort=False):
        if objective not in distinct_objectives(keep.loc[keep["dataset"] == dataset, "objective"].unique()):
            continue
        by = group.set_index("learner")
        present = [b for b in baselines if b in by.index and pd.notna(by.loc[b, "mean"])]
        if feat not in by.index or pd.isna(by.loc[feat, "mean"]) or not present:
            continue
        other = max(present, key=lambda b: by.loc[b, "mean"])
        margin = 100 * (by.loc[feat, "mean"] - by.loc[other, "mean"])
        spread = 100 * max(by.loc[feat, "std"], by.loc[other, "std"])
        mine, theirs = by.loc[feat, "seed_values"], by.loc[other, "seed_values"]
        per_seed = {s: 100 * (mine[s] - theirs[s]) for s in sorted(set(mine) & set(theirs))}
        rows.append({"dataset": dataset, "step": int(step), "objective": objective, "best_other": other,
                     "margin": margin, "spread": spread,
                     "verdict": "lead" if margin > spread else "loss" if margin < -spread else "tie",
                     "seed_sd": float(np.std(list(per_seed.values()))) if per_seed else np.nan,
                     "n_seeds": len(per_seed), "seed_margins": per_seed})
    return pd.DataFrame(rows, columns=["dataset", "step", "objective", "best_other", "margin", "spread", "verdict",
                                       "seed_sd", "n_seeds", "seed_margins"])


def verdicts(margin_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, step): the number of objectives where FeAT leads, ties and loses, the mean
    margin over the objectives (points), and ``mean_margin_sd``: the std over seeds (ddof 0) of each
    seed's mean over the objectives of its own margins (``seed_margins``; the seeds every objective
    has), the mean margin's seed spread."""
    counts = margin_rows.pivot_table(index=["dataset", "step"], columns="verdict", values="margin",
                                     aggfunc="size", fill_value=0)
    for verdict in ("lead", "tie", "loss"):
        if verdict not in counts:
            counts[verdict] = 0
    mean = margin_rows.groupby(["dataset", "step"])["margin"].mean().rename("mean_margin")

    def seed_sd(by_seed: list[dict]) -> float:
        seeds = set.intersection(*(set(m) for m in by_seed)) if by_seed else set()
        return float(np.std([np.mean([m[s] for m in by_seed]) for s in sorted(seeds)])) if seeds else np.nan

    sd = pd.Series({key: seed_sd(list(group["seed_margins"])) if "seed_margins" in group else np.nan
                    for key, group in margin_rows.groupby(["dataset", "step"])}, name="mean_margin_sd", dtype=float)
    sd.index.names = ["dataset", "step"]
    return counts[["lead", "tie", "loss"]].join(mean).join(sd).reset_index()


#: The seeds a margin curve needs before it gives a verdict, and Table 2 under the protocol fixed
#: before looking (:data:`featlib.hparams.CONVERGED_PROTOCOL`, "Seeds").
CURVE_MIN_SEEDS, TABLE_MIN_SEEDS = 3, 5


@dataclass(frozen=True)
class Curve:
    """One dataset's margin curve read under one grid rule (:func:`read`): Table 2's cells at every
    scored length (:func:`cells`), FeAT's margins (:func:`margins`) and their counts
    (:func:`verdicts`), the converged length (None: not converged within the study) with its report
    (:func:`converged_length`), and the seeds every cell has."""
    dataset: str
    cells: pd.DataFrame
    margins: pd.DataFrame
    verdicts: pd.DataFrame
    converged: int | None
    report: pd.DataFrame
    seeds: tuple[int, ...]

    @property
    def last(self) -> int:
        """The longest scored length."""
        return int(self.cells["step"].max())

    @property
    def length(self) -> int:
        """Where the protocol fixed before looking reads the table: the converged length, else the
        longest scored one (reported as not converged)."""
        return self.converged if self.converged is not None else self.last

    def at(self, step: int) -> pd.DataFrame:
        """The margins at the scored length nearest ``step`` (the authors' 501 steps: 500)."""
        steps = np.array(sorted(self.margins["step"].unique()))
        nearest = int(steps[np.argmin(np.abs(steps - step))]) if len(steps) else step
        return self.margins[self.margins["step"] == nearest]

    def counts_at(self, step: int) -> pd.Series:
        """:func:`verdicts`' row at the scored length nearest ``step``."""
        near = self.at(step)
        return self.verdicts[self.verdicts["step"] == (int(near["step"].iloc[0]) if len(near) else step)].iloc[0]


def read(frame: pd.DataFrame, rule: str = "widened", score: str = "worst_test_acc") -> dict[str, Curve]:
    """Per dataset of a margin-curve study's rows (both datasets' studies may be concatenated),
    its :class:`Curve` under ``rule`` (:data:`GRID_RULES`) and ``score``. The seeds are those every
    (learner, objective) of the dataset has."""
    curves = {}
    for dataset, rows in frame.groupby("dataset", sort=False):
        table = cells(rows, rule=rule, score=score)
        length, report = converged_length(table)
        rows_margins = margins(table)
        per_cell = rows.groupby(["learner", "objective"])["seed"].apply(lambda s: frozenset(s.unique()))
        seeds = tuple(sorted(int(s) for s in frozenset.intersection(*per_cell))) if len(per_cell) else ()
        curves[str(dataset)] = Curve(str(dataset), table, rows_margins, verdicts(rows_margins), length, report, seeds)
    return curves
