"""FeAT (Algorithm 1) and its lightweight variant iFeAT (Algorithm 2, Appendix E).

Round k trains a freshly initialised head ``w_k`` together with the shared featurizer ``phi``
on Eq. (7):

    l_FeAT = max_{D^a_i in G^a} R_{D^a_i}(w_k o phi) + lambda * sum_{D^r_i in G^r} R_{D^r_i}(w_i o phi),

DRO over the augmentation sets (``G^a`` starts as ``{D_tr}``) to learn new features, plus the
risks of the stored heads ``w_i`` on their retention sets to keep the features already learned.
After the round, the training set is split by whether the round's classifier is correct
(retention set ``D^r_k``) or wrong (augmentation set ``D^a_k``).

* FeAT keeps every set and every head: round k optimises over ``2k - 1`` sets.
* iFeAT keeps only the latest: ``G^a = {D^a_{k-1}}``, ``G^r = {D^r_{k-1}}`` with one stored
  head, the running average of the heads so far (Algorithm 2's "w_k <- (w_{k-1}, w_k)"), which
  is also the classifier that splits the data. By default (``keep_full_set=True``) iFeAT keeps
  ``D^a_0 = D_tr`` in ``G^a`` besides the latest ``D^a``, as Algorithm 1 always does and as the
  authors' ColoredMNIST code does (their DRO set is {all, D^a}). Algorithm 2's text replaces
  ``G^a`` by ``{D^a_k}`` alone (``keep_full_set=False``): round 2 then fits only the examples
  round 1 got wrong, loses the training accuracy on the rest and fails the termination check,
  so iFeAT stops after round 1 (what we measured on every seed of the small profile).

Termination (Appendix F.1): from round 2 on, if training accuracy of ``f_k`` plus retention
accuracy (the stored heads' accuracy on their retention sets, averaged over the sets) is below
``threshold`` (130%), round k is discarded and the featurizer rolls back to round k-1. The
final classifier is the average of the accepted rounds' heads (Algorithm 1, last line).

Where the authors' released code differs (and we follow the paper): it averages heads by a sum
divided by the wrong count, divides the retention accuracy by the round number, always stops
after round 0 (then crashes) and implements iFeAT only.
"""
from __future__ import annotations

import copy

import pandas as pd
import torch
from torch import nn

from ..models.mlp import ColoredMNISTMLP, fresh_head
from ..validation import check_choice, check_int, check_positive
from .base import (
    FEATURE_LEARNERS, LearnedFeatures, accuracy, fit, masked_mean, per_sample_bce, worst_test_accuracy,
)


def average_heads(heads: list[nn.Linear]) -> nn.Linear:
    """The head whose weight and bias are the means of ``heads``' (Algorithm 1, line 16)."""
    out = copy.deepcopy(heads[0])
    with torch.no_grad():
        out.weight.copy_(torch.stack([h.weight for h in heads]).mean(0))
        out.bias.copy_(torch.stack([h.bias for h in heads]).mean(0))
    return out


def frozen(head: nn.Linear) -> nn.Linear:
    head = copy.deepcopy(head)
    head.requires_grad_(False)
    return head


def feat_loss(phi, head, x, y, aug_sets, retention, retain_weight) -> torch.Tensor:
    """Eq. (7) for the current round."""
    feats = phi(x)
    per_sample = per_sample_bce(head(feats).squeeze(-1), y)
    augment = torch.stack([masked_mean(per_sample, a) for a in aug_sets]).max()
    if not retention:
        return augment
    retain = sum(masked_mean(per_sample_bce(w(feats).squeeze(-1), y), r) for r, w in retention)
    return augment + retain_weight * retain


def _feat(
    data, seed: int, *, variant: str, epochs_per_round: int = 150, max_rounds: int = 5,
    retain_weight: float = 0.01, threshold: float = 1.30, hidden_dim: int = 256, lr: float = 1e-3,
    l2: float = 1e-3, keep_full_set: bool = True, progress: bool = False,
) -> LearnedFeatures:
    check_choice("variant", variant, ("feat", "ifeat"))
    check_int("epochs_per_round", epochs_per_round, minimum=1)
    check_int("max_rounds", max_rounds, minimum=1)
    check_positive("retain_weight", retain_weight, allow_zero=True)
    check_positive("threshold", threshold)
    x, y = data.train_x, data.train_y
    model = ColoredMNISTMLP(hidden_dim, seed=seed).to(x.device)
    phi = model.featurizer
    everything = torch.ones_like(y, dtype=torch.bool)
    aug_sets, retention, heads = [everything], [], []
    accepted_state, rows, epochs = None, [], 0
    for k in range(1, max_rounds + 1):
        head = model.classifier if k == 1 else fresh_head(hidden_dim, seed=1000 * seed + k).to(x.device)
        fit(list(phi.parameters()) + list(head.parameters()),
            lambda: feat_loss(phi, head, x, y, aug_sets, retention, retain_weight),
            epochs_per_round, lr, l2, f"{variant} round {k}", progress)
        epochs += epochs_per_round
        with torch.no_grad():
            feats = phi(x)
            train_acc = accuracy(head(feats).squeeze(-1), y)
            retention_acc = (
                sum(accuracy(w(feats[r]).squeeze(-1), y[r]) for r, w in retention) / len(retention)
                if retention else float("nan")
            )
            row = {
                "round": k, "epochs": epochs_per_round, "train_acc": train_acc, "retention_acc": retention_acc,
                "ood_acc": worst_test_accuracy(lambda z: head(phi(z)).squeeze(-1), data.test),
                "ood_acc_average_head": worst_test_accuracy(
                    lambda z: average_heads(heads + [head])(phi(z)).squeeze(-1), data.test),
                "n_augmentation_sets": len(aug_sets), "n_retention_sets": len(retention),
            }
        terminate = k > 1 and train_acc + retention_acc < threshold
        row["accepted"] = not terminate
        if terminate:
            phi.load_state_dict(accepted_state)
            rows.append(row)
            break
        heads.append(frozen(head))
        splitter = heads[-1] if variant == "feat" else average_heads(heads)
        with torch.no_grad():
            correct = (splitter(feats).squeeze(-1) > 0).to(y.dtype) == y
        row.update(size_augmentation=int((~correct).sum()), size_retention=int(correct.sum()))
        rows.append(row)
        if variant == "feat":
            aug_sets = aug_sets + [~correct] if (~correct).any() else aug_sets
            retention = retention + [(correct, heads[-1])]
        else:
            aug_sets = ([everything] if keep_full_set or not (~correct).any() else []) + (
                [~correct] if (~correct).any() else [])
            retention = [(correct, frozen(splitter))]
        accepted_state = copy.deepcopy(phi.state_dict())
    model.classifier = average_heads(heads).requires_grad_(True)
    rounds = pd.DataFrame(rows)
    rounds["accepted_rounds"] = len(heads)
    return LearnedFeatures(variant, model, rounds, epochs)


@FEATURE_LEARNERS.register("feat")
def feat_features(data, seed: int, **kwargs) -> LearnedFeatures:
    """FeAT, Algorithm 1 (all augmentation/retention sets and heads kept)."""
    return _feat(data, seed, variant="feat", **kwargs)


@FEATURE_LEARNERS.register("ifeat")
def ifeat_features(data, seed: int, **kwargs) -> LearnedFeatures:
    """iFeAT, Algorithm 2 (only the latest sets and one stored head)."""
    return _feat(data, seed, variant="ifeat", **kwargs)
