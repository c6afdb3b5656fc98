"""Which labels of a figure a reader sees printed over each other: the check every figure of the
book passes (tests/test_figures.py), at its laptop size and in its phone drawing
(:mod:`featbook.phone`, which drops a phone drawing that fails it)."""
from __future__ import annotations

import matplotlib as mpl


def draw_renderer(fig):
    """Draw ``fig`` and return its renderer; a Figure() made without pyplot gets an Agg canvas
    first (it has no renderer until then)."""
    if not hasattr(fig.canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def overlapping_texts(fig, tolerance_px: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty texts of ``fig`` (titles, axis labels, tick labels, legend
    entries, figure texts) whose drawn boxes overlap by more than ``tolerance_px`` each way: what a
    reader sees as labels printed over each other. Draws the figure once."""
    renderer = draw_renderer(fig)
    # An axis keeps label objects for ticks outside its view as well; only the ticks it draws count.
    tick_labels, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                tick_labels.update({id(tick.label1), id(tick.label2)})
            if ax.get_visible():
                for tick in axis._update_ticks():
                    drawn.update({id(tick.label1), id(tick.label2)})
    texts = []
    for artist in fig.findobj(mpl.text.Text):
        if id(artist) in tick_labels and id(artist) not in drawn:
            continue
        if artist.get_visible() and artist.get_text().strip() and (artist.axes is None or artist.axes.get_visible()):
            box = artist.get_window_extent(renderer)
            if box.width > 0 and box.height > 0:
                texts.append((artist.get_text(), box))
    pairs = []
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1:]:
            dx = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            dy = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if dx > tolerance_px and dy > tolerance_px:
                pairs.append((a, b))
    return pairs
