"""Why a cost measurement on fabricated images may stand beside the paper's Table 14 (chapter 07):
the benchmark's training step does the same computation, operation by operation and shape by shape,
whatever the images' pixels are, and so whatever the sets FeAT and Bonsai derive from the model's
predictions contain. No time is measured here: the test records every tensor operation a run
dispatches, with its input shapes and dtypes, on two different contents of the same images, and
compares the two records."""
import contextlib
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from featlib.cost import CostSettings, WildsCost
from featlib.training.profiling import recording

CPU = torch.device("cpu")


class _Ops(TorchDispatchMode):
    """Every aten operation dispatched: its name and the shape and dtype of each tensor argument."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = torch.utils._pytree.tree_leaves((args, kwargs))
        self.ops.append((str(func), tuple((tuple(a.shape), str(a.dtype)) for a in flat if isinstance(a, torch.Tensor))))
        return func(*args, **kwargs)


class _Repainted(torch.utils.data.Dataset):
    """A split with the same examples, labels and domains, its images replaced by ``paint(x)``."""

    def __init__(self, subset, paint):
        self.subset, self.paint = subset, paint

    def __len__(self):
        return len(self.subset)

    def __getitem__(self, i):
        x, y, meta = self.subset[i]
        return self.paint(x, i), y, meta

    def __getattr__(self, name):  # metadata, groupers: the split's own
        return getattr(self.__dict__["subset"], name)


class _Steps:
    """A step observer (:func:`featlib.training.profiling.recording`, what the cost benchmark's
    recorder is): the operations of each training step, the steps the benchmark times, by stage."""

    def __init__(self):
        self.steps = []

    @contextlib.contextmanager
    def step(self, stage, device):
        with _Ops() as ops:
            yield
        self.steps.append((stage, ops.ops))


def _record(case: WildsCost, learner: str, paint, scratch: Path) -> list:
    data = case._experiment.data
    original = dict(data.splits)
    data.splits.update({k: _Repainted(v, paint) for k, v in original.items()})
    try:
        with recording(_Steps()) as steps:
            case.run(learner, CostSettings(learners=("erm", learner), rounds=3, steps=3, warmup=0, repeats=1),
                     CPU, scratch)
    finally:
        data.splits.update(original)
    return steps.steps


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    wilds = WildsCost(root=str(tmp_path_factory.mktemp("wilds")), backbone="small_cnn", resolution=32, batch_size=8)
    wilds.prepare(CPU)
    return wilds


def _noise(x, i):
    return torch.rand(x.shape, generator=torch.Generator().manual_seed(int(i)), dtype=x.dtype)


def _on_matrices(steps: list) -> list:
    """Each step's operations with a tensor of two or more dimensions: the network's forward, backward
    and update, without the arithmetic on vectors of per-example losses."""
    return [(stage, [op for op in ops if any(len(shape) >= 2 for shape, _ in op[1])]) for stage, ops in steps]


@pytest.mark.parametrize("learner", ["erm", "ifeat", "feat", "bonsai"])
def test_a_step_does_the_same_operations_on_the_same_shapes_whatever_the_pixels(case, learner, tmp_path):
    """Fabricated images against their negative and against uniform noise: the same operations on
    the same shapes, step after step and round after round. The sets of FeAT's later rounds come
    from the model's predictions, so from the pixels, and enter a step as a membership matrix of
    fixed shape, not as a batch of varying size: ERM's, FeAT's and iFeAT's steps are the same to the
    last operation. Bonsai's DRO rounds take the worst of the groups present in the batch, so how
    many groups a batch meets changes a few operations on the batch's vector of losses (8 numbers
    here, 32 in the paper's batch); the network's forward, backward and update are the same."""
    as_made = _record(case, learner, lambda x, i: x, tmp_path / "a")
    assert len(as_made) == {"erm": 1, "bonsai": 4}.get(learner, 3) * 3 and all(len(ops) > 20 for _, ops in as_made)
    for paint, where in ((lambda x, i: 1 - x, "b"), (_noise, "c")):
        repainted = _record(case, learner, paint, tmp_path / where)
        if learner == "bonsai":
            assert _on_matrices(repainted) == _on_matrices(as_made)
        else:
            assert repainted == as_made


def test_the_record_sees_what_does_change_a_steps_cost(case, tmp_path):
    """The comparison above can fail: a batch of another size or images of another side give
    another record."""
    import dataclasses

    as_made = _record(case, "ifeat", lambda x, i: x, tmp_path / "a")
    smaller = dataclasses.replace(case, batch_size=4)
    smaller.prepare(CPU)
    assert _record(smaller, "ifeat", lambda x, i: x, tmp_path / "b") != as_made
    cropped = _record(case, "ifeat", lambda x, i: torch.nn.functional.interpolate(x[None], size=16)[0], tmp_path / "c")
    assert cropped != as_made

