"""Data generators: the two-bit model of Definition 3.1 and ColoredMNIST (Sec. 6, Appendix F.1);
WILDS comes later."""
from .colored_mnist import COLORED_MNIST, ColoredMNIST, ColoredMNISTSpec, EnvData, make_colored_mnist
from .mnist import MNISTNotFoundError, load_mnist_train
from .two_bit import TwoBitData, TwoBitSpec, erm_population_logit_weights

__all__ = [
    "TwoBitData", "TwoBitSpec", "erm_population_logit_weights",
    "COLORED_MNIST", "ColoredMNIST", "ColoredMNISTSpec", "EnvData", "make_colored_mnist",
    "MNISTNotFoundError", "load_mnist_train",
]
