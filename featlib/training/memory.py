"""A run's peak memory from counted peaks, stage by stage, so that a run that cannot fit says so before it starts.

Peaks are counted, not guessed: :class:`PeakCounter` sees every tensor an operation produces
(forward, backward, optimizer, evaluation) and every storage freed, and keeps the peak of the bytes
alive. Each stage's peak is linear in a few sizes, and its coefficients are fitted to peaks counted
on the CPU at small sizes (``python -m featlib.training.memory [part ...]`` counts, fits and prints
them again, each with the model over a peak counted at a size the fit did not see):

* **the OOD stage's stacks** (``stacks``, :data:`PEAK_COEFFICIENTS`; :func:`measure_stage_peak`, the
  fast path, eager: a compiled step fuses and holds no more), per stack kind and objective, in
  float32 bytes: ERM-NF (``"mlp"``): ``A = C n H`` (one hidden activation of the stack), ``L = C n``
  (logits), ``P`` (the stack's parameters), ``X = n I`` (the images); frozen features (``"heads"``):
  ``F = G n H`` (the features), ``L = G C n``, ``P = G C (H + 1)``. The issue's unit is ``A``:
  :func:`activations_per_step` expresses a peak in it (the memory check this replaced assumed 2
  activations per step; at the protocol's size the counted model gives 4.1 for IRMv1, 5.1 for
  Fishr and IB-IRM, 7.7 for IGA's Hessian-vector-product form);
* **full-batch feature learning** on ColoredMNIST (``learners``, :data:`LEARNER_PEAKS`): a whole run of
  each learner with the MLP or the CNN of chapter 06, beyond its data (:func:`colored_mnist_bytes`,
  counted exactly from the tensors a drawn dataset holds);
* **WILDS backbones** (``backbones``, :data:`BACKBONE_PEAKS`): a training step's and an embedding
  batch's activations per image pixel or per token (and per squared token, attention's scores),
  beside the network, its gradients and the optimiser's state;
* **the two-bit model** (``two-bit``, :data:`TWO_BIT_PEAKS`).

:func:`cmnist_peaks`, :func:`saliency_peaks`, :func:`wilds_peaks`, :func:`cost_peaks` and
:func:`two_bit_peaks` give a chapter's stages (:class:`StagePeak`, with what stays resident from
earlier stages: a ColoredMNIST experiment keeps every seed's data on its device); the largest
(:func:`largest`) is the run's peak. :func:`protocol_bytes` is a protocol's, which
``CMNISTProtocol.memory_estimate`` checks against the device's memory before anything runs, and
chapters' preflights print (``featbook.runtime``) against the GPU's, or a Colab T4's
(:data:`T4_BYTES`).

Checked (``tests/test_memory_model.py``): against whole runs measured on the CPU by
:class:`featlib.cost.PeakMemory` (the cost benchmark's measurement: protocol runs, the cost
benchmark's cases, the committed ``results/cost/cpu-2core``), and against the committed GPU
peaks (``results/cost/h200``), which showed that a GPU holds more than the CPU counts: the model
adds :data:`GPU_EXTRA_BYTES` on a GPU (:attr:`StagePeak.gpu_bytes`), fitted there. Counted at
float32; a bf16 stage (the OOD stage's ``precision="bf16"``, WILDS' autocast on CUDA) holds less,
so the float32 count bounds it. Not modelled: the CUDA context, and the caching allocator's free
blocks (fragmentation), so on a GPU the check refuses what cannot fit by the tensors, not
everything that will not fit.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..validation import check_choice, check_int

KINDS = ("mlp", "heads")
INPUT_DIM = 392
#: The sizes of each kind's model, in the order of its coefficients.
TERMS = {"mlp": ("A", "L", "P", "X"), "heads": ("F", "L", "P")}
#: (n, H, C, G) of the fitted measurements, and one more the fit does not see (the check).
FIT_SIZES = {
    "mlp": ((2048, 64, 2, 1), (4096, 32, 3, 1), (1024, 128, 2, 1), (3000, 48, 4, 1), (1500, 16, 6, 1),
            (2500, 96, 3, 1)),
    "heads": ((2048, 64, 3, 2), (4096, 32, 6, 1), (1024, 128, 2, 3), (3000, 48, 10, 2), (1500, 16, 30, 2),
              (2500, 96, 5, 4)),
}
CHECK_SIZE = {"mlp": (3500, 80, 3, 1), "heads": (3500, 80, 8, 3)}


class PeakCounter(TorchDispatchMode):
    """A counting allocator's view of tensors: inside, every storage an operation produces is
    counted until it is freed (a weak reference to the storage itself, so tensors that only
    autograd's graph still holds stay counted), and :attr:`peak` is the most bytes alive at
    once. Tensors made before entering are not counted, nor is a view of one among ``known``
    (an operation that returns a view of a weight made before, a linear layer's transposed weight,
    would otherwise count the weight's whole storage as new)."""

    def __init__(self, known=()):
        super().__init__()
        self.live: dict[int, tuple[StorageWeakRef, int]] = {}
        self.current = 0
        self.peak = 0
        self.known = {t.untyped_storage().data_ptr() for t in known}

    def _sweep(self) -> None:
        for key in [k for k, (ref, _) in self.live.items() if ref.expired()]:
            self.current -= self.live.pop(key)[1]

    def alive(self) -> int:
        """Bytes of the counted tensors that are still alive now."""
        self._sweep()
        return self.current

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._sweep()
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                key = storage.data_ptr()
                if key and key not in self.live and key not in self.known:
                    self.live[key] = (StorageWeakRef(storage), storage.nbytes())
                    self.current += storage.nbytes()
        self.peak = max(self.peak, self.current)
        return out


def sizes(kind: str, n: int, hidden: int, runs: int, groups: int = 1, input_dim: int = INPUT_DIM) -> dict[str, int]:
    """The model's sizes (float32 bytes) of a stack: see the module docstring."""
    check_choice("kind", kind, KINDS)
    for name, value in (("n", n), ("hidden", hidden), ("runs", runs), ("groups", groups)):
        check_int(name, value, minimum=1)
    c, h = runs, hidden
    if kind == "mlp":
        return {"A": 4 * c * n * h, "L": 4 * c * n, "P": 4 * c * (input_dim * h + h * h + 3 * h + 1),
                "X": 4 * n * input_dim}
    return {"F": 4 * groups * n * h, "L": 4 * groups * c * n, "P": 4 * groups * c * (h + 1)}


def measure_stage_peak(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1,
                       steps: int = 2, precision: str = "fp32") -> int:
    """Counted peak bytes of ``steps`` training steps of a stack (fast path, eager, on the CPU,
    every run from step 0, accuracies at the end) beyond its inputs and parameters."""
    from ..models import ColoredMNISTMLP, StackedHeads, StackedMLP, fresh_head
    from .ood_stage import Environments, LabelledInputs, OODStageConfig, StackRuns, train_stack

    gen = torch.Generator().manual_seed(0)
    y = (torch.rand(n, generator=gen) > 0.5).float()
    envs = (slice(0, n // 2), slice(n // 2, None))
    config = OODStageConfig(objective, steps=steps, path="fast", precision=precision, record="final")
    if kind == "mlp":
        stack = StackedMLP([ColoredMNISTMLP(hidden, seed=1)] * runs)
        train = LabelledInputs(torch.rand(n, INPUT_DIM, generator=gen), y, envs)
        stacked = StackRuns.networks(stack, torch.full((runs,), 1e2))
    else:
        stack = StackedHeads([[fresh_head(hidden, seed=1)] * runs] * groups)
        train = LabelledInputs(torch.rand(groups, n, hidden, generator=gen), y.expand(groups, 1, n), envs)
        stacked = StackRuns.heads(stack, torch.full((groups, runs), 1e2))
    with PeakCounter() as counter:
        train_stack(stacked, Environments(train), config)
    return counter.peak


def fit_coefficients(kind: str, objective: str, points=None) -> tuple[float, ...]:
    """Least-squares coefficients of :data:`TERMS` ``[kind]`` fitted to peaks counted at
    ``points`` ((n, H, C, G) each; default :data:`FIT_SIZES`)."""
    points = FIT_SIZES[kind] if points is None else points
    rows, peaks = [], []
    for n, h, c, g in points:
        terms = sizes(kind, n, h, c, g)
        rows.append([terms[t] for t in TERMS[kind]])
        peaks.append(measure_stage_peak(kind, objective, n, h, c, g))
    coefficients, *_ = np.linalg.lstsq(np.array(rows, float), np.array(peaks, float), rcond=None)
    return tuple(round(float(k), 3) for k in coefficients)


#: (kind, objective) -> coefficients of TERMS[kind], fitted by :func:`fit_coefficients` on the
#: CPU (featlib 0.4, torch 2.14; ``python -m featlib.training.memory`` prints them again).
#: The comment after each entry: the model over the peak counted at CHECK_SIZE (not fitted), and
#: the modelled step peak in activations at the protocol's size (n 50,000, H 256, C 30; G 12).
PEAK_COEFFICIENTS: dict[tuple[str, str], tuple[float, ...]] = {
    ("mlp", "erm"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "irmv1"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "vrex"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "irmx"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "ib_irm"): (5.0, 1.011, 5.0, 1.003),  # check 1.000, 5.12 activations at the protocol's size
    ("mlp", "clove"): (4.0, 0.011, 5.0, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("mlp", "iga"): (7.493, 7.823, 12.256, 1.006),  # check 1.000, 7.73 activations at the protocol's size
    ("mlp", "fishr"): (5.0, 1.011, 5.0, 1.003),  # check 1.000, 5.12 activations at the protocol's size
    ("mlp", "group_dro"): (4.0, 0.012, 5.001, 1.003),  # check 1.000, 4.12 activations at the protocol's size
    ("heads", "erm"): (1.018, 3.133, -5.343),  # check 1.002, 1.38 activations at the protocol's size
    ("heads", "irmv1"): (1.017, 4.634, -5.238),  # check 1.001, 1.56 activations at the protocol's size
    ("heads", "vrex"): (1.018, 3.133, -5.343),  # check 1.002, 1.38 activations at the protocol's size
    ("heads", "irmx"): (1.017, 4.635, -5.168),  # check 1.002, 1.56 activations at the protocol's size
    ("heads", "ib_irm"): (1.017, 4.634, -5.238),  # check 1.001, 1.56 activations at the protocol's size
    ("heads", "clove"): (1.035, 26.64, -15.781),  # check 1.001, 4.15 activations at the protocol's size
    ("heads", "iga"): (1.017, 3.634, -3.308),  # check 1.001, 1.44 activations at the protocol's size
    ("heads", "fishr"): (1.979, 5.139, 14.984),  # check 1.003, 2.59 activations at the protocol's size
    ("heads", "group_dro"): (1.017, 3.134, -5.273),  # check 1.002, 1.38 activations at the protocol's size
}


def step_peak_bytes(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1) -> float:
    """The modelled peak of a stack's training beyond its inputs and parameters."""
    key = (kind, objective)
    if key not in PEAK_COEFFICIENTS:
        from ..objectives import OBJECTIVES

        if objective not in OBJECTIVES:
            raise ValueError(f"no counted peak for objective {objective!r} on a {kind} stack: it is no registered "
                             f"objective (registered: {', '.join(OBJECTIVES.names())})")
        # a new objective: its peak is counted now, once per process (seconds, on small stacks)
        PEAK_COEFFICIENTS[key] = fit_coefficients(kind, objective)
    terms = sizes(kind, n, hidden, runs, groups)
    return max(0.0, sum(k * terms[t] for k, t in zip(PEAK_COEFFICIENTS[key], TERMS[kind])))


def stage_bytes(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1) -> float:
    """Bytes a stack's OOD stage needs at its peak: the inputs and the stack's parameters, held
    all along, plus :func:`step_peak_bytes`."""
    terms = sizes(kind, n, hidden, runs, groups)
    resident = terms["P"] + (terms["X"] if kind == "mlp" else terms["F"])
    return resident + step_peak_bytes(kind, objective, n, hidden, runs, groups)


def activations_per_step(kind: str, objective: str, n: int, hidden: int, runs: int, groups: int = 1) -> float:
    """A stack's modelled step peak in activations of the stack (``C n H`` float32 values; for
    frozen features ``G n H``): the unit in which objectives are compared here."""
    terms = sizes(kind, n, hidden, runs, groups)
    return step_peak_bytes(kind, objective, n, hidden, runs, groups) / terms["A" if kind == "mlp" else "F"]


def protocol_bytes(protocol) -> float:
    """The most memory a ColoredMNIST protocol needs at once: the largest stage of
    :func:`cmnist_peaks` (its stacks, its feature learning, with every seed's data resident)."""
    return largest(cmnist_peaks([protocol])).bytes


# -- feature learning, full batch (ColoredMNIST: chapters 03, 04, 06 and 07) ---------------------
#: Per example, the bytes of a drawn ColoredMNIST environment beside its images (float32 label,
#: int64 digit, colour and index) and of the training concatenation beside its images (float32
#: label, int64 environment): :class:`featlib.data.colored_mnist.EnvData` and ``train_x``/``train_y``/``train_env``.
ENV_EXTRA_BYTES = 4 + 3 * 8
CONCAT_EXTRA_BYTES = 4 + 8
LEARNER_MODELS = ("mlp", "cnn")
#: The sizes of each model's learner peak, in the order of :data:`LEARNER_PEAKS`' coefficients:
#: ``A = 4 n H`` (one hidden activation), ``X = 4 n F`` (the images, F = C S S values each),
#: ``P`` (the network's parameters, float32), ``L = 4 n`` (one value per image), and for the CNN
#: ``E = 4 n`` x the values its convolution blocks produce per image (:func:`cnn_values_per_image`).
#: The CNN's hidden activation (H values an image, against its blocks' 49,184 at 28 x 28) and a
#: Bonsai resample of the images are too small beside ``E`` to be told apart from it by a fit (with
#: ``A`` too, the fit put a large negative coefficient on it), so ``E``'s coefficient carries them.
LEARNER_TERMS = {"mlp": ("A", "X", "P", "L"), "cnn": ("E", "P")}
#: (dataset, n, H) of the counted runs each model's coefficients are fitted to, and one the fit does not see.
LEARNER_FIT_SIZES = {
    "mlp": (("cmnist025", 4000, 64), ("cmnist025", 8000, 128), ("cmnist025", 6000, 256), ("cmnist025", 10000, 32),
            ("cmnist025-patch", 3000, 64), ("cmnist025-patch", 5000, 128)),
    "cnn": (("cmnist025-patch", 300, 16), ("cmnist025-patch", 600, 64), ("cmnist025-patch", 450, 128),
            ("cmnist025", 600, 32)),
}
LEARNER_CHECK_SIZE = {"mlp": ("cmnist025", 12000, 192), "cnn": ("cmnist025-patch", 500, 48)}


def colored_mnist_bytes(n_train: int, n_test: int, n_val: int = 0, image_values: int = INPUT_DIM,
                        test_envs: int = 3) -> int:
    """Bytes of one drawn ColoredMNIST dataset as a run holds it: every environment's tensors
    (``n_test`` images in each of ``test_envs`` test environments, ``n_val`` validation images)
    and the training concatenation the learners and stacks read (``train_x``, ``train_y``, ``train_env``)."""
    per_image = 4 * image_values
    examples = n_train + test_envs * n_test + n_val
    return examples * (per_image + ENV_EXTRA_BYTES) + n_train * (per_image + CONCAT_EXTRA_BYTES)


def cnn_values_per_image(image_shape: tuple[int, int, int]) -> int:
    """Values the CNN's convolution blocks produce per image (convolution, ReLU and pooling outputs)."""
    from ..models.cmnist_cnn import CONV_CHANNELS

    side, total = image_shape[1], 0
    for channels in CONV_CHANNELS:
        total += 2 * channels * side * side + channels * (side // 2) ** 2
        side //= 2
    return total


def network_parameters(model: str, hidden: int, image_shape: tuple[int, int, int]) -> int:
    """Parameters of :func:`featlib.models.cmnist_models.make_cmnist_model` (``"mlp"`` or ``"cnn"``)."""
    from ..models.cmnist_cnn import CONV_CHANNELS

    check_choice("model", model, LEARNER_MODELS)
    c, side = image_shape[0], image_shape[1]
    if model == "mlp":
        values = c * side * side
        return values * hidden + hidden * hidden + 3 * hidden + 1
    total = 0
    for out in CONV_CHANNELS:
        total += c * out * 9 + out
        c, side = out, side // 2
    return total + c * side * side * hidden + hidden + hidden + 1


def learner_sizes(model: str, n: int, hidden: int, image_shape: tuple[int, int, int]) -> dict[str, int]:
    """The terms of :data:`LEARNER_TERMS` (bytes) for ``n`` training images of ``image_shape``."""
    check_choice("model", model, LEARNER_MODELS)
    check_int("n", n, minimum=1)
    check_int("hidden", hidden, minimum=1)
    values = image_shape[0] * image_shape[1] * image_shape[2]
    return {"A": 4 * n * hidden, "X": 4 * n * values, "P": 4 * network_parameters(model, hidden, image_shape),
            "L": 4 * n, "E": 4 * n * cnn_values_per_image(image_shape)}


def _short_options(learner: str, dataset: str) -> dict:
    """A counted run's options: Table 6's rounds (Bonsai's, FeAT's up to the round the rule
    rolls back), two epochs each, every round trained (the rule "never")."""
    from ..feature_learning.schedules import schedule, schedule_dataset
    from ..experiments.paper_values import FEAT_STOP_ROUND

    if learner == "erm":
        return {"epochs": 2}
    if learner == "bonsai":
        return {"round_epochs": (2,) * len(schedule(dataset, "bonsai")["round_epochs"]), "synthesis_epochs": 2}
    return {"epochs_per_round": 2, "max_rounds": FEAT_STOP_ROUND[schedule_dataset(dataset)] + 1,
            "termination_rule": "never"}


def measure_learner_peak(learner: str, model: str, dataset: str, n: int, hidden: int) -> int:
    """Counted peak bytes of a whole full-batch run of ``learner`` (its networks, optimiser state,
    activations, sets and scoring; the drawn data made before are not counted) on the CPU."""
    from ..data import make_colored_mnist
    from ..feature_learning import FEATURE_LEARNERS

    data = make_colored_mnist(dataset, 1, n_train=n, n_test=200)
    data.train_x, data.train_y, data.train_env  # noqa: B018 (the concatenation is data, made before)
    with PeakCounter() as counter:
        FEATURE_LEARNERS.get(learner)(data, 1, model=model, hidden_dim=hidden, **_short_options(learner, dataset))
    return counter.peak


def _image_shape(dataset: str) -> tuple[int, int, int]:
    from ..data.colored_mnist import COLORED_MNIST

    return COLORED_MNIST.get(dataset).image_shape


def fit_learner_coefficients(learner: str, model: str, points=None) -> tuple[float, ...]:
    """Least-squares coefficients of :data:`LEARNER_TERMS` ``[model]`` fitted to runs counted at
    ``points`` ((dataset, n, H) each; default :data:`LEARNER_FIT_SIZES`)."""
    points = LEARNER_FIT_SIZES[model] if points is None else points
    rows, peaks = [], []
    for dataset, n, hidden in points:
        terms = learner_sizes(model, n, hidden, _image_shape(dataset))
        rows.append([terms[t] for t in LEARNER_TERMS[model]])
        peaks.append(measure_learner_peak(learner, model, dataset, n, hidden))
    coefficients, *_ = np.linalg.lstsq(np.array(rows, float), np.array(peaks, float), rcond=None)
    return tuple(round(float(k), 3) for k in coefficients)



#: (model, learner) -> coefficients of LEARNER_TERMS[model], fitted by :func:`fit_learner_coefficients`
#: on the CPU (featlib 0.5, torch 2.14; ``python -m featlib.training.memory learners`` prints them
#: again, with the model over a run counted at LEARNER_CHECK_SIZE, not fitted, after each entry).
#: The MLP's are the step's count in whole activations: ERM 4 activations and 4 copies of the
#: network (weights, gradients, Adam's two moments), FeAT's and iFeAT's rounds 6 (the second
#: head's gradient of the features beside the first's), Bonsai's synthesis a resampled copy of the images.
LEARNER_PEAKS: dict[tuple[str, str], tuple[float, ...]] = {
    ("mlp", "erm"): (4.0, -0.0, 4.0, 0.001),  # check 1.000
    ("mlp", "bonsai"): (4.0, 1.0, 6.003, 8.532),  # check 1.000
    ("mlp", "feat"): (6.0, -0.0, 5.003, 4.275),  # check 1.000
    ("mlp", "ifeat"): (6.0, -0.0, 5.003, 0.782),  # check 1.000
    ("cnn", "erm"): (0.957, 3.615),  # check 1.000
    ("cnn", "bonsai"): (1.056, 8.236),  # check 0.999
    ("cnn", "feat"): (1.007, 8.172),  # check 0.999
    ("cnn", "ifeat"): (1.007, 8.173),  # check 0.999
}

# -- WILDS backbones (chapters 05, 06 and 07) ---------------------------------------------------
#: Classes of each WILDS dataset (the ``n_classes`` its ``wilds`` dataset reports): the width of the head.
WILDS_CLASSES = {"camelyon17": 2, "civilcomments": 2, "fmow": 62, "iwildcam": 182, "amazon": 5, "rxrx1": 1139}
#: Image side of a dataset whose spec keeps the native size (RxRx1's 256 x 256 images).
NATIVE_SIDE = {"rxrx1": 256}
#: Optimiser states per parameter (:func:`featlib.training.minibatch.make_optimizer`: Adam's two
#: moments, SGD's momentum).
OPTIMIZER_STATES = {"adam": 2, "sgd": 1}
TEXT_BACKBONES = ("distilbert", "minilm")
#: The activation terms of a backbone's step, bytes: images ``B = 4 b S^2`` (batch b, side S);
#: text ``T = 4 b L`` and ``Q = 4 b L^2`` (L tokens: attention's scores grow with its square).
BACKBONE_TERMS = {"image": ("B",), "text": ("T", "Q")}
#: (batch, side or tokens) of the counted steps each backbone's coefficients are fitted to, one
#: the fit does not see, and the smallest, whose peak is the step's floor: what it holds whatever
#: the batch (a text step's largest tensors at a small batch are of the vocabulary's size: the word
#: embedding's dense gradient, at its backward, when the activations are gone; so a step holds the
#: larger of the floor and its activations, not their sum).
BACKBONE_FIT_SIZES = {"image": ((2, 64), (4, 64), (2, 96)), "text": ((4, 128), (8, 128), (4, 256), (2, 512))}
BACKBONE_CHECK_SIZE = {"image": (3, 80), "text": (6, 192)}
BACKBONE_FLOOR_SIZE = {"image": (2, 32), "text": (1, 8)}


def backbone_modality(backbone: str) -> str:
    return "text" if backbone in TEXT_BACKBONES else "image"


def _backbone_model(backbone: str, n_classes: int, tokens: int = 16):
    from ..models.wilds_backbones import WildsModel, make_backbone

    return WildsModel(make_backbone(backbone, pretrained=False, seed=0, max_token_length=max(tokens, 2)), n_classes)


def _backbone_input(backbone: str, batch: int, size: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    if backbone_modality(backbone) == "text":
        ids = torch.randint(1000, 2000, (batch, size), generator=gen)
        return torch.stack([ids, torch.ones_like(ids)], dim=-1)
    return torch.rand(batch, 3, size, size, generator=gen)


def measure_backbone_peak(backbone: str, batch: int, size: int, optimizer: str = "adam",
                          train: bool = True) -> int:
    """Counted peak bytes, on the CPU in float32, of a backbone with a 2-class head: built, then two
    training steps (``train``; the network, its gradients, the optimiser's state and the step's
    activations) or one forward pass without gradients (the embedding of a split: its activations,
    the network built before and known to the count, so that a view of a weight is not counted).
    ``size`` is the image side or the number of tokens."""
    from ..objectives import per_sample_cross_entropy
    from .minibatch import make_optimizer

    x = _backbone_input(backbone, batch, size)
    y = torch.arange(batch) % 2
    if not train:
        model = _backbone_model(backbone, 2, size)
        model.eval()
        with torch.no_grad(), PeakCounter(known=list(model.parameters()) + list(model.buffers())) as counter:
            model.featurizer(x)
        return counter.peak
    with PeakCounter() as counter:
        model = _backbone_model(backbone, 2, size)
        model.train()
        opt = make_optimizer(model.parameters(), optimizer, 1e-4)
        for _ in range(2):
            loss = per_sample_cross_entropy(model(x).float(), y).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        del model, opt, loss
    return counter.peak


def backbone_shape(backbone: str) -> tuple[int, int]:
    """(featurizer parameters, features) of a backbone, counted from the model built without weights."""
    model = _backbone_model(backbone, 2)
    return sum(p.numel() for p in model.featurizer.parameters()), model.n_features


def _backbone_resident(parameters: int, n_features: int, n_classes: int, optimizer: str) -> int:
    """Float32 bytes of the network, its gradients and the optimiser's state."""
    total = parameters + (n_features + 1) * n_classes
    return 4 * total * (2 + OPTIMIZER_STATES[optimizer])


def backbone_terms(backbone: str, batch: int, size: int) -> dict[str, int]:
    check_int("batch", batch, minimum=1)
    check_int("size", size, minimum=1)
    return {"B": 4 * batch * size * size, "T": 4 * batch * size, "Q": 4 * batch * size * size}


def fit_backbone_coefficients(backbone: str, points=None) -> dict:
    """The entry of :data:`BACKBONE_PEAKS` for ``backbone``: its parameters and features, the
    floor of a training step (beyond the network, gradients and Adam's state) and of an embedding
    batch (counted at :data:`BACKBONE_FLOOR_SIZE`), and the least-squares coefficients of
    :data:`BACKBONE_TERMS` fitted, for both, to peaks counted at ``points`` ((batch, size) each;
    default :data:`BACKBONE_FIT_SIZES`)."""
    modality = backbone_modality(backbone)
    points = BACKBONE_FIT_SIZES[modality] if points is None else points
    parameters, features = backbone_shape(backbone)
    held = {True: _backbone_resident(parameters, features, 2, "adam"), False: 0}
    batch, size = BACKBONE_FLOOR_SIZE[modality]
    out = {"parameters": parameters, "features": features,
           "floor": tuple(measure_backbone_peak(backbone, batch, size, train=t) - held[t] for t in (True, False))}
    for kind, train in (("train", True), ("embed", False)):
        rows, peaks = [], []
        for batch, size in points:
            terms = backbone_terms(backbone, batch, size)
            rows.append([terms[t] for t in BACKBONE_TERMS[modality]])
            peaks.append(measure_backbone_peak(backbone, batch, size, train=train) - held[train])
        coefficients, *_ = np.linalg.lstsq(np.array(rows, float), np.array(peaks, float), rcond=None)
        out[kind] = tuple(round(float(k), 3) for k in coefficients)
    return out



#: backbone -> its featurizer's parameters and features, and the coefficients of BACKBONE_TERMS
#: for a training step ("train", beyond the network, gradients and optimiser state) and for an
#: embedding batch ("embed"), fitted by :func:`fit_backbone_coefficients` on the CPU in float32
#: (featlib 0.5, torch 2.14, transformers 5.2; ``python -m featlib.training.memory backbones``).
#: On a GPU the WILDS loop runs the backbone under bfloat16 autocast, so these float32 counts
#: bound its activations from above (no backbone's GPU peak is committed to check by how much).
#: A text step's floor is two tensors of the word embedding's size (its dense gradient); its
#: embedding pass computes attention without materialising the scores (no squared term).
BACKBONE_PEAKS: dict[str, dict] = {
    "small_cnn": {"parameters": 60864, "features": 64, "floor": (705116, 262272), "train": (86.477,),
                  "embed": (32.003,)},  # check train 0.996, embed 1.000
    "resnet18": {"parameters": 11176512, "features": 512, "floor": (18915244, 262144), "train": (301.173,),
                 "embed": (32.0,)},  # check train 1.021, embed 1.000
    "densenet121": {"parameters": 6953856, "features": 1024, "floor": (5975992, 409600), "train": (658.194,),
                    "embed": (50.0,)},  # check train 1.006, embed 1.000
    "resnet50": {"parameters": 23508032, "features": 2048, "floor": (19089984, 425984), "train": (446.463,),
                 "embed": (52.0,)},  # check train 1.001, embed 1.000
    "minilm": {"parameters": 22713216, "features": 384, "floor": (91998248, 135296), "train": (42520.061, 216.2),
               "embed": (4228.0, 0.0)},  # check train 0.999, embed 1.000
    "distilbert": {"parameters": 66362880, "features": 768, "floor": (187531812, 270464),
                   "train": (81439.352, 215.999), "embed": (8452.0, 0.0)},  # check train 1.000, embed 1.000
}

# -- the two-bit model (chapters 01 and 02) -----------------------------------------------------
#: The two-bit run's sizes: ``D = 4 n 2 d`` (one sample's two patches, float32; the run draws a
#: training and an OOD test sample of ``n`` examples each) and ``M = 4 n m`` (one value per
#: example and filter).
TWO_BIT_TERMS = ("D", "M")
#: (n, d, m) of the counted runs (IRMv1, the dearer objective of the two chapters), and one more.
TWO_BIT_FIT_SIZES = ((1000, 50, 20), (2000, 100, 20), (1600, 30, 40), (3000, 60, 10))
TWO_BIT_CHECK_SIZE = (2400, 80, 20)


def two_bit_terms(n: int, d: int, m: int) -> dict[str, int]:
    for name, value in (("n", n), ("d", d), ("m", m)):
        check_int(name, value, minimum=1)
    return {"D": 4 * n * 2 * d, "M": 4 * n * m}


def measure_two_bit_peak(n: int, d: int, m: int) -> int:
    """Counted peak bytes of a two-bit run (:class:`featlib.synthetic.SyntheticSetup`, three IRMv1
    steps; its samples drawn inside) on the CPU."""
    from ..data import TwoBitSpec
    from ..synthetic import SyntheticSetup
    from .full_batch import Phase

    spec = TwoBitSpec(n_per_env=max(1, n // 2), d=d)
    with PeakCounter() as counter:
        SyntheticSetup(spec=spec, m=m).run([Phase("irmv1", 3, 1.0)], progress=False)
    return counter.peak


def fit_two_bit_coefficients(points=TWO_BIT_FIT_SIZES) -> tuple[float, ...]:
    rows, peaks = [], []
    for n, d, m in points:
        terms = two_bit_terms(n, d, m)
        rows.append([terms[t] for t in TWO_BIT_TERMS])
        peaks.append(measure_two_bit_peak(n, d, m))
    coefficients, *_ = np.linalg.lstsq(np.array(rows, float), np.array(peaks, float), rcond=None)
    return tuple(round(float(k), 3) for k in coefficients)



#: Coefficients of TWO_BIT_TERMS fitted by :func:`fit_two_bit_coefficients` (the model over a run
#: counted at TWO_BIT_CHECK_SIZE, not fitted: 1.013).
TWO_BIT_PEAKS: tuple[float, ...] = (3.865, 1.761)

# -- the peaks of a run, stage by stage ---------------------------------------------------------
#: What a GPU holds beyond the tensors the CPU counts, fitted on the one GPU measurement of a
#: configuration the model covers (``results/cost/h200``, the cost benchmark on an H200: ERM's
#: full-batch step on 50,000 images, H = 256, 491,935,744 bytes by ``torch.cuda.max_memory_allocated``,
#: against the 371,054,712 this model counts for the same data and step): 115 MiB. Not explained by
#: the counted tensors (the CPU's own measurement, ``results/cost/cpu-2core``, is within 0.2% of the
#: model); what a CUDA run allocates besides them through the caching allocator (cuBLAS workspaces
#: among it) is the likely rest. As a constant it puts every other (learner, round) of that
#: measurement within 10% (FeAT's and iFeAT's rounds from 2 on 9% above, whose second gradient of
#: the features the GPU does not hold beside the first), never below; whether it grows with the
#: sizes, one GPU size cannot tell (``tests/test_memory_model.py`` reads the file and checks).
GPU_EXTRA_BYTES = 120_881_032
#: A Colab T4's memory as ``nvidia-smi`` reports it there: 15,360 MiB ("15 GB").
T4_BYTES = 15_360 * 2**20


#: The stages a peak is named by (what the preflight reports as the largest).
STAGES = ("feature learning", "ERM-NF stack", "frozen-feature stack", "backbone step", "embedding pass",
          "WILDS OOD stage", "two-bit training")


@dataclass(frozen=True)
class StagePeak:
    """The most tensor memory one stage of a run holds at once: ``bytes`` as the CPU counts them
    (float32; what stays resident from earlier stages included), ``sizes`` what sets it (the
    objective, the configurations in a stack, the images, the batch, ...). :attr:`gpu_bytes` adds
    what a GPU holds beyond them (:data:`GPU_EXTRA_BYTES`)."""

    stage: str
    bytes: float
    sizes: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        check_choice("stage", self.stage, STAGES)

    @property
    def gpu_bytes(self) -> float:
        return self.bytes + GPU_EXTRA_BYTES


def largest(peaks) -> StagePeak | None:
    """The stage with the most memory (None for no stages)."""
    peaks = list(peaks)
    return max(peaks, key=lambda p: p.bytes) if peaks else None


def learner_bytes(learner: str, model: str, n: int, hidden: int, image_shape: tuple[int, int, int]) -> float:
    """The modelled peak of a whole full-batch run of ``learner`` beyond its data (:data:`LEARNER_PEAKS`)."""
    from ..feature_learning import FEATURE_LEARNERS

    check_choice("learner", learner, FEATURE_LEARNERS.table_order())
    terms = learner_sizes(model, n, hidden, image_shape)

    def peak(name: str) -> float:
        return max(0.0, sum(k * terms[t] for k, t in zip(LEARNER_PEAKS[(model, name)], LEARNER_TERMS[model])))

    if (model, learner) in LEARNER_PEAKS:
        return peak(learner)
    # a learner registered without fitted coefficients (one of the user's): the dearest fitted one's,
    # until `python -m featlib.training.memory learners` fits it
    return max(peak(name) for (m, name) in LEARNER_PEAKS if m == model)


def _features_bytes(groups: int, hidden: int, n_train: int, n_test: int, n_val: int, test_envs: int = 3) -> int:
    """Frozen features of ``groups`` featurizers on the training, test and validation images."""
    return 4 * groups * hidden * (n_train + test_envs * n_test + n_val)


def cmnist_peaks(protocols, oracle: bool = True) -> list[StagePeak]:
    """Every stage of ColoredMNIST protocols run one after another by experiments that all stay
    alive (as chapter 04 keeps its two): each experiment keeps every seed it drew on the device
    (``ColoredMNISTExperiment.data``), so once the stacks have drawn them, the data of every seed
    of every protocol are resident (an upper bound for the first protocol's stages). Then feature
    learning (the dearest learner; with ``oracle``, the oracle rows' ERM, whose data are drawn last),
    each objective's ERM-NF stack (one seed's C configurations) and frozen-feature stack (every
    (learner, seed) group x C configurations, with the features on the training, test and
    validation images)."""
    from ..feature_learning import FEATURE_LEARNERS

    protocols = list(protocols)
    data = sum(len(p.seeds) * colored_mnist_bytes(p.n_train, p.n_test, p.n_val) for p in protocols)
    out = []
    for p in protocols:
        n, h, shape = p.n_train, p.hidden_dim, _image_shape(p.dataset)
        learners = [i for i in p.learners if i in FEATURE_LEARNERS] + (["erm"] if oracle else [])
        if learners:
            dearest = max(learners, key=lambda i: learner_bytes(i, "mlp", n, h, shape))
            oracle_data = len(p.seeds) * colored_mnist_bytes(p.n_train, p.n_test, p.n_val) if oracle else 0
            out.append(StagePeak("feature learning", data + oracle_data + learner_bytes(dearest, "mlp", n, h, shape),
                                 {"learner": dearest, "n_train": n, "hidden_dim": h, "model": "mlp"}))
        groups = len([i for i in p.learners if i != "erm-nf"]) * len(p.seeds)
        for objective in p.objectives:
            runs = len(p.configurations(objective))
            if "erm-nf" in p.learners:
                terms = sizes("mlp", n, h, runs)
                out.append(StagePeak("ERM-NF stack", data + terms["P"] + step_peak_bytes("mlp", objective, n, h, runs),
                                     {"objective": objective, "configurations": runs, "n_train": n, "hidden_dim": h}))
            if groups:
                terms = sizes("heads", n, h, runs, groups)
                out.append(StagePeak("frozen-feature stack", data + terms["P"]
                                     + _features_bytes(groups, h, n, p.n_test, p.n_val)
                                     + step_peak_bytes("heads", objective, n, h, runs, groups),
                                     {"objective": objective, "configurations": runs, "groups": groups,
                                      "seeds": len(p.seeds), "n_train": n, "hidden_dim": h}))
    return out


def saliency_peaks(protocol) -> list[StagePeak]:
    """Chapter 06's ColoredMNIST models: the drawn data (one seed, at the dataset's image shape)
    and the dearest of its learners (ERM's snapshots, Bonsai, FeAT) in the protocol's network."""
    shape = _image_shape(protocol.dataset)
    data = colored_mnist_bytes(protocol.n_train, protocol.n_test, 0, shape[0] * shape[1] * shape[2])
    learners = ["erm", "feat"] + (["bonsai"] if protocol.bonsai else [])
    model = protocol.architecture
    dearest = max(learners, key=lambda i: learner_bytes(i, model, protocol.n_train, protocol.hidden_dim, shape))
    return [StagePeak("feature learning", data + learner_bytes(dearest, model, protocol.n_train, protocol.hidden_dim, shape),
                      {"learner": dearest, "n_train": protocol.n_train, "hidden_dim": protocol.hidden_dim, "model": model})]


def backbone_step_bytes(backbone: str, batch: int, size: int, n_classes: int = 2, optimizer: str = "adam") -> float:
    """A backbone's training step: the network, its gradients and the optimiser's state, and the
    step's activations for ``batch`` examples of side (or tokens) ``size`` (:data:`BACKBONE_PEAKS`)."""
    entry = _backbone_entry(backbone)
    check_choice("optimizer", optimizer, OPTIMIZER_STATES)
    terms = backbone_terms(backbone, batch, size)
    activations = sum(k * terms[t] for k, t in zip(entry["train"], BACKBONE_TERMS[backbone_modality(backbone)]))
    return (_backbone_resident(entry["parameters"], entry["features"], n_classes, optimizer)
            + max(entry["floor"][0], activations))


def embedding_bytes(backbone: str, batch: int, size: int) -> float:
    """A backbone's forward pass without gradients over ``batch`` examples (an embedding batch),
    with the network's weights (and a 2-class head's)."""
    entry = _backbone_entry(backbone)
    terms = backbone_terms(backbone, batch, size)
    activations = sum(k * terms[t] for k, t in zip(entry["embed"], BACKBONE_TERMS[backbone_modality(backbone)]))
    return 4 * (entry["parameters"] + 2 * (entry["features"] + 1)) + max(entry["floor"][1], activations)


def _backbone_entry(backbone: str) -> dict:
    from ..models.wilds_backbones import BACKBONES

    BACKBONES.get(backbone)
    if backbone not in BACKBONE_PEAKS:
        BACKBONE_PEAKS[backbone] = fit_backbone_coefficients(backbone)  # a new backbone: counted once per process
    return BACKBONE_PEAKS[backbone]


def wilds_size(protocol) -> int:
    """The image side or the number of tokens a WILDS protocol feeds its backbone."""
    spec = protocol.spec
    if spec.modality == "text":
        return protocol.max_token_length or spec.max_token_length or 512
    return protocol.resolution or (spec.resolution[0] if spec.resolution else NATIVE_SIDE.get(spec.name, 224))


def wilds_peaks(protocol, split_sizes: dict[str, int], eval_batch_size: int = 256) -> list[StagePeak]:
    """Chapter 05's stages of a WILDS protocol: the backbone's training step (at the protocol's
    batch), the embedding pass (``eval_batch_size`` examples a batch, no gradients), and the OOD
    stage, which holds every split's embeddings on the device (the heads train on the training
    split's and are scored on the others'), beside the featurizer when it was just trained.
    ``split_sizes``: examples per split."""
    spec, cfg = protocol.spec, protocol.train_config()
    backbone = protocol.backbone or spec.backbone
    size = wilds_size(protocol)
    n_classes = WILDS_CLASSES.get(spec.name, 2)
    entry = _backbone_entry(backbone)
    common = {"backbone": backbone, "dataset": spec.name, ("tokens" if spec.modality == "text" else "side"): size}
    out = [StagePeak("backbone step", backbone_step_bytes(backbone, cfg.batch_size, size, n_classes, spec.optimizer),
                     {**common, "batch_size": cfg.batch_size}),
           StagePeak("embedding pass", embedding_bytes(backbone, eval_batch_size, size),
                     {**common, "batch_size": eval_batch_size})]
    examples = sum(split_sizes.values())
    out.append(StagePeak("WILDS OOD stage", 4 * entry["features"] * examples + 4 * entry["parameters"],
                         {**common, "examples": sum(split_sizes.values())}))
    return out


def cost_peaks(cases, learners) -> list[StagePeak]:
    """The cost benchmark (chapter 07): each case in turn, every case's data staying on the device
    once prepared (the ColoredMNIST case keeps its drawn data; the WILDS case reads its batches from
    disk). The ColoredMNIST case: its data and the dearest of ``learners``; the WILDS case: a backbone
    step at the case's batch."""
    from ..experiments.wilds_experiment import WildsProtocol

    out, resident = [], 0.0
    for case in cases:
        if case.name == "cmnist":
            shape = _image_shape(case.dataset)
            resident += colored_mnist_bytes(case.n_train, case.n_test, 0, shape[0] * shape[1] * shape[2])
            dearest = max(learners, key=lambda i: learner_bytes(i, "mlp", case.n_train, case.hidden_dim, shape))
            out.append(StagePeak("feature learning", resident + learner_bytes(dearest, "mlp", case.n_train, case.hidden_dim, shape),
                                 {"learner": dearest, "n_train": case.n_train, "hidden_dim": case.hidden_dim, "model": "mlp"}))
        else:
            protocol = getattr(case, "protocol", None) or WildsProtocol(
                dataset=case.dataset, learners=("erm",), backbone=case.backbone, batch_size=case.batch_size,
                resolution=case.resolution, max_token_length=case.max_token_length)
            size = wilds_size(protocol)
            step = backbone_step_bytes(case.backbone, case.batch_size, size, WILDS_CLASSES.get(case.dataset, 2),
                                       protocol.spec.optimizer)
            out.append(StagePeak("backbone step", resident + step,
                                 {"backbone": case.backbone, "dataset": case.dataset, "batch_size": case.batch_size,
                                  ("tokens" if backbone_modality(case.backbone) == "text" else "side"): size}))
    return out


def two_bit_bytes(n: int, d: int, m: int = 20) -> float:
    """A two-bit run's peak: its two samples of ``n`` examples and the training (:data:`TWO_BIT_PEAKS`)."""
    terms = two_bit_terms(n, d, m)
    return max(0.0, sum(k * terms[t] for k, t in zip(TWO_BIT_PEAKS, TWO_BIT_TERMS)))


def two_bit_peaks(n: int, d: int, m: int = 20) -> list[StagePeak]:
    return [StagePeak("two-bit training", two_bit_bytes(n, d, m), {"n": n, "d": d, "m": m})]


#: What ``python -m featlib.training.memory`` can count and fit again, each printed as its table's entries.
PARTS = ("stacks", "learners", "backbones", "two-bit")


def _print_stacks() -> None:
    from ..objectives import OBJECTIVES

    for kind, objective in itertools.product(KINDS, OBJECTIVES.names()):
        coefficients = fit_coefficients(kind, objective)
        n, h, c, g = CHECK_SIZE[kind]
        counted = measure_stage_peak(kind, objective, n, h, c, g)
        PEAK_COEFFICIENTS[(kind, objective)] = coefficients
        modelled = step_peak_bytes(kind, objective, n, h, c, g)
        print(f'    ("{kind}", "{objective}"): {coefficients},  # check {modelled / counted:.3f}, '
              f"{activations_per_step(kind, objective, 50000, 256, 30, 1 if kind == 'mlp' else 12):.2f} "
              f"activations at the protocol's size", flush=True)


def _print_learners() -> None:
    from ..feature_learning import FEATURE_LEARNERS

    for model, learner in itertools.product(LEARNER_MODELS, FEATURE_LEARNERS.table_order()):
        LEARNER_PEAKS[(model, learner)] = fit_learner_coefficients(learner, model)
        dataset, n, hidden = LEARNER_CHECK_SIZE[model]
        counted = measure_learner_peak(learner, model, dataset, n, hidden)
        modelled = learner_bytes(learner, model, n, hidden, _image_shape(dataset))
        print(f'    ("{model}", "{learner}"): {LEARNER_PEAKS[(model, learner)]},  # check {modelled / counted:.3f}',
              flush=True)


def _print_backbones() -> None:
    from ..models.wilds_backbones import BACKBONES

    for backbone in BACKBONES.names():
        BACKBONE_PEAKS[backbone] = fit_backbone_coefficients(backbone)
        batch, size = BACKBONE_CHECK_SIZE[backbone_modality(backbone)]
        train = backbone_step_bytes(backbone, batch, size) / measure_backbone_peak(backbone, batch, size)
        embed = ((embedding_bytes(backbone, batch, size) - 4 * (BACKBONE_PEAKS[backbone]["parameters"] + 2 * (
            BACKBONE_PEAKS[backbone]["features"] + 1))) / measure_backbone_peak(backbone, batch, size, train=False))
        print(f'    "{backbone}": {BACKBONE_PEAKS[backbone]},  # check train {train:.3f}, embed {embed:.3f}', flush=True)


def _print_two_bit() -> None:
    global TWO_BIT_PEAKS

    TWO_BIT_PEAKS = fit_two_bit_coefficients()
    n, d, m = TWO_BIT_CHECK_SIZE
    print(f"TWO_BIT_PEAKS = {TWO_BIT_PEAKS}  # check {two_bit_bytes(n, d, m) / measure_two_bit_peak(n, d, m):.3f}")


def main(argv=None) -> int:
    """Count peaks on the CPU again, fit and print the entries of the model's tables (each with
    the model over a peak counted at a size not fitted): ``stacks`` (:data:`PEAK_COEFFICIENTS`),
    ``learners`` (:data:`LEARNER_PEAKS`), ``backbones`` (:data:`BACKBONE_PEAKS`), ``two-bit``
    (:data:`TWO_BIT_PEAKS`); all of them by default. Minutes each on 2 cores."""
    from ..cli.common import OneLineParser

    parser = OneLineParser(prog="python -m featlib.training.memory", description=main.__doc__)
    parser.add_argument("parts", nargs="*", metavar="part", help=f"what to count again: {', '.join(PARTS)} (default: all)")
    args = parser.parse_args(argv)
    for part in args.parts:
        if part not in PARTS:
            parser.error(f"argument part: invalid choice: {part!r} (choose from {', '.join(map(repr, PARTS))})")
    printers = {"stacks": _print_stacks, "learners": _print_learners, "backbones": _print_backbones,
                "two-bit": _print_two_bit}
    for part in args.parts or PARTS:
        printers[part]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
