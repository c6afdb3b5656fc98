"""Verified cache files, and one producer per piece.

Every cached artefact carries what it must contain and is checked when it is read back:

* a CSV piece starts with the line ``# featlib-csv rows=<n> sha256=<digest>``: the number of
  data rows and the SHA-256 of everything after that line (:func:`write_verified_csv`);
  :func:`read_verified_csv` recomputes both and then applies the reader's own check of the
  contents (the keys it must hold, see :func:`expect_keys`). A CSV without the line (written by
  featlib before caches were verified) is judged by the contents check alone;
* a torch file is read with :func:`load_torch`, which turns whatever ``torch.load`` raises on a
  damaged file (``EOFError``, "PytorchStreamReader failed ...", unpickling errors) into a
  :class:`CorruptFileError` naming the file, and checks the keys the reader needs.

:func:`cached` ties it together: it returns the piece from ``path`` when the file is there and
sound, and otherwise computes it and writes it atomically. A bad file is reported (a
:class:`CacheWarning` naming the file and what is wrong with it) and recomputed, never used.
Before computing, :func:`cached` takes the piece's lock (:class:`PieceLock`): when two processes
share a cache folder (chapter 04's parallel sweep workers, two ``run_cmnist`` on one
``--cache-dir``) the second waits for the first and then reads its file instead of computing the
same piece again. Locks are ``flock`` locks on ``.<name>.lock`` files next to the pieces (they are
released when their process dies, even by SIGKILL); where ``fcntl`` is missing (Windows) there is
no lock, and two processes may compute one piece twice, harmlessly, since writes are atomic.
"""
from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from .atomic import atomic_write, atomic_write_text
from .csv_io import frame_to_csv, read_csv

try:
    import fcntl
except ImportError:  # Windows: no advisory locks (see the module docstring)
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")
HEADER = "# featlib-csv"


class CorruptFileError(ValueError):
    """A file is there but cannot be trusted: the message names it, says what is wrong and, when
    given, what to do."""

    def __init__(self, path: str | Path, reason: str, remedy: str | None = None):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}" + (f"; {remedy}" if remedy else ""))


class CacheWarning(UserWarning):
    """A cached file was bad and is being recomputed."""


# -- CSV pieces ----------------------------------------------------------------------------------
def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_verified_csv(path: str | Path, frame: pd.DataFrame) -> Path:
    """Write ``frame`` with its row count and checksum line, atomically."""
    body = frame_to_csv(frame)
    return atomic_write_text(path, f"{HEADER} rows={len(frame)} sha256={_digest(body.encode())}\n{body}")


def _parse_header(path: Path, line: bytes) -> tuple[int, str]:
    fields = dict(part.split("=", 1) for part in line.decode("ascii", "replace").split()[2:] if "=" in part)
    try:
        return int(fields["rows"]), fields["sha256"]
    except (KeyError, ValueError):
        raise CorruptFileError(path, f"its first line {line[:80]!r} is not a valid featlib-csv header") from None


def read_verified_csv(path: str | Path, check: Callable[[pd.DataFrame], str | None] | None = None,
                      **read_kwargs) -> pd.DataFrame:
    """The frame in ``path``; :class:`CorruptFileError` when its checksum, row count or
    ``check(frame)`` (a description of what is wrong, or None) says it is damaged."""
    path = Path(path)
    raw = path.read_bytes()
    rows = None
    if raw.startswith(HEADER.encode()):
        line, _, raw = raw.partition(b"\n")
        rows, digest = _parse_header(path, line)
        if _digest(raw) != digest:
            raise CorruptFileError(path, "its contents do not match the checksum written with them "
                                         "(truncated, or changed after it was written)")
    try:
        frame = read_csv(io.BytesIO(raw), **read_kwargs)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise CorruptFileError(path, f"it is not a readable CSV file ({type(err).__name__}: {err})") from None
    if rows is not None and len(frame) != rows:
        raise CorruptFileError(path, f"it holds {len(frame)} rows where its header says {rows}")
    problem = check(frame) if check is not None else None
    if problem:
        raise CorruptFileError(path, problem)
    return frame


def expect_keys(keys: Iterable[str], expected: Iterable[tuple], *, allow_nan: bool = False) -> Callable:
    """A contents check for :func:`read_verified_csv`: the ``keys`` columns hold exactly the
    ``expected`` tuples, each once; no column is unnamed; no value is NaN (unless ``allow_nan``)."""
    keys, expected = list(keys), set(map(tuple, expected))

    def check(frame: pd.DataFrame) -> str | None:
        missing = [k for k in keys if k not in frame.columns]
        if missing:
            return f"it lacks the column(s) {', '.join(missing)}"
        stray = [c for c in frame.columns if str(c).startswith("Unnamed:")]
        if stray:
            return f"it has {len(stray)} unnamed column(s)"
        found = [tuple(row) for row in frame[keys].itertuples(index=False)]
        if len(found) != len(set(found)):
            return "it holds some rows twice"
        if set(found) != expected:
            return f"it holds {len(set(found) & expected)} of the {len(expected)} expected rows" + (
                f" and {len(set(found) - expected)} unexpected ones" if set(found) - expected else "")
        if not allow_nan and frame.isna().to_numpy().any():
            return "some of its values are missing (NaN)"
        return None

    return check


# -- torch files ---------------------------------------------------------------------------------
def load_torch(path: str | Path, keys: Iterable[str] = (), map_location: Any = "cpu", remedy: str | None = None):
    """``torch.load`` of ``path``; :class:`CorruptFileError` naming the file when torch cannot read
    it (truncated, garbled) or when the object lacks one of ``keys``."""
    import torch

    path = Path(path)
    try:
        obj = torch.load(path, map_location=map_location, weights_only=False)
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001  (torch raises many types on damaged files)
        raise CorruptFileError(path, f"torch.load cannot read it ({type(err).__name__}: {err})", remedy) from None
    keys = list(keys)
    if keys:
        if not isinstance(obj, dict):
            raise CorruptFileError(path, f"it holds a {type(obj).__name__}, not the expected dict", remedy)
        missing = [k for k in keys if k not in obj]
        if missing:
            raise CorruptFileError(path, f"it lacks the entries {', '.join(map(repr, missing))}", remedy)
    return obj


def save_torch(path: str | Path, obj: Any) -> Path:
    """``torch.save`` of ``obj`` to ``path``, atomically."""
    import torch

    return atomic_write(path, lambda tmp: torch.save(obj, tmp))


# -- locks ---------------------------------------------------------------------------------------
class PieceLock:
    """An exclusive lock on producing ``path``, held by at most one process at a time."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.path = path.with_name(f".{path.name}.lock")
        self._handle = None

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock (waiting for it when ``blocking``); False if another process holds it."""
        if self._handle is not None:
            raise RuntimeError(f"{self.path} is already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a")  # noqa: SIM115  (kept open while the lock is held)
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                handle.close()
                return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            if fcntl is not None:
                fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> "PieceLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# -- load or compute -----------------------------------------------------------------------------
_MISSING = object()


def file_state(path: Path):
    """(inode, size, modification time) of ``path``, None when absent: whether it changed."""
    try:
        s = path.stat()
    except FileNotFoundError:
        return None
    return s.st_ino, s.st_size, s.st_mtime_ns


def try_load(path: Path, load: Callable[[Path], T], what: str = "cached file") -> T | object:
    """``load(path)``, or :data:`MISSING` when the file is absent or bad (a bad one is reported)."""
    if not path.exists():
        return _MISSING
    try:
        return load(path)
    except FileNotFoundError:
        return _MISSING
    except CorruptFileError as err:
        warnings.warn(f"bad {what} {err}; recomputing it", CacheWarning, stacklevel=3)
        return _MISSING


MISSING = _MISSING


def cached(path: str | Path | None, load: Callable[[Path], T], compute: Callable[[], T],
           save: Callable[[Path, T], object], what: str = "cached file") -> T:
    """The piece in ``path`` if it is there and sound; otherwise ``compute()`` it (holding the
    piece's lock, so that another process waits instead of computing it too) and ``save`` it.
    ``path`` None: compute, keep nothing."""
    if path is None:
        return compute()
    path = Path(path)
    value = try_load(path, load, what)
    if value is not _MISSING:
        return value
    seen = file_state(path)
    with PieceLock(path):
        if file_state(path) != seen:  # another process wrote it while we waited
            value = try_load(path, load, what)
            if value is not _MISSING:
                return value
        value = compute()
        save(path, value)
    return value
