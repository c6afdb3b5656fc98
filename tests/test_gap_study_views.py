"""The gap studies' summaries change one thing at a time, flag weights the protocol could not
choose, show no spread for one seed, and end in one sentence that says what the study shows."""
import pytest
import pandas as pd

from featbook.gap_study_views import erm_nf_erm_conclusion, frozen_steps_conclusion, frozen_steps_table
from featlib.experiments.cmnist_analysis import frozen_steps_changes


def _frozen(n_seeds=3):
    rows = []
    for objective, values in (("vrex", {(1, 1000): (0.78, 1e3), (1, 5000): (0.81, 1e4), (0, 5000): (0.84, 1e4),
                                        (0, 1000): (0.79, 1e3)}),
                              ("fishr", {(1, 1000): (0.775, 1e4), (1, 5000): (0.82, 1e6), (0, 5000): (0.83, 1e5),
                                         (0, 1000): (0.78, 1e4)})):
        for (l2, step), (mean, weight) in values.items():
            rows.append({"objective": objective, "head_l2": 1e-3 * l2, "step": step, "penalty_weight": weight,
                         "mean": mean, "std": 0.01 if n_seeds > 1 else 0.0, "n_seeds": n_seeds})
    return pd.DataFrame(rows)


def test_frozen_steps_changes_one_thing_at_a_time():
    changes = frozen_steps_changes(_frozen()).set_index(["objective", "change"])
    length = changes.loc[("vrex", "steps 1,000 → 5,000, head L2 on")]
    assert (length["before"], length["after"]) == (0.78, 0.81)  # L2 held on: only the length changes
    l2 = changes.loc[("vrex", "head L2 on → off, 5,000 steps")]
    assert (l2["before"], l2["after"]) == (0.81, 0.84)  # length held at 5,000: only L2 changes
    assert round(changes.loc[("fishr", "head L2 on → off, 5,000 steps"), "difference"], 6) == 0.01


def test_conclusions_say_the_size_of_each_change_flag_outside_weights_and_one_seed():
    sentence = frozen_steps_conclusion(frozen_steps_changes(_frozen()))
    assert "V-REx by +3.0 points" in sentence and "Fishr by +4.5 points" in sentence
    assert "10⁶" in sentence and "1e6" not in sentence and "outside the protocol's grid" in sentence and "3\xa0seeds" in sentence
    one = frozen_steps_conclusion(frozen_steps_changes(_frozen(n_seeds=1)))
    assert "one seed, so this gives a direction, not a size" in one
    table = frozen_steps_table(_frozen(n_seeds=1), 1)
    import html as html_lib
    html = html_lib.unescape(table._repr_html_())
    rows = html[html.index("<table"):]  # the key above the table names the paper too
    assert "10⁶ (outside the protocol's grid)" in html and "±" not in rows.split("paper")[0]
    erm = pd.DataFrame([{"risk": r, "step": st, "mean": m, "std": 0.0, "n_seeds": 1}
                        for r, st, m in (("mean", 500, 0.165), ("mean", 1001, 0.21), ("sum", 500, 0.22),
                                         ("sum", 1001, 0.27))])
    text = erm_nf_erm_conclusion(erm)
    assert "alone moves the cell by −5.0 points" in text and "alone moves it by −6.0" in text and "16.5%" in text


def _clove_rows(values, seeds=(1,)):
    """clove-01 rows: ``values[(variant, step, learner)]`` is the best configuration's worst-test
    accuracy; a second, weaker penalty weight sits beside each (Table 2's rule must skip it)."""
    rows = []
    for (variant, step, learner), value in values.items():
        for seed in seeds:
            for weight, shift in ((100.0, 0.0), (10.0, -0.05)):
                rows.append({"dataset": "cmnist01", "seed": seed, "learner": learner, "objective": "clove",
                             "penalty_weight": weight, "pretrain_epochs": 0, "step": step, "train_acc": 0.8,
                             "worst_test_acc": value + shift, "val_acc": 0.5, "variant": variant})
    return pd.DataFrame(rows)


def test_the_clove_study_is_summarised_per_variant_and_length_by_table_2s_rule():
    from featlib.experiments.gap_studies import CLOVE_VARIANTS, clove_01_summary

    values = {}
    for i, (variant, _, _) in enumerate(reversed(CLOVE_VARIANTS)):  # written in reverse: the summary reorders
        for step in (500, 1000, 2500):
            values[(variant, step, "erm")] = 0.74 + 0.001 * i
            values[(variant, step, "ifeat")] = 0.79
    summary = clove_01_summary(_clove_rows(values))
    assert list(dict.fromkeys(summary["variant"])) == [v for v, _, _ in CLOVE_VARIANTS]
    assert sorted(summary["step"].unique()) == [500, 2500]  # the authors' length and the protocol's
    assert set(summary["penalty_weight"]) == {100.0}  # the better weight of each cell
    assert len(summary) == len(CLOVE_VARIANTS) * 2 * 2


def test_the_clove_conclusion_counts_settings_near_the_papers_cell_per_column():
    from featbook.gap_study_views import clove_01_conclusion, clove_01_table
    from featlib.experiments.gap_studies import CLOVE_VARIANTS, clove_01_summary
    from featlib.experiments.paper_values import TABLE2

    erm, ifeat = TABLE2["cmnist01"]["clove"]["erm"][0], TABLE2["cmnist01"]["clove"]["ifeat"][0]
    values = {}
    for variant, _, _ in CLOVE_VARIANTS:
        for step in (500, 2500):
            values[(variant, step, "erm")] = erm / 100
            values[(variant, step, "ifeat")] = (ifeat + 4.0) / 100  # 3.7 paper stds above
    summary = clove_01_summary(_clove_rows(values))
    sentence = clove_01_conclusion(summary).replace("\xa0", " ")
    assert "Over the 8 settings (one seed)" in sentence
    assert "ERM's 74.73-74.73 against 74.73 ± 0.36 (8 of 8 within 2 paper stds)" in sentence
    assert "(0 of 8 within 2 paper stds)" in sentence and "not in CLOvE's implementation" in sentence
    # every column near the paper's: no claim about an implementation
    values = {k: (erm if k[2] == "erm" else ifeat) / 100 for k in values}
    assert "implementation" not in clove_01_conclusion(clove_01_summary(_clove_rows(values)))
    shown = clove_01_table(summary, 1).frame
    assert list(shown["OOD steps"][:2]) == ["501", "2,500"] and shown.iloc[-1]["CLOvE"] == "paper (Table 2)"


def _length(values_by_step, seeds=(1, 2), weights=(1e2, 1e3)):
    """ood-length-025-erm rows: at each step the second weight scores ``values_by_step[step]`` on
    seed 1 and 1 point more on seed 2 (%), the first weight 5 points less."""
    return pd.DataFrame([{"dataset": "cmnist025", "seed": s, "learner": "erm", "objective": "irmx",
                          "penalty_weight": w, "pretrain_epochs": 0, "step": step,
                          "worst_test_acc": (v + (s - 1) - (5 if w == weights[0] else 0)) / 100}
                         for step, v in values_by_step.items() for s in seeds for w in weights])


def test_the_length_table_gives_table_2s_cell_at_each_length_beside_the_papers():
    from featbook.ch09_views import length_cells_table

    frame = _length({0: 10.0, 2500: 60.0, 3000: 64.0, 4000: 67.0})
    shown = length_cells_table(frame, "cmnist025", "erm", 2500).frame
    assert list(shown.columns) == ["OOD steps", "IRMX"]
    assert list(shown["OOD steps"]) == ["2,500 (protocol)", "3,000", "4,000", "the paper's"]  # step 0 left out
    cells = shown["IRMX"].str.replace("\xa0", " ").tolist()
    assert cells == ["60.50 ± 0.50", "64.50 ± 0.50", "67.50 ± 0.50", "64.05 ± 0.88"]  # seeds 60, 61; the better weight
    some = length_cells_table(frame, "cmnist025", "erm", 2500, steps=(3000, 3500)).frame
    assert list(some["OOD steps"]) == ["3,000", "the paper's"]  # a length not scored is left out


def test_the_length_sentence_says_the_rise_past_the_protocols_length_and_where_the_paper_lies():
    from featbook.ch09_views import length_cell_sentence

    text = length_cell_sentence(_length({2500: 60.0, 3000: 64.0, 4000: 67.0}), "cmnist025", "erm", "irmx", 2500)
    text = text.replace("\xa0", " ")
    assert text.startswith("Over 2 seeds, IRMX on ERM's features gives 60.50 ± 0.50 at the protocol's 2,500 steps, "
                           "64.50 ± 0.50 at 3,000 and 67.50 ± 0.50 at 4,000: +7.0 points")
    # the paper's 64.05 ± 0.88: within 1.76 of 64.5 only
    assert text.endswith("At 3,000 steps, and there only, ours lies within 2 paper stds of the paper's 64.05 ± 0.88.")
    none = length_cell_sentence(_length({2500: 50.0, 3000: 51.0}), "cmnist025", "erm", "irmx", 2500)
    assert "At no length scored does ours lie within 2 paper stds" in none.replace("\xa0", " ")
    assert length_cell_sentence(_length({3000: 64.0}), "cmnist025", "erm", "irmx", 2500) == ""  # no protocol length


def test_the_clove_grid_study_is_judged_by_its_criterion_against_table_2s_f1_cells(monkeypatch):
    """clove-grid-01 beside Table 2's Appendix F.1 cells: each cell's distance is
    (ours - paper) / paper std, and the verdict is the criterion fixed before the third seed ran."""
    from featbook import gap_study_views
    from featlib.experiments import gap_studies
    from featlib.experiments.paper_values import TABLE2
    from featlib.hparams import APPENDIX_F1, CLOVE_WEIGHTS_01

    paper = {l: TABLE2["cmnist01"]["clove"][l] for l in ("erm", "bonsai", "ifeat")}

    def rows(weights, at, step=None):  # every config scores 0.5 but the top weight, which scores ``at`` per learner
        return pd.DataFrame([dict(dataset="cmnist01", learner=l, objective="clove", penalty_weight=w, pretrain_epochs=e,
                                  seed=s, worst_test_acc=(at[l] if w == weights[-1] else 0.5) + 0.001 * (s - 2),
                                  **({} if step is None else {"step": step}))
                             for l in paper for w in weights for e in (0, 50) for s in (1, 2, 3)])

    near = {l: (paper[l][0] + 1.0 * paper[l][1]) / 100 for l in paper}  # +1 paper std each
    far = {l: (paper[l][0] + (3.0 if l == "ifeat" else 0.5) * paper[l][1]) / 100 for l in paper}
    f1 = APPENDIX_F1["penalty_weights"].value
    study = pd.concat([rows(CLOVE_WEIGHTS_01, near, 2500), rows(CLOVE_WEIGHTS_01, far, 500)])
    table2 = pd.concat([rows(f1, far), rows(f1, near).assign(objective="irmv1")])
    summary = gap_studies.clove_grid_summary(study, table2)
    assert list(summary["grid"].unique()) == ["script", "f1"] and set(summary["n_seeds"]) == {3}
    script = summary[summary["grid"] == "script"].set_index("learner")
    assert script["z"].round(6).tolist() == [1.0, 1.0, 1.0] and set(script["penalty_weight"]) == {100.0}
    assert summary.loc[summary["grid"] == "f1", "z"].abs().sum() == pytest.approx(4.0)
    # the decided grid's runs (weights 10 and 100 are in both grids) never enter the F.1 row: seeds of
    # the decided grid alone are left out, a seed holding both grids counts for neither
    decided = rows(CLOVE_WEIGHTS_01, {l: 0.9 for l in paper})
    mixed = gap_studies.clove_grid_summary(study, pd.concat([table2, decided.assign(seed=decided["seed"] + 3)]))
    pd.testing.assert_frame_equal(mixed, summary)
    both = gap_studies.clove_grid_summary(study, pd.concat([table2, decided[decided["seed"] == 1]]))
    assert set(both.loc[both["grid"] == "f1", "n_seeds"]) == {2}
    with pytest.warns(UserWarning, match="no \\(learner, seed\\) tried exactly Appendix F.1's five weights"):
        alone = gap_studies.clove_grid_summary(study, decided)  # Table 2's pieces passed by mistake
    assert list(alone["grid"].unique()) == ["script"]
    said = gap_study_views.clove_grid_conclusion(summary)
    assert "+1.0, +1.0 and +1.0 paper stds (3.0 in all)" in said and "(4.0 in all)" in said
    assert "is met: the script's weights are the decision" in said
    assert "until then" not in said and "Table 2 applies them" in said  # hparams.OBJECTIVE_GRIDS holds it
    monkeypatch.setattr(gap_study_views, "OBJECTIVE_GRIDS", {})  # as before it landed
    before = gap_study_views.clove_grid_conclusion(summary)
    assert "until then its ColoredMNIST-01 CLOvE cells are Appendix F.1's" in before and "applies them" not in before
    # the study at the authors' 500 steps would miss the band: FeAT's cell 3 paper stds off
    assert "is not met: Appendix F.1's grid stays" in gap_study_views.clove_grid_conclusion(
        gap_studies.clove_grid_summary(study, table2, step=500))
    assert "not at hand" in gap_study_views.clove_grid_conclusion(gap_studies.clove_grid_summary(study))
    text = gap_study_views.clove_grid_table(summary)._repr_html_()
    assert "(+1.0)" in text and "paper (Table 2)" in text and "3.0" in text


def _lengths(cells):
    """``{dataset: Series of z by (learner, step)}`` from ``{dataset: {learner: (z at 1,000, z at 2,500)}}``."""
    return {d: pd.Series({(l, step): z for l, pair in by.items() for step, z in zip((1000, 2500), pair)})
            for d, by in cells.items()}


def test_length_effect_text_says_what_the_numbers_say_for_every_column():
    from featbook.ch09_views import length_effect_text

    # the committed studies' shape: on -01 FeAT moves away from the paper while the baselines move towards it
    text = length_effect_text(_lengths({"cmnist025": {"erm": (-1.37, 0.08), "bonsai": (0.56, 0.79), "ifeat": (-0.22, -0.07)},
                                        "cmnist01": {"erm": (-1.26, -0.34), "bonsai": (-1.8, -0.56), "ifeat": (0.32, 0.81)}}),
                              1000, 2500)
    assert "FeAT's from +0.32 to +0.81" in text and "ERM's from \u22121.37 to +0.08" in text
    assert "On ColoredMNIST-025, ERM's and FeAT's move towards the paper's cells and Bonsai's away from them" in text
    assert "on ColoredMNIST-01, ERM's and Bonsai's move towards the paper's cells and FeAT's away from them" in text
    assert "widens FeAT's lead over the baselines by that alone" in text
    assert "not FeAT" not in text and "hardly" not in text
    # the shorter length favours the baselines on every dataset
    text = length_effect_text(_lengths({"cmnist025": {"erm": (0.5, -0.5), "ifeat": (-0.5, 0.5)}}), 1000, 2500)
    assert "narrow FeAT's lead" in text and "towards" not in text and "away from them" not in text
    away = length_effect_text(_lengths({"cmnist01": {"ifeat": (0.3, 0.8)}}), 1000, 2500)
    assert "On ColoredMNIST-01, FeAT's moves away from the paper's cells." in away and "lead" not in away
    # mixed: one baseline each way
    text = length_effect_text(_lengths({"cmnist025": {"erm": (-1.0, 0.0), "bonsai": (1.0, 0.0), "ifeat": (0.0, 0.0)}}),
                              1000, 2500)
    assert "gains from the shorter length on some dataset or baseline and loses on another" in text
    # nothing to compare
    assert length_effect_text({"cmnist025": pd.Series({("erm", 500): 0.1})}, 1000, 2500).startswith("no study")


def test_table2_against_paper_text_gives_each_columns_distance_from_the_diagonal():
    from featbook.ch09_views import table2_against_paper_text
    from featlib.experiments.paper_values import TABLE2

    rows = []
    for learner, off in (("erm", 3.0), ("bonsai", 1.0), ("ifeat", 0.5)):
        for objective in ("irmv1", "vrex"):
            mean = (TABLE2["cmnist025"][objective][learner][0] + off) / 100
            rows += [{"dataset": "cmnist025", "learner": learner, "objective": objective, "penalty_weight": 1e4,
                      "pretrain_epochs": 0, "seed": seed, "worst_test_acc": mean, "val_acc": 0.5,
                      "diverged": False} for seed in (1, 2)]
    text = table2_against_paper_text(pd.DataFrame(rows))
    assert "on ColoredMNIST-025, ERM's 3.0 points (3.0), Bonsai's 1.0 points (1.0) and FeAT's 0.5 points (0.5)" in text
    assert table2_against_paper_text(pd.DataFrame(rows).assign(learner="erm-nf")) == ""
