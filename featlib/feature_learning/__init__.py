"""Feature learners (Sec. 5-6): ERM, Bonsai, FeAT (Algorithm 1) and iFeAT (Algorithm 2).

``FEATURE_LEARNERS.get(name)(data, seed, **options)`` returns :class:`LearnedFeatures`; the
``model`` option picks the MLP of Table 2 or the CNN of the GradCAM figures. :func:`erm_snapshots`
keeps one ERM run at several epochs.
"""
from . import erm, feat, bonsai  # noqa: F401, I001  (register the learners, in this order)
from .base import FEATURE_LEARNERS, LearnedFeatures
from .erm import erm_snapshots
from .feat_rounds import FeATRounds, average_heads

__all__ = ["FEATURE_LEARNERS", "FeATRounds", "LearnedFeatures", "average_heads", "erm_snapshots"]
