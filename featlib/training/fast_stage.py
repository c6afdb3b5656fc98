"""The fast path of the stacked OOD stage: the runs of the plain path
(:func:`~.ood_stage.train_stack_plain`), the same losses, penalties, gradients and accuracies
(``tests/test_fast_ood_stage.py``), with less work per step. Each difference is an option of
:class:`FastOptions`, so the benchmark (``benchmarks/stacked_training.py``) can time them one by one:

* ``closed_form``: penalties as first-order expressions of the logits
  (:mod:`featlib.objectives.closed_form`): IRMv1, IRMX and IB-IRM always (logistic risk); IGA when
  the featurizer is frozen (the trained parameters are the linear head). V-REx, CLOvE, Fishr and
  IB-IRM's variance term are first-order already. IGA with a trained featurizer (ERM-NF) takes
  first-order per-environment gradients on each environment's rows and a Hessian-vector product
  (:func:`featlib.objectives.iga.hvp_alignment`, from the ``env_risk`` that :func:`stack_loss`
  passes), outside the training graph. Without a double backward through the training graph the
  whole loss can be compiled.
* Always: no read-back to the host inside the loop (the penalty weights are checked once, the
  per-step weight is computed on the device) and Adam's fused kernel where torch has one.
* ``share_prefix``: the ERM pre-training prefix trained once for all runs that share it
  (:mod:`.prefix`), where that is exact: every run starts from the same weights, the objective
  keeps no state and every group of runs has the same pre-training lengths.
* ``bias_relu``: the hidden layers' ``relu(x + b)`` from :data:`~.fused.BIAS_RELU`.
* ``compile``: the loss (forward, objective, L2) compiled by ``torch.compile`` with its backward
  (:data:`COMPILE_MODES`: ``"default"``; ``"cudagraphs"`` replays CUDA graphs on a GPU and is
  ``"default"`` elsewhere). One compiled function per (model, objective, settings) serves every
  stack of a process (dynamic shapes: the stack grows as runs leave the shared prefix); each is
  a function with a code object of its own, so no loss takes another's recompile budget, and
  one that cannot compile says so and is recorded (:class:`CompiledLoss`, :func:`compile_record`).

Evaluation follows ``config.record``; the experiment asks for ``"final"`` (the tables use the
accuracies after the last step only). Precision is ``config.precision`` (:mod:`.precision`).
"""
from __future__ import annotations

import contextlib
import functools
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..objectives import make_objective
from ..objectives.base import Objective, check_penalty_weight, promote
from ..store.provenance import add_process_recorder
from ..registry import Registry
from ..validation import check_bool, check_positive
from .fused import BIAS_RELU, make_bias_relu
from .ood_stage import (
    OOD_PATHS, Environments, OODStageConfig, StackFn, StackHistory, StackRuns, check_schedule,
    evaluate_stack, l2_covered, per_run_squared_norm, record_steps,
)
from .precision import PRECISIONS
from .prefix import TRUNK, Transition, prefix_schedule

#: name -> the ``torch.compile`` mode on a device (None: not compiled).
COMPILE_MODES: Registry[Callable[[torch.device], str | None]] = Registry("compile")
COMPILE_MODES.register("none")(lambda device: None)
COMPILE_MODES.register("default")(lambda device: "default")
COMPILE_MODES.register("cudagraphs")(lambda device: "reduce-overhead" if device.type == "cuda" else "default")


@dataclass(frozen=True)
class FastOptions:
    """What the fast path does differently from the plain one (see the module docstring)."""

    closed_form: bool = True
    share_prefix: bool = True
    bias_relu: str = "eager"  # a name of featlib.training.fused.BIAS_RELU
    compile: str = "none"  # a name of COMPILE_MODES
    fused_adam: bool = True
    #: Whole-network stacks on a CPU: the runs of a step in tiles whose hidden activation is at
    #: most this many MiB (0: one pass over every run). See :func:`run_tiles`. 4 MiB: measured on
    #: an idle 2-core EPYC (``benchmarks/stacked_training.py --variants closed-form --objectives
    #: irmv1 --cpu-tiles 0 4 8 16 32 --grid-steps 0``; 30 runs, 5,000 images, width 256, one run
    #: per tile), the stack's step is 0.58 s against 0.69 s for the authors' one-run loop (1.19x)
    #: and 0.86 s untiled (0.80x): the untiled activations overflow the cache.
    cpu_tile_mib: float = 4.0

    def __post_init__(self) -> None:
        check_bool("closed_form", self.closed_form)
        check_bool("share_prefix", self.share_prefix)
        check_bool("fused_adam", self.fused_adam)
        check_positive("cpu_tile_mib", self.cpu_tile_mib, allow_zero=True)
        BIAS_RELU.get(self.bias_relu)
        COMPILE_MODES.get(self.compile)


# ------------------------------------------------------------------------------- the loss
@dataclass(frozen=True)
class LossSettings:
    """The constants of one stack's loss (hashable: part of the compiled function's key)."""

    env_bounds: tuple[tuple[int | None, int | None], ...]  # training environments as slices
    trainable: tuple[str, ...]
    regularised: tuple[str, ...]  # the trainable tensors the L2 term covers (config.l2_scope)
    l2: float
    rescales: bool
    closed_form: bool
    head_only: bool
    device_type: str
    precision: str
    bias_relu: str
    functional: bool = True  # forward(params, inputs) depends on params (a featlib stacked model)


def stack_loss(forward, objective: Objective, settings: LossSettings, params: dict[str, torch.Tensor],
               inputs: torch.Tensor, env_targets: list[torch.Tensor], weight: torch.Tensor):
    """The summed loss of every run (objective plus L2, rescaled as the plain path does) and the
    per-run penalties, for the runs whose weights are ``params``: one backward pass of the sum
    gives every run its own gradient."""
    with PRECISIONS.get(settings.precision).autocast(torch.device(settings.device_type)):
        logits, features = forward(params, inputs, make_bias_relu(settings.bias_relu))
    logits = promote(logits)
    slices = [slice(a, b) for a, b in settings.env_bounds]
    trainable = [params[name] for name in settings.trainable]

    def env_risk(e: int, tensors) -> torch.Tensor:
        """Environment e's risk on its own rows, as a function of the trained tensors."""
        replaced = {**params, **dict(zip(settings.trainable, tensors))}
        with PRECISIONS.get(settings.precision).autocast(torch.device(settings.device_type)):
            env_logits, _ = forward(replaced, inputs[..., slices[e], :], make_bias_relu(settings.bias_relu))
        return objective.risk_fn(promote(env_logits), env_targets[e])

    out = objective(
        [logits[..., s] for s in slices], env_targets, weight,
        features=[features[..., s, :] for s in slices], params=trainable,
        closed_form=settings.closed_form, head_only=settings.head_only,
        env_risk=env_risk if settings.functional else None, check=False,
    )
    l2 = settings.l2 * per_run_squared_norm([params[name] for name in settings.regularised], tuple(weight.shape))
    loss = out.loss + (l2 / torch.clamp(weight, min=1.0) if settings.rescales else l2)
    return loss.sum(), out.penalty


def _own_code(fn: Callable, name: str) -> Callable:
    """``fn`` with a code object of its own: dynamo keeps its compiled versions (and its limit
    of recompilations) per code object, so each compiled loss gets its own cache."""
    names = {"co_name": name, **({"co_qualname": name} if hasattr(fn.__code__, "co_qualname") else {})}
    return types.FunctionType(fn.__code__.replace(**names), fn.__globals__, name, fn.__defaults__, fn.__closure__)


def loss_function(forward, objective: Objective, settings: LossSettings, name: str) -> Callable:
    """:func:`stack_loss` of this (model, objective, settings) as a real function named ``name``
    with a code object of its own (not a ``functools.partial``: torch wraps a partial in one
    shared frame, so every partial compiled in a process counts against one recompile limit and
    the ninth falls back to eager)."""
    def loss(params, inputs, env_targets, weight):
        return stack_loss(forward, objective, settings, params, inputs, env_targets, weight)

    return _own_code(loss, name)


#: name -> why: the compiled losses of this process that could not compile and ran eager
#: (:func:`compile_record` puts them into every provenance record).
EAGER_FALLBACKS: dict[str, str] = {}
_BACKEND: list = [None]  # None: torch's inductor with the COMPILE_MODES mode


class CompiledLoss:
    """A loss compiled by ``torch.compile`` (``fullgraph=True``, dynamic shapes) that never falls
    back to eager silently.

    **Recompile limit.** Dynamo allows ``recompile_limit`` (8) compiled versions per code object
    and then runs that code eager with one warning. Rather than raising the limit (the number of
    losses a process compiles is not bounded: a benchmark or a notebook makes many), every loss
    is keyed per (model, objective, settings, mode) and has its own code object
    (:func:`loss_function`): the versions of one key are bounded by dynamo's specialisation of
    sizes 0 and 1 of its few dynamic sizes (stack and group counts), far below the limit.
    Sizes are not duck-typed (``use_duck_shape=False``): a stack whose slot count happens to
    equal its group count would otherwise compile a second graph when they part.

    **No silent fallback.** A graph break (``fullgraph=True``), a hit recompile limit
    (``fail_on_recompile_limit_hit``) or a backend failure raises inside the call; the loss then
    says so once, by name, with the reason (a ``RuntimeWarning``), records it in
    :data:`EAGER_FALLBACKS` for the provenance, and computes that step and every later one eager
    (the same function, so the results are the same up to rounding)."""

    def __init__(self, eager: Callable, name: str, description: str, mode: str):
        self.eager, self.name, self.description = eager, name, description
        backend = _BACKEND[0]
        if backend is None:
            self.compiled = torch.compile(eager, mode=mode, dynamic=True, fullgraph=True)
        else:
            self.compiled = torch.compile(eager, backend=backend, dynamic=True, fullgraph=True)
        self.failure: str | None = None

    def __call__(self, *args):
        if self.failure is None:
            try:
                with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True), \
                        torch.fx.experimental._config.patch(use_duck_shape=False):
                    return self.compiled(*args)
            except (torch._dynamo.exc.TorchDynamoException, torch._dynamo.exc.FailOnRecompileLimitHit) as err:
                reason = (str(err).strip().splitlines() or [""])[0][:300]
                self.failure = f"{type(err).__name__}: {reason}"
                EAGER_FALLBACKS[f"{self.name} ({self.description})"] = self.failure
                warnings.warn(f"the compiled loss {self.name} ({self.description}) cannot compile "
                              f"({self.failure}); its stacks run eager", RuntimeWarning, stacklevel=2)
        return self.eager(*args)


_COMPILED: dict[tuple, CompiledLoss] = {}
_OBJECTIVES: dict[tuple, Objective] = {}


@contextlib.contextmanager
def compile_backend(backend: Callable) -> Iterator[None]:
    """Inside: compiled losses are made with ``backend`` (a ``torch.compile`` backend, e.g. one
    that counts the graphs it runs) instead of inductor; the cache of compiled losses is emptied
    on entry and on exit, so no loss outlives the backend it was made with."""
    _COMPILED.clear()
    _BACKEND[0] = backend
    try:
        yield
    finally:
        _BACKEND[0] = None
        _COMPILED.clear()


def compiled_loss(forward, config: OODStageConfig, settings: LossSettings, mode: str) -> CompiledLoss:
    """:func:`stack_loss` compiled for this (model, objective, settings), made once per process
    and shared by every stack of that key (the objective instance too: only stateless objectives
    compile); each key has a code object of its own (:class:`CompiledLoss`)."""
    key = (forward, config.objective, config.env_reduction, repr(sorted(config.objective_kwargs.items())),
           settings, mode)
    if key not in _COMPILED:
        objective = make_objective(config.objective, env_reduction=config.env_reduction, **config.objective_kwargs)
        _OBJECTIVES[key] = objective
        name = f"stack_loss_{len(_COMPILED)}"
        model = getattr(forward, "__qualname__", repr(forward)).split(".")[0]
        description = f"{config.objective} on {model}, {settings.precision}, mode {mode}"
        _COMPILED[key] = CompiledLoss(loss_function(forward, objective, settings, name), name, description, mode)
    return _COMPILED[key]


@add_process_recorder
def compile_record() -> dict:
    """For a provenance record: every loss this process compiled, ``"compiled"`` or why it ran
    eager (empty when none was compiled)."""
    losses = {f"{c.name} ({c.description})": "compiled" for c in _COMPILED.values()}
    losses.update({name: f"eager: {why}" for name, why in EAGER_FALLBACKS.items()})
    return {"compiled_losses": losses} if losses else {}


def will_compile(objective: Objective, head_only: bool, options: FastOptions, functional: bool = True) -> bool:
    """Whether the fast path compiles this objective's step: a compile mode is asked for, the
    penalty has a first-order form there (no double backward: a closed form, or IGA's
    Hessian-vector product where the stack is a function of its tensors, ``functional``) and the
    objective keeps no state."""
    return (options.compile != "none" and options.closed_form
            and objective.has_first_order_form(head_only, functional) and not objective.stateful)


# ------------------------------------------------------------------------------- the stack's tensors
class FunctionalStack:
    """A stack as a function of named tensors: ``forward(params, inputs, bias_relu)``.

    For the models of :mod:`featlib.models.stacked` (a ``functional_forward``) the tensors are
    copies of the module's parameters that the fast path may regroup along the configuration axis
    (the last batch dimension) and writes back at the end; any other stack function trains its
    ``trainable`` tensors in place, in its own layout."""

    def __init__(self, stack: StackFn, trainable: Sequence[torch.Tensor], batch_shape: tuple[int, ...]):
        self.stack = stack
        self.axis = len(batch_shape) - 1
        self.batch_shape = tuple(batch_shape)
        functional = getattr(type(stack), "functional_forward", None)
        named = dict(stack.named_parameters()) if isinstance(stack, nn.Module) else {}
        ids = {id(t) for t in trainable}
        self.regroupable = (
            functional is not None and len(trainable) > 0 and ids <= {id(p) for p in named.values()}
            and all(tuple(p.shape[: len(batch_shape)]) == self.batch_shape for p in named.values())
        )
        if self.regroupable:
            self.forward = functional
            self.initial = {n: p.detach() for n, p in named.items()}
            self.trainable = tuple(n for n, p in named.items() if id(p) in ids)
            self.parameters = named
            self.originals = {n: named[n] for n in self.trainable}
        else:
            self.forward = _call_stack(stack)
            self.initial = {f"trainable{i}": t for i, t in enumerate(trainable)}
            self.trainable = tuple(self.initial)
            self.parameters = {}
            self.originals = dict(self.initial)

    def regularised(self, scope: str) -> tuple[str, ...]:
        """The names of the trainable tensors that the L2 term of ``scope`` covers."""
        names = list(self.trainable)
        covered = l2_covered(self.stack, [self.originals[n] for n in names], scope)
        return tuple(n for n, keep in zip(names, covered) if keep)

    def width(self) -> int:
        """The widest per-run dimension of the stack's tensors (its hidden width): a run's hidden
        activation is ``n`` times this many numbers."""
        dims = len(self.batch_shape)
        return max((t.shape[-1] for t in self.initial.values() if t.dim() > dims), default=1)

    @property
    def trains_everything(self) -> bool:
        return self.regroupable and set(self.trainable) == set(self.parameters)

    def identical_runs(self) -> bool:
        """Whether every configuration starts from the same weights (checked once)."""
        return self.regroupable and all(
            torch.equal(t, t.narrow(self.axis, 0, 1).expand_as(t)) for t in self.initial.values())

    def write_back(self, params: dict[str, torch.Tensor], index: torch.Tensor) -> None:
        """Put the final weights (slot ``index[c]`` for configuration c) into the module."""
        if not self.regroupable:
            return
        with torch.no_grad():
            for name, param in self.parameters.items():
                param.copy_(params[name].detach().index_select(self.axis, index))


def _call_stack(stack: StackFn):
    def forward(params, inputs, bias_relu=None):
        return stack(inputs)

    return forward


@dataclass
class StackPhase:
    """The tensors trained between two transitions, their optimizer and the layout."""

    transition: Transition
    params: dict[str, torch.Tensor]
    optimizer: torch.optim.Optimizer


def make_adam(tensors: list[torch.Tensor], lr: float, fused: bool) -> torch.optim.Optimizer:
    """Adam with its fused kernel where torch has one for these tensors, its foreach form otherwise."""
    if fused:
        try:
            return torch.optim.Adam(tensors, lr=lr, fused=True)
        except (RuntimeError, ValueError):
            pass
    return torch.optim.Adam(tensors, lr=lr)


def regroup(stack: FunctionalStack, previous: StackPhase | None, transition: Transition, lr: float,
            fused: bool) -> StackPhase:
    """The next phase: every tensor (and Adam's moments) taken slot by slot from the previous
    phase (at step 0 from the initial weights) along the configuration axis."""
    if not stack.regroupable:  # one phase, the caller's tensors trained in place
        tensors = [stack.initial[n] for n in stack.trainable]
        return StackPhase(transition, dict(stack.initial), make_adam(tensors, lr, fused))
    source = previous.params if previous is not None else stack.initial
    some = next(iter(source.values()))
    index = torch.tensor(transition.source, device=some.device)
    params = {}
    for name, tensor in source.items():
        taken = tensor.detach().index_select(stack.axis, index)
        params[name] = taken.requires_grad_() if name in stack.trainable else taken
    optimizer = make_adam([params[n] for n in stack.trainable], lr, fused)
    if previous is not None:
        for name in stack.trainable:
            state = previous.optimizer.state.get(previous.params[name])
            if state:
                optimizer.state[params[name]] = {
                    k: (v.clone() if k == "step" else v.index_select(stack.axis, index)) for k, v in state.items()}
    return StackPhase(transition, params, optimizer)


def run_tiles(n_slots: int, slot_bytes: float, tile_mib: float) -> list[tuple[int, int]]:
    """The runs of one step as ``[start, stop)`` tiles along the configuration axis, each holding
    at most ``tile_mib`` MiB of hidden activation (``slot_bytes`` per run; at least one run per
    tile); one tile of every run when ``tile_mib`` is 0.

    Why: on a CPU a whole-network stack of C runs computes one hidden activation of ``C n H``
    floats (154 MB at 5,000 images, width 256 and 30 runs), which overflows the cache; the stack
    then runs no faster than the runs one at a time (issue 38). The runs are independent (each
    run's loss depends on its own weights only), so a step over the tiles in turn, each tile's
    gradient written into its slice, is the same step."""
    if tile_mib <= 0:
        return [(0, n_slots)]
    per_tile = max(1, int(tile_mib * 2 ** 20 // max(slot_bytes, 1.0)))
    return [(a, min(a + per_tile, n_slots)) for a in range(0, n_slots, per_tile)]


def tiled_backward(loss_fn: Callable, params: dict[str, torch.Tensor], trainable: Sequence[str], axis: int,
                   tiles: list[tuple[int, int]], inputs, env_targets, weight: torch.Tensor) -> torch.Tensor:
    """One step's gradients, tile by tile (:func:`run_tiles`): each tile's tensors are fresh leaves
    viewing the stack's, so its backward costs the tile alone (a backward through ``narrow`` of the
    whole tensor would write a whole-size zero gradient per tile), and its gradients are copied into
    their slice of ``.grad``. Returns the per-run penalties, all tiles concatenated."""
    for name in trainable:
        if params[name].grad is None:
            params[name].grad = torch.zeros_like(params[name])
    penalties = []
    for a, b in tiles:
        part = {n: (t.detach().narrow(axis, a, b - a).requires_grad_() if n in trainable else t.narrow(axis, a, b - a))
                for n, t in params.items()}
        loss, penalty = loss_fn(part, inputs, env_targets, weight.narrow(axis, a, b - a))
        grads = torch.autograd.grad(loss, [part[n] for n in trainable])
        for name, grad in zip(trainable, grads):
            params[name].grad.narrow(axis, a, b - a).copy_(grad)
        penalties.append(penalty.detach())
    return torch.cat(penalties, axis)


def shares_prefix(stack: FunctionalStack, objective: Objective, warmup_steps: torch.Tensor,
                  options: FastOptions) -> bool:
    """Where sharing the ERM prefix is exact: see the module docstring."""
    if not (options.share_prefix and objective.has_penalty and not objective.stateful and stack.regroupable):
        return False
    rows = warmup_steps.reshape(-1, warmup_steps.shape[-1])
    return bool((rows == rows[:1]).all()) and bool((rows > 0).any()) and stack.identical_runs()


# ------------------------------------------------------------------------------- the loop
def train_stack_fast(runs: StackRuns, envs: Environments, config: OODStageConfig, progress: bool | str = False,
                     options: FastOptions = FastOptions()) -> StackHistory:
    """:func:`~.ood_stage.train_stack_plain` on the fast path with ``options`` (same arguments, same
    history; the trained weights are written back into the stack's parameters)."""
    stack, trainable, batch_shape = runs.stack, runs.trainable, runs.batch_shape
    train, tests = envs.train, list(envs.tests)
    device = train.y.device
    penalty_weights, warmup_steps = check_schedule(runs.penalty_weights, runs.warmup_steps, batch_shape, device)
    check_penalty_weight(penalty_weights)
    precision = PRECISIONS.get(config.precision)
    precision.check(device)
    objective = make_objective(config.objective, env_reduction=config.env_reduction, **config.objective_kwargs)
    functional = FunctionalStack(stack, trainable, batch_shape)
    head_only = bool(getattr(stack, "head_only", False)) and functional.trains_everything
    n_configs = batch_shape[-1]
    if shares_prefix(functional, objective, warmup_steps, options):
        joins = warmup_steps.reshape(-1, n_configs)[0].tolist()
    else:
        joins = [0] * n_configs
    transitions = {t.step: t for t in prefix_schedule(joins, config.steps)}

    settings = LossSettings(
        env_bounds=tuple((s.start, s.stop) for s in train.env_slices), trainable=functional.trainable,
        regularised=functional.regularised(config.l2_scope), l2=float(config.l2), rescales=bool(objective.has_penalty and objective.rescale),
        closed_form=options.closed_form, head_only=head_only, device_type=device.type,
        precision=config.precision, bias_relu=options.bias_relu, functional=functional.regroupable,
    )
    mode = COMPILE_MODES.get(options.compile)(device)
    compiles = will_compile(objective, head_only, options, functional.regroupable)
    if compiles:
        loss_fn = compiled_loss(functional.forward, config, settings, mode)
    else:
        loss_fn = functools.partial(stack_loss, functional.forward, objective, settings)
    cudagraphs = mode == "reduce-overhead" and compiles
    env_targets = [train.y[..., s] for s in train.env_slices]
    # a featurizer's inputs (images) once in the compute dtype, not cast on every step; frozen
    # features feed the head, which computes in float32 (models.stacked.head_product)
    inputs = precision.stored(train.inputs) if functional.regroupable and not head_only else train.inputs

    # tiles of runs: whole-network stacks on a CPU only (a head stack's activation is its logits),
    # objectives without state (GroupDRO keeps weights over all runs of the stack)
    tiled = (functional.regroupable and not head_only and device.type == "cpu" and options.cpu_tile_mib > 0
             and not objective.stateful)
    tile_mib = options.cpu_tile_mib if tiled else 0.0
    slot_bytes = float(inputs.shape[-2]) * functional.width() * 4 if tiled else 0.0
    records: dict[str, list] = {"steps": [], "train_acc": [], "test_acc": [], "penalty": [], "finite": []}
    records_at = set(record_steps(config))
    axis = functional.axis
    phase: StackPhase | None = None
    last_penalty = torch.zeros(batch_shape, device=device)

    def positions() -> torch.Tensor:
        return torch.tensor(phase.transition.positions(n_configs), device=device)

    def record(step: int) -> None:
        params = phase.params

        def forward(inputs):
            with precision.autocast(device):
                logits, features = functional.forward(params, inputs, None)
            return promote(logits), features

        train_acc, test_acc, finite = evaluate_stack(forward, train, tests)
        where = positions()
        records["steps"].append(step)
        records["train_acc"].append(train_acc.index_select(-1, where).cpu().numpy())
        records["test_acc"].append(test_acc.index_select(-1, where).cpu().numpy())
        records["penalty"].append(last_penalty.index_select(-1, where).cpu().numpy())
        records["finite"].append((finite & torch.isfinite(last_penalty)).index_select(-1, where).cpu().numpy())

    bar = tqdm(total=config.steps, desc=progress if isinstance(progress, str) else config.objective,
               disable=not progress, leave=False)
    with precision.matmul_mode(device):
        for step in range(config.steps + 1):
            if step in transitions:
                phase = regroup(functional, phase, transitions[step], config.lr, options.fused_adam)
                index = torch.tensor(phase.transition.source, device=device)
                last_penalty = last_penalty.index_select(axis, index) if functional.regroupable else last_penalty
                members = torch.tensor([max(c, 0) for c in phase.transition.members], device=device)
                trunk = torch.tensor([c == TRUNK for c in phase.transition.members], device=device)
                slot_weights = penalty_weights.index_select(axis, members)
                slot_warmups = torch.where(trunk, config.steps + 1, warmup_steps.index_select(axis, members))
                warm = torch.full_like(slot_weights, config.warmup_penalty_weight)
            if step in records_at:
                record(step)
            if step == config.steps:
                break
            weight = torch.where(step >= slot_warmups, slot_weights, warm)
            if cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()
            tiles = run_tiles(weight.shape[axis], slot_bytes, tile_mib)
            if len(tiles) > 1:
                penalty = tiled_backward(loss_fn, phase.params, functional.trainable, axis, tiles, inputs,
                                         env_targets, weight)
            else:
                loss, penalty = loss_fn(phase.params, inputs, env_targets, weight)
                phase.optimizer.zero_grad(set_to_none=True)
                loss.backward()
            phase.optimizer.step()
            if step + 1 in records_at or step + 1 in transitions:
                last_penalty = penalty.detach().clone()
            bar.update()
    bar.close()
    functional.write_back(phase.params, positions())
    return StackHistory(
        steps=records["steps"],
        train_acc=np.stack(records["train_acc"]),
        test_acc=np.stack(records["test_acc"]),
        penalty=np.stack(records["penalty"]),
        finite=np.stack(records["finite"]),
    )


def fast_path(options: FastOptions) -> Callable:
    """:func:`train_stack_fast` with ``options`` fixed: an entry of :data:`~.ood_stage.OOD_PATHS`."""
    def train(runs, envs, config, progress=False):
        return train_stack_fast(runs, envs, config, progress, options)

    train.options = options
    return train


#: The named fast paths: closed forms, shared prefix, eager; and the same compiled.
OOD_PATHS.register("fast")(fast_path(FastOptions()))
OOD_PATHS.register("compiled")(fast_path(FastOptions(compile="default")))
OOD_PATHS.register("compiled-cudagraphs")(fast_path(FastOptions(compile="cudagraphs")))
