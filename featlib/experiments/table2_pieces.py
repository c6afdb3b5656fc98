"""Table 2 as pieces that accumulate across sittings, machines and budgets.

The whole ColoredMNIST protocol is hours of a GPU, and no sitting this project or a Colab user
gets holds that. So its results are kept as *pieces*, one per (dataset, learner, objective, seed)
(and one oracle piece per (dataset, seed)), each a CSV of its OOD-stage runs with a record of
what made it:

    <folder>/pieces/<dataset>/<learner>/<objective>/seed<k>.csv   the runs (one row per configuration)
    <folder>/pieces/<dataset>/<learner>/<objective>/seed<k>.json  its record

The record holds the protocol's identity (:meth:`CMNISTProtocol.key` of every field that changes
an OOD-stage run, precision and OOD path included) and those fields, the preset's name, device,
precision, path, torch and featlib versions, the commit, the wall seconds the piece took, and the
SHA-256 and size of the CSV. A piece is written atomically (CSV first, record last), so a run
killed at any point leaves whole pieces and at most one piece missing.

* :func:`run_pieces` computes the missing pieces of some protocols in Table 2's order (the
  frozen-feature columns of every seed first, then ERM-NF seed by seed) until a time budget is
  spent: the piece in hand is finished, the rest is left for a later run on any machine.
* :func:`merge_pieces` brings pieces made elsewhere into a folder, checking each checksum; it
  refuses a piece whose protocol (preset, precision and path included) differs from the one the
  folder already holds for that cell, and a piece that differs from the copy already there.
* :func:`load_pieces` reads a folder back, every piece checked against its record; within a
  cell (dataset, learner, objective) every piece must come from one protocol.
* :func:`table2` gives Table 2 from whatever pieces there are, with the number of seeds per cell.

Chapter 04 shows the committed pieces as Table 2; ``python -m featlib.cli.run_cmnist
--pieces`` and ``python -m featlib.cli.merge_pieces`` are the commands.
"""
from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import torch

from .. import __version__
from ..io.atomic import atomic_write_text
from ..io.cache import RECORD_ALIASES, CorruptFileError
from ..io.csv_io import frame_to_csv, read_csv
from ..io.paths import inside
from ..device import describe_device, get_device
from .colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, select_best

#: Table 2's columns in the order pieces are computed: frozen features first (minutes on a GPU,
#: feature learning plus small stacks on a CPU), the whole-network ERM-NF column last.
LEARNER_ORDER = ("erm", "bonsai", "ifeat", "feat", "erm-nf")
#: Fields of a protocol that may differ between the pieces of one cell: which pieces a run made.
_PER_RUN_FIELDS = ("seeds", "objectives", "learners")
ORACLE = "oracle"


@dataclass(frozen=True)
class Piece:
    """One unit of Table 2: the runs of (dataset, learner, objective, seed); ``learner`` is
    :data:`ORACLE` (objective ``"erm"``) for the oracle row of a seed."""

    dataset: str
    learner: str
    objective: str
    seed: int

    def stem(self, folder: Path) -> Path:
        """The piece's path in ``folder`` without suffix; refused (ValueError) when its names would
        lead out of ``folder`` (a name with ``/`` or ``..``, a link out of the folder)."""
        return inside(folder, f"pieces/{self.dataset}/{self.learner}/{self.objective}/seed{self.seed}",
                      what="a piece")

    def csv(self, folder: Path) -> Path:
        return self.stem(folder).with_suffix(".csv")

    def record(self, folder: Path) -> Path:
        return self.stem(folder).with_suffix(".json")


def protocol_fields(protocol: CMNISTProtocol) -> dict:
    """What a piece records of its protocol: every field that changes an OOD-stage run."""
    return {k: v for k, v in asdict(protocol).items() if k in CMNISTProtocol.OOD_FIELDS}


def protocol_identity(protocol: CMNISTProtocol, objective: str | None = None) -> str:
    """A short hash of :func:`protocol_fields` (and featlib's version): pieces of one cell must share it.
    With ``objective``: that objective's pieces' (:meth:`CMNISTProtocol.ood_piece_key`: for an
    objective loaded from a file, the file's SHA-256 too; for a built-in one the same hash)."""
    return protocol.key(CMNISTProtocol.OOD_FIELDS) if objective is None else protocol.ood_piece_key(objective)


def _objective_file_fields(objective: str) -> dict:
    """A piece record's note of the file an objective of one's own was loaded from (none for a built-in)."""
    from .objective_files import objective_file

    loaded = objective_file(objective)
    return {} if loaded is None else {"objective_file": loaded.path.name, "objective_file_sha256": loaded.sha256}


def pieces_of(protocol: CMNISTProtocol) -> list[Piece]:
    """Every piece of ``protocol`` in the order :func:`run_pieces` computes them: per learner in
    :data:`LEARNER_ORDER`, seed by seed, every objective; the oracle piece of each seed first."""
    pieces = [Piece(protocol.dataset, ORACLE, "erm", s) for s in protocol.seeds]
    for learner in [l for l in LEARNER_ORDER if l in protocol.learners]:
        for seed in protocol.seeds:
            pieces += [Piece(protocol.dataset, learner, o, seed) for o in protocol.objectives]
    return pieces


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_piece(folder: Path, piece: Piece, frame: pd.DataFrame, record: dict) -> None:
    """The piece's CSV, then its record (with the CSV's checksum): a record names a whole CSV."""
    text = frame_to_csv(frame)
    data = text.encode("utf-8")
    atomic_write_text(piece.csv(folder), text)
    full = {**asdict(piece), **record, "rows": len(frame), "bytes": len(data), "sha256": _digest(data)}
    atomic_write_text(piece.record(folder), json.dumps(full, indent=1, sort_keys=True, default=list) + "\n")


def read_piece(folder: Path, piece: Piece) -> tuple[pd.DataFrame, dict] | None:
    """A piece's runs and record, or None when its record is absent (not yet computed). The CSV's
    bytes are read once, checked against the record and parsed; the rows must be the piece's."""
    record_path, csv_path = piece.record(folder), piece.csv(folder)
    if not record_path.exists():
        return None
    remedy = "delete the piece's two files and run again to recompute it, or restore them from git"
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CorruptFileError(record_path, f"it is not a piece record ({err})", remedy) from None
    if isinstance(record, dict):  # a piece made before featlib named the learner "learner" ("init")
        record = {RECORD_ALIASES.get(k, k): v for k, v in record.items()}
    if not isinstance(record, dict) or any(record.get(k) != v for k, v in asdict(piece).items()):
        raise CorruptFileError(record_path, f"it is not the record of {piece}", remedy)
    try:
        data = csv_path.read_bytes()
    except OSError:
        raise CorruptFileError(csv_path, "it is missing although its record is there", remedy) from None
    if len(data) != record.get("bytes") or _digest(data) != record.get("sha256"):
        raise CorruptFileError(csv_path, "its bytes do not match the checksum in its record", remedy)
    frame = read_csv(io.StringIO(data.decode("utf-8"))).rename(columns=RECORD_ALIASES)
    if len(frame) != record.get("rows"):
        raise CorruptFileError(csv_path, f"it holds {len(frame)} rows where its record says {record.get('rows')}", remedy)
    if piece.learner != ORACLE:
        keys = set(zip(frame["dataset"], frame["learner"], frame["objective"], frame["seed"]))
        if keys != {(piece.dataset, piece.learner, piece.objective, piece.seed)}:
            raise CorruptFileError(csv_path, f"its rows are not those of {piece}", remedy)
    elif set(zip(frame["dataset"], frame["seed"])) != {(piece.dataset, piece.seed)}:
        raise CorruptFileError(csv_path, f"its rows are not those of {piece}", remedy)
    return frame, record


def list_pieces(folder: Path) -> list[Piece]:
    """The pieces whose record is in ``folder`` (sorted)."""
    root = Path(folder) / "pieces"
    found = []
    for path in sorted(root.glob("*/*/*/seed*.json")):
        dataset, learner, objective = path.parts[-4:-1]
        try:
            seed = int(path.stem[len("seed"):])
        except ValueError:
            continue
        found.append(Piece(dataset, learner, objective, seed))
    return found


def _cell(piece: Piece) -> tuple:
    return (piece.dataset, piece.learner, piece.objective)


_IDENTITY_FIELDS = ("preset", "precision", "ood_path", "protocol_key")


def _mismatch(a: dict, b: dict) -> str | None:
    for field in _IDENTITY_FIELDS:
        if a.get(field) != b.get(field):
            return f"{field} {a.get(field)!r} vs {b.get(field)!r}"
    return None


def load_pieces(folder: str | Path) -> dict | None:
    """Every piece in ``folder`` (None when it holds none): ``runs`` (all OOD-stage runs),
    ``oracle`` and ``records`` (one row per piece: its record's fields). Raises
    :class:`CorruptFileError` for a damaged piece and ``ValueError`` where one cell mixes
    protocols, presets, precisions or paths."""
    folder = Path(folder)
    pieces = list_pieces(folder)
    if not pieces:
        return None
    runs, oracle, records, cells = [], [], [], {}
    for piece in pieces:
        frame, record = read_piece(folder, piece)
        first = cells.setdefault(_cell(piece), (piece, record))
        problem = _mismatch(first[1], record)
        if problem:
            raise ValueError(f"{folder}: cell {'/'.join(_cell(piece))} mixes pieces of two protocols ({problem}: "
                             f"seed {first[0].seed} and seed {piece.seed}); keep one protocol per folder")
        (oracle if piece.learner == ORACLE else runs).append(frame)
        records.append({k: v for k, v in record.items() if k != "protocol"})
    return {"runs": pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(),
            "oracle": pd.concat(oracle, ignore_index=True) if oracle else pd.DataFrame(),
            "records": pd.DataFrame(records)}


def table2(loaded: dict) -> pd.DataFrame:
    """Table 2 from loaded pieces: per (dataset, learner, objective) the configuration with the
    best mean worst-test accuracy over the seeds there, with mean, std and ``n_seeds``."""
    if loaded is None or loaded["runs"].empty:
        return pd.DataFrame(columns=["dataset", "learner", "objective", "mean", "std", "n_seeds"])
    return select_best(loaded["runs"])


def merge_pieces(sources: Sequence[str | Path], into: str | Path) -> dict:
    """Copy the pieces of ``sources`` that ``into`` lacks, after checking each (checksum, rows)
    and that its protocol is the one ``into`` holds for the cell. A piece already in ``into`` is
    skipped when identical and refused when it differs. Every source piece is checked before
    anything is copied. Returns counts of ``added`` and ``identical`` pieces."""
    into = Path(into)
    with folder_lock(into, "this merge"):
        return _merge_locked(sources, into)


def _merge_locked(sources: Sequence[str | Path], into: Path) -> dict:
    present = {p: read_piece(into, p) for p in list_pieces(into)}
    cells = {}
    for piece, (_, record) in present.items():
        cells.setdefault(_cell(piece), (piece, record, str(into)))
    plan, identical = [], 0
    for source in map(Path, sources):
        if source.resolve() == into.resolve():
            raise ValueError(f"{source} is the folder merged into; name other folders to merge from")
        pieces = list_pieces(source)
        if not pieces:
            raise ValueError(f"{source} holds no Table 2 pieces (pieces/<dataset>/<learner>/<objective>/seed<k>.json)")
        for piece in pieces:
            frame, record = read_piece(source, piece)
            first = cells.setdefault(_cell(piece), (piece, record, str(source)))
            problem = _mismatch(first[1], record)
            if problem:
                raise ValueError(f"{source}: piece {piece.learner}/{piece.objective}/seed{piece.seed} of "
                                 f"{piece.dataset} was made with another protocol than seed {first[0].seed} in "
                                 f"{first[2]} ({problem}); merge it into a folder of its own")
            if piece in present:
                if present[piece][1]["sha256"] != record["sha256"]:
                    raise ValueError(f"{source}: piece {piece} differs from the copy already in {into} "
                                     "(same protocol, other numbers); keep one of them")
                identical += 1
                continue
            present[piece] = (frame, record)
            # where it goes, checked now: a link out of ``into`` is refused before anything is copied
            plan.append(((piece.csv(source), piece.csv(into)), (piece.record(source), piece.record(into))))
    for copies in plan:
        for path, target in copies:  # CSV first: a record names a whole CSV
            atomic_write_text(target, path.read_text(encoding="utf-8"))
    return {"added": len(plan), "identical": identical}


def _piece_record(experiment: ColoredMNISTExperiment, preset: str, commit: str, seconds: float,
                  objective: str = "erm", command: str | None = None) -> dict:
    p = experiment.protocol
    return {"protocol_key": protocol_identity(p, objective), "protocol": protocol_fields(p), "preset": preset,
            "precision": p.precision, "ood_path": p.ood_path, "device": describe_device(experiment.device),
            "torch": torch.__version__, "featlib_version": __version__, "commit": commit,
            "wall_time_s": seconds, **({"command": command} if command else {}), **_objective_file_fields(objective)}


#: The lock file of a pieces folder (beside ``pieces/``), held by the one run or merge writing it.
LOCK_NAME = ".pieces.lock"


class FolderBusy(ValueError):
    """Another process is writing the pieces folder (one line, naming it)."""


@contextmanager
def folder_lock(folder: str | Path, who: str = "this run"):
    """Hold the pieces folder ``folder`` for a run's or a merge's whole life: the protocol check,
    the list of missing pieces and every write happen under it, so two runs never both report
    every piece done while one run's pieces are lost, and a mix of protocols cannot slip between
    one run's check and another's write. A second process is refused at once
    (:class:`FolderBusy`, naming the holder); the lock is released when the holder ends, however it
    ends (an advisory ``flock``, which the kernel drops with the process)."""
    from ..io.cache import PieceLock

    folder = Path(folder)
    lock = PieceLock(folder / LOCK_NAME[1:-5])  # PieceLock(x) locks .x.lock beside x
    if not lock.acquire(blocking=False):
        holder = "another process"
        try:
            with open(lock.path) as handle:
                holder = PieceLock.holder_of(handle)
        except OSError:
            pass
        raise FolderBusy(f"{folder} is being written by {holder} (it holds {lock.path}); let that run or merge "
                         f"finish, or end it, then start {who} again")
    try:
        yield
    finally:
        lock.release()


def missing_pieces(protocols: Iterable[CMNISTProtocol], folder: Path) -> list[tuple[CMNISTProtocol, Piece]]:
    """The pieces of ``protocols`` that ``folder`` lacks, in computing order."""
    have = set(list_pieces(folder))
    return [(p, piece) for p in protocols for piece in pieces_of(p) if piece not in have]


def check_folder_protocols(protocols: Iterable[CMNISTProtocol], folder: Path, preset: str) -> None:
    """Refuse, before any work, to add pieces of another protocol to a cell the folder holds."""
    held = {}
    for piece in list_pieces(folder):
        held.setdefault(_cell(piece), read_piece(folder, piece)[1])
    for p in protocols:
        for piece in pieces_of(p):
            mine = {"protocol_key": protocol_identity(p, piece.objective), "preset": preset, "precision": p.precision,
                    "ood_path": p.ood_path}
            if _cell(piece) in held and (problem := _mismatch(held[_cell(piece)], mine)):
                raise ValueError(f"{folder} holds {'/'.join(_cell(piece))} pieces of another protocol ({problem}); "
                                 "give another folder for this one")


def compute_piece(experiment: ColoredMNISTExperiment, piece: Piece, folder: str | Path, *, preset: str,
                  commit: str, command: str | None = None) -> float:
    """Compute one piece of ``experiment``'s protocol and write it into ``folder`` with its record
    (``command``: the command line that made it, recorded when given); returns the seconds it took."""
    t0 = time.perf_counter()
    if piece.learner == ORACLE:
        frame = experiment.oracle_piece(piece.seed)
    else:
        frame = experiment.piece(piece.objective, piece.learner, piece.seed)
    seconds = time.perf_counter() - t0
    write_piece(Path(folder), piece, frame, _piece_record(experiment, preset, commit, seconds, piece.objective,
                                                           command))
    return seconds


def run_pieces(protocols: Sequence[CMNISTProtocol], folder: str | Path, *, preset: str, commit: str,
               command: str | None = None,
               cache_dir: str | Path | None = None, budget_s: float | None = None, mnist_source: str = "auto",
               device: torch.device | None = None, progress=print) -> dict:
    """Compute the missing pieces of ``protocols`` into ``folder`` until ``budget_s`` seconds have
    passed (None: all); the piece in hand is always finished, and at least one piece is computed
    however small the budget. Each piece is written as soon as it
    is done, so nothing finished is lost. Returns ``done`` (pieces written now), ``remaining``
    (pieces still missing) and ``wall_time_s``."""
    folder = Path(folder)
    start = time.perf_counter()
    experiments = {p.dataset: ColoredMNISTExperiment(p, cache_dir=cache_dir, mnist_source=mnist_source,
                                                     device=device or get_device(), progress=False)
                   for p in protocols}
    with folder_lock(folder, "this pieces run"):
        check_folder_protocols(protocols, folder, preset)  # again, now that no one else writes here
        return _run_pieces_locked(protocols, folder, experiments, preset=preset, commit=commit, command=command,
                                  budget_s=budget_s, progress=progress, start=start)


def _run_pieces_locked(protocols, folder: Path, experiments: dict, *, preset, commit, command, budget_s, progress,
                       start) -> dict:
    todo = missing_pieces(protocols, folder)
    done = 0
    for k, (protocol, piece) in enumerate(todo):
        # at least one piece per run, however small the budget: a sitting always makes progress
        if done and budget_s is not None and time.perf_counter() - start >= budget_s:
            break
        seconds = compute_piece(experiments[protocol.dataset], piece, folder, preset=preset, commit=commit,
                                command=command)
        done += 1
        progress(f"[{k + 1}/{len(todo)}] {piece.dataset} {piece.learner} {piece.objective} seed {piece.seed}: "
                 f"{seconds:.1f} s")
    remaining = missing_pieces(protocols, folder)
    return {"done": done, "remaining": remaining, "wall_time_s": time.perf_counter() - start}


def describe_remaining(remaining: list[tuple[CMNISTProtocol, Piece]]) -> str:
    """One line per (dataset, learner): how many pieces are still missing, and their seeds."""
    if not remaining:
        return "every piece is done"
    groups: dict[tuple, set] = {}
    for _, piece in remaining:
        groups.setdefault((piece.dataset, piece.learner), set()).add(piece.seed)
    count = len(remaining)
    lines = [f"{count} piece{'s' if count != 1 else ''} remain:"]
    lines += [f"  {d} {l}: seeds {', '.join(map(str, sorted(s)))}" for (d, l), s in groups.items()]
    return "\n".join(lines)


def check_pieces_out(name: str, value, *, protect: dict | None = None):
    """``--out`` of a pieces run, before any work: absent, empty or a folder holding only
    ``pieces/`` and a ``README.md`` (a committed folder, such as ``results/cmnist-table2``, says
    what its pieces are; nothing but ``pieces/`` is ever touched, and pieces are only added), and
    never the working directory, a checkout or the cache (:func:`featlib.io.result_folder.check_out`)."""
    from ..io.result_folder import check_out

    return check_out(name, value, "featlib.experiments.table2_pieces", protect=protect,
                     keep=("pieces", "README.md", LOCK_NAME))
