"""Figures on a phone: every figure of the book is also drawn for a phone's column, its panels one
under another, so that its text is as large on a 390 px screen as on a laptop.

A figure is drawn :data:`featbook.style.COLUMN_WIDTH` wide, for the laptop's column. Scaled to a
phone's column (about 358 px of a 390 px screen) its 9 pt tick labels would be under 7 px high. So
when a notebook shows a figure (:func:`register`, which :func:`featbook.style.use` calls), it is
sent twice in one HTML ``<picture>``: as drawn, and laid out again for a phone
(:func:`phone_layout`: the panels of its grid in one column, :data:`PHONE_WIDTH` wide, legends in
at most two columns, long titles wrapped). The browser picks the phone's drawing below
:data:`BREAKPOINT_PX` (``book/featbook.css`` uses the same width). The PNG output stays beside it,
for frontends without HTML. :func:`featbook.build.externalize_pictures` moves the pictures' images
out of the built pages into files.

Not every figure gets a second drawing (:func:`picture_html` returns None, and the figure scales as
before; a tap still opens it at full size): a grid of pictures (every panel an image) stays a
grid, and a phone drawing in which any two labels overlap (:func:`featbook.overlaps.overlapping_texts`)
is not used.

    from featbook import phone
    html = phone.picture_html(fig)            # both drawings in one <picture>, or None
    with phone.phone_layout(fig):             # the figure as a phone shows it; restored after
        png = phone.retina_png(fig)
"""
from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterator
from contextlib import contextmanager

from matplotlib.figure import Figure

from featbook.overlaps import draw_renderer, overlapping_texts

#: The phone drawing's width in inches: 340 px at :data:`featbook.style.DPI`, which with the tight
#: crop's margin fits the column of a 390 px screen (about 358 px) at its natural size.
PHONE_WIDTH = 3.4
#: Height of one panel of the phone drawing (inches), and the room for titles and legends.
PHONE_PANEL_HEIGHT = 2.3
PHONE_EXTRA_HEIGHT = 0.45
#: Height of one row of a legend (inches).
LEGEND_ROW_HEIGHT = 0.2
#: Below this window width (CSS px) the browser shows the phone drawing (book/featbook.css's rule).
BREAKPOINT_PX = 600


def panels(fig: Figure) -> list:
    """The visible axes of ``fig`` that sit in a grid (not colour bars, insets or hidden
    cells), in reading order: row by row, left to right."""
    found = []
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is None or not ax.get_visible() or getattr(ax, "_colorbar", None) is not None:
            continue
        found.append((spec.rowspan.start, spec.colspan.start, ax))
    return [ax for _, _, ax in sorted(found, key=lambda t: (t[0], t[1]))]


def is_picture_grid(fig: Figure) -> bool:
    """Whether ``fig`` is a grid of pictures (every panel shows an image: chapter 03's digits,
    chapter 06's image / GradCAM / overlay rows): it stays a grid on a phone, where it scales whole,
    since its rows are read across."""
    shown = panels(fig)
    return bool(shown) and all(ax.images for ax in shown)


#: The longest line of a legend entry in the phone drawing, in characters (mathematics counted whole).
LEGEND_LINE_CHARS = 28


def wrap_label(text: str, width: int = LEGEND_LINE_CHARS) -> str:
    """``text`` broken into lines of at most about ``width`` characters at its spaces, never inside
    ``$...$`` (mathematics)."""
    words, current, inside = [], "", False
    for char in text:
        if char == "$":
            inside = not inside
        if char == " " and not inside:
            if current:
                words.append(current)
            current = ""
        else:
            current += char
    if current:
        words.append(current)
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join(lines + [line] if line else lines)


def _phone_legends(fig: Figure, originals: list, columns: int, wrap: bool) -> None:
    """In place of ``originals`` (the figure's legends, all made by
    :func:`featbook.style.legend_below`), the same entries under the panels in at most ``columns``
    columns, their labels wrapped if ``wrap``."""
    fig.legends.clear()
    for legend in originals:
        labels = [t.get_text() for t in legend.get_texts()]
        handles = getattr(legend, "featbook_handles", None) or legend.legend_handles
        fig.legend(handles, [wrap_label(t) if wrap else t for t in labels],
                   loc="outside lower center", ncol=min(legend._ncols, columns))


def _fits(fig: Figure) -> bool:
    """Whether every legend of ``fig`` lies within the figure's width (draws it once)."""
    renderer = draw_renderer(fig)
    right = fig.get_figwidth() * fig.dpi
    return all(box.x0 >= -1 and box.x1 <= right + 1
               for box in (legend.get_window_extent(renderer) for legend in fig.legends))


@contextmanager
def phone_layout(fig: Figure, width: float = PHONE_WIDTH, panel_height: float = PHONE_PANEL_HEIGHT,
                 legend_columns: int = 2) -> Iterator[Figure]:
    """``fig`` laid out for a phone while the block runs: its grid's panels in one column,
    ``width`` inches wide and ``panel_height`` a panel; its legends in as many columns as fit (at
    most ``legend_columns``; in one, long entries wrap); titles wrapped at the figure's width.
    Everything is restored after (size, grid cells, legends, wrapping), so the figure draws as
    before."""
    shown = panels(fig)
    hidden = [ax for ax in fig.axes if ax.get_subplotspec() is not None and not ax.get_visible()]
    titles = [t for ax in shown for t in (ax.title, ax._left_title, ax._right_title)] + (
        [fig._suptitle] if fig._suptitle is not None else [])
    saved = {"size": tuple(fig.get_size_inches()), "specs": [(ax, ax.get_subplotspec()) for ax in shown],
             "layout": [(ax, ax.get_in_layout()) for ax in hidden], "legends": list(fig.legends),
             "wrap": [(t, t.get_wrap()) for t in titles]}
    try:
        if len(shown) > 1:
            grid = fig.add_gridspec(len(shown), 1)
            for k, ax in enumerate(shown):
                ax.set_subplotspec(grid[k, 0])
        for ax in hidden:  # cells a grid left empty take no room in the new layout
            ax.set_in_layout(False)
        for text in titles:
            text.set_wrap(True)
        tries = [(c, False) for c in range(legend_columns, 0, -1)] + [(1, True)]
        for columns, wrap in tries:
            _phone_legends(fig, saved["legends"], columns, wrap)
            rows = sum(math.ceil(len(legend.get_texts()) / legend._ncols) + sum(
                t.get_text().count("\n") for t in legend.get_texts()) for legend in fig.legends)
            height = (max(1, len(shown)) * panel_height + PHONE_EXTRA_HEIGHT + LEGEND_ROW_HEIGHT * rows
                      + (0.3 if fig._suptitle is not None else 0.0))
            fig.set_size_inches(width, height, forward=False)
            if not fig.legends or _fits(fig):
                break
        yield fig
    finally:
        for ax, spec in saved["specs"]:
            ax.set_subplotspec(spec)
        for ax, was in saved["layout"]:
            ax.set_in_layout(was)
        fig.legends[:] = saved["legends"]
        for text, was in saved["wrap"]:
            text.set_wrap(was)
        fig.set_size_inches(*saved["size"], forward=False)


def retina_png(fig: Figure) -> bytes:
    """``fig`` as the book's inline backend sends it: a PNG at twice :data:`featbook.style.DPI`,
    cropped tight."""
    from IPython.core.pylabtools import print_figure

    return print_figure(fig, fmt="retina", bbox_inches="tight")


def _size(png: bytes) -> tuple[int, int]:
    """(width, height) in CSS pixels of a retina PNG (its IHDR, halved)."""
    return int.from_bytes(png[16:20], "big") // 2, int.from_bytes(png[20:24], "big") // 2


def phone_png(fig: Figure) -> bytes | None:
    """The phone drawing of ``fig`` (:func:`phone_layout`) as a retina PNG, or None where the
    figure keeps one drawing: a grid of pictures, or a phone layout in which two labels overlap."""
    if is_picture_grid(fig) or not panels(fig):
        return None
    with phone_layout(fig):
        if overlapping_texts(fig):
            return None
        return retina_png(fig)


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def picture_html(fig: Figure) -> str | None:
    """The HTML a notebook shows for ``fig``: a ``<picture>`` holding the figure as drawn and its
    phone drawing (below :data:`BREAKPOINT_PX`), or None where there is no phone drawing (the
    notebook then shows the PNG alone, as before)."""
    phone = phone_png(fig)
    if phone is None:
        return None
    desk = retina_png(fig)
    (dw, dh), (pw, ph) = _size(desk), _size(phone)
    return (f'<picture class="feat-picture">'
            f'<source media="(max-width: {BREAKPOINT_PX}px)" srcset="{_data_uri(phone)} 2x" width="{pw}" height="{ph}">'
            f'<img src="{_data_uri(desk)}" width="{dw}" height="{dh}" '
            f'alt="{html.escape(_alt(fig))}"></picture>')


def _alt(fig: Figure) -> str:
    """A short text for the figure: its panels' titles."""
    titles = [ax.get_title() for ax in panels(fig) if ax.get_title()]
    return "; ".join(titles)[:200] or "figure"


def register(ip=None) -> bool:
    """Show every matplotlib figure of the running notebook as :func:`picture_html` (beside its
    PNG). Returns whether a notebook (an IPython shell) was there to register with."""
    if ip is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        ip = get_ipython()
    if ip is None:
        return False
    ip.display_formatter.formatters["text/html"].for_type(Figure, picture_html)
    return True
