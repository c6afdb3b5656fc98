"""The book's figure style: one size, one set of fonts, one palette, for every chapter.

The book's content column is about 688 px wide at 100% zoom (1280 px window). A figure made
here is :data:`COLUMN_WIDTH` inches wide at :data:`DPI` dots per inch (with the inline backend's
tight crop, at most 670 px), so it is shown at its natural size, text included: the smallest
text, tick labels and legends at :data:`MIN_TEXT_PT` (9 pt), is 12.5 px on the page, above the
11 px the browser test asks of figure text, and labels at 10 pt are 14 px, the size of the
captions. On a phone (390 px) a notebook shows each figure drawn again for the phone's column,
its panels one under another (:mod:`featbook.phone`), so its text stays as large
(:func:`text_px` gives the size at a displayed width).
Inline figures are sent as "retina" PNGs (twice the pixels, displayed at the same size), so
they stay sharp on high-density screens.

    from featbook import style
    style.use()                                  # once per notebook, before the first figure
    fig, axes = style.subplots(2, 2)             # a grid as wide as the column
    style.legend_below(fig, axes[0, 0])          # one legend for the figure, under the panels

Multi-panel figures are grids of at most :data:`MAX_COLUMNS` panels a row: a strip of four
panels would shrink every label to a quarter of the column. Colours come from
:data:`PALETTE` (Okabe and Ito's colour-blind safe set); the roles that recur across
chapters (the invariant and the spurious feature, the feature learners) have fixed colours
in :data:`ROLE_COLOURS`, so that FeAT is the same colour on every page.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib as mpl
from cycler import cycler

#: The width of the book's content column in pixels at 1280 px, and of a figure in inches.
COLUMN_PX = 688
DPI = 100
#: Inches: 650 px at DPI; the inline backend's tight crop adds up to 0.1 in each side (670 px).
COLUMN_WIDTH = 6.5
#: Height of one row of panels (inches) in a grid, and the widest grid row.
PANEL_HEIGHT = 2.6
MAX_COLUMNS = 3

#: Okabe & Ito (2008): distinguishable with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")

#: Colours of the roles that recur across chapters.
ROLE_COLOURS = {
    "invariant": "#E69F00", "spurious": "#0072B2",
    "erm": "#000000", "erm-nf": "#999999", "bonsai": "#D55E00", "feat": "#CC79A7", "ifeat": "#009E73",
    "train": "#0072B2", "test": "#D55E00", "paper": "#000000",
}

#: Sequential colour map of every heat map and saliency overlay, with its colour bar.
SEQUENTIAL_CMAP = "viridis"

#: The smallest font size of a figure (tick labels, legends), in points.
MIN_TEXT_PT = 9

RC = {
    "figure.dpi": DPI,
    "savefig.dpi": "figure",
    "figure.figsize": (COLUMN_WIDTH, PANEL_HEIGHT + 0.4),
    "figure.constrained_layout.use": True,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "xtick.labelsize": MIN_TEXT_PT,
    "ytick.labelsize": MIN_TEXT_PT,
    "legend.fontsize": MIN_TEXT_PT,
    "legend.frameon": False,
    "legend.handlelength": 1.6,
    "figure.titlesize": 11,
    "axes.prop_cycle": cycler(color=list(PALETTE)),
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.5,
    "image.cmap": SEQUENTIAL_CMAP,
    "errorbar.capsize": 2.5,
}


def use(retina: bool = True, phone: bool = True) -> None:
    """Apply the book's style to matplotlib; in a notebook, also send figures as retina PNGs and,
    with ``phone``, each with its drawing for a phone's column (:mod:`featbook.phone`)."""
    mpl.rcParams.update(RC)
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python: nothing to configure
        return
    if get_ipython() is None:
        return
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina" if retina else "png")
    if phone:
        from featbook import phone as phone_figures

        phone_figures.register()


def grid_shape(panels: int, max_columns: int = 2) -> tuple[int, int]:
    """(rows, columns) of a grid for ``panels`` panels, at most ``max_columns`` a row."""
    if panels < 1:
        raise ValueError(f"panels must be at least 1; got {panels}")
    columns = min(panels, max(1, min(max_columns, MAX_COLUMNS)))
    return math.ceil(panels / columns), columns


def figsize(rows: int = 1, columns: int = 1, panel_height: float = PANEL_HEIGHT,
            width: float = COLUMN_WIDTH, extra_height: float = 0.4) -> tuple[float, float]:
    """The size of a grid as wide as the column: ``rows`` rows of ``panel_height`` inches plus
    room for titles and a legend (``extra_height`` inches). Plots with axes should keep to
    :data:`MAX_COLUMNS` a row (:func:`panels` does); grids of small images may have more."""
    if width > COLUMN_WIDTH + 1e-9:
        raise ValueError(f"width must be at most the column's {COLUMN_WIDTH} in; got {width}")
    del columns
    return width, rows * panel_height + extra_height


def subplots(rows: int = 1, columns: int = 1, *, panel_height: float = PANEL_HEIGHT, width: float = COLUMN_WIDTH,
             extra_height: float = 0.4, **kwargs):
    """``plt.subplots`` for the book: a ``rows`` x ``columns`` grid as wide as the column,
    constrained layout, ``squeeze=False`` unless given."""
    import matplotlib.pyplot as plt

    kwargs.setdefault("squeeze", False)
    kwargs.setdefault("layout", "constrained")
    return plt.subplots(rows, columns, figsize=figsize(rows, columns, panel_height, width, extra_height), **kwargs)


def panels(n: int, max_columns: int = 2, **kwargs):
    """A grid holding ``n`` panels (at most ``max_columns`` a row); unused cells are hidden.
    Returns the figure and the ``n`` axes in reading order."""
    rows, columns = grid_shape(n, max_columns)
    fig, axes = subplots(rows, columns, **kwargs)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def legend_below(fig, axes=None, ncol: int | None = None, handles: Sequence | None = None,
                 labels: Sequence[str] | None = None):
    """One legend for the whole figure, centred under the panels (constrained layout makes room).

    Entries come from ``axes`` (one Axes or several; duplicates by label dropped) unless
    ``handles`` and ``labels`` are given."""
    if handles is None:
        seen: dict[str, object] = {}
        for ax in ([axes] if hasattr(axes, "get_legend_handles_labels") else list(axes if axes is not None else fig.axes)):
            for handle, text in zip(*ax.get_legend_handles_labels()):
                if not text.startswith("_"):
                    seen.setdefault(text, handle)
        handles, labels = list(seen.values()), list(seen)
    if not handles:
        return None
    ncol = ncol or min(len(handles), 3)
    legend = fig.legend(handles, labels, loc="outside lower center", ncol=ncol)
    # the artists the entries stand for (the legend keeps only proxies, which lose an error
    # bar's marker): the phone drawing lays the same entries out again from them
    legend.featbook_handles = list(handles)
    return legend


def colour(role: str, default: str | None = None) -> str:
    """The fixed colour of a role (``"invariant"``, ``"feat"``...), or ``default``."""
    if role in ROLE_COLOURS:
        return ROLE_COLOURS[role]
    if default is None:
        raise ValueError(f"role must be one of {', '.join(map(repr, ROLE_COLOURS))}; got {role!r}")
    return default


def width_px(fig) -> float:
    """The figure's width in page pixels as the book shows it (retina PNGs are shown at half
    their pixels)."""
    return fig.get_figwidth() * fig.dpi


def text_px(points: float = MIN_TEXT_PT, shown_px: float | None = None, drawn_px: float | None = None) -> float:
    """The height in page pixels of ``points``-point text of a figure drawn ``drawn_px`` wide
    (at :data:`DPI`) and shown ``shown_px`` wide (default: at its natural size)."""
    scale = 1.0 if not shown_px or not drawn_px else shown_px / drawn_px
    return points * DPI / 72 * scale
