"""Models: the two-layer CNN of Eq. (2), the ColoredMNIST MLP and its stacked (many-run) form."""
from .activations import ACTIVATIONS, make_activation
from .mlp import ColoredMNISTMLP, fresh_head
from .stacked import StackedHeads, StackedMLP
from .two_layer_cnn import TwoLayerCNN

__all__ = ["ACTIVATIONS", "ColoredMNISTMLP", "StackedHeads", "StackedMLP", "TwoLayerCNN", "fresh_head", "make_activation"]
from .wilds_backbones import BACKBONES, Backbone, WeightsUnavailable, WildsModel, linear_head, make_backbone

__all__ += ["BACKBONES", "Backbone", "WeightsUnavailable", "WildsModel", "linear_head", "make_backbone"]
