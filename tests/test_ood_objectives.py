"""The OOD objectives of the ColoredMNIST and WILDS experiments, each against an independent
computation: hand-written risks and variances, the dense O(n^2) MMCE, autograd per-sample
gradients, separately built per-environment losses and a hand loop of GroupDRO's update."""
import pytest
import torch

from featlib.objectives import OBJECTIVES, make_objective

SIZES = (40, 55, 30)  # samples per environment
H = 4  # feature dimension


def hand_risk(logits, targets01):
    """Mean logistic loss log(1 + exp(-y f)) with y = 2 t - 1."""
    y = 2 * targets01.double() - 1
    return torch.log1p(torch.exp(-y * logits)).mean(-1)


def hand_c_irmv1(logits, targets01):
    """d/ds mean BCE(s z, y) at s = 1 = mean((sigmoid(z) - y) z)."""
    return ((torch.sigmoid(logits) - targets01) * logits).mean(-1)


def hand_variance(values):
    """Unbiased variance over the first dimension, written out."""
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def env_data(seed=0, runs=(), sizes=SIZES, scale=1.5):
    """Per-environment logits ``(*runs, n_e)`` and targets ``(n_e,)``, float64."""
    gen = torch.Generator().manual_seed(seed)
    logits = [scale * torch.randn(*runs, n, generator=gen, dtype=torch.float64) for n in sizes]
    targets = [torch.randint(0, 2, (n,), generator=gen).double() for n in sizes]
    return logits, targets


# ---------------------------------------------------------------- V-REx, IRMv1, IRMX, IB-IRM


def test_vrex_is_the_variance_of_the_hand_risks():
    logits, targets = env_data(1)
    out = make_objective("vrex", rescale=False)(logits, targets, penalty_weight=2.0)
    risks = [hand_risk(z, t) for z, t in zip(logits, targets)]
    assert torch.allclose(out.risks, torch.stack(risks), rtol=1e-12)
    assert out.penalty.item() == pytest.approx(hand_variance(risks).item(), rel=1e-10)
    assert out.loss.item() == pytest.approx((sum(risks) + 2.0 * hand_variance(risks)).item(), rel=1e-10)
    two = make_objective("vrex")(logits[:2], targets[:2])
    assert two.penalty.item() == pytest.approx(((risks[0] - risks[1]) ** 2 / 2).item(), rel=1e-10)
    with pytest.raises(ValueError, match="at least 2 environments"):
        make_objective("vrex")(logits[:1], targets[:1], 1.0)


@pytest.mark.parametrize("runs", [(), (3,)])
@pytest.mark.parametrize("env_reduction", ["sum", "mean"])
def test_irmv1_penalty_is_the_squared_scale_derivative(env_reduction, runs):
    logits, targets = env_data(2, runs)
    out = make_objective("irmv1", env_reduction=env_reduction)(logits, targets, 1.0)
    closed = torch.stack([hand_c_irmv1(z, t) ** 2 for z, t in zip(logits, targets)])
    step = 1e-5  # central finite difference of the hand risk in the dummy scale s
    fd = torch.stack(
        [((hand_risk((1 + step) * z, t) - hand_risk((1 - step) * z, t)) / (2 * step)) ** 2
         for z, t in zip(logits, targets)]
    )
    reduce = (lambda x: x.sum(0)) if env_reduction == "sum" else (lambda x: x.mean(0))
    assert out.penalty.shape == runs
    assert torch.allclose(out.penalty, reduce(closed), rtol=1e-10)
    assert torch.allclose(out.penalty, reduce(fd), rtol=1e-7)


def test_irmx_is_irmv1_plus_vrex():
    logits, targets = env_data(3)
    out = make_objective("irmx", rescale=False)(logits, targets, 5.0)
    risks = [hand_risk(z, t) for z, t in zip(logits, targets)]
    irm = sum(hand_c_irmv1(z, t) ** 2 for z, t in zip(logits, targets))
    assert out.penalty.item() == pytest.approx((irm + hand_variance(risks)).item(), rel=1e-10)
    assert out.loss.item() == pytest.approx((sum(risks) + 5.0 * (irm + hand_variance(risks))).item(), rel=1e-10)


def linear_head(seed=0, sizes=SIZES, frozen=False):
    """Features h_e (n_e, H), a linear head (W, b) and its logits, float64."""
    gen = torch.Generator().manual_seed(seed)
    feats = [torch.randn(n, H, generator=gen, dtype=torch.float64) + 0.3 * e for e, n in enumerate(sizes)]
    feats = [h if frozen else h.requires_grad_() for h in feats]
    W = torch.randn(H, generator=gen, dtype=torch.float64).requires_grad_()
    b = torch.randn((), generator=gen, dtype=torch.float64).requires_grad_()
    targets = [torch.randint(0, 2, (n,), generator=gen).double() for n in sizes]
    return feats, W, b, targets


@pytest.mark.parametrize("ib_weight", [1.0, 0.3])
def test_ib_irm_adds_the_feature_variance_to_irmv1(ib_weight):
    feats, W, b, targets = linear_head(4)
    logits = [h @ W + b for h in feats]
    out = make_objective("ib_irm", ib_weight=ib_weight)(logits, targets, 1.0, features=feats)
    irm = sum(hand_c_irmv1(z, t) ** 2 for z, t in zip(logits, targets))
    ib = sum(((h - h.mean(0)) ** 2).sum(0).div(len(h) - 1).mean() for h in feats) / len(feats)
    assert out.penalty.item() == pytest.approx((irm + ib_weight * ib).item(), rel=1e-10)


def test_ib_irm_trains_like_irmv1_on_a_frozen_featurizer():
    feats, W, b, targets = linear_head(5, frozen=True)
    grads, penalties = {}, {}
    for name in ("irmv1", "ib_irm"):
        logits = [h @ W + b for h in feats]
        out = make_objective(name)(logits, targets, 40.0, features=feats)
        grads[name] = torch.autograd.grad(out.loss, [W, b])
        penalties[name] = out.penalty
    for g_ib, g_irm in zip(grads["ib_irm"], grads["irmv1"]):
        assert torch.allclose(g_ib, g_irm, rtol=1e-12, atol=1e-15)
    assert penalties["ib_irm"] > penalties["irmv1"]  # the IB term is there, but constant


# ---------------------------------------------------------------- CLOvE


def dense_mmce(logits, targets01, width=0.4):
    """The O(n^2) MMCE of the CLOvE reference code, one run at a time."""
    prob = torch.sigmoid(logits)
    confidence = torch.where(prob < 0.5, 1 - prob, prob)
    correct = (~((logits > 0) ^ (targets01 > 0.5))).double()
    kernel = torch.exp(-(confidence[:, None] - confidence[None, :]).abs() / width)
    diff = correct - confidence
    return (diff[:, None] * diff[None, :] * kernel).sum() / len(logits) ** 2


@pytest.mark.parametrize("runs", [(), (3,)])
@pytest.mark.parametrize("ties", [False, True])
def test_clove_equals_the_dense_mmce(runs, ties):
    gen = torch.Generator().manual_seed(6)
    sizes = (300, 257)
    if ties:  # a few distinct values, zero included, so many exactly tied confidences
        logits = [torch.randint(-8, 9, (*runs, n), generator=gen).double() / 4 for n in sizes]
    else:
        logits = [2 * torch.randn(*runs, n, generator=gen, dtype=torch.float64) for n in sizes]
    logits = [z.requires_grad_() for z in logits]
    targets = [torch.randint(0, 2, (n,), generator=gen).double() for n in sizes]
    out = make_objective("clove", rescale=False)(logits, targets, 1.0)
    penalty_grad = torch.autograd.grad(out.loss.sum(), logits)  # minus the risks' part below
    risk_grad = torch.autograd.grad(sum(hand_risk(z, t) for z, t in zip(logits, targets)).sum(), logits)

    flat = [z.reshape(-1, z.shape[-1]) for z in logits]
    dense = torch.stack([sum(dense_mmce(z[r], t) for z, t in zip(flat, targets)) for r in range(len(flat[0]))])
    dense_grad = torch.autograd.grad(dense.sum(), logits)
    assert torch.allclose(out.penalty.reshape(-1), dense, rtol=1e-10, atol=1e-15)
    for got, rg, want in zip(penalty_grad, risk_grad, dense_grad):
        assert torch.allclose(got - rg, want, rtol=1e-8, atol=1e-14)


# ---------------------------------------------------------------- IGA


def test_iga_equals_the_variance_of_separate_environment_gradients():
    torch.manual_seed(7)
    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1)).double()
    params = list(net.parameters())
    gen = torch.Generator().manual_seed(7)
    xs = [torch.randn(n, 3, generator=gen, dtype=torch.float64) + e for e, n in enumerate(SIZES)]
    targets = [torch.randint(0, 2, (n,), generator=gen).double() for n in SIZES]

    env_grads = []
    for x, t in zip(xs, targets):
        loss = hand_risk(net(x).squeeze(-1), t)
        env_grads.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params, create_graph=True)]))
    mean = sum(env_grads) / len(env_grads)
    hand = sum((g - mean).pow(2).sum() for g in env_grads)  # mean not detached
    hand_detached = sum((g - mean.detach()).pow(2).sum() for g in env_grads)
    total = sum(hand_risk(net(x).squeeze(-1), t) for x, t in zip(xs, targets))
    hand_grad = torch.autograd.grad(total + hand, params, retain_graph=True)
    hand_detached_grad = torch.autograd.grad(total + hand_detached, params)

    out = make_objective("iga", rescale=False)([net(x).squeeze(-1) for x in xs], targets, 1.0, params=params)
    grad = torch.autograd.grad(out.loss, params)
    assert out.penalty.item() == pytest.approx(hand.item(), rel=1e-10)
    for g, h, hd in zip(grad, hand_grad, hand_detached_grad):
        assert torch.allclose(g, h, rtol=1e-9, atol=1e-13)
        assert torch.allclose(hd, h, rtol=1e-9, atol=1e-13)


# ---------------------------------------------------------------- Fishr


@pytest.mark.parametrize("centered", [False, True])
def test_fishr_equals_autograd_per_sample_gradients(centered):
    torch.manual_seed(8)
    head = torch.nn.Linear(H, 1).double()
    feats, _, _, targets = linear_head(8)
    names = [n for n, _ in head.named_parameters()]

    def sample_loss(params, h, t):
        z = torch.func.functional_call(head, params, (h,)).squeeze(-1)
        return torch.nn.functional.binary_cross_entropy_with_logits(z, t)

    params = dict(head.named_parameters())
    moments = []
    for h, t in zip(feats, targets):
        per_sample = torch.func.vmap(torch.func.grad(sample_loss), in_dims=(None, 0, 0))(params, h, t)
        g = torch.cat([per_sample[n].reshape(len(h), -1) for n in names], dim=-1)  # (n, H + 1): w then b
        if centered:
            g = g - g.mean(0)
        moments.append(g.pow(2).mean(0))
    mean = sum(moments) / len(moments)
    hand = sum((v - mean).pow(2).sum() for v in moments)

    logits = [head(h).squeeze(-1) for h in feats]
    out = make_objective("fishr", centered=centered, rescale=False)(logits, targets, 1.0, features=feats)
    assert out.penalty.item() == pytest.approx(hand.item(), rel=1e-10)
    wrt = [*head.parameters(), *feats]
    risks = sum(hand_risk(z, t) for z, t in zip(logits, targets))
    got = torch.autograd.grad(out.loss, wrt, retain_graph=True)
    want = torch.autograd.grad(risks + hand, wrt)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, rtol=1e-9, atol=1e-13)


# ---------------------------------------------------------------- GroupDRO


def test_group_dro_follows_the_hand_update():
    eta = 0.5
    objective = make_objective("group_dro", eta=eta)
    q = torch.full((3,), 1 / 3, dtype=torch.float64)
    for step in range(4):
        logits, targets = env_data(10 + step)
        logits[2] = logits[2] * 3  # a confidently wrong-ish environment: the worst risk
        out = objective(logits, targets, penalty_weight=123.0)
        risks = torch.stack([hand_risk(z, t) for z, t in zip(logits, targets)])
        q = q * torch.exp(eta * risks)
        q = q / q.sum()
        assert out.loss.item() == pytest.approx((q * risks).sum().item(), rel=1e-12)
        assert out.penalty.item() == 0.0
        assert risks.argmax() == 2
    assert q[2] > 1 / 3 and torch.allclose(objective.q, q, rtol=1e-12)
    objective.reset()
    assert objective.q is None
    first = objective(logits, targets)
    uniform = torch.full((3,), 1 / 3, dtype=torch.float64) * torch.exp(eta * first.risks)
    assert first.loss.item() == pytest.approx((uniform / uniform.sum() * first.risks).sum().item(), rel=1e-12)
    with pytest.raises(ValueError, match="reset"):
        objective(logits[:2], targets[:2])


# ---------------------------------------------------------------- every objective, many runs at once


def stacked_runs(seed, runs=3):
    """Features (R, n_e, H), stacked heads W (R, H), b (R,) and targets (env 0 shared by runs)."""
    gen = torch.Generator().manual_seed(seed)
    feats = [torch.randn(runs, n, H, generator=gen, dtype=torch.float64) + 0.2 * e for e, n in enumerate(SIZES)]
    W = torch.randn(runs, H, generator=gen, dtype=torch.float64)
    b = torch.randn(runs, generator=gen, dtype=torch.float64)
    targets = [torch.randint(0, 2, (n,) if e == 0 else (runs, n), generator=gen).double() for e, n in enumerate(SIZES)]
    return feats, W, b, targets


def call_twice(objective, feats, W, b, targets, weight):
    """Two calls (GroupDRO's state moves between them); gradients of the second loss."""
    for _ in range(2):
        logits = [torch.einsum("...nh,...h->...n", h, W) + b.unsqueeze(-1) for h in feats]
        out = objective(logits, targets, weight, features=feats, params=[W, b])
    grads = torch.autograd.grad(out.loss.sum(), [W, b, *feats])
    return out, grads


@pytest.mark.parametrize("name", OBJECTIVES.names())
def test_runs_are_independent(name):
    feats, W, b, targets = stacked_runs(11)
    weight = torch.tensor([0.5, 3.0, 200.0], dtype=torch.float64)
    leaves = [x.clone().requires_grad_() for x in (W, b, *feats)]
    out, grads = call_twice(make_objective(name), leaves[2:], leaves[0], leaves[1], targets, weight)
    assert out.loss.shape == out.penalty.shape == (3,)
    assert out.risks.shape == (3, 3)
    for r in range(3):
        alone = [x[r].clone().requires_grad_() for x in (W, b, *feats)]
        alone_targets = [t if t.dim() == 1 else t[r] for t in targets]
        one, one_grads = call_twice(make_objective(name), alone[2:], alone[0], alone[1], alone_targets,
                                    weight[r].item())
        assert one.loss.shape == ()
        assert torch.allclose(out.loss[r], one.loss, rtol=1e-10, atol=1e-14)
        assert torch.allclose(out.penalty[r], one.penalty, rtol=1e-10, atol=1e-14)
        assert torch.allclose(out.risks[:, r], one.risks, rtol=1e-12)
        for g, g1 in zip(grads, one_grads):
            assert torch.allclose(g[r], g1, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("name", ["vrex", "clove", "iga"])
def test_large_penalty_weights_rescale_each_run(name):
    feats, W, b, targets = stacked_runs(12)
    W.requires_grad_()
    b.requires_grad_()
    weight = torch.tensor([0.5, 1.0, 40.0], dtype=torch.float64)
    outs = {}
    for rescale in (True, False):
        logits = [torch.einsum("rnh,rh->rn", h, W) + b[:, None] for h in feats]
        outs[rescale] = make_objective(name, rescale=rescale)(logits, targets, weight, params=[W, b])
    plain = outs[False].risks.sum(0) + weight * outs[False].penalty
    assert torch.allclose(outs[False].loss, plain, rtol=1e-12)
    assert torch.allclose(outs[True].loss, plain / torch.tensor([1.0, 1.0, 40.0], dtype=torch.float64), rtol=1e-12)
    assert torch.all(outs[True].penalty > 0)


def test_only_irmv1_terms_follow_env_reduction():
    """The reference code averages IRMv1's per-environment terms but sums CLOvE's, IGA's and
    Fishr's; ``env_reduction="mean"`` (the ColoredMNIST setting) must only touch the former."""
    feats, W, b, targets = stacked_runs(14)
    W.requires_grad_()
    b.requires_grad_()
    logits = [torch.einsum("rnh,rh->rn", h, W) + b[:, None] for h in feats]
    for name in OBJECTIVES.names():
        pens = [make_objective(name, env_reduction=red)(logits, targets, 1.0, features=feats, params=[W, b]).penalty
                for red in ("sum", "mean")]
        if name in ("irmv1", "irmx", "ib_irm"):
            assert torch.all(pens[1] < pens[0])
        else:
            assert torch.allclose(pens[0], pens[1], rtol=1e-12)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(("name", "missing"), [("ib_irm", "features"), ("fishr", "features"), ("iga", "params")])
def test_missing_inputs_are_named(name, missing):
    logits, targets = env_data(13)
    with pytest.raises(ValueError, match=f"{name} penalty needs {missing}="):
        make_objective(name)(logits, targets, 1.0)


def test_unknown_objective_lists_the_valid_ones():
    with pytest.raises(ValueError, match="objective must be one of") as info:
        make_objective("v-rex")
    for name in ("erm", "irmv1", "vrex", "irmx", "ib_irm", "clove", "iga", "fishr", "group_dro"):
        assert repr(name) in str(info.value)


def test_registered_classes_carry_their_names_and_sources():
    for name in OBJECTIVES.names():
        cls = OBJECTIVES.get(name)
        assert cls.name == name
        assert cls.__doc__ and any(ch.isdigit() for ch in cls.__doc__)  # cites a year
