"""Result folders written as a whole, into folders that hold nothing else, and read back checked.

The command-line runs (``run_cmnist``, ``run_rounds``, ``run_wilds``, ``gap_studies``,
``featlib.cost``) collect their files in a :class:`ResultFolder` and, at :meth:`ResultFolder.commit`:

1. write them into a hidden sibling, ``.<name>.partial-<host>-<pid>-<random>``, with
   ``provenance.json`` last, holding the command's ``kind`` and a manifest (``files``: bytes and
   SHA-256 of every file);
2. carry over, as hard links (copies where links cannot be made), every entry of the old folder
   that its manifest does not list (the cost benchmark's ``records/``, a README): nothing that a
   run did not write is ever deleted, and nothing leaves ``--out`` before the new folder is in;
   such an entry with the name of a file the run writes is the user's, and the commit is refused
   (:class:`NotOurs`, one line) rather than overwrite it;
3. swap the sibling into place: in one atomic step where the kernel offers it (Linux's
   ``renameat2(RENAME_EXCHANGE)``), else by renaming the old folder aside and the new one in;
4. delete the old folder.

:func:`check_out` guards ``--out`` before any work: a command writes only into a folder that is
absent, empty, or a results folder of its own kind (its ``provenance.json`` says so); it refuses
the working directory and its ancestors, a git checkout, the library's own checkout, the cache
folder or anything holding it, and other folders (one line naming the value and the remedy).

Every command that writes a folder holds its lock (:func:`folder_lock`, ``.<name>.lock`` beside it)
from its checks to its commit, so that no second run drops its files; :meth:`ResultFolder.commit`
takes the lock itself where the caller holds none, checks that a held lock file is still the one
on disk (a lock file deleted while held, by ``git clean -fX``, keeps no one out:
:class:`featlib.store.files.LockLost`), and checks the folder's kind again under it
(:class:`KindChanged`).

:func:`read_folder` reads a result folder back: each file's bytes once (through one handle on the
folder, so that a commit racing the read cannot mix two runs), checked against the manifest; the
loaders parse those bytes (:func:`frame`). A folder without a manifest is refused with how to
re-create it, and files the manifest does not list are never read.
"""
from __future__ import annotations

import ctypes
import errno
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import socket
import time
from pathlib import Path

import pandas as pd

from .atomic import atomic_write, pid_alive
from contextlib import nullcontext

from .files import CorruptFileError, PieceLock, check_held, hold_folder, holds, read_regular, accuracy_problem
from .csv_io import frame_to_csv, read_csv
from .paths import inside

PROVENANCE = "provenance.json"
#: Room the hidden siblings need beside ``--out``'s own name (``.<name>.partial-<host>-<pid>-<hex>``).
_NAME_LIMIT = 255


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


def _remove_stale(parent: Path, name: str) -> None:
    """Tidy siblings left by runs of this host that were killed while committing: a folder renamed
    aside (``replaced``) while ``name`` is missing is put back first; the rest is deleted (every
    entry a run did not write is also in ``name``, linked there before the swap)."""
    for kind in ("replaced", "partial"):
        for path in sorted(parent.glob(f".{name}.{kind}-{_host()}-*")):
            try:
                pid = int(path.name.rsplit("-", 2)[-2])
            except ValueError:
                continue
            if pid_alive(pid):
                continue
            if kind == "replaced" and not (parent / name).exists():
                os.rename(path, parent / name)
                continue
            if path.is_symlink():
                path.unlink()
            else:
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


def _link_tree(source: Path, target: Path) -> None:
    """``target`` as a second name for everything under ``source`` (hard links; copies where the
    file system has none; symbolic links copied as links)."""
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
    elif source.is_dir():
        target.mkdir()
        for entry in source.iterdir():
            _link_tree(entry, target / entry.name)
    else:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)


def kind_of(record: dict) -> str | None:
    """The command that wrote a result folder: its ``kind``, or for folders written before kinds
    were recorded, the module of its recorded ``python -m <module> ...`` command."""
    if isinstance(record.get("kind"), str):
        return record["kind"]
    words = str(record.get("command", "")).split()
    return words[words.index("-m") + 1] if "-m" in words[:-1] else None


def _listed(record) -> set[str]:
    files = record.get("files") if isinstance(record, dict) else None
    return set(files) if isinstance(files, dict) else set()


def _read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


class NotOurs(ValueError):
    """A file of the result folder that no run wrote (its manifest does not list it) has the name of
    a file this run writes: it is the user's, and is not overwritten (one line naming it)."""


class KindChanged(ValueError):
    """The folder was taken by another command's results while this run went on (one line): its
    commit would drop them, so it does not happen."""


class ResultFolder:
    """The files of one run's ``--out``, written as a whole by :meth:`commit`. ``kind`` names the
    command (``featlib.cli.run_cmnist``...): :func:`check_out` lets a later run of the same
    kind replace the folder, and refuses every other."""

    def __init__(self, out: str | Path, keep: tuple[str, ...] = (), kind: str | None = None):
        self.out = Path(out)
        self.keep = tuple(keep)
        self.kind = kind
        self.files: dict[str, bytes] = {}

    def add_csv(self, name: str, frame: pd.DataFrame) -> None:
        self.add_bytes(name, frame_to_csv(frame).encode())

    def add_bytes(self, name: str, data: bytes) -> None:
        if "/" in name or name.startswith(".") or name in (PROVENANCE, *self.keep):
            raise ValueError(f"{name!r} cannot be a file of the result folder")
        self.files[name] = data

    def commit(self, provenance: dict) -> Path:
        """Write every file and ``provenance.json`` (``provenance``, the kind and the manifest)
        into a sibling, link the old folder's entries that no run wrote into it, then swap it in
        for ``out`` (for a symbolic link: for the folder it points to)."""
        record = {**({"kind": self.kind} if self.kind else {}), **provenance,
                  "files": {name: {"bytes": len(data), "sha256": _digest(data)} for name, data in self.files.items()}}
        target = self.out.resolve()
        lock = PieceLock(target)
        if holds(lock.path):  # held since the run's checks: still ours? (a deleted lock file keeps no one out)
            check_held(lock.path, self.out)
            held = nullcontext()
        else:  # a command that holds no lock while it works still commits under one
            held = hold_folder(lock, self.out, "this run")
        with held:
            self._check_kind(target)  # again, under the lock: another command may have written it meanwhile
            return self._commit_locked(target, record)

    def _check_kind(self, target: Path) -> None:
        """:class:`KindChanged` where ``target`` now holds another command's results."""
        if self.kind is None or not target.is_dir():
            return
        found = _read_record(target / PROVENANCE)
        if found is not None and kind_of(found) != self.kind:
            raise KindChanged(f"{self.out} now holds the results of {kind_of(found) or 'another program'}, written while this run went on; "
                              f"this run's results would replace them, so they are not written: give another --out "
                              "and run again (finished pieces are in the cache)")

    def _commit_locked(self, target: Path, record: dict) -> Path:
        if target.is_dir():  # an entry no run wrote is carried over, never overwritten
            listed = _listed(_read_record(target / PROVENANCE))
            theirs = sorted(n for n in self.files if n not in listed and os.path.lexists(target / n))
            if theirs:
                raise NotOurs(f"{self.out / theirs[0]} is not a file of an earlier run (provenance.json does not list "
                              "it), and this run writes a file of that name: move it out of the folder, or choose "
                              "another --out, then run again (finished pieces are kept)")
        parent = target.parent
        parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(parent, target.name)
        staging = _sibling(target, "partial")
        try:
            staging.mkdir()
            for name, data in self.files.items():
                (staging / name).write_bytes(data)
            (staging / PROVENANCE).write_text(json.dumps(record, indent=2, default=str) + "\n")
            if target.is_dir():
                ours = _listed(_read_record(target / PROVENANCE)) | {PROVENANCE} | set(self.files)
                for entry in target.iterdir():
                    if entry.name not in ours:  # not written by a run: it stays
                        _link_tree(entry, staging / entry.name)
            replace_folder(staging, target)
        except BaseException as err:
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(err, OSError) and not err.filename:  # a write's error names no file: name the folder
                raise OSError(err.errno, err.strerror or str(err), str(self.out)) from err
            raise
        return self.out


def folder_lock(out: str | Path, who: str = "this run"):
    """Hold the result folder ``out`` for a run that adds to it (``gap_studies``, ``run_rounds``:
    they read the folder, merge and commit it whole) from its checks to its commit, so that two
    runs never both read the old folder and the later commit drops the earlier run's files. The
    lock is ``.<name>.lock`` beside the folder (the folder itself is swapped at the commit); a second
    run is refused at once, in one line naming the holder
    (:func:`featlib.store.files.hold_folder`)."""
    target = Path(out).resolve()
    return hold_folder(PieceLock(target), Path(out), who)


def _refuse(name: str, value, reason: str) -> None:
    raise ValueError(f"{name} {value} {reason}")


def check_out(name: str, value, kind: str, *, protect: dict | None = None, keep: tuple[str, ...] = ()) -> Path:
    """``--out`` of a command of ``kind``, checked before any work (ValueError, one line naming the
    value and the remedy): writable (:func:`featlib.validation.check_writable`), a name short enough
    for the hidden siblings of a commit, and a folder that is absent, empty, holds only ``keep``
    entries (to which a run adds; the refusal of other entries says so), or holds a result folder of
    ``kind``. Refused: the working directory and its
    ancestors, a git checkout, the checkout holding featlib, and each folder of ``protect``
    (``{"--cache-dir": path}``) or anything holding it."""
    from .provenance import featlib_root
    from ..validation import check_writable

    path = check_writable(name, value, replace=True)
    target = path.resolve()
    room = len(f"..replaced-{_host()}-{4 * 10**6}-{'0' * 8}".encode())
    if len(target.name.encode()) + room > _NAME_LIMIT:
        _refuse(name, value, f"has a name of {len(target.name.encode())} bytes; a result folder's name may have at most "
                             f"{_NAME_LIMIT - room} (its commit writes a longer hidden sibling): choose a shorter name")
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        _refuse(name, value, "is the working directory or holds it; a run replaces its --out as a whole: "
                             "name a new or empty folder, such as results/<name>")
    library = featlib_root()
    if target == library or target in library.parents or (target / ".git").exists():
        _refuse(name, value, "holds a git checkout (or featlib itself); a run replaces its --out as a whole: "
                             "name a new or empty folder, such as results/<name>")
    for other, folder in (protect or {}).items():
        if folder is None:
            continue
        folder = Path(folder).resolve()
        if target == folder or target in folder.parents:
            _refuse(name, value, f"is or holds {other} {folder}: name a folder apart from it")
    if not target.is_dir():
        return path
    entries = sorted(e.name for e in target.iterdir())
    if not entries or set(entries) <= set(keep):
        return path
    if PROVENANCE not in entries:
        stray = [e for e in entries if e not in keep]
        shown = ", ".join(stray[:3]) + (", ..." if len(stray) > 3 else "")
        command = kind.rsplit(".", 1)[-1]  # the command's name (its kind names the module that first wrote the format)
        remedy = ("a run replaces its --out as a whole: name a new or empty folder" if not keep else
                  f"a run adds only to a folder that holds nothing but {', '.join(keep)}: move "
                  f"{'it' if len(stray) == 1 else 'them'} out, or name a new or empty folder")
        _refuse(name, value, f"holds files that no {command} run wrote ({shown}); {remedy}")
    record = _read_record(target / PROVENANCE)
    found = kind_of(record) if record is not None else None
    if found != kind:
        what = f"the results of {found}" if found else "a provenance.json that names no featlib command"
        _refuse(name, value, f"holds {what}, not of {kind}: name a new or empty folder")
    return path


# -- reading back --------------------------------------------------------------------------------
_SHA = re.compile(r"[0-9a-f]{64}")


def _read_at(dir_fd: int, name: str) -> bytes | None:
    try:
        return read_regular(name, dir_fd=dir_fd)  # a FIFO at a file's name is refused, not waited on
    except FileNotFoundError:
        return None


def _read_once(directory: Path, dir_fd: int, remedy: str | None, kind: str | None) -> tuple[dict, dict[str, bytes]]:
    path = directory / PROVENANCE
    raw = _read_at(dir_fd, PROVENANCE)
    if raw is None:
        raise CorruptFileError(path, "it is missing, so the folder's files cannot be checked", remedy)
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptFileError(path, f"it is not valid JSON ({err})", remedy) from None
    if not isinstance(record, dict):
        raise CorruptFileError(path, "it does not hold a provenance record", remedy)
    if kind is not None and kind_of(record) not in (kind, None):
        raise CorruptFileError(path, f"it records a run of {kind_of(record)}, not of {kind}", remedy)
    manifest = record.get("files")
    if not isinstance(manifest, dict) or not manifest:
        raise CorruptFileError(path, "it lists no files (its manifest is missing or empty), so none can be checked",
                               remedy)
    files = {}
    for name, entry in manifest.items():
        if (not isinstance(name, str) or not name or "/" in name or name.startswith(".") or name == PROVENANCE
                or not isinstance(entry, dict) or not isinstance(entry.get("bytes"), int)
                or not isinstance(entry.get("sha256"), str) or not _SHA.fullmatch(entry["sha256"])):
            raise CorruptFileError(path, f"its manifest entry {str(name)[:80]!r} is malformed "
                                         "(it must map a file name to its bytes and sha256)", remedy)
        try:
            inside(directory, name, what="a manifest entry")  # a link out of the folder is no file of it
        except ValueError as err:
            raise CorruptFileError(path, str(err), remedy) from None
        data = _read_at(dir_fd, name)
        if data is None:
            raise CorruptFileError(directory / name, "it is listed in provenance.json but missing", remedy)
        if len(data) != entry["bytes"] or _digest(data) != entry["sha256"]:
            raise CorruptFileError(directory / name, "it is not the file provenance.json lists (changed after the "
                                                     "run, or written by another, interrupted run)", remedy)
        files[name] = data
    return record, files


def read_folder(directory: str | Path, remedy: str | None = None, kind: str | None = None
                ) -> tuple[dict, dict[str, bytes]] | None:
    """``(provenance record, {file name: bytes})`` of a result folder, every file read once and
    checked against the manifest; None when the folder is absent or empty. :class:`CorruptFileError`
    (``remedy`` says what to do) when it has no manifest, a malformed one, a file that is missing or
    differs, or (``kind``) was written by another command. The files are read through one handle on
    the folder, so a commit that replaces it meanwhile is either not seen or seen whole (the read
    is then repeated)."""
    directory = Path(directory)
    # a read that a commit overtook is repeated: up to 5 times, and for as long as commits keep
    # replacing the folder under it, up to a few seconds (a writer committing in a tight loop)
    attempts, deadline = 5, time.monotonic() + 5.0
    attempt = 0
    while True:
        attempt += 1
        last = attempt >= attempts and time.monotonic() > deadline  # for reads a commit overtook
        try:
            dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except FileNotFoundError:
            if attempt >= attempts:  # absent, not between two renames: no folder
                return None
            time.sleep(0.01)  # between the two renames of a commit without an atomic swap
            continue
        except NotADirectoryError:
            raise CorruptFileError(directory, "it is a file, not a result folder", remedy) from None
        try:
            if os.listdir(dir_fd):
                return _read_once(directory, dir_fd, remedy, kind)
            if last or not _replaced(directory, dir_fd):
                return None
        except CorruptFileError:
            if last or not _replaced(directory, dir_fd):
                raise
        finally:
            os.close(dir_fd)


def _replaced(directory: Path, dir_fd: int) -> bool:
    """Whether ``directory`` is no longer the folder ``dir_fd`` was opened on (a commit swapped it)."""
    try:
        return os.stat(directory).st_ino != os.fstat(dir_fd).st_ino
    except FileNotFoundError:
        return True


def read_manifest(directory: str | Path, remedy: str | None = None) -> dict | None:
    """The provenance record of a result folder (None when absent or empty), after checking every
    file of its manifest (:func:`read_folder`)."""
    found = read_folder(directory, remedy)
    return None if found is None else found[0]


def frame(files: dict[str, bytes], directory: str | Path, name: str, remedy: str | None = None,
          **read_kwargs) -> pd.DataFrame:
    """The CSV ``name`` of a folder read by :func:`read_folder`, parsed from the checked bytes (an
    empty file, as a run with no such rows writes, is an empty frame). :class:`CorruptFileError`
    when the manifest does not list it."""
    path = Path(directory) / name
    if name not in files:
        raise CorruptFileError(path, "it is not in provenance.json's manifest, so it is not read", remedy)
    data = files[name]
    if not data.strip():
        return pd.DataFrame()
    try:
        parsed = read_csv(io.BytesIO(data), **read_kwargs)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise CorruptFileError(path, f"it is not a readable CSV file ({type(err).__name__}: {err})", remedy) from None
    if problem := accuracy_problem(parsed):
        raise CorruptFileError(path, problem, remedy)
    return parsed


def write_beside(directory: str | Path, files: dict[str, bytes], record: dict) -> dict:
    """Write ``files`` into ``directory`` (each atomically) and then ``provenance.json``: ``record``
    with the manifest of those files (bytes and SHA-256), for a folder that also holds entries
    of its own which a commit must not replace (the variants' pieces of a path comparison). Returns
    the record written."""
    from .atomic import atomic_write_text

    directory = Path(directory)
    for name, data in files.items():
        atomic_write(directory / name, lambda tmp, data=data: tmp.write_bytes(data))
    record = {**record, "files": {n: {"bytes": len(d), "sha256": _digest(d)} for n, d in files.items()}}
    atomic_write_text(directory / PROVENANCE, json.dumps(record, indent=2, default=str) + "\n")
    return record


def add_manifest(directory: str | Path, kind: str, names: list[str], note: str) -> dict:
    """Give a result folder committed before manifests (``results/cost/...``) its manifest: the
    ``kind`` and the bytes and SHA-256 of ``names``, with ``note`` saying when and why (the files
    are those in git, whose history holds how they were made). Returns the new record."""
    directory = Path(directory)
    record = _read_record(directory / PROVENANCE) or {}
    record = {"kind": kind, **{k: v for k, v in record.items() if k not in ("kind", "files")},
              "manifest_note": note,
              "files": {n: {"bytes": len(d), "sha256": _digest(d)} for n in names for d in [(directory / n).read_bytes()]}}
    from .atomic import atomic_write_text

    atomic_write_text(directory / PROVENANCE, json.dumps(record, indent=2, default=str) + "\n")
    return record
