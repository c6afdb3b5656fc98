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
  The image has two channels (2, 14, 14): channel ``colour`` holds the digit, the other is
  zero. Models see the 392 features ``x.reshape(n, 2 * 14 * 14)`` (channel-major), float32.
* **Environments.** One seeded ``numpy.random.default_rng(seed)`` shuffles the training pool;
  the first ``n_train`` shuffled images are dealt round-robin to the ``E`` training
  environments (env ``i`` takes positions ``i, i + E, i + 2E, ...``: 25,000 + 25,000 for the
  two environments at full size). The test environments all use the first ``n_test``
  held-out images (50,000 + j), each with its own label-noise and colour draws.

Two datasets of Appendix F.1 are registered in :data:`COLORED_MNIST`:

* ``"cmnist025"``: ``eta = 0.25``, training ``e`` in (0.1, 0.2) (the original IRM setting),
* ``"cmnist01"``: ``eta = 0.1``, training ``e`` in (0.2, 0.25) (the invariant feature is now
  more predictive than colour in training),

both tested on ``e`` in (0.9, 0.1, 0.5): 0.9 reverses the training correlation (the OOD test
accuracy), 0.1 keeps it, and 0.5 makes colour uninformative.

``oracle=True`` gives the data of the "Oracle" row of Table 2: the same model trained where
colour carries no information, i.e. training environments with colour-flip probability 0.5
(what the reference code's ``coloredmnist025gray`` / ``coloredmnist01gray`` datasets do);
the test environments are unchanged.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from ..registry import Registry
from ..validation import check_bool, check_choice, check_int, check_probability, check_sequence
from .mnist import SOURCES, _check_root, load_mnist_train

#: MNIST training-set indices [0, TRAIN_POOL) are the training pool, the rest the held-out pool.
TRAIN_POOL = 50000
HELD_OUT_POOL = 10000
CHANNELS, SIDE = 2, 14
N_FEATURES = CHANNELS * SIDE * SIDE  # 392


@dataclass(eq=False)  # tensors: compare fields with torch.equal, not ==
class EnvData:
    """One ColoredMNIST environment of ``n`` examples.

    ``x``: (n, 392) float32, the (2, 14, 14) two-channel image flattened channel-major;
    ``y``: (n,) float32 noisy label in {0, 1}; ``digit``: (n,) int64 MNIST digit;
    ``colour``: (n,) int64 in {0, 1}, the channel that holds the digit;
    ``index``: (n,) int64 MNIST training-set index of each image; ``flip``: the environment's
    colour-flip probability ``e``.
    """

    x: torch.Tensor
    y: torch.Tensor
    digit: torch.Tensor
    colour: torch.Tensor
    index: torch.Tensor
    flip: float

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def __repr__(self) -> str:
        return f"EnvData(n={len(self)}, flip={self.flip}, device={self.x.device})"

    def to(self, device: torch.device | str) -> "EnvData":
        return EnvData(
            self.x.to(device), self.y.to(device), self.digit.to(device),
            self.colour.to(device), self.index.to(device), self.flip,
        )

    def images(self, idx: Any = None) -> torch.Tensor:
        """(k, 2, 14, 14) view of the examples ``idx`` (all when None), for plotting."""
        view = self.x.view(-1, CHANNELS, SIDE, SIDE)
        return view if idx is None else view[idx]


@dataclass(frozen=True)
class ColoredMNISTSpec:
    """Label noise ``eta``, one colour-flip probability ``e`` per training environment, and the
    colour-flip probabilities of the test environments (Appendix F.1)."""

    label_noise: float
    train_flips: tuple[float, ...]
    test_flips: tuple[float, ...] = (0.9, 0.1, 0.5)

    def __post_init__(self) -> None:
        check_probability("label_noise", self.label_noise)
        for field in ("train_flips", "test_flips"):
            flips = check_sequence(field, getattr(self, field), min_length=1)
            for i, e in enumerate(flips):
                check_probability(f"{field}[{i}]", e)
            object.__setattr__(self, field, tuple(float(e) for e in flips))
        object.__setattr__(self, "label_noise", float(self.label_noise))

    @property
    def num_train_envs(self) -> int:
        return len(self.train_flips)

    def as_oracle(self) -> "ColoredMNISTSpec":
        """The Oracle row of Table 2: colour uninformative (e = 0.5) in every training env."""
        return replace(self, train_flips=(0.5,) * self.num_train_envs)


#: The two ColoredMNIST datasets of Appendix F.1, by name.
COLORED_MNIST: Registry[ColoredMNISTSpec] = Registry("dataset")
COLORED_MNIST.register("cmnist025")(ColoredMNISTSpec(label_noise=0.25, train_flips=(0.1, 0.2)))
COLORED_MNIST.register("cmnist01")(ColoredMNISTSpec(label_noise=0.1, train_flips=(0.2, 0.25)))


@dataclass(eq=False)
class ColoredMNIST:
    """A drawn ColoredMNIST dataset: ``train`` and ``test`` environments (lists of
    :class:`EnvData`), and the arguments that drew it. ``spec`` is the spec actually used
    (with ``oracle=True``, the registered one with all training flips 0.5).

    The ``train_*`` properties concatenate the training environments, env 0 first;
    ``env_slices[i]`` selects env ``i`` from the concatenation.
    """

    name: str
    seed: int
    oracle: bool
    spec: ColoredMNISTSpec
    train: list[EnvData]
    test: list[EnvData]

    def __repr__(self) -> str:
        return (
            f"ColoredMNIST(name={self.name!r}, seed={self.seed}, oracle={self.oracle}, "
            f"train={[len(e) for e in self.train]}, test={[len(e) for e in self.test]})"
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

    def to(self, device: torch.device | str) -> "ColoredMNIST":
        return ColoredMNIST(
            self.name, self.seed, self.oracle, self.spec,
            [e.to(device) for e in self.train], [e.to(device) for e in self.test],
        )

    def images(self, env: int, idx: Any = None, split: str = "train") -> torch.Tensor:
        """(k, 2, 14, 14) view of examples ``idx`` of environment ``env`` of ``split``."""
        envs = self.train if check_choice("split", split, ("train", "test")) == "train" else self.test
        return envs[check_int("env", env, minimum=0, maximum=len(envs) - 1)].images(idx)


def _bernoulli(rng: np.random.Generator, p: float, n: int) -> np.ndarray:
    return rng.random(n) < p


def _make_env(
    rng: np.random.Generator, images: np.ndarray, digits: np.ndarray, index: np.ndarray,
    label_noise: float, flip: float,
) -> EnvData:
    n = len(index)
    digit = digits[index].astype(np.int64)
    clean = digit < 5
    label = clean ^ _bernoulli(rng, label_noise, n)
    colour = label ^ _bernoulli(rng, flip, n)
    x = np.zeros((n, CHANNELS, SIDE, SIDE), dtype=np.float32)
    x[np.arange(n), colour.astype(np.int64)] = images[index][:, ::2, ::2].astype(np.float32) / 255
    return EnvData(
        x=torch.from_numpy(x.reshape(n, N_FEATURES)),
        y=torch.from_numpy(label.astype(np.float32)),
        digit=torch.from_numpy(digit),
        colour=torch.from_numpy(colour.astype(np.int64)),
        index=torch.from_numpy(index.astype(np.int64)),
        flip=float(flip),
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
) -> ColoredMNIST:
    """Draw the ColoredMNIST dataset ``name`` ("cmnist025" or "cmnist01") with ``seed``.

    A pure function of its arguments: one ``np.random.default_rng(seed)`` shuffles the training
    pool, then draws label noise and colour for each training environment in order, then for
    each test environment. ``n_train`` (at most 50,000) keeps the first ``n_train`` shuffled
    pool images, dealt round-robin to the training environments (smaller values give the fast
    CI profile); ``n_test`` (at most 10,000) held-out images are used by every test
    environment. ``oracle=True`` sets every training colour-flip probability to 0.5 (Table 2's
    Oracle). ``source``, ``root`` and ``download`` go to
    :func:`featlib.data.mnist.load_mnist_train`.
    """
    base = COLORED_MNIST.get(name)
    seed = check_int("seed", seed, minimum=0)
    oracle = check_bool("oracle", oracle)
    n_train = check_int("n_train", n_train, minimum=max(2, base.num_train_envs), maximum=TRAIN_POOL)
    n_test = check_int("n_test", n_test, minimum=1, maximum=HELD_OUT_POOL)
    check_choice("source", source, SOURCES)
    _check_root(root)
    check_bool("download", download)
    spec = base.as_oracle() if oracle else base

    images, digits = load_mnist_train(source, root, download)
    rng = np.random.default_rng(seed)
    kept = rng.permutation(TRAIN_POOL)[:n_train]
    E = spec.num_train_envs
    train = [
        _make_env(rng, images, digits, kept[i::E], spec.label_noise, e)
        for i, e in enumerate(spec.train_flips)
    ]
    held_out = np.arange(TRAIN_POOL, TRAIN_POOL + n_test)
    test = [_make_env(rng, images, digits, held_out, spec.label_noise, e) for e in spec.test_flips]
    return ColoredMNIST(name=name, seed=seed, oracle=oracle, spec=spec, train=train, test=test)
