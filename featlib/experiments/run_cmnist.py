"""Run the full ColoredMNIST protocol and write its results as data with their provenance.

    python -m featlib.experiments.run_cmnist --out results/cmnist [--datasets cmnist025 cmnist01]
        [--cache-dir _cache/cmnist] [--seeds 1 2 3] [--preset featlib|reference|rfc-erm-nf]
        [--precision fp32|tf32|bf16] [--ood-path fast|plain|...]

writes ``runs-<dataset>.csv`` (one row per OOD-stage run), ``rounds-<dataset>.csv`` (per-round
histories of FeAT, iFeAT and Bonsai), ``oracle-<dataset>.csv`` and ``provenance.json`` (the
command, git commit, device, wall time, the protocol and a manifest of the files). Chapter 04
shows these files beside the paper's numbers. Interrupted runs resume from ``--cache-dir``.

Every argument is checked, and ``--out`` is checked writable and free to use (absent, empty or a
previous ``run_cmnist`` folder: never the working directory, the cache or a folder of other
files; :func:`featlib.io.result_folder.check_out`), before any work; a bad one stops the command
with a one-line message and exit status 2. ``--out`` is replaced as a whole when the run
finishes (:mod:`featlib.io.result_folder`): a run killed at any point leaves the previous results
untouched, never a mix of two runs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from ..io.cache import CacheWriteError, CorruptFileError
from ..data.mnist import SOURCES
from ..device import get_device
from ..io.provenance import command_line, git_commit, provenance
from ..io.result_folder import ResultFolder, check_out, frame, read_folder
from ..training import OOD_PATHS, PRECISIONS
from ..validation import check_sequence, check_writable
from .cmnist_presets import DEFAULT_PRESET, PROTOCOL_PRESETS
from .colored_mnist import SCHEDULES, CMNISTProtocol, ColoredMNISTExperiment

INITS = ("erm-nf", "erm", "bonsai", "ifeat", "feat")
KINDS = ("runs", "rounds", "oracle")
KIND = "featlib.experiments.run_cmnist"


def _remedy(directory: Path) -> str:
    return (f"rerun `python -m featlib.experiments.run_cmnist --out {directory}` (finished pieces come from its "
            "--cache-dir) or restore the folder from git")


def load_results(directory: str | Path) -> dict | None:
    """The committed results (frames and provenance) in ``directory``, or None if absent or empty.

    Each file is read once and checked against the manifest in ``provenance.json``
    (:func:`featlib.io.result_folder.read_folder`: a folder without one is refused), and the rows
    against the protocols it records (datasets and seeds): a folder mixing two runs raises
    :class:`~featlib.io.cache.CorruptFileError` naming the file, instead of being reported as one run."""
    directory = Path(directory)
    found = read_folder(directory, _remedy(directory), kind=KIND)
    if found is None:
        return None
    record, files = found
    path = directory / "provenance.json"
    datasets = record.get("datasets")
    if not isinstance(datasets, list) or not datasets:
        raise CorruptFileError(path, "it names no datasets", _remedy(directory))
    seeds = {p.get("dataset"): set(p.get("seeds", ())) for p in record.get("protocols", [])}
    frames = {}
    for kind in KINDS:
        parts = []
        for d in datasets:
            file = directory / f"{kind}-{d}.csv"
            part = frame(files, directory, file.name, _remedy(directory))
            if kind != "rounds" or len(part):  # rounds may be empty (no FeAT, iFeAT or Bonsai)
                held = set(part["seed"]) if "seed" in part.columns else set()
                if d in seeds and held != seeds[d]:
                    raise CorruptFileError(file, f"it holds seeds {sorted(held)} where provenance.json records "
                                                 f"{sorted(seeds[d])} (files of two different runs)", _remedy(directory))
            parts.append(part)
        frames[kind] = pd.concat(parts, ignore_index=True)
    return {"provenance": record, **frames}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m featlib.experiments.run_cmnist",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--datasets", nargs="+", default=list(SCHEDULES), choices=list(SCHEDULES))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)))
    parser.add_argument("--inits", nargs="+", default=list(INITS), choices=list(INITS),
                        help="feature initialisations (Table 2's columns); default: all five")
    parser.add_argument("--cache-dir", default="_cache/cmnist", type=Path)
    parser.add_argument("--mnist-source", default="auto", choices=SOURCES)
    parser.add_argument("--preset", default=DEFAULT_PRESET, choices=PROTOCOL_PRESETS.names(),
                        help="how the runs are trained (featlib.experiments.cmnist_presets); default: %(default)s")
    parser.add_argument("--precision", choices=PRECISIONS.names(),
                        help="of the OOD stage; default: the protocol's (fp32)")
    parser.add_argument("--ood-path", choices=OOD_PATHS.names(),
                        help="the OOD stage's implementation; default: the protocol's (fast)")
    parser.add_argument("--pieces", action="store_true",
                        help="write --out as Table 2 pieces that accumulate (featlib.experiments.table2_pieces): "
                             "each finished piece is kept, a later run adds the missing ones")
    parser.add_argument("--budget-minutes", type=float,
                        help="stop after the piece in hand once this many minutes have passed, print what remains "
                             "and exit 0 (implies --pieces)")
    args = parser.parse_args(argv)
    if args.budget_minutes is not None and not args.budget_minutes > 0:
        parser.error(f"--budget-minutes must be a number of minutes > 0; got {args.budget_minutes}")
    args.pieces = args.pieces or args.budget_minutes is not None
    return args


def prepare(args) -> list[CMNISTProtocol]:
    """Every check before any work: the protocols (seeds...), --datasets, --out and --cache-dir."""
    check_sequence("--datasets", args.datasets, unique=True)
    check_sequence("--inits", args.inits, unique=True)
    chosen = {k: v for k, v in (("precision", args.precision), ("ood_path", args.ood_path)) if v is not None}
    preset = PROTOCOL_PRESETS.get(args.preset).values  # make_protocol's recipe, with this module's CMNISTProtocol
    protocols = [CMNISTProtocol(**(preset | dict(dataset=d, seeds=tuple(args.seeds), inits=tuple(args.inits), **chosen)))
                 for d in args.datasets]
    get_device()  # an unusable FEATLIB_DEVICE stops here
    if args.pieces:  # a folder of Table 2 pieces: added to, never replaced (featlib.experiments.table2_pieces)
        from .table2_pieces import check_pieces_out
        check_pieces_out("--out", args.out, protect={"--cache-dir": args.cache_dir})
    else:
        check_out("--out", args.out, KIND, protect={"--cache-dir": args.cache_dir})
    check_writable("--cache-dir", args.cache_dir)
    if args.pieces:
        from .table2_pieces import check_folder_protocols
        check_folder_protocols(protocols, args.out, args.preset)
    return protocols


def main_pieces(args, protocols: list[CMNISTProtocol]) -> int:
    """``--pieces`` / ``--budget-minutes``: compute the missing Table 2 pieces into ``--out``."""
    from .table2_pieces import describe_remaining, run_pieces

    outcome = run_pieces(protocols, args.out, preset=args.preset, commit=git_commit(), cache_dir=args.cache_dir,
                         budget_s=None if args.budget_minutes is None else 60 * args.budget_minutes,
                         mnist_source=args.mnist_source)
    print(f"{outcome['done']} piece{'s' if outcome['done'] != 1 else ''} written to {args.out} in "
          f"{outcome['wall_time_s']:.0f} s; {describe_remaining(outcome['remaining'])}")
    return 0


def run(args, protocols: list[CMNISTProtocol]) -> tuple[ResultFolder, dict]:
    """Every protocol's runs, rounds and oracle, collected in a :class:`ResultFolder` for
    ``--out``; with the wall time of each dataset."""
    timings = {}
    folder = ResultFolder(args.out, kind=KIND)
    for protocol in protocols:
        t0 = time.perf_counter()
        experiment = ColoredMNISTExperiment(protocol, cache_dir=args.cache_dir, mnist_source=args.mnist_source)
        folder.add_csv(f"runs-{protocol.dataset}.csv", experiment.run())
        learned = [i for i in ("ifeat", "feat", "bonsai") if i in protocol.inits]
        folder.add_csv(f"rounds-{protocol.dataset}.csv",
                       pd.concat([experiment.rounds(i) for i in learned], ignore_index=True) if learned else pd.DataFrame())
        folder.add_csv(f"oracle-{protocol.dataset}.csv", experiment.oracle())
        timings[protocol.dataset] = time.perf_counter() - t0
    return folder, timings


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        protocols = prepare(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.pieces:
        return main_pieces(args, protocols)
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    try:
        folder, timings = run(args, protocols)
    except CacheWriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    record = provenance(
        command_line("featlib.experiments.run_cmnist", argv), start, commit=commit,
        wall_time_s_per_dataset=timings, datasets=args.datasets, preset=args.preset,
        protocols=[asdict(p) for p in protocols],
        note="wall time includes results loaded from --cache-dir, if any",
    )
    folder.commit(record)
    print(json.dumps({k: record[k] for k in ("commit", "device", "wall_time_s")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
