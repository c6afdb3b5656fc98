"""Numbers and values as the book's prose writes them: the one formatting helper of the pages.

A chapter's text quotes values that its code recorded (:func:`featbook.record.record`). Glued
raw, a dict shows as ``{'cmnist': 1.426, 'wilds': 1.202}`` and a float as
``0.6666666666666666``. Every value that a page's prose quotes goes through these functions
instead, and :func:`say` records the finished phrase under a name the text quotes with
``{glue:text}`name```:

    say("ifeat_time_text", by_label(ifeat_time, ratio, {"cmnist": "ColoredMNIST", "wilds": "WILDS"}))
    # -> "1.43× on ColoredMNIST and 1.20× on WILDS"

Every function returns plain text: no braces, no reprs, no paths, at most a few decimals.
``featbook.leaks`` scans the rendered book for anything that slipped through.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: What a missing value reads as, in tables and prose.
MISSING = "–"
#: Non-breaking space: keeps "21.10 ± 0.60" and "3 seeds" on one line.
NBSP = "\u00a0"


def _is_missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def number(x: float | None, digits: int = 2, sign: bool = False) -> str:
    """``x`` with ``digits`` decimals ("0.93"); very small or large magnitudes in scientific
    notation ("3.2e-05"); a leading "+" with ``sign``."""
    if _is_missing(x):
        return MISSING
    x = float(x)
    if x != 0 and (abs(x) < 10 ** -digits or abs(x) >= 1e6):
        return scientific(x, max(1, digits - 1), sign)
    text = f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"
    return text.replace("-", "−")  # a minus sign, not a hyphen


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def scientific(x: float | None, digits: int = 1, sign: bool = False) -> str:
    """``x`` as a reader writes a very small or large number: 7.3e-05 -> "7.3 × 10⁻⁵" (never the
    "e-05" of code); "0" for zero; a leading "+" with ``sign``."""
    if _is_missing(x):
        return MISSING
    x = float(x)
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    if sign and not mantissa.startswith("-"):
        mantissa = "+" + mantissa
    power = str(int(exponent)).translate(_SUPERSCRIPT)
    return f"{mantissa.replace('-', '−')}{NBSP}×{NBSP}10{power}"


def power(x: float | None, plain_below: float = 1000) -> str:
    """A grid value as the paper writes it, in a reader's notation: 1e4 -> "10⁴", 5e3 -> "5 × 10³",
    0.01 -> "10⁻²" (never "1e4"); an integer below ``plain_below`` as it is ("100", "50"; with
    ``plain_below=1`` every power of ten is a power: 10 -> "10¹"); anything else as :func:`number`."""
    if _is_missing(x):
        return MISSING
    x = float(x)
    if x == int(x) and 0 <= x < plain_below:
        return integer(int(x))
    mantissa, exponent = f"{x:.0e}".split("e")
    if x <= 0 or float(f"{mantissa}e{exponent}") != x:
        return number(x)
    power_text = f"10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    return power_text if mantissa == "1" else f"{mantissa}{NBSP}×{NBSP}{power_text}"


def integer(n: int | None) -> str:
    """An integer with thousands separators ("50,000")."""
    return MISSING if _is_missing(n) else f"{int(n):,}"


def percent(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.7057 -> "70.6%"."""
    return MISSING if _is_missing(x) else number(100 * float(x), digits) + "%"


def points(x: float | None, digits: int = 1, sign: bool = True) -> str:
    """A difference of two fractions in percentage points: 0.012 -> "+1.2 points"."""
    return MISSING if _is_missing(x) else f"{number(100 * float(x), digits, sign)}{NBSP}points"


def ratio(x: float | None, digits: int = 2) -> str:
    """A multiple: 1.426 -> "1.43×"."""
    return MISSING if _is_missing(x) else number(x, digits) + "×"


def mean_std(mean: float | None, std: float | None, digits: int = 2, scale: float = 1.0) -> str:
    """"mean ± std" on one line (non-breaking spaces); ``scale=100`` for fractions shown as %."""
    if _is_missing(mean):
        return MISSING
    if _is_missing(std):
        return number(scale * float(mean), digits)
    return f"{number(scale * float(mean), digits)}{NBSP}±{NBSP}{number(scale * float(std), digits)}"


# -- values over seeds, and where they were computed: the phrases the ColoredMNIST pages share ----
def seed_mean(mean: float | None, std: float | None, n_seeds: int, digits: int = 2, scale: float = 1.0) -> str:
    """A value over seeds: "mean ± std" (:func:`mean_std`), or the mean alone for one seed (a
    standard deviation of one value says nothing)."""
    return mean_std(mean, std if n_seeds > 1 else None, digits, scale)


def over_seeds(n_seeds: int) -> str:
    """What a cell over seeds is: "one seed (no spread to show)", "mean ± std over 3 seeds"."""
    return "one seed (no spread to show)" if n_seeds == 1 else f"mean ± std over {count(n_seeds, 'seed')}"


def seeds_caveat(n_seeds: int) -> str:
    """How many seeds a finding rests on, with what one seed cannot say: "one seed, so this gives a
    direction, not a size", "3 seeds"."""
    return "one seed, so this gives a direction, not a size" if n_seeds == 1 else count(n_seeds, "seed")


def seed_list(seeds: Iterable[int]) -> str:
    """Which seeds: "seed 1 only", "seeds 1, 2 and 3"."""
    seeds = list(seeds)
    return f"seed {seeds[0]} only" if len(seeds) == 1 else f"seeds {listing([str(s) for s in seeds])}"


def stds(z: float) -> str:
    """A distance in the paper's standard deviations as the tables write it: "+1.3", "−0.1" (one
    decimal, signed; "0.0" where it rounds to zero)."""
    return signed(z, 1)


def signed(x: float | None, digits: int = 2) -> str:
    """A signed value with a minus sign, not a hyphen: "+0.81", "−1.37"; a value that rounds to
    zero is "0.00", never "−0.00" or "+0.00"."""
    if _is_missing(x):
        return MISSING
    if round(float(x), digits) == 0:
        return f"{0:.{digits}f}"
    return f"{float(x):+.{digits}f}".replace("-", "\u2212")


def devices(recorded: Iterable[Any], cpu: str | None = None) -> str:
    """The devices results were computed on, from their records: "one NVIDIA H200" for
    ``cuda (NVIDIA H200)`` (:func:`gpu_name`), a CPU as recorded or as ``cpu`` says ("a CPU"),
    each once, in order."""
    def said(device: Any) -> str:
        if cpu is not None and device == "cpu":
            return cpu
        return f"one {gpu_name(device)}" if gpu_name(device) else str(device)
    return listing(sorted({said(d) for d in recorded}))


def minutes(seconds: float | None) -> str:
    """A duration: "45 s", "12 min", "3.5 h"."""
    if _is_missing(seconds):
        return MISSING
    s = float(seconds)
    if s < 1:
        return f"under 1{NBSP}s"
    if s < 90:
        return f"{s:.0f}{NBSP}s"
    if s < 90 * 60:
        return f"{s / 60:.0f}{NBSP}min"
    return f"{s / 3600:.1f}{NBSP}h"


def gpu_name(device: Any) -> str | None:
    """The GPU's name in a recorded device (``"cuda (NVIDIA H200)"``: ``"NVIDIA H200"``); None for another device."""
    text = str(device)
    return text[6:-1] if text.startswith("cuda (") and text.endswith(")") else None


def count(n: int, noun: str, plural: str | None = None) -> str:
    """"1 seed", "3 seeds"."""
    return f"{integer(n)}{NBSP}{noun if n == 1 else (plural or noun + 's')}"


def listing(items: Iterable[Any], conjunction: str = "and", empty: str = "none") -> str:
    """"a", "a and b", "a, b and c"."""
    items = [str(i) for i in items]
    if not items:
        return empty
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def by_label(values: Mapping[str, Any], fmt: Callable[[Any], str] = number,
             labels: Mapping[str, str] | None = None, pattern: str = "{value} on {label}") -> str:
    """A mapping as a phrase: ``{"cmnist": 1.426, "wilds": 1.202}`` -> "1.43× on ColoredMNIST and
    1.20× on WILDS" (with ``fmt=ratio`` and labels). Keys without a label are shown as they are."""
    labels = labels or {}
    return listing(pattern.format(value=fmt(v), label=labels.get(k, k)) for k, v in values.items())


def command(text: str) -> str:
    """A recorded command line as a page shows it: every absolute path of the machine that ran it
    (``/work/main/_cache/cmnist``) cut to its last two parts (``…/_cache/cmnist``), since the
    folders above those say nothing to a reader; relative paths and the rest stay as recorded."""
    return " ".join("…/" + "/".join(t.rstrip("/").split("/")[-2:]) if t.startswith("/") and t.count("/") > 2 else t
                    for t in text.split(" "))


def made_by(record: Mapping[str, Any]) -> str:
    """"`<command>` at commit `<12 hex>` on <device>": what produced a committed result, from its
    provenance record (the command shortened by :func:`command`)."""
    return f"`{command(record['command'])}` at commit `{record['commit'][:12]}` on {record['device']}"


def say(name: str, text: str) -> str:
    """Record ``text``, a finished phrase of the prose, under ``name`` (quoted in the text as
    ``{glue:text}`name```); returns it. Only strings: format values with the functions above."""
    from featbook.record import record

    if not isinstance(text, str):
        raise TypeError(f"say() records the text the prose quotes; format {name!r} first (got {type(text).__name__})")
    record(name, text)
    return text
