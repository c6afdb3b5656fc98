"""Reading committed results back, checked: one loader per kind of result folder.

Each command that writes a result folder (:mod:`.run_cmnist`, :mod:`.run_rounds`,
:mod:`.run_wilds`, :mod:`.gap_studies`) records its kind in ``provenance.json`` with a manifest
(size and SHA-256 of every file); the loaders here read each file once, check it against that
manifest (:func:`featlib.store.folders.read_folder`: a folder without one is refused) and
against what the provenance records (datasets, seeds, jobs), and parse the checked bytes. The
chapters and the views read results through these functions, never through a command's module.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..store.legacy import CMNIST_RECORD_ALIASES, ROUND_COLUMN_ALIASES, WILDS_RECORD_ALIASES, renamed
from ..store.files import CorruptFileError
from ..store.folders import frame, read_folder

#: The kinds of result folder, as recorded in their provenance: identifiers of a folder's format (the
#: strings name the module of the command that first wrote the format; the commands are now in
#: featlib.cli: run_cmnist, run_rounds, run_wilds, gap_studies; committed folders keep these strings).
CMNIST_RUNS_KIND = "featlib.experiments.run_cmnist"
ROUNDS_KIND = "featlib.experiments.run_rounds"
WILDS_RUNS_KIND = "featlib.experiments.run_wilds"
STUDIES_KIND = "featlib.experiments.gap_studies"
#: A folder of Table 2 per OOD path and precision (python -m featlib.cli.compare_paths).
PATHS_KIND = "featlib.experiments.path_comparison"
#: The CSV files of a run_cmnist folder, one per dataset each.
CMNIST_FILES = ("runs", "rounds", "oracle")
#: The CSV files of a run_wilds folder.
WILDS_FILES = ("ood", "dfr", "rounds", "table3", "dfr_table")

#: Old names in committed results are read under today's by the maps of featlib.store.legacy
#: (committed files are never rewritten).


def _with_todays_names(record: dict, aliases: dict) -> dict:
    if isinstance(record.get("protocols"), list):
        record = {**record, "protocols": [renamed(p, aliases) if isinstance(p, dict) else p for p in record["protocols"]]}
    return record


def _cmnist_remedy(directory: Path) -> str:
    return (f"rerun `python -m featlib.cli.run_cmnist --out {directory}` (finished pieces come from its "
            "--cache-dir) or restore the folder from git")


def load_results(directory: str | Path) -> dict | None:
    """The committed results (frames and provenance) in ``directory``, or None if absent or empty.

    Each file is read once and checked against the manifest in ``provenance.json``
    (:func:`featlib.store.folders.read_folder`: a folder without one is refused), and the rows
    against the protocols it records (datasets and seeds): a folder mixing two runs raises
    :class:`~featlib.store.files.CorruptFileError` naming the file, instead of being reported as one run."""
    directory = Path(directory)
    found = read_folder(directory, _cmnist_remedy(directory), kind=CMNIST_RUNS_KIND)
    if found is None:
        return None
    record, files = found
    record = _with_todays_names(record, CMNIST_RECORD_ALIASES)
    path = directory / "provenance.json"
    datasets = record.get("datasets")
    if not isinstance(datasets, list) or not datasets:
        raise CorruptFileError(path, "it names no datasets", _cmnist_remedy(directory))
    seeds = {p.get("dataset"): set(p.get("seeds", ())) for p in record.get("protocols", [])}
    frames = {}
    for kind in CMNIST_FILES:
        parts = []
        for d in datasets:
            file = directory / f"{kind}-{d}.csv"
            part = frame(files, directory, file.name, _cmnist_remedy(directory))
            if kind != "rounds" or len(part):  # rounds may be empty (no FeAT, iFeAT or Bonsai)
                held = set(part["seed"]) if "seed" in part.columns else set()
                if d in seeds and held != seeds[d]:
                    raise CorruptFileError(file, f"it holds seeds {sorted(held)} where provenance.json records "
                                                 f"{sorted(seeds[d])} (files of two different runs)", _cmnist_remedy(directory))
            parts.append(part)
        frames[kind] = pd.concat(parts, ignore_index=True).rename(columns=ROUND_COLUMN_ALIASES)
    return {"provenance": record, **frames}


def load_rounds(directory: str | Path) -> dict | None:
    """Committed per-round results (``rounds``: every dataset's rows; ``provenance``) in
    ``directory``, or None when it holds none. Each file is read once and checked against the
    manifest in ``provenance.json`` (required) and the seeds it records."""
    directory = Path(directory)
    remedy = (f"rerun `python -m featlib.cli.run_rounds --out {directory}` (finished learners come from "
              "its --cache-dir) or restore the folder from git")
    found = read_folder(directory, remedy, kind=ROUNDS_KIND)
    if found is None:
        return None
    record, files = found
    record = _with_todays_names(record, CMNIST_RECORD_ALIASES)
    frames = []
    for dataset in record.get("datasets") or []:
        path = directory / f"rounds-{dataset}.csv"
        part = frame(files, directory, path.name, remedy).rename(columns=ROUND_COLUMN_ALIASES)
        if "seed" not in part.columns:
            raise CorruptFileError(path, "it has no seed column", remedy)
        if "jobs" in record:
            held = {(i, int(s)) for i, s in zip(part["learner"], part["seed"])}
            listed = {(i, int(s)) for d, i, s in record["jobs"] if d == dataset}
            if held != listed:
                raise CorruptFileError(path, f"it holds (learner, seed) pairs {sorted(held)} where provenance.json "
                                             f"lists {sorted(listed)}", remedy)
        elif set(part["seed"]) != set(record.get("seeds", part["seed"])):
            raise CorruptFileError(path, f"it holds seeds {sorted(set(part['seed']))} where provenance.json records "
                                         f"{sorted(record.get('seeds', []))}", remedy)
        frames.append(part)
    if not frames:
        raise CorruptFileError(directory / "provenance.json", "it names no datasets", remedy)
    rounds = pd.concat(frames, ignore_index=True).rename(columns=ROUND_COLUMN_ALIASES)
    return {"provenance": record, "rounds": rounds}


def load_wilds_results(directory) -> dict | None:
    """The results a ``run_wilds`` committed to ``directory`` (``provenance`` and a frame per file
    of :data:`WILDS_FILES`), each file read once and checked against the manifest; None when the folder
    is absent or empty. :class:`~featlib.store.files.CorruptFileError` naming the file otherwise."""
    directory = Path(directory)
    remedy = (f"rerun `python -m featlib.cli.run_wilds --out {directory} ...` with the command in its "
              "provenance.json, or restore the folder from git")
    found = read_folder(directory, remedy, kind=WILDS_RUNS_KIND)
    if found is None:
        return None
    record, files = found
    record = _with_todays_names(record, WILDS_RECORD_ALIASES)
    return {"provenance": record, **{name: frame(files, directory, f"{name}.csv", remedy).rename(columns=ROUND_COLUMN_ALIASES)
                                     for name in WILDS_FILES}}


def _study_remedy(folder: Path) -> str:
    return (f"rerun `python -m featlib.cli.gap_studies <study> --out {folder}` (finished seeds come from its "
            "--cache-dir) or restore the folder from git")


def load_study(folder: str | Path, study: str) -> dict | None:
    """``{"frame", "provenance"}`` of a study committed to ``folder`` by :func:`main`, read from the
    folder's files checked against its manifest (:func:`featlib.store.folders.read_folder`); None
    when the folder is absent, empty, or holds no such study."""
    folder = Path(folder)
    found = read_folder(folder, _study_remedy(folder), kind=STUDIES_KIND)
    if found is None:
        return None
    _, files = found
    if f"{study}.csv" not in files:
        return None
    name = f"{study}-provenance.json"
    if name not in files:
        raise CorruptFileError(folder / name, "it is not in provenance.json's manifest", _study_remedy(folder))
    try:
        record = json.loads(files[name])
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptFileError(folder / name, f"it is not valid JSON ({err})", _study_remedy(folder)) from None
    if not isinstance(record, dict):
        raise CorruptFileError(folder / name, f"it holds a JSON {type(record).__name__}, not a provenance record",
                               _study_remedy(folder))
    return {"frame": frame(files, folder, f"{study}.csv", _study_remedy(folder)).rename(columns=ROUND_COLUMN_ALIASES),
            "provenance": record}
