"""The two-bit chapters' figures (featbook.plotting, chapters 01-02) print no label over another:
each figure is drawn from histories of the shape the chapters pass, and every pair of visible texts
is checked (featbook.overlaps.overlapping_texts)."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from featbook import overlaps, phone, plotting, style


def history(steps=300):
    t = np.arange(steps + 1)
    return pd.DataFrame({"inv": 0.6 * (1 - np.exp(-t / 60)), "spu": 0.9 * (1 - np.exp(-t / 40)),
                         "train_acc": 0.5 + 0.4 * (1 - np.exp(-t / 30)), "test_acc": 0.5 - 0.4 * (1 - np.exp(-t / 30)),
                         "c_irmv1_0": np.exp(-t / 50), "c_irmv1_1": -np.exp(-t / 50)}, index=pd.Index(t, name="step"))


FIGURES = {
    "erm_run": lambda: plotting.erm_run(history(), (0.6, 0.9)),
    "increments": lambda: plotting.increments_figure(history().diff().abs().iloc[1:] + 1e-6),
    "alpha_sweep": lambda: plotting.alpha_sweep_figure(
        pd.DataFrame({"alpha": np.linspace(0.05, 0.4, 7), "gap_probe": np.linspace(0.3, -0.3, 7),
                      "gap_final": np.linspace(0.4, -0.4, 7), "test_acc_final": np.linspace(0.1, 0.9, 7)}), 0.25, 50, 300),
    "activations": lambda: plotting.activations_figure({"identity": history(), "relu": history(),
                                                        "smoothed_relu": history()}),
    "activations_two": lambda: plotting.activations_figure({"identity": history(), "relu": history()}),
    "figure2": lambda: plotting.figure2(history(), history(), 100, ["env 1", "env 2"], {"invariant solution": 0.5}),
    "pretraining_sweep": lambda: plotting.pretraining_sweep_figure(
        pd.DataFrame({"pretrain_steps": [0, 10, 30, 100, 300], "inv_final": np.linspace(0.1, 0.6, 5),
                      "spu_final": np.linspace(0.5, 0.1, 5), "inv_switch": np.linspace(0.05, 0.5, 5),
                      "test_loss_final": np.linspace(0.7, 0.3, 5)}), 0.55, 500),
    "short_pretraining": lambda: plotting.short_pretraining_figure(history(), 20, ["env 1", "env 2"], {"limit": 0.5}),
    # the committed paper-size runs: the mean over seeds with their range shaded
    "erm_run_seeds": lambda: plotting.erm_run(history(), (0.6, 0.9), band()),
    "figure2_seeds": lambda: plotting.figure2(history(), history(), 100, ["env 1", "env 2"], {"invariant solution": 0.5},
                                              (band(), band())),
    "alpha_sweep_seeds": lambda: plotting.alpha_sweep_figure(sweep_alpha(), 0.25, 50, 300, sweep_band(sweep_alpha())),
    "activations_seeds": lambda: plotting.activations_figure({"identity": history(), "relu": history()},
                                                             {"identity": band(), "relu": band()}),
    "pretraining_sweep_seeds": lambda: plotting.pretraining_sweep_figure(sweep_pre(), 0.55, 500, sweep_band(sweep_pre())),
    "short_and_premise_seeds": lambda: plotting.short_pretraining_figure(
        history(), 20, ["env 1", "env 2"], {"limit": 0.5}, history(), (band(), band())),
}


def band(steps=300):
    """The seeds' range around :func:`history`: (lowest, highest)."""
    return history(steps) - 0.02, history(steps) + 0.02


def sweep_alpha():
    return pd.DataFrame({"alpha": np.linspace(0.05, 0.4, 7), "gap_probe": np.linspace(0.3, -0.3, 7),
                         "gap_final": np.linspace(0.4, -0.4, 7), "test_acc_final": np.linspace(0.1, 0.9, 7)})


def sweep_pre():
    return pd.DataFrame({"pretrain_steps": [0, 10, 30, 100, 300], "inv_final": np.linspace(0.1, 0.6, 5),
                         "spu_final": np.linspace(0.5, 0.1, 5), "inv_switch": np.linspace(0.05, 0.5, 5),
                         "test_loss_final": np.linspace(0.7, 0.3, 5)})


def sweep_band(sweep):
    return sweep - 0.02, sweep + 0.02


def test_a_band_shades_the_seeds_range_around_each_line():
    """Given the seeds' range, each curve of a figure gets its shaded band; without, none."""
    from matplotlib.collections import PolyCollection

    style.use()
    for make, bands in ((lambda b: plotting.erm_run(history(), (0.6, 0.9), b), 4),
                        (lambda b: plotting.figure2(history(), history(), 100, None, None, (b, b)), 8)):
        shaded, plain = make(band()), make(None)
        try:
            count = lambda fig: sum(isinstance(c, PolyCollection) for ax in fig.axes for c in ax.collections)  # noqa: E731
            assert count(shaded) == bands and count(plain) == 0
        finally:
            plt.close(shaded)
            plt.close(plain)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_label_is_printed_over_another(name):
    style.use()
    fig = FIGURES[name]()
    try:
        assert overlaps.overlapping_texts(fig) == [], name
    finally:
        plt.close(fig)


def test_the_overlap_check_sees_labels_printed_over_each_other():
    fig, axes = style.subplots(1, 3)
    for ax in axes.flat:
        ax.set_xlabel("GD step (log scale after step 1), a label far wider than its panel")
    try:
        assert len(overlaps.overlapping_texts(fig)) >= 2
    finally:
        plt.close(fig)


# -- the phone drawing (featbook.phone) -----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_each_figure_has_a_phone_drawing_with_its_panels_in_one_column_and_no_label_over_another(name):
    """On a phone every two-bit figure is drawn again PHONE_WIDTH wide, its panels one under
    another, and no label lands on another there (else the phone drawing is dropped)."""
    style.use()
    fig = FIGURES[name]()
    try:
        shown = phone.panels(fig)
        with phone.phone_layout(fig):
            assert tuple(fig.get_size_inches())[0] == phone.PHONE_WIDTH
            fig.canvas.draw()
            lefts = {round(ax.get_position().x0, 3) for ax in shown}
            assert len(lefts) == 1, f"{name}: panels not in one column ({sorted(lefts)})"
            assert overlaps.overlapping_texts(fig) == [], name
        assert phone.phone_png(fig) is not None, name
    finally:
        plt.close(fig)


def test_the_phone_layout_gives_the_figure_back_exactly_as_it_was():
    """Drawing the phone version between two laptop drawings changes neither: the figure's size,
    its grid and its legend come back, so the PNG beside the picture is the laptop figure."""
    style.use()
    fig = FIGURES["figure2"]()
    try:
        before = phone.retina_png(fig)
        specs = [ax.get_subplotspec() for ax in fig.axes]
        html = phone.picture_html(fig)
        assert [ax.get_subplotspec() for ax in fig.axes] == specs
        assert phone.retina_png(fig) == before
        assert html.startswith('<picture class="feat-picture">')
        assert f'media="(max-width: {phone.BREAKPOINT_PX}px)"' in html and html.count("data:image/png;base64,") == 2
    finally:
        plt.close(fig)


def test_a_phone_drawing_keeps_its_text_at_the_laptop_size_on_a_390_px_screen():
    """The phone drawing is at most the phone column's width (about 358 px of a 390 px screen), so
    its 9 pt labels show at 12.5 px, where the laptop drawing scaled to that column shows them
    under 7 px."""
    style.use()
    fig = FIGURES["figure2"]()
    try:
        desk, mobile = phone._size(phone.retina_png(fig)), phone._size(phone.phone_png(fig))
        column = 358
        assert mobile[0] <= column + 10, mobile
        assert style.text_px(shown_px=min(column, mobile[0]), drawn_px=mobile[0]) >= 11
        assert style.text_px(shown_px=column, drawn_px=desk[0]) < 8
    finally:
        plt.close(fig)


def test_a_grid_of_pictures_and_a_phone_drawing_with_overlapping_labels_keep_one_drawing():
    """A grid of images (chapter 03's digits, the saliency maps) scales whole on a phone; a figure
    whose labels would overlap in one column keeps its laptop drawing only."""
    style.use()
    pictures, axes = style.subplots(2, 4, panel_height=0.9)
    for k, ax in enumerate(axes.flat):
        ax.imshow(np.zeros((4, 4)))
        if k % 4:  # a row's first picture keeps its axis for the row's label (chapter 06's triples)
            ax.axis("off")
        else:
            ax.set_ylabel("y=0, pred 1")
    crowded, axes = style.subplots(1, 1)
    ax = axes[0, 0]
    ax.set_xticks(range(12), [f"a long category name {k}" for k in range(12)])
    try:
        assert phone.is_picture_grid(pictures) and phone.picture_html(pictures) is None
        assert phone.picture_html(crowded) is None
        assert overlaps.overlapping_texts(crowded)  # at the laptop's size too: the test's premise
    finally:
        plt.close(pictures)
        plt.close(crowded)


def test_a_figure_made_without_pyplot_gets_its_phone_drawing_too():
    """Chapter 06's figures are Figure() objects (no pyplot canvas, no renderer until one is
    attached): the phone drawing draws them all the same."""
    from matplotlib.figure import Figure

    style.use()
    fig = Figure(figsize=(style.COLUMN_WIDTH, 3.0), layout="constrained")
    for k, ax in enumerate(fig.subplots(1, 2)):
        ax.plot([0, 1, 2], [k, 1, 0], label=f"line {k}")
        ax.set_title(f"panel {k}")
    style.legend_below(fig, fig.axes)
    html = phone.picture_html(fig)
    assert html is not None and html.count("data:image/png;base64,") == 2


def test_corollary_4_4s_figure_shows_the_short_pre_training_on_a_log_step_axis():
    """Ten steps of pre-training in a run of 4,000 fell on the y-axis of a linear axis (the review
    of chapter 02): every panel of the figure is on the symmetric-log step axis, starting at 0."""
    fig = FIGURES["short_and_premise_seeds"]()
    for ax in fig.axes[:4]:
        assert ax.get_xscale() == "symlog" and ax.get_xlim()[0] == 0
        assert ax.get_xlabel() == "GD step (log scale after step 1)"
    fig2 = FIGURES["figure2"]()
    assert {ax.get_xscale() for ax in fig2.axes[:4]} == {"linear"}  # Fig. 2's own axis is the paper's
    plt.close("all")


def test_the_phone_drawings_legend_keeps_each_entrys_marker():
    """The phone drawing lays the legend out again; from the legend's own proxies an error bar's
    entry lost its marker (Fig. 9.1 on a phone showed three lines for three marker shapes)."""
    from matplotlib.lines import Line2D

    fig, axes = style.subplots(1, 2)
    for ax, marker, label in zip(axes.flat, ("s", "^"), ("Bonsai", "FeAT")):
        ax.errorbar([1, 2], [1, 2], xerr=[0.1, 0.1], yerr=[0.1, 0.1], fmt=marker, mfc="white", label=label)
    style.legend_below(fig, axes.flat)

    def markers(legend):
        return {a.get_marker() for a in legend.findobj(Line2D)} & {"s", "^"}

    assert markers(fig.legends[0]) == {"s", "^"}
    with phone.phone_layout(fig) as drawn:
        assert markers(drawn.legends[0]) == {"s", "^"}
    assert markers(fig.legends[0]) == {"s", "^"}  # the laptop drawing as it was
    plt.close(fig)
