"""Evaluation of learned features: Deep Feature Reweighting (DFR, DFR-s) for the WILDS table (Sec. 6)."""
from .dfr import (
    DFR_CS,
    DFR_RETRAINS,
    DFRResult,
    dfr_fit_predict,
    group_accuracies,
    train_test_split_for_dfr,
    worst_group_accuracy,
)

__all__ = [
    "DFR_CS",
    "DFR_RETRAINS",
    "DFRResult",
    "dfr_fit_predict",
    "group_accuracies",
    "train_test_split_for_dfr",
    "worst_group_accuracy",
]
