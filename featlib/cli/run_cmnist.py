"""Run the full ColoredMNIST protocol and write its results as data with their provenance.

    python -m featlib.cli.run_cmnist --out results/cmnist [--datasets cmnist025 cmnist01]
        [--cache-dir _cache/cmnist] [--seeds 1 2 3] [--preset featlib|reference|rfc-erm-nf]
        [--precision fp32|tf32|bf16] [--ood-path fast|plain|...] [--size full|reduced|small]
        [--objective-file my_objective.py] [--objectives irmv1 my_objective ...]

writes ``runs-<dataset>.csv`` (one row per OOD-stage run), ``rounds-<dataset>.csv`` (per-round
histories of every learner that learns in rounds: Bonsai, iFeAT, FeAT), ``oracle-<dataset>.csv`` and ``provenance.json`` (the
command, git commit, device, wall time, the protocol and a manifest of the files). Chapter 04
shows these files beside the paper's numbers. Interrupted runs resume from ``--cache-dir``.

Every argument is checked, and ``--out`` is checked writable and free to use (absent, empty or a
previous ``run_cmnist`` folder: never the working directory, the cache or a folder of other
files; :func:`featlib.store.folders.check_out`), before any work; a bad one stops the command
with a one-line message and exit status 2. ``--out`` is replaced as a whole when the run
finishes (:mod:`featlib.store.folders`): a run killed at any point leaves the previous results
untouched, never a mix of two runs.

``--objective-file`` loads Python files that register objectives of one's own
(:func:`featlib.experiments.objective_files.load_objective_file`, checked before any work; book/own_objective.md);
without ``--objectives`` they run beside Table 2's eight. ``--size small`` runs the protocol at the
sizes of chapter 04's small profile, minutes on a CPU, and ``--size reduced`` at 2,000 training images
and width 64 with the paper's steps and configurations (:data:`featlib.experiments.cmnist_presets.SIZES`).
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd

from ..store.files import CacheWriteError
from .common import holding, os_errors_in_one_line
from ..data.mnist import SOURCES
from ..device import get_device
from ..store.provenance import command_line, git_commit, provenance
from ..store.folders import ResultFolder, check_out
from ..training import OOD_PATHS, PRECISIONS
from ..validation import check_sequence, check_writable
from ..experiments.cmnist_presets import DEFAULT_PRESET, PROTOCOL_PRESETS, SIZES
from ..experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, learner_choices, protocol_datasets
from ..experiments.results import CMNIST_RUNS_KIND as KIND
from ..feature_learning import FEATURE_LEARNERS


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m featlib.cli.run_cmnist",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--datasets", nargs="+", default=protocol_datasets(), choices=protocol_datasets(),
                        help="registered ColoredMNIST datasets of the channel kind; default: all")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)))
    parser.add_argument("--learners", "--inits", nargs="+", default=learner_choices(), choices=learner_choices(),
                        help="learners (Table 2's columns): erm-nf and the registered feature learners; default: all")
    parser.add_argument("--cache-dir", default="_cache/cmnist", type=Path)
    parser.add_argument("--mnist-source", default="auto", choices=SOURCES)
    parser.add_argument("--preset", default=DEFAULT_PRESET, choices=PROTOCOL_PRESETS.names(),
                        help="how the runs are trained (featlib.experiments.cmnist_presets); default: %(default)s")
    parser.add_argument("--precision", choices=PRECISIONS.names(),
                        help="of the OOD stage; default: the protocol's (fp32)")
    parser.add_argument("--ood-path", choices=OOD_PATHS.names(),
                        help="the OOD stage's implementation; default: the protocol's (fast)")
    parser.add_argument("--objectives", nargs="+", metavar="NAME",
                        help="OOD objectives (Table 2's rows), registered names; default: Table 2's eight, and those "
                             "of --objective-file")
    parser.add_argument("--objective-file", nargs="+", type=Path, default=[], metavar="FILE",
                        help="Python files that register objectives of your own (featlib.objectives."
                             "load_objective_file; book/own_objective.md), checked before any work")
    parser.add_argument("--objective-weights", nargs="+", default=[], metavar="OBJECTIVE=W,W,...",
                        help="penalty weights for one objective alone instead of the protocol's grid, e.g. "
                             "vrex=1,10,100; objectives not named keep the protocol's (Appendix F.1's, and "
                             "ColoredMNIST-01's CLOvE its decided 1,5,10,50,100: featlib.hparams.OBJECTIVE_GRIDS); "
                             "a piece whose weights differ from the protocol's gets a key of its own")
    parser.add_argument("--size", default="full", choices=list(SIZES),
                        help="full: the paper's sizes (a GPU); reduced: 2,000 training images and width 64, the paper's "
                             "steps and configurations (about 20 minutes a seed on a 2-core CPU); small: chapter 04's small profile, minutes on a CPU; "
                             "default: %(default)s")
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
    """Every check before any work: --objective-file and --objectives, the protocols (seeds...),
    --datasets, --out and --cache-dir."""
    check_sequence("--datasets", args.datasets, unique=True)
    check_sequence("--learners", args.learners, unique=True)
    chosen = {k: v for k, v in (("precision", args.precision), ("ood_path", args.ood_path)) if v is not None}
    chosen.update(_objectives(args))
    given = objective_weights(args.objective_weights) if args.objective_weights else {}
    # make_protocol's recipe, with this module's CMNISTProtocol; --size over the preset
    preset = PROTOCOL_PRESETS.get(args.preset).values | SIZES[args.size]
    protocols = [CMNISTProtocol(**(preset | dict(dataset=d, seeds=tuple(args.seeds), learners=tuple(args.learners), **chosen)))
                 for d in args.datasets]
    unrun = [name for name in given if name not in protocols[0].objectives]
    if unrun:
        raise ValueError(f"--objective-weights names {', '.join(unrun)}, which --objectives does not run "
                         f"({' '.join(protocols[0].objectives)}): add it to --objectives or leave its weights out")
    if given:  # over each dataset's own grids (hparams.OBJECTIVE_GRIDS), which the objectives not named keep
        protocols = [replace(p, objective_penalty_weights=dict(p.objective_penalty_weights) | given) for p in protocols]
    from ..experiments.objective_files import objective_file, path_notes

    for name in [n for n in protocols[0].objectives if objective_file(n) is not None]:
        for note in path_notes(name, protocols[0].ood_path):  # e.g. a compiled path training it eager
            print(f"note: {note}", file=sys.stderr)
    get_device()  # an unusable FEATLIB_DEVICE stops here
    if args.pieces:  # a folder of Table 2 pieces: added to, never replaced (featlib.experiments.table2_pieces)
        from ..experiments.table2_pieces import check_pieces_out
        check_pieces_out("--out", args.out, protect={"--cache-dir": args.cache_dir})
    else:
        check_out("--out", args.out, KIND, protect={"--cache-dir": args.cache_dir})
    check_writable("--cache-dir", args.cache_dir)
    if args.pieces:
        from ..experiments.table2_pieces import check_folder_protocols
        check_folder_protocols(protocols, args.out, args.preset)
    return protocols


def objective_weights(items: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """``--objective-weights clove=1,5,10``: objective -> its penalty weights (checked again, with the
    objective, by :class:`CMNISTProtocol`)."""
    out = {}
    for item in items:
        name, sep, weights = item.partition("=")
        try:
            if not sep or not name or name in out:
                raise ValueError
            out[name] = tuple(float(w) for w in weights.split(","))
        except ValueError:
            raise ValueError(f"--objective-weights: {item!r} is not OBJECTIVE=W,W,... with each objective once "
                             "(e.g. clove=1,5,10,50,100)") from None
    return out


def _objectives(args) -> dict:
    """``objectives=`` for the protocols: --objectives, else Table 2's and those of --objective-file
    (loaded and checked here); nothing when neither is given (the protocol's default)."""
    from ..objectives import OBJECTIVES
    from ..experiments.objective_files import load_objective_file
    from ..experiments.colored_mnist import TABLE2_OBJECTIVES

    loaded = []
    for file in args.objective_file:
        loaded += [n for n in load_objective_file(file, who="--objective-file") if n not in loaded]
    if args.objectives is None:
        extra = tuple(n for n in loaded if n not in TABLE2_OBJECTIVES)
        return {"objectives": TABLE2_OBJECTIVES + extra} if loaded else {}
    check_sequence("--objectives", args.objectives, unique=True)
    for name in args.objectives:
        if name not in OBJECTIVES:
            raise ValueError(f"--objectives: {name!r} is no registered objective (registered: "
                             f"{', '.join(OBJECTIVES.names())}); an objective of your own needs --objective-file FILE, "
                             "the file that registers it")
    return {"objectives": tuple(args.objectives)}


def main_pieces(args, protocols: list[CMNISTProtocol], argv: list[str]) -> int:
    """``--pieces`` / ``--budget-minutes``: compute the missing Table 2 pieces into ``--out``."""
    from ..experiments.table2_pieces import describe_remaining, run_pieces

    outcome = run_pieces(protocols, args.out, preset=args.preset, commit=git_commit(),
                         command=command_line("featlib.cli.run_cmnist", argv), cache_dir=args.cache_dir,
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
        learned = [i for i in FEATURE_LEARNERS.table_order()
                   if i in protocol.learners and FEATURE_LEARNERS.get(i).in_rounds]
        folder.add_csv(f"rounds-{protocol.dataset}.csv",
                       pd.concat([experiment.rounds(i) for i in learned], ignore_index=True) if learned else pd.DataFrame())
        folder.add_csv(f"oracle-{protocol.dataset}.csv", experiment.oracle())
        timings[protocol.dataset] = time.perf_counter() - t0
    return folder, timings


@os_errors_in_one_line
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        protocols = prepare(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.pieces:
        try:
            return main_pieces(args, protocols, argv)
        except (CacheWriteError, ValueError) as err:  # the pieces written so far stay; a rerun adds the rest
            print(f"error: {err}", file=sys.stderr)  # (ValueError: another run holds --out, or a protocol mix)
            return 2
    # --out held from here to the commit: a second run into it (of any command) is refused at once
    return holding(args.out, "this run", lambda: _run_and_commit(args, protocols, argv))


def _run_and_commit(args, protocols: list[CMNISTProtocol], argv: list[str]) -> int:
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    try:
        folder, timings = run(args, protocols)
    except CacheWriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    record = provenance(
        command_line("featlib.cli.run_cmnist", argv), start, commit=commit,
        wall_time_s_per_dataset=timings, datasets=args.datasets, preset=args.preset,
        protocols=[asdict(p) for p in protocols],
        note="wall time includes results loaded from --cache-dir, if any",
        **_objective_files_record(args),
    )
    folder.commit(record)  # a full disk here: one line (os_errors_in_one_line), the previous results whole
    print(json.dumps({k: record[k] for k in ("commit", "device", "wall_time_s")}, indent=2))
    return 0


def _objective_files_record(args) -> dict:
    """``objective_files`` for the provenance record: each --objective-file as given, its SHA-256 and objectives."""
    from ..experiments.objective_files import loaded_objective_files

    by_path = {f.path: f for f in loaded_objective_files()}
    files = [{**by_path[Path(given).expanduser().resolve()].record(), "path": str(given)} for given in args.objective_file]
    return {"objective_files": files} if files else {}


if __name__ == "__main__":
    raise SystemExit(main())
