"""ERM feature learning: ``epochs`` full-batch steps of ERM on the pooled training data.

This is the paper's "ERM" feature initialisation (Table 2; 150 epochs on ColoredMNIST-025, 500
on -01, Table 6) and round 0 of Bonsai. :func:`erm_snapshots` keeps copies of one longer ERM run
at several epochs (150, 300 and 450 by default), e.g. to compare with GradCAM what ERM's
features look at as training goes on (Fig. 4 / Fig. 6).

``model`` picks the network (:data:`featlib.models.CMNIST_MODELS`): the MLP of Table 2 or the
small CNN of the GradCAM figures.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import pandas as pd
import torch
from torch import nn

from ..models.cmnist_models import CMNIST_MODELS, make_cmnist_model
from ..validation import check_int, check_positive, check_sequence
from .base import FEATURE_LEARNERS, LearnedFeatures, accuracy, fit, per_sample_bce, worst_test_accuracy


def train_erm(model: nn.Module, x, y, epochs: int, lr: float, l2: float, desc="ERM", progress=False,
              on_epoch=None) -> None:
    """Minimise the mean logistic loss over all training examples (environments pooled);
    ``on_epoch(e)`` is called after epoch ``e`` (see :func:`.base.fit`)."""
    fit(model.parameters(), lambda: per_sample_bce(model(x), y).mean(), epochs, lr, l2, desc, progress,
        on_epoch=on_epoch)


def _history(net: nn.Module, data, epochs: int) -> pd.DataFrame:
    """ERM's one history row: training and OOD (worst test environment) accuracy after ``epochs``."""
    with torch.no_grad():
        return pd.DataFrame([{
            "round": 1, "epochs": epochs, "train_acc": accuracy(net(data.train_x), data.train_y),
            "ood_acc": worst_test_accuracy(net, data.test), "accepted": True,
        }])


@FEATURE_LEARNERS.register("erm")
def erm_features(
    data, seed: int, *, epochs: int = 150, model: str = "mlp", hidden_dim: int = 256, lr: float = 1e-3,
    l2: float = 1e-3, progress: bool = False,
) -> LearnedFeatures:
    """ERM from a seeded random initialisation of the network ``model`` ("mlp" or "cnn"); one
    history row."""
    check_int("epochs", epochs, minimum=0)
    check_positive("lr", lr)
    check_positive("l2", l2, allow_zero=True)
    CMNIST_MODELS.get(model)
    net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=seed).to(data.train_x.device)
    train_erm(net, data.train_x, data.train_y, epochs, lr, l2, progress=progress)
    return LearnedFeatures("erm", net, _history(net, data, epochs), epochs)


def erm_snapshots(
    data, seed: int, *, epochs: Sequence[int] = (150, 300, 450), model: str = "mlp", hidden_dim: int = 256,
    lr: float = 1e-3, l2: float = 1e-3, progress: bool = False,
) -> dict[int, LearnedFeatures]:
    """One ERM run of ``max(epochs)`` full-batch epochs (one Adam optimiser) with a copy of the
    network kept after each epoch count in ``epochs``: ``{epoch: LearnedFeatures}`` in increasing
    order. Each snapshot is what :func:`erm_features` with that many epochs returns (same
    network, same one-row history), at the cost of the longest run only."""
    epochs = check_sequence("epochs", epochs, min_length=1)
    for e in epochs:
        check_int("epochs", e, minimum=1)
    check_positive("lr", lr)
    check_positive("l2", l2, allow_zero=True)
    CMNIST_MODELS.get(model)
    wanted = sorted(set(int(e) for e in epochs))
    net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=seed).to(data.train_x.device)
    snapshots: dict[int, LearnedFeatures] = {}

    def keep(epoch: int) -> None:
        if epoch in wanted:
            snapshots[epoch] = LearnedFeatures("erm", copy.deepcopy(net), _history(net, data, epoch), epoch)

    train_erm(net, data.train_x, data.train_y, wanted[-1], lr, l2, progress=progress, on_epoch=keep)
    return {e: snapshots[e] for e in wanted}
