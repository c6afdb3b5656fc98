"""What the feature learners share: the result type, the registry and the full-batch loop.

A feature learner turns training data into ``f = w o phi`` (a :class:`ColoredMNISTMLP`): the
featurizer ``phi`` is what the OOD stage then freezes, the head ``w`` is its starting point.
All of them train full batch with Adam and an L2 term ``l2 * sum ||theta||^2`` (Appendix F.1),
one step per epoch.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..models.mlp import ColoredMNISTMLP
from ..training.profiling import training_step
from ..registry import Registry
from ..training.ood_stage import accuracy as batched_accuracy
from ..training.ood_stage import per_run_squared_norm
from ..validation import check_positive

FEATURE_LEARNERS: Registry[Callable[..., "LearnedFeatures"]] = Registry("feature learner")


@dataclass
class LearnedFeatures:
    """The model a feature learner returns, with its per-round history (one row per round)."""

    method: str
    model: ColoredMNISTMLP
    rounds: pd.DataFrame
    epochs: int  # full-batch epochs spent, all rounds together


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
