"""The two-bit chapters' figures (featbook.plotting, chapters 01-02) print no label over another:
each figure is drawn from histories of the shape the chapters pass, and every pair of visible texts
is checked (featbook.style.overlapping_texts)."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from featbook import plotting, style


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
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_label_is_printed_over_another(name):
    style.use()
    fig = FIGURES[name]()
    try:
        assert style.overlapping_texts(fig) == [], name
    finally:
        plt.close(fig)


def test_the_overlap_check_sees_labels_printed_over_each_other():
    fig, axes = style.subplots(1, 3)
    for ax in axes.flat:
        ax.set_xlabel("GD step (log scale after step 1), a label far wider than its panel")
    try:
        assert len(style.overlapping_texts(fig)) >= 2
    finally:
        plt.close(fig)
