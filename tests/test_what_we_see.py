"""The chapters' "What we see" paragraphs that depend on the numbers come from tested functions of
featbook, each branch checked here on fabricated numbers (a build only runs one branch)."""
import re

import pandas as pd
import pytest

from featbook import ch03_views, leaks, wilds_views
from featbook.run_scale import RunScale
from featlib.experiments import cmnist_analysis as analysis

SMALL = RunScale("small", "2 seeds, 2,000 training images")
REDUCED = RunScale("reduced", "3 seeds, 50,000 training images")
PAPER = RunScale("paper", "10 seeds, 50,000 training images")


def clean(text):
    assert not leaks.scan_text(text), leaks.scan_text(text)
    return text


def test_feat_epochs_are_the_accepted_rounds_summed_per_seed_and_averaged():
    rounds = pd.DataFrame({"seed": [1, 1, 1, 2, 2, 2], "learner": ["feat"] * 6, "dataset": ["cmnist025"] * 6,
                           "epochs": [150, 150, 150, 150, 150, 150], "accepted": [True, True, False, True, True, True]})
    assert analysis.feat_epochs(rounds) == 375  # (300 + 450) / 2
    assert analysis.feat_epochs(rounds, dataset="cmnist01") is None
    assert analysis.feat_epochs(rounds, learner="ifeat") is None
    assert analysis.feat_epochs(pd.DataFrame()) is None


def _paper_runs(shift: dict, seeds=(1, 2, 3)) -> pd.DataFrame:
    """Runs whose best configuration is the paper's Table 2 value plus ``shift[(dataset, learner,
    objective)]`` points (0 elsewhere), one configuration, the same value every seed; the frozen columns."""
    from featlib.experiments.paper_values import TABLE2

    rows = []
    for dataset in ("cmnist025", "cmnist01"):
        for objective, cells in TABLE2[dataset].items():
            for learner in ("erm", "bonsai", "ifeat"):
                value = (cells[learner][0] + shift.get((dataset, learner, objective), 0.0)) / 100
                rows += [{"dataset": dataset, "learner": learner, "objective": objective, "penalty_weight": 1e2,
                          "pretrain_epochs": 0, "seed": s, "worst_test_acc": value} for s in seeds]
    return pd.DataFrame(rows)


def test_chapter_05_error_bars_stop_at_the_scores_range():
    err = wilds_views.clipped_error([97.5, 50.0, 2.0, float("nan")], [3.54, 10.0, 5.0, float("nan")])
    assert err.shape == (2, 4)
    assert err[:, 0].tolist() == pytest.approx([3.54, 2.5])  # up to 100, not 101.04
    assert err[:, 1].tolist() == [10.0, 10.0] and err[:, 2].tolist() == [2.0, 5.0]  # down to 0, not -3
    assert err[:, 3].tolist() == [0.0, 0.0]


def test_chapter_05_dfr_table_says_what_the_chosen_c_is():
    frame = pd.DataFrame({"Init.": ["ERM"], "Method": ["DFR"], "ours": ["92.50 ± 10.61"], "paper": [""],
                          "what is measured": ["Avg. acc. (%)"], "C per seed": ["1, 0.7"]})
    shown = wilds_views.dfr_table(frame, "DFR, this run", with_paper=False)
    html = shown._repr_html_()
    assert "chosen C, per seed" in html and "inverse L1 strength" in html and "1, 0.7, 0.3, 0.1, 0.07, 0.03, 0.01" in html


def test_chapter_05_names_the_rounds_of_a_small_run_that_ended_at_chance():
    rounds = pd.DataFrame({"learner": ["ERM", "FeAT (iFeAT)", "FeAT (iFeAT)"], "seed": [0, 0, 1], "round": [1, 2, 2],
                           "train_acc": [0.93, 0.50, 0.515]})
    text = clean(wilds_views.rounds_note(rounds, n_classes=2, full_scale=False))
    assert text.startswith("2\u00a0rounds of this run ended at chance on their own training data")
    assert "FeAT (iFeAT) seed 0, round 2; FeAT (iFeAT) seed 1, round 2" in text and "ERM" not in text
    assert wilds_views.rounds_note(rounds, n_classes=2, full_scale=True) == ""  # the paper's size: the table says it
    assert wilds_views.rounds_note(rounds.iloc[:1], n_classes=2, full_scale=False) == ""
    assert "1\u00a0round of this run" in clean(wilds_views.rounds_note(rounds.iloc[:2], n_classes=2, full_scale=False))
    assert wilds_views.rounds_note(rounds, n_classes=10, full_scale=False) == ""  # chance is 10% there


def test_chapter_05_shows_the_papers_table_3_alone_and_labelled_as_the_papers():
    from featlib.experiments.paper_values import TABLE3

    html = wilds_views.paper_table3("civilcomments")._repr_html_()
    assert "The paper&#x27;s Table 3 for CivilComments" in html and "not a result of this book" in html
    assert re.search(r"77\.34\W+0\.50", html) and re.search(r"82\.24\W+0\.13", html)  # ERM features: DFR, DFR-s
    assert html.count("<tr>") == 1 + len({o for _, o in TABLE3["civilcomments"]})  # header + one row per objective
    assert "DFR-s" not in wilds_views.paper_table3("camelyon17")._repr_html_()  # the paper prints none there


def test_the_stop_sentence_gives_a_range_only_when_there_is_one():
    import pandas as pd

    from featbook.cmnist_shared import describe_stops

    def stops(scores, kept):
        return pd.DataFrame({"dataset": "cmnist01", "learner": "feat", "seed": range(1, len(kept) + 1),
                             "rounds_kept": kept, "score": scores, "termination_threshold": 1.3})

    one = describe_stops(stops([1.249, None], [3, 5]), "cmnist01", "feat")
    assert "the one discarded round's training + retention accuracy was 124.9% against" in one and "–" not in one
    two = describe_stops(stops([1.249, 1.21], [3, 3]), "cmnist01", "feat")
    assert "the discarded round's training + retention accuracy was 121.0–124.9%" in two
    assert describe_stops(stops([None], [5]), "cmnist01", "feat").endswith("no round was discarded")


def test_chapter_03_names_each_objective_feat_does_not_lift_with_both_accuracies():
    import pandas as pd

    # two lengths per objective, one weight, one seed: IRMv1 best at 100 epochs (0.66), CLOvE at 150 (0.70)
    nf = pd.DataFrame([{"objective": o, "pretrain_epochs": e, "penalty_weight": 1.0, "seed": 1, "worst_test_acc": acc}
                       for o, e, acc in [("irmv1", 100, 0.66), ("irmv1", 150, 0.60), ("clove", 100, 0.65),
                                         ("clove", 150, 0.70), ("erm", 100, 0.2)]])
    feat = pd.DataFrame({"objective": ["irmv1", "clove"], "mean": [0.71, 0.67]})
    against = analysis.feat_against_lengths(nf, feat)
    assert against["objective"].tolist() == ["irmv1", "clove"]
    assert against["margin"].round(6).tolist() == [5.0, -3.0] and against["best_epochs"].tolist() == [100, 150]
    text = ch03_views.feat_against_lengths_sentence(against)
    assert text == ("FeAT's features beat the best ERM length for 1 of the 2 penalised objectives (by 5.0 points); not "
                    "CLOvE (67.0% on FeAT's features against 70.0% after 150 ERM epochs).")
    # over fewer than 3 seeds the same sentence says it ranks nothing; over 3 it does not
    assert ch03_views.feat_against_lengths_sentence(against, 1).endswith(
        "after 150 ERM epochs). On 1\xa0seed this is a direction, and it ranks nothing.")
    assert ch03_views.feat_against_lengths_sentence(against, 3) == text
