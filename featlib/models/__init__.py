"""Models: the two-layer CNN of Eq. (2) (ColoredMNIST MLP and WILDS backbones come later)."""
from .activations import ACTIVATIONS, make_activation
from .two_layer_cnn import TwoLayerCNN

__all__ = ["ACTIVATIONS", "TwoLayerCNN", "make_activation"]
