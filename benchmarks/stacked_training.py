"""Benchmark: the stacked OOD stage (ColoredMNIST) against the hardware's limit.

Prints, measured in one run on one device:

* the device's achieved matrix-product rate at each precision and its copy bandwidth;
* for every variant of the step (the plain path, then the fast path's changes one at a time:
  no host syncs and fused Adam, closed-form penalties, compiled bias+ReLU, the whole loss
  compiled, CUDA graphs, TF32, bf16), the time of one step of an ERM-NF stack (C whole MLPs) and
  of a frozen-feature stack (G x C heads), its ratio to the plain path, the floor that the
  measured rates imply for that step (:mod:`featlib.training.step_cost`) and its ratio to it;
* the shared ERM pre-training prefix: one ERM-NF stack over the protocol's pre-training grid,
  trained with and without sharing (wall time of the whole stack);
* on a CPU, the ERM-NF stack's step in tiles of runs (``--cpu-tiles``, MiB of hidden activation
  per tile; ``FastOptions.cpu_tile_mib``) against one run at a time on the plain path;
* one run at a time against the stack (runs per second), and the full Table 2 protocol's
  estimated wall time per variant (at the protocol's shape: 50,000 images, H = 256, C = G = 30);
* with ``--full-protocol``: the protocol run and timed (both datasets, ``--seeds``), at each
  ``--precision`` given, and Table 2 (best configuration per objective and initialisation) at
  each precision side by side, with the run-by-run spread between them.

    .venv/bin/python benchmarks/stacked_training.py                        # a GPU, protocol shape
    .venv/bin/python benchmarks/stacked_training.py --n-train 5000 --configs 5 --groups 6 --hidden 128
    .venv/bin/python benchmarks/stacked_training.py --full-protocol --precision fp32 bf16 --out results/speed

Step times are medians over ``--repeats`` of ``(t(steps) - t(0)) / steps``, where ``t(k)`` is the
wall time of a whole ``train_stack`` call of k steps (``t(0)``: set-up and the final evaluation),
after a warm-up call (which compiles, for the compiled variants). The clock is read after
``torch.cuda.synchronize()`` on a GPU. Variants that need CUDA are skipped elsewhere, and say so.
With ``--out`` every table is written as CSV with ``provenance.json`` (each variant's precision
in its row).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from featlib.data import make_colored_mnist
from featlib.device import describe_device, get_device
from featlib.experiments.colored_mnist import (
    CMNISTProtocol, ColoredMNISTExperiment, learner_choices, protocol_datasets, schedule, select_best,
)
from featlib.experiments.paper_values import FEAT_STOP_ROUND
from featlib.feature_learning import FEATURE_LEARNERS
from featlib.models import ColoredMNISTMLP, StackedHeads, StackedMLP, fresh_head
from featlib.objectives import make_objective
from featlib.registry import Registry
from featlib.training import (
    Environments, FastOptions, LabelledInputs, OODStageConfig, StackRuns, train_stack_fast, train_stack_plain,
)
from featlib.training import fast_stage
from featlib.training.fast_stage import COMPILE_MODES, EAGER_FALLBACKS, will_compile
from featlib.training.prefix import prefix_schedule, run_steps
from featlib.training.step_cost import measure_copy_bandwidth, measure_matmul_rate, stacked_step_cost

PROTOCOL_SHAPE = {"n_train": 50000, "hidden": 256, "configs": 30, "groups": 30}
PRETRAIN_GRID = (0, 50, 100, 150, 200, 250)  # the protocol's ERM pre-training lengths (of 1000 steps)


@dataclass(frozen=True)
class Variant:
    """One way of running the step: the plain path or fast-path options, and a precision."""

    label: str
    options: FastOptions | None  # None: the plain path
    precision: str = "fp32"
    needs_cuda: bool = False

    def train(self, *args, **kwargs):
        if self.options is None:
            return train_stack_plain(*args, **kwargs)
        return train_stack_fast(*args, **kwargs, options=self.options)


#: The variants, in the order the changes are added. The prefix is timed separately (it removes
#: run-steps, not time per step), so every fast variant here trains every run from step 0.
VARIANTS: Registry[Variant] = Registry("variant")
_no_share = {"share_prefix": False}
for _name, _variant in {
    "plain": Variant("plain path (autograd penalties, double backward)", None),
    "plain-tf32": Variant("plain path, TF32", None, "tf32", needs_cuda=True),
    "plain-bf16": Variant("plain path, bf16 autocast", None, "bf16"),
    "no-sync": Variant("fast loop: no host syncs, fused Adam", FastOptions(closed_form=False, **_no_share)),
    "closed-form": Variant("+ closed-form penalties", FastOptions(**_no_share)),
    "bias-relu": Variant("+ compiled bias+ReLU", FastOptions(bias_relu="compiled", **_no_share)),
    "compiled": Variant("whole loss compiled", FastOptions(compile="default", **_no_share)),
    "cudagraphs": Variant("+ CUDA graphs", FastOptions(compile="cudagraphs", **_no_share), needs_cuda=True),
    "compiled-tf32": Variant("compiled, TF32", FastOptions(compile="default", **_no_share), "tf32", needs_cuda=True),
    "compiled-bf16": Variant("compiled, bf16 autocast", FastOptions(compile="default", **_no_share), "bf16"),
    "cudagraphs-tf32": Variant("+ CUDA graphs, TF32", FastOptions(compile="cudagraphs", **_no_share), "tf32",
                               needs_cuda=True),
    "cudagraphs-bf16": Variant("+ CUDA graphs, bf16", FastOptions(compile="cudagraphs", **_no_share), "bf16",
                               needs_cuda=True),
}.items():
    VARIANTS.register(_name)(_variant)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Case:
    """A stack to time: how to build it, its inputs and its cost model."""

    kind: str  # "mlp" (ERM-NF) or "heads" (frozen features)
    make: callable
    train: LabelledInputs
    tests: list
    batch_shape: tuple

    def call(self, variant: Variant, objective: str, steps: int, weights=None, warmups=None, options=None) -> float:
        """Wall time of one whole training call of ``steps`` steps."""
        stack = self.make()
        config = OODStageConfig(objective, steps=steps, precision=variant.precision, record="final")
        weights = torch.full(self.batch_shape, 1e3) if weights is None else weights
        warmups = torch.zeros(self.batch_shape, dtype=torch.long) if warmups is None else warmups
        runs = StackRuns(stack, list(stack.parameters()), stack.batch_shape, weights, warmups)
        envs = Environments(self.train, self.tests)
        device = self.train.y.device
        sync(device)
        start = time.perf_counter()
        if options is not None:
            train_stack_fast(runs, envs, config, options=options)
        else:
            variant.train(runs, envs, config)
        sync(device)
        return time.perf_counter() - start


def seconds_per_step(case: Case, variant: Variant, objective: str, steps: int, repeats: int) -> tuple[float, float]:
    """(median seconds per step, wall time of the warm-up call, compilation included)."""
    warmup = case.call(variant, objective, 2)
    return statistics.median(one_step_time(case, variant, objective, steps) for _ in range(repeats)), warmup


def one_step_time(case: Case, variant: Variant, objective: str, steps: int) -> float:
    """``(t(steps) - t(0)) / steps``: a call's set-up and final evaluation taken out."""
    fixed = case.call(variant, objective, 0)
    return max(case.call(variant, objective, steps) - fixed, 0.0) / steps


def make_cases(args, device) -> dict[str, Case]:
    data = make_colored_mnist("cmnist025", 1, n_train=args.n_train, n_test=min(10000, max(1, args.n_train // 5)),
                              source=args.mnist_source).to(device)
    base = ColoredMNISTMLP(args.hidden, seed=1)
    c, g = args.configs, args.groups
    nf = Case("mlp", lambda: StackedMLP([base] * c).to(device), LabelledInputs(data.train_x, data.train_y, data.env_slices),
              [LabelledInputs(e.x, e.y) for e in data.test], (c,))
    with torch.no_grad():
        feats = base.to(device).featurizer(data.train_x)
        test_feats = [base.featurizer(e.x) for e in data.test]
    head = fresh_head(args.hidden, 0)
    heads = Case("heads", lambda: StackedHeads([[head] * c] * g).to(device),
                 LabelledInputs(feats.expand(g, -1, -1), data.train_y.expand(g, 1, -1), data.env_slices),
                 [LabelledInputs(tf.expand(g, -1, -1), e.y.expand(g, 1, -1)) for tf, e in zip(test_feats, data.test)],
                 (g, c))
    alone = Case("mlp", lambda: StackedMLP([base]).to(device), nf.train, nf.tests, (1,))
    one_head = Case("heads", lambda: StackedHeads([[head]]).to(device),
                    LabelledInputs(feats[None], data.train_y[None, None], data.env_slices),
                    [LabelledInputs(tf[None], e.y[None, None]) for tf, e in zip(test_feats, data.test)], (1, 1))
    return {"mlp": nf, "heads": heads, "mlp-alone": alone, "heads-alone": one_head}


def device_rates(device, precisions) -> tuple[dict[str, float], float]:
    rates = {}
    for p in precisions:
        rates[p] = measure_matmul_rate(device, p)
    return rates, measure_copy_bandwidth(device)


def time_variants(args, device, cases, rates, bandwidth) -> pd.DataFrame:
    """Every (variant, objective, stack) warmed up once (compiling where it compiles), then timed
    ``--repeats`` times with the variants interleaved, so a drift of the machine hits them alike."""
    combos = []
    for name in args.variants:
        variant = VARIANTS.get(name)
        if variant.needs_cuda and device.type != "cuda":
            print(f"  {name:<16} skipped: needs CUDA ({variant.label})", flush=True)
            continue
        combos += [(name, variant, objective, kind) for objective in args.objectives for kind in ("mlp", "heads")]
    first_call = {}
    for name, variant, objective, kind in combos:
        first_call[(name, objective, kind)] = cases[kind].call(variant, objective, 2)
    samples = {key: [] for key in first_call}
    for _ in range(args.repeats):
        for name, variant, objective, kind in combos:
            samples[(name, objective, kind)].append(one_step_time(cases[kind], variant, objective, args.steps))
    rows = []
    for name, variant, objective, kind in combos:
        case = cases[kind]
        step, warm = statistics.median(samples[(name, objective, kind)]), first_call[(name, objective, kind)]
        cost = stacked_step_cost(kind, args.n_train, args.hidden, args.configs,
                                 groups=args.groups if kind == "heads" else 1,
                                 act_bytes=2 if variant.precision == "bf16" else 4, objective=objective)
        floor = cost.floor_seconds(rates[variant.precision], bandwidth)
        compiled = (variant.options is not None
                    and will_compile(make_objective(objective), kind == "heads", variant.options)
                    and not ran_eager(variant, objective, kind, device))
        rows.append({"variant": name, "label": variant.label, "precision": variant.precision,
                     "objective": objective, "stack": kind, "runs": int(torch.tensor(case.batch_shape).prod()),
                     "step_s": step, "step_s_min": min(samples[(name, objective, kind)]),
                     "step_s_max": max(samples[(name, objective, kind)]), "first_call_s": warm, "compiled": compiled,
                     "flops": cost.flops, "bytes": cost.bytes, "floor_s": floor,
                     "floor_compute_s": cost.flops / rates[variant.precision],
                     "floor_memory_s": cost.bytes / bandwidth})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    plain = frame[frame["variant"] == "plain"].set_index(["objective", "stack"])["step_s"]
    frame["x_faster_than_plain"] = [plain.get((o, s), float("nan")) / t if t > 0 else float("nan")
                                    for o, s, t in zip(frame["objective"], frame["stack"], frame["step_s"])]
    frame["x_floor"] = frame["step_s"] / frame["floor_s"]
    return frame


def ran_eager(variant: Variant, objective: str, kind: str, device) -> bool:
    """Whether the variant's compiled loss could not compile and ran eager (it warned once and
    is in :data:`~featlib.training.fast_stage.EAGER_FALLBACKS`): its row is then not labelled compiled."""
    model = "StackedMLP" if kind == "mlp" else "StackedHeads"
    mode = COMPILE_MODES.get(variant.options.compile)(device)
    described = f"({objective} on {model}, {variant.precision}, mode {mode})"
    return any(name.endswith(described) for name in EAGER_FALLBACKS)


def print_variants(frame: pd.DataFrame) -> None:
    for (objective, kind), part in frame.groupby(["objective", "stack"], sort=False):
        title = "ERM-NF stack (whole MLPs)" if kind == "mlp" else "frozen-feature stack (heads)"
        print(f"\n{title}, {objective}, {part['runs'].iloc[0]} runs per step:")
        print(f"  {'variant':<16}{'precision':<10}{'ms/step':>10}{'[min-max]':>18}{'vs plain':>10}{'floor ms':>10}"
              f"{'(compute':>10}{'memory)':>9}{'x floor':>9}  first call")
        for row in part.itertuples():
            spread = f"[{1e3 * row.step_s_min:.1f}-{1e3 * row.step_s_max:.1f}]"
            print(f"  {row.variant:<16}{row.precision:<10}{1e3 * row.step_s:10.2f}{spread:>18}"
                  f"{row.x_faster_than_plain:9.2f}x{1e3 * row.floor_s:10.3f}{1e3 * row.floor_compute_s:10.3f}"
                  f"{1e3 * row.floor_memory_s:9.3f}{row.x_floor:8.1f}x  {row.first_call_s:.1f} s"
                  f"{' (compiled)' if row.compiled else ''}")


def time_prefix(args, cases) -> dict:
    """One ERM-NF stack over the protocol's (weights x pre-training lengths) grid, scaled to
    ``--grid-steps`` steps, with and without the shared prefix."""
    steps = args.grid_steps
    lengths = [round(k * steps / 1000) for k in PRETRAIN_GRID]
    per_length = max(1, args.configs // len(lengths))
    warmups = torch.tensor([k for _ in range(per_length) for k in lengths])
    case = dataclasses.replace(cases["mlp"], make=lambda: StackedMLP([ColoredMNISTMLP(args.hidden, seed=1)] * len(warmups))
                               .to(cases["mlp"].train.y.device), batch_shape=(len(warmups),))
    weights = torch.full((len(warmups),), 1e3)
    variant = VARIANTS.get("closed-form")
    options = {share: FastOptions(share_prefix=share) for share in (False, True)}
    for share in options:  # warm-up
        case.call(variant, args.objectives[0], 2, weights, warmups, options[share])
    samples = {share: [] for share in options}
    for _ in range(args.repeats):  # interleaved
        for share in options:
            samples[share].append(case.call(variant, args.objectives[0], steps, weights, warmups, options[share]))
    times = {share: statistics.median(values) for share, values in samples.items()}
    shared = run_steps(prefix_schedule(warmups.tolist(), steps), steps)
    return {"steps": steps, "lengths": lengths, "runs": len(warmups), "stack_s_alone": times[False],
            "stack_s_shared": times[True], "run_steps_alone": len(warmups) * steps, "run_steps_shared": shared}


def time_tiles(args, cases) -> pd.DataFrame:
    """The ERM-NF stack's step on a CPU at each ``--cpu-tiles`` size (MiB of hidden activation per
    tile of runs, 0: all runs in one pass; :func:`featlib.training.fast_stage.run_tiles`), the
    closed-form eager path without the shared prefix, sizes interleaved so that they see the same
    machine; beside it, one run at a time on the plain path (the authors' loop) for the same runs."""
    case = cases["mlp"]
    options = {mib: FastOptions(share_prefix=False, cpu_tile_mib=mib) for mib in args.cpu_tiles}
    variant = VARIANTS.get("closed-form")
    objective = args.objectives[0]
    loop = VARIANTS.get("plain")
    for mib in options:  # warm-up
        case.call(variant, objective, 1, options=options[mib])
    cases["mlp-alone"].call(loop, objective, 1)
    samples = {mib: [] for mib in [*options, "loop"]}
    for _ in range(args.repeats):
        for mib in options:
            fixed = case.call(variant, objective, 0, options=options[mib])
            samples[mib].append(max(case.call(variant, objective, args.steps, options=options[mib]) - fixed, 0)
                                / args.steps)
        samples["loop"].append(args.configs * one_step_time(cases["mlp-alone"], loop, objective, args.steps))
    loop_s = statistics.median(samples["loop"])
    rows = []
    for mib in options:
        step = statistics.median(samples[mib])
        tiles = len(fast_stage.run_tiles(args.configs, args.n_train * args.hidden * 4.0, mib))
        rows.append({"tile_mib": mib, "tiles": tiles, "step_s": step, "loop_step_s": loop_s,
                     "vs_loop": loop_s / step if step else float("nan")})
    return pd.DataFrame(rows)


def protocol_estimate(args, frame: pd.DataFrame, alone: dict) -> pd.DataFrame:
    """The full protocol (every protocol dataset, 10 seeds, ERM-NF and every registered learner)
    priced at the measured steps."""
    protocol = CMNISTProtocol(learners=tuple(learner_choices()))
    seeds, datasets = len(protocol.seeds), len(protocol_datasets())
    frozen_columns = len(protocol.learners) - 1  # every learner but ERM-NF
    penalties = [o for o in protocol.objectives if len(protocol.configurations(o)) > 1]
    warmups = [k for _, k in protocol.configurations(penalties[0])]

    def stack_steps(steps: int, shares: bool) -> int:
        """Run-steps of one penalised stack trained ``steps`` steps (with or without the shared prefix)."""
        return run_steps(prefix_schedule(warmups, steps), steps) if shares else len(warmups) * steps

    nf_steps, frozen_steps = protocol.nf_ood_steps, protocol.ood_steps  # ERM-NF and the frozen columns each their own
    others = len(protocol.objectives) - len(penalties)  # ERM: one run per stack
    fl_epochs = sum(feature_learning_epochs(d) for d in protocol_datasets())
    t_features = len(protocol.seeds) * fl_epochs * alone["mlp"]
    rows = []
    for name, part in frame.groupby("variant", sort=False):
        per_run = part.groupby("stack")["step_s"].mean() / part.groupby("stack")["runs"].first()
        shares = name != "plain" and not name.startswith("plain")
        nf = datasets * seeds * (len(penalties) * stack_steps(nf_steps, shares) + others * nf_steps) * per_run["mlp"]
        frozen = (datasets * seeds * frozen_columns
                  * (len(penalties) * stack_steps(frozen_steps, shares) + others * frozen_steps) * per_run["heads"])
        rows.append({"variant": name, "precision": part["precision"].iloc[0], "erm_nf_min": nf / 60,
                     "frozen_min": frozen / 60, "feature_learning_min": t_features / 60,
                     "total_min": (nf + frozen + t_features) / 60, "shared_prefix": shares})
    return pd.DataFrame(rows)


def feature_learning_epochs(dataset: str) -> int:
    """Full-batch epochs of feature learning per seed: every registered learner's schedule (Bonsai:
    rounds + synthesis; FeAT and iFeAT: the paper's stopping round plus the discarded round after
    it, or every round on a dataset the paper did not stop them on) and the oracle's ERM."""
    rounds = FEAT_STOP_ROUND[dataset] + 1 if dataset in FEAT_STOP_ROUND else CMNISTProtocol.max_rounds
    epochs = schedule(dataset, "erm")["epochs"]  # the oracle
    for learner in FEATURE_LEARNERS.table_order():
        epochs += sum(length for _, length in FEATURE_LEARNERS.get(learner).stages(schedule(dataset, learner), rounds))
    return epochs


def run_full_protocol(args, device) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The protocol run at each precision: (runs, Table 2 side by side, wall times)."""
    scale = args.ood_steps / 1000
    runs, times = [], {}
    for precision in args.precision:
        for dataset in args.datasets:
            protocol = CMNISTProtocol(
                dataset=dataset, seeds=tuple(args.seeds), learners=tuple(learner_choices()),
                n_train=args.n_train, n_test=min(10000, max(1, args.n_train // 5)), hidden_dim=args.hidden,
                ood_steps=args.ood_steps, pretrain_epochs=tuple(sorted({round(k * scale) for k in PRETRAIN_GRID})),
                epoch_scale=args.epoch_scale, precision=precision, ood_path=args.ood_path)
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                experiment = ColoredMNISTExperiment(protocol, cache_dir=tmp, device=device, mnist_source=args.mnist_source,
                                                    progress=False)
                frame = experiment.run()
                for learner in [l for l in protocol.learners if l in FEATURE_LEARNERS and FEATURE_LEARNERS.get(l).in_rounds]:
                    experiment.rounds(learner)
                experiment.oracle()
                times[(precision, dataset)] = time.perf_counter() - start
            runs.append(frame.assign(precision=precision))
            print(f"  {dataset} at {precision}: {times[(precision, dataset)] / 60:.2f} min", flush=True)
    runs = pd.concat(runs, ignore_index=True)
    tables = [select_best(part).assign(precision=p) for p, part in runs.groupby("precision", sort=False)]
    table = pd.concat(tables, ignore_index=True)
    return runs, table, times


def print_precisions(runs: pd.DataFrame, table: pd.DataFrame, precisions) -> None:
    wide = table.pivot_table(index=["dataset", "learner", "objective"], columns="precision", values=["mean", "std"])
    print("\nTable 2 (best configuration per objective and initialisation; worst-test accuracy, %):")
    header = "".join(f"{p + ' mean':>12}{p + ' std':>10}" for p in precisions)
    print(f"  {'dataset':<10}{'learner':<8}{'objective':<10}{header}")
    for (dataset, learner, objective), row in wide.iterrows():
        cells = "".join(f"{100 * row[('mean', p)]:12.2f}{100 * row[('std', p)]:10.2f}" for p in precisions)
        print(f"  {dataset:<10}{learner:<8}{objective:<10}{cells}")
    if len(precisions) > 1:
        keys = ["dataset", "learner", "objective", "seed", "penalty_weight", "pretrain_epochs"]
        first = runs[runs["precision"] == precisions[0]].set_index(keys)["worst_test_acc"]
        for p in precisions[1:]:
            diff = (runs[runs["precision"] == p].set_index(keys)["worst_test_acc"] - first).abs()
            print(f"  run by run, {p} vs {precisions[0]}: mean |difference| {100 * diff.mean():.2f} points, "
                  f"max {100 * diff.max():.2f}")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--n-train", type=int, default=None, help="default: 50000 on a GPU, 5000 on a CPU")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--configs", type=int, default=30, help="C: configurations per stack (5 weights x 6 lengths)")
    parser.add_argument("--groups", type=int, default=30, help="G: frozen featurizers per head stack (3 learners x 10 seeds)")
    parser.add_argument("--steps", type=int, default=5, help="steps per timed call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--objectives", nargs="+", default=["irmv1"])
    parser.add_argument("--variants", nargs="+", default=VARIANTS.names(), choices=VARIANTS.names())
    parser.add_argument("--cpu-tiles", nargs="*", type=float, default=[0, 4, 16, 64],
                        help="on a CPU: ERM-NF step at these tile sizes (MiB of hidden activation; 0: untiled)")
    parser.add_argument("--grid-steps", type=int, default=40,
                        help="steps of the shared-prefix timing (the protocol's 1000, scaled; 0 to skip)")
    parser.add_argument("--ood-steps", type=int, default=1000, help="OOD steps per run of --full-protocol")
    parser.add_argument("--full-protocol", action="store_true", help="run and time the whole Table 2 protocol")
    parser.add_argument("--precision", nargs="+", default=["fp32"], help="--full-protocol: each precision in turn")
    parser.add_argument("--ood-path", default="fast", help="--full-protocol: the OOD stage's path")
    parser.add_argument("--datasets", nargs="+", default=protocol_datasets(), choices=protocol_datasets())
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)))
    parser.add_argument("--epoch-scale", type=float, default=1.0, help="--full-protocol: feature-learning epochs x")
    parser.add_argument("--mnist-source", default="auto")
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSVs and provenance.json")
    args = parser.parse_args(argv)
    return args


#: The kind of result folder --out is (featlib.store.folders): a later run of this benchmark may
#: replace it, nothing else may, and it carries a manifest with each file's checksum.
BENCH_KIND = "benchmarks.stacked_training"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.out is not None:
        from featlib.store.folders import check_out

        try:
            check_out("--out", args.out, BENCH_KIND)  # before any work
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    device = torch.device(args.device) if args.device else get_device()
    args.n_train = args.n_train or (50000 if device.type == "cuda" else 5000)
    started = time.perf_counter()
    precisions = sorted({VARIANTS.get(v).precision for v in args.variants
                         if not (VARIANTS.get(v).needs_cuda and device.type != "cuda")} | {"fp32"})
    print(f"device: {describe_device(device)}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"n_train={args.n_train}, hidden={args.hidden}, C={args.configs}, G={args.groups}, "
          f"objectives={' '.join(args.objectives)}; {args.steps} steps per timed call, median of {args.repeats}")
    rates, bandwidth = device_rates(device, precisions)
    print("device's achieved rates: " + ", ".join(f"matmul {p} {r / 1e12:.3f} TFLOP/s" for p, r in rates.items())
          + f"; copy {bandwidth / 1e9:.1f} GB/s (read + write)")
    cases = make_cases(args, device)

    print("\nstep times:")
    frame = time_variants(args, device, cases, rates, bandwidth)
    print_variants(frame)

    alone = {kind: seconds_per_step(cases[f"{kind}-alone"], VARIANTS.get("plain"), args.objectives[0], args.steps,
                                    args.repeats)[0] for kind in ("mlp", "heads")}
    plain = frame[(frame["variant"] == "plain") & (frame["objective"] == args.objectives[0])].set_index("stack")
    if not plain.empty:
        print(f"\none run at a time (plain path, {args.objectives[0]}): ERM-NF {1e3 * alone['mlp']:.2f} ms/step, "
              f"heads {1e3 * alone['heads']:.2f} ms/step; the plain stack trains "
              f"{args.configs * alone['mlp'] / plain.loc['mlp', 'step_s']:.1f}x (ERM-NF) and "
              f"{args.configs * args.groups * alone['heads'] / plain.loc['heads', 'step_s']:.1f}x (heads) more runs "
              f"per second")

    tiles = None
    if device.type == "cpu" and args.cpu_tiles:
        tiles = time_tiles(args, cases)
        print(f"\nERM-NF on a CPU in tiles of runs ({args.configs} runs, {args.n_train} images, width {args.hidden}, "
              f"{args.objectives[0]}; closed-form eager path; 'vs_loop': one run at a time on the plain path, "
              f"{args.configs} runs, divided by the stack's step, measured interleaved):")
        print(tiles.to_string(index=False, float_format=lambda v: f"{v:.3f}"))

    prefix = None
    if args.grid_steps:
        prefix = time_prefix(args, cases)
        print(f"\nshared ERM prefix (ERM-NF stack of {prefix['runs']} runs, pre-training lengths {prefix['lengths']} of "
              f"{prefix['steps']} steps, closed-form eager path): {prefix['stack_s_alone']:.2f} s without sharing, "
              f"{prefix['stack_s_shared']:.2f} s with ({prefix['stack_s_alone'] / prefix['stack_s_shared']:.2f}x); "
              f"run-steps {prefix['run_steps_alone']} -> {prefix['run_steps_shared']}")

    estimate = None
    at_shape = (args.n_train, args.hidden, args.configs, args.groups) == tuple(PROTOCOL_SHAPE.values())
    if at_shape:
        estimate = protocol_estimate(args, frame, alone)
        print("\nfull Table 2 protocol (2 datasets, 10 seeds, 5 initialisations), estimated from the step times above "
              f"({args.objectives} for every objective; fast variants with the shared prefix):")
        print(estimate.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    else:
        print(f"\nfull-protocol estimate skipped: the timed shape differs from the protocol's {PROTOCOL_SHAPE}")

    protocol_runs = table = times = None
    if args.full_protocol:
        print(f"\nfull protocol, path {args.ood_path}, datasets {args.datasets}, seeds {args.seeds}, n_train "
              f"{args.n_train}, hidden {args.hidden}, {args.ood_steps} OOD steps:")
        protocol_runs, table, times = run_full_protocol(args, device)
        for p in args.precision:
            total = sum(t for (q, _), t in times.items() if q == p)
            print(f"measured full protocol at {p}: {total / 60:.2f} min")
        print_precisions(protocol_runs, table, args.precision)

    if args.out is not None:
        write_out(args, argv, device, started, rates, bandwidth, frame, alone, prefix, estimate, protocol_runs, table,
                  times, tiles)
    return 0


def write_out(args, argv, device, started, rates, bandwidth, frame, alone, prefix, estimate, runs, table, times,
              tiles=None):
    from featlib.store.folders import ResultFolder
    from featlib.store.provenance import provenance

    folder = ResultFolder(args.out, kind=BENCH_KIND)  # written as a whole, with its manifest
    frames = {"variants": frame, "estimate": estimate, "runs": runs, "table2_precisions": table, "cpu_tiles": tiles}
    for name, data in frames.items():
        if data is not None:
            folder.add_csv(f"{name}.csv", data)
    record = provenance(
        " ".join(["python", "benchmarks/stacked_training.py", *(sys.argv[1:] if argv is None else argv)]), started,
        device, arguments={k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        matmul_flops_per_s=rates, copy_bytes_per_s=bandwidth, alone_step_s=alone, shared_prefix=prefix,
        protocol_wall_s={f"{p}/{d}": t for (p, d), t in (times or {}).items()},
        precisions={row.variant: row.precision for row in frame.itertuples()} if not frame.empty else {},
    )
    folder.commit(json.loads(json.dumps(record, default=str)))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    raise SystemExit(main())
