"""``python -m featlib.cli.gap_studies <study>``: the diagnostic studies of
:mod:`featlib.experiments.gap_studies` at full data size, into a shared result folder.

    python -m featlib.cli.gap_studies erm-nf-erm --seeds 1 2 3 --out results/cmnist-gaps

writes ``<study>.csv`` and ``<study>-provenance.json`` to ``--out`` (a result folder shared by the
studies: replaced as a whole, the other studies' files carried over, ``provenance.json`` listing
every file); each (study, seed) piece is cached in ``--cache-dir``, so a killed run resumes. A
run holds ``--out`` from its checks to its commit (:func:`featlib.store.folders.folder_lock`): a
second run into the same folder is refused in one line (exit 2) rather than dropping one study.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..device import get_device
from ..experiments.gap_studies import STUDIES, run_study, study_key
from ..experiments.results import STUDIES_KIND as KIND, _study_remedy as _remedy
from ..store.files import CacheWriteError
from .common import OneLineParser, holding, os_errors_in_one_line
from ..store.provenance import command_line, git_commit, provenance
from ..store.folders import ResultFolder, check_out, read_folder
from ..validation import check_seed, check_sequence, check_writable


@os_errors_in_one_line
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = OneLineParser(prog="python -m featlib.cli.gap_studies", description=__doc__.split("\n\n")[0])
    parser.add_argument("study", choices=STUDIES.names())
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path, default=Path("_cache/cmnist-gaps"))
    args = parser.parse_args(argv)
    try:  # every check before any work
        check_sequence("--seeds", args.seeds, unique=True)
        for seed in args.seeds:
            check_seed("--seeds", seed)
        device = get_device()
        check_out("--out", args.out, KIND, protect={"--cache-dir": args.cache_dir})
        check_writable("--cache-dir", args.cache_dir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return holding(args.out, "this study", lambda: _locked(args, argv, device))  # held from the read to the commit


def _locked(args, argv: list[str], device) -> int:
    """The study into ``--out``, whose lock this run holds: the previous folder read, the study
    run, the folder committed with the other studies' files."""
    try:
        read_folder(args.out, _remedy(args.out), kind=KIND)  # the other studies' files must be sound
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    try:
        frame = run_study(args.study, args.seeds, args.cache_dir, device)
    except CacheWriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    record = provenance(command_line("featlib.cli.gap_studies", argv), start, device, commit=commit,
                        study=args.study, seeds=args.seeds, key=study_key(args.study),
                        note="wall time includes pieces read from --cache-dir, if any")
    folder = ResultFolder(args.out, kind=KIND)
    previous = read_folder(args.out, _remedy(args.out), kind=KIND)
    studies = {args.study}
    if previous is not None:  # the other studies' files stay, as checked
        for name, data in previous[1].items():
            if name not in (f"{args.study}.csv", f"{args.study}-provenance.json"):
                folder.add_bytes(name, data)
        studies |= set(previous[0].get("studies", []))
    folder.add_csv(f"{args.study}.csv", frame)
    folder.add_bytes(f"{args.study}-provenance.json", (json.dumps(record, indent=2) + "\n").encode())
    folder.commit({"studies": sorted(studies), "last": record})
    print(json.dumps({k: record[k] for k in ("commit", "device", "wall_time_s")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
