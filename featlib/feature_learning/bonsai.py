"""Bonsai, the rich feature construction of Zhang, Lopez-Paz & Bottou (2022) ("RFC").

* Round 0 trains a network with ERM and splits the training set by whether it is correct.
* Each later round trains a *freshly initialised* network with DRO (the max of the risks)
  over every group found so far (the correct and the wrong examples of each earlier round),
  and adds its own correct/wrong split.
* The synthesis round trains one more fresh network with one head per round, each predicting
  that round's pseudo-labels (the round network's predicted labels), on a resampled training
  set with half the examples where all round networks agree on correctness (all right or all
  wrong) and half where they disagree, drawn with replacement; the final head is the average of
  the round heads.

Epochs per round (Table 6): 50 + 150 and 500 synthesis epochs on ColoredMNIST-025, 150 + 400 and
500 on -01. (Appendix F.1's text says 500 for the second round on -025; Table 6 and protocol.md
say 150, which we use.)

Every network is a ``model`` of :data:`featlib.models.CMNIST_MODELS` (the MLP of Table 2 or the
small CNN of the GradCAM figures).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..models.cmnist_models import CMNIST_MODELS, make_cmnist_model
from ..models.mlp import xavier_linear
from ..validation import check_int, check_sequence
from .base import FEATURE_LEARNERS, LearnedFeatures, accuracy, fit, per_sample_bce, worst_test_accuracy
from .erm import train_erm
from .feat_rounds import batch_mean


def split_groups(correct_per_round: list[torch.Tensor]) -> list[torch.Tensor]:
    """The DRO groups of a Bonsai round: the correct and the wrong examples of each earlier round."""
    return [m for correct in correct_per_round for m in (correct, ~correct)]


def worst_group_risk(per_sample: torch.Tensor, groups: list[torch.Tensor], index: torch.Tensor | None = None):
    """DRO: the max over groups of the group's mean loss on the batch (``index``: the batch's
    positions in the training set, None for the full batch); groups absent from the batch are
    left out of the step."""
    risks = [batch_mean(per_sample, (g if index is None else g[index]).to(per_sample.dtype)) for g in groups]
    risks = [r for r in risks if r is not None]
    return torch.stack(risks).max() if risks else per_sample.mean()


def synthesis_index(correct: torch.Tensor, n: int, rng: np.random.Generator) -> np.ndarray:
    """The synthesis round's resampled training set: ``n // 2`` draws (with replacement) from the
    examples where all round networks agree on correctness (``correct``: (n_examples, rounds)
    bool) and ``n // 2`` from those where they disagree; all examples if one side is empty."""
    correct = torch.as_tensor(correct).cpu()
    agree = (correct.all(1) | (~correct).all(1)).numpy()
    if agree.all() or not agree.any():
        return np.arange(len(agree))
    pools = [np.flatnonzero(agree), np.flatnonzero(~agree)]
    return np.concatenate([rng.choice(p, n // 2, replace=True) for p in pools])


def average_round_heads(multi_head: nn.Linear, rounds: int) -> nn.Linear:
    """One head from the synthesis network's ``rounds`` stacked heads (rows ``rounds x C``): the
    average of the round heads, the final classifier of Bonsai."""
    out_features = multi_head.out_features // rounds
    averaged = nn.Linear(multi_head.in_features, out_features).to(multi_head.weight.device)
    with torch.no_grad():
        averaged.weight.copy_(multi_head.weight.reshape(rounds, out_features, -1).mean(0))
        averaged.bias.copy_(multi_head.bias.reshape(rounds, out_features).mean(0))
    return averaged


@FEATURE_LEARNERS.register("bonsai")
def bonsai_features(
    data, seed: int, *, round_epochs=(50, 150), synthesis_epochs: int = 500, model: str = "mlp",
    hidden_dim: int = 256, lr: float = 1e-3, l2: float = 1e-3, progress: bool = False,
) -> LearnedFeatures:
    """Bonsai's rounds and synthesis, each on a fresh network ``model`` ("mlp" or "cnn")."""
    check_sequence("round_epochs", round_epochs)
    for e in round_epochs:
        check_int("round_epochs", e, minimum=1)
    check_int("synthesis_epochs", synthesis_epochs, minimum=1)
    CMNIST_MODELS.get(model)
    x, y = data.train_x, data.train_y
    groups, predictions, rows = [], [], []
    for r, epochs in enumerate(round_epochs):
        net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=1000 * seed + r).to(x.device)
        if r == 0:
            train_erm(net, x, y, epochs, lr, l2, desc="Bonsai round 0 (ERM)", progress=progress)
        else:
            split = split_groups(groups)
            fit(net.parameters(), lambda: worst_group_risk(per_sample_bce(net(x), y), split), epochs, lr, l2,
                f"Bonsai round {r} (DRO)", progress)
        with torch.no_grad():
            predicted = (net(x) > 0).to(y.dtype)
        groups.append(predicted == y)
        predictions.append(predicted)
        rows.append({"round": r + 1, "epochs": epochs, "train_acc": accuracy(net(x), y),
                     "ood_acc": worst_test_accuracy(net, data.test), "n_groups": 2 * r,
                     "size_correct": int(groups[-1].sum()), "size_wrong": int((~groups[-1]).sum())})

    correct = torch.stack(groups, dim=1)
    agree = correct.all(1) | (~correct).all(1)
    index = torch.as_tensor(synthesis_index(correct, len(y), np.random.default_rng(seed)), device=x.device)
    x_syn, targets = x[index], torch.stack(predictions, dim=1)[index]
    net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=1000 * seed + len(round_epochs)).to(x.device)
    k = len(round_epochs)
    net.classifier = xavier_linear(hidden_dim, k, torch.Generator().manual_seed(seed)).to(x.device)
    fit(net.parameters(), lambda: per_sample_bce(net.classifier(net.featurizer(x_syn)), targets).mean(),
        synthesis_epochs, lr, l2, "Bonsai synthesis", progress)
    net.classifier = average_round_heads(net.classifier, k)
    rows.append({"round": "synthesis", "epochs": synthesis_epochs, "train_acc": accuracy(net(x), y),
                 "ood_acc": worst_test_accuracy(net, data.test), "size_agree": int(agree.sum()),
                 "size_disagree": int((~agree).sum())})
    return LearnedFeatures("bonsai", net, pd.DataFrame(rows), sum(round_epochs) + synthesis_epochs)
