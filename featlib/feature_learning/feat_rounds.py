"""The round bookkeeping of FeAT (Algorithm 1) and iFeAT (Algorithm 2), shared by every trainer.

Both the full-batch ColoredMNIST learner (:mod:`.feat`) and the minibatch WILDS learner
(:mod:`featlib.wilds.feature_learning`) keep their sets and heads in a :class:`FeATRounds`:

* the augmentation sets ``G^a`` (``D^a_0`` = the whole training set to start with) and the
  retention sets ``G^r``, each with the frozen head ``w_i`` that was right on it, all stored as
  boolean masks over the training examples;
* :meth:`FeATRounds.loss`, Eq. (7) on a batch of example indices:
  ``max_{D^a_i} R_{D^a_i}(w_k o phi) + lambda * sum_{D^r_i} R_{D^r_i}(w_i o phi)``, where each
  risk is the mean loss over the batch's members of the set (sets with no member in the batch
  are left out of that step; with the full batch every non-empty set is in);
* the termination check of Appendix F.1 (from round 2 on, training accuracy + retention accuracy
  below ``termination_threshold`` = 130% discards the round), with the retention accuracy of a named rule of
  :mod:`.termination` (default ``"paper"``: Table 7's, divided by ``k - 1``), and the split of the
  training set after an accepted round by whether the round's classifier is correct (``D^r_k``)
  or wrong (``D^a_k``);
* the final classifier, the combination of the accepted heads (Algorithm 1, last line: their
  average), and for iFeAT the stored head that splits the data and carries the retention loss,
  the same combination of the heads so far.

How the heads combine is a named choice, :data:`HEAD_COMBINATIONS`: ``"average"``, the mean of
the heads' parameters as Sec. 4 and Algorithm 1 say; ``"sum"`` (the default), their sum, as the
authors' ColoredMNIST code computes it (its "average" adds the new head to the stored running
head, ``topmlp.lin1.weight += clf.lin1.weight``, and divides by the number of stored heads,
which is 1: a running sum). For a linear head both give the same sign of every logit, so the
split of the training set and the training accuracy are the same; what differs is the size of
the stored head's logits, hence its retention loss in the next round (Eq. 7's second term), and
the head handed to the OOD stage. The default is the one whose full-size Table 7 matches the
paper's (``results/cmnist-rounds/README.md``, chapter 04): on ColoredMNIST-01, where the
choice first acts in round 3, the sum gives round 3's retention accuracy 48.06 (paper 48.05)
where the average gives 45.87 (3 seeds each); on -025 it changes only the discarded round 3.

FeAT keeps every set and head (round k optimises over ``2k - 1`` sets); iFeAT keeps only the
latest sets and one stored head, the combination of the heads so far (their sum by default),
which is also the classifier that splits the data. ``keep_full_set`` keeps ``D^a_0`` in iFeAT's ``G^a`` as
Algorithm 1 and the authors' code do (see :mod:`.feat`).
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..hparams import APPENDIX_F1
from ..validation import check_bool, check_choice, check_int, check_positive
from .termination import (
    DEFAULT_TERMINATION, DEFAULT_TERMINATION_THRESHOLD, TERMINATION_RULES, retention_paper, retention_undivided,
)

from ..registry import Registry

VARIANTS = ("feat", "ifeat")


def _combine(heads: Sequence[nn.Module], reduce: Callable[[torch.Tensor], torch.Tensor]) -> nn.Module:
    out = copy.deepcopy(heads[0])
    with torch.no_grad():
        for name, param in out.named_parameters():
            param.copy_(reduce(torch.stack([dict(h.named_parameters())[name] for h in heads])))
    return out


def average_heads(heads: Sequence[nn.Module]) -> nn.Module:
    """The head whose parameters are the means of ``heads``' (Algorithm 1, line 16)."""
    return _combine(heads, lambda stacked: stacked.mean(0))


def sum_heads(heads: Sequence[nn.Module]) -> nn.Module:
    """The head whose parameters are the sums of ``heads``' (the authors' code's running head)."""
    return _combine(heads, lambda stacked: stacked.sum(0))


#: How the heads of the accepted rounds combine into one classifier (see the module docstring).
HEAD_COMBINATIONS: Registry[Callable[[Sequence[nn.Module]], nn.Module]] = Registry("head_combination")
HEAD_COMBINATIONS.register("average")(average_heads)
HEAD_COMBINATIONS.register("sum")(sum_heads)
#: Chosen by measurement (see the module docstring); "average" stays selectable by name.
DEFAULT_HEAD_COMBINATION = "sum"


def frozen(head: nn.Module) -> nn.Module:
    """A detached copy of ``head`` that no optimiser will move (a stored historical head)."""
    head = copy.deepcopy(head)
    head.requires_grad_(False)
    return head


def batch_mean(values: torch.Tensor, members: torch.Tensor) -> torch.Tensor | None:
    """The mean of ``values`` over the examples flagged in ``members`` (None if there are none)."""
    count = members.sum()
    if count == 0:
        return None
    return (values * members).sum() / count


def set_means(values: torch.Tensor, masks: Sequence[torch.Tensor],
              index: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean of ``values`` over the batch members of each set, in one segmented reduction.

    ``masks``: S boolean masks over the training set; ``index``: the batch's positions in it
    (None: the batch is the whole set); ``values``: ``(n,)`` losses shared by all sets, or
    ``(S, n)`` with one row per set. The ``(S, n)`` membership matrix multiplies the losses in one
    product. Returns the ``(S,)`` means (0 for a set with no member in the batch) and whether
    each set has a member; equals :func:`batch_mean` set by set."""
    members = torch.stack(list(masks))
    if index is not None:
        members = members[:, index]
    members = members.to(values.dtype)
    counts = members.sum(-1)
    sums = members @ values if values.dim() == 1 else (members * values).sum(-1)
    return sums / counts.clamp(min=1), counts > 0


class FeATRounds:
    """Sets, stored heads and the stopping rule of FeAT / iFeAT over ``n`` training examples."""

    def __init__(self, n: int, variant: str, *, retain_weight: float = APPENDIX_F1["retain_weight"].value,
                 termination_threshold: float = DEFAULT_TERMINATION_THRESHOLD,
                 termination_rule: str = DEFAULT_TERMINATION, keep_full_set: bool = True,
                 head_combination: str = DEFAULT_HEAD_COMBINATION, device: torch.device | str = "cpu"):
        self.n = check_int("n", n, minimum=1)
        self.variant = check_choice("variant", variant, VARIANTS)
        self.retain_weight = check_positive("retain_weight", retain_weight, allow_zero=True)
        self.termination_threshold = check_positive("termination_threshold", termination_threshold)
        self.rule = TERMINATION_RULES.get(termination_rule)
        self.keep_full_set = check_bool("keep_full_set", keep_full_set)
        self.head_combination = head_combination
        self.combine = HEAD_COMBINATIONS.get(head_combination)
        self.everything = torch.ones(n, dtype=torch.bool, device=device)
        self.aug_sets: list[torch.Tensor] = [self.everything]
        self.retention: list[tuple[torch.Tensor, nn.Module]] = []
        self.heads: list[nn.Module] = []

    # ------------------------------------------------------------------ the round's objective
    @property
    def round(self) -> int:
        """The number (1-based) of the round being trained now."""
        return len(self.heads) + 1

    @property
    def retained_heads(self) -> list[nn.Module]:
        return [head for _, head in self.retention]

    def loss(self, per_sample: torch.Tensor, retained_per_sample: Sequence[torch.Tensor],
             index: torch.Tensor | None = None) -> torch.Tensor:
        """Eq. (7) on a batch.

        ``per_sample``: the new head's loss on each batch example; ``retained_per_sample[i]``:
        stored head i's loss on them (same order as :attr:`retained_heads`); ``index``: the
        batch examples' positions in the training set (None: the batch is the whole set).

        Every set's mean comes from one pass over the set memberships (:func:`set_means`, a
        ``(sets x n)`` membership matrix times the losses) rather than one masked mean per set,
        and no value is read back to the host, so the step's cost does not grow with the number
        of sets by a kernel launch and a device synchronisation each."""
        if len(retained_per_sample) != len(self.retention):
            raise ValueError(f"retained_per_sample needs one entry per retention set ({len(self.retention)}); "
                             f"got {len(retained_per_sample)}")
        means, present = set_means(per_sample, self.aug_sets, index)
        if index is None:  # the full batch meets every set (split() never adds an empty one)
            loss = means.max()
        else:  # a minibatch may miss some: they are left out
            loss = torch.where(present, means, torch.finfo(means.dtype).min).max()
            if self.aug_sets[0] is not self.everything:  # iFeAT without D^a_0 may meet none: the batch mean
                loss = torch.where(present.any(), loss, per_sample.mean())
        if self.retention:
            retained = torch.stack(list(retained_per_sample))
            means, _ = set_means(retained, [mask for mask, _ in self.retention], index)
            loss = loss + self.retain_weight * means.sum()  # a set with no member in the batch adds 0
        return loss

    # ------------------------------------------------------------------ after the round
    def retention_accuracies(self, retained_correct: Sequence[torch.Tensor]) -> list[float]:
        """Each stored head's accuracy on its retention set (``retained_correct[i]``: bool, head i
        right on each training example); an empty set counts as fully retained."""
        return [correct[mask].float().mean().item() if mask.any() else 1.0
                for (mask, _), correct in zip(self.retention, retained_correct)]

    def should_stop(self, train_acc: float, retention_acc: float) -> bool:
        """Appendix F.1: from round 2 on, stop (and discard the round) when training accuracy plus
        the rule's retention accuracy is below the threshold."""
        return self.rule.should_stop(self.round, train_acc, retention_acc, self.termination_threshold)

    def accept(self, head: nn.Module) -> nn.Module:
        """Store the round's head; returns the classifier that splits the training set (the new
        head for FeAT, the combination of all heads for iFeAT: their sum by default, :data:`HEAD_COMBINATIONS`)."""
        self.heads.append(frozen(head))
        return self.heads[-1] if self.variant == "feat" else frozen(self.combine(self.heads))

    def split(self, splitter: nn.Module, correct: torch.Tensor) -> dict[str, int]:
        """Add ``D^r`` (``correct``) and ``D^a`` (``~correct``) of the accepted round."""
        correct = correct.to(self.everything.device)
        wrong = ~correct
        if self.variant == "feat":
            if wrong.any():
                self.aug_sets = self.aug_sets + [wrong]
            self.retention = self.retention + [(correct, self.heads[-1])]
        else:
            keep = [self.everything] if self.keep_full_set or not wrong.any() else []
            self.aug_sets = keep + ([wrong] if wrong.any() else [])
            self.retention = [(correct, splitter)]
        return {"size_augmentation": int(wrong.sum()), "size_retention": int(correct.sum())}

    def end_round(self, head: nn.Module, correct: Callable[[nn.Module], torch.Tensor]) -> dict:
        """The end of a round (Algorithm 1, lines 8-15, with Appendix F.1's check): measure the
        training accuracy of ``head`` and the retention accuracy of the stored heads
        (``correct(w)``: bool, w right on each training example; recorded as Table 7's
        ``retention_acc``, divided by k-1, and as ``retention_acc_undivided``; the termination
        rule decides with its own, recorded in ``termination_score``), then either reject the round
        or accept ``head`` and split the training set by its (FeAT) or the stored head's (iFeAT: the
        heads so far, combined by ``head_combination``) correctness. Returns the round's history entries, ``accepted`` among them; on
        rejection the caller rolls the featurizer back."""
        with torch.no_grad():
            train_acc = correct(head).float().mean().item()
            accs = self.retention_accuracies([correct(w) for w in self.retained_heads])
            retention = self.rule.retention(accs, self.round)
            row = {"train_acc": train_acc,
                   "retention_acc": retention_paper(accs, self.round),
                   "retention_acc_undivided": retention_undivided(accs, self.round),
                   "termination_score": train_acc + retention, "termination_rule": self.rule.name,
                   "termination_threshold": self.termination_threshold,
                   "n_augmentation_sets": len(self.aug_sets), "n_retention_sets": len(self.retention),
                   "accepted": not self.should_stop(train_acc, retention)}
            if row["accepted"]:
                splitter = self.accept(head)
                row.update(self.split(splitter, correct(splitter)))
        return row

    def final_head(self) -> nn.Module:
        """The combination of the accepted rounds' heads (Algorithm 1, line 16: their average;
        ``head_combination="sum"``: their sum)."""
        if not self.heads:
            raise ValueError("no round was accepted yet, so there is no head to combine")
        return self.combine(self.heads)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """Everything needed to resume: masks and heads (as modules, saved with torch.save)."""
        return {"variant": self.variant, "head_combination": self.head_combination, "aug_sets": [m.cpu() for m in self.aug_sets],
                "retention": [(m.cpu(), h) for m, h in self.retention], "heads": list(self.heads)}

    def load_state_dict(self, state: dict) -> None:
        if state["variant"] != self.variant:
            raise ValueError(f"checkpoint is for {state['variant']!r}, not {self.variant!r}")
        saved = state.get("head_combination", "average")  # checkpoints written before the choice existed averaged
        if saved != self.head_combination:
            raise ValueError(f"checkpoint combines heads by {saved!r}, not {self.head_combination!r}")
        device = self.everything.device
        self.aug_sets = [m.to(device) for m in state["aug_sets"]]
        self.retention = [(m.to(device), h.to(device)) for m, h in state["retention"]]
        self.heads = [h.to(device) for h in state["heads"]]
