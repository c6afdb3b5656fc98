"""ColoredMNIST, the real-data benchmark of paper Sec. 6 (Table 2) and Appendix F.1.

The construction is the one of Arjovsky et al. (2019, IRM) as used by the FeAT reference code:

* **Pools.** MNIST training images 0-49,999 form the training pool, images 50,000-59,999 the
  held-out pool of the test environments (:func:`featlib.data.mnist.load_mnist_train`).
  Images are subsampled to 14x14 with ``[:, ::2, ::2]`` and scaled by 1/255.
* **Label.** ``y = 1`` if the digit is < 5 else ``0``, then flipped with probability ``eta``
  (label noise), so the digit shape predicts ``y`` with accuracy ``1 - eta`` in every
  environment (the invariant feature).
* **Colour.** ``colour = y XOR Bernoulli(e)``, with ``e`` the colour-flip probability of the
  environment, so colour predicts ``y`` with accuracy ``1 - e`` (the spurious feature).
* **Image.** The spec's ``shortcut`` names how the colour is drawn (:data:`SHORTCUTS`):

  - ``"channel"`` (Table 2's datasets): two channels (2, 14, 14); channel ``colour`` holds the
    digit, the other is zero. Models see the 392 features ``x.reshape(n, 2 * 14 * 14)``.
  - ``"patch"`` (the GradCAM figures, Fig. 4 / Fig. 6: "the shortcuts are now concentrated to a
    colored patch at the up left"): the digit in grey at full resolution (3, 28, 28), the same
    value in the three channels, with the upper-left :data:`PATCH_SIZE` x :data:`PATCH_SIZE`
    square painted pure red (colour 0) or pure green (colour 1); 2,352 features.

  ``x`` is always the image flattened channel-major, float32; ``EnvData.image_shape`` gives its
  shape. The random draws do not depend on the shortcut: for one seed, ``"cmnist025-patch"``
  has the labels, digits, colours and images of ``"cmnist025"``, only drawn differently.
* **Environments.** One seeded ``numpy.random.default_rng(seed)`` shuffles the training pool;
  the first ``n_train`` shuffled images are dealt round-robin to the ``E`` training
  environments (env ``i`` takes positions ``i, i + E, i + 2E, ...``: 25,000 + 25,000 for the
  two environments at full size). The test environments all use the first ``n_test``
  held-out images (50,000 + j), each with its own label-noise and colour draws.

The two datasets of Appendix F.1 and their patch variants are registered in
:data:`COLORED_MNIST`:

* ``"cmnist025"``: ``eta = 0.25``, training ``e`` in (0.1, 0.2) (the original IRM setting),
* ``"cmnist01"``: ``eta = 0.1``, training ``e`` in (0.2, 0.25) (the invariant feature is now
  more predictive than colour in training),
* ``"cmnist025-patch"`` and ``"cmnist01-patch"``: the same with ``shortcut="patch"`` (the
  "ColoredMNIST-025" of the GradCAM figures, read by a small CNN; not part of Table 2),

all tested on ``e`` in (0.9, 0.1, 0.5): 0.9 reverses the training correlation (the OOD test
accuracy), 0.1 keeps it, and 0.5 makes colour uninformative.

**Validation environments** (``val``; not in the paper's protocol). For training-domain model
selection (DomainBed's rule: each configuration scored on held-out images coloured as the
training environments, never on the test environments), the first ``n_val`` images of MNIST's
own test set (:func:`featlib.data.mnist.load_mnist_test`, 10,000 images the protocol never uses)
are dealt round-robin to one validation environment per training environment, with that
environment's label noise and colour-flip probability. They are drawn after the test
environments from the same generator, so the training and test environments of a seed are those
drawn without them.

``oracle=True`` gives the data of the "Oracle" row of Table 2: the same model trained where
colour carries no information, i.e. training environments with colour-flip probability 0.5
(what the reference code's ``coloredmnist025gray`` / ``coloredmnist01gray`` datasets do);
the test environments are unchanged.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from ..registry import Registry
from ..validation import check_bool, check_choice, check_int, check_probability, check_sequence
from .mnist import N_MNIST_TEST, SOURCES, _check_root, load_mnist_test, load_mnist_train

#: MNIST training-set indices [0, TRAIN_POOL) are the training pool, the rest the held-out pool.
TRAIN_POOL = 50000
HELD_OUT_POOL = 10000
#: The image of the "channel" shortcut (Table 2's datasets).
CHANNELS, SIDE = 2, 14
N_FEATURES = CHANNELS * SIDE * SIDE  # 392
#: Side of the coloured square of the "patch" shortcut, in the upper-left corner.
PATCH_SIZE = 5


@dataclass(frozen=True)
class Shortcut:
    """How the colour is put into the image: ``render(images, colour)`` maps the MNIST digits
    (uint8, (n, 28, 28)) and the colours (int, (n,), in {0, 1}) to float32 images of shape
    ``(n, *image_shape)``."""

    image_shape: tuple[int, int, int]
    render: Callable[[np.ndarray, np.ndarray], np.ndarray]

    @property
    def n_features(self) -> int:
        return math.prod(self.image_shape)


def render_channel(images: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Table 2's image (IRM's ColoredMNIST): the digit subsampled to 14x14, scaled by 1/255, in
    channel ``colour`` of two; the other channel is zero."""
    n = len(images)
    x = np.zeros((n, CHANNELS, SIDE, SIDE), dtype=np.float32)
    x[np.arange(n), np.asarray(colour, dtype=np.int64)] = images[:, ::2, ::2].astype(np.float32) / 255
    return x


def render_patch(images: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """The GradCAM figures' image (Fig. 4 / Fig. 6): the 28x28 digit in grey (pixel / 255 in
    each of three channels), the upper-left ``PATCH_SIZE`` square pure red (1, 0, 0) for colour
    0 and pure green (0, 1, 0) for colour 1."""
    n = len(images)
    x = np.repeat((images.astype(np.float32) / 255)[:, None], 3, axis=1)
    x[:, :, :PATCH_SIZE, :PATCH_SIZE] = 0
    x[np.arange(n), np.asarray(colour, dtype=np.int64), :PATCH_SIZE, :PATCH_SIZE] = 1  # red: channel 0, green: 1
    return x


#: The ways of drawing the colour into the image, by name (a spec's ``shortcut``).
SHORTCUTS: Registry[Shortcut] = Registry("shortcut")
SHORTCUTS.register("channel")(Shortcut((CHANNELS, SIDE, SIDE), render_channel))
SHORTCUTS.register("patch")(Shortcut((3, 28, 28), render_patch))


def patch_mask(image_shape: tuple[int, int, int] = (3, 28, 28)) -> torch.Tensor:
    """(S, S) bool, True on the pixels of the coloured patch of the "patch" shortcut (rows and
    columns ``0 .. PATCH_SIZE - 1``) for images of shape ``(C, S, S)``, e.g. to measure how much
    of a saliency map falls on the shortcut."""
    shape = check_sequence("image_shape", image_shape, min_length=3)
    if len(shape) != 3:
        raise ValueError(f"image_shape must be a list of 3 entries (C, S, S); got {image_shape!r}")
    side = check_int("image_shape[2]", shape[2], minimum=PATCH_SIZE)
    mask = torch.zeros(side, side, dtype=torch.bool)
    mask[:PATCH_SIZE, :PATCH_SIZE] = True
    return mask


@dataclass(eq=False)  # tensors: compare fields with torch.equal, not ==
class EnvData:
    """One ColoredMNIST environment of ``n`` examples.

    ``x``: (n, C * S * S) float32, the ``image_shape`` = (C, S, S) image flattened channel-major
    ((2, 14, 14), 392 features, for the "channel" shortcut); ``y``: (n,) float32 noisy label in
    {0, 1}; ``digit``: (n,) int64 MNIST digit; ``colour``: (n,) int64 in {0, 1} (the channel that
    holds the digit, or red / green patch); ``index``: (n,) int64 MNIST training-set index of
    each image (test-set index in a validation environment); ``flip``: the environment's colour-flip probability ``e``.
    """

    x: torch.Tensor
    y: torch.Tensor
    digit: torch.Tensor
    colour: torch.Tensor
    index: torch.Tensor
    flip: float
    image_shape: tuple[int, int, int] = (CHANNELS, SIDE, SIDE)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def __repr__(self) -> str:
        return f"EnvData(n={len(self)}, flip={self.flip}, device={self.x.device})"

    def to(self, device: torch.device | str) -> "EnvData":
        return EnvData(
            self.x.to(device), self.y.to(device), self.digit.to(device),
            self.colour.to(device), self.index.to(device), self.flip, self.image_shape,
        )

    def images(self, idx: Any = None) -> torch.Tensor:
        """(k, C, S, S) view of the examples ``idx`` (all when None), for plotting."""
        view = self.x.view(-1, *self.image_shape)
        return view if idx is None else view[idx]


@dataclass(frozen=True)
class ColoredMNISTSpec:
    """Label noise ``eta``, one colour-flip probability ``e`` per training environment, the
    colour-flip probabilities of the test environments (Appendix F.1), and the ``shortcut``
    that draws the colour into the image (a name in :data:`SHORTCUTS`), and the ``title`` readers see."""

    label_noise: float
    train_flips: tuple[float, ...]
    test_flips: tuple[float, ...] = (0.9, 0.1, 0.5)
    shortcut: str = "channel"
    #: What tables and figures call it (:data:`featlib.experiments.labels.DATASET_LABELS`); not part
    #: of what it draws, so specs that draw the same images compare equal whatever their titles.
    title: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        check_probability("label_noise", self.label_noise)
        SHORTCUTS.get(self.shortcut)
        for name in ("train_flips", "test_flips"):
            flips = check_sequence(name, getattr(self, name), min_length=1)
            for i, e in enumerate(flips):
                check_probability(f"{name}[{i}]", e)
            object.__setattr__(self, name, tuple(float(e) for e in flips))
        object.__setattr__(self, "label_noise", float(self.label_noise))

    @property
    def num_train_envs(self) -> int:
        return len(self.train_flips)

    def as_oracle(self) -> "ColoredMNISTSpec":
        """The Oracle row of Table 2: colour uninformative (e = 0.5) in every training env."""
        return replace(self, train_flips=(0.5,) * self.num_train_envs)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, S, S) of the images the ``shortcut`` draws."""
        return SHORTCUTS.get(self.shortcut).image_shape


#: The two ColoredMNIST datasets of Appendix F.1, then their patch variants (Fig. 4 / Fig. 6), by name.
#: A dataset of one's own is one registration here (in a file of one's own): with the "channel"
#: shortcut it runs through Table 2's protocol (:func:`featlib.experiments.colored_mnist.protocol_datasets`),
#: its learners on their registered schedules unless :data:`featlib.hparams.TABLE6` lists it.
COLORED_MNIST: Registry[ColoredMNISTSpec] = Registry("dataset")
COLORED_MNIST.register("cmnist025")(ColoredMNISTSpec(label_noise=0.25, train_flips=(0.1, 0.2), title="ColoredMNIST-025"))
COLORED_MNIST.register("cmnist01")(ColoredMNISTSpec(label_noise=0.1, train_flips=(0.2, 0.25), title="ColoredMNIST-01"))
COLORED_MNIST.register("cmnist025-patch")(ColoredMNISTSpec(label_noise=0.25, train_flips=(0.1, 0.2), shortcut="patch",
                                                           title="ColoredMNIST-025 (colour patch)"))
COLORED_MNIST.register("cmnist01-patch")(ColoredMNISTSpec(label_noise=0.1, train_flips=(0.2, 0.25), shortcut="patch",
                                                          title="ColoredMNIST-01 (colour patch)"))


@dataclass(eq=False)
class ColoredMNIST:
    """A drawn ColoredMNIST dataset: ``train`` and ``test`` environments (lists of
    :class:`EnvData`), and the arguments that drew it. ``spec`` is the spec actually used
    (with ``oracle=True``, the registered one with all training flips 0.5).

    The ``train_*`` properties concatenate the training environments, env 0 first;
    ``env_slices[i]`` selects env ``i`` from the concatenation. ``val`` holds one validation
    environment per training environment (coloured as it, from MNIST's test set; empty when
    drawn with ``n_val=0``).
    """

    name: str
    seed: int
    oracle: bool
    spec: ColoredMNISTSpec
    train: list[EnvData]
    test: list[EnvData]
    val: list[EnvData] = field(default_factory=list)

    def __repr__(self) -> str:
        return (
            f"ColoredMNIST(name={self.name!r}, seed={self.seed}, oracle={self.oracle}, "
            f"train={[len(e) for e in self.train]}, test={[len(e) for e in self.test]}, "
            f"val={[len(e) for e in self.val]})"
        )

    @functools.cached_property
    def train_x(self) -> torch.Tensor:
        return torch.cat([e.x for e in self.train])

    @functools.cached_property
    def train_y(self) -> torch.Tensor:
        return torch.cat([e.y for e in self.train])

    @functools.cached_property
    def train_env(self) -> torch.Tensor:
        """(n_train,) int64 training-environment index of each row of ``train_x``."""
        return torch.cat([
            torch.full((len(e),), i, dtype=torch.int64, device=e.y.device) for i, e in enumerate(self.train)
        ])

    @property
    def env_slices(self) -> list[slice]:
        bounds = np.cumsum([0] + [len(e) for e in self.train]).tolist()
        return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    @property
    def n_train(self) -> int:
        return sum(len(e) for e in self.train)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(C, S, S) of the images; ``x`` rows are these flattened channel-major."""
        return self.spec.image_shape

    @property
    def n_features(self) -> int:
        """Columns of ``x``: ``C * S * S`` (392 for the "channel" datasets, 2,352 for "patch")."""
        return math.prod(self.image_shape)

    def to(self, device: torch.device | str) -> "ColoredMNIST":
        return ColoredMNIST(
            self.name, self.seed, self.oracle, self.spec,
            [e.to(device) for e in self.train], [e.to(device) for e in self.test],
            [e.to(device) for e in self.val],
        )

    def images(self, env: int, idx: Any = None, split: str = "train") -> torch.Tensor:
        """(k, C, S, S) view of examples ``idx`` of environment ``env`` of ``split``."""
        envs = {"train": self.train, "test": self.test, "val": self.val}[check_choice("split", split, ("train", "test", "val"))]
        return envs[check_int("env", env, minimum=0, maximum=len(envs) - 1)].images(idx)


def _bernoulli(rng: np.random.Generator, p: float, n: int) -> np.ndarray:
    return rng.random(n) < p


def _make_env(
    rng: np.random.Generator, images: np.ndarray, digits: np.ndarray, index: np.ndarray,
    label_noise: float, flip: float, shortcut: Shortcut,
) -> EnvData:
    n = len(index)
    digit = digits[index].astype(np.int64)
    clean = digit < 5
    label = clean ^ _bernoulli(rng, label_noise, n)
    colour = (label ^ _bernoulli(rng, flip, n)).astype(np.int64)
    x = shortcut.render(images[index], colour)  # draws nothing from rng: same data for every shortcut
    return EnvData(
        x=torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32).reshape(n, shortcut.n_features)),
        y=torch.from_numpy(label.astype(np.float32)),
        digit=torch.from_numpy(digit),
        colour=torch.from_numpy(colour),
        index=torch.from_numpy(index.astype(np.int64)),
        flip=float(flip),
        image_shape=shortcut.image_shape,
    )


def make_colored_mnist(
    name: str,
    seed: int,
    *,
    oracle: bool = False,
    n_train: int = TRAIN_POOL,
    n_test: int = HELD_OUT_POOL,
    source: str = "auto",
    root: Any = None,
    download: bool = False,
    n_val: int = 0,
) -> ColoredMNIST:
    """Draw the ColoredMNIST dataset ``name`` (a name in :data:`COLORED_MNIST`) with ``seed``.

    A pure function of its arguments: one ``np.random.default_rng(seed)`` shuffles the training
    pool, then draws label noise and colour for each training environment in order, then for
    each test environment. ``n_train`` (at most 50,000) keeps the first ``n_train`` shuffled
    pool images, dealt round-robin to the training environments (smaller values give the fast
    CI profile); ``n_test`` (at most 10,000) held-out images are used by every test
    environment. ``oracle=True`` sets every training colour-flip probability to 0.5 (Table 2's
    Oracle). ``source``, ``root`` and ``download`` go to
    :func:`featlib.data.mnist.load_mnist_train`. The spec's ``shortcut`` only renders the images:
    the draws are the same for every shortcut. ``n_val`` (at most 10,000; 0, the default, for none)
    images of MNIST's test set make the validation environments (drawn last, see the module
    docstring; the ColoredMNIST protocol asks for its ``n_val``).
    """
    base = COLORED_MNIST.get(name)
    seed = check_int("seed", seed, minimum=0)
    oracle = check_bool("oracle", oracle)
    n_train = check_int("n_train", n_train, minimum=max(2, base.num_train_envs), maximum=TRAIN_POOL)
    n_test = check_int("n_test", n_test, minimum=1, maximum=HELD_OUT_POOL)
    n_val = check_int("n_val", n_val, minimum=0, maximum=N_MNIST_TEST)
    if 0 < n_val < base.num_train_envs:
        raise ValueError(f"n_val must be 0 or at least {base.num_train_envs} (one image per validation environment); "
                         f"got {n_val}")
    check_choice("source", source, SOURCES)
    _check_root(root)
    check_bool("download", download)
    spec = base.as_oracle() if oracle else base

    images, digits = load_mnist_train(source, root, download)
    rng = np.random.default_rng(seed)
    kept = rng.permutation(TRAIN_POOL)[:n_train]
    E = spec.num_train_envs
    shortcut = SHORTCUTS.get(spec.shortcut)
    train = [
        _make_env(rng, images, digits, kept[i::E], spec.label_noise, e, shortcut)
        for i, e in enumerate(spec.train_flips)
    ]
    held_out = np.arange(TRAIN_POOL, TRAIN_POOL + n_test)
    test = [_make_env(rng, images, digits, held_out, spec.label_noise, e, shortcut) for e in spec.test_flips]
    val = []
    if n_val:
        val_images, val_digits = load_mnist_test(source, root, download)
        positions = np.arange(n_val)
        val = [_make_env(rng, val_images, val_digits, positions[i::E], spec.label_noise, e, shortcut)
               for i, e in enumerate(spec.train_flips)]
    return ColoredMNIST(name=name, seed=seed, oracle=oracle, spec=spec, train=train, test=test, val=val)
