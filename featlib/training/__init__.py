"""Training loops: full-batch GD for the two-bit chapters, the stacked OOD stage for ColoredMNIST
(a plain reference path and its fast paths, :data:`OOD_PATHS`)."""
from .fast_stage import COMPILE_MODES, FastOptions, train_stack_fast
from .full_batch import Phase, train_full_batch
from .ood_stage import (
    OOD_PATHS, Environments, LabelledInputs, OODStageConfig, StackHistory, StackRuns, accuracy, evaluate_stack,
    train_stack, train_stack_plain,
)
from .precision import DEFAULT_PRECISION, PRECISIONS

__all__ = [
    "COMPILE_MODES", "DEFAULT_PRECISION", "OOD_PATHS", "PRECISIONS", "Environments", "FastOptions", "LabelledInputs",
    "OODStageConfig", "Phase", "StackHistory", "StackRuns", "accuracy", "evaluate_stack", "train_full_batch",
    "train_stack", "train_stack_fast", "train_stack_plain",
]
