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

Termination (Appendix F.1, Table 7): from round 2 on, if training accuracy of ``f_k`` plus
retention accuracy is below ``termination_threshold`` (130%), round k is discarded and the featurizer rolls
back to round k-1. ``termination_rule`` names the rule of :mod:`.termination`; the default,
``"paper"``, is Table 7's retention accuracy (the stored heads' accuracies on their retention
sets, summed and divided by k-1), which stops iFeAT at round 2 on ColoredMNIST-025 and round 3
on -01 as Sec. 6 reports; ``"undivided"`` (the mean, which never fires there) and ``"never"``
are kept for studies. The final classifier is the average of the accepted rounds' heads
(Algorithm 1, last line); ``head_combination="sum"`` sums them instead, as the authors' code does
(:data:`.feat_rounds.HEAD_COMBINATIONS`; for iFeAT it also decides the stored head whose retention
loss round k+1 minimises).

The paper's experiments use iFeAT throughout (Sec. 5, "Practical implementations"): Table 2's
FeAT column and Table 7 are iFeAT's. ``feat`` is Algorithm 1 as written, its own learner.

Where the authors' released code differs (and we follow the paper by default): it "averages"
heads by a sum (selectable: ``head_combination="sum"``), always stops after round 0 (then crashes) and implements iFeAT only.

``model`` picks the network (:data:`featlib.models.CMNIST_MODELS`): the MLP of Table 2 or the
small CNN of the GradCAM figures (Fig. 4 / Fig. 6).
"""
from __future__ import annotations

import copy

import pandas as pd
import torch

from ..models.cmnist_models import CMNIST_MODELS, make_cmnist_model
from ..models.mlp import fresh_head
from ..validation import check_choice, check_int
from .base import FEATURE_LEARNERS, LearnedFeatures, fit, per_sample_bce, worst_test_accuracy
from .feat_rounds import DEFAULT_HEAD_COMBINATION, FeATRounds
from .termination import DEFAULT_TERMINATION, DEFAULT_TERMINATION_THRESHOLD


def _feat(
    data, seed: int, *, variant: str, epochs_per_round: int = 150, max_rounds: int = 5,
    retain_weight: float = 0.01, termination_threshold: float = DEFAULT_TERMINATION_THRESHOLD,
    termination_rule: str = DEFAULT_TERMINATION,
    head_combination: str = DEFAULT_HEAD_COMBINATION, model: str = "mlp", hidden_dim: int = 256, lr: float = 1e-3, l2: float = 1e-3, keep_full_set: bool = True,
    progress: bool = False,
) -> LearnedFeatures:
    check_choice("variant", variant, ("feat", "ifeat"))
    check_int("epochs_per_round", epochs_per_round, minimum=1)
    check_int("max_rounds", max_rounds, minimum=1)
    CMNIST_MODELS.get(model)
    x, y = data.train_x, data.train_y
    state = FeATRounds(len(y), variant, retain_weight=retain_weight, termination_threshold=termination_threshold,
                       termination_rule=termination_rule, keep_full_set=keep_full_set,
                       head_combination=head_combination, device=x.device)
    net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=seed).to(x.device)
    phi = net.featurizer
    accepted_state, rows, epochs = None, [], 0

    def round_loss(head):
        feats = phi(x)
        retained = [per_sample_bce(w(feats).squeeze(-1), y) for w in state.retained_heads]
        return state.loss(per_sample_bce(head(feats).squeeze(-1), y), retained)

    for k in range(1, max_rounds + 1):
        head = net.classifier if k == 1 else fresh_head(hidden_dim, seed=1000 * seed + k).to(x.device)
        fit(list(phi.parameters()) + list(head.parameters()), lambda: round_loss(head),
            epochs_per_round, lr, l2, f"{variant} round {k}", progress)
        epochs += epochs_per_round
        with torch.no_grad():
            feats = phi(x)
            row = {"round": k, "epochs": epochs_per_round,
                   "ood_acc": worst_test_accuracy(lambda z: head(phi(z)).squeeze(-1), data.test),
                   "ood_acc_average_head": worst_test_accuracy(
                       lambda z: state.combine(state.heads + [head])(phi(z)).squeeze(-1), data.test)}
        row.update(state.end_round(head, lambda w: (w(feats).squeeze(-1) > 0).to(y.dtype) == y))
        rows.append(row)
        if not row["accepted"]:
            phi.load_state_dict(accepted_state)
            break
        accepted_state = copy.deepcopy(phi.state_dict())
    net.classifier = state.final_head().requires_grad_(True)
    rounds = pd.DataFrame(rows)
    rounds["accepted_rounds"] = len(state.heads)
    return LearnedFeatures(variant, net, rounds, epochs)


@FEATURE_LEARNERS.register("feat")
def feat_features(data, seed: int, **kwargs) -> LearnedFeatures:
    """FeAT, Algorithm 1 (all augmentation/retention sets and heads kept). Options: those of
    ``_feat`` (``epochs_per_round``, ``max_rounds``, ``retain_weight``, ``termination_threshold``,
    ``termination_rule`` = "paper", "undivided" or "never", ``head_combination`` = "average" or "sum", ``model`` = "mlp" or "cnn", ``hidden_dim``,
    ``lr``, ``l2``, ``keep_full_set``, ``progress``)."""
    return _feat(data, seed, variant="feat", **kwargs)


@FEATURE_LEARNERS.register("ifeat")
def ifeat_features(data, seed: int, **kwargs) -> LearnedFeatures:
    """iFeAT, Algorithm 2 (only the latest sets and one stored head): the learner behind the
    paper's FeAT numbers (Table 2, Table 7). The options of :func:`feat_features`."""
    return _feat(data, seed, variant="ifeat", **kwargs)
