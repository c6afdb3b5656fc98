"""Run the full ColoredMNIST protocol and write its results as data with their provenance.

    python -m featlib.experiments.run_cmnist --out results/cmnist [--datasets cmnist025 cmnist01]
        [--cache-dir _cache/cmnist] [--seeds 1 2 3]

writes ``runs-<dataset>.csv`` (one row per OOD-stage run), ``rounds-<dataset>.csv`` (per-round
histories of FeAT, iFeAT and Bonsai), ``oracle-<dataset>.csv`` and ``provenance.json`` (the
command, git commit, device, wall time and the protocol). Chapter 04 shows these files beside
the paper's numbers. Interrupted runs resume from ``--cache-dir``.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from ..atomic import atomic_write
from ..provenance import command_line, git_commit, provenance
from .colored_mnist import CMNISTProtocol, ColoredMNISTExperiment

INITS = ("erm-nf", "erm", "bonsai", "ifeat", "feat")


def load_results(directory: str | Path) -> dict | None:
    """The committed results (frames and provenance) in ``directory``, or None if absent."""
    directory = Path(directory)
    if not (directory / "provenance.json").exists():
        return None
    provenance = json.loads((directory / "provenance.json").read_text())
    def read(kind):
        paths = [directory / f"{kind}-{d}.csv" for d in provenance["datasets"]]
        present = [pd.read_csv(p) for p in paths if p.exists()]
        return pd.concat(present, ignore_index=True) if present else pd.DataFrame()

    frames = {kind: read(kind) for kind in ("runs", "rounds", "oracle")}
    return {"provenance": provenance, **frames}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--datasets", nargs="+", default=["cmnist025", "cmnist01"])
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)))
    parser.add_argument("--inits", nargs="+", default=list(INITS), choices=list(INITS),
                        help="feature initialisations (Table 2's columns); default: all five")
    parser.add_argument("--cache-dir", default="_cache/cmnist")
    parser.add_argument("--mnist-source", default="auto")
    args = parser.parse_args(argv)
    protocols = [CMNISTProtocol(dataset=d, seeds=tuple(args.seeds), inits=tuple(args.inits)) for d in args.datasets]
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    timings = {}
    for protocol in protocols:
        t0 = time.perf_counter()
        experiment = ColoredMNISTExperiment(protocol, cache_dir=args.cache_dir, mnist_source=args.mnist_source)
        experiment.run().to_csv(args.out / f"runs-{protocol.dataset}.csv", index=False)
        learned = [i for i in ("ifeat", "feat", "bonsai") if i in protocol.inits]
        if learned:
            pd.concat([experiment.rounds(i) for i in learned], ignore_index=True).to_csv(
                args.out / f"rounds-{protocol.dataset}.csv", index=False)
        experiment.oracle().to_csv(args.out / f"oracle-{protocol.dataset}.csv", index=False)
        timings[protocol.dataset] = time.perf_counter() - t0
    record = provenance(
        command_line("featlib.experiments.run_cmnist", argv), start, commit=commit,
        wall_time_s_per_dataset=timings, datasets=args.datasets, protocols=[asdict(p) for p in protocols],
        note="wall time includes results loaded from --cache-dir, if any",
    )
    atomic_write(args.out / "provenance.json", lambda tmp: tmp.write_text(json.dumps(record, indent=2)))
    print(json.dumps({k: record[k] for k in ("commit", "device", "wall_time_s")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
