"""OOD objectives, looked up by name in :data:`OBJECTIVES` (``make_objective("irmv1")``).

Registered: ERM and IRMv1 (chapters 1-2), and the OOD objectives of the ColoredMNIST and
WILDS experiments: V-REx ("vrex"), IRMX ("irmx"), IB-IRM ("ib_irm"), CLOvE ("clove"), IGA
("iga"), Fishr ("fishr") and GroupDRO ("group_dro"). IB-IRM and Fishr need ``features=`` (the
classifier head's input), IGA needs ``params=``; GroupDRO keeps state (``reset()`` forgets it).

Each penalty is also available as a first-order expression where one is exact
(``objective(..., closed_form=True)``, :mod:`.closed_form`): no double backward.

An objective of one's own is a file that registers it:
:func:`featlib.experiments.objective_files.load_objective_file` (``--objective-file`` of
``featlib.cli.run_cmnist``) loads and checks it.
"""
import importlib
import pkgutil
import sys

# Registered in the paper's table order, which OBJECTIVES.names() keeps.
from . import erm, irm  # noqa: F401, I001  (register the objectives)
from . import vrex, irmx, ib_irm, clove, iga, fishr, group_dro  # noqa: F401
from .base import (
    Objective, ObjectiveOutput, check_penalty_weight, cross_entropy_risk, logistic_risk, per_sample_cross_entropy,
)
from .closed_form import SCALE_DERIVATIVES, scale_derivatives
from .irm import scale_gradients
from .registry import OBJECTIVES


#: Modules of this package that hold no objective.
_NOT_OBJECTIVES = {"base", "closed_form", "registry"}


def import_objective_modules() -> list[str]:
    """Import every module of this package not imported yet (after the paper's, above): a new
    built-in objective is one file in ``featlib/objectives/`` that registers itself; its memory is
    counted on first use (:func:`featlib.training.memory.step_peak_bytes`) and its label is its
    class's ``label`` (:func:`featlib.experiments.labels.label`). Returns the modules imported now."""
    imported = []
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        name = f"{__name__}.{module.name}"
        if module.name.startswith("_") or module.name in _NOT_OBJECTIVES or name in sys.modules:
            continue
        importlib.import_module(name)
        imported.append(module.name)
    return imported


import_objective_modules()


def make_objective(name: str, **kwargs) -> Objective:
    """Instantiate the objective registered as ``name``."""
    return OBJECTIVES.get(name)(**kwargs)


__all__ = ["OBJECTIVES", "Objective", "ObjectiveOutput", "cross_entropy_risk", "logistic_risk", "make_objective", "per_sample_cross_entropy", "scale_gradients"]
__all__ += ["SCALE_DERIVATIVES", "check_penalty_weight", "scale_derivatives"]
