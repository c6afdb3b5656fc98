"""Data generators: the two-bit model of Definition 3.1 and ColoredMNIST (Sec. 6, Appendix F.1;
its colour-patch variant of the GradCAM figures, Fig. 4 / Fig. 5);
the six WILDS datasets of Table 3 through the real ``wilds`` loaders (Appendix F.2, protocol.md
section 5), with tiny fabricated stand-ins in the same on-disk layout for tests."""
from .colored_mnist import (
    COLORED_MNIST,
    PATCH_SIZE,
    SHORTCUTS,
    ColoredMNIST,
    ColoredMNISTSpec,
    EnvData,
    Shortcut,
    make_colored_mnist,
    patch_mask,
)
from .mnist import MNISTNotFoundError, load_mnist_train
from .two_bit import TwoBitData, TwoBitSpec, erm_population_logit_weights, sample_logit_weights
from .wilds_data import (
    WILDS_DATASETS,
    WildsData,
    WildsDatasetNotFoundError,
    WildsSpec,
    image_transform,
    load_wilds,
)
from .wilds_fabricate import FABRICATORS, fabricate_wilds

__all__ = [
    "TwoBitData", "TwoBitSpec", "erm_population_logit_weights", "sample_logit_weights",
    "COLORED_MNIST", "ColoredMNIST", "ColoredMNISTSpec", "EnvData", "make_colored_mnist",
    "PATCH_SIZE", "SHORTCUTS", "Shortcut", "patch_mask",
    "MNISTNotFoundError", "load_mnist_train",
    "WILDS_DATASETS", "WildsData", "WildsDatasetNotFoundError", "WildsSpec", "image_transform",
    "load_wilds", "FABRICATORS", "fabricate_wilds",
]
