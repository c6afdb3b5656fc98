"""Pieces: Table 2's unit of work, written once, in one format, wherever it is kept.

A *piece* is the OOD-stage runs of one (dataset, learner, objective, seed), every configuration
of the protocol (or the oracle's run of one seed), as a CSV with a JSON record beside it:

    <root>/pieces/<dataset>/<learner>/<objective>/seed<k>.csv     the runs
    <root>/pieces/<dataset>/<learner>/<objective>/seed<k>.json    its record

The record names the piece, the key of the protocol that made it and that protocol's fields,
what made it (device, precision, OOD path, torch and featlib versions, commit, command, wall
seconds) and the CSV's rows, size and SHA-256, which every read checks. The CSV is written first
and the record last, each atomically, so a record always names a whole CSV.

One format, two kinds of root (:class:`PieceStore`):

* the **cache** (``keyed=True``, an experiment's ``cache_dir``): pieces of many protocols side by
  side, the protocol's key in each file name (``seed<k>-<key>``);
* a **results folder** (``keyed=False``, ``results/cmnist-table2``): one protocol per cell (the
  experiments check it), so the file name is the piece's alone.

Committing a piece is copying its two files from the cache to a results folder
(:meth:`PieceStore.copy`), bytes unchanged: the record keeps what made the piece. Writers of a
folder hold its lock for their whole life (:meth:`PieceStore.lock`): the check of what the
folder holds and every write happen under it, so two runs never both write one folder; each write
first checks that the lock file is still the one held (:meth:`PieceStore.check_held`).
"""
from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from .atomic import atomic_write_text
from .csv_io import frame_to_csv, read_csv
from .files import CorruptFileError, FolderBusy, PieceLock, check_held, hold_folder, read_regular, accuracy_problem  # noqa: F401  (FolderBusy: its home was here)
from .keys import digest
from .legacy import RECORD_ALIASES
from .paths import inside

#: The learner name of a seed's oracle piece (objective "erm").
ORACLE = "oracle"
#: The lock file that folders of pieces held inside them before their lock moved beside the folder
#: (:meth:`PieceStore.lock`): a folder holding one is still a folder of pieces.
LOCK_NAME = ".pieces.lock"
#: The file name (without suffix) of a piece in a results folder, as :meth:`Piece.name` writes it.
SEED_NAME = re.compile(r"seed([1-9][0-9]*)")
#: The columns every piece's rows name it by (an oracle piece: dataset and seed).
PIECE_COLUMNS = ("dataset", "learner", "objective", "seed")


class MixedProtocols(ValueError):
    """A folder's cell holds pieces of two protocols (one line naming the cell and the seeds)."""


@dataclass(frozen=True)
class Piece:
    """One unit of Table 2: the runs of (dataset, learner, objective, seed); ``learner`` is
    :data:`ORACLE` (objective ``"erm"``) for the oracle row of a seed."""

    dataset: str
    learner: str
    objective: str
    seed: int

    def name(self) -> str:
        return f"pieces/{self.dataset}/{self.learner}/{self.objective}/seed{self.seed}"

    # The paths of a piece in a results folder (an unkeyed store), as earlier code calls them.
    def stem(self, folder: Path) -> Path:
        return PieceStore(folder).stem(self)

    def csv(self, folder: Path) -> Path:
        return PieceStore(folder).csv(self)

    def record(self, folder: Path) -> Path:
        return PieceStore(folder).record(self)


class PieceStore:
    """The pieces under ``root`` (see the module docstring); ``keyed``: file names carry the key."""

    def __init__(self, root: str | Path, keyed: bool = False):
        self.root, self.keyed = Path(root), keyed

    def __repr__(self) -> str:
        return f"PieceStore({str(self.root)!r}, keyed={self.keyed})"

    # -- where --------------------------------------------------------------------------------
    def stem(self, piece: Piece, key: str | None = None) -> Path:
        """The piece's path without suffix; refused (ValueError) where its names would lead out of
        the root (a name with ``/`` or ``..``, a link out of the folder)."""
        if self.keyed and not key:
            raise ValueError(f"{self} keeps pieces of many protocols: name the protocol's key")
        return inside(self.root, piece.name() + (f"-{key}" if self.keyed else ""), what="a piece")

    def csv(self, piece: Piece, key: str | None = None) -> Path:
        return self.stem(piece, key).with_suffix(".csv")

    def record(self, piece: Piece, key: str | None = None) -> Path:
        return self.stem(piece, key).with_suffix(".json")

    # -- writing and reading --------------------------------------------------------------------
    def write(self, piece: Piece, frame: pd.DataFrame, record: dict, key: str | None = None) -> dict:
        """The piece's CSV, then its record (with the CSV's rows, size and checksum); returns the record."""
        text = frame_to_csv(frame)
        data = text.encode("utf-8")
        atomic_write_text(self.csv(piece, key), text)
        full = {**asdict(piece), **record, "rows": len(frame), "bytes": len(data), "sha256": digest(data)}
        atomic_write_text(self.record(piece, key), json.dumps(full, indent=1, sort_keys=True, default=list) + "\n")
        return full

    def read(self, piece: Piece, key: str | None = None, check: Callable[[Piece, pd.DataFrame, dict], str | None]
             | None = None) -> tuple[pd.DataFrame, dict] | None:
        """The piece's runs and record, or None when its record is absent (not yet computed). The
        CSV's bytes are read once, checked against the record and parsed; the rows must be the
        piece's, in a keyed store the record's key the one asked for, and ``check(piece, frame,
        record)`` (what is wrong, or None) must pass: the configurations of the rows, the caller's
        protocol's (:func:`featlib.experiments.colored_mnist.runs_problem`)."""
        record_path, csv_path = self.record(piece, key), self.csv(piece, key)
        if not record_path.exists():
            return None
        remedy = "delete the piece's two files and run again to recompute it, or restore them from git"
        try:
            record = json.loads(read_regular(record_path).decode("utf-8"))
        except CorruptFileError as err:
            raise CorruptFileError(record_path, err.reason, remedy) from None
        except (OSError, ValueError) as err:
            raise CorruptFileError(record_path, f"it is not a piece record ({err})", remedy) from None
        if isinstance(record, dict):  # a piece made before featlib named the learner "learner" ("init")
            record = {RECORD_ALIASES.get(k, k): v for k, v in record.items()}
        if not isinstance(record, dict) or any(record.get(k) != v for k, v in asdict(piece).items()):
            raise CorruptFileError(record_path, f"it is not the record of {piece}", remedy)
        if self.keyed and record.get("protocol_key") != key:
            raise CorruptFileError(record_path, f"it records the protocol {record.get('protocol_key')!r}, not {key!r} "
                                                "(copied from another protocol's piece)", remedy)
        try:
            data = read_regular(csv_path)
        except CorruptFileError as err:
            raise CorruptFileError(csv_path, err.reason, remedy) from None
        except OSError:
            raise CorruptFileError(csv_path, "it is missing although its record is there", remedy) from None
        if len(data) != record.get("bytes") or digest(data) != record.get("sha256"):
            raise CorruptFileError(csv_path, "its bytes do not match the checksum in its record", remedy)
        try:
            frame = read_csv(io.StringIO(data.decode("utf-8"))).rename(columns=RECORD_ALIASES)
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
            raise CorruptFileError(csv_path, f"it is not a readable CSV file ({type(err).__name__}: {err})",
                                   remedy) from None
        if len(frame) != record.get("rows"):
            raise CorruptFileError(csv_path, f"it holds {len(frame)} rows where its record says {record.get('rows')}",
                                   remedy)
        missing = [c for c in (PIECE_COLUMNS if piece.learner != ORACLE else ("dataset", "seed"))
                   if c not in frame.columns]
        if missing:
            raise CorruptFileError(csv_path, f"it lacks the column{'s' if len(missing) > 1 else ''} "
                                             f"{', '.join(missing)} that every piece's rows hold", remedy)
        if piece.learner != ORACLE:
            keys = set(zip(frame["dataset"], frame["learner"], frame["objective"], frame["seed"]))
            if keys != {(piece.dataset, piece.learner, piece.objective, piece.seed)}:
                raise CorruptFileError(csv_path, f"its rows are not those of {piece}", remedy)
        elif set(zip(frame["dataset"], frame["seed"])) != {(piece.dataset, piece.seed)}:
            raise CorruptFileError(csv_path, f"its rows are not those of {piece}", remedy)
        if (problem := accuracy_problem(frame)) or (check is not None and (problem := check(piece, frame, record))):
            raise CorruptFileError(csv_path, problem, remedy)
        return frame, record

    def list(self) -> list[Piece]:
        """The pieces whose record is in an unkeyed store (sorted). A record whose name is not the
        one featlib writes for its seed (``seed01.json``, ``seed+1.json``, a keyed name) is refused
        (:class:`CorruptFileError` naming it): read as another seed's, it would count that seed as done."""
        found = []
        for path in sorted((self.root / "pieces").glob("*/*/*/seed*.json")):
            dataset, learner, objective = path.parts[-4:-1]
            match = SEED_NAME.fullmatch(path.stem)
            piece = Piece(dataset, learner, objective, int(match[1])) if match else None
            if piece is None or piece.name() != path.relative_to(self.root).with_suffix("").as_posix():
                raise CorruptFileError(path, "its name is not a piece's (seed<k>.json, k the seed as written, without "
                                             "leading zeros)", "give it and its CSV the name featlib writes "
                                             "(seed1.json, seed1.csv), or move them out of the folder")
            found.append(piece)
        return found

    def copy(self, piece: Piece, into: "PieceStore", key: str | None = None) -> dict:
        """Copy the piece's two files into ``into`` (CSV first, bytes unchanged), after reading them
        checked; returns the record."""
        read = self.read(piece, key)
        if read is None:
            raise ValueError(f"{self.record(piece, key)} does not exist: the piece is not in {self.root}")
        target_key = key if into.keyed else None
        atomic_write_text(into.csv(piece, target_key), read_regular(self.csv(piece, key)).decode("utf-8"))
        atomic_write_text(into.record(piece, target_key), read_regular(self.record(piece, key)).decode("utf-8"))
        return read[1]

    # -- one writer ------------------------------------------------------------------------------
    def lock(self, who: str = "this run"):
        """Hold the folder for a run's or a merge's whole life (see the module docstring). A second
        process is refused at once (:class:`FolderBusy`, naming the holder); the lock goes with the
        holder however it ends (:func:`featlib.store.files.hold_folder`)."""
        return hold_folder(PieceLock(self.root.resolve()), self.root, who)

    def lock_path(self) -> Path:
        """The file of the folder's lock: ``.<name>.lock`` beside it, the lock every command that
        writes a folder takes (:func:`featlib.store.folders.folder_lock`), so that a pieces run, a
        merge and a results command into one folder exclude each other."""
        return PieceLock(self.root.resolve()).path

    def check_held(self) -> None:
        """Before a write: :class:`featlib.store.files.LockLost` unless this process still holds
        the folder's lock (its file deleted meanwhile, by ``git clean -fX``, keeps no one out)."""
        check_held(self.lock_path(), self.root)
