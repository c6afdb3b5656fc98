"""The OOD stage of the ColoredMNIST protocol, for a whole stack of runs at once.

After feature learning, a classifier is trained with an OOD objective (Sec. 6): full batch,
Adam (lr 1e-3), an L2 term ``l2 * sum ||theta||^2`` on the trained weights, and the loss of
each run divided by its penalty weight when that weight is > 1 (the IRMv1 reference
convention; the L2 term is divided too, as there). A run first trains ``warmup`` steps with
ERM ("ERM pre-training epochs": one full-batch step is one epoch) and then switches the
penalty on; for the ERM-NF column the whole network is trained, otherwise the featurizer is
frozen and only the head moves.

Every run of a stack has its own penalty weight and warm-up length (tensors of the stack's
batch shape, held with the stack by :class:`StackRuns`) and shares the objective
(:class:`OODStageConfig`); :func:`train_stack` trains the runs on :class:`Environments` and returns
the per-run accuracies
through training, evaluated every ``eval_every`` steps and after the last step (``record="every"``)
or after the last step only (``record="final"``: what the tables use; evaluation never changes
training).

**Two paths** (``OODStageConfig.path``, registered in :data:`OOD_PATHS`): ``"plain"``
(:func:`train_stack_plain`, below) is the reference, the loop as the IRMv1 reference code writes
it with autograd penalties; ``"fast"`` and ``"compiled"`` (:mod:`.fast_stage`) compute the same
runs with closed-form penalties, a shared ERM pre-training prefix and (``"compiled"``) the whole
loss compiled. ``tests/test_fast_ood_stage.py`` checks that they agree for every objective.
**Precision** (``OODStageConfig.precision``, :mod:`.precision`) is a named choice of both paths.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from ..hparams import APPENDIX_F1
from ..objectives import OBJECTIVES, make_objective
from ..objectives.base import promote
from ..registry import Registry
from ..validation import check_choice, check_int, check_positive
from .precision import DEFAULT_PRECISION, PRECISIONS

#: How a stack is trained: name -> function with :func:`train_stack_plain`'s signature
#: ``(runs, envs, config, progress)``. "plain"
#: is registered here, "fast" and "compiled" by :mod:`.fast_stage` (imported by the package).
OOD_PATHS: Registry[Callable] = Registry("path")
#: When the accuracies are evaluated: every ``eval_every`` steps and at the end, or at the end only.
RECORDS = ("every", "final")
#: Which trained tensors the L2 term covers: all of them (Appendix F.1's weight decay), all but
#: the linear head (the reference code's Fishr: its L2 sums over the featurizer only, so a frozen
#: run has none), or none (the reference code's CLOvE, which computes the norm and never adds it).
L2_SCOPES = ("all", "featurizer", "none")

#: stack(inputs) -> (logits (*B, n), features broadcastable to (*B, n, H))
StackFn = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class OODStageConfig:
    """Hyperparameters of the OOD stage shared by all runs of a stack (Appendix F.1)."""

    objective: str
    steps: int = APPENDIX_F1["ood_steps"].value
    lr: float = APPENDIX_F1["lr"].value
    l2: float = APPENDIX_F1["l2"].value
    eval_every: int = 100
    env_reduction: str = "mean"
    warmup_penalty_weight: float = 0.0
    objective_kwargs: dict = field(default_factory=dict)
    l2_scope: str = "all"  # a name of L2_SCOPES
    path: str = "plain"  # a name of OOD_PATHS
    precision: str = DEFAULT_PRECISION  # a name of featlib.training.precision.PRECISIONS
    record: str = "every"  # a name of RECORDS
    #: None: every step sees every training example (the protocol). An integer b: each step's risks
    #: and penalty use b examples of each training environment drawn at random without replacement
    #: (a generator seeded by ``minibatch_seed``), as the authors' CLOvE loop does (it keeps only the
    #: last of its shuffled 512-example minibatches: protocol.md, "the CLOvE loop updates on the last
    #: mini-batch only"; LFhase/FeAT ColoredMNIST ``clove_train``); the plain
    #: path only. Evaluation always sees every example.
    minibatch: int | None = None
    minibatch_seed: int = 0

    def __post_init__(self) -> None:
        OBJECTIVES.get(self.objective)
        OOD_PATHS.get(self.path)
        PRECISIONS.get(self.precision)
        check_choice("record", self.record, RECORDS)
        check_choice("l2_scope", self.l2_scope, L2_SCOPES)
        check_int("steps", self.steps, minimum=0)
        check_positive("lr", self.lr)
        check_positive("l2", self.l2, allow_zero=True)
        check_int("eval_every", self.eval_every, minimum=1)
        check_choice("env_reduction", self.env_reduction, ("sum", "mean"))
        check_positive("warmup_penalty_weight", self.warmup_penalty_weight, allow_zero=True)
        if self.minibatch is not None:
            check_int("minibatch", self.minibatch, minimum=1)
            if self.path != "plain":
                raise ValueError(f"minibatch={self.minibatch} runs on the plain path only; got path={self.path!r} "
                                 "(pass path='plain', or ood_path='plain' to a protocol)")
        check_int("minibatch_seed", self.minibatch_seed, minimum=0)


@dataclass
class LabelledInputs:
    """Inputs of one split for the stack (images, or frozen features) with their labels."""

    inputs: torch.Tensor
    y: torch.Tensor  # (n,) in {0, 1}, or (G, 1, n) when each group of runs has its own labels
    env_slices: Sequence[slice] = ()  # training environments (contiguous blocks)


@dataclass(frozen=True)
class Environments:
    """The environments of one OOD stage: ``train`` (the training environments, one block of rows
    each, :attr:`LabelledInputs.env_slices`), ``tests`` (scored at every evaluation step) and
    ``vals`` (validation environments: scored with the tests, never trained on; the history's
    ``val_acc``, for training-domain selection)."""

    train: LabelledInputs
    tests: Sequence[LabelledInputs] = ()
    vals: Sequence[LabelledInputs] = ()

    def scored(self) -> list[LabelledInputs]:
        """Every environment evaluated at an evaluation step: the tests, then the validations."""
        return [*self.tests, *self.vals]


@dataclass(frozen=True)
class StackRuns:
    """The B runs that one :func:`train_stack` call trains together (Sec. 6's grid: one run per
    penalty weight and ERM pre-training length, and per group of features): the ``stack``, the
    tensors it trains (``trainable``), its run dimensions ``batch_shape``, and per run (tensors of
    that shape) the penalty weight lambda and the warm-up length, the "pre-training epochs" trained
    with ERM before the penalty is switched on (one full-batch step is one epoch).

    :meth:`heads` (frozen features, only the heads move) and :meth:`networks` (whole networks,
    ERM-NF) build the two kinds the protocol trains."""

    stack: StackFn
    trainable: Sequence[torch.nn.Parameter]
    batch_shape: tuple[int, ...]
    penalty_weights: torch.Tensor
    warmup_steps: torch.Tensor

    @classmethod
    def heads(cls, stack, penalty_weights, warmup_steps=None) -> "StackRuns":
        """The heads of a :class:`~featlib.models.stacked.StackedHeads` on frozen features;
        ``warmup_steps`` None: no warm-up."""
        return cls._of(stack, stack.head_parameters(), penalty_weights, warmup_steps)

    @classmethod
    def networks(cls, stack, penalty_weights, warmup_steps=None) -> "StackRuns":
        """Every parameter of the stack (whole networks: ERM-NF); ``warmup_steps`` None: no warm-up."""
        return cls._of(stack, list(stack.parameters()), penalty_weights, warmup_steps)

    @classmethod
    def _of(cls, stack, trainable, penalty_weights, warmup_steps) -> "StackRuns":
        penalty_weights = torch.as_tensor(penalty_weights)
        if warmup_steps is None:
            warmup_steps = torch.zeros(penalty_weights.shape, dtype=torch.long)
        return cls(stack, trainable, tuple(stack.batch_shape), penalty_weights, torch.as_tensor(warmup_steps))


@dataclass
class StackHistory:
    """Per-run metrics at the evaluation steps: arrays of shape (T, *B) (test: (T, E_test, *B);
    validation, when the stack was given validation environments: (T, E_val, *B))."""

    steps: list[int]
    train_acc: np.ndarray
    test_acc: np.ndarray
    penalty: np.ndarray
    val_acc: np.ndarray | None = None
    #: (T, *B) whether each run's training logits were finite at each evaluation step (None: not recorded)
    finite: np.ndarray | None = None

    @property
    def diverged_step(self) -> np.ndarray:
        """(*B,) the first evaluation step at which a run's training logits were not finite (its
        loss overflowed or its weights became NaN: the run diverged), -1 for a run that never did."""
        if self.finite is None:
            return np.full(self.train_acc.shape[1:], -1)
        bad = ~self.finite.astype(bool)
        first = np.where(bad.any(0), bad.argmax(0), -1)
        return np.where(first >= 0, np.asarray(self.steps)[np.maximum(first, 0)], -1)

    @property
    def worst_test_acc(self) -> np.ndarray:
        return self.test_acc.min(axis=1)

    @property
    def mean_val_acc(self) -> np.ndarray | None:
        """(T, *B) accuracy on the validation environments, averaged over them (DomainBed's
        training-domain validation score); None without validation environments."""
        return None if self.val_acc is None or not self.val_acc.shape[1] else self.val_acc.mean(axis=1)

    def final(self) -> dict[str, np.ndarray]:
        """Metrics after the last step, (*B,) each: what the paper's tables report, ``val_acc``
        (:attr:`mean_val_acc`) when there are validation environments, and ``diverged_step``
        (:attr:`diverged_step`). A run that diverged is scored as missing: its accuracies are NaN,
        never the one-class accuracy its non-finite logits would give."""
        val = self.mean_val_acc
        diverged = self.diverged_step >= 0

        def scored(values: np.ndarray) -> np.ndarray:
            return np.where(diverged, np.nan, values)

        return {
            "train_acc": scored(self.train_acc[-1]),
            "worst_test_acc": scored(self.worst_test_acc[-1]),
            **{f"test_acc_{e}": scored(self.test_acc[-1, e]) for e in range(self.test_acc.shape[1])},
            **({} if val is None else {"val_acc": scored(val[-1])}),
            "diverged_step": self.diverged_step,
        }


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(*B, n) logits -> (*B,) share of examples with ``(logit > 0) == y``."""
    return ((logits > 0).to(y.dtype) == y).float().mean(-1)


def per_run_squared_norm(params: Sequence[torch.Tensor], batch_shape: tuple[int, ...]) -> torch.Tensor:
    """(*B,) ``sum ||theta_r||^2`` over the tensors of each run."""
    return sum(p.pow(2).reshape(*batch_shape, -1).sum(-1) for p in params)


def l2_covered(stack, tensors: Sequence[torch.Tensor], scope: str) -> list[bool]:
    """For each of ``tensors``: whether the L2 term of ``scope`` (:data:`L2_SCOPES`) covers it.
    The head is what ``stack.head_parameters()`` returns (every tensor, for a stack without one)."""
    check_choice("l2_scope", scope, L2_SCOPES)
    if scope != "featurizer":
        return [scope == "all"] * len(tensors)
    heads = {id(p) for p in getattr(stack, "head_parameters", lambda: [])()}
    return [id(t) not in heads for t in tensors]


@torch.no_grad()
def evaluate_stack(stack: StackFn, train: LabelledInputs, tests: Sequence[LabelledInputs]):
    """Training accuracy (mean over training environments, as the reference), the accuracy on each
    test environment, (*B,) and (E_test, *B), and whether each run's training logits are all
    finite, (*B,) bool (a run whose weights became NaN or inf predicts one class everywhere, which
    an accuracy alone would score)."""
    logits, _ = stack(train.inputs)
    slices = train.env_slices or [slice(None)]
    train_acc = torch.stack([accuracy(logits[..., s], train.y[..., s]) for s in slices]).mean(0)
    test_acc = [accuracy(stack(t.inputs)[0], t.y) for t in tests]
    finite = torch.isfinite(logits).all(-1)
    return train_acc, torch.stack(test_acc) if test_acc else train_acc.new_zeros((0, *train_acc.shape)), finite


def record_steps(config: OODStageConfig) -> list[int]:
    """The steps at which the accuracies are evaluated (before that step's update; ``steps``:
    after the last one)."""
    every = range(0, config.steps, config.eval_every) if config.record == "every" else ()
    return [*every, config.steps]


def check_schedule(penalty_weights, warmup_steps, batch_shape, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-run penalty weights (float32) and warm-up lengths as tensors of the stack's batch
    shape on ``device``, checked."""
    penalty_weights = torch.as_tensor(penalty_weights, dtype=torch.float32, device=device)
    warmup_steps = torch.as_tensor(warmup_steps, device=device)
    for name, value in (("penalty_weights", penalty_weights), ("warmup_steps", warmup_steps)):
        if tuple(value.shape) != tuple(batch_shape):
            raise ValueError(f"{name} must have the stack's batch shape {tuple(batch_shape)}; got {tuple(value.shape)}")
    if (warmup_steps < 0).any():
        raise ValueError(f"warmup_steps must be integers >= 0; got {warmup_steps.tolist()}")
    return penalty_weights, warmup_steps


def train_stack(runs: StackRuns, envs: Environments, config: OODStageConfig,
                progress: bool | str = False) -> StackHistory:
    """Train every run of ``runs`` for ``config.steps`` full-batch Adam steps on ``envs.train``, on
    the path ``config.path`` (:data:`OOD_PATHS`).

    Run r uses ``warmup_penalty_weight`` for its first ``runs.warmup_steps[r]`` steps and
    ``runs.penalty_weights[r]`` after. The trained weights end up in ``runs.trainable`` (the
    stack's parameters). The validation environments are evaluated with the test environments,
    never trained on, and come back as the history's ``val_acc``."""
    tests = list(envs.tests)
    history = OOD_PATHS.get(config.path)(runs, Environments(envs.train, envs.scored()), config, progress)
    if envs.vals:
        history.val_acc = history.test_acc[:, len(tests):]
        history.test_acc = history.test_acc[:, :len(tests)]
    return history


@OOD_PATHS.register("plain")
def train_stack_plain(runs: StackRuns, envs: Environments, config: OODStageConfig,
                      progress: bool | str = False) -> StackHistory:
    """The reference path: the autograd penalties of :mod:`featlib.objectives`, one step after
    the other as the IRMv1 reference code trains one model, for every run of the stack at once
    (``envs.vals`` are not read: :func:`train_stack` passes them among the tests)."""
    stack, trainable, batch_shape = runs.stack, runs.trainable, runs.batch_shape
    train, tests = envs.train, list(envs.tests)
    device = train.y.device
    penalty_weights, warmup_steps = check_schedule(runs.penalty_weights, runs.warmup_steps, batch_shape, device)
    precision = PRECISIONS.get(config.precision)
    precision.check(device)
    objective = make_objective(config.objective, env_reduction=config.env_reduction, **config.objective_kwargs)
    optimizer = torch.optim.Adam(trainable, lr=config.lr)
    warm = torch.full_like(penalty_weights, config.warmup_penalty_weight)
    rescales = objective.has_penalty and objective.rescale
    records: dict[str, list] = {"steps": [], "train_acc": [], "test_acc": [], "penalty": [], "finite": []}
    last_penalty = torch.zeros(batch_shape, device=device)

    def forward(inputs):
        with precision.autocast(device):
            logits, features = stack(inputs)
        return promote(logits), features

    def record(step: int) -> None:
        train_acc, test_acc, finite = evaluate_stack(forward, train, tests)
        records["steps"].append(step)
        records["train_acc"].append(train_acc.cpu().numpy())
        records["test_acc"].append(test_acc.cpu().numpy())
        records["penalty"].append(last_penalty.cpu().numpy())
        records["finite"].append((finite & torch.isfinite(last_penalty)).cpu().numpy())

    records_at = set(record_steps(config))
    regularised = [p for p, keep in zip(trainable, l2_covered(stack, list(trainable), config.l2_scope)) if keep]
    draw = torch.Generator().manual_seed(config.minibatch_seed)

    def rows() -> list:
        """Each training environment's rows this step: all of them, or ``config.minibatch`` at random."""
        if config.minibatch is None:
            return list(train.env_slices)
        return [(s.start or 0) + torch.randperm(len(range(*s.indices(train.y.shape[-1]))), generator=draw)[
            :config.minibatch].to(device) for s in train.env_slices]

    bar = tqdm(range(config.steps), desc=progress if isinstance(progress, str) else config.objective,
               disable=not progress, leave=False)
    with precision.matmul_mode(device):
        for step in bar:
            if step in records_at:
                record(step)
            logits, features = forward(train.inputs)
            weight = torch.where(step >= warmup_steps, penalty_weights, warm)
            env_rows = rows()
            out = objective(
                [logits[..., r] for r in env_rows], [train.y[..., r] for r in env_rows], weight,
                features=[features[..., r, :] for r in env_rows], params=list(trainable),
            )
            l2 = config.l2 * per_run_squared_norm(regularised, batch_shape)
            loss = out.loss + (l2 / torch.clamp(weight, min=1.0) if rescales else l2)
            optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()
            optimizer.step()
            last_penalty = out.penalty
        record(config.steps)
    return StackHistory(
        steps=records["steps"],
        train_acc=np.stack(records["train_acc"]),
        test_acc=np.stack(records["test_acc"]),
        penalty=np.stack(records["penalty"]),
        finite=np.stack(records["finite"]),
    )
