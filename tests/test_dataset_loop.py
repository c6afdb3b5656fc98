"""Feature learners on a dataset of one's own (featlib.feature_learning.dataset_loop): the loop
runs every learner on a map-style Dataset of (x, y, env) items, two or more classes, full batch or
minibatches; on the full batch it trains what the ColoredMNIST loop trains; bad input is one line."""
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from featlib.data.colored_mnist import make_colored_mnist
from featlib.feature_learning import FEATURE_LEARNERS, learn_features
from featlib.models.cmnist_models import make_cmnist_model


class Items(torch.utils.data.Dataset):
    def __init__(self, x, y, env):
        self.x, self.y, self.env = x, y, env

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], int(self.y[i]), int(self.env[i])


def three_classes(n=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = torch.randn(n, 6, generator=g) + nn.functional.one_hot(y, 6).float() * 2
    return Items(x, y, torch.arange(n) % 2)


class Net(nn.Module):
    def __init__(self, seed, outputs=3, inputs=6):
        super().__init__()
        torch.manual_seed(seed)
        self.featurizer = nn.Sequential(nn.Linear(inputs, 16), nn.ReLU())
        self.classifier = nn.Linear(16, outputs)


@pytest.mark.parametrize("learner", ["erm", "bonsai", "feat", "ifeat"])
@pytest.mark.parametrize("batch_size", [None, 32])
def test_every_learner_runs_on_a_three_class_dataset(learner, batch_size):
    options = {"erm": {"steps": 20}, "bonsai": {"round_steps": (10, 10), "synthesis_steps": 10}}.get(
        learner, {"steps_per_round": 10, "max_rounds": 2})
    learned = learn_features(three_classes(), learner, Net, tests={"a": three_classes(seed=1)},
                             batch_size=batch_size, **options)
    assert learned.model.classifier.out_features == 3 and "ood_acc" in learned.rounds
    assert learned.rounds["ood_acc"].between(0, 1).all()


def test_on_the_full_batch_it_trains_what_the_colored_mnist_loop_trains():
    data = make_colored_mnist("cmnist025", 1, n_train=200, n_test=100, n_val=0)
    x, y = data.train_x, data.train_y
    items = Items(x, y.long(), data.train_env)
    tests = {"e09": Items(data.test[0].x, data.test[0].y.long(), torch.zeros(100, dtype=torch.long))}
    ours = learn_features(items, "ifeat", lambda s: make_cmnist_model("mlp", data.image_shape, 16, seed=s), seed=1,
                          tests=tests, steps_per_round=8, max_rounds=2)
    torch.manual_seed(1)
    theirs = FEATURE_LEARNERS.get("ifeat")(data, 1, hidden_dim=16, epochs_per_round=8, max_rounds=2)
    for a, b in zip(ours.model.parameters(), theirs.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    assert list(ours.rounds["train_acc"]) == pytest.approx(list(theirs.rounds["train_acc"]))


def test_bad_input_is_one_line_naming_it():
    with pytest.raises(ValueError, match=r"train\[0\] is a tuple, not \(x, y, env\)"):
        learn_features(TensorDataset(torch.zeros(4, 6), torch.zeros(4)), "erm", Net, steps=1)
    with pytest.raises(ValueError, match="1 output\\(s\\) for 3 classes"):
        learn_features(three_classes(), "erm", lambda s: Net(s, outputs=1), steps=1)
    with pytest.raises(ValueError, match="`featurizer` module"):
        learn_features(three_classes(), "erm", lambda s: nn.Linear(6, 3), steps=1)
