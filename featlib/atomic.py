"""Write a file so that readers never see half of it: write beside it, then rename.

Long runs write their finished pieces this way, so a run killed mid-write leaves either the old
file or the new one, never a truncated one that a resumed run would trust.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path next to ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)
    return path
