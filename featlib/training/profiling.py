"""The hook through which the cost benchmark sees every training step (Appendix F.3; chapter 07).

Every optimiser step of every feature learner runs inside :func:`training_step`, on ColoredMNIST
through :func:`featlib.feature_learning.full_batch_loop.fit`, on WILDS through
:meth:`featlib.feature_learning.minibatch_loop.MinibatchLoop.train`. With no recorder
installed (the normal case) the hook does nothing. :class:`featlib.cost.StepRecorder`
installs itself with :func:`recording` and then times (and measures the memory of) the steps
of the real learners, labelled by their stage names ("feat round 2", "bonsai synthesis", ...),
so the benchmark measures the code the book runs, not a re-implementation of it.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

import torch


class StepObserver(Protocol):
    def step(self, stage: str, device: torch.device) -> contextlib.AbstractContextManager: ...


_OBSERVERS: list[StepObserver] = []


@contextlib.contextmanager
def training_step(stage: str, device: torch.device | str) -> Iterator[None]:
    """Wrap one optimiser step (forward, backward, update) of the training stage ``stage``."""
    if not _OBSERVERS:
        yield
        return
    with _OBSERVERS[-1].step(stage, torch.device(device)):
        yield


@contextlib.contextmanager
def recording(observer: StepObserver) -> Iterator[StepObserver]:
    """Send every training step run inside the block to ``observer``."""
    _OBSERVERS.append(observer)
    try:
        yield observer
    finally:
        _OBSERVERS.remove(observer)
