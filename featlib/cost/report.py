"""Ratios to ERM, the book's targets for iFeAT, the paper's Table 14 beside ours: the frames and text
that ``python -m featlib.cli.cost`` prints and writes (chapter 07 draws them: :mod:`featbook.cost_views`).

* :func:`summarise`: per (benchmark, learner, round) the median over repeats of the per-run
  median step time, the spread over repeats, the peak memory, and both as ratios to ERM's
  step on the same benchmark, model and batch.
* :func:`check_targets`: iFeAT per-step time <= 1.3x ERM and peak memory <= 1.5x ERM in every
  round; FeAT's per-step time linear in the round k (a least-squares line through rounds
  1..K, every residual within 10% of ERM's step time).
* :func:`schedule_estimate`: the paper's schedule (Table 6 or Table 12 steps per round) times
  our measured per-step time of each round: training time without the evaluations between
  rounds, set beside Table 14's measured times as ratios to ERM.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..experiments.paper_values import TABLE14
from ..feature_learning import FEATURE_LEARNERS

#: The book's targets for iFeAT (ratios to ERM on the same model and batch).
IFEAT_TIME_LIMIT = 1.3
IFEAT_MEMORY_LIMIT = 1.5
#: FeAT is "linear in k" when every residual of the fitted line is within this share of ERM's step.
LINEARITY_TOLERANCE = 0.10

_ROUND_ORDER = {"synthesis": 10**6}


def _round_key(label: str) -> int:
    return _ROUND_ORDER.get(str(label), None) or int(label)


def summarise(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per (benchmark, learner, round), ratios to ERM's (single) round."""
    raw = raw.assign(round=raw["round"].astype(str))
    grouped = raw.groupby(["benchmark", "learner", "round"], sort=False)
    out = grouped.agg(
        step_ms=("step_s", lambda s: 1e3 * float(np.median(s))),
        step_ms_min=("step_s", lambda s: 1e3 * float(np.min(s))),
        step_ms_max=("step_s", lambda s: 1e3 * float(np.max(s))),
        peak_mb=("peak_bytes", lambda b: float(np.median(b)) / 2**20 if b.notna().any() else np.nan),
        timed_steps=("timed_steps", "sum"),
        repeats=("repeat", "nunique"),
    ).reset_index()
    erm = out[out["learner"] == "erm"].set_index("benchmark")
    out["time_x_erm"] = out["step_ms"] / out["benchmark"].map(erm["step_ms"])
    out["memory_x_erm"] = out["peak_mb"] / out["benchmark"].map(erm["peak_mb"])
    order = {m: i for i, m in enumerate(FEATURE_LEARNERS.table_order())}
    out = out.sort_values(["benchmark", "learner", "round"],
                          key=lambda c: c.map(order) if c.name == "learner" else
                          (c.map(_round_key) if c.name == "round" else c), kind="stable")
    return out.reset_index(drop=True)


def linear_fit(rounds: np.ndarray, values: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Least-squares ``values ~ intercept + slope * rounds``: (slope, intercept, residuals)."""
    slope, intercept = np.polyfit(rounds, values, 1)
    return float(slope), float(intercept), values - (intercept + slope * rounds)


def check_targets(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (benchmark, target): the measured value, the limit and whether it is met."""
    rows = []
    for bench, frame in summary.groupby("benchmark", sort=False):
        erm_ms = float(frame.loc[frame["learner"] == "erm", "step_ms"].iloc[0])
        ifeat = frame[frame["learner"] == "ifeat"]
        if len(ifeat):
            worst_t = ifeat["time_x_erm"].max()
            rows.append({"benchmark": bench, "target": "iFeAT step time <= 1.3x ERM (worst round)",
                         "value": worst_t, "limit": IFEAT_TIME_LIMIT, "met": bool(worst_t <= IFEAT_TIME_LIMIT)})
            worst_m = ifeat["memory_x_erm"].max()
            if np.isfinite(worst_m):
                rows.append({"benchmark": bench, "target": "iFeAT peak memory <= 1.5x ERM (worst round)",
                             "value": worst_m, "limit": IFEAT_MEMORY_LIMIT, "met": bool(worst_m <= IFEAT_MEMORY_LIMIT)})
        feat = frame[(frame["learner"] == "feat") & (frame["round"] != "synthesis")]
        if len(feat) >= 3:
            k = feat["round"].astype(int).to_numpy(float)
            slope, _, residuals = linear_fit(k, feat["step_ms"].to_numpy(float))
            worst = float(np.abs(residuals).max()) / erm_ms
            rows.append({"benchmark": bench,
                         "target": f"FeAT step time linear in k (slope {100 * slope / erm_ms:+.1f}% of ERM per round; "
                                   "largest residual / ERM step)",
                         "value": worst, "limit": LINEARITY_TOLERANCE, "met": bool(worst <= LINEARITY_TOLERANCE)})
    return pd.DataFrame(rows, columns=["benchmark", "target", "value", "limit", "met"])


def schedule_estimate(summary: pd.DataFrame, schedules: dict[str, dict[str, list[int]]]) -> pd.DataFrame:
    """Per (benchmark, learner): the paper's steps of each round times our measured step time of
    that round (the last measured round stands in for later ones), summed; and as a ratio to ERM."""
    rows = []
    for (bench, learner), frame in summary.groupby(["benchmark", "learner"], sort=False):
        steps = schedules[bench][learner]
        ms = frame["step_ms"].tolist()
        synthesis = frame.loc[frame["round"] == "synthesis", "step_ms"]
        if len(synthesis):  # rounds, then the synthesis round (Bonsai)
            per_round = frame.loc[frame["round"] != "synthesis", "step_ms"].tolist()
            times = [per_round[min(i, len(per_round) - 1)] for i in range(len(steps) - 1)]
            times.append(float(synthesis.iloc[0]))
        else:
            times = [ms[min(i, len(ms) - 1)] for i in range(len(steps))]
        rows.append({"benchmark": bench, "learner": learner, "paper_steps": int(sum(steps)),
                     "rounds": len(steps), "estimated_s": float(np.dot(steps, times)) / 1e3})
    out = pd.DataFrame(rows)
    erm = out[out["learner"] == "erm"].set_index("benchmark")["estimated_s"]
    out["time_x_erm"] = out["estimated_s"] / out["benchmark"].map(erm)
    return out


def paper_schedules(datasets: dict[str, str], learners) -> dict[str, dict[str, list[int]]]:
    """The paper's schedule (Table 6 on ColoredMNIST, Table 12 on WILDS, as :mod:`featlib.hparams`
    has them today) of each benchmark's dataset, ``{benchmark: dataset}``: ``{benchmark: {learner:
    steps per round}}``, what :func:`schedule_estimate` multiplies the measured step times by. A
    measurement made before a schedule changed (Bonsai's DRO round on ColoredMNIST-025, 150 -> 500
    epochs) is read against today's, as chapter 07 shows it."""
    from .benchmark import COST_CASES

    out = {}
    for benchmark, dataset in datasets.items():
        case = COST_CASES.get(benchmark)(dataset=dataset) if dataset else COST_CASES.get(benchmark)()
        out[benchmark] = {learner: case.schedule(learner) for learner in learners}
    return out


def paper_table14() -> pd.DataFrame:
    """Table 14 as printed (the paper's numbers), with the ratios to ERM computed from it."""
    rows = []
    for dataset, learners in TABLE14.items():
        for learner, values in learners.items():
            rows.append({"dataset": dataset, "learner": learner, "time": values["time"][0],
                         "time_std": values["time"][1], "memory_pct": values["memory_pct"][0],
                         "time_x_erm": values["time"][0] / learners["erm"]["time"][0],
                         "memory_x_erm": values["memory_pct"][0] / learners["erm"]["memory_pct"][0]})
    return pd.DataFrame(rows)


def format_table(summary: pd.DataFrame) -> str:
    """The side-by-side table the benchmark prints."""
    shown = summary.assign(
        step=summary.apply(lambda r: f"{r.step_ms:9.2f} ms [{r.step_ms_min:.2f}-{r.step_ms_max:.2f}]", axis=1),
        time=summary["time_x_erm"].map(lambda v: f"{v:5.2f}x"),
        memory=summary.apply(lambda r: "    n/a" if not np.isfinite(r.peak_mb) else f"{r.peak_mb:9.1f} MB", axis=1),
        mem_ratio=summary["memory_x_erm"].map(lambda v: "  n/a" if not np.isfinite(v) else f"{v:5.2f}x"),
    )[["benchmark", "learner", "round", "step", "time", "memory", "mem_ratio"]]
    shown.columns = ["benchmark", "learner", "round", "median step [min-max over repeats]", "time/ERM",
                     "peak memory", "memory/ERM"]
    return shown.to_string(index=False)


def format_targets(targets: pd.DataFrame) -> str:
    lines = []
    for r in targets.itertuples():
        lines.append(f"[{'met   ' if r.met else 'MISSED'}] {r.benchmark}: {r.target}: {r.value:.3f} (limit {r.limit})")
    return "\n".join(lines)
