"""Feature learners (Sec. 5-6): ERM, Bonsai, FeAT (Algorithm 1) and iFeAT (Algorithm 2), each
written once against a training loop (:mod:`.base`), registered once (:mod:`.learners`), driven full batch on ColoredMNIST
(:class:`.full_batch_loop.FullBatchLoop`) or by minibatches on WILDS
(:class:`.minibatch_loop.MinibatchLoop`).

``FEATURE_LEARNERS.get(name)(data, seed, **options)`` runs one full batch and returns
:class:`Learned`; ``FEATURE_LEARNERS.get(name).on(loop, **options)`` runs it on any loop. The
``model`` option of the full-batch call picks the MLP of Table 2 or the CNN of the GradCAM
figures. :func:`erm_snapshots` keeps one ERM run at several epochs. :func:`learn_features` runs
any learner on a dataset of one's own (items ``(x, y, env)``; :mod:`.dataset_loop`).
"""
import importlib
import pkgutil
import sys

from . import erm, feat, bonsai  # noqa: F401, I001  (register the learners, in this order)
from .base import Learned, LearnedFeatures, Loop
from .learners import FEATURE_LEARNERS, Learner
from .erm import erm_snapshots
from .dataset_loop import DatasetLoop, learn_features
from .feat_rounds import FeATRounds, average_heads

#: The package's modules that hold no learner (the loops and what the learners share).
_NOT_LEARNERS = {"base", "learners", "full_batch_loop", "minibatch_loop", "dataset_loop", "feat_rounds", "termination"}


def import_learner_modules() -> list[str]:
    """Import every module of this package not imported yet (after the paper's learners, above): a
    new built-in learner is one file in ``featlib/feature_learning/`` that registers itself, as a
    learner of one's own is one file anywhere that is imported before it runs. Returns the
    modules imported now."""
    imported = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        name = f"{__name__}.{module.name}"
        if module.name.startswith("_") or module.name in _NOT_LEARNERS or name in sys.modules:
            continue
        importlib.import_module(name)
        imported.append(module.name)
    return imported


import_learner_modules()

__all__ = ["FEATURE_LEARNERS", "DatasetLoop", "FeATRounds", "Learned", "LearnedFeatures", "Learner", "Loop",
           "average_heads", "erm_snapshots", "import_learner_modules", "learn_features"]
