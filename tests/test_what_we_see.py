"""The chapters' "What we see" paragraphs that depend on the numbers come from tested functions of
featbook, each branch checked here on fabricated numbers (a build only runs one branch)."""
import pandas as pd
import pytest

from featbook import cmnist_views, leaks, saliency_views, wilds_views
from featbook.run_scale import RunScale

SMALL = RunScale("small", "2 seeds, 2,000 training images")
REDUCED = RunScale("reduced", "3 seeds, 50,000 training images")
PAPER = RunScale("paper", "10 seeds, 50,000 training images")


def clean(text):
    assert not leaks.scan_text(text), leaks.scan_text(text)
    return text


# -- chapter 03: Fig. 1(b) -----------------------------------------------------------------------
def test_chapter_03_reads_the_committed_results_when_there_are_some():
    text = clean(cmnist_views.pretraining_what_we_see(SMALL, (9.0, 2.0, 1, 7), committed=(12.34, 1.5, 5, 7),
                                                      committed_note="Read from the repository's `results/cmnist`."))
    assert text.startswith("**From the committed full-scale results** (Read from the repository's `results/cmnist`)")
    assert "12.3 points" in text and "1.5 points" in text and "5 of the 7" in text
    assert "9.0" not in text  # this small run's numbers are not read as the paper's
    no_feat = clean(cmnist_views.pretraining_what_we_see(SMALL, (9.0, 2.0, 1, 7), committed=(12.0, 1.5, None, 7)))
    assert "hold no run on FeAT's features" in no_feat and "None" not in no_feat


def test_chapter_03_reads_a_run_that_can_compare_methods_and_says_nothing_is_committed():
    text = clean(cmnist_views.pretraining_what_we_see(REDUCED, (8.25, 1.25, 4, 7)))
    assert text.startswith(f"**This run** ({REDUCED.summary})") and "8.2 points" in text and "4 of the 7" in text
    assert text.endswith("No full-scale results are committed yet.")


def test_chapter_03_ranks_nothing_on_a_small_run():
    text = clean(cmnist_views.pretraining_what_we_see(SMALL, (6.5, 3.0, 6, 7)))
    assert text.startswith(f"**This run is {SMALL.summary}.**") and "6.5 points" in text
    assert "are not readable here" in text and "6 of the 7" not in text


def test_feat_epochs_are_the_accepted_rounds_summed_per_seed_and_averaged():
    rounds = pd.DataFrame({"seed": [1, 1, 1, 2, 2, 2], "learner": ["feat"] * 6, "dataset": ["cmnist025"] * 6,
                           "epochs": [150, 150, 150, 150, 150, 150], "accepted": [True, True, False, True, True, True]})
    assert cmnist_views.feat_epochs(rounds) == 375  # (300 + 450) / 2
    assert cmnist_views.feat_epochs(rounds, dataset="cmnist01") is None
    assert cmnist_views.feat_epochs(rounds, learner="ifeat") is None
    assert cmnist_views.feat_epochs(pd.DataFrame()) is None


# -- chapter 04 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("termination", [None, "The 130% check discarded a round in 10 of 10 runs."])
@pytest.mark.parametrize("committed", [False, True])
def test_chapter_04_says_what_stops_feat_and_where_table_2_is_read(termination, committed):
    text = clean(cmnist_views.feat_what_we_see(termination, table2_committed=committed))
    assert ("**What stops FeAT**" in text) == (termination is not None)
    assert (termination or "") in text
    assert ("not committed yet" in text) != committed
    assert text.count("**Table 2**") == 1


# -- chapter 05 ----------------------------------------------------------------------------------
def test_chapter_05_points_to_the_committed_table_or_says_nothing_is_committed():
    assert "committed table above" in clean(wilds_views.what_we_see("Camelyon17", committed=True))
    text = clean(wilds_views.what_we_see("Camelyon17", committed=False))
    assert text.startswith("**No full-scale results are committed yet** for Camelyon17") and "ranks nothing" in text


# -- chapter 06 ----------------------------------------------------------------------------------
def saliency(run, feat_share, erm_share, feat_flip, erm_flip):
    return clean(saliency_views.what_we_see(run, "GradCAM", feat_share, erm_share, feat_flip, erm_flip))


def test_chapter_06_small_run_says_which_model_looks_where_is_not_shown():
    text = saliency(SMALL, 0.1, 0.6, 0.05, 0.9)
    assert "GradCAM maps" in text and "10.0%" in text and "60.0%" in text
    assert "not which model looks where" in text and "FeAT keeps" not in text


def test_chapter_06_full_size_claims_the_paper_s_pattern_only_when_both_measures_show_it():
    agree = saliency(PAPER, 0.1, 0.6, 0.05, 0.9)
    assert "both measures agree with the paper" in agree and "FeAT keeps more of the digit" in agree
    flips_only = saliency(REDUCED, 0.7, 0.6, 0.05, 0.9)
    assert "The flip rate agrees with the paper" in flips_only and "the attribution share does not" in flips_only
    share_only = saliency(PAPER, 0.1, 0.6, 0.9, 0.8)
    assert "does not show FeAT relying less on colour" in share_only
    neither = saliency(PAPER, 0.7, 0.6, 0.9, 0.8)
    assert "neither measure shows the paper's pattern" in neither
    for text in (flips_only, share_only, neither):
        assert "FeAT keeps more of the digit" not in text and "FeAT keeping the digit" not in text


def test_the_stop_sentence_gives_a_range_only_when_there_is_one():
    import pandas as pd

    from featlib.experiments.cmnist_report import describe_stops

    def stops(scores, kept):
        return pd.DataFrame({"dataset": "cmnist01", "learner": "feat", "seed": range(1, len(kept) + 1),
                             "rounds_kept": kept, "score": scores, "termination_threshold": 1.3})

    one = describe_stops(stops([1.249, None], [3, 5]), "cmnist01", "feat")
    assert "the one discarded round's training + retention accuracy was 124.9% against" in one and "–" not in one
    two = describe_stops(stops([1.249, 1.21], [3, 3]), "cmnist01", "feat")
    assert "the discarded round's training + retention accuracy was 121.0–124.9%" in two
    assert describe_stops(stops([None], [5]), "cmnist01", "feat").endswith("no round was discarded")
