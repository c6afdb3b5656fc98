"""Run the WILDS protocol of Table 3 for one dataset and write its results with their provenance.

    python -m featlib.cli.run_wilds --dataset camelyon17 --root /data/wilds \\
        --out results/wilds/camelyon17 [--cache-dir _cache/wilds] [--download] [--seeds 0 1 2]
        [--learners erm bonsai ifeat] [--epoch-scale 1.0] [--backbone densenet121] [--fabricate]

writes ``ood.csv`` (every OOD-stage head, per epoch), ``dfr.csv``, ``rounds.csv``,
``table3.csv`` / ``dfr_table.csv`` (ours beside the paper's) and ``provenance.json`` (command,
commit, device, wall time, protocol). A killed run resumes from ``--cache-dir``: finished
pieces are read back, a feature-learning run continues from its last checkpoint.
``--fabricate`` first writes the tiny fabricated dataset of :mod:`featlib.data.wilds_fabricate`
into ``--root`` (for trying the pipeline without the real data), or repairs one that was damaged.

Every argument is checked, ``--out`` and ``--cache-dir`` are checked writable and the dataset is
loaded before any training; a problem stops the command with a one-line message and exit status
2. ``--out`` must be absent, empty or an earlier ``run_wilds`` folder
(:func:`featlib.store.folders.check_out`) and is replaced as a whole at the end
(:mod:`featlib.store.folders`); :func:`load_wilds_results` reads it back checked.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from ..store.files import CacheWriteError
from .common import OneLineParser, holding, os_errors_in_one_line
from ..data.wilds_data import WILDS_DATASETS
from ..device import get_device
from ..store.provenance import command_line, git_commit, provenance
from ..store.folders import ResultFolder, check_out
from ..validation import check_writable
from ..experiments.wilds_experiment import WildsExperiment, WildsProtocol
from ..feature_learning import FEATURE_LEARNERS
from ..hparams import PAPER_LEARNERS
from ..experiments.wilds_report import dfr_table_frame, table3_frame

from ..experiments.results import WILDS_RUNS_KIND as KIND


def _pretrained(value: str):
    return {"auto": "auto", "true": True, "false": False}[value.lower()]


def parse_args(argv):
    parser = OneLineParser(prog="python -m featlib.cli.run_wilds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, choices=WILDS_DATASETS.names())
    parser.add_argument("--root", required=True, type=Path, help="folder holding <dataset>_v<version>/")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--cache-dir", default="_cache/wilds", type=Path)
    parser.add_argument("--download", action="store_true")
    parser.add_argument("--fabricate", action="store_true", help="write the fabricated dataset into --root first")
    parser.add_argument("--learners", "--methods", nargs="+", default=list(PAPER_LEARNERS),
                        choices=FEATURE_LEARNERS.table_order(), help="registered feature learners; default: the paper's")
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument("--epoch-scale", "--scale", type=float, default=1.0, help="multiplies Table 12's steps")
    parser.add_argument("--backbone", default=None)
    parser.add_argument("--pretrained", default="auto", choices=["auto", "true", "false"])
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--ood-epochs", type=int, default=None)
    parser.add_argument("--resolution", type=int, default=None)
    parser.add_argument("--max-examples", type=int, default=None)
    parser.add_argument("--checkpoint-every", type=int, default=500)
    parser.add_argument("--no-dfr", action="store_true")
    parser.add_argument("--progress", action="store_true")
    return parser.parse_args(argv)


def prepare(args) -> WildsExperiment:
    """Every check before any training: the protocol, --out and --cache-dir writable, the
    dataset on disk (fabricated first with --fabricate) and readable."""
    protocol = WildsProtocol(
        dataset=args.dataset, learners=tuple(args.learners), seeds=None if args.seeds is None else tuple(args.seeds),
        backbone=args.backbone, pretrained=_pretrained(args.pretrained), epoch_scale=args.epoch_scale, lr=args.lr,
        batch_size=args.batch_size, ood_epochs=args.ood_epochs, resolution=args.resolution,
        max_examples=args.max_examples, dfr=not args.no_dfr, checkpoint_every=args.checkpoint_every,
    )
    get_device()  # an unusable FEATLIB_DEVICE stops here
    check_out("--out", args.out, KIND, protect={"--cache-dir": args.cache_dir, "--root": args.root})
    check_writable("--cache-dir", args.cache_dir)
    if args.fabricate:
        from ..data.wilds_fabricate import fabricate_wilds

        fabricate_wilds(args.dataset, args.root)
    experiment = WildsExperiment(protocol, args.root, args.cache_dir, download=args.download, progress=args.progress)
    experiment.data  # noqa: B018  (a missing or damaged dataset stops here, before any training)
    return experiment


@os_errors_in_one_line
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    try:
        experiment = prepare(args)
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # --out held from here to the commit: a second run into it (of any command) is refused at once
    return holding(args.out, "this run", lambda: _run_and_commit(args, argv, experiment, start, commit))


def _run_and_commit(args, argv: list[str], experiment, start: float, commit: str) -> int:
    protocol = experiment.protocol
    try:
        results = experiment.run()
    except CacheWriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = ResultFolder(args.out, kind=KIND)
    for name, frame in (("ood", results.ood), ("dfr", results.dfr), ("rounds", results.rounds),
                        ("table3", table3_frame(results, args.dataset)),
                        ("dfr_table", dfr_table_frame(results, args.dataset))):
        folder.add_csv(f"{name}.csv", frame)
    record = provenance(
        command_line("featlib.cli.run_wilds", argv), start, commit=commit, backbone=results.backbone,
        protocol=asdict(protocol), notes=results.notes + ["wall time includes pieces read back from --cache-dir, if any"],
    )
    folder.commit(record)
    print(json.dumps({k: record[k] for k in ("commit", "device", "backbone", "wall_time_s")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
