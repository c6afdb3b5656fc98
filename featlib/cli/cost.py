"""``python -m featlib.cli.cost``: measure, print the side-by-side table and the targets, save data.

    python -m featlib.cli.cost --out results/cost/cpu                        # both cases, full size
    python -m featlib.cli.cost --benchmarks cmnist --n-train 5000 --steps 12 --repeats 2

Writes ``raw.csv`` (one row per case, repeat, learner and round), ``summary.csv``,
``targets.csv``, ``schedule.csv`` and ``provenance.json`` (command, commit, device, versions,
wall time, a manifest of the files) to ``--out``, replaced as a whole at the end
(:mod:`featlib.store.folders`: ``records/`` stays in place, linked into the new folder before the
swap); an interrupted run resumes from ``--out/records``. Bad arguments, an ``--out`` that is
unwritable or holds anything but an earlier cost run (:func:`featlib.store.folders.check_out`)
or missing real WILDS data (``--real-data`` without ``--download``) stop it with a one-line
message and exit status 2 before anything is measured. :func:`featlib.cost.results.load_cost_results`
reads a folder back, checked against its manifest.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from ..device import describe_device, get_device
from ..store.provenance import git_commit
from .common import OneLineParser, holding, os_errors_in_one_line
from ..store.folders import ResultFolder, check_out
from ..cost.benchmark import COST_CASES, CostSettings, run_cost_benchmark
from ..feature_learning import FEATURE_LEARNERS
from ..cost.report import check_targets, format_table, format_targets, schedule_estimate, summarise
from ..cost.results import KIND


def _pretrained(value: str):
    return {"true": True, "false": False, "auto": "auto"}.get(value.lower(), value)


def parse_args(argv):
    p = OneLineParser(prog="python -m featlib.cli.cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--benchmarks", nargs="+", default=["cmnist", "wilds"], choices=COST_CASES.names())
    p.add_argument("--learners", "--methods", nargs="+", default=FEATURE_LEARNERS.table_order(),
                   choices=FEATURE_LEARNERS.table_order(), help="registered feature learners; default: all")
    p.add_argument("--rounds", type=int, default=4, help="rounds of Bonsai, FeAT and iFeAT (default 4)")
    p.add_argument("--steps", type=int, default=20, help="steps per round, warm-up included (default 20)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory step")
    p.add_argument("--cmnist-dataset", default="cmnist025")
    p.add_argument("--n-train", type=int, default=50000)
    p.add_argument("--hidden-dim", type=int, default=256)
    p.add_argument("--wilds-dataset", default="camelyon17")
    p.add_argument("--wilds-root", default="_cache/wilds-fabricated")
    p.add_argument("--real-data", action="store_true", help="use the WILDS data in --wilds-root instead of fabricating it")
    p.add_argument("--download", action="store_true", help="with --real-data: download the WILDS data into --wilds-root "
                                                           "when it is not there")
    p.add_argument("--backbone", default="densenet121")
    p.add_argument("--pretrained", type=_pretrained, default=False)
    p.add_argument("--resolution", type=int, default=96)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--out", type=Path, default=None, help="folder for the CSVs and provenance.json")
    return p.parse_args(argv)


@os_errors_in_one_line
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        settings = CostSettings(tuple(args.learners), args.rounds, args.steps, args.warmup, args.repeats,
                                not args.no_memory)
        cases = []
        for name in args.benchmarks:
            if name == "cmnist":
                cases.append(COST_CASES.get("cmnist")(dataset=args.cmnist_dataset, n_train=args.n_train,
                                                      hidden_dim=args.hidden_dim))
            else:
                cases.append(COST_CASES.get("wilds")(dataset=args.wilds_dataset, root=args.wilds_root,
                                                     fabricate=not args.real_data, download=args.download,
                                                     backbone=args.backbone, pretrained=args.pretrained,
                                                     resolution=args.resolution, batch_size=args.batch_size))
        if args.download and not args.real_data:
            raise ValueError("--download needs --real-data (without it the WILDS data are fabricated)")
        get_device()  # an unusable FEATLIB_DEVICE stops here
        if args.out is not None:
            check_out("--out", args.out, KIND, keep=("records",),
                      protect={"--wilds-root": args.wilds_root if "wilds" in args.benchmarks else None})
    except (ValueError, TypeError, KeyError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.out is None:
        return _measure(args, argv, settings, cases)
    # --out (whose records/ the run writes as it goes) held from here to the commit
    return holding(args.out, "this benchmark", lambda: _measure(args, argv, settings, cases))


def _measure(args, argv, settings, cases) -> int:
    device = get_device()
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    raw = run_cost_benchmark(cases, settings, device=device, out=args.out)
    summary = summarise(raw)
    targets = check_targets(summary)
    estimate = schedule_estimate(summary, {c.name: {m: c.schedule(m) for m in settings.learners} for c in cases})
    wall = time.perf_counter() - start
    print(f"\ndevice: {describe_device(device)}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for case in cases:
        print(f"{case.name}: {case.describe()}")
    print(f"{settings.steps} steps per round ({settings.warmup} warm-up"
          f"{', 1 memory' if settings.memory else ''}), {settings.repeats} repeats, learners interleaved\n")
    print(format_table(summary))
    print("\nThe paper's schedule at our measured step times (no evaluation between rounds):")
    print(estimate.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("\nTargets:")
    print(format_targets(targets))
    if args.out is not None:
        from ..store.provenance import command_line, provenance

        folder = ResultFolder(args.out, keep=("records",), kind=KIND)  # replaced as a whole, records/ linked over
        for name, frame in (("raw", raw), ("summary", summary), ("targets", targets), ("schedule", estimate)):
            folder.add_csv(f"{name}.csv", frame)
        record = provenance(
            command_line("featlib.cli.cost", argv), start, device, commit=commit,
            cases={c.name: c.describe() for c in cases}, settings=vars(settings) | {"learners": settings.learners},
            note="wall time includes measurements reused from --out/records, if any",
        )
        record["wall_time_s"] = wall
        folder.commit(record)
        print(f"\nwrote {args.out}/{{raw,summary,targets,schedule}}.csv and provenance.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
