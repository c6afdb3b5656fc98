"""Training loops: full-batch GD for the two-bit chapters, the stacked OOD stage for ColoredMNIST."""
from .full_batch import Phase, train_full_batch
from .ood_stage import LabelledInputs, OODStageConfig, StackHistory, accuracy, evaluate_stack, train_stack

__all__ = [
    "LabelledInputs", "OODStageConfig", "Phase", "StackHistory", "accuracy", "evaluate_stack",
    "train_full_batch", "train_stack",
]
