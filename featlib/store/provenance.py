"""What a committed results file records about how it was made: command, commit, device, time.

:func:`git_commit` names featlib's *own* commit: the HEAD of the git checkout whose top level is
the folder holding the ``featlib`` package and which tracks it. When featlib runs from anything
else (a pip install, a copy of the tree inside another repository, an unpacked archive) it says
``"unknown"``; the version (``featlib_version`` in :func:`provenance`) still identifies the code.
There, and only there, ``FEATLIB_COMMIT`` names the commit instead: a GPU sitting sets it after
checking every tracked file of the copied tree against that commit (``benchmarks/gpu_sitting.py``).
An earlier version walked up to whatever enclosing repository it found and recorded that
repository's HEAD.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch

from .. import __version__
from ..device import describe_device, get_device

UNKNOWN_COMMIT = "unknown"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def featlib_root() -> Path:
    """The folder holding the ``featlib`` package (the repository root in a checkout)."""
    return Path(__file__).resolve().parents[2]  # featlib/store/provenance.py


def git_commit(root: str | Path | None = None) -> str:
    """featlib's commit (``+uncommitted changes`` when tracked files differ from it), or
    ``"unknown"`` when ``root`` (default: :func:`featlib_root`) is not the top level of a git
    checkout that tracks ``featlib/__init__.py`` (there ``FEATLIB_COMMIT``, when set: a copied tree
    checked file by file against that commit; ValueError when it is no 40-digit commit)."""
    root = Path(root).resolve() if root is not None else featlib_root()
    try:
        if Path(_git(root, "rev-parse", "--show-toplevel")).resolve() != root:
            return _stated_commit()  # a copy inside some other repository
        _git(root, "ls-files", "--error-unmatch", "featlib/__init__.py")
        head = _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return _stated_commit()
    return head + ("+uncommitted changes" if dirty else "")


def _stated_commit() -> str:
    """``FEATLIB_COMMIT`` where featlib is no checkout of its own, else ``"unknown"``."""
    stated = os.environ.get("FEATLIB_COMMIT")
    if stated is None:
        return UNKNOWN_COMMIT
    if len(stated) != 40 or any(c not in "0123456789abcdef" for c in stated):
        raise ValueError(f"FEATLIB_COMMIT={stated!r} is no 40-digit commit: unset it, or set it to the commit the "
                         "copied tree was checked against (benchmarks/gpu_sitting.py)")
    return stated


def command_line(module: str, argv: list[str] | None) -> str:
    """``python -m <module> <args>`` as the user typed it (``argv`` None: ``sys.argv[1:]``)."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python", "-m", module, *map(str, args)])


#: What the layers above add to every provenance record, each a function returning a dict of
#: fields: the training package adds ``float32_matmul`` (:func:`featlib.training.precision.process_precision`)
#: and ``compiled_losses`` (:func:`featlib.training.fast_stage.compile_record`) when it is imported.
#: The record asks them, so I/O imports nothing above it.
PROCESS_RECORDERS: list[Callable[[], dict]] = []


def add_process_recorder(recorder: Callable[[], dict]) -> Callable[[], dict]:
    """Register ``recorder`` (a function returning fields of the process) for :func:`provenance`."""
    if recorder not in PROCESS_RECORDERS:
        PROCESS_RECORDERS.append(recorder)
    return recorder


def provenance(command: str, started: float, device: torch.device | None = None, *, commit: str | None = None,
               **extra) -> dict:
    """The common record: command, commit, featlib and torch versions, device, machine, wall time
    since ``started`` (a ``time.perf_counter()`` value) and the finishing time; then the fields of
    :data:`PROCESS_RECORDERS` (the process-wide float32 matrix-product precision, ``float32_matmul``:
    "fp32", or "tf32" when TF32 was on, an OOD stage recording its own named precision; and, where
    the process compiled OOD-stage losses, ``compiled_losses``); ``extra`` after.

    ``commit``: :func:`git_commit` taken when the run *started* (pass it: the checkout may move
    while a long run goes on); None takes it now."""
    device = device or get_device()
    record = {
        "command": command,
        "commit": git_commit() if commit is None else commit,
        "featlib_version": __version__,
        "torch": torch.__version__,
        "device": describe_device(device),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "machine": platform.platform(),
        "wall_time_s": time.perf_counter() - started,
        "finished_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    for recorder in PROCESS_RECORDERS:
        record.update(recorder())
    return {**record, **extra}
