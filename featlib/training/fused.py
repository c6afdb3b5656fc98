"""The hidden layers' ``relu(x + b)`` for the fast OOD stage, looked up by name.

In eager PyTorch ``relu(x + b)`` is two passes over a ``(C, n, H)`` activation (write the sum,
read it and write the ReLU), and its backward two more. On the ERM-NF stack every such tensor
is 30 x 50,000 x 256 values, and these element-wise passes, not the matrix products, are where
the H100 step lost its time (``shared/measurements/h100-2026-11-22``). Registered:

* ``"eager"``: None -- the plain path's own expressions (``relu(first + b1)``,
  ``relu(baddbmm(b2, h, w2))``), unchanged;
* ``"compiled"``: ``relu(x + b)`` compiled by ``torch.compile`` (inductor): one fused pass
  forward and one backward, with dynamic shapes so every stack size uses the same kernels.

The ``"compiled"`` OOD paths compile the whole loss, which fuses these passes (and more) anyway.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ..registry import Registry

#: name -> factory of ``bias_relu(x, b)`` (None: the plain path's expressions).
BIAS_RELU: Registry[Callable[[], Callable | None]] = Registry("bias_relu")


def bias_relu_eager(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x + b)


@BIAS_RELU.register("eager")
def _eager():
    return None


@BIAS_RELU.register("compiled")
@functools.cache
def _compiled():
    return torch.compile(bias_relu_eager, dynamic=True)


def make_bias_relu(name: str) -> Callable | None:
    """The ``bias_relu`` registered as ``name`` (one compiled function per process)."""
    return BIAS_RELU.get(name)()
