"""Argument checks that fail early with a message naming the parameter and its valid values.

Every public entry point of featlib (and every notebook, through its first code cell) calls
these before any tensor is built, so that a bad value never surfaces as a stack trace from
deep inside torch.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np


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


def check_sequence(name: str, value: Any, min_length: int = 1) -> Sequence:
    """A list or tuple with at least ``min_length`` entries."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) < min_length:
        raise ValueError(f"{name} must be a list with at least {min_length} entries; got {value!r}")
    return value
