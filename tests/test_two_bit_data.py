"""Statistics of the generated two-bit data (Definition 3.1, Appendix D.1)."""
import math

import numpy as np
import pytest
import torch

from featlib.data import TwoBitSpec, erm_population_logit_weights
from featlib.data.two_bit import INVARIANT_COORD, SPURIOUS_COORD


def within_sampling_error(observed: float, p: float, n: int, z: float = 4.5) -> bool:
    return abs(observed - p) <= z * math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def spec():
    return TwoBitSpec(alpha=0.3, betas=(0.1, 0.2, 0.4), n_per_env=20000, d=12, sigma_p=0.5)


def test_train_agreement_rates_match_alpha_and_beta(spec):
    data = spec.sample_train(seed=3)
    for e, idx in enumerate(data.env_indices()):
        y = data.y[idx]
        agree_v1 = (data.x[idx, 0, INVARIANT_COORD] * y > 0).float().mean().item()
        agree_v2 = (data.x[idx, 0, SPURIOUS_COORD] * y > 0).float().mean().item()
        assert len(idx) == spec.n_per_env
        assert within_sampling_error(agree_v1, 1 - spec.alpha, len(idx))
        assert within_sampling_error(agree_v2, 1 - spec.betas[e], len(idx))
        assert within_sampling_error((y > 0).float().mean().item(), 0.5, len(idx))


def test_test_distribution_reverses_the_spurious_correlation(spec):
    data = spec.sample_test(n=60000, seed=3)
    assert torch.all(data.x[:, 0, INVARIANT_COORD] * data.y == 1)  # invariant feature noiseless
    for e, idx in enumerate(data.env_indices()):
        assert len(idx) == 20000  # equal shares over the training betas
        agree_v2 = (data.x[idx, 0, SPURIOUS_COORD] * data.y[idx] > 0).float().mean().item()
        assert within_sampling_error(agree_v2, spec.betas[e], len(idx))


def test_noise_patch_is_orthogonal_to_the_features_with_scale_sigma_p(spec):
    data = spec.sample_train(seed=0)
    noise = data.x[:, 1]
    assert torch.all(noise[:, INVARIANT_COORD] == 0) and torch.all(noise[:, SPURIOUS_COORD] == 0)
    assert torch.all(data.x[:, 0, 2:] == 0)  # the feature patch lies in span(v1, v2)
    rest = noise[:, 2:].double()
    assert abs(rest.mean().item()) < 0.01
    assert rest.std().item() == pytest.approx(spec.sigma_p, rel=0.01)


def test_same_seed_same_data_other_seed_other_data(spec):
    small = TwoBitSpec(n_per_env=50, d=5)
    a, b, c = small.sample_train(7), small.sample_train(7), small.sample_train(8)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.x, c.x)
    assert not torch.equal(small.sample_test(seed=7).x, a.x)


@pytest.mark.parametrize(
    "kwargs, parameter",
    [
        (dict(alpha=1.5), "alpha"),
        (dict(alpha=0.0), "alpha"),
        (dict(betas=(0.1, 1.0)), r"betas\[1\]"),
        (dict(betas=()), "betas"),
        (dict(d=2), "d"),
        (dict(n_per_env=0), "n_per_env"),
        (dict(sigma_p=-1.0), "sigma_p"),
    ],
)
def test_invalid_parameters_name_the_parameter(kwargs, parameter):
    with pytest.raises(ValueError, match=rf"^{parameter} must be"):
        TwoBitSpec(**kwargs)


def test_population_limit_matches_the_papers_closed_form():
    # Proof of Prop. 4.3: gamma_1 = 1/2 log(G_m G_b), gamma_2 = 1/2 log(G_m / G_b).
    alpha, b1, b2 = 0.25, 0.1, 0.2
    A = alpha * (b1 + b2) / ((1 - alpha) * (2 - b1 - b2))
    B = alpha * (2 - b1 - b2) / ((1 - alpha) * (b1 + b2))
    G = lambda z: ((1 - z) + np.sqrt((z - 1) ** 2 + 4 * z)) / (2 * z)  # noqa: E731
    u1, u2 = erm_population_logit_weights(alpha, (b1, b2))
    assert u1 == pytest.approx(0.5 * np.log(G(A) * G(B)))
    assert u2 == pytest.approx(0.5 * np.log(G(A) / G(B)))
