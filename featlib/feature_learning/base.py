"""What every feature learner shares: the result, the training loop it is written against, and
the one registry of learners (Sec. 5-6).

A feature learner turns training data into ``f = w o phi``: the featurizer ``phi`` is what the
OOD stage then freezes, the head ``w`` is its starting point. Each algorithm (ERM, Bonsai, FeAT,
iFeAT) is written once, as a function of a :class:`Loop`, in its own module (:mod:`.erm`,
:mod:`.bonsai`, :mod:`.feat`), and two loops drive them:

* :class:`.full_batch_loop.FullBatchLoop` -- ColoredMNIST (Sec. 6, Appendix F.1): one full-batch
  Adam step per epoch on ``loss + l2 * sum ||theta||^2``, one logit and the logistic loss, the
  OOD score the worst test environment's accuracy;
* :class:`.minibatch_loop.MinibatchLoop` -- WILDS (Appendix F.2): domain-balanced minibatches
  with the dataset's optimiser (Tables 10 and 12), cross-entropy over the classes, the official
  WILDS metric on the OOD validation and test splits, and a checkpoint that a killed run resumes.

The registry holds one :class:`Learner` per algorithm. Calling it, ``FEATURE_LEARNERS.get(name)(data,
seed, **options)``, runs it full batch on a ColoredMNIST dataset with the option names of Table 6
(``epochs``, ``epochs_per_round``, ``round_epochs``, ``synthesis_epochs``: with the full batch one
step is one epoch); ``FEATURE_LEARNERS.get(name).on(loop, **options)`` runs it on any loop with the
option names in steps (``steps``, ``steps_per_round``, ``round_steps``, ``synthesis_steps``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ..hparams import APPENDIX_F1
from ..registry import Registry
from ..training.ood_stage import accuracy as batched_accuracy
from ..training.ood_stage import per_run_squared_norm
from ..training.profiling import training_step
from ..validation import check_positive


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


#: The names by which a full-batch call gives a round's length in epochs (Table 6), and the
#: loop-neutral names in steps the algorithms take (one full-batch step per epoch).
EPOCHS_AS_STEPS = {"epochs": "steps", "epochs_per_round": "steps_per_round", "round_epochs": "round_steps",
                   "synthesis_epochs": "synthesis_steps"}


@dataclass(frozen=True)
class Learner:
    """One feature-learning algorithm: ``algorithm(loop, **options)`` -> :class:`Learned`."""

    name: str
    algorithm: Callable[..., Learned]

    def __call__(self, data, seed: int, *, model: str = "mlp", hidden_dim: int = APPENDIX_F1["hidden_dim"].value,
                 lr: float = APPENDIX_F1["lr"].value, l2: float = APPENDIX_F1["l2"].value, progress: bool = False,
                 **options) -> Learned:
        """Full batch on a ColoredMNIST dataset ``data`` (``model``: "mlp" or "cnn"), the options
        named as in Table 6 (see the module docstring)."""
        from .full_batch_loop import FullBatchLoop

        loop = FullBatchLoop(data, seed, model=model, hidden_dim=hidden_dim, lr=lr, l2=l2, progress=progress)
        return self.on(loop, **{EPOCHS_AS_STEPS.get(k, k): v for k, v in options.items()})

    def on(self, loop: Loop, **options) -> Learned:
        """On any :class:`Loop`, the options in steps."""
        return self.algorithm(loop, **options)


FEATURE_LEARNERS: Registry[Learner] = Registry("feature learner")


def register(name: str) -> Callable[[Callable[..., Learned]], Callable[..., Learned]]:
    """Register ``algorithm(loop, **options)`` as the learner ``name``."""
    def decorator(algorithm: Callable[..., Learned]) -> Callable[..., Learned]:
        FEATURE_LEARNERS.register(name)(Learner(name, algorithm))
        return algorithm

    return decorator


# ------------------------------------------------------------------ full-batch helpers
def per_sample_bce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, y, reduction="none")


def squared_norm(params: Sequence[torch.Tensor]) -> torch.Tensor:
    return per_run_squared_norm(params, ())


def fit(
    params: Sequence[torch.nn.Parameter],
    loss_fn: Callable[[], torch.Tensor],
    epochs: int,
    lr: float,
    l2: float,
    desc: str,
    progress: bool = False,
    on_epoch: Callable[[int], None] | None = None,
) -> None:
    """``epochs`` full-batch Adam steps on ``loss_fn() + l2 * sum ||theta||^2``; ``on_epoch(e)``
    is called after step ``e`` (1-based), e.g. to keep snapshots of a longer run. Each step runs
    inside :func:`featlib.training.profiling.training_step`, labelled ``desc``, for the cost benchmark.
    ``lr`` and ``l2`` are checked before the first step (a NaN L2 weight trained on silently)."""
    check_positive("lr", lr)
    check_positive("l2", l2, allow_zero=True)
    params = list(params)
    optimizer = torch.optim.Adam(params, lr=lr)
    device = params[0].device if params else torch.device("cpu")
    for epoch in tqdm(range(epochs), desc=desc, disable=not progress, leave=False):
        with training_step(desc, device):
            loss = loss_fn() + l2 * squared_norm(params)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if on_epoch is not None:
            on_epoch(epoch + 1)


@torch.no_grad()
def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return batched_accuracy(logits, y).item()


@torch.no_grad()
def worst_test_accuracy(model: Callable[[torch.Tensor], torch.Tensor], tests) -> float:
    """The paper's OOD accuracy: the worst accuracy over the test environments."""
    return min(accuracy(model(env.x), env.y) for env in tests)
