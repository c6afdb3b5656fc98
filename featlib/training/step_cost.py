"""What one step of a stacked OOD stage must cost at least on a device.

:func:`stacked_step_cost` counts the step's work: the floating-point operations of its matrix
products (forward and backward) and the bytes an ideally fused step must still move between
memory and the chip. :func:`measure_matmul_rate` and :func:`measure_copy_bandwidth` measure what
the device achieves (a large matrix product at a given precision; a large copy), and
:meth:`StepCost.floor_seconds` is the time those rates imply: ``max(flops / rate, bytes /
bandwidth)``, the bound no implementation of the step can beat on that device (compute and
memory traffic overlapped perfectly). ``benchmarks/stacked_training.py`` prints each variant's
step time against it.

**FLOPs** (matrix products only; element-wise work is counted as memory traffic). ERM-NF, C
runs of ``Linear(I, H) - ReLU - Linear(H, H) - ReLU - Linear(H, 1)`` on n inputs:

* layer 1: forward ``2 n I C H``; backward the weight gradient only (the inputs are data);
* layer 2: forward ``2 C n H^2``; backward the weight and the input gradients;
* head: forward ``2 C n H``; backward the weight and the input gradients;

so ``4 n I C H + 6 C n H^2 + 6 C n H``. IGA on ERM-NF (``objective="iga"``) adds its per-environment
gradients and their Hessian-vector products (:func:`featlib.objectives.iga.hvp_alignment`: a
first-order gradient on each environment's rows and the pullback of it), ``8 n I C H + 18 C n H^2
+ 18 C n H`` (counted by ``torch.utils.flop_counter``; about 3.5 times the step of the other
objectives at the protocol's shape). Frozen features (G groups of C heads on ``(G, n, H)``
features): ``4 G C n H`` (forward and weight gradient). ``tests/test_fast_ood_stage.py``
checks these counts against ``torch.utils.flop_counter`` on a real step.

**Bytes** of an ideally fused step, per ``(C, n, H)`` activation tensor of A values
(``act_bytes`` each: 4 in float32, 2 in bfloat16): forward, h1 written and read by layer 2, h2
written and read by the head (4 A); backward, h2 read and the masked gradient dA2 written
(2 A), dA2 read by the weight-gradient and input-gradient products (2 A), h1 read by the
weight gradient and by the ReLU mask (2 A), dA1 written and read by layer 1's weight gradient
(2 A), h1's gradient written by layer 2's input-gradient product (1 A): 13 A in all. Plus the
inputs (read twice), a few passes over the ``(C, n)`` logits, and Adam: parameters, gradients
and both moments read and parameters and moments written (7 float32 tensors of the parameters).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from ..validation import check_choice, check_int
from .precision import PRECISIONS

ACTIVATION_PASSES = 13
LOGIT_PASSES = 8
ADAM_PASSES = 7
KINDS = ("mlp", "heads")


@dataclass(frozen=True)
class StepCost:
    """The work of one step: matrix-product FLOPs and bytes moved (ideally fused)."""

    flops: float
    bytes: float

    def floor_seconds(self, matmul_flops_per_s: float, bytes_per_s: float) -> float:
        """The step's lower bound on a device with these achieved rates."""
        return max(self.flops / matmul_flops_per_s, self.bytes / bytes_per_s)


def stacked_step_cost(kind: str, n: int, hidden: int, runs: int, groups: int = 1, input_dim: int = 392,
                      act_bytes: int = 4, objective: str | None = None) -> StepCost:
    """The cost of one full-batch step of a stack: ``kind="mlp"`` (ERM-NF: ``runs`` whole MLPs on
    n inputs of ``input_dim``) or ``"heads"`` (``groups`` x ``runs`` heads on frozen features).
    ``objective="iga"`` on ``"mlp"`` counts IGA's extra products (bytes: those of the step)."""
    check_choice("kind", kind, KINDS)
    for name, value in (("n", n), ("hidden", hidden), ("runs", runs), ("groups", groups), ("input_dim", input_dim)):
        check_int(name, value, minimum=1)
    check_choice("act_bytes", act_bytes, (2, 4))
    c, h = runs, hidden
    if kind == "mlp":
        flops = 4 * n * input_dim * c * h + 6 * c * n * h * h + 6 * c * n * h
        if objective == "iga":
            flops += 8 * n * input_dim * c * h + 18 * c * n * h * h + 18 * c * n * h
        params = c * (input_dim * h + h + h * h + h + h + 1)
        moved = (ACTIVATION_PASSES * c * n * h * act_bytes + 2 * n * input_dim * 4
                 + LOGIT_PASSES * c * n * 4 + ADAM_PASSES * params * 4)
        return StepCost(float(flops), float(moved))
    flops = 4 * groups * c * n * h
    params = groups * c * (h + 1)
    moved = 2 * groups * n * h * 4 + LOGIT_PASSES * groups * c * n * 4 + ADAM_PASSES * params * 4
    return StepCost(float(flops), float(moved))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_seconds(fn, device: torch.device, repeats: int, inner: int) -> float:
    fn()  # warm-up (allocation, kernel selection)
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        _sync(device)
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def measure_matmul_rate(device: torch.device, precision: str = "fp32", size: int | None = None,
                        repeats: int = 5) -> float:
    """Achieved FLOP/s of a ``size x size`` matrix product (default 8192 on a GPU, 1024
    elsewhere) at ``precision`` (:mod:`.precision`: TF32 on or off, bf16 autocast)."""
    chosen = PRECISIONS.get(precision)
    chosen.check(device)
    size = size or (8192 if device.type == "cuda" else 1024)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)

    def product():
        with chosen.autocast(device):
            return a @ b

    with chosen.matmul_mode(device):
        seconds = _median_seconds(product, device, repeats, inner=3 if device.type == "cuda" else 1)
    return 2 * size**3 / seconds


def measure_copy_bandwidth(device: torch.device, megabytes: int | None = None, repeats: int = 5) -> float:
    """Achieved bytes/s of a large device-to-device copy (bytes read plus bytes written), default
    1 GiB on a GPU and 256 MiB elsewhere."""
    megabytes = megabytes or (1024 if device.type == "cuda" else 256)
    src = torch.empty(megabytes * 2**20 // 4, device=device)
    src.uniform_()
    dst = torch.empty_like(src)
    seconds = _median_seconds(lambda: dst.copy_(src), device, repeats, inner=3 if device.type == "cuda" else 1)
    return 2 * src.numel() * 4 / seconds
