"""Figures of the two-bit chapters (the panels of Fig. 2)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

INV_STYLE = dict(color="tab:orange", label="invariant  mean <w, j v1>")
SPU_STYLE = dict(color="tab:blue", label="spurious  mean <w, j v2>")


def _mark(ax, step: int | None) -> None:
    if step is not None:
        ax.axvline(step, color="black", linestyle="--", linewidth=1, label="end of pre-training")


def plot_coefficients(ax, history: pd.DataFrame, mark_step: int | None = None,
                      reference: dict[str, float] | None = None, title: str | None = None) -> None:
    """Invariant and spurious feature-learning coefficients against the GD step; optional
    horizontal reference levels (``{"label": value}``)."""
    ax.plot(history.index, history["inv"], **INV_STYLE)
    ax.plot(history.index, history["spu"], **SPU_STYLE)
    for i, (label, value) in enumerate((reference or {}).items()):
        ax.axhline(value, color="grey", linestyle=":" if i else "-.", linewidth=1, label=label)
    _mark(ax, mark_step)
    ax.set_xlabel("GD step")
    ax.set_ylabel("feature learning (FL)")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)


def plot_c_irmv1(ax, history: pd.DataFrame, mark_step: int | None = None, title: str | None = None,
                 env_labels: list[str] | None = None) -> None:
    """C_IRMv1^e for each training environment against the GD step."""
    cols = [c for c in history.columns if c.startswith("c_irmv1_")]
    for i, col in enumerate(cols):
        label = env_labels[i] if env_labels else f"env {i}"
        ax.plot(history.index, history[col], label=f"$C^{{{i + 1}}}_{{IRMv1}}$ ({label})")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    _mark(ax, mark_step)
    ax.set_xlabel("GD step")
    ax.set_ylabel("$C_{IRMv1}^e$")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)


def figure2(with_pt: pd.DataFrame, without_pt: pd.DataFrame, pretrain_steps: int,
            env_labels: list[str] | None = None, reference: dict[str, float] | None = None):
    """The four panels of Fig. 2: (a) C_IRMv1 and (b) FL with ERM pre-training, (c) C_IRMv1 and
    (d) FL with IRMv1 from scratch."""
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    plot_c_irmv1(axes[0], with_pt, pretrain_steps, "(a) $C_{IRMv1}$, w/ PT", env_labels)
    plot_coefficients(axes[1], with_pt, pretrain_steps, reference, "(b) FL, w/ PT")
    plot_c_irmv1(axes[2], without_pt, None, "(c) $C_{IRMv1}$, w/o PT", env_labels)
    plot_coefficients(axes[3], without_pt, None, None, "(d) FL, w/o PT")
    axes[3].set_ylim(axes[1].get_ylim())  # same scale as (b): from scratch nothing is learned
    fig.tight_layout()
    return fig
