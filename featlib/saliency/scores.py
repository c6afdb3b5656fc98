"""Class scores, targets and eval-mode bookkeeping shared by every attribution (Sec. 6, App. F.4).

Captum attributes one output column per example, so every model is first put in the form
``(n, C)`` scores by :func:`class_scores`. The ColoredMNIST models (Fig. 4, Fig. 5) emit one
binary logit ``z`` per example; their scores are ``(-z/2, z/2)``, whose softmax is
``sigmoid(z)`` for class 1, so the class-1-minus-class-0 difference is exactly ``z``. An
attribution to class ``t`` of a binary model therefore explains *half* the logit,
``+z/2`` for ``t = 1`` and ``-z/2`` for ``t = 0``. WILDS models (Figs. 6-12) already emit
``(n, C)`` logits and are left unchanged.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn


class ClassScores(nn.Module):
    """``model`` with its output put in the ``(n, C)`` class-score form Captum attributes.

    A ``(n,)`` (or ``(n, 1)``) binary logit ``z`` becomes ``stack([-z/2, z/2], -1)``; a
    ``(n, C)`` output with ``C >= 2`` is returned as it is."""

    def __init__(self, model: nn.Module):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = self.model(*inputs)
        if out.dim() == 2 and out.shape[1] == 1:
            out = out.squeeze(1)
        if out.dim() == 1:
            half = out / 2
            return torch.stack((-half, half), dim=-1)
        if out.dim() == 2:
            return out
        raise ValueError(f"model must return (n,) binary logits or (n, C) class scores; got shape {tuple(out.shape)}")


def class_scores(model: nn.Module) -> ClassScores:
    """``model`` wrapped so that its forward returns ``(n, C)`` class scores (see :class:`ClassScores`)."""
    return model if isinstance(model, ClassScores) else ClassScores(model)


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """Run a block with ``model.eval()`` and gradients enabled; restore every submodule's mode after.

    Attributions explain the deployed (eval-mode) function: dropout off, batch norm on its
    running statistics. Each submodule's own flag is restored, so a model whose parts were in
    mixed modes (a frozen, eval-mode featurizer inside a training model) comes back as it was."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        with torch.enable_grad():
            yield model
    finally:
        for module, training in modes:
            module.training = training


def model_device_dtype(model: nn.Module) -> tuple[torch.device, torch.dtype]:
    """The device of ``model``'s first parameter or buffer (CPU if none) and its floating dtype."""
    for tensor in list(model.parameters()) + list(model.buffers()):
        if tensor.is_floating_point():
            return tensor.device, tensor.dtype
    for tensor in list(model.parameters()) + list(model.buffers()):
        return tensor.device, torch.get_default_dtype()
    return torch.device("cpu"), torch.get_default_dtype()


def as_float_batch(name: str, x: Any, model: nn.Module, min_dim: int = 2) -> torch.Tensor:
    """``x`` (tensor or array, at least ``min_dim`` dims, n >= 1) as a detached float tensor on ``model``'s device."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor or numpy array; got {type(x).__name__}")
    if x.dim() < min_dim or x.shape[0] < 1:
        raise ValueError(f"{name} must be a batch with at least {min_dim} dimensions and one example; "
                         f"got shape {tuple(x.shape)}")
    device, dtype = model_device_dtype(model)
    x = x.detach().to(device=device, dtype=dtype)
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def resolve_targets(scores: nn.Module, inputs: tuple[torch.Tensor, ...], target: Any,
                    additional_forward_args: tuple = ()) -> torch.Tensor:
    """Target classes as a LongTensor ``(n,)``: ``None`` -> the predicted class (argmax score).

    ``target`` may be one class index for all examples or one per example (list, array,
    tensor); every index must lie in ``[0, C)`` where ``C`` is the number of score columns."""
    with torch.no_grad():
        out = scores(*inputs, *additional_forward_args)
    n, n_classes = out.shape
    if target is None:
        return out.argmax(dim=1)
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
        values = torch.full((n,), int(target), dtype=torch.long)
    else:
        array = np.asarray(target.detach().cpu() if isinstance(target, torch.Tensor) else target)
        if array.shape != (n,) or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"target must be None, a class index or {n} class indices (one per example); "
                             f"got {target!r}")
        values = torch.as_tensor(array, dtype=torch.long)
    if (values < 0).any() or (values >= n_classes).any():
        raise ValueError(f"target must be a class index in [0, {n_classes - 1}]; got {target!r}")
    return values.to(out.device)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A detached CPU float copy of ``t`` as a numpy array."""
    return t.detach().cpu().float().numpy() if t.dtype in (torch.float16, torch.bfloat16) else t.detach().cpu().numpy()
