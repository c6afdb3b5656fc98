"""OOD objectives, looked up by name in :data:`OBJECTIVES` (``make_objective("irmv1")``).

Registered: ERM and IRMv1 (chapters 1-2), and the OOD objectives of the ColoredMNIST and
WILDS experiments: V-REx ("vrex"), IRMX ("irmx"), IB-IRM ("ib_irm"), CLOvE ("clove"), IGA
("iga"), Fishr ("fishr") and GroupDRO ("group_dro"). IB-IRM and Fishr need ``features=`` (the
classifier head's input), IGA needs ``params=``; GroupDRO keeps state (``reset()`` forgets it).
"""
# Registered in the paper's table order, which OBJECTIVES.names() keeps.
from . import erm, irm  # noqa: F401, I001  (register the objectives)
from . import vrex, irmx, ib_irm, clove, iga, fishr, group_dro  # noqa: F401, I001
from .base import Objective, ObjectiveOutput, cross_entropy_risk, logistic_risk, per_sample_cross_entropy
from .irm import scale_gradients
from .registry import OBJECTIVES


def make_objective(name: str, **kwargs) -> Objective:
    """Instantiate the objective registered as ``name``."""
    return OBJECTIVES.get(name)(**kwargs)


__all__ = ["OBJECTIVES", "Objective", "ObjectiveOutput", "cross_entropy_risk", "logistic_risk", "per_sample_cross_entropy", "make_objective", "scale_gradients"]
