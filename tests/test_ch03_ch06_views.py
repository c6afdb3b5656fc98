"""Chapter 03's description of Fig. 1(b)'s curves, chapter 06's rule for the rows of its triple
figures, and the folded provenance under a committed figure (issue 57), on fabricated numbers."""
import pandas as pd

from featbook import ch03_views, evidence, leaks, saliency_views


def curves(values: dict) -> pd.DataFrame:
    """One seed, one penalty weight: objective -> accuracy per pre-training length 0, 100, 200."""
    return pd.DataFrame([{"objective": o, "pretrain_epochs": e, "penalty_weight": 1.0, "seed": 1, "worst_test_acc": a}
                         for o, accs in values.items() for e, a in zip((0, 100, 200), accs)])


def test_the_shape_of_fig_1b_is_read_from_the_data():
    text = ch03_views.curve_shape_sentence(curves({"irmv1": (0.50, 0.70, 0.60), "vrex": (0.52, 0.66, 0.64),
                                                     "iga": (0.49, 0.53, 0.55), "clove": (0.50, 0.60, 0.68),
                                                     "erm": (0.2, 0.2, 0.2)}))
    assert not leaks.scan_text(text)
    assert text.startswith("Without ERM pre-training every penalised objective scores 49.0–52.0%")
    assert "IRMv1 and V-REx rise to their best after 100 epochs (66.0–70.0%)" in text
    assert "with 200 epochs they are 2.0–10.0 points below their best" in text
    assert "CLOvE is best at the longest length" in text
    assert "IGA stays within 5.0 points of 50% at every length" in text and "ERM," not in text  # ERM has no penalty


def test_the_triple_figure_shows_both_labels_and_a_disagreement_by_rule():
    predictions = pd.DataFrame({"label": [0, 0, 0, 1, 0, 1], "ERM": [1, 1, 0, 0, 0, 1], "FeAT": [1, 1, 0, 0, 1, 1]})
    rows = saliency_views.pick_rows(predictions, ["ERM", "FeAT"], 4)
    assert rows == [0, 1, 3, 4]  # the first 0, the first 1, the first disagreement (4), then the next in order
    assert saliency_views.rows_note(predictions, ["ERM", "FeAT"], rows) == (
        "The rows are 3 of label 0 and 1 of label 1; the two models disagree on 1 of them.")
    assert saliency_views.pick_rows(predictions, ["ERM", "FeAT"], 2) == [0, 3]


def test_provenance_is_one_folded_line():
    prov = {"command": "python -m featlib.cli.gap_studies saliency-2k --out results/saliency", "commit": "a" * 40,
            "device": "cpu", "wall_time_s": 0.04, "seeds": [1, 2, 3]}
    block = evidence.made_by(evidence.provenance_line("Study", prov, "2,000 training images"), prov)
    summary = block.split("<summary>")[1].split("</summary>")[0]
    assert summary == "How these results were made" and block.startswith('<details class="feat-provenance">')
    assert "wall time" in block and "aaaaaaaaaaaa" in block  # inside the fold, never in the summary
    assert evidence.made_by("`results/x`: 3 runs").count("<code>results/x</code>") == 1


# -- Fig. 3.1's stars: Table 2's FeAT column, on frozen features ---------------------------------------
def table2_runs() -> pd.DataFrame:
    """FeAT's (iFeAT's) runs as Table 2's pieces hold them, 3 seeds, two configurations per objective,
    with rows of another learner and another dataset that the stars must not read. Known answer:
    IRMv1's best configuration is weight 10 (mean 0.70, std of 0.68/0.70/0.72), V-REx's weight 100
    (mean 0.60), though V-REx's weight 10 has the best single seed."""
    rows = []
    accs = {("irmv1", 10.0): (0.68, 0.70, 0.72), ("irmv1", 100.0): (0.50, 0.50, 0.50),
            ("vrex", 10.0): (0.90, 0.10, 0.10), ("vrex", 100.0): (0.60, 0.60, 0.60)}
    for (objective, weight), values in accs.items():
        for seed, acc in zip((1, 2, 3), values):
            base = {"objective": objective, "penalty_weight": weight, "pretrain_epochs": 0, "seed": seed,
                    "val_acc": 0.8, "train_acc": 0.8, "diverged_step": -1}
            rows.append({**base, "dataset": "cmnist025", "learner": "ifeat", "worst_test_acc": acc})
            rows.append({**base, "dataset": "cmnist025", "learner": "bonsai", "worst_test_acc": 0.99})
            rows.append({**base, "dataset": "cmnist01", "learner": "ifeat", "worst_test_acc": 0.98})
    return pd.DataFrame(rows)


def test_the_stars_are_table_2s_feat_cells_by_its_rule():
    import numpy as np

    cells = ch03_views.table2_feat_cells(table2_runs(), "cmnist025").set_index("objective")
    assert cells.loc["irmv1", "penalty_weight"] == 10.0 and cells.loc["vrex", "penalty_weight"] == 100.0
    assert np.isclose(cells.loc["irmv1", "mean"], 0.70) and np.isclose(cells.loc["vrex", "mean"], 0.60)
    assert np.isclose(cells.loc["irmv1", "std"], np.std([0.68, 0.70, 0.72])) and set(cells["n_seeds"]) == {3}
    assert ch03_views.frozen_feat_label(cells) == "on FeAT's frozen features (Table 2's column, 3\xa0seeds)"
    uneven = cells.assign(n_seeds=[3, 5])
    assert ch03_views.frozen_feat_label(uneven) == "on FeAT's frozen features (Table 2's column, 3–5 seeds)"


def test_the_stars_sit_at_the_epochs_feature_learning_spent():
    from featlib.experiments.cmnist_analysis import feat_epochs, feat_epochs_spent

    rounds = pd.DataFrame([{"learner": "ifeat", "dataset": "cmnist025", "seed": s, "round": r, "epochs": 150,
                            "accepted": r < last} for s, last in ((1, 3), (2, 3), (3, 4)) for r in range(1, last + 1)]
                          + [{"learner": "feat", "dataset": "cmnist025", "seed": 1, "round": 1, "epochs": 999,
                              "accepted": True}])
    assert feat_epochs_spent(rounds, "ifeat", "cmnist025", seeds=[1, 2]) == 450  # the rolled-back round included
    assert feat_epochs_spent(rounds, "ifeat", "cmnist025") == 500  # (450 + 450 + 600) / 3
    assert feat_epochs(rounds, "ifeat", "cmnist025") == 350  # the accepted rounds only: what the stars do not use
    assert feat_epochs_spent(rounds, "ifeat", "cmnist01") is None


def test_the_legend_names_the_stars_frozen_features_and_the_sentence_two_regimes():
    import matplotlib.pyplot as plt

    nf = curves({"irmv1": (0.50, 0.65, 0.60), "vrex": (0.52, 0.66, 0.64), "erm": (0.2, 0.2, 0.2)})
    feat = ch03_views.table2_feat_cells(table2_runs(), "cmnist025")
    label = ch03_views.frozen_feat_label(feat)
    fig = ch03_views.pretraining_figure(nf, feat, 450, "title", label)
    texts = [t.get_text().replace("\n", " ") for legend in fig.legends for t in legend.get_texts()]  # a long entry wraps
    plt.close(fig)
    assert "on FeAT's frozen features (Table 2's column, 3\xa0seeds); at 450 epochs" in texts
    assert not any(t.startswith("FeAT features") for t in texts)
    shown = ch03_views.CommittedCurves(nf, feat, 450, "title", 1, False, feat_label=label)
    text = ch03_views.whole_network_feat_sentence(shown)
    assert text.startswith("The stars are Table 2's FeAT column, 3\xa0seeds (the seeds' spread of a cell 0.0–1.6 points)")
    # IRMv1: 70.0 against its best length 65.0; V-REx: 60.0 against 66.0
    assert "beat the best ERM length for 1 of the 2 penalised objectives (by 5.0 points); not V-REx" in text
    assert "two regimes side by side" in text and "frozen after the 450 epochs" in text and not leaks.scan_text(text)
    assert ch03_views.whole_network_feat_sentence(ch03_views.CommittedCurves(nf, None, None, "title", 1)) == ""


def test_the_committed_whole_network_figure_reads_table_2s_committed_column():
    from pathlib import Path

    from featlib.experiments.results import load_rounds
    from featlib.experiments.table2_pieces import load_pieces

    repo = Path(__file__).resolve().parents[1] / "results"
    shown = ch03_views.committed_whole_network(None, str(repo / "cmnist-erm-nf-h200" / "fast-fp32"), "cmnist025",
                                               str(repo / "cmnist-table2"), str(repo / "cmnist-rounds"))
    runs = load_pieces(repo / "cmnist-table2")["runs"]
    expected = ch03_views.table2_feat_cells(runs, "cmnist025")
    pd.testing.assert_frame_equal(shown.feat.reset_index(drop=True), expected.reset_index(drop=True))
    rounds = load_rounds(repo / "cmnist-rounds")["rounds"]
    seeds = runs.query("learner == 'ifeat' and dataset == 'cmnist025'")["seed"].unique()
    spent = rounds[(rounds["learner"] == "ifeat") & (rounds["dataset"] == "cmnist025") & rounds["seed"].isin(seeds)]
    assert shown.feat_epochs == round(spent.groupby("seed")["epochs"].sum().mean())
    assert shown.feat_label == ch03_views.frozen_feat_label(expected)
    bare = ch03_views.committed_whole_network(None, str(repo / "cmnist-erm-nf-h200" / "fast-fp32"), "cmnist025")
    assert bare.feat is None and bare.feat_label is None and ch03_views.whole_network_feat_sentence(bare) == ""


def test_chapter_03_gives_its_verdict_on_both_halves_of_fig_1b():
    """The verdict reads the first half in whole networks where 3 seeds exist, the second like for
    like on frozen features, a direction only under 3 seeds, and names Table 2's column as another
    regime."""
    from featbook import ch03_views as v

    def curves(spread_points, seeds, feat_margin=None, full=False):
        rows = []
        for seed in range(1, seeds + 1):
            for epochs, acc in ((0, 0.5), (100, 0.5 + spread_points / 100)):
                for objective in ("irmv1", "vrex"):
                    rows.append({"dataset": "cmnist025", "seed": seed, "learner": "erm-nf", "objective": objective,
                                 "penalty_weight": 1e3, "pretrain_epochs": epochs, "worst_test_acc": acc})
        runs = pd.DataFrame(rows)
        feat = None if feat_margin is None else pd.DataFrame(
            {"objective": ["irmv1", "vrex"], "mean": [0.5 + (spread_points + feat_margin) / 100] * 2,
             "std": [0.01, 0.01], "n_seeds": [seeds, seeds]})
        return v.CommittedCurves(runs=runs, feat=feat, feat_epochs=450, title="t", seeds=seeds, full=full)

    said = v.verdict_sentence(curves(12.0, 3, feat_margin=2.0), curves(10.0, 1, feat_margin=3.0))
    assert said.startswith("First half, shown: in whole networks, the paper's form (3\xa0seeds)")
    assert "Second half, a direction: on frozen features, like for like (1\xa0seed" in said and "too few for a verdict" in said
    assert "2 of 2 penalised objectives" in said and "another regime" in said
    three = v.verdict_sentence(curves(1.0, 3), curves(10.0, 3, feat_margin=-1.0))
    assert three.startswith("First half, not shown:")
    assert "Second half, not shown like for like: on frozen features (3\xa0seeds)" in three and "0 of 2" in three
    assert three.count("like for like") == 1  # said once, in the half's label
    assert "waits for runs" in v.verdict_sentence(curves(12.0, 3), v.CommittedCurves(None, None, None, "", 0, False))
