"""``python -m featlib.cli.gap_studies <study>``: the diagnostic studies of
:mod:`featlib.experiments.gap_studies` at full data size, into a shared result folder.

    python -m featlib.cli.gap_studies erm-nf-erm --seeds 1 2 3 --out results/cmnist-gaps

writes ``<study>.csv`` and ``<study>-provenance.json`` to ``--out`` (a result folder shared by the
studies: replaced as a whole, the other studies' files carried over, ``provenance.json`` listing
every file); each (study, seed) piece is cached in ``--cache-dir``, so a killed run resumes. A
run holds ``--out`` from its checks to its commit (:func:`featlib.store.folders.folder_lock`): a
second run into the same folder is refused in one line (exit 2) rather than dropping one study.

Seeds accumulate: where ``--out`` already holds the study under today's key, its seeds are kept
and only the seeds it lacks are computed, so

    python -m featlib.cli.gap_studies frozen-pretraining --seeds 2 3 --out results/cmnist-pretraining

adds seeds 2 and 3 beside a committed seed 1 (the provenance lists each run: ``runs``). A study
made under another key (its protocol changed since) is never replaced: the run is refused in one
line before any work.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

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
        kept, earlier_runs = held_seeds(args.out, args.study)  # refuses another key's study
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    todo = [s for s in args.seeds if kept is None or s not in set(kept["seed"])]
    if not todo:
        print(f"{args.out} already holds {args.study} for seeds {', '.join(map(str, args.seeds))}: nothing to compute")
        return 0
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    try:
        frame = run_study(args.study, todo, args.cache_dir, device)
    except CacheWriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    record = provenance(command_line("featlib.cli.gap_studies", argv), start, device, commit=commit,
                        study=args.study, seeds=todo, key=study_key(args.study),
                        note="wall time includes pieces read from --cache-dir, if any")
    if kept is not None:  # the seeds already there stay, each run named in the provenance
        if list(frame.columns) != list(kept.columns):
            print(f"error: {args.out}: {args.study}'s new seeds have other columns than the seeds it holds "
                  f"({sorted(set(frame.columns) ^ set(kept.columns))}); give another --out (the new seeds are in "
                  f"--cache-dir {args.cache_dir})", file=sys.stderr)
            return 2
        frame = pd.concat([kept, frame], ignore_index=True).sort_values("seed", kind="stable", ignore_index=True)
        record = {**record, "seeds": sorted(set(frame["seed"].tolist())), "runs": earlier_runs + [dict(record)]}
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


def held_seeds(out: Path, study: str) -> tuple[pd.DataFrame | None, list[dict]]:
    """``study`` as ``out`` holds it: its rows and the runs that made them (``(None, [])`` when it
    holds none). Raises ``ValueError`` (one line) where the study there was made under another key
    than today's, so that a run never replaces finished seeds of another protocol."""
    from ..experiments.results import load_study

    found = load_study(out, study)
    if found is None:
        return None, []
    prov, today = found["provenance"], study_key(study)
    if prov.get("key") != today:
        raise ValueError(f"--out {out} holds {study} made under key {prov.get('key')!r}, not today's {today!r} "
                         "(its protocol changed since): give another --out; its seeds are kept as they are")
    runs = list(prov["runs"]) if "runs" in prov else [{k: v for k, v in prov.items() if k != "runs"}]
    return found["frame"], runs


if __name__ == "__main__":
    raise SystemExit(main())
