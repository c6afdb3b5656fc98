"""Per-step wall time and peak memory of real training steps (the measuring half of the cost benchmark, chapter 07).

:class:`StepRecorder` plugs into :func:`featlib.training.profiling.recording`; every optimiser step of a
feature learner then passes through :meth:`StepRecorder.step` with its stage name. Per stage:

* the first ``warmup`` steps run untouched (allocator warm-up, lazy initialisation, caches);
* the next step, when ``memory`` is on, measures the step's **peak memory**, not its time
  (the memory tracker slows the step down): on CUDA ``torch.cuda.max_memory_allocated`` after
  ``reset_peak_memory_stats``; on the CPU the peak of live tensor bytes followed by
  :class:`LiveTensorBytes` (a dispatch mode), which starts from every tensor already alive
  (data, parameters, optimiser state, stored heads, FeAT's sets), so both devices report the
  same quantity: all tensor memory live at the step's worst moment;
* every later step is **timed**: ``time.perf_counter`` read after ``torch.cuda.synchronize`` on
  GPU, so queued kernels are counted in the step that launched them.

Data loading happens outside the step (the WILDS loader runs between steps) and is not counted.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import statistics
import time
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only
from torch.utils.weak import WeakIdKeyDictionary

from ..validation import check_bool, check_int


@dataclass
class StageMeasure:
    """What the recorder saw of one training stage ("feat round 2", "Bonsai synthesis", ...)."""

    stage: str
    steps: int = 0  # all steps run, warm-up included
    seconds: list[float] = field(default_factory=list)  # the timed steps
    peak_bytes: int | None = None

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _is_fake(t: torch.Tensor) -> bool:
    """A fake tensor (torch.compile's tracing keeps some alive): shapes without memory."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _is_tensor(o) -> bool:
    try:
        return isinstance(o, torch.Tensor)
    except ReferenceError:  # a weakref.proxy whose object is gone (torch.compile leaves some)
        return False


def live_tensors() -> list[torch.Tensor]:
    """Every tensor reachable by the garbage collector (what is allocated before a step)."""
    with warnings.catch_warnings():  # touching some torch.distributed names warns about deprecation
        warnings.simplefilter("ignore")
        return [o for o in gc.get_objects() if _is_tensor(o)]


class LiveTensorBytes(TorchDispatchMode):
    """The bytes of tensor storage alive on one device, and their peak, while the mode is on.

    Starts from ``existing`` (the tensors alive before), adds the storage of every tensor an
    operator returns (views share their base's storage and are counted once) and subtracts it
    when the storage is freed (a weak-reference callback). This is what a caching allocator's
    ``max_memory_allocated`` reports on a GPU, without the rounding to allocator blocks."""

    def __init__(self, device_type: str, existing: list[torch.Tensor] = ()):
        super().__init__()
        self.device_type = device_type
        self.current = 0
        self.peak = 0
        self._refs = WeakIdKeyDictionary()
        for t in existing:
            self._add(t)

    def _add(self, t: torch.Tensor) -> None:
        if t.device.type != self.device_type or t.is_meta or _is_fake(t):
            return
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # tensor subclasses without storage
            return
        if storage in self._refs:
            return
        size = storage.nbytes()
        if not isinstance(size, int):  # a symbolic size (what torch.compile traced with): no memory
            return
        self.current += size
        self.peak = max(self.peak, self.current)
        self._refs[storage] = weakref.ref(storage, functools.partial(self._freed, size))

    def _freed(self, size: int, _ref) -> None:
        self.current -= size

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tree_map_only(torch.Tensor, self._add, out)
        return out


class PeakMemory:
    """Context manager: ``bytes`` is the peak of live tensor memory on ``device`` inside the block
    (None for devices other than CUDA and the CPU)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.bytes: int | None = None
        self._mode: LiveTensorBytes | None = None

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            _sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.device.type == "cpu":
            self._mode = LiveTensorBytes("cpu", live_tensors())
            self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            _sync(self.device)
            self.bytes = int(torch.cuda.max_memory_allocated(self.device))
        elif self._mode is not None:
            self._mode.__exit__(*exc)
            self.bytes = self._mode.peak
            self._mode = None


class StepRecorder:
    """Times and measures the steps sent to it by :func:`featlib.training.profiling.training_step`."""

    def __init__(self, warmup: int = 2, memory: bool = True):
        self.warmup = check_int("warmup", warmup, minimum=0)
        self.memory = check_bool("memory", memory)
        self.stages: dict[str, StageMeasure] = {}

    @contextlib.contextmanager
    def step(self, stage: str, device: torch.device) -> Iterator[None]:
        measure = self.stages.setdefault(stage, StageMeasure(stage))
        index = measure.steps
        measure.steps += 1
        if index < self.warmup:
            yield
        elif self.memory and index == self.warmup:
            with PeakMemory(device) as peak:
                yield
            measure.peak_bytes = peak.bytes
        else:
            _sync(device)
            start = time.perf_counter()
            yield
            _sync(device)
            measure.seconds.append(time.perf_counter() - start)

    def min_steps(self) -> int:
        """Steps a stage needs for at least one timed step."""
        return self.warmup + (2 if self.memory else 1)
