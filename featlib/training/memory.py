"""The OOD stage's memory from counted peaks, so that a run that cannot fit says so before it starts.

A stack's peak memory is counted, not guessed: :class:`PeakCounter` sees every tensor an
operation produces (forward, backward, optimizer, evaluation) and every storage freed, and keeps
the peak of the bytes alive. :func:`measure_stage_peak` counts one short training of a stack on
the CPU (the fast path, eager: a compiled step fuses and holds no more). Per stack kind and
objective the peak is linear in a few sizes, each in float32 bytes:

* ERM-NF (``"mlp"``): ``A = C n H`` (one hidden activation of the stack), ``L = C n`` (logits),
  ``P`` (the stack's parameters), ``X = n I`` (the images);
* frozen features (``"heads"``): ``F = G n H`` (the features), ``L = G C n``, ``P = G C (H + 1)``;

and :data:`PEAK_COEFFICIENTS` holds the coefficients fitted to counted peaks at a few small sizes
(:func:`fit_coefficients`; ``python -m featlib.training.memory`` measures and prints them again;
``tests/test_gpu_paths.py`` checks the model against a peak counted at a size not fitted). The
issue's unit is ``A``: :func:`activations_per_step` expresses a peak in it (the memory check
this replaces assumed 2 activations per step; at the protocol's size the counted model gives
4.1 for IRMv1, 5.1 for Fishr and IB-IRM, 7.7 for IGA's Hessian-vector-product form).

:func:`stage_bytes` adds what the stage holds all along (the inputs and the stack), and
:func:`protocol_bytes` takes the largest stack of a ColoredMNIST protocol, which
``CMNISTProtocol.memory_estimate`` checks against the device's memory before anything runs.
Counted at float32; a bf16 stage holds less, so the float32 count bounds it. Not modelled: what a
GPU holds besides tensors (the CUDA context, cuBLAS workspaces, the caching allocator's free
blocks), so on a GPU the check refuses what cannot fit by the tensors alone, not everything that
will not fit.
"""
from __future__ import annotations

import itertools

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..validation import check_choice, check_int

KINDS = ("mlp", "heads")
INPUT_DIM = 392
#: The sizes of each kind's model, in the order of its coefficients.
TERMS = {"mlp": ("A", "L", "P", "X"), "heads": ("F", "L", "P")}
#: (n, H, C, G) of the fitted measurements, and one more the fit does not see (the check).
FIT_SIZES = {
    "mlp": ((2048, 64, 2, 1), (4096, 32, 3, 1), (1024, 128, 2, 1), (3000, 48, 4, 1), (1500, 16, 6, 1),
            (2500, 96, 3, 1)),
    "heads": ((2048, 64, 3, 2), (4096, 32, 6, 1), (1024, 128, 2, 3), (3000, 48, 10, 2), (1500, 16, 30, 2),
              (2500, 96, 5, 4)),
}
CHECK_SIZE = {"mlp": (3500, 80, 3, 1), "heads": (3500, 80, 8, 3)}


class PeakCounter(TorchDispatchMode):
    """A counting allocator's view of tensors: inside, every storage an operation produces is
    counted until it is freed (a weak reference to the storage itself, so tensors that only
    autograd's graph still holds stay counted), and :attr:`peak` is the most bytes alive at
    once. Tensors made before entering are not counted."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.current = 0
        self.peak = 0

    def _sweep(self) -> None:
        for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
            self.current -= self.live.pop(key)[1]

    def alive(self) -> int:
        """Bytes of the counted tensors that are still alive now."""
        self._sweep()
        return self.current

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._sweep()
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self.live:
                    self.live[key] = (StorageWeakRef(storage), storage.nbytes())
                    self.current += storage.nbytes()
        self.peak = max(self.peak, self.current)
        return out


def sizes(kind: str, n: int, hidden: int, runs: int, groups: int = 1, input_dim: int = INPUT_DIM) -> dict[str, int]:
    """The model's sizes (float32 bytes) of a stack: see the module docstring."""
    check_choice("kind", kind, KINDS)
    for name, value in (("n", n), ("hidden", hidden), ("runs", runs), ("groups", groups)):
        check_int(name, value, minimum=1)
    c, h = runs, hidden
    if kind == "mlp":
        return {"A": 4 * c * n * h, "L": 4 * c * n, "P": 4 * c * (input_dim * h + h * h + 3 * h + 1),
                "X": 4 * n * input_dim}
    return {"F": 4 * groups * n * h, "L": 4 * groups * c * n, "P": 4 * groups * c * (h + 1)}


def measure_stage_peak(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1,
                       steps: int = 2, precision: str = "fp32") -> int:
    """Counted peak bytes of ``steps`` training steps of a stack (fast path, eager, on the CPU,
    every run from step 0, accuracies at the end) beyond its inputs and parameters."""
    from ..models import ColoredMNISTMLP, StackedHeads, StackedMLP, fresh_head
    from .ood_stage import Environments, LabelledInputs, OODStageConfig, StackRuns, train_stack

    gen = torch.Generator().manual_seed(0)
    y = (torch.rand(n, generator=gen) > 0.5).float()
    envs = (slice(0, n // 2), slice(n // 2, None))
    config = OODStageConfig(objective, steps=steps, path="fast", precision=precision, record="final")
    if kind == "mlp":
        stack = StackedMLP([ColoredMNISTMLP(hidden, seed=1)] * runs)
        train = LabelledInputs(torch.rand(n, INPUT_DIM, generator=gen), y, envs)
        stacked = StackRuns.networks(stack, torch.full((runs,), 1e2))
    else:
        stack = StackedHeads([[fresh_head(hidden, seed=1)] * runs] * groups)
        train = LabelledInputs(torch.rand(groups, n, hidden, generator=gen), y.expand(groups, 1, n), envs)
        stacked = StackRuns.heads(stack, torch.full((groups, runs), 1e2))
    with PeakCounter() as counter:
        train_stack(stacked, Environments(train), config)
    return counter.peak


def fit_coefficients(kind: str, objective: str, points=None) -> tuple[float, ...]:
    """Least-squares coefficients of :data:`TERMS` ``[kind]`` fitted to peaks counted at
    ``points`` ((n, H, C, G) each; default :data:`FIT_SIZES`)."""
    points = FIT_SIZES[kind] if points is None else points
    rows, peaks = [], []
    for n, h, c, g in points:
        terms = sizes(kind, n, h, c, g)
        rows.append([terms[t] for t in TERMS[kind]])
        peaks.append(measure_stage_peak(kind, objective, n, h, c, g))
    coefficients, *_ = np.linalg.lstsq(np.array(rows, float), np.array(peaks, float), rcond=None)
    return tuple(round(float(k), 3) for k in coefficients)


#: (kind, objective) -> coefficients of TERMS[kind], fitted by :func:`fit_coefficients` on the
#: CPU (featlib 0.4, torch 2.14; ``python -m featlib.training.memory`` prints them again).
#: The comment after each entry: the model over the peak counted at CHECK_SIZE (not fitted), and
#: the modelled step peak in activations at the protocol's size (n 50,000, H 256, C 30; G 12).
PEAK_COEFFICIENTS: dict[tuple[str, str], tuple[float, ...]] = {
    ("mlp", "erm"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "irmv1"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "vrex"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "irmx"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "ib_irm"): (5.0, 1.011, 5.0, 1.003),  # check 1.000, 5.12 activations at the protocol's size
    ("mlp", "clove"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "iga"): (7.493, 7.823, 12.256, 1.006),  # check 1.000, 7.73 activations at the protocol's size
    ("mlp", "fishr"): (5.0, 1.011, 5.0, 1.003),  # check 1.000, 5.12 activations at the protocol's size
    ("mlp", "group_dro"): (4.0, 0.012, 5.001, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("heads", "erm"): (1.018, 3.133, -5.343),  # check 1.002, 1.38 activations at the protocol's size
    ("heads", "irmv1"): (1.017, 4.634, -5.238),  # check 1.001, 1.56 activations at the protocol's size
    ("heads", "vrex"): (1.018, 3.133, -5.343),  # check 1.002, 1.38 activations at the protocol's size
    ("heads", "irmx"): (1.017, 4.635, -5.168),  # check 1.002, 1.56 activations at the protocol's size
    ("heads", "ib_irm"): (1.017, 4.634, -5.238),  # check 1.001, 1.56 activations at the protocol's size
    ("heads", "clove"): (1.035, 26.64, -15.781),  # check 1.001, 4.15 activations at the protocol's size
    ("heads", "iga"): (1.017, 3.634, -3.308),  # check 1.001, 1.44 activations at the protocol's size
    ("heads", "fishr"): (1.979, 5.139, 14.984),  # check 1.003, 2.59 activations at the protocol's size
    ("heads", "group_dro"): (1.017, 3.134, -5.273),  # check 1.002, 1.38 activations at the protocol's size
}


def step_peak_bytes(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1) -> float:
    """The modelled peak of a stack's training beyond its inputs and parameters."""
    key = (kind, objective)
    if key not in PEAK_COEFFICIENTS:
        from ..objectives import OBJECTIVES

        if objective not in OBJECTIVES:
            raise ValueError(f"no counted peak for objective {objective!r} on a {kind} stack: it is no registered "
                             f"objective (registered: {', '.join(OBJECTIVES.names())})")
        # a new objective: its peak is counted now, once per process (seconds, on small stacks)
        PEAK_COEFFICIENTS[key] = fit_coefficients(kind, objective)
    terms = sizes(kind, n, hidden, runs, groups)
    return max(0.0, sum(k * terms[t] for k, t in zip(PEAK_COEFFICIENTS[key], TERMS[kind])))


def stage_bytes(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1) -> float:
    """Bytes a stack's OOD stage needs at its peak: the inputs and the stack's parameters, held
    all along, plus :func:`step_peak_bytes`."""
    terms = sizes(kind, n, hidden, runs, groups)
    resident = terms["P"] + (terms["X"] if kind == "mlp" else terms["F"])
    return resident + step_peak_bytes(kind, objective, n, hidden, runs, groups)


def activations_per_step(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1) -> float:
    """A stack's modelled step peak in activations of the stack (``C n H`` float32 values; for
    frozen features ``G n H``): the unit in which objectives are compared here."""
    terms = sizes(kind, n, hidden, runs, groups)
    return step_peak_bytes(kind, objective, n, hidden, runs, groups) / terms["A" if kind == "mlp" else "F"]


def protocol_bytes(protocol) -> float:
    """The most memory a ColoredMNIST protocol's OOD stage needs at once: the largest of its
    stacks (ERM-NF: one per objective and seed, C configurations on ``n_train`` images; frozen
    features: every (learner, seed) group of an objective in one stack), plus the data
    (training and test images), and one network's training during feature learning."""
    n, h = protocol.n_train, protocol.hidden_dim
    data = 4 * INPUT_DIM * (n + 3 * protocol.n_test)
    groups = len([i for i in protocol.learners if i != "erm-nf"]) * len(protocol.seeds)
    needed = [data + stage_bytes("mlp", "erm", n, h, 1)]  # feature learning: one network
    for objective in protocol.objectives:
        runs = len(protocol.configurations(objective))
        if "erm-nf" in protocol.learners:
            needed.append(data + stage_bytes("mlp", objective, n, h, runs))
        if groups:
            needed.append(data + stage_bytes("heads", objective, n, h, runs, groups))
    return max(needed)


def main() -> None:
    """Measure, fit and print every (kind, objective) entry of :data:`PEAK_COEFFICIENTS`."""
    from ..objectives import OBJECTIVES

    for kind, objective in itertools.product(KINDS, OBJECTIVES.names()):
        coefficients = fit_coefficients(kind, objective)
        n, h, c, g = CHECK_SIZE[kind]
        counted = measure_stage_peak(kind, objective, n, h, c, g)
        PEAK_COEFFICIENTS[(kind, objective)] = coefficients
        modelled = step_peak_bytes(kind, objective, n, h, c, g)
        print(f'    ("{kind}", "{objective}"): {coefficients},  # check {modelled / counted:.3f}, '
              f"{activations_per_step(kind, objective, 50000, 256, 30, 1 if kind == 'mlp' else 12):.2f} "
              f"activations at the protocol's size", flush=True)


if __name__ == "__main__":
    main()
