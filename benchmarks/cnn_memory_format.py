"""Benchmark: the ColoredMNIST CNN's full-batch training step with its images laid out
channels-last (the default on a CPU, :class:`featlib.models.cmnist_cnn.ImageUnflatten`) against
the contiguous layout, side by side in one run.

The CNN is chapter 06's network for the paper's GradCAM figures (Fig. 4); on a CPU its
full-batch step dominates the saliency study (``featlib.cli.gap_studies saliency-5k`` and
larger). Each repeat times ``--steps`` Adam steps of both layouts, interleaved so a drift of
the machine hits both alike, and prints the seconds per step and the ratio of the medians; no
target is asserted. The two layouts compute the same values (tests/test_patch_colored_mnist.py
checks it in float64).

    .venv/bin/python benchmarks/cnn_memory_format.py                   # 5,000 images, 3 steps, 3 repeats
    .venv/bin/python benchmarks/cnn_memory_format.py --n-train 1000 --steps 5
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from featlib.device import get_device
from featlib.models import ColoredMNISTCNN


def time_steps(model: ColoredMNISTCNN, x: torch.Tensor, y: torch.Tensor, steps: int) -> float:
    """Seconds per full-batch Adam step (forward, backward, update) of ``model`` on ``x``."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        F.binary_cross_entropy_with_logits(model(x), y).backward()
        optimizer.step()
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-train", type=int, default=5000, help="images in the full batch")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--steps", type=int, default=3, help="steps timed per repeat and layout")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for name in ("n_train", "hidden", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive whole number; got {getattr(args, name)}")
    device = get_device()  # FEATLIB_DEVICE picks another
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(args.n_train, 3 * 28 * 28, generator=gen).to(device)
    y = (torch.rand(args.n_train, generator=gen) < 0.5).float().to(device)
    models = {}
    for layout in ("contiguous", "channels-last"):
        models[layout] = ColoredMNISTCNN(args.hidden, image_shape=(3, 28, 28), seed=0).to(device)
        models[layout].featurizer[0].channels_last = layout == "channels-last"
        time_steps(models[layout], x, y, 1)  # warm-up
    times = {layout: [] for layout in models}
    for _ in range(args.repeats):
        for layout, model in models.items():
            times[layout].append(time_steps(model, x, y, args.steps))
    print(f"ColoredMNIST CNN, full batch of {args.n_train} images (3x28x28), hidden {args.hidden}, "
          f"{args.steps} steps x {args.repeats} repeats, {device.type} ({torch.get_num_threads()} threads):")
    for layout in models:
        note = " (the CPU default)" if layout == "channels-last" else ""
        print(f"  {layout + note:32s} " + "  ".join(f"{t:6.3f}" for t in times[layout])
              + f"  s/step; median {statistics.median(times[layout]):.3f}")
    if device.type != "cpu":
        print("  (off a CPU the model keeps the contiguous layout, so both rows run the same path)")
    print(f"  ratio of the medians, channels-last / contiguous: "
          f"{statistics.median(times['channels-last']) / statistics.median(times['contiguous']):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
