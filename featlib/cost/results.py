"""Reading a cost benchmark's results folder back, checked (chapter 07's committed measurements).

``python -m featlib.cli.cost --out <folder>`` commits ``raw.csv``, ``summary.csv``, ``targets.csv``,
``schedule.csv`` and ``provenance.json`` with a manifest (:mod:`featlib.store.folders`).
:func:`load_cost_results` reads each file once, checks it against the manifest and parses the
checked bytes, so a changed summary is refused by name instead of printed as a measurement.
"""
from __future__ import annotations

from pathlib import Path

from ..store.folders import frame, read_folder
from ..store.legacy import COST_RECORD_ALIASES, RECORD_ALIASES, renamed

KIND = "featlib.cost"  # the format's identifier in provenance.json (the command is featlib.cli.cost)
FILES = ("raw", "summary", "targets", "schedule")


def load_cost_results(directory: str | Path) -> dict | None:
    """``{"provenance", "raw", "summary", "targets", "schedule"}`` of a cost results folder (the
    ``round`` column read as text, as the report writes it), or None when the folder is absent or
    empty; :class:`~featlib.store.files.CorruptFileError` naming the file when one is not as recorded."""
    directory = Path(directory)
    remedy = (f"rerun the command in its provenance.json (`python -m featlib.cli.cost --out {directory} ...`) "
              "or restore the folder from git")
    found = read_folder(directory, remedy, kind=KIND)
    if found is None:
        return None
    record, files = found
    record = renamed(record, COST_RECORD_ALIASES)
    return {"provenance": record,
            **{name: frame(files, directory, f"{name}.csv", remedy, dtype={"round": str}).rename(columns=RECORD_ALIASES)
               for name in FILES}}
