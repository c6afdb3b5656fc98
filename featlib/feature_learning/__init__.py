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
from . import erm, feat, bonsai  # noqa: F401, I001  (register the learners, in this order)
from .base import Learned, LearnedFeatures, Loop
from .learners import FEATURE_LEARNERS, Learner
from .erm import erm_snapshots
from .dataset_loop import DatasetLoop, learn_features
from .feat_rounds import FeATRounds, average_heads

__all__ = ["FEATURE_LEARNERS", "DatasetLoop", "FeATRounds", "Learned", "LearnedFeatures", "Learner", "Loop",
           "average_heads", "erm_snapshots", "learn_features"]
