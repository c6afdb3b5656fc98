"""Figures of the two-bit chapters (01 and 02): the panels of Fig. 2 and their companions.

Every function draws into Axes it is given, or makes a figure with :mod:`featbook.style`
(as wide as the book's column, panels in a grid, one legend under the panels). The committed
paper-size studies hold several seeds: a figure of them draws the mean over seeds and, given a
``band`` (the lowest and highest value over seeds, :func:`featbook.two_bit_report.over_seeds`),
shades the range between them around each line.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from featbook import style

#: The coefficients: the mean over the filters j = ±1, r of <w_{j,r}, j·v> (j a sign, not an index of v).
INV_LABEL = r"invariant: mean over $j, r$ of $\langle w_{j,r},\, j{\cdot}v_1\rangle$"
SPU_LABEL = r"spurious: mean over $j, r$ of $\langle w_{j,r},\, j{\cdot}v_2\rangle$"
#: The invariant solution's coefficient: half the logit's weight log((1 − α)/α), the coefficient being a
#: mean over both classes' filters, whose contributions the logit adds.
SOLUTION_LABEL = r"invariant solution $\frac{1}{2}\log\frac{1-\alpha}{\alpha}$"


def _band(ax, band, column: str, colour: str, x=None) -> None:
    """Shade the seeds' range of ``column`` (``band``: (lowest, highest) frames, or None)."""
    if band is None:
        return
    low, high = band
    ax.fill_between(low.index if x is None else x, low[column], high[column], color=colour, alpha=0.25,
                    linewidth=0)


def _mark(ax, step: int | None) -> None:
    if step is not None:
        ax.axvline(step, color="black", linestyle="--", linewidth=1, label="end of pre-training")


def step_axis(ax, history: pd.DataFrame, log: bool = True) -> None:
    """The GD-step axis: symmetric-log from step 0 (no negative steps), or linear."""
    if log:
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("GD step (log scale after step 1)")
    else:
        ax.set_xlabel("GD step")
    ax.set_xlim(0, max(1, int(history.index.max())))


def plot_coefficients(ax, history: pd.DataFrame, mark_step: int | None = None,
                      reference: dict[str, float] | None = None, title: str | None = None, band=None,
                      log_steps: bool = False) -> None:
    """Invariant and spurious feature-learning coefficients against the GD step; optional
    horizontal reference levels (``{"label": value}``) and the seeds' range (``band``);
    ``log_steps``: the step axis of :func:`step_axis` (a short pre-training stays visible)."""
    ax.plot(history.index, history["inv"], color=style.colour("invariant"), label=INV_LABEL)
    ax.plot(history.index, history["spu"], color=style.colour("spurious"), label=SPU_LABEL)
    _band(ax, band, "inv", style.colour("invariant"))
    _band(ax, band, "spu", style.colour("spurious"))
    for i, (label, value) in enumerate((reference or {}).items()):
        ax.axhline(value, color="grey", linestyle=":" if i else "-.", linewidth=1, label=label)
    _mark(ax, mark_step)
    step_axis(ax, history, log=log_steps)
    ax.set_ylabel("feature learning")
    if title:
        ax.set_title(title)


def plot_c_irmv1(ax, history: pd.DataFrame, mark_step: int | None = None, title: str | None = None,
                 env_labels: list[str] | None = None, band=None, log_steps: bool = False) -> None:
    """C_IRMv1^e for each training environment against the GD step (``band``: the seeds' range;
    ``log_steps``: as :func:`plot_coefficients`)."""
    cols = [c for c in history.columns if c.startswith("c_irmv1_")]
    for i, col in enumerate(cols):
        label = env_labels[i] if env_labels else f"env {i}"
        ax.plot(history.index, history[col], color=style.PALETTE[2 + i], label=f"$C^{{{i + 1}}}_{{IRMv1}}$ ({label})")
        _band(ax, band, col, style.PALETTE[2 + i])
    ax.axhline(0.0, color="grey", linewidth=0.8)
    _mark(ax, mark_step)
    step_axis(ax, history, log=log_steps)
    ax.set_ylabel("$C_{IRMv1}^e$")
    if title:
        ax.set_title(title)


def figure2(with_pt: pd.DataFrame, without_pt: pd.DataFrame, pretrain_steps: int,
            env_labels: list[str] | None = None, reference: dict[str, float] | None = None,
            bands: tuple | None = None):
    """The four panels of Fig. 2 as a 2 x 2 grid: (a) C_IRMv1 and (b) FL with ERM pre-training,
    (c) C_IRMv1 and (d) FL with IRMv1 from scratch; one legend under the grid. ``bands``: the
    seeds' range of each run, ``(with_pt's, without_pt's)``."""
    with_band, without_band = bands or (None, None)
    fig, axes = style.subplots(2, 2, extra_height=0.9)
    plot_c_irmv1(axes[0, 0], with_pt, pretrain_steps, "(a) $C_{IRMv1}$, with pre-training", env_labels, with_band)
    plot_coefficients(axes[0, 1], with_pt, pretrain_steps, reference, "(b) features, with pre-training", with_band)
    plot_c_irmv1(axes[1, 0], without_pt, None, "(c) $C_{IRMv1}$, from scratch", env_labels, without_band)
    plot_coefficients(axes[1, 1], without_pt, None, None, "(d) features, from scratch", without_band)
    axes[1, 1].set_ylim(axes[0, 1].get_ylim())  # same scale as (b): from scratch nothing is learned
    style.legend_below(fig, axes.flat, ncol=2)
    return fig


def erm_run(history: pd.DataFrame, limits: tuple[float, float], band=None):
    """Chapter 01's first figure: the two coefficients with their population limits (left) and
    training / OOD test accuracy (right), against the GD step (``band``: the seeds' range)."""
    fig, axes = style.subplots(1, 2, extra_height=0.9)
    ax = axes[0, 0]
    ax.plot(history.index, history["inv"], color=style.colour("invariant"), label=INV_LABEL)
    ax.plot(history.index, history["spu"], color=style.colour("spurious"), label=SPU_LABEL)
    _band(ax, band, "inv", style.colour("invariant"))
    _band(ax, band, "spu", style.colour("spurious"))
    ax.axhline(limits[0], color=style.colour("invariant"), linestyle=":", label="population limits (dotted)")
    ax.axhline(limits[1], color=style.colour("spurious"), linestyle=":")
    step_axis(ax, history)
    ax.set(ylabel="feature learning", title="ERM feature learning")
    ax = axes[0, 1]
    ax.plot(history.index, history["train_acc"], color=style.colour("train"), label="train accuracy")
    ax.plot(history.index, history["test_acc"], color=style.colour("test"),
            label="OOD test accuracy (spurious correlation reversed)")
    _band(ax, band, "train_acc", style.colour("train"))
    _band(ax, band, "test_acc", style.colour("test"))
    step_axis(ax, history)
    ax.set(ylabel="accuracy", ylim=(-0.02, 1.02), title="accuracy")
    style.legend_below(fig, axes.flat, ncol=2)
    return fig


def increments_figure(inc: pd.DataFrame):
    """Per-step increments of the two coefficients (log-log)."""
    fig, axes = style.subplots(1, 1, extra_height=0.7)
    ax = axes[0, 0]
    ax.plot(inc.index, inc["inv"], color=style.colour("invariant"), label="invariant increment")
    ax.plot(inc.index, inc["spu"], color=style.colour("spurious"), label="spurious increment")
    ax.set(xscale="log", yscale="log", xlabel="GD step", ylabel="increment per step")
    style.legend_below(fig, ax, ncol=2)
    return fig


def alpha_sweep_figure(sweep: pd.DataFrame, beta_bar: float, probe_step: int, sweep_steps: int, band=None):
    """Chapter 01's sweep of alpha: spurious - invariant (early and late), and ERM's OOD accuracy
    (``band``: the seeds' range, frames indexed like ``sweep``)."""
    fig, axes = style.subplots(1, 2, extra_height=0.9)
    ax = axes[0, 0]
    ax.plot(sweep["alpha"], sweep["gap_probe"], "o-", color=style.PALETTE[0], label=f"after {probe_step} steps")
    ax.plot(sweep["alpha"], sweep["gap_final"], "s-", color=style.PALETTE[3], label=f"after {sweep_steps} steps")
    _band(ax, band, "gap_probe", style.PALETTE[0], sweep["alpha"])
    _band(ax, band, "gap_final", style.PALETTE[3], sweep["alpha"])
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.axvline(beta_bar, color="black", linestyle="--", label=r"predicted flip $\alpha=\bar\beta$")
    ax.set(xlabel=r"$\alpha$", ylabel="spurious − invariant", title="which feature ERM learns more")
    ax = axes[0, 1]
    ax.plot(sweep["alpha"], sweep["test_acc_final"], "o-", color=style.colour("test"))
    _band(ax, band, "test_acc_final", style.colour("test"), sweep["alpha"])
    ax.axvline(beta_bar, color="black", linestyle="--")
    ax.set(xlabel=r"$\alpha$", ylabel="OOD test accuracy", ylim=(-0.02, 1.02), title="ERM out of distribution")
    style.legend_below(fig, axes.flat, ncol=3)
    return fig


def activations_figure(histories: dict[str, pd.DataFrame], bands: dict | None = None):
    """The ERM run with each activation psi, one panel each (at most three a row); ``bands``:
    the seeds' range of each, by activation."""
    fig, axes = style.panels(len(histories), max_columns=3, extra_height=0.7)
    columns = min(len(histories), 3)
    for i, (ax, (name, h)) in enumerate(zip(axes, histories.items())):
        ax.plot(h.index, h["inv"], color=style.colour("invariant"), label="invariant")
        ax.plot(h.index, h["spu"], color=style.colour("spurious"), label="spurious")
        _band(ax, (bands or {}).get(name), "inv", style.colour("invariant"))
        _band(ax, (bands or {}).get(name), "spu", style.colour("spurious"))
        step_axis(ax, h)
        ax.set_title(rf"$\psi$ = {name.replace('_', ' ')}")
        # One row of narrow panels shares its labels: the long step label under the middle
        # panel only, the y label on the first of each row (each panel keeps its own y scale).
        if i % columns != columns // 2:
            ax.set_xlabel("")
        if i % columns == 0:
            ax.set_ylabel("feature learning")
    style.legend_below(fig, axes, ncol=2)
    return fig


def pretraining_sweep_figure(sweep: pd.DataFrame, invariant_solution: float, irm_steps: int, band=None):
    """Chapter 02's sweep: coefficients and OOD test loss after IRMv1, against pre-training steps
    (``band``: the seeds' range, frames indexed like ``sweep``)."""
    fig, axes = style.subplots(1, 2, extra_height=0.9)
    x = np.maximum(sweep["pretrain_steps"], 0.5)
    ax = axes[0, 0]
    ax.plot(x, sweep["inv_final"], "o-", color=style.colour("invariant"), label="invariant after IRMv1")
    ax.plot(x, sweep["spu_final"], "s-", color=style.colour("spurious"), label="spurious after IRMv1")
    _band(ax, band, "inv_final", style.colour("invariant"), x)
    _band(ax, band, "spu_final", style.colour("spurious"), x)
    ax.plot(x, sweep["inv_switch"], "o:", color=style.colour("invariant"), alpha=0.5, label="invariant at the switch (end of pre-training)")
    ax.axhline(invariant_solution, color="grey", linestyle="-.", linewidth=1, label="invariant solution")
    ax.set(xscale="log", xlabel="ERM pre-training steps (0 at 0.5)", ylabel="feature learning",
           title=f"after {irm_steps} IRMv1 steps")
    ax = axes[0, 1]
    ax.plot(x, sweep["test_loss_final"], "o-", color=style.colour("test"), label="OOD test loss after IRMv1")
    _band(ax, band, "test_loss_final", style.colour("test"), x)
    ax.axhline(np.log(2), color="grey", linestyle=":", label="log 2 (no feature)")
    ax.set(xscale="log", xlabel="ERM pre-training steps (0 at 0.5)", ylabel="OOD test loss",
           title="OOD test loss after IRMv1")
    style.legend_below(fig, axes.flat, ncol=3)
    return fig


def short_pretraining_figure(short: pd.DataFrame, pretrain_steps: int, env_labels, reference,
                             premise: pd.DataFrame | None = None, bands: tuple | None = None):
    """Corollary 4.4: C_IRMv1 and the coefficients after too short a pre-training (top) and, given
    ``premise`` (:func:`featlib.synthetic.premise_run`), after a pre-training that meets the
    corollary's premise (bottom), both switching to IRMv1 at ``pretrain_steps``; ``bands``: the
    seeds' range of each, ``(short's, premise's)``."""
    rows = [(short, "short pre-training")] + ([(premise, "premise met")] if premise is not None else [])
    fig, axes = style.subplots(len(rows), 2, extra_height=0.9)
    for i, ((history, what), band) in enumerate(zip(rows, bands or (None, None))):
        # on a log step axis: the pre-training's few steps and IRMv1's first ones are the subject
        plot_c_irmv1(axes[i, 0], history, pretrain_steps, f"$C_{{IRMv1}}$, {what}", env_labels, band, log_steps=True)
        plot_coefficients(axes[i, 1], history, pretrain_steps, reference, f"features, {what}", band, log_steps=True)
    style.legend_below(fig, axes.flat, ncol=2)
    return fig
