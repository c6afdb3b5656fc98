"""Paths named by a file (a manifest, a record) kept inside the folder they belong to.

A manifest says which files a folder holds: ``results/manifest.json`` for the Colab fetch
(:mod:`featbook.committed`), ``provenance.json`` for a result folder
(:mod:`featlib.store.folders`), the piece records of a Table 2 folder
(:mod:`featlib.experiments.table2_pieces`). Such a file may come from a repository a notebook
names, so its paths are input: :func:`inside` resolves one below its folder and refuses it
(``ValueError``, one line naming it) when it is absolute, climbs out with ``..``, or leads out
through a link.
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath


def inside(root: str | Path, relative, *, what: str = "a path") -> Path:
    """``root / relative``, refused unless ``relative`` is a relative path (``/``-separated, no
    ``..``, no empty or ``.`` parts, no backslash or NUL) that stays inside ``root`` once resolved
    (links followed)."""
    if not isinstance(relative, str) or not relative:
        raise ValueError(f"{what} {relative!r} is not a file name: refused (a manifest names files by relative path)")
    parts = relative.split("/")
    if ("\\" in relative or "\0" in relative or PurePosixPath(relative).is_absolute()
            or PureWindowsPath(relative).is_absolute() or PureWindowsPath(relative).drive
            or any(part in ("", ".", "..") for part in parts)):
        raise ValueError(f"{what} {relative!r} leads out of {root} (absolute, '..', or an empty part): refused")
    base = Path(root).resolve()
    target = base.joinpath(*parts)
    try:
        target.resolve().relative_to(base)
    except ValueError:
        raise ValueError(f"{what} {relative!r} leads out of {root} through a link: refused") from None
    return Path(root).joinpath(*parts)
