"""What every feature learner shares: the result and the training loop it is written against
(Sec. 5-6).

A feature learner turns training data into ``f = w o phi``: the featurizer ``phi`` is what the
OOD stage then freezes, the head ``w`` is its starting point. Each algorithm (ERM, Bonsai, FeAT,
iFeAT) is written once, as a function of a :class:`Loop`, in its own module (:mod:`.erm`,
:mod:`.bonsai`, :mod:`.feat`), and two loops drive them:

* :class:`.full_batch_loop.FullBatchLoop` -- ColoredMNIST (Sec. 6, Appendix F.1): one full-batch
  Adam step per epoch on ``loss + l2 * sum ||theta||^2``, one logit and the logistic loss, the
  OOD score the worst test environment's accuracy;
* :class:`.minibatch_loop.MinibatchLoop` -- WILDS (Appendix F.2): domain-balanced minibatches
  with the dataset's optimiser (Tables 11 and 12), cross-entropy over the classes, the official
  WILDS metric on the OOD validation and test splits, and a checkpoint that a killed run resumes.

The registry (:mod:`.learners`) holds one :class:`~.learners.Learner` per algorithm. Calling it, ``FEATURE_LEARNERS.get(name)(data,
seed, **options)``, runs it full batch on a ColoredMNIST dataset with the option names of Table 6
(``epochs``, ``epochs_per_round``, ``round_epochs``, ``synthesis_epochs``: with the full batch one
step is one epoch); ``FEATURE_LEARNERS.get(name).on(loop, **options)`` runs it on any loop with the
option names in steps (``steps``, ``steps_per_round``, ``round_steps``, ``synthesis_steps``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pandas as pd
import torch
from torch import nn


@dataclass
class Learned:
    """What a feature learner returns: the network ``f = w o phi``, one history row per round,
    and the optimiser steps spent in all rounds (full batch: epochs)."""

    learner: str
    model: nn.Module
    rounds: pd.DataFrame
    steps: int

    @property
    def epochs(self) -> int:
        """The steps of a full-batch run, which are its epochs (Table 6's unit)."""
        return self.steps


class FeatureLearningDiverged(ValueError):
    """A feature learner's loss or weights became NaN or infinite: its rounds are not accepted and
    no features are kept or handed on (one line naming the stage, the step and the remedy)."""

    def __init__(self, stage: str, step: int | None, what: str = "its loss is"):
        self.stage, self.step = stage, step
        at = f" at step {step}" if step is not None else ""
        super().__init__(f"feature learning diverged in {stage}{at} ({what} not finite): no features from it are "
                         "kept or used; lower the learning rate or the penalty, or check the data for NaN, then run again")


def check_trained(stage: str, params, first_bad: int | None = None) -> None:
    """:class:`FeatureLearningDiverged` unless every parameter in ``params`` is finite and no step's
    loss was not (``first_bad``: the first such step, None where none was): run after a stage, so
    that a diverged stage never becomes a round, a head or cached features."""
    if first_bad is not None:
        raise FeatureLearningDiverged(stage, first_bad)
    if not all(bool(torch.isfinite(p).all()) for p in params):
        raise FeatureLearningDiverged(stage, None, "weights are")


#: The name this result had when the full-batch learners had their own implementation.
LearnedFeatures = Learned


class Loop(Protocol):
    """How a learner trains and measures, whatever the data: what :mod:`.erm`, :mod:`.bonsai` and
    :mod:`.feat` call. Logits have the class dimension last (one logit for ColoredMNIST)."""

    seed: int
    #: The unit of a round's length in the history rows: "epochs" (full batch) or "steps".
    length_unit: str

    @property
    def labels(self) -> torch.Tensor:
        """The training labels, in the order of the training set."""

    def new_network(self, seed: int) -> nn.Module:
        """A freshly initialised network with ``featurizer`` and ``classifier``, drawn from ``seed``."""

    def new_head(self, seed: int, like: nn.Linear, copies: int = 1) -> nn.Module:
        """A freshly initialised linear head shaped as ``like`` (``copies`` of it stacked in one)."""

    def per_sample_loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss of each example (logits ``(*B, C)``, labels ``(*B,)``)."""

    def train(self, stage: str, networks: dict[str, nn.Module], loss_fn: Callable, steps: int, *,
              save: Callable[[], dict] | None = None, resample=None) -> None:
        """``steps`` optimiser steps on ``loss_fn(x, y, index)`` over the trainable parameters of
        ``networks`` (``index``: the batch's positions in the training set, None for the whole
        set); ``resample``: positions drawn with replacement to train on instead of the training
        set; ``save()``: what a checkpoint taken inside the stage must hold besides the networks."""

    def train_features(self, featurizer: nn.Module) -> torch.Tensor:
        """``phi(x)`` of every training example, in order, without gradients."""

    def predict(self, head: nn.Module, features: torch.Tensor) -> torch.Tensor:
        """The labels ``head`` predicts from ``features``, comparable with :attr:`labels`."""

    def score(self, featurizer: nn.Module, heads: dict[str, nn.Module]) -> dict:
        """The OOD metrics of ``head o featurizer`` for each ``heads`` entry, suffixed by its key."""

    def resume(self, learner: str) -> dict:
        """The saved state of an unfinished run of ``learner`` ({} when there is none)."""

    def save(self, state: dict) -> None:
        """Keep ``state`` so that the run can resume from it (a no-op where runs do not resume)."""

    def finished(self, learner: str, state: dict) -> Learned | None:
        """The result of a run that had finished before, from its saved state (None if unfinished)."""

    def finish(self, learner: str, model: nn.Module, rows: list[dict], steps: int) -> Learned:
        """The result of a run that just finished (saved, where runs resume)."""
