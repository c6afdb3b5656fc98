"""Argument checks that fail early with a message naming the parameter and its valid values.

Every public entry point of featlib (and every notebook, through its first code cell) calls
these before any tensor is built, so that a bad value never surfaces as a stack trace from
deep inside torch.
"""
from __future__ import annotations

import math
import numbers
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


#: The largest seed: numpy's generators take seeds below 2**32 (a larger one failed mid-training).
MAX_SEED = 2**32 - 1


def check_seed(name: str, value: Any) -> int:
    """A random seed: an integer in [0, :data:`MAX_SEED`]."""
    return check_int(name, value, minimum=0, maximum=MAX_SEED)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_probability(name: str, value: Any) -> float:
    """A probability strictly inside (0, 1), as Rad(delta) and the colour-flip rates need."""
    if not _is_real(value) or math.isnan(value) or not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be a probability in the open interval (0, 1); got {value!r}")
    return float(value)


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number inside [minimum, maximum] (either bound may be open-ended)."""
    if not _is_int(value) or (minimum is not None and value < minimum) or (
        maximum is not None and value > maximum
    ):
        low = "-inf" if minimum is None else str(minimum)
        high = "inf" if maximum is None else str(maximum)
        raise ValueError(f"{name} must be an integer in [{low}, {high}]; got {value!r}")
    return int(value)


def check_positive(name: str, value: Any, allow_zero: bool = False) -> float:
    """A finite real number > 0 (or >= 0 with allow_zero)."""
    ok = _is_real(value) and math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}; got {value!r}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """True or False (numpy booleans too), not a truthy stand-in such as 1 or "yes"."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """One of a fixed set of names (registries use this for unknown keys)."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_sequence(name: str, value: Any, min_length: int = 1, unique: bool = False) -> Sequence:
    """A list or tuple with at least ``min_length`` entries (with ``unique``: none repeated)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) < min_length:
        raise ValueError(f"{name} must be a list with at least {min_length} entries; got {value!r}")
    if unique:
        seen, repeated = [], []
        for item in value:
            if item in seen and item not in repeated:
                repeated.append(item)
            seen.append(item)
        if repeated:
            raise ValueError(f"{name} must not repeat a value; got {list(value)!r} ({', '.join(map(repr, repeated))} "
                             f"more than once)")
    return value


def memory_bytes(device: Any = None) -> int | None:
    """The total memory of ``device`` (default: featlib's device): the GPU's for CUDA, the
    machine's RAM otherwise; None where it cannot be read."""
    import torch

    from .device import get_device

    device = torch.device(device) if device is not None else get_device()
    if device.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(n: float) -> str:
    """``1.5 GiB``, ``300 MiB``..."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_fits_in_memory(what: str, needed: float, device: Any = None, available: int | None = None) -> None:
    """Raise ValueError when ``needed`` bytes (an estimate, at least what ``what`` takes) exceed the
    total memory of ``device``: a size that cannot fit is refused before anything is allocated,
    with the estimate, instead of ending in a MemoryError after minutes of work."""
    available = memory_bytes(device) if available is None else available
    if available is not None and needed > available:
        raise ValueError(f"{what} needs at least {format_bytes(needed)} of memory, more than the "
                         f"{format_bytes(available)} this machine's device has; choose smaller sizes")


def check_writable(name: str, value: Any, replace: bool = False) -> Path:
    """A folder that can be written, as a Path: not a file, and the folder itself (or, while it
    does not exist, its nearest existing parent) accepts a new file. With ``replace`` the folder
    is to be replaced as a whole (a result folder), so its parent must accept one. A probe file
    is created and removed; nothing else is. Outputs are checked with it before any work, so
    that an unwritable one does not surface after hours of training."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(f"{name} must be a folder path; got {value!r}")
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} {path} is a file, not a folder")
    target = path.absolute() if path.exists() and not replace else path.absolute().parent
    while not target.exists():
        target = target.parent
    if not target.is_dir():
        raise ValueError(f"{name} {path} cannot be created: {target} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as err:
        raise ValueError(f"{name} {path} cannot be written: {target} does not accept new files "
                         f"({err.strerror or err})") from None
    return path
