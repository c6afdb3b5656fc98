"""The frozen cells of Table 2 far from the paper's, and what the gap studies say of each (issue 33):
``featlib.experiments.gap_studies.cell_evidence`` reads a cell out of every committed study by
Table 2's rule; ``featlib.experiments.cmnist_analysis.far_cells`` picks the cells beyond two paper
stds and ``featbook.ch04_views.far_cell_verdict`` / ``far_cells_section`` say whether a study explains
them (chapter 04)."""
import numpy as np
import pandas as pd
import pytest

from featbook import ch04_views as views
from featlib import hparams
from featlib.experiments import cmnist_analysis as analysis
from featlib.experiments.gap_studies import STUDY_CHOICES, cell_evidence
from featlib.experiments.paper_values import TABLE2

from test_table2_choice import runs


F1 = hparams.APPENDIX_F1["penalty_weights"].value


def study_rows(dataset, learner, objective, values, weights=F1, **extra):
    """ood-length-style rows over ``weights`` (Appendix F.1's grid, as the committed studies ran):
    ``values[step]`` is the worst-test accuracy of every weight but the first at that step; the
    first scores 0.1 less (so Table 2's rule picks another)."""
    rows = []
    for step, value in values.items():
        for i, weight in enumerate(weights):
            rows.append({"dataset": dataset, "seed": 1, "learner": learner, "objective": objective,
                         "penalty_weight": weight, "pretrain_epochs": 0, "step": step, "train_acc": 0.8,
                         "worst_test_acc": value - (0.1 if i == 0 else 0.0), "val_acc": 0.5, **extra})
    return pd.DataFrame(rows)


def test_the_evidence_is_each_setting_of_each_study_chosen_by_table_2s_rule():
    length = pd.concat([study_rows("cmnist01", "erm", "fishr", {0: 0.5, 500: 0.70, 2500: 0.79, 3000: 0.80}),
                        study_rows("cmnist01", "erm", "irmv1", {500: 0.6, 2500: 0.65}),
                        study_rows("cmnist01", "bonsai", "fishr", {500: 0.1, 2500: 0.1})])
    steps = pd.DataFrame([{"dataset": "cmnist01", "seed": s, "objective": "fishr", "head_l2": l2, "penalty_weight": 1e3,
                           "step": step, "train_acc": 0.8, "worst_test_acc": acc + 0.01 * s}
                          for s in (1, 2) for l2, step, acc in [(0.001, 1000, 0.75), (0.001, 2500, 0.78),
                                                                (0.0, 5000, 0.81), (0.001, 5000, 0.79),
                                                                (0.0, 1000, 0.76), (0.0, 2500, 0.8)]])
    evidence = cell_evidence({"ood-length-01": length, "frozen-steps": steps}, "cmnist01", "erm", "fishr")
    by = evidence.set_index(["study", "change"])
    assert list(by.loc["ood-length-01"].index) == ["500 OOD steps", "2,500 OOD steps", "3,000 OOD steps"]  # step 0 left out
    assert by.loc[("ood-length-01", "3,000 OOD steps"), "mean"] == pytest.approx(0.80)  # the better weight
    assert by.loc[("frozen-steps", "5,000 OOD steps, head L2 0"), "mean"] == pytest.approx(0.825)  # seeds 0.82, 0.83
    assert by.loc[("frozen-steps", "5,000 OOD steps, head L2 0"), "std"] == pytest.approx(0.005)
    assert by.loc[("frozen-steps", "5,000 OOD steps, head L2 0"), "n_seeds"] == 2
    assert set(evidence.loc[evidence["protocol"], "change"]) == {"2,500 OOD steps", "2,500 OOD steps, head L2 0.001"}
    # frozen IB-IRM trains as IRMv1: its cell reads IRMv1's rows; a study that does not cover a cell adds nothing
    ib = cell_evidence({"ood-length-01": length}, "cmnist01", "erm", "ib_irm")
    assert list(ib["mean"]) == pytest.approx([0.6, 0.65])
    assert cell_evidence({"ood-length-01": length, "frozen-steps": steps}, "cmnist025", "erm", "fishr").empty
    assert cell_evidence({"frozen-steps": steps}, "cmnist01", "bonsai", "fishr").empty  # frozen-steps is ERM's features


def test_the_clove_study_gives_each_variant_at_the_reference_length_and_the_protocols():
    frame = pd.concat([study_rows("cmnist01", "ifeat", "clove", {500: 0.74 + k, 1000: 0.5, 2500: 0.79 - k}, variant=v)
                       for k, v in [(0.0, "protocol"), (0.01, "no-l2"), (0.02, "reference")]])
    # on ColoredMNIST-025 CLOvE's grid is Appendix F.1's: the protocol variant at its length is the protocol's own
    evidence = cell_evidence({"clove-01": frame.assign(dataset="cmnist025")}, "cmnist025", "ifeat", "clove")
    changes = dict(zip(evidence["change"], evidence["mean"]))
    assert changes == pytest.approx({"the protocol's CLOvE at 500 steps": 0.74, "the protocol's CLOvE at 2,500 steps": 0.79,
                                     "no-l2 at 500 steps": 0.75, "no-l2 at 2,500 steps": 0.78,
                                     "reference at 500 steps": 0.76, "reference at 2,500 steps": 0.77})
    assert list(evidence.loc[evidence["protocol"], "change"]) == ["the protocol's CLOvE at 2,500 steps"]
    # on -01 the protocol gives CLOvE the decided grid (hparams.OBJECTIVE_GRIDS): the study's F.1-grid
    # runs are a changed setting, and say their weights
    evidence = cell_evidence({"clove-01": frame}, "cmnist01", "ifeat", "clove")
    assert not evidence["protocol"].any()
    assert "the protocol's CLOvE code at 2,500 steps (weights 10, 100, 1000, 10000, 100000)" in set(evidence["change"])


def test_the_clove_grid_study_gives_the_cell_under_the_bonsai_authors_weights():
    """clove-grid-01: CLOvE's -01 cells with the weights the Bonsai authors' script gives CLOvE, at
    the protocol's length. Since the decision landed (hparams.OBJECTIVE_GRIDS) they are the
    protocol's own setting; against the protocol before it (Appendix F.1's grid for every
    objective) a changed setting, which explained the far F.1-grid cell."""
    from featlib.experiments.colored_mnist import CMNISTProtocol
    from featlib.experiments.gap_studies import RFC_CLOVE_WEIGHTS_01

    frame = study_rows("cmnist01", "ifeat", "clove", {500: 0.70, 2500: 0.755}, weights=RFC_CLOVE_WEIGHTS_01)
    evidence = cell_evidence({"clove-grid-01": frame}, "cmnist01", "ifeat", "clove")
    assert list(evidence["change"]) == ["the Bonsai authors' -01 grid for CLOvE (weights 1, 5, 10, 50, 100)"]
    assert evidence["mean"].tolist() == pytest.approx([0.755]) and evidence["protocol"].all()
    assert cell_evidence({"clove-grid-01": frame}, "cmnist01", "erm", "clove").empty
    part = study_rows("cmnist01", "ifeat", "clove", {2500: 0.755}, weights=RFC_CLOVE_WEIGHTS_01[:2])
    assert not cell_evidence({"clove-grid-01": part}, "cmnist01", "ifeat", "clove")["protocol"].any()  # not the whole grid
    before = CMNISTProtocol(dataset="cmnist01", objective_penalty_weights={})
    evidence = cell_evidence({"clove-grid-01": frame}, "cmnist01", "ifeat", "clove", protocol=before)
    assert not evidence["protocol"].any()
    # the F.1-grid cell, 3.5 paper stds above the paper's, put at the paper's by the study: explained by it
    cell = {"dataset": "cmnist01", "learner": "ifeat", "objective": "clove", "mean": 0.7887, "std": 0.011,
            "n_seeds": 4, "paper": 75.12, "paper_std": 1.08, "z": 3.5}
    verdict = views.far_cell_verdict(cell, evidence)
    assert verdict["explained"] == "study" and STUDY_CHOICES["clove-grid-01"] in verdict["sentence"]


def test_the_clove_grid_study_trains_the_bonsai_authors_weights_on_every_frozen_column(tmp_path):
    import torch

    from featlib.experiments.gap_studies import RFC_CLOVE_WEIGHTS_01, STUDIES

    rows = STUDIES.get("clove-grid-01")(1, torch.device("cpu"), steps=4, eval_every=2, cache_dir=tmp_path,
                                        n_train=400, n_test=200, n_val=200, hidden_dim=16, epoch_scale=0.01,
                                        pretrain_epochs=(0, 1))
    assert set(rows["penalty_weight"]) == set(RFC_CLOVE_WEIGHTS_01) and set(rows["objective"]) == {"clove"}
    assert set(rows["learner"]) == {"erm", "bonsai", "ifeat"} and set(rows["step"]) == {0, 2, 4}
    assert len(rows) == 3 * 3 * len(RFC_CLOVE_WEIGHTS_01) * 2


def at_z(z):
    """Runs whose cells sit at ``z[(dataset, learner, objective)]`` paper stds (else on the paper's mean)."""
    return runs([1, 2], accuracy=lambda d, l, o, s: (TABLE2[d][o][l][0] + z.get((d, l, o), 0.0) * TABLE2[d][o][l][1]) / 100)


def test_far_cells_are_those_beyond_two_paper_stds_furthest_first_without_the_zero_std_cell():
    frame = at_z({("cmnist01", "ifeat", "clove"): 4.0, ("cmnist025", "erm", "irmx"): -2.5,
                  ("cmnist01", "erm", "fishr"): 1.9, ("cmnist025", "bonsai", "erm"): -2.1})
    frame.loc[(frame["dataset"] == "cmnist025") & (frame["learner"] == "erm") & (frame["objective"] == "clove"),
              "worst_test_acc"] = 0.1  # the paper prints 65.78 ± 0.00 here: no distance in stds
    far = analysis.far_cells(frame)
    assert list(zip(far["dataset"], far["learner"], far["objective"])) == [
        ("cmnist01", "ifeat", "clove"), ("cmnist025", "erm", "irmx"), ("cmnist025", "bonsai", "erm")]
    assert list(far["z"]) == pytest.approx([4.0, -2.5, -2.1])
    assert list(far["n_seeds"]) == [2, 2, 2]
    assert analysis.far_cells(runs([1])).empty


def plain(text):
    """Prose with its non-breaking spaces as spaces."""
    return text.replace("\xa0", " ")


def evidence(*rows):
    return pd.DataFrame([dict(zip(["study", "change", "protocol", "mean", "std", "n_seeds"], r)) for r in rows])


CELL = {"dataset": "cmnist01", "learner": "erm", "objective": "fishr", "mean": 79.0, "std": 0.5, "n_seeds": 2,
        "paper": 82.23, "paper_std": 1.35, "z": (79.0 - 82.23) / 1.35}


def test_a_changed_setting_within_two_paper_stds_and_closer_than_the_protocol_explains_the_cell():
    verdict = views.far_cell_verdict(CELL, evidence(("frozen-steps", "2,500 OOD steps, head L2 0.001", True, 0.783, 0.02, 3),
                                                    ("frozen-steps", "5,000 OOD steps, head L2 0", False, 0.8036, 0.022, 3),
                                                    ("frozen-steps", "1,000 OOD steps, head L2 0", False, 0.7658, 0.016, 3)))
    assert verdict["explained"] == "study"
    assert "5,000 OOD steps, head L2 0 gives 80.36 ± 2.20 (3 seeds, `frozen-steps`)" in plain(verdict["sentence"])
    assert "where the protocol's own setting does not come near" in plain(verdict["sentence"])
    assert STUDY_CHOICES["frozen-steps"] in plain(verdict["sentence"])
    assert plain(verdict["sentence"]).startswith("**ColoredMNIST-01, Fishr on ERM's features**: ours 79.00 ± 0.50 (2 seeds)")


def test_a_setting_no_closer_than_the_protocols_own_is_the_seeds_not_the_setting():
    # the protocol's row is within the band; another length scores the same: no choice explains it
    verdict = views.far_cell_verdict(CELL, evidence(("ood-length-01", "2,500 OOD steps", True, 0.800, 0.0, 1),
                                                    ("ood-length-01", "1,000 OOD steps", False, 0.7995, 0.0, 1)))
    assert verdict["explained"] == "seeds"
    assert "spread between seeds" in plain(verdict["sentence"]) and "80.00 (1 seed, `ood-length-01`)" in plain(verdict["sentence"])


def test_a_seeds_verdict_shows_table_2s_own_seeds_how_many_reach_the_band_and_their_spread():
    # 83.25 is within 2 x 0.66 of 84.19; 81.03 and 79.00 are not; our std 1.74 > the paper's 0.66
    cell = {"dataset": "cmnist01", "learner": "bonsai", "objective": "fishr", "mean": 81.09, "std": 1.74,
            "n_seeds": 3, "paper": 84.19, "paper_std": 0.66, "z": (81.09 - 84.19) / 0.66,
            "seed_values": ((1, 83.25), (2, 81.03), (3, 79.00))}
    verdict = views.far_cell_verdict(cell, evidence(("ood-length-01", "2,500 OOD steps", True, 0.8325, 0.0, 1)))
    text = plain(verdict["sentence"])
    assert verdict["explained"] == "seeds"
    assert "Table 2's seeds give 83.25, 81.03 and 79.00 (seeds 1, 2 and 3): 1 of 3 within that band" in text
    assert "spread 1.74 points against the paper's 0.66" in text
    # a spread no wider than the paper's is not called out
    narrow = views.far_cell_verdict(cell | {"std": 0.5}, evidence(("ood-length-01", "2,500 OOD steps", True, 0.8325, 0.0, 1)))
    assert "1 of 3 within that band." in plain(narrow["sentence"]) and "against the paper's 0.66" not in plain(narrow["sentence"])


def test_a_study_that_reaches_the_band_only_by_its_own_selection_does_not_make_it_the_seeds():
    # -025 IRMX on ERM's features: the study's best configuration on seed 1 (62.69) is within 2 x 0.88 of
    # 64.05, but none of Table 2's seeds at its selected configuration is
    cell = {"dataset": "cmnist025", "learner": "erm", "objective": "irmx", "mean": 60.80, "std": 0.85,
            "n_seeds": 3, "paper": 64.05, "paper_std": 0.88, "z": (60.80 - 64.05) / 0.88,
            "seed_values": ((1, 61.85), (2, 60.78), (3, 59.77))}
    alone = views.far_cell_verdict(cell, evidence(("ood-length-025", "2,500 OOD steps", True, 0.6269, 0.0, 1),
                                                  ("ood-length-025", "1,000 OOD steps", False, 0.6100, 0.0, 1)))
    text = plain(alone["sentence"])
    assert alone["explained"] is None and "Not explained yet." in text
    assert "0 of 3 within that band" in text and "by selection, not by a seed of Table 2's" in text
    longer = views.far_cell_verdict(cell, evidence(("ood-length-025", "2,500 OOD steps", True, 0.6269, 0.0, 1),
                                                   ("ood-length-025", "3,000 OOD steps", False, 0.6390, 0.0, 1)))
    text = plain(longer["sentence"])
    assert longer["explained"] == "study" and "3,000 OOD steps gives 63.90 (1 seed, `ood-length-025`)" in text
    assert "does not come near" not in text and "0 of 3 within that band" in text


def test_far_cells_carry_each_seed_at_the_selected_configuration():
    frame = at_z({("cmnist01", "ifeat", "clove"): 4.0})
    chosen = frame[(frame["dataset"] == "cmnist01") & (frame["learner"] == "ifeat") & (frame["objective"] == "clove")]
    weaker = chosen.assign(penalty_weight=10.0, worst_test_acc=chosen["worst_test_acc"] - 0.05)  # not selected
    far = analysis.far_cells(pd.concat([frame, weaker], ignore_index=True))
    values = far.iloc[0]["seed_values"]
    assert [s for s, _ in values] == sorted(chosen["seed"].unique())
    assert [v for _, v in values] == pytest.approx(list(100 * chosen.sort_values("seed")["worst_test_acc"]))


def test_where_the_protocol_itself_lands_near_the_paper_the_seeds_come_first_and_a_closer_setting_beside():
    verdict = views.far_cell_verdict(CELL, evidence(("ood-length-01", "2,500 OOD steps", True, 0.7964, 0.0, 1),
                                                    ("frozen-steps", "5,000 OOD steps, head L2 0", False, 0.8036, 0.022, 3),
                                                    ("ood-length-01", "3,000 OOD steps", False, 0.7990, 0.0, 1)))
    assert verdict["explained"] == "seeds"
    text = plain(verdict["sentence"])
    assert "The protocol's own setting gives 79.64 (1 seed, `ood-length-01`)" in text and "spread between seeds" in text
    # 5,000 steps without L2 is 0.72 points (0.53 paper stds) closer: named; 3,000 steps (0.26 closer) is not
    assert "5,000 OOD steps, head L2 0 gives 80.36 ± 2.20 (3 seeds, `frozen-steps`), closer still" in text
    assert "3,000" not in text


def test_a_cell_no_study_brings_near_the_paper_is_not_explained_and_says_what_was_tried():
    verdict = views.far_cell_verdict(CELL, evidence(("ood-length-01", "2,500 OOD steps", True, 0.790, 0.0, 1),
                                                    ("ood-length-01", "3,000 OOD steps", False, 0.7901, 0.0, 1)))
    assert verdict["explained"] is None
    assert "Not explained yet" in plain(verdict["sentence"]) and "79.00 to 79.01 over its 2 settings (1 seed)" in plain(verdict["sentence"])
    one = views.far_cell_verdict(CELL, evidence(("ood-length-01", "2,500 OOD steps", True, 0.790, 0.0, 1),
                                                ("clove-grid-01", "the Bonsai authors' weights", False, 0.7737, 0.01, 2)))
    assert "gives 77.37 in its one setting (2 seeds)" in plain(one["sentence"])  # not "77.37 to 77.37"
    bare = views.far_cell_verdict(CELL, evidence())
    assert bare["explained"] is None and "No committed study varies this cell yet" in plain(bare["sentence"])


def test_the_section_counts_each_kind_of_verdict():
    frame = at_z({("cmnist01", "erm", "fishr"): -3.0, ("cmnist01", "ifeat", "clove"): 4.0})
    length = pd.concat([study_rows("cmnist01", "erm", "fishr", {2500: 0.7923, 3000: 0.8200}),
                        study_rows("cmnist01", "ifeat", "clove", {2500: 0.7956, 3000: 0.7956})])
    lead, verdicts = views.far_cells_section(frame, {"ood-length-01": length})
    assert [v["explained"] for v in verdicts] == [None, "study"]  # clove first: it is further
    assert plain(lead).startswith("2 frozen cells of 42 lie further than 2 paper standard deviations")  # IB-IRM once
    assert "(2 whole seeds so far)" in plain(lead)
    assert "trace 1 to a choice the paper leaves open; 1 is not explained yet." in plain(lead)
    lead, verdicts = views.far_cells_section(runs([1]), {})
    assert verdicts == [] and lead.startswith("None of the 42 frozen cells")
    # an IRMv1 cell far from the paper's is listed once, not again as IB-IRM's (the same runs on frozen features)
    twice = at_z({("cmnist01", "erm", "irmv1"): -3.0, ("cmnist01", "erm", "ib_irm"): -3.0})
    assert [v["objective"] for v in views.far_cells_section(twice, {})[1]] == ["irmv1"]


def test_the_lead_names_a_seed_that_is_lowest_in_most_far_cells_below_the_paper():
    cells = {("cmnist01", "erm", "fishr"): -3.0, ("cmnist01", "bonsai", "fishr"): -3.0,
             ("cmnist01", "ifeat", "vrex"): -3.0, ("cmnist01", "ifeat", "irmx"): -3.0}
    def accuracy(d, l, o, s):
        paper, std = TABLE2[d][o][l]
        z = cells.get((d, l, o), 0.0)
        return (paper + (z - 0.5 if s == 3 else z + 0.25) * std) / 100  # seed 3 lowest in every far cell
    frame = runs([1, 2, 3], accuracy=accuracy)
    lead, _ = views.far_cells_section(frame, {})
    assert "Seed 3 is the lowest of Table 2's seeds in 4 of the 4 far cells below the paper's." in plain(lead)
    # no seed lowest in most of them: nothing said
    mixed = runs([1, 2, 3], accuracy=lambda d, l, o, s: (TABLE2[d][o][l][0] + (
        cells.get((d, l, o), 0.0) - (0.5 if (s == 3) == (l == "ifeat") else 0.0)) * TABLE2[d][o][l][1]) / 100)
    assert "lowest" not in views.far_cells_section(mixed, {})[0]


def test_every_far_cell_of_the_committed_pieces_gets_a_verdict(repo_root):
    """On the committed pieces and gap studies (whatever they hold when this runs): every cell
    beyond two paper stds is listed once, named, with a verdict."""
    from featlib.experiments.results import load_study
    from featlib.experiments.table2_pieces import load_pieces

    committed = load_pieces(repo_root / "results" / "cmnist-table2")
    if committed is None or committed["runs"].empty:
        pytest.skip("no committed Table 2 pieces")
    studies = {n: s["frame"] for n in STUDY_CHOICES if (s := load_study(repo_root / "results" / "cmnist-gaps", n))}
    lead, verdicts = views.far_cells_section(committed["runs"], studies)
    far = analysis.far_cells(committed["runs"])
    assert len(verdicts) == len(far)
    for v, cell in zip(verdicts, far.to_dict("records")):
        assert (v["dataset"], v["learner"], v["objective"]) == (cell["dataset"], cell["learner"], cell["objective"])
        assert v["explained"] in ("study", "seeds", None)
        assert v["sentence"].startswith("**") and "paper stds" in v["sentence"]
        assert abs(cell["z"]) > analysis.FAR_Z and np.isfinite(cell["z"])


def grid(values_by_weight, dataset="cmnist01", learner="ifeat", objective="clove", seeds=(1, 2)):
    """Runs of one cell: each penalty weight at two pre-training lengths (the second 1 point lower),
    every seed at the given value."""
    rows = [{"dataset": dataset, "learner": learner, "objective": objective, "seed": s, "penalty_weight": w,
             "pretrain_epochs": e, "worst_test_acc": (v - (1.0 if e else 0.0)) / 100}
            for w, v in values_by_weight.items() for e in (0, 50) for s in seeds]
    return pd.DataFrame(rows)


def test_an_unexplained_cell_says_where_the_papers_value_sits_in_its_own_penalty_grid():
    paper, paper_std = TABLE2["cmnist01"]["clove"]["ifeat"]  # 75.12 ± 1.08; the paper's ERM objective: 76.05
    cell = {"dataset": "cmnist01", "learner": "ifeat", "objective": "clove", "paper": paper, "paper_std": paper_std}
    runs_ = grid({10.0: 75.8, 100.0: 76.6, 1000.0: 78.3, 1e4: 79.1, 1e5: 79.3})
    text = plain(views.penalty_response(runs_, cell))
    assert "gives 75.80 at 1 × 10¹, 76.60 at 1 × 10², 78.30 at 1 × 10³, 79.10 at 1 × 10⁴ and 79.30 at 1 × 10⁵" in text
    assert "lies where ours does at the 2 weakest weights" in text  # |76.6 - 75.12| <= 2.16, |78.3 - 75.12| > 2.16
    assert "76.05 ± 1.45, above its CLOvE cell" in text and "add up to 3.5 points" in text  # 79.3 - 75.8
    assert "the strongest weight." in plain(views.penalty_response(grid({10.0: 70.0, 1e5: 75.0}), cell))
    assert views.penalty_response(grid({10.0: 75.0, 1e5: 75.5}), cell) == ""  # every weight alike: nothing to say
    assert views.penalty_response(grid({10.0: 80.0, 1e5: 81.0}), cell) == ""  # none near the paper's
    assert views.penalty_response(grid({10.0: 75.0}), cell) == ""  # one weight
    assert views.penalty_response(grid({10.0: 75.0, 1e5: 79.0}, learner="bonsai"), cell) == ""  # not this cell's runs
    # the decided -01 CLOvE grid (1 to 100) reads as plain numbers, not powers of ten
    decided = plain(views.penalty_response(grid({1.0: 75.0, 5.0: 75.5, 10.0: 77.9, 50.0: 78.2, 100.0: 79.0}), cell))
    assert "gives 75.00 at 1, 75.50 at 5, 77.90 at 10, 78.20 at 50 and 79.00 at 100" in decided
    assert "the 2 weakest weights" in decided


def test_the_lead_names_a_dataset_with_more_seeds_and_the_cell_the_paper_prints_without_a_std():
    frame = at_z({})
    frame = pd.concat([frame, at_z({}).query("dataset == 'cmnist025' and seed == 1").assign(seed=3)], ignore_index=True)
    lead, _ = views.far_cells_section(frame, {})
    assert "(2\u00a0whole seeds so far, 3 on ColoredMNIST-025)" in lead
    paper = TABLE2["cmnist025"]["clove"]["erm"]
    assert paper[1] == 0  # 65.78 ± 0.00 in the paper's table
    assert (f"The paper prints CLOvE on ERM's features on ColoredMNIST-025 (ours {paper[0]:.2f}, the paper's "
            f"{paper[0]:.2f} ± 0.00) with a standard deviation of zero") in plain(lead)
    assert "not counted here" in lead


def test_the_list_says_what_the_spread_between_seeds_means_once_in_its_lead():
    from featlib.experiments.gap_studies import STUDY_CHOICES  # noqa: F401 (the studies' names)

    frame = at_z({})
    for dataset, objective in (("cmnist01", "fishr"), ("cmnist025", "irmx")):  # seed 1 on the paper's, seed 2 6 stds below
        paper, std = TABLE2[dataset][objective]["erm"]
        cell = (frame["dataset"] == dataset) & (frame["learner"] == "erm") & (frame["objective"] == objective)
        frame.loc[cell & (frame["seed"] == 2), "worst_test_acc"] = (paper - 6 * std) / 100
    studies = {"ood-length-01": study_rows("cmnist01", "erm", "fishr", {2500: TABLE2["cmnist01"]["fishr"]["erm"][0] / 100}),
               "ood-length-025": study_rows("cmnist025", "erm", "irmx", {2500: TABLE2["cmnist025"]["irmx"]["erm"][0] / 100})}
    lead, verdicts = views.far_cells_section(frame, studies)
    seeds = [v for v in verdicts if v["explained"] == "seeds"]
    assert seeds, verdicts
    assert "more seeds decide where the mean settles" in lead
    assert all("more seeds decide" not in v["sentence"] and "Traced to the spread between seeds." in v["sentence"]
               for v in seeds)


def test_seed_noise_is_the_95_percent_interval_of_the_difference_with_the_wider_spread():
    # IRMX on ERM's features, ColoredMNIST-025, at 5 seeds: 60.63 ± 2.17 against 64.05 ± 0.88 (10 seeds)
    cell = {"mean": 60.63, "std": 2.17, "n_seeds": 5, "paper": 64.05, "paper_std": 0.88}
    noise = analysis.seed_noise(cell)
    assert noise["gap"] == pytest.approx(3.42)
    assert noise["interval"] == pytest.approx(2.78 * 2.17 * np.sqrt(1 / 5 + 1 / 10))  # t(4), our spread the wider
    assert not noise["within"]
    # the paper's spread where it is the wider; few seeds give a wide interval (t(1) = 12.71)
    assert analysis.seed_noise(cell | {"std": 0.5})["interval"] == pytest.approx(2.78 * 0.88 * np.sqrt(0.3))
    assert analysis.seed_noise(cell | {"n_seeds": 2})["within"]
    assert analysis.seed_noise(cell | {"n_seeds": 1}) is None
    # beyond 10 seeds, 2.0 in place of t
    assert analysis.seed_noise(cell | {"n_seeds": 20})["interval"] == pytest.approx(2.0 * 2.17 * np.sqrt(1 / 20 + 1 / 10))


def test_a_cell_too_far_for_its_seeds_is_not_the_seeds_even_where_one_seed_lands_near():
    cell = {"dataset": "cmnist025", "learner": "erm", "objective": "irmx", "mean": 60.63, "std": 2.17,
            "n_seeds": 5, "paper": 64.05, "paper_std": 0.88, "z": (60.63 - 64.05) / 0.88,
            "seed_values": ((1, 62.69), (2, 60.42), (3, 58.96), (4, 63.41), (5, 57.68))}
    verdict = views.far_cell_verdict(cell, evidence(("ood-length-025", "2,500 OOD steps", True, 0.6269, 0.0, 1)))
    text = plain(verdict["sentence"])
    assert verdict["explained"] is None and "Not explained yet." in text
    assert "2 of 5 within that band" in text and "by selection" not in text
    assert "Over 5 seeds our mean lies 3.42 points from the paper's, outside the 3.30-point interval" in text
    # a study setting that lands within the band still explains it, the seeds' interval said beside
    longer = views.far_cell_verdict(cell, evidence(("ood-length-025", "2,500 OOD steps", True, 0.6269, 0.0, 1),
                                                   ("ood-length-025", "3,000 OOD steps", False, 0.6390, 0.0, 1)))
    assert longer["explained"] == "study" and "outside the 3.30-point interval" in plain(longer["sentence"])
    # the same mean over 2 seeds is within what two seeds allow: the seeds
    two = cell | {"n_seeds": 2, "seed_values": ((1, 62.69), (2, 58.57))}
    assert views.far_cell_verdict(two, evidence(("ood-length-025", "2,500 OOD steps", True, 0.6269, 0.0, 1)))["explained"] == "seeds"


def test_the_protocols_own_setting_is_read_from_the_study_with_the_most_seeds():
    # one seed of one study lands the protocol's length near the paper's; five seeds of another do not
    cell = {"dataset": "cmnist025", "learner": "erm", "objective": "irmx", "mean": 60.63, "std": 2.17,
            "n_seeds": 5, "paper": 64.05, "paper_std": 0.88, "z": (60.63 - 64.05) / 0.88,
            "seed_values": ((1, 62.69), (2, 60.42), (3, 58.96), (4, 63.41), (5, 57.68))}
    verdict = views.far_cell_verdict(cell, evidence(("ood-length-025", "2,500 OOD steps", True, 0.6269, 0.0, 1),
                                                    ("ood-length-025-erm", "2,500 OOD steps", True, 0.6060, 0.0106, 5),
                                                    ("ood-length-025-erm", "3,000 OOD steps", False, 0.6426, 0.0188, 5)))
    text = plain(verdict["sentence"])
    assert verdict["explained"] == "study"
    assert "3,000 OOD steps gives 64.26 ± 1.88 (5 seeds, `ood-length-025-erm`), within 2 paper stds" in text
    assert ("where the protocol's own setting does not come near: it gives 60.60 ± 1.06 (5 seeds, "
            "`ood-length-025-erm`).") in text
    assert "62.69 (1 seed" not in text
