"""The two-layer CNN of Eq. (2) against a direct loop over filters."""
import pytest
import torch

from featlib.data import TwoBitSpec
from featlib.models import ACTIVATIONS, TwoLayerCNN, make_activation


def reference_logits(model: TwoLayerCNN, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(x.shape[0], dtype=torch.float64)
    for j_index, j in enumerate((1.0, -1.0)):
        for r in range(model.m):
            w = model.weight[j_index, r].double()
            for patch in range(2):
                out += j / model.m * model.psi(x[:, patch].double() @ w)
    return out


@pytest.mark.parametrize("activation", ACTIVATIONS.names())
def test_forward_matches_equation_2(activation):
    data = TwoBitSpec(n_per_env=40, d=7, sigma_p=0.3).sample_train(1)
    model = TwoLayerCNN(d=7, m=5, activation=activation, sigma_0=0.5, seed=2)
    with torch.no_grad():
        assert torch.allclose(model(data.x).double(), reference_logits(model, data.x), atol=1e-5)


def test_identity_model_is_linear_in_the_summed_patches():
    data = TwoBitSpec(n_per_env=30, d=6, sigma_p=0.2).sample_train(0)
    model = TwoLayerCNN(d=6, m=4, sigma_0=0.3, seed=0)
    u = (model.weight[0] - model.weight[1]).sum(0) / model.m
    with torch.no_grad():
        assert torch.allclose(model(data.x), data.x.sum(1) @ u, atol=1e-6)


def test_feature_coefficients_are_signed_means():
    model = TwoLayerCNN(d=5, m=3, sigma_0=1.0, seed=4)
    inv, spu = model.feature_coefficients()
    w = model.weight.detach()
    assert inv.item() == pytest.approx(((w[0, :, 0].sum() - w[1, :, 0].sum()) / 6).item(), abs=1e-6)
    assert spu.item() == pytest.approx(((w[0, :, 1].sum() - w[1, :, 1].sum()) / 6).item(), abs=1e-6)


def test_initialisation_scale_is_sigma_0():
    model = TwoLayerCNN(d=200, m=100, sigma_0=0.01, seed=0)
    assert model.weight.std().item() == pytest.approx(0.01, rel=0.02)


def test_smoothed_relu_is_continuously_differentiable_at_the_knots():
    psi = make_activation("smoothed_relu", q=3, kappa=0.1)
    z = torch.tensor([-1e-4, 0.0, 1e-4, 0.1 - 1e-6, 0.1, 0.1 + 1e-6, 0.5], dtype=torch.float64, requires_grad=True)
    out = psi(z)
    (grad,) = torch.autograd.grad(out.sum(), z)
    assert out[0].item() == 0 and out[1].item() == 0
    assert out[4].item() == pytest.approx(0.1 / 3)  # kappa^q / (q kappa^(q-1))
    assert out[6].item() == pytest.approx(0.5 - (2 / 3) * 0.1)
    assert grad[3].item() == pytest.approx(1.0, abs=1e-4) and grad[5].item() == pytest.approx(1.0)
    assert grad[2].item() == pytest.approx(0.0, abs=1e-5)


def test_unknown_activation_lists_the_valid_ones():
    with pytest.raises(ValueError, match="activation must be one of 'identity', 'relu', 'smoothed_relu'; got 'tanh'"):
        TwoLayerCNN(d=5, m=2, activation="tanh")


@pytest.mark.parametrize("kwargs, name", [(dict(m=0), "m"), (dict(sigma_0=0.0), "sigma_0"), (dict(d=2), "d")])
def test_invalid_model_parameters(kwargs, name):
    args = dict(d=5, m=2) | kwargs
    with pytest.raises(ValueError, match=f"^{name} must be"):
        TwoLayerCNN(**args)
