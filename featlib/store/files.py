"""Verified cache files, and one producer per piece.

Every cached artefact carries what it must contain and is checked when it is read back:

* a CSV piece starts with the line ``# featlib-csv rows=<n> sha256=<digest> meta=<json>``: the
  number of data rows, the SHA-256 of the record and everything after that line, and the record
  of what made the piece (:func:`cached_meta`: the config key and seed, and where the caller has
  them the device, precision, OOD path and torch version) (:func:`write_verified_csv`);
  :func:`read_verified_csv` recomputes both, compares the record with what the reader expects
  (``expect``: a piece copied from another configuration or seed is refused), and then applies the
  reader's own check of the contents (the keys it must hold, see :func:`expect_keys`). A piece
  whose reader expects a record and that has none (written by an older featlib, or not by
  featlib) cannot be checked, so it is reported and recomputed like a damaged one; every piece
  written now carries its record;
* a torch piece (:func:`save_torch`) is the same header line, ``# featlib-pt bytes=<n>
  sha256=<digest> meta=<json>``, followed by ``torch.save``'s bytes: :func:`load_torch` reads the
  file once, checks size, checksum and record, and unpickles the checked bytes (a flipped bit in a
  weight is refused, not loaded); whatever ``torch.load`` raises on a damaged file becomes a
  :class:`CorruptFileError` naming the file. A torch file without the line is accepted only where
  the reader expects no record (then checked for readability and keys).

:func:`cached` ties it together: it returns the piece from ``path`` when the file is there and
sound, and otherwise computes it and writes it atomically. A bad file is reported (a
:class:`CacheWarning` naming the file and what is wrong with it) and recomputed, never used.
Before computing, :func:`cached` takes the piece's lock (:class:`PieceLock`): when two processes
share a cache folder (chapter 04's parallel sweep workers, two ``run_cmnist`` on one
``--cache-dir``) the second waits for the first and then reads its file instead of computing the
same piece again. Locks are ``filelock`` locks on ``.<name>.lock`` files next to the pieces
(``flock`` on Unix, ``msvcrt`` on Windows; released when their process dies, even by SIGKILL).
A process that waits for a lock longer than :data:`LOCK_NOTICE_S` seconds says on stderr which
file it waits for and which process holds it (a stopped process holds its locks). A piece that
cannot be written (disk full) stops the run with :class:`CacheWriteError`, one line naming it.
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import socket
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from .atomic import atomic_write, atomic_write_text
from .csv_io import frame_to_csv, read_csv
from .legacy import RECORD_ALIASES

T = TypeVar("T")
HEADER = "# featlib-csv"
PT_HEADER = "# featlib-pt"
#: Seconds a process waits for a piece's lock before it says what it waits for.
LOCK_NOTICE_S = 5.0


class CorruptFileError(ValueError):
    """A file is there but cannot be trusted: the message names it, says what is wrong and, when
    given, what to do."""

    def __init__(self, path: str | Path, reason: str, remedy: str | None = None):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}" + (f"; {remedy}" if remedy else ""))


class CacheWarning(UserWarning):
    """A cached file was bad and is being recomputed."""


class CacheWriteError(ValueError):
    """A finished piece could not be written (disk full, folder gone): one line naming it."""


def read_regular(path: str | Path, dir_fd: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (relative to ``dir_fd`` when given):
    :class:`CorruptFileError` for anything else (a FIFO, a device, a folder), which is refused
    before it is read, so that a FIFO put at a result's name cannot hang the reader.
    FileNotFoundError as :func:`open`'s."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptFileError(path, "it is not a regular file (a FIFO, a device or a folder), so it is not read")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def accuracy_problem(frame: pd.DataFrame) -> str | None:
    """What is wrong with ``frame``'s accuracies (every column named ``*_acc``: a number in [0, 1],
    or missing where a run diverged), or None: an accuracy of 1.7 is no accuracy, however well the
    file is sealed."""
    for column in frame.columns:
        if not str(column).endswith("_acc"):
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values[(values.isna() & frame[column].notna()) | (values < 0) | (values > 1)]
        if len(bad):
            value = frame[column][bad.index[0]]
            shown = f"{float(value):g}" if isinstance(value, (int, float)) or hasattr(value, "dtype") else repr(value)
            return f"its column {column} holds {shown}, which is no accuracy (a number in [0, 1])"
    return None


def cached_meta(key: str, seed: int | None = None, **extra) -> dict:
    """What a cache piece records about what made it: the config ``key`` and ``seed`` it was
    computed for, the torch version, and whatever the caller adds (``device``, ``precision``,
    ``ood_path``, ``learner``...); None values are left out."""
    import torch

    return {"key": key, "seed": seed, "torch": torch.__version__,
            **{k: (str(v) if k == "device" else v) for k, v in extra.items() if v is not None}}


def _meta_json(meta: dict | None) -> str:
    return "" if meta is None else json.dumps(meta, sort_keys=True, separators=(",", ":"), default=str)




def _check_meta(path: Path, found: dict | None, expect: dict | None) -> None:
    """:class:`CorruptFileError` when the record ``found`` does not hold the ``expect`` values."""
    if not expect:
        return
    if found is None:
        raise CorruptFileError(path, "it does not record which configuration and seed made it (written by an older "
                                     "featlib, or not by featlib), so it cannot be checked")
    found = {RECORD_ALIASES.get(k, k): v for k, v in found.items()}
    for name, value in expect.items():
        if found.get(name) != value:
            raise CorruptFileError(path, f"it was made for {name}={found.get(name)!r}, not {value!r} (copied from "
                                         "another configuration, seed or device)")


# -- CSV pieces ----------------------------------------------------------------------------------
def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _signed(meta: dict | None, body: bytes) -> str:
    """The checksum of a piece: of its record and body (of the body alone without a record)."""
    return _digest(body if meta is None else _meta_json(meta).encode() + b"\n" + body)


def write_verified_csv(path: str | Path, frame: pd.DataFrame, meta: dict | None = None) -> Path:
    """Write ``frame`` with its row count, checksum and record (``meta``) line, atomically."""
    body = frame_to_csv(frame)
    record = f" meta={_meta_json(meta)}" if meta is not None else ""
    return atomic_write_text(path, f"{HEADER} rows={len(frame)} sha256={_signed(meta, body.encode())}{record}\n{body}")


def _parse_header(path: Path, line: bytes, count: str = "rows") -> tuple[int, str, dict | None]:
    text = line.decode("utf-8", "replace")
    text, _, meta_text = text.partition(" meta=")
    fields = dict(part.split("=", 1) for part in text.split()[2:] if "=" in part)
    try:
        meta = json.loads(meta_text) if meta_text else None
        if meta is not None and not isinstance(meta, dict):
            raise ValueError
        return int(fields[count]), fields["sha256"], meta
    except (KeyError, ValueError):
        raise CorruptFileError(path, f"its first line {line[:80]!r} is not a valid featlib header") from None


def read_verified_csv(path: str | Path, check: Callable[[pd.DataFrame], str | None] | None = None,
                      expect: dict | None = None, **read_kwargs) -> pd.DataFrame:
    """The frame in ``path``; :class:`CorruptFileError` when its checksum, row count, record (it
    must hold the ``expect`` values) or ``check(frame)`` (a description of what is wrong, or None)
    says it is damaged or another piece."""
    path = Path(path)
    raw = read_regular(path)
    rows, meta = None, None
    if raw.startswith(HEADER.encode()):
        line, _, raw = raw.partition(b"\n")
        rows, digest, meta = _parse_header(path, line)
        if _signed(meta, raw) != digest:
            raise CorruptFileError(path, "its contents do not match the checksum written with them "
                                         "(truncated, or changed after it was written)")
    _check_meta(path, meta, expect)
    try:
        frame = read_csv(io.BytesIO(raw), **read_kwargs)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise CorruptFileError(path, f"it is not a readable CSV file ({type(err).__name__}: {err})") from None
    if rows is not None and len(frame) != rows:
        raise CorruptFileError(path, f"it holds {len(frame)} rows where its header says {rows}")
    frame = frame.rename(columns=RECORD_ALIASES)  # a piece written before the one vocabulary
    problem = accuracy_problem(frame) or (check(frame) if check is not None else None)
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
def load_torch(path: str | Path, keys: Iterable[str] = (), map_location: Any = "cpu", remedy: str | None = None,
               expect: dict | None = None):
    """The object saved in ``path`` by :func:`save_torch` (or a plain ``torch.save`` file, when no
    record is expected): the file is read once, its size, checksum and record (it must hold the
    ``expect`` values) checked, and the checked bytes unpickled. :class:`CorruptFileError` naming
    the file when it is damaged, another piece's, unreadable by torch, or lacks one of ``keys``."""
    import torch

    path = Path(path)
    raw = read_regular(path)
    meta = None
    if raw.startswith(PT_HEADER.encode()):
        line, _, raw = raw.partition(b"\n")
        size, digest, meta = _parse_header(path, line, "bytes")
        if len(raw) != size or _signed(meta, raw) != digest:
            raise CorruptFileError(path, "its contents do not match the size and checksum written with them "
                                         "(truncated, or changed after it was written)", remedy)
    try:
        _check_meta(path, meta, expect)
    except CorruptFileError as err:
        raise CorruptFileError(path, err.reason, remedy) from None
    try:
        obj = torch.load(io.BytesIO(raw), map_location=map_location, weights_only=False)
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


def save_state(path: str | Path, state: Any) -> Path:
    """``torch.save`` of a run's resumable ``state`` to ``path``, atomically (a checkpoint: no
    record, read back by :func:`load_torch`, which reports a damaged one)."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda tmp: torch.save(state, tmp))


def save_torch(path: str | Path, obj: Any, meta: dict | None = None) -> Path:
    """``torch.save`` of ``obj`` to ``path`` behind a size, checksum and record (``meta``) line,
    atomically."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    body = buffer.getvalue()
    record = f" meta={_meta_json(meta)}" if meta is not None else ""
    header = f"{PT_HEADER} bytes={len(body)} sha256={_signed(meta, body)}{record}\n".encode()
    return atomic_write(path, lambda tmp: tmp.write_bytes(header + body))


# -- locks ---------------------------------------------------------------------------------------
class LockUnavailable(ValueError):
    """The file system cannot lock (ENOLCK, some network mounts): one line naming the folder."""


class LockLost(ValueError):
    """A folder's lock file was deleted or replaced while this process held it (``git clean -fX``,
    a user tidying hidden files): another process may have taken the folder meanwhile, so this
    one does not write (one line naming the folder and the remedy)."""


#: The folder locks this process holds (:func:`hold_folder`), by lock file: what
#: :func:`check_held` verifies before a commit.
_HELD: dict[Path, list["PieceLock"]] = {}


class PieceLock:
    """An exclusive lock on producing ``path``, held by at most one process at a time: an advisory
    lock on ``.<name>.lock`` beside it, taken through ``filelock`` (``flock`` on Unix, ``msvcrt``
    on Windows), which the system drops with the process, however it ends. The lock remembers the
    identity of the file it locked (device and inode), so that :meth:`still_held` can tell when
    the file on disk is no longer it (deleted, or deleted and made again by another process), and
    deletes the file when it lets go (:meth:`release`): no lock file outlives its run."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.path = path.with_name(f".{path.name}.lock")
        self._lock = None
        self._identity = None

    @staticmethod
    def holder_of(handle) -> str:
        """Which process holds the lock on the open file ``handle`` (Linux: from /proc/locks),
        as words for a message."""
        try:
            inode = os.fstat(handle.fileno()).st_ino
            with open("/proc/locks") as locks:
                for line in locks:
                    fields = line.split()
                    if "->" in line or len(fields) < 6 or fields[1] != "FLOCK":
                        continue
                    if fields[5].rsplit(":", 1)[-1] == str(inode):
                        return f"process {fields[4]} on {socket.gethostname()}"
        except (OSError, ValueError):
            pass
        return "another process"

    def _try(self) -> bool:
        """One attempt: True when this process now holds the lock on the file at ``path``."""
        import filelock

        lock = filelock.FileLock(self.path, timeout=0)
        try:
            lock.acquire()
        except filelock.Timeout:
            return False
        except OSError as err:
            if err.errno == errno.ENOLCK:
                raise LockUnavailable(f"{self.path.parent}: its file system offers no file locks (ENOLCK), so two runs "
                                      "could write it at once; use a folder on a local disk") from None
            raise
        fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
        try:
            held = os.fstat(fd) if fd is not None else os.stat(self.path)
            on_disk = os.stat(self.path)
        except (OSError, TypeError):
            lock.release()
            return False
        if (held.st_dev, held.st_ino) != (on_disk.st_dev, on_disk.st_ino):
            lock.release()  # the file was deleted between its opening and its lock: take the new one
            return False
        self._lock, self._identity = lock, (held.st_dev, held.st_ino)
        return True

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock (waiting for it when ``blocking``, and saying on stderr what it waits for
        after :data:`LOCK_NOTICE_S` seconds); False if another process holds it."""
        if self._lock is not None:
            raise RuntimeError(f"{self.path} is already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        started, told = time.monotonic(), False
        while not self._try():
            if not blocking:
                return False
            waited = time.monotonic() - started
            if not told and waited >= LOCK_NOTICE_S:
                told = True
                print(f"featlib: waiting for {self.path.with_name(self.path.name[1:-5])}: {self.holder()} is "
                      f"computing it (holding {self.path}); if that process is stopped or hung, continue or end "
                      "it", file=sys.stderr, flush=True)
            time.sleep(0.2 if waited < 10 else 1.0)
        return True

    def holder(self) -> str:
        """Which process holds the lock file now, as words for a message."""
        try:
            with open(self.path) as handle:
                return self.holder_of(handle)
        except OSError:
            return "another process"

    def still_held(self) -> bool:
        """Whether this object holds the lock and the file at ``path`` is still the one it locked."""
        if self._lock is None:
            return False
        try:
            on_disk = os.stat(self.path)
        except OSError:
            return False
        return (on_disk.st_dev, on_disk.st_ino) == self._identity

    def release(self) -> None:
        """Delete the lock file, if it is still the one held, then unlock it: the file goes with the
        lock. Deleting first is safe because :meth:`acquire` keeps a lock only on the file that is
        at ``path`` once locked: a process that locks the deleted file finds it gone and tries again."""
        if self._lock is not None:
            if self.still_held():
                try:
                    os.unlink(self.path)
                except OSError:  # Windows cannot delete an open file; filelock does it there
                    pass
            lock, self._lock, self._identity = self._lock, None, None
            lock.release()

    def __enter__(self) -> "PieceLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class FolderBusy(ValueError):
    """Another process is writing the folder (one line, naming it)."""


@contextmanager
def hold_folder(lock: PieceLock, folder: Path, who: str = "this run"):
    """Hold ``lock`` for a writer of ``folder`` for its whole life; a second process is refused at
    once (:class:`FolderBusy`, naming the holder). The lock goes with the holder however it ends;
    while held, every commit into the folder first checks that the lock file is still the one held
    (:func:`check_held`)."""
    if not lock.acquire(blocking=False):
        raise FolderBusy(f"{folder} is being written by {lock.holder()} (it holds {lock.path}); let that run or "
                         f"merge finish, or end it, then start {who} again")
    key = lock.path.resolve()
    _HELD.setdefault(key, []).append(lock)
    try:
        yield lock
    finally:
        held = _HELD.get(key, [])
        if lock in held:
            held.remove(lock)
        if not held:
            _HELD.pop(key, None)
        lock.release()


def holds(lock_path: str | Path) -> bool:
    """Whether this process holds the folder lock whose file is ``lock_path`` (:func:`hold_folder`)."""
    return Path(lock_path).resolve() in _HELD


def check_held(lock_path: str | Path, folder: str | Path) -> None:
    """Before a write into ``folder``: :class:`LockLost` (one line) unless the lock file
    ``lock_path`` that this process holds is still the file on disk. A lock file deleted while
    held (``git clean -fX`` removes ignored files) no longer keeps another process out, so
    whatever the folder holds now may be another run's, which this write would drop."""
    held = _HELD.get(Path(lock_path).resolve())
    lock = held[-1] if held else None  # the innermost hold of this process (a test may nest two runs)
    if lock is None:
        raise LockLost(f"{folder}: this process does not hold its lock {lock_path}, so it does not write it; "
                       "run again")
    if not lock.still_held():
        raise LockLost(f"{folder}: its lock file {lock_path} was deleted or replaced while this run held it (git "
                       "clean -fX removes it), so another run may have written the folder meanwhile; nothing was "
                       "written: check the folder, then run again (finished pieces are in the cache)")


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
        write_cached(path, save, value)
    return value


def write_cached(path: Path, save: Callable[[Path, Any], Any], value: Any) -> None:
    """``save(path, value)``, with a failure of the file system (disk full, folder gone) turned into
    :class:`CacheWriteError`: one line naming the piece and the remedy."""
    try:
        save(Path(path), value)
    except OSError as err:
        raise CacheWriteError(f"{path}: this finished piece cannot be written ({err.strerror or err}); free space "
                              "on its file system or choose another --cache-dir, then run again") from None
