"""Feature learners (Sec. 5-6): ERM, Bonsai, FeAT (Algorithm 1) and iFeAT (Algorithm 2).

``FEATURE_LEARNERS.get(name)(data, seed, **options)`` returns :class:`LearnedFeatures`.
"""
from . import bonsai, erm, feat  # noqa: F401  (register the learners)
from .base import FEATURE_LEARNERS, LearnedFeatures
from .feat import average_heads

__all__ = ["FEATURE_LEARNERS", "LearnedFeatures", "average_heads"]
