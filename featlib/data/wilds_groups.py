"""WILDS' grouped averages in plain torch, so that no notebook has to compile ``torch-scatter``.

The official WILDS metrics (``dataset.eval``; the paper's Table 3, Sec. 6) average a per-example
metric over groups (CivilComments' identity x label groups, FMoW's regions, ...). ``wilds`` 2.0
does it in exactly one place, ``wilds.common.utils.avg_over_groups``, and that is its only use of
the ``torch_scatter`` package, which it does not declare: ::

    group_avgs = torch_scatter.scatter(src=v, index=g, dim_size=n_groups, reduce='mean')

``torch-scatter`` ships prebuilt wheels only for some torch/CUDA pairs, and elsewhere (Colab's
runtime, whenever its torch is newer than PyG's wheel index) pip builds it from source, which fails
under build isolation and takes minutes without. This module computes the same average with
``torch.Tensor.index_add_`` (a group without members averages to 0, as ``torch_scatter``'s mean
does), and :func:`use_torch_group_average` puts it in place of ``avg_over_groups`` in the ``wilds``
modules that imported it. featlib does this whenever it loads or scores a WILDS dataset
(:mod:`featlib.data.wilds_data`), with ``torch_scatter`` installed or not, so every runtime scores
with the same code.
"""
from __future__ import annotations

import importlib

import torch

#: The wilds modules that bind ``avg_over_groups`` (``from wilds.common.utils import ...``).
WILDS_MODULES = ("wilds.common.utils", "wilds.common.metrics.metric", "wilds.common.metrics.all_metrics",
                 "wilds.common.metrics.loss")


def group_mean(values: torch.Tensor, groups: torch.Tensor, n_groups: int) -> torch.Tensor:
    """The mean of ``values`` over each group ``0 .. n_groups - 1`` (0 for an empty group);
    ``torch_scatter.scatter(values, groups, dim_size=n_groups, reduce='mean')`` for 1-D inputs."""
    if values.dim() != 1 or groups.shape != values.shape:
        raise ValueError(f"values and groups must be 1-D tensors of the same length; got shapes "
                         f"{tuple(values.shape)} and {tuple(groups.shape)}")
    groups = groups.long()
    dtype = values.dtype if values.is_floating_point() else torch.get_default_dtype()
    sums = torch.zeros(n_groups, dtype=dtype, device=values.device).index_add_(0, groups, values.to(dtype))
    counts = torch.zeros(n_groups, dtype=dtype, device=values.device).index_add_(
        0, groups, torch.ones_like(values, dtype=dtype))
    means = sums / counts.clamp(min=1)
    return means if values.is_floating_point() else means.to(values.dtype)


def avg_over_groups(v: torch.Tensor, g: torch.Tensor, n_groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``wilds.common.utils.avg_over_groups`` without ``torch_scatter``: each group's average of
    ``v`` and each group's size (as floats, like wilds' ``get_counts``)."""
    if v.device != g.device or v.numel() != g.numel():
        raise ValueError("v and g must be on the same device and hold one group per value")
    counts = torch.zeros(n_groups, device=g.device)
    found, found_counts = torch.unique(g, sorted=False, return_counts=True)
    counts[found] = found_counts.float()
    return group_mean(v, g, n_groups), counts


def use_torch_group_average() -> list[str]:
    """Make the imported ``wilds`` metric modules use :func:`avg_over_groups`; the modules patched.
    Idempotent; importing them here is what makes later imports of wilds see the patch too."""
    patched = []
    for name in WILDS_MODULES:
        module = importlib.import_module(name)
        if getattr(module, "avg_over_groups", None) is not avg_over_groups:
            module.avg_over_groups = avg_over_groups
        patched.append(name)
    return patched
