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
