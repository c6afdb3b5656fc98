"""OOD objectives, looked up by name in :data:`OBJECTIVES` (``make_objective("irmv1")``).

This chapter set registers ERM and IRMv1; V-REx, IRMX, IB-IRM, CLOvE, IGA, Fishr and GroupDRO
join the same registry with ColoredMNIST.
"""
from . import erm, irm  # noqa: F401  (register the objectives)
from .base import Objective, ObjectiveOutput, logistic_risk
from .irm import scale_gradients
from .registry import OBJECTIVES


def make_objective(name: str, **kwargs) -> Objective:
    """Instantiate the objective registered as ``name``."""
    return OBJECTIVES.get(name)(**kwargs)


__all__ = ["OBJECTIVES", "Objective", "ObjectiveOutput", "logistic_risk", "make_objective", "scale_gradients"]
