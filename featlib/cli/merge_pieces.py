"""Bring Table 2 pieces made elsewhere (another machine, a Colab runtime, a GPU sitting) into one folder.

    python -m featlib.cli.merge_pieces FROM [FROM ...] --into results/cmnist-table2

Every piece of every FROM folder is checked first (its CSV against the checksum in its record,
its rows against the piece it names, its protocol against the one the target folder holds for
that cell: preset, precision and OOD path included); then the pieces the target lacks are copied.
A piece the target already has is skipped when identical and refused when it differs. Nothing is
copied when any check fails (one line, exit 2). See :mod:`featlib.experiments.table2_pieces`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import os_errors_in_one_line
from ..store.files import CorruptFileError
from ..experiments.table2_pieces import check_pieces_out, merge_pieces


@os_errors_in_one_line
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m featlib.cli.merge_pieces", description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, metavar="FROM")
    parser.add_argument("--into", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        # --into: absent, empty or a pieces folder (pieces/, README.md); never the working directory,
        # a checkout or a folder of other files
        check_pieces_out("--into", args.into)
        counts = merge_pieces(args.sources, args.into)
    except (ValueError, CorruptFileError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{counts['added']} piece{'s' if counts['added'] != 1 else ''} added to {args.into}; "
          f"{counts['identical']} already there")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
