"""Bonsai, the rich feature construction of Zhang, Lopez-Paz & Bottou (2022) ("RFC"), on any loop.

* Round 1 trains a network with ERM and splits the training set by whether it is correct.
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
say 150, which we use; ``python -m featlib.cli.gap_studies bonsai-dro-length`` compares the two.)
On WILDS every round and the synthesis take Table 12's steps per round.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ..hparams import TABLE6
from ..validation import check_int, check_sequence
from .base import Learned, Loop
from .learners import register
from .erm import erm_loss
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


# Table 2's second learned column; a round's step takes 1.1 of ERM's (featlib.cost on the H100),
# for the chapters' time estimates.
@register("bonsai", label="Bonsai", order=2, schedule=TABLE6["cmnist025"]["bonsai"], step_cost=1.1)
def bonsai(loop: Loop, *, round_steps: Sequence[int] = TABLE6["cmnist025"]["bonsai"]["round_epochs"],
           synthesis_steps: int = TABLE6["cmnist025"]["bonsai"]["synthesis_epochs"]) -> Learned:
    """Bonsai's rounds (ERM, then DRO over the groups so far), each on a fresh network, and its
    synthesis round; ``round_steps``: each round's length, ``synthesis_steps``: the synthesis's
    (by default ColoredMNIST-025's, Table 6)."""
    check_sequence("round_epochs", round_steps)
    for e in round_steps:
        check_int("round_epochs", e, minimum=1)
    check_int("synthesis_epochs", synthesis_steps, minimum=1)
    state = loop.resume("bonsai")
    if (learned := loop.finished("bonsai", state)) is not None:
        return learned
    y = loop.labels
    correct, predictions, rows, first = [], [], [], 0
    if state:
        correct = [c.to(y.device) for c in state["correct"]]
        predictions = [p.to(y.device) for p in state["predictions"]]
        rows, first = state["rows"], state["round"]

    def extra(r):
        return {"learner": "bonsai", "correct": [c.cpu() for c in correct],
                "predictions": [p.cpu() for p in predictions], "rows": rows, "round": r}

    for r in range(first, len(round_steps)):
        net = loop.new_network(1000 * loop.seed + r)
        groups = split_groups(correct)
        if r == 0:
            loss_fn = erm_loss(loop, net)
        else:
            def loss_fn(x, yb, index, net=net, groups=groups):
                return worst_group_risk(loop.per_sample_loss(net.classifier(net.featurizer(x)), yb), groups, index)
        loop.train(f"bonsai round {r + 1}", {"net": net}, loss_fn, round_steps[r], save=lambda r=r: extra(r))
        predicted = loop.predict(net.classifier, loop.train_features(net.featurizer))
        correct.append(predicted == y)
        predictions.append(predicted)
        rows.append({"round": r + 1, loop.length_unit: round_steps[r], "train_acc": correct[-1].float().mean().item(),
                     **loop.score(net.featurizer, {"": net.classifier}),
                     "n_groups": 2 * r, "size_correct": int(correct[-1].sum()),
                     "size_wrong": int((~correct[-1]).sum()), "accepted": True})
        loop.save({**extra(r + 1), "stage": None, "step": 0})

    k = len(predictions)
    together = torch.stack(correct, 1)
    agree = together.all(1) | (~together).all(1)
    index = synthesis_index(together, len(y), np.random.default_rng(loop.seed))
    targets = torch.stack(predictions, 1)  # (n, rounds): each round's predicted labels
    net = loop.new_network(1000 * loop.seed + k)
    net.classifier = loop.new_head(loop.seed, like=net.classifier, copies=k)

    def synthesis_loss(x, yb, index):  # index: the resampled batch's positions in the training set
        logits = net.classifier(net.featurizer(x))
        return loop.per_sample_loss(logits.reshape(len(x), k, -1), targets[index]).mean()

    loop.train("bonsai synthesis", {"net": net}, synthesis_loss, synthesis_steps, save=lambda: extra(k),
               resample=index)
    net.classifier = average_round_heads(net.classifier, k)
    predicted = loop.predict(net.classifier, loop.train_features(net.featurizer))
    rows.append({"round": "synthesis", loop.length_unit: synthesis_steps,
                 "train_acc": (predicted == y).float().mean().item(),
                 **loop.score(net.featurizer, {"": net.classifier}),
                 "size_agree": int(agree.sum()), "size_disagree": int((~agree).sum()), "accepted": True})
    return loop.finish("bonsai", net, rows, sum(round_steps) + synthesis_steps)
