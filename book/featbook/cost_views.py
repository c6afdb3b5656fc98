"""How chapter 07 shows the cost benchmark: tables that fit the book's column, the figure in its
style. The numbers come from :mod:`featlib.cost.report`; this module formats, labels and draws them."""
from __future__ import annotations

import numpy as np
import pandas as pd

from featbook import style
from featbook import prose
from featlib.experiments.labels import DATASET_LABELS, LEARNER_LABELS
from featlib.experiments.paper_values import TABLE14_TIME_UNIT
from featbook.tables import Stacked, Table, Tables, table
from featlib.cost.report import IFEAT_MEMORY_LIMIT, IFEAT_TIME_LIMIT

BENCHMARK_LABELS = {"cmnist": "ColoredMNIST", "wilds": "WILDS"}
LEARNER_LABELS_BY_NAME = {"erm": "ERM", "bonsai": "Bonsai", "feat": "FeAT", "ifeat": "iFeAT"}


def summary_table(summary: pd.DataFrame, caption: str) -> Tables:
    """One table per benchmark: per learner and round, the median step time (its min-max over
    repeats under it), the ratio to ERM, the peak memory and its ratio to ERM."""
    return Tables([_summary_table(part, f"{caption}: {BENCHMARK_LABELS.get(bench, bench)}")
                   for bench, part in summary.groupby("benchmark", sort=False)])


def _summary_table(summary: pd.DataFrame, caption: str) -> Table:
    frame = pd.DataFrame({
        "learner": [LEARNER_LABELS_BY_NAME.get(m, m) for m in summary["learner"]],
        "round": summary["round"].astype(str),
        "step time": [Stacked(f"{prose.number(r.step_ms, 1)} ms",
                              f"{prose.number(r.step_ms_min, 1)}–{prose.number(r.step_ms_max, 1)}")
                      for r in summary.itertuples()],
        "time / ERM": [prose.ratio(v) for v in summary["time_x_erm"]],
        "peak memory": [prose.MISSING if not np.isfinite(v) else f"{prose.number(v, 0)} MB" for v in summary["peak_mb"]],
        "memory / ERM": [prose.ratio(v) if np.isfinite(v) else prose.MISSING for v in summary["memory_x_erm"]],
    })
    return table(frame, caption=caption, note="Step time: median over repeats, its min–max over repeats under it.")


def targets_table(targets: pd.DataFrame, caption: str) -> Table:
    """The iFeAT targets and FeAT's linearity, measured value against the limit."""
    frame = pd.DataFrame({
        "benchmark": [BENCHMARK_LABELS.get(b, b) for b in targets["benchmark"]],
        "target": targets["target"],
        "measured": [prose.number(v, 3) for v in targets["value"]],
        "limit": [prose.number(v, 2) for v in targets["limit"]],
        "met": ["yes" if m else "no" for m in targets["met"]],
    })
    return table(frame, caption=caption, wrap=["target"])


def schedule_table(estimate: pd.DataFrame, caption: str) -> Table:
    """The paper's schedule at our measured step times."""
    frame = pd.DataFrame({
        "benchmark": [BENCHMARK_LABELS.get(b, b) for b in estimate["benchmark"]],
        "learner": [LEARNER_LABELS_BY_NAME.get(m, m) for m in estimate["learner"]],
        "steps (Tables 6, 12)": [prose.integer(v) for v in estimate["paper_steps"]],
        "rounds": estimate["rounds"],
        "estimated time": [prose.minutes(v) for v in estimate["estimated_s"]],
        "time / ERM": [prose.ratio(v) for v in estimate["time_x_erm"]],
    })
    return table(frame, caption=caption)


def table14(paper: pd.DataFrame, ours_time: pd.Series, ours_memory: pd.Series, ours_dataset: str) -> Table:
    """The paper's Table 14 with its ratios to ERM, ours (the schedule estimated at the committed
    full-size step times, and their peak memory) on the first line where they measured the same
    dataset."""
    rows = []
    for r in paper.itertuples():
        ours = "ifeat" if r.learner == "feat" else r.learner
        same = r.dataset == ours_dataset and ours in ours_time.index
        unit = TABLE14_TIME_UNIT.get(r.dataset, "")
        rows.append({
            "dataset": DATASET_LABELS.get(r.dataset, r.dataset),
            "learner": "FeAT (iFeAT)" if r.learner == "feat" else LEARNER_LABELS.get(r.learner, r.learner),
            "time / ERM": Stacked(prose.ratio(ours_time[ours]) if same else prose.MISSING, f"paper {prose.ratio(r.time_x_erm)}",
                                  paper=True),
            "memory / ERM": Stacked(prose.ratio(ours_memory[ours]) if same else prose.MISSING,
                                    f"paper {prose.ratio(r.memory_x_erm)}", paper=True),
            "paper: time": f"{prose.number(r.time, 2)} {unit}".strip(),
            "paper: memory": f"{prose.number(r.memory_pct, 2)}% of the GPU",
        })
    return table(pd.DataFrame(rows), caption="Table 14 of the paper beside the committed full-size measurements",
                 note="Ratios to ERM: ours (committed, full size) on the first line, a dash where no committed "
                      "measurement is of that dataset; the paper's under it.")


#: Colour and marker of each learner's line in :func:`cost_figure`.
COST_LINE_STYLES = {"erm": ("k", "o"), "bonsai": ("tab:orange", "s"), "feat": ("tab:blue", "^"),
                    "ifeat": ("tab:green", "v")}


def cost_figure(summary: pd.DataFrame):
    """Step time and peak memory per round as multiples of ERM's, one row of two panels per benchmark
    (ERM's step a dashed line at 1, the iFeAT targets dotted), one legend under the panels."""
    benches = list(dict.fromkeys(summary["benchmark"]))
    fig, axes = style.subplots(len(benches), 2, extra_height=0.8)
    for row, bench in zip(axes, benches):
        frame = summary[summary["benchmark"] == bench]
        for column, (ax, title) in zip(("time_x_erm", "memory_x_erm"), zip(row, ("step time", "peak memory"))):
            for learner, part in frame.groupby("learner", sort=False):
                part = part[part["round"] != "synthesis"]
                colour, marker = COST_LINE_STYLES.get(learner, ("grey", "."))
                if learner == "erm":
                    ax.axhline(1.0, color=colour, lw=1, ls="--", label="ERM")
                else:
                    ax.plot(part["round"].astype(int), part[column], color=colour, marker=marker,
                            label=LEARNER_LABELS_BY_NAME.get(learner, learner))
            limit = IFEAT_TIME_LIMIT if column == "time_x_erm" else IFEAT_MEMORY_LIMIT
            ax.axhline(limit, color="tab:green", lw=0.8, ls=":", label=f"iFeAT target ({limit}x)")
            ax.set_xlabel("round k")
            ax.set_ylabel(f"{title} / ERM")
            ax.set_title(f"{BENCHMARK_LABELS.get(bench, bench)}: {title} per round")
            ax.grid(alpha=0.3)
    style.legend_below(fig, axes.flat, ncol=5)
    return fig


def phrase(values: dict[str, float], what: str = "", fmt=prose.ratio) -> str:
    """``{"cmnist": 1.43, "wilds": 1.2}``, "ERM's step time" -> "1.43× ERM's step time on
    ColoredMNIST and 1.20× on WILDS"."""
    parts = [f"{fmt(v)}{' ' + what if i == 0 and what else ''} on {BENCHMARK_LABELS.get(b, b)}"
             for i, (b, v) in enumerate(values.items())]
    return prose.listing(parts)


def load_committed(root) -> dict:
    """Every device folder of a committed ``results/cost`` folder ``root`` (those holding a
    ``provenance.json``), by path, each read and checked by
    :func:`featlib.cost.load_cost_results`: what :func:`featbook.committed.load` is given."""
    from pathlib import Path

    from featlib.cost import load_cost_results

    return {folder: load_cost_results(folder) for folder in sorted(p.parent for p in Path(root).glob("*/provenance.json"))}


def memory_from_round_2(committed: dict, failed: bool = False) -> str:
    """A phrase on FeAT's peak memory from round 2 on, relative to ERM's, in the committed
    full-size measurements ``committed`` (folder -> results as :func:`load_committed` read and
    checked them): "the committed measurements cpu-2core, FeAT's step needs 1.28× ERM's memory
    from round 2 on with ColoredMNIST and 1.03× with WILDS". With none it says that none are
    committed, or (``failed``: the fetch failed) that they could not be read here."""
    from pathlib import Path

    parts = []
    for folder, results in committed.items():
        frame = results["summary"].astype({"round": str})
        later = frame[(frame["learner"] == "feat") & (frame["round"] != "1") & (frame["round"] != "synthesis")]
        ratios = later.groupby("benchmark")["memory_x_erm"].max().to_dict()
        if ratios:
            each = prose.listing(f"{prose.ratio(v)} on {BENCHMARK_LABELS.get(b, b)}" for b, v in ratios.items())
            parts.append(f"the committed full-size measurements {Path(folder).name}, FeAT's step from round 2 on "
                         f"needs {each} (ERM's peak memory = 1)")
    if failed:
        return prose.listing(parts, empty="the committed full-size measurements (which could not be read in this "
                                          "runtime: see the note above) the same should hold")
    return prose.listing(parts, empty="the committed full-size measurements (none are committed yet) the same holds")
