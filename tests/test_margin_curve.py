"""The margin curve and the protocol fixed before looking (featlib.experiments.margin_curve), on
runs whose answers are known by construction, and the study's settings against the written rule."""
from __future__ import annotations

import inspect
import itertools

import numpy as np
import pandas as pd
import pytest

from featlib import hparams
from featlib.experiments import margin_curve as mc

WEIGHTS = (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6)


def runs(value, learners=("erm", "bonsai", "ifeat"), objectives=("irmv1",), seeds=(1, 2, 3), steps=(500, 1000),
         weights=WEIGHTS, pretrain=(0, 50), dataset="cmnist025"):
    """A study's rows with worst_test_acc = value(learner, objective, weight, pretrain, seed, step)."""
    rows = []
    for learner, objective, w, k, seed, step in itertools.product(learners, objectives, weights, pretrain, seeds,
                                                                  steps):
        acc = value(learner, objective, w, k, seed, step)
        rows.append({"dataset": dataset, "seed": seed, "learner": learner, "objective": objective,
                     "penalty_weight": w, "pretrain_epochs": k, "step": step, "train_acc": 0.5,
                     "worst_test_acc": acc, "val_acc": acc})
    return pd.DataFrame(rows)


def test_the_grid_widens_only_where_the_choice_sits_on_an_edge_and_reports_a_binding_edge():
    # erm's best weight is 1e3 (interior of F.1's grid); bonsai's rises to 1e6 (F.1's edge, then the widest's);
    # ifeat's best is 1e0, below F.1's lowest weight
    best = {"erm": 1e3, "bonsai": 1e6, "ifeat": 1e0}
    frame = runs(lambda l, o, w, k, s, t: 0.8 - 0.01 * abs(np.log10(w) - np.log10(best[l])), steps=(500,))
    cells = mc.widened(frame.drop(columns="step")).set_index("learner")
    assert cells.loc["erm", "penalty_weight"] == 1e3 and not cells.loc["erm", "binding"]
    assert (cells.loc["erm", "grid_low"], cells.loc["erm", "grid_high"]) == (1e1, 1e5)
    assert cells.loc["bonsai", "penalty_weight"] == 1e6 and cells.loc["bonsai", "binding"]
    assert cells.loc["ifeat", "penalty_weight"] == 1e0 and cells.loc["ifeat", "binding"]
    f1 = mc.cells(frame, rule="f1").set_index("learner")
    assert f1.loc["bonsai", "penalty_weight"] == 1e5 and f1.loc["ifeat", "penalty_weight"] == 1e1


def test_a_study_that_never_tried_past_f1_binds_at_f1s_edge():
    frame = runs(lambda l, o, w, k, s, t: 0.5 + 0.01 * np.log10(w), weights=hparams.APPENDIX_F1["penalty_weights"]
                 .value, steps=(500,))
    cells = mc.widened(frame.drop(columns="step"))
    assert (cells["penalty_weight"] == 1e5).all() and cells["binding"].all()


def test_the_converged_length_is_the_first_from_which_no_cell_rises_by_more_than_its_seed_std():
    steps = (500, 1000, 1500, 2000, 2500)
    level = {500: 0.60, 1000: 0.65, 1500: 0.70, 2000: 0.705, 2500: 0.70}  # rises to 1,500, then within noise
    noise = {1: -0.01, 2: 0.0, 3: 0.01}  # seed std 0.816 points at every length
    frame = runs(lambda l, o, w, k, s, t: level[t] + noise[s] + (0.001 if w == 1e3 else 0), steps=steps)
    table = mc.cells(frame, rule="f1")
    length, report = mc.converged_length(table)
    assert length == 1500
    assert report.set_index("step").loc[1000, "rise"] == pytest.approx(100 * (0.705 - 0.65) - 100 * np.std([-.01, 0,
                                                                                                            .01]))
    flat = runs(lambda l, o, w, k, s, t: 0.7 + noise[s], steps=steps)
    assert mc.converged_length(mc.cells(flat, rule="f1"))[0] == 500
    rising = runs(lambda l, o, w, k, s, t: 0.5 + t / 10000, steps=steps, seeds=(1,))  # one seed: std 0, always rising
    assert mc.converged_length(mc.cells(rising, rule="f1"))[0] is None  # the last length never counts


def test_margins_say_lead_tie_or_loss_by_the_larger_seed_std_and_give_the_per_seed_spread():
    mean = {"irmv1": {"erm": 0.70, "bonsai": 0.72, "ifeat": 0.80},   # lead by 8 points
            "vrex": {"erm": 0.70, "bonsai": 0.71, "ifeat": 0.715},   # 0.5 points, within the 0.82-point spread: tie
            "fishr": {"erm": 0.75, "bonsai": 0.70, "ifeat": 0.70}}   # loss by 5 points to ERM's
    noise = {1: -0.01, 2: 0.0, 3: 0.01}
    frame = runs(lambda l, o, w, k, s, t: mean[o][l] + noise[s] * (2 if l == "ifeat" else 1),
                 objectives=("irmv1", "vrex", "fishr"), steps=(500,))
    rows = mc.margins(mc.cells(frame, rule="f1")).set_index("objective")
    assert rows.loc["irmv1", "margin"] == pytest.approx(8.0) and rows.loc["irmv1", "verdict"] == "lead"
    assert rows.loc["irmv1", "best_other"] == "bonsai"
    assert rows.loc["vrex", "verdict"] == "tie" and rows.loc["fishr", "verdict"] == "loss"
    assert rows.loc["fishr", "best_other"] == "erm"
    # per-seed margins: ifeat's noise is twice the baseline's, so they spread by std([-1, 0, 1]) points
    assert rows.loc["irmv1", "seed_sd"] == pytest.approx(100 * np.std([-0.01, 0, 0.01]))
    assert rows.loc["irmv1", "spread"] == pytest.approx(100 * np.std([-0.02, 0, 0.02]))
    counts = mc.verdicts(mc.margins(mc.cells(frame, rule="f1"))).iloc[0]
    assert (counts["lead"], counts["tie"], counts["loss"]) == (1, 1, 1)


def test_ib_irm_is_left_out_of_the_margins_as_irmv1_again():
    frame = runs(lambda l, o, w, k, s, t: 0.7 + (0.05 if l == "ifeat" else 0), objectives=("irmv1", "ib_irm"),
                 steps=(500,))
    assert list(mc.margins(mc.cells(frame, rule="f1"))["objective"]) == ["irmv1"]


def test_the_margin_curve_studies_run_the_grids_and_length_the_written_protocol_names():
    from featlib.experiments.gap_studies import MARGIN_CLOVE_01, MARGIN_STEPS, MARGIN_WEIGHTS, STUDIES

    assert tuple(MARGIN_WEIGHTS) == mc.WIDEST
    assert set(mc.F1_GRID) < set(mc.WIDEST) and min(mc.WIDEST) < min(mc.F1_GRID) and max(mc.WIDEST) > max(mc.F1_GRID)
    assert MARGIN_STEPS >= 6000 and "6,000 steps" in hparams.CONVERGED_PROTOCOL["OOD stage's length"].source
    assert set(hparams.CLOVE_WEIGHTS_01) <= set(MARGIN_CLOVE_01)  # the calibrated grid is read from the same runs
    for name, dataset in (("margin-curve-025", "cmnist025"), ("margin-curve-01", "cmnist01")):
        study = STUDIES.get(name)
        assert study.keywords["dataset"] == dataset and study.keywords["steps"] == MARGIN_STEPS
        assert inspect.signature(study).parameters["eval_every"].default == 500  # scored every 500 steps
        assert tuple(study.keywords["penalty_weights"]) == tuple(MARGIN_WEIGHTS)


# -- the views (featbook.margin_views) -------------------------------------------------------------------
def _margin_rows():
    rows = []
    for dataset, (irm, vrex) in {"cmnist025": (0.5, -3.0), "cmnist01": (6.0, 1.0)}.items():
        for step in (500, 1000, 1500):
            rows.append({"dataset": dataset, "step": step, "objective": "irmv1", "best_other": "bonsai",
                         "margin": irm, "spread": 1.0, "verdict": "tie" if abs(irm) < 1 else "lead",
                         "seed_sd": 0.3, "n_seeds": 3})
            rows.append({"dataset": dataset, "step": step, "objective": "vrex", "best_other": "erm",
                         "margin": vrex - step / 1000, "spread": 0.5,
                         "verdict": "loss" if vrex - step / 1000 < -0.5 else "lead" if vrex - step / 1000 > 0.5 else "tie",
                         "seed_sd": 0.2, "n_seeds": 3})
    return pd.DataFrame(rows)


def test_the_margin_figure_has_a_panel_per_dataset_and_no_text_drawn_over_text():
    import matplotlib.pyplot as plt

    from featbook import margin_views, overlaps, style

    style.use()
    fig = margin_views.margin_curve_figure(_margin_rows(), calibrated=1000, converged={"cmnist025": 1000,
                                                                                       "cmnist01": None})
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert titles == ["ColoredMNIST-025", "ColoredMNIST-01"]
    labels = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"IRMv1", "V-REx", "Table 2's calibrated length", "converged length"} <= labels
    try:
        assert overlaps.overlapping_texts(fig) == []
    finally:
        plt.close(fig)


def test_the_protocols_table_and_sentence_name_what_depends_on_the_choice():
    from featbook import margin_views

    calibrated = pd.DataFrame([
        {"dataset": "cmnist01", "objective": "irmv1", "margin": 5.6, "tie": False, "paper_margin": 5.62,
         "paper_tie": False},
        {"dataset": "cmnist01", "objective": "vrex", "margin": 1.98, "tie": True, "paper_margin": 2.09,
         "paper_tie": False}])
    fixed = pd.DataFrame([
        {"dataset": "cmnist01", "step": 4000, "objective": "irmv1", "margin": 5.0, "verdict": "lead"},
        {"dataset": "cmnist01", "step": 4000, "objective": "vrex", "margin": -1.5, "verdict": "loss"}])
    shown = margin_views.protocols_table(calibrated, fixed, caption="c").frame
    assert list(shown["Calibrated (2,500 steps)"]) == ["+5.60 (lead)", "+1.98 (tie)"]
    assert list(shown["Fixed before looking"]) == ["+5.00 (lead), 4,000 steps", "-1.50 (loss), 4,000 steps"]
    sentence = margin_views.verdict_sentence(calibrated, fixed, "cmnist01").replace("\xa0", " ")
    assert "1 lead, 1 tie under the calibrated protocol" in sentence
    assert "1 lead, 1 loss under the one fixed before looking" in sentence
    assert sentence.endswith("the verdict depends on the protocol for V-REx.")
