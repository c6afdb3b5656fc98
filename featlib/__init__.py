"""featlib: the library behind the FeAT book.

An executable companion to "Understanding and Improving Feature Learning for
Out-of-Distribution Generalization" (Chen, Huang, Zhou, Bian, Han and Cheng; NeurIPS 2023).
"""
from .device import get_device

__version__ = "0.5.0"
__all__ = ["get_device", "__version__"]
