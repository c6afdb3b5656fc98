"""Write a file so that readers never see half of it: write beside it, then rename.

Long runs write their finished pieces this way, so a run killed mid-write leaves either the old
file or the new one, never a truncated one that a resumed run would trust.

Any number of processes may write the same file at once: each writes its own temporary file
(``.<name>.<host>.<pid>.<random>.tmp`` in the same folder, so the rename stays on one file
system) and :func:`os.replace` puts it in place atomically; the last writer wins and every
reader sees one writer's complete file. (An earlier version used one ``<name>.tmp`` for every
writer, so two writers renamed each other's half-written file into place, or crashed.)

A process killed between writing its temporary file and the rename leaves that file behind;
the next write of the same file removes the temporaries of this host's dead processes
(:func:`remove_stale_temporaries`), so killed WILDS checkpoints do not pile up.

The rename protects against a process being killed, not against a power cut: the data are not
``fsync``-ed.
"""
from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable
from pathlib import Path


def temporary_sibling(path: str | Path, suffix: str = ".tmp") -> Path:
    """A fresh name next to ``path``, unique to this host, process and call (nothing is created)."""
    path = Path(path)
    host = socket.gethostname().split(".")[0] or "host"
    return path.with_name(f".{path.name}.{host}.{os.getpid()}.{secrets.token_hex(4)}{suffix}")


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` of this host still exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(path: str | Path, suffix: str = ".tmp") -> list[Path]:
    """Delete the temporary siblings of ``path`` (:func:`temporary_sibling` names ending in
    ``suffix``) that processes of this host, no longer alive, left behind (killed between writing
    and renaming); returns them."""
    path = Path(path)
    host = socket.gethostname().split(".")[0] or "host"
    removed = []
    prefix = f".{path.name}.{host}."
    try:
        candidates = [p for p in path.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(suffix)]
    except FileNotFoundError:
        return removed
    for tmp in candidates:
        pid = tmp.name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path of its own next to ``path``, then rename it to
    ``path``; the temporary file is removed if ``write`` fails, and those of killed processes
    before it is made."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = temporary_sibling(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and not err.filename:  # a write's error (a full disk) names no file: name it
            raise OSError(err.errno, err.strerror or str(err), str(path)) from err
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """:func:`atomic_write` of a text (UTF-8)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
