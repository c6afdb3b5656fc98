"""Training loops: full-batch gradient descent for the two-bit chapters."""
from .full_batch import Phase, train_full_batch

__all__ = ["Phase", "train_full_batch"]
