"""ERM and IRMv1 against the closed forms of Sec. 3 and Appendix D.1."""
import pytest
import torch

from featlib.data import TwoBitSpec
from featlib.models import TwoLayerCNN
from featlib.objectives import OBJECTIVES, make_objective, scale_gradients
from featlib.theory import c_irmv1, irmv1_gradient_identity


@pytest.fixture(scope="module")
def batch():
    spec = TwoBitSpec(alpha=0.25, betas=(0.1, 0.3), n_per_env=300, d=8, sigma_p=0.2)
    data = spec.sample_train(seed=5)
    data.x, data.y = data.x.double(), data.y.double()
    model = TwoLayerCNN(d=8, m=6, sigma_0=0.4, seed=1).double()
    return data, model


def env_split(data, logits):
    idx = data.env_indices()
    return [logits[i] for i in idx], [data.targets01()[i] for i in idx], [data.y[i] for i in idx]


def test_irmv1_penalty_is_the_squared_c_irmv1(batch):
    data, model = batch
    env_logits, env_targets, env_y = env_split(data, model(data.x))
    out = make_objective("irmv1")(env_logits, env_targets, penalty_weight=1.0)
    closed = sum(c_irmv1(lg, y) ** 2 for lg, y in zip(env_logits, env_y))
    assert out.penalty.item() == pytest.approx(closed.item(), rel=1e-10)
    grads = scale_gradients(make_objective("erm"), env_logits, env_targets)
    for g, lg, y in zip(grads, env_logits, env_y):
        assert g.item() == pytest.approx(c_irmv1(lg, y).item(), rel=1e-10)


@pytest.mark.parametrize("penalty_weight", [0.0, 1.0, 37.0, 1e4])
def test_autograd_irmv1_gradient_equals_appendix_d1(batch, penalty_weight):
    data, model = batch
    model.zero_grad()
    env_logits, env_targets, _ = env_split(data, model(data.x))
    objective = make_objective("irmv1", rescale=False)
    objective(env_logits, env_targets, penalty_weight).loss.backward()
    closed = irmv1_gradient_identity(model.weight.detach(), data, penalty_weight)
    assert torch.allclose(model.weight.grad, closed, rtol=1e-8, atol=1e-12)


def test_erm_is_the_sum_of_environment_risks(batch):
    data, model = batch
    env_logits, env_targets, env_y = env_split(data, model(data.x))
    out = make_objective("erm")(env_logits, env_targets, penalty_weight=5.0)
    manual = sum(torch.log1p(torch.exp(-y * lg)).mean() for lg, y in zip(env_logits, env_y))
    assert out.loss.item() == pytest.approx(manual.item(), rel=1e-10)
    assert out.penalty.item() == 0.0


def test_large_penalty_weight_rescales_the_loss(batch):
    data, model = batch
    env_logits, env_targets, _ = env_split(data, model(data.x))
    plain = make_objective("irmv1", rescale=False)(env_logits, env_targets, 1e3)
    scaled = make_objective("irmv1")(env_logits, env_targets, 1e3)
    assert scaled.loss.item() == pytest.approx(plain.loss.item() / 1e3, rel=1e-10)
    small = make_objective("irmv1")(env_logits, env_targets, 0.5)
    assert small.loss.item() == pytest.approx(small.risks.sum().item() + 0.5 * small.penalty.item(), rel=1e-10)


def test_registry_and_bad_arguments(batch):
    data, model = batch
    assert {"erm", "irmv1"} <= set(OBJECTIVES.names())
    with pytest.raises(ValueError, match="objective must be one of .*'irmv1'.*; got 'irm'"):
        make_objective("irm")
    env_logits, env_targets, _ = env_split(data, model(data.x))
    with pytest.raises(ValueError, match="^penalty_weight must be"):
        make_objective("irmv1")(env_logits, env_targets, -1.0)
    with pytest.raises(ValueError, match="same length"):
        make_objective("erm")(env_logits, env_targets[:1])
