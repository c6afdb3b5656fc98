"""Benchmark: IB-IRM on frozen features, the bottleneck term computed once per stack against
recomputed every step (:meth:`featlib.objectives.ib_irm.IBIRM.bottleneck`).

On a frozen featurizer the features are constants, so IB-IRM's variance term is a constant too
(Table 2's frozen columns list IB-IRM beside IRMv1 for that reason). Recomputing it every step
reads the whole feature matrix twice per environment; at the protocol's shape (50,000 images,
H = 256, 30 heads) that is about as long as the heads' own forward and backward pass on a CPU.
Prints the time of one ``train_stack`` call per variant, interleaved over ``--repeats`` so a
drift of the machine hits both alike, and the ratio of the medians; no target is asserted.

    .venv/bin/python benchmarks/ib_irm_frozen.py                    # protocol shape, 100 steps
    .venv/bin/python benchmarks/ib_irm_frozen.py --n-train 5000 --steps 50
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from featlib.device import get_device
from featlib.models import StackedHeads, fresh_head
from featlib.objectives import ib_irm
from featlib.training import Environments, LabelledInputs, OODStageConfig, StackRuns, train_stack


def recomputed(self, features):
    """The bottleneck term as it was before the cache: computed at every call."""
    return ib_irm.ib_penalty(list(features))


def time_stack(args, device, feats, y, envs, tests, weights, warmups, cache: bool) -> float:
    config = OODStageConfig("ib_irm", steps=args.steps, eval_every=args.steps, path="fast", record="final")
    stack = StackedHeads([[fresh_head(args.hidden, seed=c) for c in range(args.configs)]]).to(device)
    original = ib_irm.IBIRM.bottleneck
    ib_irm.IBIRM.bottleneck = original if cache else recomputed
    try:
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        train_stack(StackRuns.heads(stack, weights, warmups), Environments(LabelledInputs(feats, y, envs), tests),
                    config)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start
    finally:
        ib_irm.IBIRM.bottleneck = original


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-train", type=int, default=50000)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--configs", type=int, default=30, help="heads per stack (5 weights x 6 lengths)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for name in ("n_train", "hidden", "configs", "steps", "repeats"):
        if getattr(args, name) < (2 if name == "n_train" else 1):
            parser.error(f"--{name.replace('_', '-')} must be a positive whole number; got {getattr(args, name)}")
    device = get_device()  # FEATLIB_DEVICE picks another
    gen = torch.Generator().manual_seed(0)
    feats = torch.relu(torch.randn(1, args.n_train, args.hidden, generator=gen)).to(device)
    y = (torch.rand(1, 1, args.n_train, generator=gen) < 0.5).float().to(device)
    half = args.n_train // 2
    envs = [slice(0, half), slice(half, args.n_train)]
    tests = [LabelledInputs(feats[:, :1000], y[..., :1000])]
    weights = torch.logspace(2, 6, 5).repeat(args.configs // 5 + 1)[:args.configs].unsqueeze(0)
    warmups = torch.arange(args.configs).div(5, rounding_mode="floor").mul(args.steps // 10).unsqueeze(0)
    times = {False: [], True: []}
    time_stack(args, device, feats, y, envs, tests, weights, warmups, True)  # warm-up
    for _ in range(args.repeats):
        for cache in (False, True):
            times[cache].append(time_stack(args, device, feats, y, envs, tests, weights, warmups, cache))
    print(f"IB-IRM, frozen features {args.n_train} x {args.hidden}, {args.configs} heads, {args.steps} steps, "
          f"{device.type} ({torch.get_num_threads()} threads):")
    for cache, label in ((False, "recomputed every step"), (True, "computed once (default)")):
        print(f"  {label:24s} " + "  ".join(f"{t:6.2f}" for t in times[cache])
              + f"  s; median {statistics.median(times[cache]):.2f} s")
    print(f"  ratio of the medians, recomputed / once: "
          f"{statistics.median(times[False]) / statistics.median(times[True]):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
