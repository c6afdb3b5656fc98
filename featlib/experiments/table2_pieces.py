"""Table 2 as pieces that accumulate across sittings, machines and budgets.

The whole ColoredMNIST protocol is hours of a GPU, and no sitting this project or a Colab user
gets holds that. So its results are kept as *pieces*, one per (dataset, learner, objective, seed)
(and one oracle piece per (dataset, seed)), each a CSV of its OOD-stage runs with a record of
what made it:

    <folder>/pieces/<dataset>/<learner>/<objective>/seed<k>.csv   the runs (one row per configuration)
    <folder>/pieces/<dataset>/<learner>/<objective>/seed<k>.json  its record

A piece is the store's unit (:mod:`featlib.store.pieces`: the format, its checks, the folder's
lock). It is computed once, by the experiment, into its cache (:meth:`ColoredMNISTExperiment.unit`),
and committing it to a folder copies its two files there, the record saying what made it: the
protocol's key (:meth:`CMNISTProtocol.piece_key`) and fields, the preset's name, device, precision,
path, versions, commit, command and wall seconds, and the CSV's size and SHA-256. A run killed at
any point leaves whole pieces and at most one piece missing.

* :func:`run_pieces` computes the missing pieces of some protocols in Table 2's order (the
  frozen-feature columns of every seed first, then ERM-NF seed by seed) until a time budget is
  spent: the piece in hand is finished, the rest is left for a later run on any machine.
* :func:`merge_pieces` brings pieces made elsewhere into a folder, checking each checksum; it
  refuses a piece whose protocol (preset, precision and path included) differs from the one the
  folder already holds for that cell, and a piece that differs from the copy already there.
* :func:`load_pieces` reads a folder back, every piece checked against its record; within a
  cell (dataset, learner, objective) every piece must come from one protocol.
* Table 2 from whatever pieces there are is :func:`.colored_mnist.select_best` of their runs, with
  the number of seeds per cell.

Chapter 04 shows the committed pieces as Table 2; ``python -m featlib.cli.run_cmnist
--pieces`` and ``python -m featlib.cli.merge_pieces`` are the commands.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
import torch

from ..device import get_device
from ..store.pieces import LOCK_NAME, ORACLE, FolderBusy, MixedProtocols, Piece, PieceStore
from ..store.files import CorruptFileError
from .colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, learner_choices, recorded_runs_problem


def learner_order(protocol: CMNISTProtocol) -> list[str]:
    """The protocol's columns in the order pieces are computed: frozen features first, in the
    tables' order of the registered learners (minutes on a GPU, feature learning plus small stacks
    on a CPU), the whole-network ERM-NF column last."""
    frozen = [l for l in learner_choices() if l != "erm-nf" and l in protocol.learners]
    return frozen + (["erm-nf"] if "erm-nf" in protocol.learners else [])


__all__ = ["LOCK_NAME", "ORACLE", "FolderBusy", "MixedProtocols", "Piece", "check_folder_protocols",
           "check_pieces_out", "compute_piece", "describe_remaining", "folder_lock", "learner_order", "list_pieces",
           "load_pieces", "merge_pieces", "missing_pieces", "pieces_of", "read_piece", "run_pieces"]


def pieces_of(protocol: CMNISTProtocol) -> list[Piece]:
    """Every piece of ``protocol`` in the order :func:`run_pieces` computes them: per learner in
    :func:`learner_order`, seed by seed, every objective; the oracle piece of each seed first."""
    pieces = [Piece(protocol.dataset, ORACLE, "erm", s) for s in protocol.seeds]
    for learner in learner_order(protocol):
        for seed in protocol.seeds:
            pieces += [Piece(protocol.dataset, learner, o, seed) for o in protocol.objectives]
    return pieces


def read_piece(folder: Path, piece: Piece) -> tuple[pd.DataFrame, dict] | None:
    """A piece of the results folder ``folder`` (:meth:`featlib.store.pieces.PieceStore.read`), its
    rows checked to be every configuration of the protocol its record names
    (:func:`.colored_mnist.recorded_runs_problem`)."""
    return PieceStore(folder).read(piece, check=recorded_runs_problem)


def _read_listed(folder: Path, piece: Piece) -> tuple[pd.DataFrame, dict]:
    """A piece :func:`list_pieces` found in ``folder``; one whose record went meanwhile is refused."""
    found = read_piece(folder, piece)
    if found is None:
        raise CorruptFileError(PieceStore(folder).record(piece), "it was listed a moment ago and is gone (another "
                                                                  "process changed the folder)", "run again")
    return found


def list_pieces(folder: Path) -> list[Piece]:
    """The pieces whose record is in the results folder ``folder`` (sorted)."""
    return PieceStore(folder).list()


def folder_lock(folder: str | Path, who: str = "this run"):
    """The lock of the results folder ``folder`` (:meth:`featlib.store.pieces.PieceStore.lock`)."""
    return PieceStore(folder).lock(who)


def _cell(piece: Piece) -> tuple:
    return (piece.dataset, piece.learner, piece.objective)


#: What a cell's pieces must share: the protocol's key (every field that changes a run), the
#: precision and the OOD path. The preset's name is recorded as information only: two presets may
#: give a piece the same key (the oracle's), and a reduced size is no named preset.
_IDENTITY_FIELDS = ("precision", "ood_path", "protocol_key")


def _mismatch(a: dict, b: dict) -> str | None:
    for field in _IDENTITY_FIELDS:
        if a.get(field) != b.get(field):
            return f"{field} {a.get(field)!r} vs {b.get(field)!r}"
    return None


def load_pieces(folder: str | Path) -> dict | None:
    """Every piece in ``folder`` (None when it holds none): ``runs`` (all OOD-stage runs),
    ``oracle`` and ``records`` (one row per piece: its record's fields). Raises
    :class:`CorruptFileError` for a damaged piece and :class:`MixedProtocols` (a ``ValueError``)
    where one cell mixes protocols, precisions or paths."""
    folder = Path(folder)
    pieces = list_pieces(folder)
    if not pieces:
        return None
    runs, oracle, records, cells = [], [], [], {}
    for piece in pieces:
        frame, record = _read_listed(folder, piece)
        first = cells.setdefault(_cell(piece), (piece, record))
        problem = _mismatch(first[1], record)
        if problem:
            raise MixedProtocols(f"{folder}: cell {'/'.join(_cell(piece))} mixes pieces of two protocols ({problem}: "
                             f"seed {first[0].seed} and seed {piece.seed}); keep one protocol per folder")
        (oracle if piece.learner == ORACLE else runs).append(frame)
        records.append({k: v for k, v in record.items() if k != "protocol"})
    return {"runs": pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(),
            "oracle": pd.concat(oracle, ignore_index=True) if oracle else pd.DataFrame(),
            "records": pd.DataFrame(records)}


def merge_pieces(sources: Sequence[str | Path], into: str | Path) -> dict:
    """Copy the pieces of ``sources`` that ``into`` lacks, after checking each (checksum, rows)
    and that its protocol is the one ``into`` holds for the cell. A piece already in ``into`` is
    skipped when identical and refused when it differs. Every source piece is checked before
    anything is copied. Returns counts of ``added`` and ``identical`` pieces."""
    into = Path(into)
    with folder_lock(into, "this merge"):
        return _merge_locked(sources, into)


def _merge_locked(sources: Sequence[str | Path], into: Path) -> dict:
    present = {p: _read_listed(into, p) for p in list_pieces(into)}
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
            frame, record = _read_listed(source, piece)
            first = cells.setdefault(_cell(piece), (piece, record, str(source)))
            problem = _mismatch(first[1], record)
            if problem:
                raise ValueError(f"{source}: piece {piece.learner}/{piece.objective}/seed{piece.seed} of "
                                 f"{piece.dataset} was made with another protocol than seed {first[0].seed} in "
                                 f"{first[2]} ({problem}); merge it into a folder of its own")
            if piece in present:  # the same rows under an older column name (init for learner) are the same piece
                if present[piece][1]["sha256"] != record["sha256"] and not present[piece][0].equals(frame):
                    raise ValueError(f"{source}: piece {piece} differs from the copy already in {into} "
                                     "(same protocol, other numbers); keep one of them")
                identical += 1
                continue
            present[piece] = (frame, record)
            PieceStore(into).stem(piece)  # where it goes, checked now: a link out of ``into`` is refused first
            plan.append((source, piece))
    target = PieceStore(into)
    for source, piece in plan:
        target.check_held()  # the lock file is still ours (a deleted one keeps no one out)
        PieceStore(source).copy(piece, target)  # CSV first: a record names a whole CSV
    return {"added": len(plan), "identical": identical}


def missing_pieces(protocols: Iterable[CMNISTProtocol], folder: Path) -> list[tuple[CMNISTProtocol, Piece]]:
    """The pieces of ``protocols`` that ``folder`` lacks, in computing order."""
    have = set(list_pieces(folder))
    return [(p, piece) for p in protocols for piece in pieces_of(p) if piece not in have]


def check_folder_protocols(protocols: Iterable[CMNISTProtocol], folder: Path, preset: str) -> None:
    """Refuse, before any work, to add pieces of another protocol to a cell the folder holds."""
    held = {}
    for piece in list_pieces(folder):
        held.setdefault(_cell(piece), _read_listed(folder, piece)[1])
    for p in protocols:
        for piece in pieces_of(p):
            oracle = piece.learner == ORACLE  # the oracle trains no OOD stage: no precision or path
            mine = {"protocol_key": p.piece_key(piece), "preset": preset, "precision": None if oracle else p.precision,
                    "ood_path": None if oracle else p.ood_path}
            if _cell(piece) in held and (problem := _mismatch(held[_cell(piece)], mine)):
                raise ValueError(f"{folder} holds {'/'.join(_cell(piece))} pieces of another protocol ({problem}); "
                                 "give another folder for this one")


def compute_piece(experiment: ColoredMNISTExperiment, piece: Piece, folder: str | Path, *, preset: str,
                  commit: str, command: str | None = None) -> float:
    """Put ``piece`` of ``experiment``'s protocol into the results folder ``folder``: computed
    once, in the experiment's cache (:meth:`ColoredMNISTExperiment.unit`), then its two files
    copied (without a cache, written there). The record says what made the piece: ``preset``,
    ``commit`` and ``command`` of this run when it computed it now, of the run that did when the
    cache held it already. Returns the seconds this call took (a piece the cache held: its copy)."""
    experiment.origin.update({"commit": commit, **({"command": command} if command else {})})
    t0 = time.perf_counter()
    frame, record = experiment.unit(piece)
    seconds = time.perf_counter() - t0
    results = PieceStore(folder)
    results.check_held()  # the folder's lock, taken by run_pieces, is still ours: no one else wrote meanwhile
    if results.record(piece).exists():  # never replaced (only a lost lock would let another run put it there)
        raise ValueError(f"{results.record(piece)} appeared while this run computed it (another run wrote "
                         f"{folder}); it is kept: check the folder, then run again")
    if experiment.pieces is not None:
        experiment.pieces.copy(piece, results, experiment.piece_key(piece))
    else:
        results.write(piece, frame, {k: v for k, v in record.items()
                                     if k not in ("dataset", "learner", "objective", "seed", "rows", "bytes", "sha256")})
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
    never the working directory, a checkout or the cache (:func:`featlib.store.folders.check_out`)."""
    from ..store.folders import check_out

    return check_out(name, value, "featlib.experiments.table2_pieces", protect=protect,
                     keep=("pieces", "README.md", LOCK_NAME))
