"""The numerical precision of the OOD stage as a named choice, looked up in
:data:`PRECISIONS`:

* ``"fp32"``: IEEE float32 matrix products (TF32 switched off for the stage, whatever the
  process-wide setting) -- the precision of every result committed before precision became a choice;
* ``"tf32"``: float32 tensors, matrix products on TF32 tensor cores (10-bit mantissa inputs,
  float32 accumulation). CUDA only: elsewhere there are no TF32 units and the products stay
  float32, so on a CPU ``"tf32"`` computes exactly what ``"fp32"`` does (:meth:`Precision.effective`
  says so for the provenance);
* ``"bf16"``: the forward pass under ``torch.autocast(dtype=torch.bfloat16)``: matrix products
  and the activations they produce in bfloat16, float32 master weights and Adam state; the
  logits are promoted to float32 before the objective, so risks and penalties are float32.

The measured H100 note (``shared/measurements/h100-2026-11-22``) found TF32 moves single runs by
up to 32 points while leaving the best configuration per objective within seed noise: a
precision is judged on Table 2 (best configuration, mean and std over seeds), never run by run.
Every results provenance records the stage's precision (``CMNISTProtocol.precision``).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ..registry import Registry


@dataclass(frozen=True)
class Precision:
    """How the OOD stage computes: TF32 matrix products and/or an autocast dtype."""

    name: str
    description: str
    tf32: bool = False
    autocast_dtype: torch.dtype | None = None

    def effective(self, device: torch.device) -> str:
        """What this precision does on ``device``, in words (for provenance records)."""
        if self.tf32 and device.type != "cuda":
            return f"{self.name}: no TF32 units on {device.type}, float32 matrix products (the same as fp32)"
        return f"{self.name}: {self.description}"

    def check(self, device: torch.device) -> None:
        """A clear error where the device cannot run this precision (bf16 autocast)."""
        if self.autocast_dtype is not None and not torch.amp.is_autocast_available(device.type):
            raise ValueError(f"precision {self.name!r} needs torch.autocast on the device; "
                             f"{device.type} has none: use precision 'fp32'")

    @contextlib.contextmanager
    def matmul_mode(self, device: torch.device) -> Iterator[None]:
        """Inside: TF32 on or off as this precision says (CUDA; nothing to set elsewhere),
        the process-wide setting restored after."""
        if device.type != "cuda":
            yield
            return
        saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = self.tf32
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The context of the forward pass: autocast to :attr:`autocast_dtype`, or nothing."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=self.autocast_dtype)


PRECISIONS: Registry[Precision] = Registry("precision")
for _p in (
    Precision("fp32", "IEEE float32 matrix products (TF32 off)"),
    Precision("tf32", "float32 tensors, TF32 tensor-core matrix products", tf32=True),
    Precision("bf16", "bfloat16 autocast of the forward pass (products and activations), float32 "
                      "weights, optimiser state and objective", autocast_dtype=torch.bfloat16),
):
    PRECISIONS.register(_p.name)(_p)

DEFAULT_PRECISION = "fp32"


def process_precision() -> str:
    """The process-wide float32 matrix-product setting outside any OOD stage ("fp32" or "tf32"),
    which every other computation (feature learning, evaluation) runs under."""
    if torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    mode = torch.get_float32_matmul_precision()
    return "fp32" if mode == "highest" else f"float32_matmul_precision={mode!r}"
