"""The one registry of feature learners: one :class:`Learner` per algorithm (ERM, Bonsai, FeAT,
iFeAT), each an ``algorithm(loop, **options)`` of :mod:`.erm`, :mod:`.bonsai` or :mod:`.feat`.

Calling a learner, ``FEATURE_LEARNERS.get(name)(data, seed, **options)``, runs it full batch on a
ColoredMNIST dataset (:class:`.full_batch_loop.FullBatchLoop`) with the option names of Table 6;
``FEATURE_LEARNERS.get(name).on(loop, **options)`` runs it on any loop (:class:`.base.Loop`), the
options in steps.

A learner of one's own is one function in one file::

    @FEATURE_LEARNERS.register("mine", label="Mine", schedule={"epochs": 150})
    def mine(loop, *, steps=150):
        ...

and every command, protocol, table and label reads it from here: its ``label`` (what tables show),
its ``order`` among the tables' columns (the built-ins: ERM, Bonsai, FeAT (iFeAT), FeAT's
Algorithm 1; a learner without one comes after them, in the order of registration), its
``schedule`` (Table 6's words, full-batch epochs: the lengths the ColoredMNIST protocol gives it on
a dataset that :data:`featlib.hparams.TABLE6` does not list it for, scaled by ``epoch_scale``), the
``protocol_fields`` it takes from a protocol (FeAT's termination fields), and its ``step_cost`` (a
step's time as a multiple of ERM's, for the chapters' time estimates).
"""
from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..hparams import APPENDIX_F1
from ..registry import Registry
from ..validation import check_int, check_positive, check_sequence
from .base import Learned, Loop
from .full_batch_loop import FullBatchLoop


#: The names by which a full-batch call gives a round's length in epochs (Table 6), and the
#: loop-neutral names in steps the algorithms take (one full-batch step per epoch). A learner's
#: ``schedule`` uses the first: ``epochs`` (one stage), ``round_epochs`` (one length per round),
#: ``epochs_per_round`` (every round that long, up to the ``max_rounds`` option) and
#: ``synthesis_epochs`` (a last stage after the rounds).
EPOCHS_AS_STEPS = {"epochs": "steps", "epochs_per_round": "steps_per_round", "round_epochs": "round_steps",
                   "synthesis_epochs": "synthesis_steps"}
STEPS_AS_EPOCHS = {steps: epochs for epochs, steps in EPOCHS_AS_STEPS.items()}


def check_schedule(name: str, schedule) -> dict:
    """``schedule`` checked: a mapping of :data:`EPOCHS_AS_STEPS`' names to epochs (integers >= 1;
    ``round_epochs`` a list of them); its copy, tuples for lists."""
    if not isinstance(schedule, Mapping):
        raise ValueError(f"{name} must be a mapping of {', '.join(EPOCHS_AS_STEPS)} to epochs; got {schedule!r}")
    out = {}
    for key, value in schedule.items():
        if key not in EPOCHS_AS_STEPS:
            raise ValueError(f"{name} names {key!r}; a schedule's lengths are {', '.join(map(repr, EPOCHS_AS_STEPS))}")
        if key == "round_epochs":
            out[key] = tuple(check_int(f"{name}[{key!r}]", v, minimum=1)
                             for v in check_sequence(f"{name}[{key!r}]", value))
        else:
            out[key] = check_int(f"{name}[{key!r}]", value, minimum=1)
    return out


@dataclass(frozen=True)
class Learner:
    """One feature-learning algorithm: ``algorithm(loop, **options)`` -> :class:`Learned`, and what
    the rest of the library reads of it (see the module docstring)."""

    name: str
    algorithm: Callable[..., Learned]
    #: What tables and figures call it (:data:`featlib.experiments.labels.LEARNER_LABELS`).
    label: str = ""
    #: The algorithm's own name where learners are compared as algorithms (the cost chapter).
    short_label: str = ""
    #: Its place among the tables' columns (lower first); None: after every learner that has one.
    order: float | None = None
    #: Its lengths in Table 6's words (:data:`EPOCHS_AS_STEPS`), full-batch epochs.
    schedule: Mapping = field(default_factory=dict)
    #: Fields of a protocol (or WILDS configuration) passed to it under the same name where the
    #: protocol has them (``max_rounds`` is the WILDS configuration's ``rounds``).
    protocol_fields: tuple[str, ...] = ()
    #: A step's time as a multiple of ERM's (the chapters' time estimates).
    step_cost: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", self.label or self.name)
        object.__setattr__(self, "short_label", self.short_label or self.label)
        object.__setattr__(self, "schedule", check_schedule(f"the schedule of learner {self.name!r}", self.schedule))
        object.__setattr__(self, "protocol_fields", tuple(self.protocol_fields))
        check_positive(f"the step_cost of learner {self.name!r}", self.step_cost)

    def __call__(self, data, seed: int, *, model: str = "mlp", hidden_dim: int = APPENDIX_F1["hidden_dim"].value,
                 lr: float = APPENDIX_F1["lr"].value, l2: float = APPENDIX_F1["l2"].value, progress: bool = False,
                 **options) -> Learned:
        """Full batch on a ColoredMNIST dataset ``data`` (``model``: "mlp" or "cnn"), the options
        named as in Table 6 (see the module docstring)."""
        loop = FullBatchLoop(data, seed, model=model, hidden_dim=hidden_dim, lr=lr, l2=l2, progress=progress)
        return self.on(loop, **{EPOCHS_AS_STEPS.get(k, k): v for k, v in options.items()})

    def on(self, loop: Loop, **options) -> Learned:
        """On any :class:`Loop`, the options in steps."""
        return self.algorithm(loop, **options)

    @property
    def in_rounds(self) -> bool:
        """Whether it learns in rounds (its schedule gives them): its per-round histories are kept."""
        return bool({"round_epochs", "epochs_per_round"} & set(self.schedule))

    def run_lengths(self, per_round: int, rounds: int, single: int | None = None) -> dict:
        """Its length options, in steps, for a run of ``rounds`` rounds of ``per_round`` steps each
        (a synthesis stage as long as a round; a learner of one stage: ``single`` steps, by default
        ``per_round``): what the WILDS configuration (Table 12) and the cost benchmark give it."""
        out = {}
        for key in self.schedule:
            if key == "epochs":
                out["steps"] = per_round if single is None else single
            elif key == "round_epochs":
                out["round_steps"] = (per_round,) * rounds
            elif key == "epochs_per_round":
                out.update(steps_per_round=per_round, max_rounds=rounds)
            else:
                out["synthesis_steps"] = per_round
        return out

    def stages(self, lengths: Mapping, rounds: int) -> list[tuple[str, int]]:
        """(label, length) of every stage a run trains whose length options are ``lengths`` (in
        epochs or in steps; other options are ignored), in order: rounds "1", "2", ... (a per-round
        length: ``rounds`` of them), then "synthesis"."""
        out = []
        for key, value in lengths.items():
            key = STEPS_AS_EPOCHS.get(key, key)
            if key == "epochs":
                out.append(("1", value))
            elif key == "round_epochs":
                out += [(str(k), v) for k, v in enumerate(value, start=1)]
            elif key == "epochs_per_round":
                out += [(str(k), value) for k in range(1, rounds + 1)]
            elif key == "synthesis_epochs":
                out.append(("synthesis", value))
        return out

    @property
    def source_digest(self) -> str | None:
        """The SHA-256 of the source of the module that defines the algorithm (of the function
        alone where the module has none, as in a notebook) when that is not featlib's own: for a
        learner of one's own, editing its file changes the keys of what it made. None for featlib's."""
        module = inspect.getmodule(self.algorithm)
        if module is not None and module.__name__.split(".")[0] == "featlib":
            return None
        for holder in (module, self.algorithm):
            try:
                return hashlib.sha256(inspect.getsource(holder).encode()).hexdigest()
            except (OSError, TypeError):
                continue
        return hashlib.sha256(repr(getattr(self.algorithm, "__code__", self.algorithm)).encode()).hexdigest()


class LearnerRegistry(Registry[Learner]):
    """:class:`~featlib.registry.Registry` of :class:`Learner`: ``register(name, **what)`` wraps the
    function it decorates, and :meth:`table_order` is the order of the tables' columns."""

    def register(self, name: str, **what) -> Callable:
        """Register ``algorithm(loop, **options)`` as the learner ``name`` (``what``: the
        :class:`Learner` fields label, short_label, order, schedule, protocol_fields, step_cost);
        the decorated function is returned unchanged."""
        def decorator(algorithm):
            learner = algorithm if isinstance(algorithm, Learner) else Learner(name, algorithm, **what)
            super(LearnerRegistry, self).register(name)(learner)
            return algorithm

        return decorator

    def table_order(self) -> list[str]:
        """Every learner's name in the order of the tables' columns: by ``order``, then those
        without one in the order they were registered."""
        items = self._items  # read, not looked up: no learner is being chosen here
        rank = {n: (math.inf if learner.order is None else learner.order, k) for k, (n, learner) in enumerate(items.items())}
        return sorted(items, key=rank.__getitem__)


FEATURE_LEARNERS: LearnerRegistry = LearnerRegistry("feature learner")

#: ``@register(name, ...)``: the same as ``@FEATURE_LEARNERS.register(name, ...)``.
register = FEATURE_LEARNERS.register
