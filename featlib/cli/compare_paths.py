"""Judge the OOD stage's paths and precisions at table level: Table 2 per variant, cell by cell.

    python -m featlib.cli.compare_paths --out results/cmnist-paths
        [--variants fast-fp32 plain-fp32 fast-bf16] [--reference fast-fp32]
        [--datasets cmnist025 cmnist01] [--seeds 1 2 3] [--learners erm-nf erm bonsai ifeat]
        [--size reduced|small|full] [--budget-minutes 60] [--compare-only]

Runs the missing Table 2 pieces of every variant (``<path>-<precision>``) into
``--out/<variant>/pieces/`` (seed by seed, so that a sitting cut short by ``--budget-minutes``
leaves seeds every variant has), then writes ``--out/comparison.csv`` (each variant's Table 2
beside the reference's, cell by cell, with a paired test over seeds) and ``provenance.json``, and
prints per variant one sentence of what differs and one of the verdict at table level (whether
the variant may stand for the reference as the default). A later run adds the missing pieces and compares again.
``--compare-only`` compares the pieces there without running any. Everything is checked before
any work (one line, exit status 2). See :mod:`featlib.experiments.path_comparison`.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .common import os_errors_in_one_line
from ..data.mnist import SOURCES
from ..device import get_device
from ..experiments.cmnist_presets import DEFAULT_PRESET, PROTOCOL_PRESETS, SIZES
from ..experiments.colored_mnist import TABLE2_LEARNERS, TABLE2_OBJECTIVES, learner_choices, protocol_datasets
from ..experiments.path_comparison import (COMPARISON, DEFAULT_SIZE, DEFAULT_VARIANTS, REFERENCE, Variant, compare,
                                           load_variants, pieces_record, run_variants, summarise,
                                           variant_protocols, verdicts)
from ..experiments.results import PATHS_KIND as KIND
from ..store.files import CacheWriteError, CorruptFileError
from ..store.csv_io import frame_to_csv
from ..store.provenance import command_line, git_commit, provenance
from ..store.folders import check_out, write_beside
from ..validation import check_seed, check_sequence, check_writable


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m featlib.cli.compare_paths", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), metavar="PATH-PRECISION",
                        help="variants to run and compare, each <path>-<precision>; default: %(default)s")
    parser.add_argument("--reference", default=REFERENCE, help="the variant the others are compared with; "
                                                               "default: %(default)s (the protocol's)")
    parser.add_argument("--datasets", nargs="+", default=protocol_datasets(), choices=protocol_datasets())
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--learners", nargs="+", default=list(TABLE2_LEARNERS), choices=learner_choices(),
                        help="Table 2's columns; default: %(default)s")
    parser.add_argument("--objectives", nargs="+", metavar="NAME", help="default: Table 2's eight")
    parser.add_argument("--size", default=DEFAULT_SIZE, choices=list(SIZES),
                        help="featlib.experiments.cmnist_presets.SIZES; default: %(default)s (2,000 training images, width 64)")
    parser.add_argument("--preset", default=DEFAULT_PRESET, choices=PROTOCOL_PRESETS.names())
    parser.add_argument("--cache-dir", default="_cache/cmnist", type=Path)
    parser.add_argument("--mnist-source", default="auto", choices=SOURCES)
    parser.add_argument("--budget-minutes", type=float,
                        help="stop after the piece in hand once this many minutes have passed, then compare")
    parser.add_argument("--compare-only", action="store_true", help="compare the pieces there; run none")
    args = parser.parse_args(argv)
    if args.budget_minutes is not None and not args.budget_minutes > 0:
        parser.error(f"--budget-minutes must be a number of minutes > 0; got {args.budget_minutes}")
    return args


def prepare(args) -> list[Variant]:
    """Every check before any work: the variants and the reference, the protocols they make,
    --out (and each variant's pieces folder in it) and --cache-dir."""
    from ..experiments.table2_pieces import check_folder_protocols, check_pieces_out
    from ..objectives import OBJECTIVES

    check_sequence("--variants", args.variants, unique=True)
    check_sequence("--datasets", args.datasets, unique=True)
    check_sequence("--learners", args.learners, unique=True)
    for seed in check_sequence("--seeds", args.seeds, unique=True):
        check_seed("--seeds", seed)
    variants = [Variant.parse(v) for v in args.variants]
    if len(variants) < 2:
        raise ValueError(f"--variants: {' '.join(args.variants)} is one variant; name the reference and at least one "
                         "to compare with it (for example --variants fast-fp32 fast-bf16)")
    if args.reference not in args.variants:
        raise ValueError(f"--reference: {args.reference!r} is not among --variants ({' '.join(args.variants)}); "
                         "name one of them, or add it to --variants")
    for name in args.objectives or ():
        if name not in OBJECTIVES:
            raise ValueError(f"--objectives: {name!r} is no registered objective (registered: "
                             f"{', '.join(OBJECTIVES.names())})")
    get_device()
    for variant in variants:  # the protocols' own checks (seeds, precision on this device...)
        variant_protocols(variant, datasets=args.datasets, seeds=args.seeds, learners=args.learners,
                          objectives=args.objectives, preset=args.preset, size=args.size)
    # a folder of variants' pieces (this run's or an earlier one's) and a README; comparison.csv only
    # beside the provenance.json of an earlier comparison (then the whole folder is this command's)
    earlier = [e.name for e in args.out.iterdir() if e.is_dir() and _is_variant(e.name)] if args.out.is_dir() else []
    check_out("--out", args.out, KIND, protect={"--cache-dir": args.cache_dir},
              keep=(*args.variants, *earlier, "README.md"))
    check_writable("--cache-dir", args.cache_dir)
    for variant in variants:
        folder = args.out / variant.name
        check_pieces_out(f"--out's {variant.name}", folder, protect={"--cache-dir": args.cache_dir})
        check_folder_protocols(variant_protocols(variant, datasets=args.datasets, seeds=args.seeds,
                                                 learners=args.learners, objectives=args.objectives,
                                                 preset=args.preset, size=args.size), folder, args.preset)
    return variants


def _is_variant(name: str) -> bool:
    try:
        Variant.parse(name)
    except ValueError:
        return False
    return True


def write_comparison(args, argv, started: float, commit: str, loaded: dict, comparison, lines: list[str]) -> None:
    """``comparison.csv``, then ``provenance.json`` (with the CSV's SHA-256 and, per variant, what
    its pieces were made on)."""
    pieces = {name: pieces_record(data) for name, data in loaded.items()}
    record = provenance(command_line("featlib.cli.compare_paths", argv), started, commit=commit, kind=KIND,
                        reference=args.reference, variants=args.variants, size=args.size, size_fields=SIZES[args.size],
                        preset=args.preset, datasets=args.datasets, seeds=args.seeds, learners=args.learners,
                        objectives=args.objectives or list(TABLE2_OBJECTIVES), pieces=pieces, summary=lines,
                        note="wall_time_s is this command's; each variant's wall_time_s sums its pieces' own")
    write_beside(args.out, {COMPARISON: frame_to_csv(comparison).encode()}, record)  # the pieces' folders stay


@os_errors_in_one_line
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    try:
        variants = prepare(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    started, commit = time.perf_counter(), git_commit()
    try:
        if not args.compare_only:
            outcome = run_variants(args.out, variants, datasets=args.datasets, seeds=args.seeds, preset=args.preset,
                                   commit=commit, command=command_line("featlib.cli.compare_paths", argv),
                                   learners=args.learners, objectives=args.objectives,
                                   size=args.size, cache_dir=args.cache_dir, mnist_source=args.mnist_source,
                                   budget_s=None if args.budget_minutes is None else 60 * args.budget_minutes)
            left = {name: len(r) for name, r in outcome["remaining"].items() if r}
            print(f"{outcome['done']} piece{'s' if outcome['done'] != 1 else ''} written in {outcome['wall_time_s']:.0f} s; "
                  + ("every piece is done" if not left else
                     "pieces remain: " + ", ".join(f"{name} {n}" for name, n in left.items())))
        loaded = load_variants(args.out, args.variants)
        if args.reference not in loaded:
            print(f"no comparison yet: {args.reference} has no pieces in {args.out}")
            return 0
        comparison = compare(loaded, args.reference)
        lines = summarise(comparison, args.reference) + [v.sentence for v in verdicts(comparison, args.reference)]
        write_comparison(args, argv, started, commit, loaded, comparison, lines)
    except (CacheWriteError, CorruptFileError, ValueError, OSError) as err:  # finished pieces stay; a rerun adds the rest
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(lines) if lines else "no cell has pieces of both the reference and another variant yet")
    print(f"wrote {args.out / COMPARISON}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
