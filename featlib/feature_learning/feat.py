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
  head, the combination of the heads so far (Algorithm 2's "w_k <- (w_{k-1}, w_k)"; their sum by
  default, ``head_combination`` below), which is also the classifier that splits the data. By default (``keep_full_set=True``) iFeAT keeps
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
are kept for studies. The final classifier combines the accepted rounds' heads: Algorithm 1's
last line averages them, the authors' code sums them; ``head_combination`` names the choice
(:data:`.feat_rounds.HEAD_COMBINATIONS`; for iFeAT it also decides the stored head whose retention
loss round k+1 minimises), and the default, ``"sum"``, is the one whose full-size Table 7 matches
the paper's (``results/cmnist-rounds``).

The paper's experiments use iFeAT throughout (Sec. 5, "Practical implementations"): Table 2's
FeAT column and Table 7 are iFeAT's. ``feat`` is Algorithm 1 as written, its own learner.

Where the authors' released code differs: it always stops after round 0 (then crashes) and
implements iFeAT only.

One implementation serves both training loops (:mod:`.base`): full batch on ColoredMNIST (a
round's length in epochs, Table 6) and minibatches on WILDS (in steps, Table 12; checkpointed at
every round's end, so a killed run resumes at the round it was in).
"""
from __future__ import annotations

import copy

from ..hparams import APPENDIX_F1, TABLE6
from ..validation import check_choice, check_int
from ..store.legacy import ROW_ALIASES, STATE_ALIASES, renamed
from .base import Learned, Loop
from .learners import register
from .feat_rounds import DEFAULT_HEAD_COMBINATION, VARIANTS, FeATRounds
from .termination import DEFAULT_TERMINATION, DEFAULT_TERMINATION_THRESHOLD


def _feat(
    loop: Loop, *, variant: str, steps_per_round: int = TABLE6["cmnist025"]["ifeat"]["epochs_per_round"],
    max_rounds: int = APPENDIX_F1["max_rounds"].value, retain_weight: float = APPENDIX_F1["retain_weight"].value,
    termination_threshold: float = DEFAULT_TERMINATION_THRESHOLD, termination_rule: str = DEFAULT_TERMINATION,
    head_combination: str = DEFAULT_HEAD_COMBINATION, keep_full_set: bool = True,
) -> Learned:
    check_choice("variant", variant, VARIANTS)
    check_int("epochs_per_round", steps_per_round, minimum=1)
    check_int("max_rounds", max_rounds, minimum=1)
    y = loop.labels
    rounds = FeATRounds(len(y), variant, retain_weight=retain_weight, termination_threshold=termination_threshold,
                        termination_rule=termination_rule, keep_full_set=keep_full_set,
                        head_combination=head_combination, device=y.device)
    state = loop.resume(variant)
    if (learned := loop.finished(variant, state)) is not None:
        return learned
    model = loop.new_network(loop.seed)
    phi = model.featurizer
    rows, first, accepted_phi = [], 1, None
    if state:
        rounds.load_state_dict(renamed(state, STATE_ALIASES)["feat_rounds"])  # featlib 0.4 called it "learner"
        rows = [{ROW_ALIASES.get(k, k): v for k, v in row.items()} for row in state["rows"]]
        first, accepted_phi = state["round"], state["accepted_phi"]
        model.load_state_dict(state["model"])
    stopped = False
    for k in range(first, max_rounds + 1):
        head = model.classifier if k == 1 else loop.new_head(1000 * loop.seed + k, like=model.classifier)

        def loss_fn(x, yb, index, head=head):  # Eq. (7)
            feats = phi(x)
            retained = [loop.per_sample_loss(w(feats), yb) for w in rounds.retained_heads]
            return rounds.loss(loop.per_sample_loss(head(feats), yb), retained, index)

        def extra(k=k):
            return {"learner": variant, "feat_rounds": rounds.state_dict(), "rows": rows, "round": k,
                    "accepted_phi": accepted_phi, "model": model.state_dict()}

        loop.train(f"{variant} round {k}", {"phi": phi, "head": head}, loss_fn, steps_per_round, save=extra)
        feats = loop.train_features(phi)
        row = {"round": k, loop.length_unit: steps_per_round,
               **loop.score(phi, {"": head, "_combined_head": rounds.combine(rounds.heads + [head])})}
        row.update(rounds.end_round(head, lambda w: loop.predict(w, feats) == y))
        rows.append(row)
        stopped = not row["accepted"]
        if stopped:
            phi.load_state_dict(accepted_phi)
            break
        accepted_phi = copy.deepcopy(phi.state_dict())
        loop.save({**extra(), "round": k + 1, "stage": None, "step": 0})
    model.classifier = rounds.final_head().requires_grad_(True)
    for r in rows:
        r["accepted_rounds"] = len(rounds.heads)
    return loop.finish(variant, model, rows, sum(r[loop.length_unit] for r in rows))


#: The protocol fields FeAT and iFeAT take (:attr:`.learners.Learner.protocol_fields`).
FEAT_FIELDS = ("max_rounds", "retain_weight", "termination_threshold", "termination_rule", "head_combination",
               "keep_full_set")
#: A round's step time as a multiple of ERM's (featlib.cost on the H100: iFeAT 1.47x in its worst
#: round, FeAT 1.16-1.78x), for the chapters' time estimates.
STEP_COST = {"feat": 1.8, "ifeat": 1.5}


@register("feat", label="FeAT, Alg. 1 (all sets)", short_label="FeAT", order=4,
          schedule=TABLE6["cmnist025"]["feat"], protocol_fields=FEAT_FIELDS, step_cost=STEP_COST["feat"])
def feat(loop: Loop, **options) -> Learned:
    """FeAT, Algorithm 1 (all augmentation/retention sets and heads kept). Options:
    ``steps_per_round`` (full batch: ``epochs_per_round``), ``max_rounds``, ``retain_weight``,
    ``termination_threshold``, ``termination_rule`` ("paper", "undivided" or "never"),
    ``head_combination`` ("sum" or "average"), ``keep_full_set``."""
    return _feat(loop, variant="feat", **options)


@register("ifeat", label="FeAT (iFeAT)", short_label="iFeAT", order=3,
          schedule=TABLE6["cmnist025"]["ifeat"], protocol_fields=FEAT_FIELDS, step_cost=STEP_COST["ifeat"])
def ifeat(loop: Loop, **options) -> Learned:
    """iFeAT, Algorithm 2 (only the latest sets and one stored head): the learner behind the
    paper's FeAT numbers (Table 2, Table 7). The options of :func:`feat`."""
    return _feat(loop, variant="ifeat", **options)
