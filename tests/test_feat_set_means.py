"""FeATRounds.loss (Eq. 7) by one segmented reduction over the set memberships equals the
per-set masked means it replaced, values and gradients, full batch and minibatches."""
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from featlib.feature_learning.feat_rounds import FeATRounds, batch_mean, set_means

N = 97


def reference_loss(rounds: FeATRounds, per_sample, retained_per_sample, index=None):
    """Eq. (7) written as it was before the segmented reduction: one masked mean per set, empty sets left out."""
    def members(mask):
        return (mask if index is None else mask[index]).to(per_sample.dtype)

    augment = [batch_mean(per_sample, members(a)) for a in rounds.aug_sets]
    augment = [r for r in augment if r is not None] or [per_sample.mean()]
    loss = torch.stack(augment).max()
    retain = [batch_mean(v, members(m)) for (m, _), v in zip(rounds.retention, retained_per_sample)]
    retain = [r for r in retain if r is not None]
    if retain:
        loss = loss + rounds.retain_weight * torch.stack(retain).sum()
    return loss


def rounds_after(variant: str, k: int, seed: int, keep_full_set: bool = True) -> FeATRounds:
    """A FeATRounds after k - 1 accepted rounds with random splits of N examples."""
    gen = torch.Generator().manual_seed(seed)
    rounds = FeATRounds(N, variant, retain_weight=0.3, keep_full_set=keep_full_set)
    for _ in range(k - 1):
        splitter = rounds.accept(nn.Linear(3, 1))
        rounds.split(splitter, torch.rand(N, generator=gen) < 0.6)
    return rounds


@pytest.mark.parametrize("variant, k, keep", [("feat", 1, True), ("feat", 4, True), ("ifeat", 3, True),
                                               ("ifeat", 3, False)])
@pytest.mark.parametrize("batch", [None, 5, 40])
def test_segmented_loss_equals_per_set_masked_means(variant, k, keep, batch):
    rounds = rounds_after(variant, k, seed=k, keep_full_set=keep)
    gen = torch.Generator().manual_seed(100 + k)
    size = N if batch is None else batch
    index = None if batch is None else torch.randperm(N, generator=gen)[:batch]
    per_sample = torch.rand(size, generator=gen, dtype=torch.float64).requires_grad_()
    retained = [torch.rand(size, generator=gen, dtype=torch.float64).requires_grad_() for _ in rounds.retention]
    got = rounds.loss(per_sample, retained, index)
    want = reference_loss(rounds, per_sample, retained, index)
    assert torch.allclose(got, want, rtol=1e-13, atol=0)
    leaves = [per_sample, *retained]
    for g, w in zip(torch.autograd.grad(got, leaves), torch.autograd.grad(want, leaves)):
        assert torch.allclose(g, w, rtol=1e-12, atol=1e-15)


def test_a_batch_missing_some_sets_leaves_them_out():
    """iFeAT without D^a_0: a batch inside D^r only has no augmentation member (batch mean
    instead) and a set with no member adds nothing to the retention sum."""
    rounds = FeATRounds(6, "ifeat", retain_weight=0.5, keep_full_set=False)
    splitter = rounds.accept(nn.Linear(3, 1))
    correct = torch.tensor([True, True, True, False, False, False])
    rounds.split(splitter, correct)
    values = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    retained = [torch.tensor([10.0, 20.0, 30.0, 40.0], dtype=torch.float64)]
    inside_retention = torch.tensor([0, 1, 2, 0])
    assert rounds.loss(values, retained, inside_retention).item() == pytest.approx(2.5 + 0.5 * 25.0)
    outside = torch.tensor([3, 4, 5, 3])
    assert rounds.loss(values, retained, outside).item() == pytest.approx(2.5)  # D^r has no member: adds 0


def test_set_means_by_hand():
    masks = [torch.tensor([True, False, True, False]), torch.tensor([False, False, False, False])]
    means, present = set_means(torch.tensor([1.0, 2.0, 5.0, 7.0]), masks)
    assert means.tolist() == [3.0, 0.0] and present.tolist() == [True, False]
    rows = torch.tensor([[1.0, 5.0, 6.0], [1.0, 2.0, 3.0]])  # batch = examples 0, 2, 2
    means, present = set_means(rows, [masks[0], ~masks[1]], torch.tensor([0, 2, 2]))
    assert torch.allclose(means, torch.tensor([4.0, 2.0])) and present.all()


class _CountOps(TorchDispatchMode):
    """Counts the aten operators a block runs and those that read a value back to the host."""

    def __init__(self):
        super().__init__()
        self.ops, self.host_reads = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        if func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.is_nonzero.default):
            self.host_reads += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("batch", [None, 40])
def test_loss_costs_the_same_operators_whatever_the_number_of_sets(batch):
    """The per-set loop launched a handful of operators and one host read per set; the segmented
    reduction runs a fixed number (forward and backward) and never reads back to the host."""
    counts = {}
    for k in (2, 5):
        rounds = rounds_after("feat", k, seed=k)  # 2k - 1 sets
        index = None if batch is None else torch.arange(batch)
        size = N if batch is None else batch
        per_sample = torch.rand(size, requires_grad=True)
        retained = [torch.rand(size, requires_grad=True) for _ in rounds.retention]
        with _CountOps() as counter:
            rounds.loss(per_sample, retained, index).backward()
        counts[k] = counter.ops
        assert counter.host_reads == 0
        with _CountOps() as reference:
            reference_loss(rounds, per_sample, retained, index).backward()
        assert reference.host_reads == 2 * k - 1  # one per set: what the segmented reduction removed
    assert counts[5] - counts[2] <= 8  # (stacking more masks costs a few more inputs, not more passes)
