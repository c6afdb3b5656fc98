"""Models: the two-layer CNN of Eq. (1), the ColoredMNIST MLP and its stacked (many-run) form,
the small CNN of the GradCAM figures (Fig. 4 / Fig. 5) and the registry of ColoredMNIST models."""
from .activations import ACTIVATIONS, make_activation
from .cmnist_cnn import ColoredMNISTCNN
from .cmnist_models import CMNIST_MODELS, make_cmnist_model
from .mlp import ColoredMNISTMLP, fresh_head
from .stacked import StackedHeads, StackedMLP
from .two_layer_cnn import TwoLayerCNN

__all__ = ["ACTIVATIONS", "ColoredMNISTMLP", "StackedHeads", "StackedMLP", "TwoLayerCNN", "fresh_head", "make_activation"]
__all__ += ["CMNIST_MODELS", "ColoredMNISTCNN", "make_cmnist_model"]
from .wilds_backbones import BACKBONES, Backbone, WeightsUnavailable, WildsModel, linear_head, make_backbone

__all__ += ["BACKBONES", "Backbone", "WeightsUnavailable", "WildsModel", "linear_head", "make_backbone"]
