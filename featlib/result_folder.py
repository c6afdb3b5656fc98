"""Result folders written as a whole: a run killed at any moment leaves the old folder or the new one.

The command-line runs (``run_cmnist``, ``run_rounds``, ``run_wilds``, ``featlib.cost``) used to
write their CSVs into ``--out`` one by one as they went and ``provenance.json`` at the end, so a
killed rerun left new files beside old ones and a provenance that described neither.
:class:`ResultFolder` instead collects the files and, at :meth:`ResultFolder.commit`:

1. writes them into a hidden sibling, ``.<name>.partial-<host>-<pid>-<random>``, with
   ``provenance.json`` last, holding a manifest (``files``: bytes and SHA-256 of every file);
2. swaps the sibling into place: in one atomic step where the kernel offers it (Linux's
   ``renameat2(RENAME_EXCHANGE)``), else by renaming the old folder aside and the new one in;
3. deletes the old folder.

The folder is replaced as a whole: files that another program put in it do not survive
(``keep`` names entries carried over from the old folder, such as the cost benchmark's
``records/``). :func:`read_manifest` checks a folder against its manifest, so that a folder whose
files were changed or mixed afterwards is refused with the file named. Commands check their
``--out`` first with :func:`featlib.validation.check_writable` (``replace=True``).
"""
from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import secrets
import shutil
import socket
from pathlib import Path

import pandas as pd

from .cache import CorruptFileError
from .csv_io import frame_to_csv

PROVENANCE = "provenance.json"


def _host() -> str:
    return socket.gethostname().split(".")[0] or "host"


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 with RENAME_EXCHANGE); False where unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(parent: Path, name: str) -> None:
    """Delete siblings left by runs of this host that were killed while committing."""
    for kind in ("partial", "replaced"):
        for path in parent.glob(f".{name}.{kind}-{_host()}-*"):
            try:
                pid = int(path.name.rsplit("-", 2)[-2])
            except ValueError:
                continue
            if not _pid_alive(pid):
                shutil.rmtree(path, ignore_errors=True)


def _sibling(out: Path, kind: str) -> Path:
    return out.with_name(f".{out.name}.{kind}-{_host()}-{os.getpid()}-{secrets.token_hex(4)}")


def replace_folder(staging: Path, out: Path) -> None:
    """Make the folder ``staging`` the folder ``out`` (a sibling of it) and delete what ``out``
    was: atomically where the kernel can swap two paths, else by two renames."""
    for _ in range(10):  # another process may create ``out`` between our steps
        if not out.exists():
            try:
                os.rename(staging, out)
                return
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                continue
        if _exchange(staging, out):
            shutil.rmtree(staging, ignore_errors=True)  # now the old folder
            return
        old = _sibling(out, "replaced")
        try:
            os.rename(out, old)
        except FileNotFoundError:
            continue
        try:
            os.rename(staging, out)
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            shutil.rmtree(old, ignore_errors=True)
            continue
        shutil.rmtree(old, ignore_errors=True)
        return
    raise OSError(f"could not replace {out}: other processes kept writing it")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ResultFolder:
    """The files of one run's ``--out``, written as a whole by :meth:`commit`."""

    def __init__(self, out: str | Path, keep: tuple[str, ...] = ()):
        self.out = Path(out)
        self.keep = tuple(keep)
        self.files: dict[str, bytes] = {}

    def add_csv(self, name: str, frame: pd.DataFrame) -> None:
        self.add_bytes(name, frame_to_csv(frame).encode())

    def add_bytes(self, name: str, data: bytes) -> None:
        if "/" in name or name in (PROVENANCE, *self.keep):
            raise ValueError(f"{name!r} cannot be a file of the result folder")
        self.files[name] = data

    def commit(self, provenance: dict) -> Path:
        """Write every file and ``provenance.json`` (``provenance`` plus the manifest) into a
        sibling, then swap it in for ``out``."""
        record = {**provenance, "files": {name: {"bytes": len(data), "sha256": _digest(data)}
                                          for name, data in self.files.items()}}
        parent = self.out.absolute().parent
        parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(parent, self.out.name)
        staging = _sibling(self.out.absolute(), "partial")
        staging.mkdir()
        try:
            for name, data in self.files.items():
                (staging / name).write_bytes(data)
            (staging / PROVENANCE).write_text(json.dumps(record, indent=2, default=str) + "\n")
            for name in self.keep:
                if (self.out / name).exists():
                    os.rename(self.out / name, staging / name)
            replace_folder(staging, self.out.absolute())
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self.out


def read_manifest(directory: str | Path, remedy: str | None = None) -> dict | None:
    """The provenance record of a result folder (None when it has none), after checking every file
    its manifest lists: present, of the recorded size and checksum. :class:`CorruptFileError`
    naming the first file that is not (``remedy`` says what to do). A folder written before
    manifests (no ``files`` entry) is returned unchecked."""
    directory = Path(directory)
    path = directory / PROVENANCE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptFileError(path, f"it is not valid JSON ({err})", remedy) from None
    if not isinstance(record, dict):
        raise CorruptFileError(path, "it does not hold a provenance record", remedy)
    for name, entry in (record.get("files") or {}).items():
        file = directory / name
        if not file.exists():
            raise CorruptFileError(file, "it is listed in provenance.json but missing", remedy)
        data = file.read_bytes()
        if len(data) != entry.get("bytes") or _digest(data) != entry.get("sha256"):
            raise CorruptFileError(file, "it is not the file provenance.json lists (changed after the run, "
                                         "or written by another, interrupted run)", remedy)
    return record
