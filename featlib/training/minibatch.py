"""Minibatch training pieces for the WILDS experiments (Appendix F.2): domain-balanced batches,
the optimiser of Table 11, mixed precision on GPU and resumable checkpoints.

* :class:`DomainBatchSampler` draws each minibatch from ``domains_per_batch`` distinct training
  domains (the "domains in minibatch" row of Table 11), ``batch_size / domains_per_batch``
  examples from each, as the WILDS group loader does (domains drawn with probability
  proportional to their size, examples without replacement unless a domain is too small).
  Batch t depends only on ``(seed, stage, t)``, so a resumed run sees exactly the batches the
  uninterrupted run would have seen.
* :func:`make_optimizer`: Adam or SGD with the dataset's learning rate and weight decay, and
  the cosine schedule with linear warm-up that RxRx1 uses.
* :func:`autocast`: bfloat16 autocast on CUDA, a no-op on CPU.
* :class:`Checkpoint`: one file per run, written atomically (temp file, then rename) every
  ``every`` steps and at the end of each round; a run killed at any point resumes from its last
  checkpoint and loses no finished round.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch


from ..store.files import CacheWarning, CorruptFileError, load_torch, save_state
from ..validation import check_choice, check_int, check_positive


def stream_seed(*parts) -> int:
    """A 63-bit seed from any labels (seed, stage name, step): stable across processes."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


class DomainBatchSampler:
    """Index batches with ``domains_per_batch`` distinct domains each, for steps ``[start, stop)``.

    ``domains``: the training domain of each example (WILDS grouper ids); ``weights`` (optional,
    one per example) restricts sampling to a resampled set (Bonsai's synthesis round) by giving
    each example its multiplicity (0 = never drawn).
    """

    def __init__(self, domains: Sequence[int] | torch.Tensor, batch_size: int, domains_per_batch: int, *,
                 seed: int, stage: str, start: int = 0, stop: int = 0, multiplicity=None):
        domains = np.asarray(torch.as_tensor(domains).cpu())
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        check_int("domains_per_batch", domains_per_batch, minimum=1)
        self.start, self.stop = check_int("start", start, minimum=0), check_int("stop", stop, minimum=0)
        self.seed, self.stage = seed, stage
        pool = np.arange(len(domains))
        if multiplicity is not None:
            pool = np.repeat(pool, np.asarray(multiplicity))
        if len(pool) == 0:
            raise ValueError("the training set to sample from is empty")
        order = np.argsort(domains[pool], kind="stable")  # group by domain in O(n log n)
        sorted_domains = domains[pool][order]
        self.unique, starts = np.unique(sorted_domains, return_index=True)
        self.members = np.split(pool[order], starts[1:])
        sizes = np.array([len(m) for m in self.members], dtype=float)
        self.domain_prob = sizes / sizes.sum()
        self.k = min(domains_per_batch, len(self.unique))
        self.per_domain = [batch_size // self.k + (1 if i < batch_size % self.k else 0) for i in range(self.k)]

    def batch(self, step: int) -> np.ndarray:
        """The example indices of batch ``step`` (deterministic)."""
        rng = np.random.default_rng(stream_seed(self.seed, self.stage, step))
        chosen = rng.choice(len(self.unique), size=self.k, replace=False, p=self.domain_prob)
        parts = [rng.choice(self.members[d], size=n, replace=len(self.members[d]) < n)
                 for d, n in zip(chosen, self.per_domain)]
        return np.concatenate(parts)

    def __iter__(self) -> Iterator[list[int]]:
        for step in range(self.start, self.stop):
            yield self.batch(step).tolist()

    def __len__(self) -> int:
        return max(0, self.stop - self.start)


OPTIMIZERS = ("adam", "sgd")


def make_optimizer(params, name: str, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """Adam or SGD (momentum 0.9, as the WILDS Camelyon17 setup) with Table 11's lr and decay."""
    check_choice("optimizer", name, OPTIMIZERS)
    check_positive("lr", lr)
    check_positive("weight_decay", weight_decay, allow_zero=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)


def make_scheduler(optimizer, name: str | None, total_steps: int, warmup_steps: int | None = None):
    """None, or "cosine_warmup": linear warm-up for ``warmup_steps`` (default 10% of the steps)
    then cosine decay to 0 (the RxRx1 schedule of WILDS)."""
    if name is None:
        return None
    check_choice("scheduler", name, ("cosine_warmup",))
    warmup = max(1, total_steps // 10 if warmup_steps is None else warmup_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def autocast(device: torch.device):
    """bfloat16 mixed precision on CUDA; nothing elsewhere (CPU runs stay in float32)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class Checkpoint:
    """The resumable state of one run, in one file (``torch.save`` of a dict)."""

    def __init__(self, path: str | Path, every: int = 500):
        self.path = Path(path)
        self.every = check_int("checkpoint_every", every, minimum=1)

    def exists(self) -> bool:
        return self.path.exists()

    def load(self) -> dict | None:
        """The saved state; None when there is none, or when the file is damaged (reported by
        path, and the run starts again rather than resuming from it)."""
        if not self.path.exists():
            return None
        try:
            return load_torch(self.path)
        except CorruptFileError as err:
            warnings.warn(f"bad checkpoint {err}; starting this run again", CacheWarning, stacklevel=2)
            return None

    def save(self, state: dict) -> None:
        save_state(self.path, state)

    def due(self, step: int) -> bool:
        """Whether a checkpoint falls after ``step`` steps (counted within the round)."""
        return step > 0 and step % self.every == 0
