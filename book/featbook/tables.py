"""Tables as the book shows them: formatted HTML that fits the content column.

A raw ``DataFrame`` on a page shows its index, ``NaN``, ``0.925000`` and ids such as
``ib_irm``; a wide one runs past the column. :func:`table` turns a frame whose cells are
already what a reader should see (labels, numbers formatted by :mod:`featbook.prose`) into an
HTML table: no index column unless asked, every value on one line, headers that may wrap, a
caption. A cell can hold a second line (:class:`Stacked`), which is how ours and the paper's
value share one cell instead of doubling the number of columns:

    table(frame, caption="Table 2, ColoredMNIST-025: ours (first line) and the paper's (second)")

The styling is inline, so a table looks the same in the book, in Jupyter and in Colab; the
book's stylesheet (``_static/featbook.css``) only adds the column-width rules.
:func:`paired` and :func:`split_by` reshape the frames the views build (``table2_frame``, Table 3's
frames; columns with an "ours" / "paper" level, or one block per dataset) without changing what
they hold.
"""
from __future__ import annotations

import html
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from featbook import prose

#: Characters of a value line that fit the column, summed over a row (a rough guard, see :func:`fits`).
COLUMN_CHARS = 92

_TABLE_STYLE = "border-collapse: collapse; font-size: 0.85em; margin: 0.4em 0 1em 0; max-width: 100%"
_CELL_STYLE = "padding: 3px 7px; border-bottom: 1px solid #ddd; vertical-align: top"
_HEAD_STYLE = "padding: 3px 7px; border-bottom: 2px solid #888; vertical-align: bottom; text-align: left"
_SUB_STYLE = "display: block; color: #666; font-size: 0.88em"


@dataclass(frozen=True)
class Stacked:
    """A cell of two lines: ``main`` and, under it in grey, ``sub`` (e.g. the paper's value);
    ``paper``: the second line is the paper's value (marked, so that the leak scan finds a paper
    value set beside a test run's, :func:`featbook.leaks.test_run_beside_paper`)."""

    main: str
    sub: str = ""
    paper: bool = False

    def __str__(self) -> str:
        return f"{self.main} ({self.sub})" if self.sub else self.main


def cell_text(value: Any, digits: int = 2) -> str:
    """A cell's text: strings as they are, numbers through :func:`featbook.prose.number`,
    missing values as a dash, booleans as yes / no."""
    if isinstance(value, Stacked):
        return str(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return prose.MISSING
    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return prose.integer(int(value))
    if isinstance(value, numbers.Real):
        return prose.number(float(value), digits)
    return str(value)


def _cell_html(value: Any, digits: int, nowrap: bool) -> str:
    wrap = "white-space: nowrap" if nowrap else ""
    if isinstance(value, Stacked):
        # the grey line keeps its value together too ("25.0 → 24.5", "70.57 ± 0.62")
        kind = "feat-sub feat-paper" if value.paper else "feat-sub"
        sub = (f'<span class="{kind}" style="{_SUB_STYLE}; {wrap}">{html.escape(value.sub)}</span>'
               if value.sub else "")
        # the value stays on one line; a trailing note in brackets, e.g. "(n = 3)", may go under it
        head, sep, note = value.main.partition(" (")
        parts = [head, sep.strip() + note] if sep else [head]
        return " ".join(f'<span style="{wrap}">{html.escape(part)}</span>' for part in parts) + sub
    return f'<span style="{wrap}">{html.escape(cell_text(value, digits))}</span>' if wrap else html.escape(
        cell_text(value, digits))


def _header_html(column: Any) -> str:
    """A header may wrap between its words, never inside one: "ERM-NF" does not break at its
    hyphen on a phone."""
    return " ".join(f'<span style="white-space: nowrap">{html.escape(word)}</span>' if "-" in word else
                    html.escape(word) for word in str(column).split(" "))


@dataclass
class Table:
    """An HTML table for a notebook cell (``_repr_html_``) and the book; ``str()`` is plain text."""

    frame: pd.DataFrame
    caption: str | None = None
    note: str | None = None
    digits: int = 2
    wrap_columns: tuple[str, ...] = ()
    #: on a phone (book/featbook.css, below 600 px), each row a card, its cells one under the
    #: other and each named by its column: for tables of long text, which a narrow column would
    #: squeeze to a word per line
    cards: bool = False
    #: what the grey second line of a cell holds, for the key above the rows (default: the paper's value)
    key: str = "the paper's"

    def _repr_html_(self) -> str:
        frame = self.frame
        head = "".join(f'<th style="{_HEAD_STYLE}">{_header_html(c)}</th>' for c in frame.columns)
        rows = []
        for values in frame.itertuples(index=False):
            cells = []
            for column, value in zip(frame.columns, values):
                numeric = isinstance(value, numbers.Number) and not isinstance(value, bool)
                align = "text-align: right; " if numeric else "text-align: left; "
                nowrap = column not in self.wrap_columns
                label = f' data-label="{html.escape(str(column), quote=True)}"' if self.cards else ""
                cells.append(f'<td{label} style="{align}{_CELL_STYLE}">{_cell_html(value, self.digits, nowrap)}</td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
        # the caption and the note outside the table, so that they wrap in the column while a table
        # too wide for a phone scrolls in its own box (book/featbook.css)
        caption = (f'<p class="feat-table-caption" style="font-weight: 600; margin: 0.4em 0 4px 0">'
                   f"{html.escape(self.caption)}</p>") if self.caption else ""
        if self.has_paper_values:  # the key beside the rows, not only in the note under a long table
            caption += (f'<p class="feat-table-key" style="font-size: 0.85em; margin: 0 0 4px 0">Each cell: ours; '
                        f'<span style="{_SUB_STYLE}; display: inline">under it in grey, {html.escape(self.key)}</span>.</p>')
        note = (f'<p class="feat-table-note" style="font-size: 0.85em; color: #555; margin-top: -0.6em">'
                f"{html.escape(self.note)}</p>") if self.note else ""
        return (f'<div class="feat-table-wrap">{caption}<div class="feat-table-scroll" style="overflow-x: auto">'
                f'<table class="feat-table{" feat-cards" if self.cards else ""}" style="{_TABLE_STYLE}">'
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>{note}</div>")

    @property
    def has_paper_values(self) -> bool:
        """Whether a cell sets the paper's value under ours (a :class:`Stacked` marked ``paper``)."""
        return any(isinstance(v, Stacked) and v.paper and v.sub for column in self.frame.columns
                   for v in self.frame[column])

    def __str__(self) -> str:
        return self.frame.map(lambda v: cell_text(v, self.digits)).to_string(index=False)

    def __repr__(self) -> str:  # what a plain-text front end (and papermill's log) shows
        return (f"{self.caption}\n" if self.caption else "") + str(self)


class Tables:
    """Several tables shown one after another (one output)."""

    def __init__(self, tables: Sequence[Table]):
        self.tables = list(tables)

    def _repr_html_(self) -> str:
        return "".join(t._repr_html_() for t in self.tables)

    def __repr__(self) -> str:
        return "\n\n".join(repr(t) for t in self.tables)


def table(frame: pd.DataFrame, *, caption: str | None = None, note: str | None = None, index: bool = False,
          columns: Mapping[str, str] | None = None, formats: Mapping[str, Callable[[Any], Any]] | None = None,
          digits: int = 2, wrap: Sequence[str] = (), cards: bool = False, key: str = "the paper's") -> Table:
    """``frame`` as a book table.

    ``index``: keep the index as the first column(s); ``formats``: column -> function applied
    to each value (e.g. :func:`featbook.prose.percent`); ``columns``: renames for the header
    (applied after ``formats``); ``digits``: decimals of numbers not otherwise formatted;
    ``wrap``: columns whose text may wrap (long text), every other value stays on one line;
    ``cards``: on a phone each row is a card, its cells named by their columns (:class:`Table`);
    ``key``: what the grey second line of a cell holds, said above the rows."""
    shown = frame.reset_index() if index else frame.copy()
    if isinstance(shown.columns, pd.MultiIndex):
        shown.columns = [" ".join(str(p) for p in c if str(p)) for c in shown.columns]
    for column, fmt in (formats or {}).items():
        if column in shown:
            shown[column] = shown[column].map(lambda v, f=fmt: prose.MISSING if _missing(v) else f(v))
    if columns:
        shown = shown.rename(columns=dict(columns))
        wrap = [columns.get(c, c) for c in wrap]
    return Table(shown.reset_index(drop=True), caption=caption, note=note, digits=digits, wrap_columns=tuple(wrap),
                 cards=cards, key=key)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and value.strip() in ("", "-", "nan", "NaN"))


def paired(frame: pd.DataFrame, ours: str = "ours", paper: str = "paper", level: int = -1,
           paper_prefix: str = "paper ") -> pd.DataFrame:
    """Columns ``(..., "ours")`` and ``(..., "paper")`` -> one column ``...`` of :class:`Stacked`
    cells: our value with the paper's under it (``paper_prefix`` + value; none when the paper
    has no value). Other columns are kept. The values are not changed, only placed."""
    if not isinstance(frame.columns, pd.MultiIndex):
        return frame.copy()
    keys = []
    for column in frame.columns:
        key = tuple(p for i, p in enumerate(column) if i != (level % frame.columns.nlevels))
        if key not in keys:
            keys.append(key)
    out = {}
    for key in keys:
        def col(source, key=key):
            full = list(key)
            full.insert(level % frame.columns.nlevels, source)
            return tuple(full)
        name = key[0] if len(key) == 1 else key
        has_ours, has_paper = col(ours) in frame.columns, col(paper) in frame.columns
        if not has_ours and not has_paper:
            continue
        cells = []
        for i in range(len(frame)):
            main = str(frame[col(ours)].iloc[i]) if has_ours else prose.MISSING
            sub = str(frame[col(paper)].iloc[i]) if has_paper else ""
            sub = "" if _missing(sub) else f"{paper_prefix}{sub}"
            cells.append(Stacked(prose.MISSING if _missing(main) else main, sub, paper=bool(sub)))
        out[name] = cells
    result = pd.DataFrame(out, index=frame.index)
    if isinstance(result.columns, pd.MultiIndex) or any(isinstance(c, tuple) for c in result.columns):
        result.columns = pd.MultiIndex.from_tuples([c if isinstance(c, tuple) else (c,) for c in result.columns])
    return result


def split_by(frame: pd.DataFrame, level: int = 0) -> dict[str, pd.DataFrame]:
    """A frame with MultiIndex columns -> one frame per value of the column level ``level``
    (e.g. one per dataset), in the order they appear."""
    if not isinstance(frame.columns, pd.MultiIndex):
        return {"": frame}
    parts = {}
    for value in dict.fromkeys(frame.columns.get_level_values(level)):
        part = frame.xs(value, axis=1, level=level)
        parts[str(value)] = part
    return parts


def fits(frame: pd.DataFrame, chars: int = COLUMN_CHARS) -> bool:
    """Whether the widest line of each column, summed over the columns, fits ``chars``
    characters: a quick check before showing a table (the browser test measures the real width)."""
    total = 0
    for column in frame.columns:
        values = [cell_text(v) if not isinstance(v, Stacked) else max(v.main, v.sub, key=len) for v in frame[column]]
        header = max(str(column).split(), key=len) if str(column).split() else ""
        total += max([len(header)] + [len(v) for v in values]) + 2
    return total <= chars
