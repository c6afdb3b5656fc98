"""How chapter 07 shows the cost benchmark: tables that fit the book's column, the figure in its
style. The numbers come from :mod:`featlib.cost.report`; this module formats, labels and draws them."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from featbook import style
from featbook import prose
from featlib.experiments.labels import ALGORITHM_LABELS, DATASET_LABELS, LEARNER_LABELS
from featlib.experiments.paper_values import TABLE14_TIME_UNIT
from featbook.tables import Stacked, Table, Tables, table
from featlib.cost.report import IFEAT_MEMORY_LIMIT, IFEAT_TIME_LIMIT

BENCHMARK_LABELS = {"cmnist": "ColoredMNIST", "wilds": "WILDS"}


def summary_table(summary: pd.DataFrame, caption: str, sources: dict[str, "CostSource"] | None = None) -> Tables:
    """One table per benchmark: per learner and round, the median step time (its min-max over
    repeats under it), the ratio to ERM, the peak memory and its ratio to ERM. ``sources``
    (benchmark -> :class:`CostSource`) names what each benchmark measured in its caption
    (fabricated data, the backbone's weights, the device); without it, the benchmark's name."""
    return Tables([_summary_table(part, f"{caption}: {_benchmark_label(bench, sources)}")
                   for bench, part in summary.groupby("benchmark", sort=False)])


def _benchmark_label(bench: str, sources: dict | None) -> str:
    return sources[bench].label if sources and bench in sources else BENCHMARK_LABELS.get(bench, bench)


def _summary_table(summary: pd.DataFrame, caption: str) -> Table:
    frame = pd.DataFrame({
        "learner": [ALGORITHM_LABELS.get(m, m) for m in summary["learner"]],
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


def schedule_table(estimate: pd.DataFrame, caption: str, sources: dict[str, "CostSource"] | None = None) -> Tables:
    """The paper's schedule at our measured step times, one table per benchmark, its caption
    naming what the benchmark measured (``sources``, as in :func:`summary_table`)."""
    return Tables([_schedule_table(part, f"{caption}: {_benchmark_label(bench, sources)}")
                   for bench, part in estimate.groupby("benchmark", sort=False)])


def _schedule_table(estimate: pd.DataFrame, caption: str) -> Table:
    frame = pd.DataFrame({
        "learner": [ALGORITHM_LABELS.get(m, m) for m in estimate["learner"]],
        "steps": [prose.integer(v) for v in estimate["paper_steps"]],
        "rounds": estimate["rounds"],
        "estimated time": [prose.minutes(v) for v in estimate["estimated_s"]],
        "time / ERM": [prose.ratio(v) for v in estimate["time_x_erm"]],
    })
    return table(frame, caption=caption)


# --- What a measurement measured: read from its provenance (committed) or its cases (this run) ---

#: The fields of each case that make its size; the paper's sizes are the cases' defaults
#: (:class:`featlib.cost.CMNISTCost`, :class:`featlib.cost.WildsCost`: ColoredMNIST's 50,000
#: images per full-batch step and the 256-unit MLP; Camelyon17's DenseNet-121 at 96 px, batch 32).
SIZE_FIELDS = {"cmnist": ("n_train", "hidden_dim"), "wilds": ("dataset", "backbone", "resolution", "batch_size")}
#: The CLI option of each field (:func:`featlib.cli.cost.parse_args`), where it differs.
_OPTION_OF = {"cmnist": {"dataset": "cmnist_dataset"}, "wilds": {"dataset": "wilds_dataset"}}


def paper_sizes(benchmark: str) -> dict:
    """The paper's sizes of a benchmark's case: its :data:`SIZE_FIELDS` at the case's defaults."""
    import dataclasses

    from featlib.cost import COST_CASES

    defaults = {f.name: f.default for f in dataclasses.fields(COST_CASES.get(benchmark))}
    return {k: defaults[k] for k in SIZE_FIELDS.get(benchmark, ())}


def device_phrase(device: str, cpu_count: int | None = None) -> str:
    """A recorded device as a sentence names it: "one NVIDIA H200", "a 2-core CPU"."""
    gpu = prose.gpu_name(device)
    if gpu:
        return f"one {gpu}"
    if device == "cpu":
        return f"a {int(cpu_count)}-core CPU" if cpu_count else "a CPU"
    return str(device)


@dataclass(frozen=True)
class CostSource:
    """What one benchmark of a cost measurement measured: the dataset, the sizes, whether the data
    were fabricated and the backbone pretrained (WILDS), and the device. ``fabricated`` is None
    where the record does not say (then it is never set beside the paper's numbers)."""

    benchmark: str
    dataset: str
    sizes: dict
    device: str
    fabricated: bool | None = False
    pretrained: Any = None

    @property
    def at_paper_sizes(self) -> bool:
        return all(self.sizes.get(k) == v for k, v in paper_sizes(self.benchmark).items())

    @property
    def beside_paper(self) -> bool:
        """At the paper's sizes, its data recorded: a measurement of what Table 14 measures, at a stated
        scale. Fabricated images count: a step does the same operations on the same shapes whatever
        the pixels are (tests/test_cost_content.py), so its time and memory are those of the real
        images of that size."""
        return self.fabricated is not None and self.at_paper_sizes

    @property
    def data(self) -> str:
        """"ColoredMNIST-025", "fabricated Camelyon17"."""
        name = DATASET_LABELS.get(self.dataset, self.dataset)
        if self.fabricated is None:
            return f"{name} (whether real or fabricated is not recorded)"
        return f"fabricated {name}" if self.fabricated else name

    @property
    def model(self) -> str:
        """"50,000 images per full-batch step, MLP of width 256", "untrained DenseNet-121 at 96 px, batch 32"."""
        s = self.sizes
        if self.benchmark == "cmnist":
            return f"{prose.integer(s['n_train'])} images per full-batch step, MLP of width {s['hidden_dim']}"
        from featlib.cost.benchmark import BACKBONE_NAMES
        from featlib.data.wilds_data import WILDS_DATASETS

        known = isinstance(self.pretrained, bool) or self.pretrained is None
        weights = {False: "untrained ", True: "pretrained ", None: ""}[self.pretrained] if known else ""
        loaded = "" if known else f" (weights: {self.pretrained})"
        try:
            image = WILDS_DATASETS.get(s["dataset"]).modality == "image"
        except (KeyError, ValueError):
            image = True
        side = f" at {s['resolution']}{prose.NBSP}px" if image and s.get("resolution") else ""
        return f"{weights}{BACKBONE_NAMES.get(s['backbone'], s['backbone'])}{loaded}{side}, batch {s['batch_size']}"

    @property
    def label(self) -> str:
        """"fabricated Camelyon17 (untrained DenseNet-121 at 96 px, batch 32) on a 2-core CPU"."""
        return f"{self.data} ({self.model}) on {self.device}"

    @property
    def apart_because(self) -> str:
        """Why it is not set beside the paper's numbers ("" when it is)."""
        reasons = []
        if self.fabricated is None:
            reasons.append("its data are not recorded")
        if not self.at_paper_sizes:
            reasons.append("smaller than the paper's sizes")
        return prose.listing(reasons, empty="")


def recorded_options(prov: Mapping[str, Any]) -> dict | None:
    """The options of the command a committed cost folder records (``python -m featlib.cli.cost
    ...``, or the earlier ``featlib.cost``), read by the command's own parser, so that an option
    left out takes the default it had; None when the command cannot be read."""
    import contextlib
    import io
    import shlex

    from featlib.cli.cost import parse_args

    try:
        tokens = shlex.split(str(prov.get("command", "")))
        args = tokens[tokens.index("-m") + 2:]
        with contextlib.redirect_stderr(io.StringIO()):
            return vars(parse_args(args))
    except (ValueError, SystemExit):
        return None


def committed_sources(prov: Mapping[str, Any]) -> dict[str, CostSource]:
    """Benchmark -> :class:`CostSource` of a committed cost folder, from its provenance: the
    benchmarks it recorded (``cases``), the sizes, data and weights of its command, the device."""
    options = recorded_options(prov)
    device = device_phrase(prov.get("device", ""), prov.get("cpu_count"))
    out = {}
    for bench in prov.get("cases", {}):
        if options is None:
            out[bench] = CostSource(bench, "", {}, device, fabricated=None)
            continue
        rename = _OPTION_OF.get(bench, {})
        sizes = {k: options.get(rename.get(k, k)) for k in SIZE_FIELDS.get(bench, ())}
        dataset = options.get(rename.get("dataset", "dataset"))
        if bench == "wilds":
            out[bench] = CostSource(bench, dataset, sizes, device, fabricated=not options.get("real_data", False),
                                    pretrained=options.get("pretrained"))
        else:
            out[bench] = CostSource(bench, dataset, sizes, device)
    return out


def case_sources(cases, device: str, cpu_count: int | None = None) -> dict[str, CostSource]:
    """Benchmark -> :class:`CostSource` of this run's cases (:class:`featlib.cost.CMNISTCost`,
    :class:`featlib.cost.WildsCost`) on ``device`` (as :func:`featlib.device.describe_device` names it)."""
    import os

    where = device_phrase(device, cpu_count or os.cpu_count())
    out = {}
    for case in cases:
        sizes = {k: getattr(case, k, None) for k in SIZE_FIELDS.get(case.name, ())}
        out[case.name] = CostSource(case.name, case.dataset, sizes, where, fabricated=bool(getattr(case, "fabricate", False)),
                                    pretrained=getattr(case, "pretrained", None) if case.name == "wilds" else None)
    return out


def show_committed(name: str, prov: Mapping[str, Any], sources: dict[str, CostSource]) -> None:
    """A committed folder's provenance as the chapter shows it: one line with what it measured
    (fabricated data named as such) and the device; the commit and the wall time go with the
    command in the folded block, out of the reading text (featbook.leaks)."""
    from IPython.display import HTML, Markdown, display

    from featbook import evidence

    shown = {k: v for k, v in prov.items() if k not in ("commit", "wall_time_s", "wall_time_s_per_run", "runs")}
    if shown.get("device"):  # "on one NVIDIA H200", "on a 2-core CPU"
        shown["device"] = device_phrase(shown["device"], shown.get("cpu_count"))
    line = evidence.provenance_line(f"Committed measurements ({name})", shown,
                                    size="; ".join(s.data + " (" + s.model + ")" for s in sources.values()))
    display(Markdown(line))
    # the commit and the wall time inside the fold
    display(HTML(evidence.made_by(f"{prose.minutes(float(prov['wall_time_s']))} of wall time."
                                  if prov.get("wall_time_s") is not None else "", prov)))


# --- Table 14: the paper's ratios, and ours where they measure the same at a stated scale ---


@dataclass(frozen=True)
class Measured:
    """One benchmark of a committed folder, as Table 14 counts: the whole training by the paper's
    schedule at the measured step times, and the peak memory of a step (worst round), each as a
    multiple of ERM's; ``steps_x_erm``: iFeAT's schedule's steps over ERM's, ``step_x_erm``:
    iFeAT's step time in its worst round over ERM's."""

    folder: str
    source: CostSource
    time_x_erm: dict      # learner -> total training time / ERM's
    memory_x_erm: dict    # learner -> peak memory of a step (worst round) / ERM's
    steps_x_erm: float
    step_x_erm: float


def committed_schedule(results: Mapping) -> pd.DataFrame:
    """A committed cost folder's whole-training estimate by today's paper schedule
    (:func:`featlib.cost.paper_schedules` of the datasets its provenance names) at its measured step
    times (:func:`featlib.cost.schedule_estimate`). The folder's own ``schedule.csv`` keeps the
    schedule of the day it ran; every table and sentence of chapter 07 uses this one, so that a
    schedule decided later (Bonsai's 500-epoch DRO round) counts the same everywhere."""
    from featlib.cost import paper_schedules, schedule_estimate

    summary = results["summary"]
    sources = committed_sources(results["provenance"])
    benchmarks = [b for b in dict.fromkeys(summary["benchmark"]) if b in sources]
    schedules = paper_schedules({b: sources[b].dataset for b in benchmarks}, sorted(set(summary["learner"])))
    return schedule_estimate(summary[summary["benchmark"].isin(benchmarks)], schedules)


def measured(committed: Mapping) -> list[Measured]:
    """Every (committed folder, benchmark) with its :class:`Measured` ratios, in folder order."""
    from pathlib import Path

    out = []
    for folder, results in committed.items():
        sources = committed_sources(results["provenance"])
        schedule, summary = committed_schedule(results), results["summary"]
        for bench, source in sources.items():
            sched = schedule[schedule["benchmark"] == bench].set_index("learner")
            summ = summary[summary["benchmark"] == bench]
            if "erm" not in sched.index or "ifeat" not in sched.index:
                continue
            out.append(Measured(
                Path(folder).name, source, sched["time_x_erm"].to_dict(),
                summ.groupby("learner")["memory_x_erm"].max().to_dict(),
                float(sched.loc["ifeat", "paper_steps"] / sched.loc["erm", "paper_steps"]),
                float(summ.loc[summ["learner"] == "ifeat", "time_x_erm"].max())))
    return out


def paper_ratios(paper: pd.DataFrame, learner: str, column: str = "time_x_erm") -> dict[str, float]:
    rows = paper[paper["learner"] == learner]
    return dict(zip(rows["dataset"], rows[column]))


def table14(paper: pd.DataFrame, committed: Mapping) -> Table:
    """The paper's Table 14 as multiples of ERM's (training time and memory of FeAT, which is
    iFeAT, and of Bonsai), and under it ours where it measures the same at a stated scale: the
    paper's sizes (:attr:`CostSource.beside_paper`; fabricated images named so in the row), the
    device and sizes in the row. Ours is the paper's schedule at the committed step times; the rest
    is left to :func:`kept_apart`."""
    columns = {"time": "time_x_erm", "memory": "memory_x_erm"}
    rows = []
    for dataset in dict.fromkeys(paper["dataset"]):
        part = paper[paper["dataset"] == dataset].set_index("learner")
        rows.append({"dataset": DATASET_LABELS.get(dataset, dataset), "measured": "the paper, V100 GPUs",
                     **{f"{LEARNER_LABELS['ifeat' if m == 'feat' else m]} {what} / ERM": prose.ratio(part.loc[m, col])
                        for what, col in columns.items() for m in ("feat", "bonsai")}})
    paper_data = set(paper["dataset"])  # ours of the paper's datasets first, under its rows
    ours = sorted((m for m in measured(committed) if m.source.beside_paper), key=lambda m: m.source.dataset not in paper_data)
    for m in ours:
        rows.append({"dataset": DATASET_LABELS.get(m.source.dataset, m.source.dataset),
                     "measured": f"ours, {m.source.device}" + (", fabricated images" if m.source.fabricated else ""),
                     **{f"{LEARNER_LABELS[learner]} {what} / ERM": prose.ratio(getattr(m, f"{what}_x_erm").get(learner))
                        for what in columns for learner in ("ifeat", "bonsai")}})
    erm = paper[paper["learner"] == "erm"]
    absolute = ", ".join(f"{prose.number(r.time, 2)} {TABLE14_TIME_UNIT.get(r.dataset, '')} and "
                         f"{prose.number(r.memory_pct, 2)}%{' of the GPU' if k == 0 else ''} on "
                         f"{DATASET_LABELS.get(r.dataset, r.dataset)}" for k, r in enumerate(erm.itertuples()))
    note = ("The paper's rows: its Table 14, whole training runs (evaluation included) on V100 GPUs with the authors' "
            f"implementation, memory as a share of the GPU's (ERM: {absolute}); its FeAT is iFeAT. ")
    if ours:
        sizes = "; ".join(dict.fromkeys(f"{DATASET_LABELS.get(m.source.dataset, m.source.dataset)}: {m.source.model}"
                                        for m in ours))
        note += ("Ours: the schedule a run trains (Tables 6 and 12, FeAT's rolled-back round included) at the step "
                 f"times measured on the device named, at the paper's sizes ({sizes}), evaluation left out; memory: "
                 "the peak of one step, worst round. " + (_fabricated_note(ours) + " ").lstrip()
                 + "Different devices and implementations: compare the ratios, not the absolute numbers.")
        caption = "Training time and memory as multiples of ERM's: the paper's Table 14, and ours at full size"
    else:
        note += "Nothing committed measures the paper's sizes yet, so no row of ours stands beside them."
        caption = "Training time and memory as multiples of ERM's: the paper's Table 14"
    return table(pd.DataFrame(rows), caption=caption, note=note, wrap=["measured"])


#: Why a measurement on fabricated images of the paper's size stands for the real images (the
#: property tests/test_cost_content.py checks on the benchmark's own steps).
PIXELS_FREE = ("a step does the same operations on the same shapes whatever the pixels are, so its time and "
               "memory are those of the real images of that size")


def _fabricated_note(ours: list, the: str = "The") -> str:
    """The sentence naming the datasets whose images were fabricated, and why that does not change a
    step's cost; "" without any."""
    names = [DATASET_LABELS.get(m.source.dataset, m.source.dataset) for m in ours if m.source.fabricated]
    return f"{the} {prose.listing(dict.fromkeys(names))} images were fabricated, of the paper's size: {PIXELS_FREE}." if names else ""


def kept_apart(committed: Mapping, numbers: bool = True) -> str:
    """The sentence on the committed measurements not set beside the paper's numbers (smaller sizes,
    or data not recorded), with why (and, with ``numbers``, their ratios); "" when there are none."""
    apart = [m for m in measured(committed) if not m.source.beside_paper]
    if not apart:
        return ""
    if not numbers:
        return (f"Kept apart from the paper's numbers, as above: "
                f"{prose.listing(f'{m.source.label} ({m.source.apart_because})' for m in apart)}.")
    parts = [f"{m.source.label} ({m.folder}: {m.source.apart_because}; iFeAT {prose.ratio(m.time_x_erm['ifeat'])} "
             f"ERM's time by the schedule{_bonsai(m)})" for m in apart]
    return f"Not set beside the paper's numbers: {prose.listing(parts)}. Their tables are above."


def _bonsai(m: Measured) -> str:
    return f", Bonsai {prose.ratio(m.time_x_erm['bonsai'])}" if "bonsai" in m.time_x_erm else ""


@dataclass(frozen=True)
class Agreement:
    """Does ours agree with Table 14? ``verdict`` "yes", "partly", "no" or "not yet", and the
    sentences of it: ``ours`` (our ratios and where), ``paper`` (the paper's), ``why``; ``scale``
    (the claims row's); ``like`` (True: the verdict rests on a dataset of the paper's table, by its
    schedule; False: on other datasets only, whose schedules compare otherwise); ``unequal``: the
    sentence on the measurements of other datasets beside a like-for-like verdict ("" without)."""

    verdict: str
    ours: str
    paper: str
    why: str
    scale: str
    like: bool = False
    unequal: str = ""


def _each_dataset(ms: list) -> str:
    """Our ratios per dataset and device: "on Camelyon17, iFeAT 1.02× ERM's time and Bonsai 1.56× on a
    2-core CPU"; fabricated images named after the device."""
    by_dataset = {}
    for m in ms:
        by_dataset.setdefault(m.source.dataset, []).append(m)

    def each(ms):
        return ", ".join(
            f"{prose.ratio(m.time_x_erm['ifeat'])}{' ERM' + chr(39) + 's time' if k == 0 else ''}"
            + (f" and{' Bonsai' if k == 0 else ''} {prose.ratio(m.time_x_erm['bonsai'])}" if "bonsai" in m.time_x_erm else "")
            + f" on {m.source.device}" + (" (fabricated images of the paper's size)" if m.source.fabricated else "")
            for k, m in enumerate(ms))

    return "; ".join(f"on {DATASET_LABELS.get(d, d)}, iFeAT {each(ms)}" for d, ms in by_dataset.items())


def table14_verdicts(ms: list, limit_of, bonsai_of=None) -> tuple[str, list, list]:
    """Per measurement: "yes" when iFeAT's ratio is within the paper's FeAT ratio (``limit_of(m)``)
    and below Bonsai's, "partly" when below Bonsai's only, "no" otherwise; their common verdict or
    "partly", and whether each is cheaper than Bonsai (None: no Bonsai) and within the paper's."""
    verdicts, cheaper, within = [], [], []
    for m in ms:
        i, b = m.time_x_erm["ifeat"], m.time_x_erm.get("bonsai")
        cheaper.append(None if b is None else i < b)
        within.append(i <= limit_of(m))
        verdicts.append("yes" if within[-1] and cheaper[-1] is not False else "partly" if cheaper[-1] else "no")
    return (verdicts[0] if len(set(verdicts)) == 1 else "partly"), cheaper, within


def unequal_schedules(ms: list) -> str:
    """Why the ratios of measurements on datasets the paper's Table 14 does not hold are larger: their
    schedule gives iFeAT more of ERM's steps (on ColoredMNIST-025 three rounds of ERM's length, the
    rolled-back one included), while per step iFeAT costs little more; "" without such ratios."""
    if not ms:
        return ""
    steps = prose.listing(sorted({prose.ratio(m.steps_x_erm) for m in ms}))
    per_step = _span([m.step_x_erm for m in ms])
    return (f"Beside it, {_each_dataset(ms)}. These are larger because that schedule is not ERM's length: "
            f"iFeAT's has {steps} ERM's steps (the round its termination check trains and rolls back included), "
            f"while per step iFeAT costs {per_step} ERM's; they compare with no row of the paper's table.")


def agreement(paper: pd.DataFrame, committed: Mapping) -> Agreement:
    """Table 14's claim, FeAT costs little more than ERM and less than Bonsai, on the committed
    measurements that stand beside it (the paper's sizes, :attr:`CostSource.beside_paper`). The
    quantity is the paper's: the whole training time as a multiple of ERM's (ours by the paper's
    schedule at the measured step times).

    Like for like first: where ours measures a dataset of the paper's table, the verdict rests on
    those measurements alone, each against the paper's FeAT ratio on the same dataset, and the
    others are said beside it (:func:`unequal_schedules`). Without one, on the others, against the
    paper's largest FeAT ratio. Per measurement: "yes" when iFeAT's ratio is within the paper's
    FeAT ratio and below Bonsai's, "partly" when below Bonsai's only, "no" when not below Bonsai's
    (or above the paper's without a Bonsai to compare with); over several, their common verdict or
    "partly"."""
    feat, bonsai = paper_ratios(paper, "feat"), paper_ratios(paper, "bonsai")
    names = prose.listing(DATASET_LABELS.get(d, d) for d in feat)
    everything = measured(committed)
    ours = [m for m in everything if m.source.beside_paper]
    apart_list = [f"{m.source.data} on {m.source.device}" for m in everything if not m.source.beside_paper]
    apart = prose.listing(apart_list) if apart_list else ""
    apart_text = f"; {apart} kept apart" if apart else ""
    like = [m for m in ours if m.source.dataset in feat]
    if like:
        others = [m for m in ours if m.source.dataset not in feat]
        verdict, cheaper, within = table14_verdicts(like, lambda m: feat[m.source.dataset])
        shown = list(dict.fromkeys(m.source.dataset for m in like))
        paper_text = (f"the paper's FeAT {prose.listing(prose.ratio(feat[d]) for d in shown)} ERM's time and Bonsai "
                      f"{prose.listing(prose.ratio(bonsai[d]) for d in shown if d in bonsai)} on "
                      f"{prose.listing(DATASET_LABELS.get(d, d) for d in shown)} (V100 GPUs)")
        why = prose.listing([p for p in (
            "cheaper than Bonsai" if all(c is not False for c in cheaper) and any(cheaper) else
            "not cheaper than Bonsai" if any(c is False for c in cheaper) and not any(cheaper) else
            "cheaper than Bonsai on some devices only" if any(cheaper) else "",
            "within the paper's FeAT ratio" if all(within) else "above the paper's FeAT ratio" if not any(within) else
            "within the paper's FeAT ratio on some devices only") if p]) + (", as in the paper" if verdict == "yes" else "")
        scale = ("whole training time by the paper's schedule: "
                 + "; ".join(f"{DATASET_LABELS.get(d, d)} on "
                             + prose.listing(dict.fromkeys(m.source.device for m in like if m.source.dataset == d))
                             + (" (fabricated images, the paper's size)"
                                if any(m.source.fabricated for m in like if m.source.dataset == d) else "")
                             for d in shown)
                 + (f"; {prose.listing(dict.fromkeys(DATASET_LABELS.get(m.source.dataset, m.source.dataset) for m in others))} "
                    "beside it" if others else "") + apart_text)
        return Agreement(verdict, _each_dataset(like), paper_text, why, scale, True, unequal_schedules(others))
    paper_text = (f"the paper's FeAT {prose.listing(prose.ratio(v) for v in feat.values())} ERM's time, Bonsai "
                  f"{prose.listing(prose.ratio(v) for v in bonsai.values())} ({names}; V100 GPUs)")
    if not ours:
        scale = ("not yet at the paper's sizes" + (f": only {apart}" if apart else "")) if everything else "not yet"
        return Agreement("not yet", "", paper_text, "", scale)
    limit = max(feat.values())
    verdict, cheaper, within = table14_verdicts(ours, lambda m: limit)
    bonsai_part = ("cheaper than Bonsai, as in the paper" if all(c is not False for c in cheaper) and any(cheaper)
                   else "not cheaper than Bonsai" if not any(cheaper) and any(c is False for c in cheaper)
                   else "cheaper than Bonsai on some devices only" if any(cheaper) else "")
    feat_part = ("within the paper's FeAT ratios" if all(within) else "above the paper's FeAT ratios" if not any(within)
                 else "within the paper's FeAT ratios on some devices only")
    if not all(within):
        steps = sorted({prose.ratio(m.steps_x_erm) for m in ours})
        feat_part += (f" (iFeAT's schedule has {prose.listing(steps)} ERM's steps, the round its termination check "
                      "trains and rolls back included)")
    why_text = (f"{bonsai_part}, but {feat_part}" if bonsai_part and verdict != "yes" and "as in the paper" in bonsai_part
                else prose.listing([p for p in (bonsai_part, feat_part) if p]))
    datasets = list(dict.fromkeys(m.source.dataset for m in ours))
    other_data = (f", on {'another dataset' if len(datasets) == 1 else 'other datasets'} than the paper's {names}")
    # the introduction's claims row: the devices and data only (chapter 07 gives the model and sizes;
    # the row's other cell names the paper's data and GPUs)
    scale = (f"whole training time by the paper's schedule, from step times measured at full size{other_data}: "
             + "; ".join(f"{DATASET_LABELS.get(d, d)} on "
                         f"{prose.listing(m.source.device for m in ours if m.source.dataset == d)}" for d in datasets)
             + apart_text)
    return Agreement(verdict, _each_dataset(ours), paper_text, why_text, scale)


def table14_claim(paper: pd.DataFrame, committed: Mapping) -> tuple[str, str]:
    """The introduction's claims row for Table 14: (scale, does ours agree), from :func:`agreement`."""
    a = agreement(paper, committed)
    if a.verdict == "not yet":
        return a.scale, "-"
    return a.scale, f"{a.verdict}: {a.ours}; {a.paper}: {a.why}"


def _span(values: list[float]) -> str:
    """Ratios as one ratio or a range, "3.24×" or "3.24-3.42×"."""
    lo, hi = prose.ratio(min(values)), prose.ratio(max(values))
    return lo if lo == hi else f"{lo.removesuffix('×')}-{hi}"


def table14_cells(paper: pd.DataFrame, committed: Mapping) -> tuple[str, str]:
    """The introduction's claims row for Table 14 in a few words (scale, does ours agree): the
    verdict of :func:`agreement`, then iFeAT's whole training time as a multiple of ERM's over the
    measurements it rests on (a range) beside the paper's FeAT ratios on the same datasets, and
    Bonsai's beside them; where it rests on a dataset of the paper's table, the other datasets'
    range after it, named as an unequal schedule. Chapter 07 gives the devices one by one, the step
    counts and what is kept apart (:func:`table14_claim`, :func:`what_we_see`)."""
    a = agreement(paper, committed)
    if a.verdict == "not yet":
        return a.scale, "-"
    feat, bonsai = paper_ratios(paper, "feat"), paper_ratios(paper, "bonsai")
    beside = [m for m in measured(committed) if m.source.beside_paper]
    ours = [m for m in beside if (m.source.dataset in feat) == a.like]
    shown = list(dict.fromkeys(m.source.dataset for m in ours))
    if a.like:
        scale = a.scale
        feat, bonsai = {d: feat[d] for d in shown}, {d: bonsai[d] for d in shown if d in bonsai}
        where = f" on {prose.listing(DATASET_LABELS.get(d, d) for d in shown)}"
    else:
        scale = ("whole training time by the paper's schedule, full-size step times: "
                 + "; ".join(f"{DATASET_LABELS.get(d, d)} on "
                             f"{prose.listing(dict.fromkeys(m.source.device for m in ours if m.source.dataset == d))}"
                             for d in shown) + " (not the paper's datasets)")
        where = ""
    text = (f"{a.verdict}: iFeAT {_span([m.time_x_erm['ifeat'] for m in ours])} ERM's time{where} (the paper's FeAT: "
            f"{_span(list(feat.values()))})")
    ours_bonsai = [m for m in ours if "bonsai" in m.time_x_erm]
    if ours_bonsai and bonsai:
        below = [m.time_x_erm["ifeat"] < m.time_x_erm["bonsai"] for m in ours_bonsai]
        where = "below" if all(below) else "not below" if not any(below) else "beside"
        text += (f", {where} Bonsai's {_span([m.time_x_erm['bonsai'] for m in ours_bonsai])} (the paper's: "
                 f"{_span(list(bonsai.values()))})")
    others = [m for m in beside if m.source.dataset not in shown] if a.like else []
    if others:
        names = prose.listing(dict.fromkeys(DATASET_LABELS.get(m.source.dataset, m.source.dataset) for m in others))
        text += f"; {names}'s unequal schedule: {_span([m.time_x_erm['ifeat'] for m in others])}"
    return scale, text


def what_we_see(paper: pd.DataFrame, committed: Mapping) -> str:
    """Chapter 07's "What we see" on the committed measurements: the same quantity and numbers
    as the claims row (:func:`table14_claim`), then per step and memory, then the measurements of
    other datasets with why their ratios are larger (:func:`unequal_schedules`), then what is kept
    apart."""
    a = agreement(paper, committed)
    if a.verdict == "not yet":
        return ("No committed measurement at the paper's sizes stands beside the paper's Table 14 yet. "
                + kept_apart(committed, numbers=False)).strip()
    feat = paper_ratios(paper, "feat")
    ours = [m for m in measured(committed) if m.source.beside_paper and (m.source.dataset in feat) == a.like]
    per_step = "; ".join(f"{prose.ratio(m.step_x_erm)}{' ERM' + chr(39) + 's step time' if k == 0 else ''} and "
                         f"{prose.ratio(m.memory_x_erm['ifeat'])}{' its peak memory' if k == 0 else ''} "
                         f"({m.source.data}, {m.source.device})" for k, m in enumerate(ours))
    how = ("on the paper's own dataset, by its schedule at step times measured with its model and sizes" if a.like
           else "by the paper's schedule at the committed full-size step times")
    text = (f"**Does ours agree with Table 14? {a.verdict.capitalize()}.** The paper's Table 14 reports whole training "
            f"times as multiples of ERM's. Ours, {how}: {a.ours}; {a.paper}: {a.why}. Per step, iFeAT's worst round "
            f"costs {per_step}.")
    if a.like and any(m.source.fabricated for m in ours):
        text += " " + _fabricated_note(ours, "The measured")
    if a.unequal:
        text += " " + a.unequal
    apart = kept_apart(committed, numbers=False)
    return text + (" " + apart if apart else "")


#: Colour and marker of each learner's line in :func:`cost_figure`.
COST_LINE_STYLES = {"erm": ("k", "o"), "bonsai": ("tab:orange", "s"), "feat": ("tab:blue", "^"),
                    "ifeat": ("tab:green", "v")}


def cost_figure(summary: pd.DataFrame, sources: dict[str, CostSource] | None = None):
    """Step time and peak memory per round as multiples of ERM's, one row of two panels per benchmark
    (ERM's step a dashed line at 1, the iFeAT targets dotted), one legend under the panels; each
    panel's title names its data (``sources``: "fabricated Camelyon17" where it is), else the benchmark."""
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
                            label=ALGORITHM_LABELS.get(learner, learner))
            limit = IFEAT_TIME_LIMIT if column == "time_x_erm" else IFEAT_MEMORY_LIMIT
            ax.axhline(limit, color="tab:green", lw=0.8, ls=":", label=f"iFeAT target ({limit}x)")
            ax.set_xlabel("round k")
            ax.set_ylabel(f"{title} / ERM")
            name = sources[bench].data if sources and bench in sources else BENCHMARK_LABELS.get(bench, bench)
            ax.set_title(f"{name}: {title}")  # the x axis says "per round"
            ax.grid(alpha=0.3)
    style.legend_below(fig, axes.flat, ncol=5)
    return fig


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
        sources = committed_sources(results["provenance"])
        frame = results["summary"].astype({"round": str})
        later = frame[(frame["learner"] == "feat") & (frame["round"] != "1") & (frame["round"] != "synthesis")]
        ratios = later.groupby("benchmark")["memory_x_erm"].max().to_dict()
        if ratios:
            each = prose.listing(f"{prose.ratio(v)} on {sources[b].data if b in sources else BENCHMARK_LABELS.get(b, b)}"
                                 for b, v in ratios.items())
            parts.append(f"{each} {_measured_on(results['provenance'], Path(folder).name)}")
    if parts:
        return ("the committed full-size measurements, FeAT's step from round 2 on needs " + "; ".join(parts)
                + " (ERM's peak memory = 1)")
    if failed:
        return ("the committed full-size measurements (which could not be read in this runtime: see the note above) "
                "the same should hold")
    return "the committed full-size measurements (none are committed yet) the same holds"


def _measured_on(provenance: dict, folder: str) -> str:
    """Where a committed cost folder was measured, in words: "on the 2-core CPU", "on the NVIDIA
    H200" (from its provenance's device, else the folder's name)."""
    device = str(provenance.get("device") or "")
    if device == "cpu":
        cores = provenance.get("cpu_count")
        return f"on the {cores}-core CPU" if cores else "on the CPU"
    if "(" in device and device.endswith(")"):
        return f"on the {device[device.index('(') + 1:-1]}"
    return f"on {device}" if device else f"in {folder}"
