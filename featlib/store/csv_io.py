"""CSV text whose floats survive being written, read back and written again, digit for digit.

pandas writes a float64 with its shortest round-trip representation (``repr``), but its default
CSV reader parses about a third of such numbers one unit in the last place off (its fast float
parser is not exact). A resumed run reads its finished pieces back and writes them into its
results again, so its files differed from an uninterrupted run's in the last digit. Every CSV
that featlib writes goes through :func:`frame_to_csv` / :func:`write_csv` and every CSV it
reads back through :func:`read_csv`, which parses floats exactly (``float_precision=
"round_trip"``): a value read back is the value written, so it is written again identically.
"""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from .atomic import atomic_write_text

#: How floats are written: None is pandas' default, the shortest text that reads back exactly
#: (Python's ``repr``). Kept in one place so that every writer uses the same.
FLOAT_FORMAT = None


def frame_to_csv(frame: pd.DataFrame) -> str:
    """The CSV text of ``frame`` (no index, floats as :data:`FLOAT_FORMAT`)."""
    return frame.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def write_csv(path: str | Path, frame: pd.DataFrame) -> Path:
    """Write ``frame`` to ``path`` atomically (see :mod:`featlib.store.atomic`)."""
    return atomic_write_text(path, frame_to_csv(frame))


def read_csv(source: str | Path | io.StringIO, **kwargs) -> pd.DataFrame:
    """``pandas.read_csv`` with floats parsed exactly (any other keyword passes through)."""
    kwargs.setdefault("float_precision", "round_trip")
    return pd.read_csv(source, **kwargs)
