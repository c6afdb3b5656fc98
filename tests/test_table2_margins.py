"""FeAT's margin per row of Table 2 and what the test-domain selection carries
(featbook.cmnist_views.feat_margins, selection_gaps), on constructed runs."""
import pandas as pd
import pytest

from featbook.cmnist_views import feat_margins, selection_gaps
from featlib.experiments.paper_values import TABLE2


def runs(values: dict, val: dict | None = None, seeds=(1, 2)) -> pd.DataFrame:
    """values[(learner, objective)] = {(weight, warmup): accuracy}; val likewise for val_acc."""
    rows = []
    for (learner, objective), configs in values.items():
        for (weight, warmup), acc in configs.items():
            for seed in seeds:
                rows.append({"dataset": "cmnist025", "learner": learner, "objective": objective, "seed": seed,
                             "penalty_weight": weight, "pretrain_epochs": warmup, "worst_test_acc": acc,
                             "val_acc": (val or values)[(learner, objective)][(weight, warmup)]})
    return pd.DataFrame(rows)


def test_the_margin_is_feat_minus_the_best_other_column_beside_the_papers():
    frame = runs({("ifeat", "irmv1"): {(1e2, 0): 0.70}, ("erm", "irmv1"): {(1e2, 0): 0.60},
                  ("bonsai", "irmv1"): {(1e2, 0): 0.66}})
    row = feat_margins(frame).iloc[0]
    assert row["margin"] == pytest.approx(4.0) and row["best_other"] == "bonsai"
    paper = TABLE2["cmnist025"]["irmv1"]
    assert row["paper_margin"] == pytest.approx(paper["ifeat"][0] - max(paper["erm"][0], paper["bonsai"][0]))
    assert row["paper_best_other"] == "bonsai"


def test_the_oracle_carries_what_validation_would_not_have_picked():
    # two configurations: the better one on the test environments is the worse one in validation
    values = {("erm", "vrex"): {(1e2, 0): 0.60, (1e4, 0): 0.70}}
    val = {("erm", "vrex"): {(1e2, 0): 0.90, (1e4, 0): 0.80}}
    gaps = selection_gaps(runs(values, val), learners=("erm",))
    assert gaps.iloc[0]["gap"] == pytest.approx(10.0) and gaps.iloc[0]["cells"] == 1
    same = selection_gaps(runs(values, values), learners=("erm",))
    assert same.iloc[0]["gap"] == pytest.approx(0.0)
    old = runs(values).drop(columns="val_acc")
    assert selection_gaps(old).empty  # pieces made before featlib 0.5 record no validation accuracy
    assert feat_margins(old[old["learner"] == "none"]).empty
