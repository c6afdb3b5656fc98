"""Benchmark: the stacked OOD stage against one run at a time (ColoredMNIST, issue 3).

Prints, side by side in one run and on one device:

* ERM-NF (whole MLP trained): a stack of C runs sharing a seed's images vs the same C runs
  trained one after another;
* frozen features: a stack of G groups x C heads vs heads trained one after another;
* the full Table 2 protocol's estimated wall time from the measured per-step costs (both
  datasets, 10 seeds, 5 initialisations), or, with ``--full-protocol``, its measured wall time.

    .venv/bin/python benchmarks/stacked_training.py [--n-train 50000] [--steps 10] [--device cuda]

Ratios are of runs per second (a run = ``--ood-steps`` optimizer steps). Warm-up steps are run
and discarded; the clock is read after ``torch.cuda.synchronize()`` on a GPU.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from featlib.data import make_colored_mnist
from featlib.device import describe_device, get_device
from featlib.experiments.colored_mnist import SCHEDULES, CMNISTProtocol
from featlib.experiments.paper_values import FEAT_STOP_ROUND
from featlib.models import ColoredMNISTMLP, StackedHeads, StackedMLP, fresh_head
from featlib.training import LabelledInputs, OODStageConfig, train_stack


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def seconds_per_step(make_stack, train, tests, objective, batch_shape, steps, device, warmup=2, repeats=3):
    """Median over ``repeats`` of the wall time of one optimizer step of a freshly built stack."""
    config = OODStageConfig(objective, steps=steps, eval_every=10**9)
    weights = torch.full(batch_shape, 1e3)
    warm = torch.zeros(batch_shape, dtype=torch.long)
    times = []
    for r in range(repeats + 1):
        stack = make_stack()
        cfg = OODStageConfig(objective, steps=warmup, eval_every=10**9) if r == 0 else config
        sync(device)
        start = time.perf_counter()
        train_stack(stack, [p for p in stack.parameters()], stack.batch_shape, train, tests, cfg, weights, warm)
        sync(device)
        if r > 0:
            times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--n-train", type=int, default=None, help="default: 50000 on a GPU, 5000 on a CPU")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--configs", type=int, default=30, help="C: configurations per stack (5 weights x 6 lengths)")
    parser.add_argument("--groups", type=int, default=30, help="G: frozen featurizers per head stack (3 inits x 10 seeds)")
    parser.add_argument("--alone", type=int, default=5, help="runs timed one at a time (per-run cost is their mean)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--ood-steps", type=int, default=1000)
    parser.add_argument("--objective", default="irmv1")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 matrix products on a GPU")
    parser.add_argument("--full-protocol", action="store_true", help="also run and time the full Table 2 protocol")
    args = parser.parse_args(argv)
    device = torch.device(args.device) if args.device else get_device()
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    n_train = args.n_train or (50000 if device.type == "cuda" else 5000)
    data = make_colored_mnist("cmnist025", 1, n_train=n_train, n_test=min(10000, n_train // 5)).to(device)
    train = LabelledInputs(data.train_x, data.train_y, data.env_slices)
    tests = [LabelledInputs(e.x, e.y) for e in data.test]
    print(f"device: {describe_device(device)}; n_train={n_train}, hidden={args.hidden}, objective={args.objective}, "
          f"steps timed={args.steps} (median of 3 after warm-up), tf32={args.tf32}")
    base = ColoredMNISTMLP(args.hidden, seed=1)
    c = args.configs

    nf_stacked = seconds_per_step(lambda: StackedMLP([base] * c).to(device), train, tests, args.objective, (c,),
                                  args.steps, device)
    nf_alone = seconds_per_step(lambda: StackedMLP([base]).to(device), train, tests, args.objective, (1,),
                                args.steps, device)
    with torch.no_grad():
        feats = base.to(device).featurizer(data.train_x)
        test_feats = [base.featurizer(e.x) for e in data.test]
    g = args.groups
    heads_train = LabelledInputs(feats.expand(g, -1, -1), data.train_y.expand(g, 1, -1), data.env_slices)
    heads_tests = [LabelledInputs(tf.expand(g, -1, -1), e.y.expand(g, 1, -1)) for tf, e in zip(test_feats, data.test)]
    one_train = LabelledInputs(feats[None], data.train_y[None, None], data.env_slices)
    one_tests = [LabelledInputs(tf[None], e.y[None, None]) for tf, e in zip(test_feats, data.test)]
    head = fresh_head(args.hidden, 0)
    fz_stacked = seconds_per_step(lambda: StackedHeads([[head] * c] * g).to(device), heads_train, heads_tests,
                                  args.objective, (g, c), args.steps, device)
    fz_alone = seconds_per_step(lambda: StackedHeads([[head]]).to(device), one_train, one_tests, args.objective,
                                (1, 1), args.steps, device)

    def runs_per_s(step_time, runs):
        return runs / (step_time * args.ood_steps)

    rows = [("ERM-NF (whole MLP)", runs_per_s(nf_stacked, c), runs_per_s(nf_alone, 1), f"C={c}"),
            ("frozen features (heads)", runs_per_s(fz_stacked, g * c), runs_per_s(fz_alone, 1), f"G x C={g}x{c}")]
    print(f"\n{'OOD stage':<26}{'stack':>10}{'stacked runs/s':>16}{'alone runs/s':>14}{'ratio':>8}")
    for name, stacked, alone, shape in rows:
        print(f"{name:<26}{shape:>10}{stacked:>16.3f}{alone:>14.3f}{stacked / alone:>8.1f}x")

    # The full Table 2 protocol, both datasets: OOD-stage runs priced at the measured costs
    # (scaled to 50,000 images when fewer were timed), plus feature learning at ERM-NF step cost.
    scale = 50000 / n_train
    protocol = CMNISTProtocol(inits=("erm-nf", "erm", "bonsai", "feat", "ifeat"))
    configs = {o: len(protocol.configurations(o)) for o in protocol.objectives}
    nf_runs = 2 * len(protocol.seeds) * sum(configs.values())
    frozen_runs = 2 * len(protocol.seeds) * 4 * sum(configs.values())
    stacks_nf = 2 * len(protocol.seeds) * len(protocol.objectives)
    t_nf = scale * args.ood_steps * nf_stacked / c * nf_runs
    t_frozen = scale * args.ood_steps * fz_stacked / (g * c) * frozen_runs
    fl_epochs = sum(feature_learning_epochs(d) for d in SCHEDULES)
    t_features = scale * len(protocol.seeds) * fl_epochs * nf_alone
    t_alone = scale * args.ood_steps * (nf_alone * nf_runs + fz_alone * frozen_runs) + t_features
    print(f"\nfull Table 2 protocol (2 datasets, {nf_runs + frozen_runs} OOD-stage runs, {stacks_nf} ERM-NF stacks), "
          f"estimated from the costs above at 50,000 images:")
    print(f"  stacked: {(t_nf + t_frozen + t_features) / 60:8.1f} min  (ERM-NF {t_nf / 60:.1f}, frozen {t_frozen / 60:.1f}, "
          f"feature learning {t_features / 60:.1f})")
    print(f"  one run at a time: {t_alone / 60:8.1f} min  -> ratio {t_alone / (t_nf + t_frozen + t_features):.1f}x")
    if args.full_protocol:
        from featlib.experiments.run_cmnist import main as run_cmnist

        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            run_cmnist(["--out", f"{tmp}/out", "--cache-dir", f"{tmp}/cache"])
            print(f"measured full Table 2 protocol: {(time.perf_counter() - start) / 60:.1f} min")
    return 0


def feature_learning_epochs(dataset: str) -> int:
    """Full-batch epochs of feature learning per seed: ERM, Bonsai (rounds + synthesis), FeAT and
    iFeAT (the paper's stopping round plus the discarded round after it) and the oracle's ERM."""
    schedule = SCHEDULES[dataset]
    feat_rounds = FEAT_STOP_ROUND[dataset] + 1
    return (2 * schedule["erm"]["epochs"] + sum(schedule["bonsai"]["round_epochs"])
            + schedule["bonsai"]["synthesis_epochs"] + 2 * feat_rounds * schedule["feat"]["epochs_per_round"])


if __name__ == "__main__":
    raise SystemExit(main())
