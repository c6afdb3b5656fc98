"""The numerical precision of the OOD stage as a named choice, looked up in
:data:`PRECISIONS`:

* ``"fp32"``: IEEE float32 matrix products (TF32 switched off for the stage, whatever the
  process-wide setting) -- the precision of every result committed before precision became a choice;
* ``"tf32"``: float32 tensors, matrix products on TF32 tensor cores (10-bit mantissa inputs,
  float32 accumulation). CUDA only: elsewhere there are no TF32 units and the products stay
  float32, so on a CPU ``"tf32"`` computes exactly what ``"fp32"`` does (:meth:`Precision.effective`
  says so for the provenance);
* ``"bf16"``: bfloat16 where it pays, float32 where it matters. The featurizer's matrix products and
  the activations they produce are bfloat16 (``torch.autocast``; the biases are cast to the
  product's dtype, so no bias add promotes an activation back to float32), and the fast path stores
  the images once in bfloat16. The linear head computes in float32 outside autocast
  (:func:`featlib.models.stacked.head_product`): we measured bfloat16 logits taking about
  2,100 distinct values on 25,000 images and moving CLOvE's gradient by 5.7%. The objective, the
  master weights and Adam's state are float32 too. Frozen-feature stacks are heads only: their
  features stay float32, stored once, and bf16 computes there exactly what fp32 does.

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

from ..store.provenance import add_process_recorder
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
        """Inside: the float32 matrix products (and cuDNN convolutions) of ``device`` in TF32 or
        in IEEE float32 as this precision says, set through torch's current API
        (:func:`backend_settings`), the previous settings restored after (as the values they
        had: torch reads a setting inherited from ``torch.backends.fp32_precision`` as that
        value, and it is restored as such). On a CPU, "tf32" is
        IEEE float32 too (no TF32 units), so oneDNN's products are held to IEEE there as well."""
        wanted = "tf32" if self.tf32 and device.type == "cuda" else "ieee"
        settings = backend_settings(device)
        saved = [(backend, backend.fp32_precision) for backend in settings]
        try:
            for backend in settings:
                backend.fp32_precision = wanted
            yield
        finally:
            for backend, value in saved:
                backend.fp32_precision = value

    def stored(self, inputs: torch.Tensor) -> torch.Tensor:
        """The inputs of a featurizer's first product as the stage keeps them: in the autocast
        dtype (cast once: autocast would cast them on every step), unchanged otherwise."""
        if self.autocast_dtype is None or not inputs.is_floating_point():
            return inputs
        return inputs.to(self.autocast_dtype)

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        """The context of the forward pass: autocast to :attr:`autocast_dtype`, or nothing."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=self.autocast_dtype)


PRECISIONS: Registry[Precision] = Registry("precision")
for _p in (
    Precision("fp32", "IEEE float32 matrix products (TF32 off)"),
    Precision("tf32", "float32 tensors, TF32 tensor-core matrix products", tf32=True),
    Precision("bf16", "bfloat16 featurizer products and activations (autocast), float32 head, objective, "
                      "weights and optimiser state", autocast_dtype=torch.bfloat16),
):
    PRECISIONS.register(_p.name)(_p)

DEFAULT_PRECISION = "fp32"


def backend_settings(device: torch.device) -> list:
    """The ``torch.backends`` objects whose ``fp32_precision`` decides the float32 matrix
    products of ``device``: cuBLAS and cuDNN's convolutions on CUDA, oneDNN's matmul and
    convolutions elsewhere. This is torch's current API (torch >= 2.9): once anything in the
    process has set it, the legacy ``allow_tf32`` flags and ``torch.get_float32_matmul_precision()``
    raise when read, so featlib reads and writes the precision only through it."""
    if device.type == "cuda":
        return [torch.backends.cuda.matmul, torch.backends.cudnn.conv]
    return [torch.backends.mkldnn.matmul, torch.backends.mkldnn.conv]


def process_precision() -> str:
    """The process-wide float32 matrix-product setting outside any OOD stage, which every other
    computation (feature learning, evaluation) runs under: "fp32" (IEEE everywhere), "tf32"
    (cuBLAS products in TF32), or the settings themselves where they are anything else. Read
    through torch's current ``fp32_precision`` API (:func:`backend_settings`), which never raises."""
    cuda = torch.backends.cuda.matmul.fp32_precision
    cpu = torch.backends.mkldnn.matmul.fp32_precision
    if cuda in ("ieee", "none") and cpu in ("ieee", "none"):
        return "fp32"
    if cuda == "tf32" and cpu in ("ieee", "none", "tf32"):
        return "tf32"
    return f"cuda matmul {cuda}, cpu matmul {cpu}"


@add_process_recorder
def _precision_record() -> dict:
    """``float32_matmul`` of every provenance record (:func:`featlib.store.provenance.provenance`)."""
    return {"float32_matmul": process_precision()}
