"""ERM feature learning: ``epochs`` full-batch steps of ERM on the pooled training data.

This is the paper's "ERM" feature initialisation (Table 2; 150 epochs on ColoredMNIST-025, 500
on -01, Table 6) and round 0 of Bonsai.
"""
from __future__ import annotations

import pandas as pd

from ..models.mlp import ColoredMNISTMLP
from ..validation import check_int, check_positive
from .base import FEATURE_LEARNERS, LearnedFeatures, accuracy, fit, per_sample_bce, worst_test_accuracy


def train_erm(model: ColoredMNISTMLP, x, y, epochs: int, lr: float, l2: float, desc="ERM", progress=False) -> None:
    """Minimise the mean logistic loss over all training examples (environments pooled)."""
    fit(model.parameters(), lambda: per_sample_bce(model(x), y).mean(), epochs, lr, l2, desc, progress)


@FEATURE_LEARNERS.register("erm")
def erm_features(
    data, seed: int, *, epochs: int = 150, hidden_dim: int = 256, lr: float = 1e-3, l2: float = 1e-3,
    progress: bool = False,
) -> LearnedFeatures:
    """ERM from a seeded random initialisation; one history row."""
    check_int("epochs", epochs, minimum=0)
    check_positive("lr", lr)
    model = ColoredMNISTMLP(hidden_dim, seed=seed).to(data.train_x.device)
    train_erm(model, data.train_x, data.train_y, epochs, lr, l2, progress=progress)
    rounds = pd.DataFrame([{
        "round": 1, "epochs": epochs, "train_acc": accuracy(model(data.train_x), data.train_y),
        "ood_acc": worst_test_accuracy(model, data.test), "accepted": True,
    }])
    return LearnedFeatures("erm", model, rounds, epochs)
