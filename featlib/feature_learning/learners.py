"""The one registry of feature learners: one :class:`Learner` per algorithm (ERM, Bonsai, FeAT,
iFeAT), each an ``algorithm(loop, **options)`` of :mod:`.erm`, :mod:`.bonsai` or :mod:`.feat`.

Calling a learner, ``FEATURE_LEARNERS.get(name)(data, seed, **options)``, runs it full batch on a
ColoredMNIST dataset (:class:`.full_batch_loop.FullBatchLoop`) with the option names of Table 6;
``FEATURE_LEARNERS.get(name).on(loop, **options)`` runs it on any loop (:class:`.base.Loop`), the
options in steps.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..hparams import APPENDIX_F1
from ..registry import Registry
from .base import Learned, Loop
from .full_batch_loop import FullBatchLoop


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
