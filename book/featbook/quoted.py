"""A paragraph that quotes recorded values, shown with this run's numbers outside the book.

The book fills ``{glue:text}`name:fmt``` in its prose from the values a chapter recorded
(:func:`featbook.record.record`). Colab renders plain Markdown, so the notebook it opens
(:func:`featbook.chapters.colab_notebook`) holds such a paragraph in a collapsed cell that calls
:func:`show`: the paragraph, each quoted value formatted as the book formats it (``fmt`` is a
Python format specification; without one a string is shown as it is and a number with ``str``).
A value not recorded yet (the paragraph comes before the cell that computes it) reads as
:data:`NOT_YET`.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from featbook.record import RECORDED

GLUE = re.compile(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`")
NOT_YET = "(computed further down)"


def fill(text: str, values: Mapping[str, Any] | None = None) -> str:
    """``text`` with every ``{glue:text}`` role replaced by its value from ``values`` (by default
    the values recorded in this kernel)."""
    values = RECORDED if values is None else values

    def replace(match: re.Match) -> str:
        name, fmt = match.groups()
        if name not in values:
            return NOT_YET
        value = values[name]
        return format(value, fmt) if fmt else str(value)
    return GLUE.sub(replace, text)


def show(text: str) -> None:
    """Display ``text`` as Markdown with the recorded values filled in (:func:`fill`)."""
    from IPython.display import Markdown, display

    display(Markdown(fill(text)))
