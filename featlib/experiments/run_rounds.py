"""Feature learning alone, at full data size: the per-round data behind Table 7 and the stop rounds.

    python -m featlib.experiments.run_rounds --out results/cmnist-rounds \\
        [--datasets cmnist025 cmnist01] [--inits ifeat feat] [--seeds 1 2 3 4 5] \\
        [--cache-dir _cache/cmnist] [--termination-rule paper]

For every dataset, feature learner and seed this trains the learner with the protocol's defaults
(Table 6's epochs, 50,000 training images, the paper's termination rule) and writes
``rounds-<dataset>.csv`` (one row per round: training, retention (both ways) and OOD accuracy,
whether the round was kept, set sizes) and ``provenance.json`` (command, commit, device, wall
time, the protocols). No OOD stage runs, so this fits a CPU: a full-batch step of the MLP on
50,000 images takes about 0.3 s on two cores, a seed's iFeAT rounds a few minutes. Learned
features are cached in ``--cache-dir`` under the same keys as :mod:`.run_cmnist` uses, so a
killed run resumes with the finished (learner, seed) pairs, and a later full protocol reuses
them.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ..data.mnist import SOURCES
from ..feature_learning.termination import DEFAULT_TERMINATION, TERMINATION_RULES
from ..cache import CacheWriteError, CorruptFileError
from ..cli import OneLineParser
from ..device import get_device
from ..provenance import command_line, git_commit, provenance
from ..result_folder import ResultFolder, check_out, frame, read_folder
from ..validation import check_sequence, check_writable
from .colored_mnist import LEARNED_INITS, SCHEDULES, CMNISTProtocol, ColoredMNISTExperiment

KIND = "featlib.experiments.run_rounds"


def parse_args(argv):
    parser = OneLineParser(prog="python -m featlib.experiments.run_rounds",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--datasets", nargs="+", default=list(SCHEDULES), choices=list(SCHEDULES))
    parser.add_argument("--inits", nargs="+", default=["ifeat", "feat"], choices=list(LEARNED_INITS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--max-rounds", type=int, default=CMNISTProtocol.max_rounds)
    parser.add_argument("--termination-rule", default=DEFAULT_TERMINATION, choices=TERMINATION_RULES.names())
    parser.add_argument("--cache-dir", default="_cache/cmnist", type=Path)
    parser.add_argument("--mnist-source", default="auto", choices=SOURCES)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:  # every check before any work; --out is replaced as a whole at the end (featlib.result_folder)
        for name in ("datasets", "inits", "seeds"):
            check_sequence(f"--{name}", getattr(args, name), unique=True)
        protocols = [CMNISTProtocol(dataset=d, seeds=tuple(args.seeds), inits=tuple(args.inits),
                                    max_rounds=args.max_rounds, termination_rule=args.termination_rule)
                     for d in args.datasets]
        get_device()  # an unusable FEATLIB_DEVICE stops here
        check_out("--out", args.out, KIND, protect={"--cache-dir": args.cache_dir})
        check_writable("--cache-dir", args.cache_dir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    timings = {}
    jobs = [(p, i, s) for i in args.inits for p in protocols for s in p.seeds]  # learner by learner
    experiments = {p.dataset: ColoredMNISTExperiment(p, cache_dir=args.cache_dir, mnist_source=args.mnist_source,
                                                     progress=False) for p in protocols}
    bar = tqdm(jobs, desc="feature learning")
    try:
        for protocol, init, seed in bar:
            bar.set_postfix_str(f"{protocol.dataset} {init} seed {seed}")
            t0 = time.perf_counter()
            experiments[protocol.dataset].features(init, seed)
            timings[f"{protocol.dataset}/{init}/seed{seed}"] = time.perf_counter() - t0
    except CacheWriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = ResultFolder(args.out, kind=KIND)
    for protocol in protocols:
        experiment = experiments[protocol.dataset]
        folder.add_csv(f"rounds-{protocol.dataset}.csv",
                       pd.concat([experiment.rounds(i) for i in protocol.inits], ignore_index=True))
    record = provenance(
        command_line("featlib.experiments.run_rounds", argv), start, commit=commit,
        wall_time_s_per_run=timings, datasets=args.datasets, inits=args.inits, seeds=args.seeds,
        protocols=[{k: v for k, v in asdict(p).items() if k in CMNISTProtocol.FEATURE_FIELDS + ("seeds", "inits")}
                   for p in protocols],
        note="feature learning only (no OOD stage); wall time includes features loaded from --cache-dir, if any",
    )
    folder.commit(record)
    print(json.dumps({k: record[k] for k in ("commit", "device", "wall_time_s")}, indent=2))
    return 0



def load_rounds(directory: str | Path) -> dict | None:
    """Committed per-round results (``rounds``: every dataset's rows; ``provenance``) in
    ``directory``, or None when it holds none. Each file is read once and checked against the
    manifest in ``provenance.json`` (required) and the seeds it records."""
    directory = Path(directory)
    remedy = (f"rerun `python -m featlib.experiments.run_rounds --out {directory}` (finished learners come from "
              "its --cache-dir) or restore the folder from git")
    found = read_folder(directory, remedy, kind=KIND)
    if found is None:
        return None
    record, files = found
    frames = []
    for dataset in record.get("datasets") or []:
        path = directory / f"rounds-{dataset}.csv"
        part = frame(files, directory, path.name, remedy)
        if "seed" not in part.columns or set(part["seed"]) != set(record.get("seeds", part["seed"])):
            held = sorted(set(part["seed"])) if "seed" in part.columns else []
            raise CorruptFileError(path, f"it holds seeds {held} where provenance.json records "
                                         f"{sorted(record.get('seeds', []))}", remedy)
        frames.append(part)
    if not frames:
        raise CorruptFileError(directory / "provenance.json", "it names no datasets", remedy)
    return {"provenance": record, "rounds": pd.concat(frames, ignore_index=True)}

if __name__ == "__main__":
    raise SystemExit(main())
