"""How long a chapter's run will take, estimated before it starts: counted steps x step times.

No chapter has been timed on a Colab GPU. The estimates here count the training steps a run
will take (from its parameters, the same way the experiments schedule them) and multiply them
by step times that were measured, on other machines, for the same steps:

* **H100** (one NVIDIA H100, fp32, TF32 off; featlib 0.3.0, 2026-11-22): a full-batch MLP step
  on 50,000 ColoredMNIST images (392-256-256-1, ERM) 2.63 ms; an ERM-NF stack of 30 such
  MLPs 51 ms a step (1.7 ms per run); frozen-feature heads (1,000 steps each, stacks of 30 x 30)
  92.7 runs per second; FeAT's and iFeAT's rounds 1.2-1.8x ERM's step (``featlib.cost`` there).
* **2-core CPU** (the CI machine, ``results/cost/cpu-2core``): the same MLP step 321 ms,
  DenseNet-121 at 96 px on 32 images 473 ms; a stack of 30 ERM-NF runs does 0.6x the runs per
  second of one run at a time (``benchmarks/stacked_training.py``).
* **Colab's T4**: the H100 times x :data:`T4_OVER_H100` = 8.3, the ratio of the two GPUs'
  peak fp32 throughput (67 and 8.1 TFLOP/s). Cross-check by FLOPs: the ERM-NF stack step is
  1.5 TFLOP, 0.37 s at 4 TFLOP/s (half a T4's peak) against 0.42 s from the ratio.
* **Backbones** (WILDS): forward FLOPs per example (DenseNet-121 5.7 GFLOP and ResNet-50 8.2
  GFLOP at 224 px, scaled by the pixel count; DistilBERT 86 MFLOP and MiniLM-L6 21 MFLOP per
  token), three times that for a training step, at a sustained :data:`BACKBONE_FLOPS` per
  device (a T4 at 30% of its fp32 peak; the CPU's measured DenseNet step gives 213 GFLOP/s);
  chapter 06's small CNN at :data:`CNN_FLOPS` (the CPU's measured: 2.3 s a full-batch step on
  5,000 images, 31.5 s on 50,000).

The result is an :class:`Estimate` with the T4 and CPU times, and with the peak memory of each
stage of the run from featlib's memory model (:mod:`featlib.training.memory`: counted tensor
peaks per stage, with what a GPU holds beside them), which :mod:`featbook.runtime` compares with
the GPU. A part never takes longer on the T4
than on the CPU (:meth:`Estimate.add`): where per-step overhead dominates (the tiny heads of an
OOD stage) the measured CPU time bounds it, since a GPU runtime has that CPU too. On fabricated
WILDS data the example counts are the fabricated ones (:func:`fabricated_split_sizes`), not the
real datasets'. Treat it as the order of
magnitude it is: data loading, evaluation passes and Colab's varying GPUs are not in it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from featlib.training import memory

from featbook import prose

T4_OVER_H100 = 8.3
#: Below this many CPU seconds of counted steps a run is only described as short.
SHORT_S = 120.0

#: Measured step times (seconds) on an H100 and on the 2-core CPU.
MLP_STEP_S = {"h100": 2.63e-3, "cpu": 0.321}
NF_RUN_STEP_S = {"h100": 51e-3 / 30, "cpu": 0.321 / 0.6}
FROZEN_RUN_S = {"h100": 1 / 92.7, "cpu": 0.5}  # a 1,000-step head run; CPU: 77 GFLOP at 156 GFLOP/s
#: A frozen-feature head run's cost by objective, as a multiple of :data:`FROZEN_RUN_S`, per device.
#: CPU: the median wall time of the committed Table 2 pieces of each objective (results/cmnist-table2
#: and, for CLOvE, its Appendix F.1-grid pieces in results/cmnist-table2-clove01-appendix-f1, whose
#: walls, unlike the decided grid's, exclude feature learning; featlib 0.5, a 2-core CPU, fp32; a
#: piece is a cell's 30 runs of 2,500 steps, its evaluation included), per run and 1,000 steps, over
#: FROZEN_RUN_S["cpu"]; CLOvE's kernel over pairs of
#: examples makes its step the dearest there. GPU: only IGA is dearer, by its share of the committed
#: ERM-NF pieces on an H200 (results/cmnist-erm-nf-h200: IGA 120 s, the other penalised objectives
#: 31-38 s, CLOvE 33 s); no frozen-head timing per objective is committed for a GPU.
FROZEN_OBJECTIVE_COST = {
    "cpu": {"erm": 1.0, "irmv1": 1.5, "ib_irm": 1.6, "vrex": 1.15, "irmx": 1.6, "iga": 2.0, "fishr": 2.9, "clove": 11.0},
    "gpu": {"iga": 3.9},
}
#: Sustained FLOP/s of backbone training steps.
BACKBONE_FLOPS = {"t4": 2.4e12, "cpu": 213e9}
#: Sustained FLOP/s of the small ColoredMNIST CNN's full-batch step. The CPU's is measured on this
#: repository's 2-core machine with its default channels-last layout (benchmarks/cnn_memory_format.py):
#: 2.3 s a step on 5,000 images (69 GFLOP, 30 GFLOP/s) and 31.5 s on 50,000 (0.69 TFLOP, 22 GFLOP/s);
#: 25e9 sits between the two sizes the saliency studies use. Small channel counts keep a T4 well
#: below its peak.
CNN_FLOPS = {"t4": 1.5e12, "cpu": 25e9}
#: Forward FLOPs per example (images, at 224 px) or per token (text).
BACKBONE_FWD_FLOPS = {"densenet121": 5.7e9, "resnet50": 8.2e9, "small_cnn": 5e6,
                      "distilbert": 86e6, "minilm": 21e6}
#: Per optimiser step overhead (kernel launches, Python) on each device, seconds.
STEP_OVERHEAD_S = {"t4": 1e-3, "cpu": 2e-4}
#: The same for one step of a stack of frozen-feature heads on a GPU, where the step's arithmetic is
#: small and its 110-350 eager operators a step (forward, backward and update, counted on the CPU
#: with a dispatch counter for chapter 04's stacks of 9 x 9 heads) set its time. A lower bound,
#: measured: on an H200 (results/sittings/2026-11-27-h200) chapter 04's ``colab`` OOD stage on
#: ColoredMNIST-025 (8 objectives x 2,500 steps) ran more than 150 s unfinished, at least 7.5 ms a
#: step, of which the FLOP count above explains about 1; a Colab host is slower than the H200's.
#: The CPU keeps STEP_OVERHEAD_S: its frozen rates come from whole committed pieces.
FROZEN_STEP_OVERHEAD_S = {"t4": 6.5e-3, "cpu": STEP_OVERHEAD_S["cpu"]}
#: Download speed assumed for the WILDS archives (bytes per second) and a small model's step on a GPU.
DOWNLOAD_BPS = 20e6


def _device_s(h100_or_cpu: dict, device: str) -> float:
    return h100_or_cpu["h100"] * T4_OVER_H100 if device == "t4" else h100_or_cpu["cpu"]


def mlp_size_factor(n_train: int, hidden_dim: int, inputs: int = 392) -> float:
    """FLOPs of a full-batch MLP step relative to the measured one (50,000 images, H = 256)."""
    flops = lambda n, h: n * (inputs * h + h * h + h)  # noqa: E731
    return flops(n_train, hidden_dim) / flops(50000, 256)


@dataclass
class Estimate:
    """Estimated seconds on a Colab T4 GPU and on a 2-core CPU, with the parts that make them up,
    and the run's stages with their peak memory (:class:`featlib.training.memory.StagePeak`)."""

    t4_s: float = 0.0
    cpu_s: float = 0.0
    parts: dict[str, tuple[float, float]] = field(default_factory=dict)
    peaks: list = field(default_factory=list)

    def need(self, peaks) -> Estimate:
        """Add stages' peak memory (a run's stages follow one another: the peak is the largest)."""
        self.peaks.extend(peaks)
        return self

    @property
    def peak(self):
        """The stage with the most memory (None when no stage was modelled)."""
        from featlib.training.memory import largest

        return largest(self.peaks)

    def add(self, name: str, t4_s: float, cpu_s: float) -> Estimate:
        """Add a part; its T4 time is at most its CPU time (see the module)."""
        t4_s = min(t4_s, cpu_s)
        old = self.parts.get(name, (0.0, 0.0))
        self.parts[name] = (old[0] + t4_s, old[1] + cpu_s)
        self.t4_s += t4_s
        self.cpu_s += cpu_s
        return self

    def __add__(self, other: Estimate) -> Estimate:
        out = Estimate()
        for source in (self, other):
            for name, (t4, cpu) in source.parts.items():
                out.add(name, t4, cpu)
            out.need(source.peaks)
        return out

    def describe(self) -> str:
        """"about 14 min on a Colab T4 GPU, about 9.5 h on a 2-core CPU (estimated: ...)"; a run
        whose counted steps take under :data:`SHORT_S` on the CPU is only called short, since
        what the count leaves out (loading data, building models, evaluating) then dominates."""
        if self.cpu_s < SHORT_S:
            return ("a few minutes at most on a CPU or a GPU (its training steps take seconds; loading data, "
                    "building the models and evaluating them, which this estimate does not count, take longer)")
        return (f"about {prose.minutes(self.t4_s)} on a Colab T4 GPU and about {prose.minutes(self.cpu_s)} "
                "on a 2-core CPU (estimated from counted training steps and step times measured on an H100 "
                "and on a 2-core CPU, not measured on a T4)")


# -- ColoredMNIST (chapters 03 and 04) ---------------------------------------------------------
def round_cost(learner: str) -> float:
    """A step of ``learner`` relative to ERM's (its registration's ``step_cost``: featlib.cost on
    the H100, iFeAT 1.47x in its worst round, FeAT 1.16-1.78x, Bonsai 1.1x)."""
    from featlib.feature_learning import FEATURE_LEARNERS

    return FEATURE_LEARNERS.get(learner).step_cost


def feature_learning_epochs(protocol, learner: str, expected_rounds: int | None = None) -> float:
    """ERM-step equivalents of one seed's feature learner ``learner`` (Table 6's epochs, scaled, or
    the schedule it was registered with; rounds of one length up to ``expected_rounds`` + the
    discarded one, at most ``max_rounds``)."""
    from featlib.feature_learning import FEATURE_LEARNERS

    rounds = min(protocol.max_rounds, (expected_rounds or protocol.max_rounds) + 1)
    stages = FEATURE_LEARNERS.get(learner).stages(protocol.learner_options(learner), rounds)
    return sum(length for _, length in stages) * round_cost(learner)


def cmnist(protocols, oracle: bool = True) -> Estimate:
    """Every protocol of a ColoredMNIST chapter: feature learning, ERM-NF stacks, frozen heads."""
    from featlib.experiments.paper_values import FEAT_STOP_ROUND

    protocols = list(protocols)
    est = Estimate()
    for p in protocols:
        size = mlp_size_factor(p.n_train, p.hidden_dim)
        seeds = len(p.seeds)
        learned = [i for i in p.learners if i != "erm-nf"]
        epochs = sum(feature_learning_epochs(p, i, FEAT_STOP_ROUND.get(p.dataset)) for i in learned) * seeds
        if oracle:
            epochs += p.learner_options("erm")["epochs"] * seeds
        est.add("feature learning", *(epochs * size * _device_s(MLP_STEP_S, d) for d in ("t4", "cpu")))
        if "erm-nf" in p.learners:
            run_steps = seeds * sum(len(p.configurations(o)) for o in p.objectives) * p.nf_ood_steps
            est.add("ERM-NF runs", *(run_steps * size * _device_s(NF_RUN_STEP_S, d) for d in ("t4", "cpu")))
        frozen = [i for i in p.learners if i != "erm-nf"]
        if frozen:
            def runs(device: str) -> float:  # in ERM-objective run equivalents on ``device``
                cost = FROZEN_OBJECTIVE_COST["cpu" if device == "cpu" else "gpu"]
                return seeds * len(frozen) * sum(len(p.configurations(o)) * cost.get(o, 1.0) for o in p.objectives)
            head = p.n_train * p.hidden_dim / (50000 * 256) * p.ood_steps / 1000
            est.add("frozen-feature runs", *(runs(d) * head * _device_s(FROZEN_RUN_S, d)
                                             + len(p.objectives) * p.ood_steps * FROZEN_STEP_OVERHEAD_S[d]
                                             for d in ("t4", "cpu")))
    return est.need(memory.cmnist_peaks(protocols, oracle=oracle))


# -- chapter 06's ColoredMNIST models ----------------------------------------------------------
def cnn_step_flops(n_train: int, hidden_dim: int = 256, side: int = 28, channels: int = 3) -> float:
    """FLOPs of one full-batch training step of :class:`~featlib.models.ColoredMNISTCNN`."""
    macs, c, s = 0.0, channels, side
    for out in (16, 32, 64):
        macs += s * s * out * c * 9
        c, s = out, s // 2
    macs += c * s * s * hidden_dim + hidden_dim
    return 3 * 2 * macs * n_train


def saliency(protocol) -> Estimate:
    """The ERM snapshots (one run to the longest), Bonsai and FeAT of the saliency study."""
    from featlib.experiments.colored_mnist import schedule
    from featlib.feature_learning import FEATURE_LEARNERS

    scale = protocol.epoch_scale

    def learner_epochs(learner: str, rounds: int) -> float:
        stages = FEATURE_LEARNERS.get(learner).stages(schedule(protocol.dataset, learner, scale), rounds)
        return sum(length for _, length in stages) * round_cost(learner)

    epochs = max(protocol.erm_epochs) * scale
    if protocol.bonsai:
        epochs += learner_epochs("bonsai", protocol.feat_rounds)
    epochs += learner_epochs("ifeat", protocol.feat_rounds)
    est = Estimate()
    if protocol.architecture == "cnn":
        flops = cnn_step_flops(protocol.n_train, protocol.hidden_dim)
        est.add("CNN training", epochs * flops / CNN_FLOPS["t4"], epochs * flops / CNN_FLOPS["cpu"])
    else:
        size = mlp_size_factor(protocol.n_train, protocol.hidden_dim)
        est.add("MLP training", *(epochs * size * _device_s(MLP_STEP_S, d) for d in ("t4", "cpu")))
    return est.need(memory.saliency_peaks(protocol))


# -- WILDS (chapters 05 and 06) ----------------------------------------------------------------
def _example_flops(protocol, backbone: str, resolution: int | None, tokens: int | None) -> float:
    spec = protocol.spec
    fwd = BACKBONE_FWD_FLOPS.get(backbone, BACKBONE_FWD_FLOPS["small_cnn"])
    if spec.modality == "text":
        return fwd * (tokens or spec.max_token_length or 128)
    side = resolution or (spec.resolution[0] if spec.resolution else 224)
    return fwd * (side / 224) ** 2


def fabricated_split_sizes(dataset: str) -> dict[str, int]:
    """Examples per split (train / val / test) of the fabricated copy of ``dataset``
    (:mod:`featlib.data.wilds_fabricate`'s default sizes)."""
    from featlib.data.wilds_fabricate import FABRICATORS

    d = FABRICATORS.get(dataset).defaults
    if "n_train_users" in d:  # Amazon: users x reviews
        return {"train": d["n_train_users"] * d["n_per_user"], "val": d["n_val_users"] * d["n_per_user_eval"],
                "test": d["n_test_users"] * d["n_per_user_eval"]}
    return {"train": d["n_train"], "val": d["n_val"], "test": d["n_test"]}


def wilds(protocol, split_sizes: dict[str, int] | None = None, download: bool = False,
          fabricated: bool = False) -> Estimate:
    """Feature learning, embeddings, the OOD stage and DFR of a WILDS protocol. ``split_sizes``:
    examples per split (capped by ``max_examples``); by default the real datasets' sizes, or with
    ``fabricated`` the fabricated copy's."""
    from featlib.feature_learning import FEATURE_LEARNERS

    if split_sizes is None and fabricated:
        split_sizes = fabricated_split_sizes(protocol.dataset)
    spec, cfg = protocol.spec, protocol.train_config()
    backbone = protocol.backbone or spec.backbone
    per_example = _example_flops(protocol, backbone, protocol.resolution, protocol.max_token_length)
    sizes = dict(split_sizes or REAL_SPLIT_SIZES.get(protocol.dataset, {"train": 100000, "val": 10000, "test": 10000}))
    if protocol.max_examples:
        sizes = {k: min(v, protocol.max_examples) for k, v in sizes.items()}
    seeds = len(protocol.seed_list)
    est = Estimate()
    steps = 0.0
    for learner in protocol.learners:
        stages = FEATURE_LEARNERS.get(learner).stages(cfg.learner_options(learner), cfg.rounds)
        steps += sum(length for _, length in stages) * round_cost(learner)
    train_flops = steps * seeds * 3 * per_example * cfg.batch_size
    est.add("feature learning", *(train_flops / BACKBONE_FLOPS[d] + steps * seeds * STEP_OVERHEAD_S[d]
                                  for d in ("t4", "cpu")))
    embed_flops = len(protocol.learners) * seeds * sum(sizes.values()) * per_example
    est.add("embeddings", *(embed_flops / BACKBONE_FLOPS[d] for d in ("t4", "cpu")))
    ood = protocol.ood_config("erm")
    configs = sum(len(protocol.penalty_weights) if o in ("irmv1", "vrex", "irmx") else 1 for o in protocol.objectives)
    head_steps = len(protocol.learners) * seeds * configs * ood.epochs * sizes.get("train", 0) / ood.batch_size
    est.add("OOD stage", *(head_steps * STEP_OVERHEAD_S[d] for d in ("t4", "cpu")))
    if download:
        from featlib.data.wilds_data import download_size_gb

        seconds = download_size_gb(protocol.dataset) * 1e9 / DOWNLOAD_BPS
        est.add("download", seconds, seconds)
    return est.need(memory.wilds_peaks(protocol, sizes, protocol.train_config().eval_batch_size))


#: Examples per split of the real WILDS datasets (train / OOD val / OOD test), from WILDS' paper.
REAL_SPLIT_SIZES = {
    "camelyon17": {"train": 302436, "val": 34904, "test": 85054},
    "civilcomments": {"train": 269038, "val": 45180, "test": 133782},
    "fmow": {"train": 76863, "val": 19915, "test": 22108},
    "iwildcam": {"train": 129809, "val": 14961, "test": 42791},
    "amazon": {"train": 245502, "val": 100050, "test": 100050},
    "rxrx1": {"train": 40612, "val": 9854, "test": 34432},
}


# -- chapter 07 ------------------------------------------------------------------------------
def cost(settings, cases) -> Estimate:
    """The cost benchmark: every learner, round, step and repeat of each case."""
    from featlib.cost.benchmark import expected_rounds

    est = Estimate()
    for case in cases:
        stages = sum(len(expected_rounds(learner, settings)) for learner in settings.learners)
        steps = stages * settings.steps * settings.repeats
        if getattr(case, "name", "") == "cmnist":
            size = mlp_size_factor(case.n_train, case.hidden_dim)
            est.add("ColoredMNIST steps", *(steps * size * _device_s(MLP_STEP_S, d) * 1.3 for d in ("t4", "cpu")))
        else:
            flops = 3 * BACKBONE_FWD_FLOPS.get(case.backbone, 5e6) * ((case.resolution or 96) / 224) ** 2 * case.batch_size
            est.add("WILDS steps", *(steps * (flops / BACKBONE_FLOPS[d] + STEP_OVERHEAD_S[d]) * 1.2
                                     for d in ("t4", "cpu")))
    return est.need(memory.cost_peaks(cases, settings.learners))


# -- chapters 01 and 02 ----------------------------------------------------------------------
#: A GD step of the two-bit CNN on 5,000 examples with d = 100, measured on the 2-core CPU
#: (chapter 01 at full scale: 15,000 steps in about 45 s); a GPU step is launch-bound.
TWO_BIT_STEP_S = {"cpu": 3e-3, "t4": 1.5e-3}


def two_bit(steps: int, n_examples: int = 5000, d: int = 100, m: int = 20) -> Estimate:
    """``steps`` gradient steps of the two-bit model (``m`` filters per class)."""
    size = n_examples * d / (5000 * 100)
    return Estimate().add("gradient descent", steps * max(TWO_BIT_STEP_S["t4"], 1e-4 * size),
                          steps * TWO_BIT_STEP_S["cpu"] * max(size, 0.05)).need(memory.two_bit_peaks(n_examples, d, m))
