"""Data generators: the two-bit model of Definition 3.1 (ColoredMNIST and WILDS come later)."""
from .two_bit import TwoBitData, TwoBitSpec, erm_population_logit_weights

__all__ = ["TwoBitData", "TwoBitSpec", "erm_population_logit_weights"]
