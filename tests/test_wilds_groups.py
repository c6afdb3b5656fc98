"""WILDS' grouped averages in plain torch (featlib.data.wilds_groups)."""
from __future__ import annotations

import sys

import pytest
import torch

from featlib.data.wilds_groups import WILDS_MODULES, avg_over_groups, group_mean, use_torch_group_average


def test_group_mean_is_each_groups_average_and_zero_for_empty_groups():
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 10.0])
    groups = torch.tensor([0, 0, 2, 2, 2])
    means, counts = avg_over_groups(values, groups, 4)
    assert means.tolist() == pytest.approx([1.5, 0.0, 17 / 3, 0.0])
    assert counts.tolist() == [2.0, 0.0, 3.0, 0.0]


def test_group_mean_matches_torch_scatter_where_it_is_installed():
    torch_scatter = pytest.importorskip("torch_scatter")
    gen = torch.Generator().manual_seed(0)
    values = torch.rand(500, generator=gen)
    groups = torch.randint(0, 17, (500,), generator=gen)
    groups[groups == 5] = 6  # an empty group
    expected = torch_scatter.scatter(src=values, index=groups, dim_size=20, reduce="mean")
    assert torch.allclose(group_mean(values, groups, 20), expected)


def test_group_mean_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="same length"):
        group_mean(torch.zeros(3), torch.zeros(4, dtype=torch.long), 2)


def test_wilds_metrics_use_it_without_torch_scatter(monkeypatch):
    pytest.importorskip("wilds")
    from featlib.data.wilds_data import import_wilds

    monkeypatch.setitem(sys.modules, "torch_scatter", None)  # `import torch_scatter` raises
    import_wilds()
    assert use_torch_group_average() == list(WILDS_MODULES)
    from wilds.common.metrics.all_metrics import Accuracy

    y_true = torch.tensor([0, 1, 1, 0, 1, 0])
    y_pred = torch.tensor([0, 1, 0, 0, 0, 1])
    g = torch.tensor([0, 0, 1, 1, 2, 2])
    group_acc, counts, worst = Accuracy()._compute_group_wise(y_pred, y_true, g, 4)
    assert group_acc.tolist() == pytest.approx([1.0, 0.5, 0.0, 0.0])
    assert counts.tolist() == [2.0, 2.0, 2.0, 0.0]
    assert worst.item() == 0.0
