"""Feature learners (Sec. 5-6): ERM, Bonsai, FeAT (Algorithm 1) and iFeAT (Algorithm 2).

``FEATURE_LEARNERS.get(name)(data, seed, **options)`` returns :class:`LearnedFeatures`.
"""
from . import erm, feat, bonsai  # noqa: F401, I001  (register the learners, in this order)
from .base import FEATURE_LEARNERS, LearnedFeatures
from .feat_rounds import FeATRounds, average_heads

__all__ = ["FEATURE_LEARNERS", "FeATRounds", "LearnedFeatures", "average_heads"]
