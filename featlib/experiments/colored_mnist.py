"""The ColoredMNIST protocol of Sec. 6 (Table 2, Table 7, Fig. 1b), many runs at a time.

For each dataset (ColoredMNIST-025 / -01) and seed, each learner's features are learned
("erm", "bonsai", "ifeat"; "feat" too), then every OOD objective trains a classifier on them for
every (penalty weight, ERM pre-training length) pair: 10 seeds x 5 weights x 6 lengths x 8
objectives x 4 learners in the paper. The paper's FeAT column is iFeAT ("Throughout the
whole experiment, we will use iFeAT", Sec. 5); Algorithm 1 with every set kept ("feat") is its
own column here. "erm-nf" is the common protocol: the whole network
from a random initialisation, ERM pre-training, then the OOD objective, featurizer not frozen.

How the runs are batched (see :mod:`featlib.models.stacked`):

* frozen featurizers: one stack per objective holding every (learner, seed) group and
  every configuration: heads ``(G, C, H)`` on features ``(G, n, H)`` computed once;
* ERM-NF: one stack per (objective, seed) of C complete MLPs sharing that seed's images.

``stacked=False`` trains every run alone (the reference code's way); both give the same numbers
(``tests/test_stacked_training.py``). Finished results are kept in ``cache_dir`` as they
complete, so an interrupted run resumes where it stopped: learned features per (learner, seed)
(:mod:`featlib.store.files`), and the pieces, Table 2's units, per (objective, learner, seed) and
the oracle per seed (:mod:`featlib.store.pieces`). They are verified when read back, a damaged
one is reported and recomputed, and processes sharing ``cache_dir`` compute each once.

Reported OOD accuracy is the worst of the three test environments after the last step; for
each (learner, objective) the table shows the configuration with the best mean over
seeds (test-domain selection, as in the reference protocol), with mean and standard deviation
over seeds at that configuration.

The protocol trains the MLP on the two-channel datasets only; the colour-patch variants
("cmnist025-patch", "cmnist01-patch", read by a CNN in the GradCAM figures) are refused, and
:func:`schedule` gives their feature learners the Table 6 epochs of the base dataset.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .. import __version__
from ..store.keys import key as store_key
from ..store.files import CacheWarning, CacheWriteError, CorruptFileError, PieceLock, cached, load_torch, cached_meta, save_torch
from ..store.pieces import ORACLE, Piece, PieceStore
from ..data.colored_mnist import COLORED_MNIST, make_colored_mnist
from ..data.mnist import SOURCES
from ..device import describe_device, get_device
from ..feature_learning import FEATURE_LEARNERS, LearnedFeatures
# Table 6's epochs per learner and a learner's schedule on a dataset live below the experiments (so that
# the memory model and the cost benchmark read them without the protocol); re-exported here
from ..feature_learning.schedules import SCHEDULES, schedule, schedule_dataset  # noqa: F401
from ..store.legacy import ROW_ALIASES
from ..feature_learning.feat_rounds import DEFAULT_HEAD_COMBINATION, HEAD_COMBINATIONS
from ..feature_learning.termination import DEFAULT_TERMINATION, DEFAULT_TERMINATION_THRESHOLD, termination_rule
from ..models.mlp import ColoredMNISTMLP
from ..models.stacked import StackedHeads, StackedMLP
from ..objectives import OBJECTIVES, make_objective
from ..training import DEFAULT_PRECISION, OOD_PATHS, PRECISIONS
from ..training.ood_stage import Environments, LabelledInputs, OODStageConfig, StackRuns, train_stack
from ..hparams import APPENDIX_F1, OBJECTIVE_GRIDS, PAPER_LEARNERS, values
from .cmnist_presets import DEFAULT_PRESET, PROTOCOL_PRESETS, preset_of
from ..validation import (
    check_seed,
    check_choice, check_fits_in_memory, check_int, check_positive, check_sequence, check_writable,
)

#: Table 2's rows and columns: ERM-NF (the whole network from scratch, no feature learning) and the
#: paper's learners (:data:`featlib.hparams.PAPER_LEARNERS`; its FeAT column is iFeAT, Sec. 5).
TABLE2_OBJECTIVES = ("erm", "irmv1", "vrex", "irmx", "ib_irm", "clove", "iga", "fishr")
TABLE2_LEARNERS = ("erm-nf", *PAPER_LEARNERS)


def learner_choices() -> list[str]:
    """The columns a protocol may have: ERM-NF, then every registered feature learner (whose
    features are frozen: :data:`featlib.feature_learning.FEATURE_LEARNERS`) in the tables' order."""
    return ["erm-nf", *FEATURE_LEARNERS.table_order()]


#: Objectives that train as another on frozen features: IB-IRM's bottleneck term (the variance of
#: the features, Ahuja et al. 2021) is a constant there, so its frozen cells repeat IRMv1's, in the
#: paper's Table 2 as in ours. Counts and means over a frozen column's rows take such a row once.
FROZEN_REPEATS = {"ib_irm": "irmv1"}


def distinct_objectives(objectives) -> list:
    """``objectives`` without those that repeat another of them on frozen features
    (:data:`FROZEN_REPEATS`): IB-IRM goes where IRMv1 is present."""
    objectives = list(objectives)
    return [o for o in objectives if FROZEN_REPEATS.get(o) not in objectives]

#: Appendix F.1's values (featlib.hparams.APPENDIX_F1), the protocol's defaults.
PAPER = values(APPENDIX_F1)
#: The OOD stage's path in the protocol: every configuration of a cell trained as one stack
#: (featlib.training.fast_stage). That it computes the plain loop's Table 2 is judged at table
#: level in results/cmnist-paths (featlib.experiments.path_comparison.verdicts; chapter 04).
DEFAULT_OOD_PATH = "fast"


def protocol_datasets() -> list[str]:
    """The datasets Table 2's protocol runs on (the MLP on two-channel images): every registered
    ColoredMNIST dataset (:data:`featlib.data.colored_mnist.COLORED_MNIST`) drawn with the
    "channel" shortcut, in the order of registration; the patch variants are the saliency chapter's."""
    return [name for name in COLORED_MNIST if COLORED_MNIST.get(name).shortcut == "channel"]


def check_mnist_source(value) -> str:
    """Where MNIST comes from: one of :data:`featlib.data.mnist.SOURCES` (checked by the chapters'
    validate cells, so that a typo stops before any work)."""
    return check_choice("mnist_source", value, SOURCES)


def check_protocol_dataset(dataset: str) -> str:
    """Table 2's protocol (the MLP on the two-channel images) runs on :func:`protocol_datasets`;
    the colour-patch variants are for the saliency chapter."""
    datasets = protocol_datasets()
    if dataset not in datasets:
        hint = ""
        if dataset in COLORED_MNIST:
            patch = [n for n in COLORED_MNIST if COLORED_MNIST.get(n).shortcut != "channel"]
            hint = (f" (the patch variants {', '.join(map(repr, patch))} are for the saliency chapter, "
                    f"Fig. 4 / Fig. 6, not for Table 2's protocol)")
        raise ValueError(f"dataset must be one of {', '.join(map(repr, datasets))}; got {dataset!r}{hint}")
    return dataset


@dataclass(frozen=True)
class CMNISTProtocol:
    """Everything that defines a ColoredMNIST study; the defaults are the paper's full scale."""

    dataset: str = "cmnist025"
    seeds: tuple[int, ...] = PAPER["seeds"]
    objectives: tuple[str, ...] = TABLE2_OBJECTIVES
    learners: tuple[str, ...] = TABLE2_LEARNERS
    penalty_weights: tuple[float, ...] = PAPER["penalty_weights"]
    #: Per objective, the penalty weights that replace ``penalty_weights`` for that objective alone
    #: (:meth:`penalty_grid`). None: the dataset's entry of :data:`featlib.hparams.OBJECTIVE_GRIDS`
    #: (Table 2's protocol) when ``penalty_weights`` is Appendix F.1's grid, else none; ``{}``: none.
    objective_penalty_weights: dict | None = None
    pretrain_epochs: tuple[int, ...] = PAPER["pretrain_epochs"]
    ood_steps: int = PAPER["ood_steps"]  # of the frozen-feature columns' OOD stage
    nf_ood_steps: int = PAPER["nf_ood_steps"]  # of the ERM-NF column's, ERM pre-training included
    hidden_dim: int = PAPER["hidden_dim"]
    n_train: int = PAPER["n_train"]
    n_test: int = PAPER["n_test"]
    #: Images of MNIST's test set coloured as the training environments, on which every OOD-stage
    #: run is also scored (``val_acc``) for training-domain model selection (not the paper's rule).
    n_val: int = PAPER["n_val"]
    epoch_scale: float = 1.0  # multiplies every feature-learning epoch count of Table 6
    max_rounds: int = PAPER["max_rounds"]
    retain_weight: float = PAPER["retain_weight"]
    termination_threshold: float = DEFAULT_TERMINATION_THRESHOLD  # of FeAT's termination check (Appendix F.1: 130%)
    termination_rule: str = DEFAULT_TERMINATION  # a rule of featlib.feature_learning.termination
    #: How FeAT/iFeAT combine their rounds' heads: "average" (Algorithm 1, Sec. 5) or "sum" (the
    #: authors' code); featlib.feature_learning.feat_rounds.HEAD_COMBINATIONS.
    head_combination: str = DEFAULT_HEAD_COMBINATION
    lr: float = PAPER["lr"]
    l2: float = PAPER["l2"]
    eval_every: int = 100
    env_reduction: str = "mean"
    #: The penalty weight during the ERM pre-training steps (the reference code's ``anneal_val``,
    #: 1 in the Bonsai authors' ERM-NF sweep); 0 is plain ERM.
    warmup_penalty_weight: float = 0.0
    #: Per objective: ``steps`` (instead of ``ood_steps``), ``l2_scope`` (a name of
    #: featlib.training.ood_stage.L2_SCOPES), ``minibatch`` (one random minibatch of that many
    #: examples per environment each step, as the authors' CLOvE loop; plain path only:
    #: featlib.training.ood_stage.OODStageConfig) and keyword arguments of the objective (e.g.
    #: ``risk_reduction``, ``ib_weighting``); see featlib.experiments.cmnist_presets.
    objective_options: dict = field(default_factory=dict)
    precision: str = DEFAULT_PRECISION  # of the OOD stage: a name of featlib.training.PRECISIONS
    ood_path: str = DEFAULT_OOD_PATH  # "plain" (the reference loop) or a fast path of featlib.training.OOD_PATHS

    def __post_init__(self) -> None:
        check_protocol_dataset(self.dataset)
        PRECISIONS.get(self.precision)
        OOD_PATHS.get(self.ood_path)
        for name in ("seeds", "objectives", "learners", "penalty_weights", "pretrain_epochs"):
            object.__setattr__(self, name, tuple(check_sequence(name, getattr(self, name), unique=True)))
        for seed in self.seeds:
            check_seed("seeds", seed)
        for objective in self.objectives:
            OBJECTIVES.get(objective)
        for learner in self.learners:
            check_choice("learners", learner, learner_choices())
        for weight in self.penalty_weights:
            check_positive("penalty_weights", weight, allow_zero=True)
        object.__setattr__(self, "objective_penalty_weights", self._own_grids())
        for epochs in self.pretrain_epochs:
            check_int("pretrain_epochs", epochs, minimum=0)
        check_int("ood_steps", self.ood_steps, minimum=1)
        check_int("nf_ood_steps", self.nf_ood_steps, minimum=1)
        check_int("hidden_dim", self.hidden_dim, minimum=1)
        check_int("n_train", self.n_train, minimum=2, maximum=50000)
        check_int("n_test", self.n_test, minimum=1, maximum=10000)
        check_int("n_val", self.n_val, minimum=0, maximum=10000)
        if 0 < self.n_val < COLORED_MNIST.get(self.dataset).num_train_envs:
            raise ValueError(f"n_val must be 0 or at least one image per training environment; got {self.n_val}")
        check_positive("epoch_scale", self.epoch_scale)
        check_int("max_rounds", self.max_rounds, minimum=1)
        check_positive("retain_weight", self.retain_weight, allow_zero=True)
        check_positive("termination_threshold", self.termination_threshold)
        termination_rule(self.termination_rule)
        HEAD_COMBINATIONS.get(self.head_combination)
        check_int("eval_every", self.eval_every, minimum=1)
        check_positive("warmup_penalty_weight", self.warmup_penalty_weight, allow_zero=True)
        if not isinstance(self.objective_options, dict):
            raise ValueError(f"objective_options must be a mapping objective -> options; got {self.objective_options!r}")
        for objective, options in self.objective_options.items():
            OBJECTIVES.get(objective)
            if not isinstance(options, dict):
                raise ValueError(f"objective_options[{objective!r}] must be a mapping of options; got {options!r}")
        for objective in set(self.objectives) | set(self.objective_options):
            # lr, l2, env_reduction, steps, l2_scope and the objective's options as the OOD stage checks them
            config = self.ood_config(objective)
            try:
                make_objective(objective, env_reduction=config.env_reduction, **config.objective_kwargs)
            except TypeError as err:
                raise ValueError(f"objective_options[{objective!r}] holds an option {objective} does not take "
                                 f"({err})") from None
        check_fits_in_memory(f"the protocol's largest stack (hidden_dim={self.hidden_dim}, n_train={self.n_train})",
                             self.memory_estimate())

    def memory_estimate(self) -> int:
        """Bytes that the protocol's largest stack needs at its peak, from peaks counted per
        objective and stack kind (:func:`featlib.training.memory.protocol_bytes`: the data, the
        stack, and the step's counted activations, e.g. about 4 activations per step for IRMv1
        and 8 for IGA on ERM-NF), or one network's during feature learning."""
        from ..training.memory import protocol_bytes

        return int(protocol_bytes(self))

    def learner_options(self, learner: str) -> dict:
        """Keyword arguments of the feature learner ``learner`` for this dataset (Table 6, scaled),
        with those of the protocol's fields the learner was registered to take (FeAT's rounds and
        termination: :attr:`featlib.feature_learning.Learner.protocol_fields`)."""
        options = schedule(self.dataset, learner, self.epoch_scale)
        options.update(hidden_dim=self.hidden_dim, lr=self.lr, l2=self.l2)
        fields = {f.name for f in dataclasses.fields(self)}
        options.update({f: getattr(self, f) for f in FEATURE_LEARNERS.get(learner).protocol_fields if f in fields})
        return options

    def learner_extra(self, learner: str) -> dict:
        """What a result of ``learner`` depends on beyond the protocol's fields and Table 6 (which
        every key holds): nothing for a learner Table 6 gives epochs on this dataset, for ERM-NF
        (no feature learning) or for a name not registered here; else the schedule the learner was
        registered with and, for a learner defined outside featlib, its file's SHA-256, so that
        editing a learner of one's own makes its features and pieces anew."""
        table6 = SCHEDULES.get(schedule_dataset(self.dataset), {})
        if learner in table6 or learner not in FEATURE_LEARNERS:
            return {}
        registered = FEATURE_LEARNERS.get(learner)
        source = registered.source_digest
        return {"learner_schedule": registered.schedule} | ({"learner_source": source} if source else {})

    def _own_grids(self) -> dict[str, tuple[float, ...]]:
        """``objective_penalty_weights`` resolved (None: :data:`~featlib.hparams.OBJECTIVE_GRIDS`'
        entry for the dataset, only under Appendix F.1's grid) and checked: each key an objective
        with a penalty, each value a non-empty sequence of distinct non-negative weights."""
        grids = self.objective_penalty_weights
        if grids is None:
            grids = OBJECTIVE_GRIDS.get(self.dataset, {}) if tuple(self.penalty_weights) == tuple(
                APPENDIX_F1["penalty_weights"].value) else {}
        if not isinstance(grids, dict):
            raise ValueError(f"objective_penalty_weights must be a mapping objective -> penalty weights; got {grids!r}")
        out = {}
        for objective, weights in grids.items():
            if not OBJECTIVES.get(objective).has_penalty:
                raise ValueError(f"objective_penalty_weights[{objective!r}]: {objective} has no penalty, so no "
                                 "penalty weights; give weights to a penalised objective")
            name = f"objective_penalty_weights[{objective!r}]"
            weights = tuple(float(w) for w in check_sequence(name, weights, unique=True))
            for weight in weights:
                check_positive(name, weight, allow_zero=True)
            out[objective] = weights
        return out

    def penalty_grid(self, objective: str) -> tuple[float, ...]:
        """The penalty weights ``objective``'s runs try: its own grid
        (``objective_penalty_weights``) or the protocol's ``penalty_weights``."""
        return self.objective_penalty_weights.get(objective, self.penalty_weights)

    def configurations(self, objective: str) -> list[tuple[float, int]]:
        """(penalty weight, ERM pre-training epochs) pairs; ERM ignores both, so it has one."""
        return configurations(objective, self.penalty_grid(objective), self.pretrain_epochs)

    #: What each kind of cached result leaves out of its key, and why. Keys are made by
    #: exclusion: every other field of the protocol is in the key, so a field added later is in
    #: every key until someone states here that a result does not depend on it (a stale result is
    #: never reused for a new field; tests/test_cache_keys.py checks that every name here is a field).
    PER_PIECE = {"seeds": "each piece is one seed and names it", "objectives": "each piece is one objective",
                 "learners": "each piece is one learner"}
    OOD_ONLY = {"penalty_weights": "OOD stage", "objective_penalty_weights": "OOD stage",
                "pretrain_epochs": "OOD stage", "ood_steps": "OOD stage",
                "nf_ood_steps": "OOD stage (ERM-NF)",
                "eval_every": "OOD stage", "env_reduction": "OOD stage", "warmup_penalty_weight": "OOD stage",
                "objective_options": "OOD stage", "precision": "OOD stage (feature learning runs in fp32)",
                "ood_path": "OOD stage", "n_val": "scores OOD-stage runs only (validation environments)"}
    FEAT_ONLY = {"max_rounds": "FeAT/iFeAT only", "retain_weight": "FeAT/iFeAT only",
                 "termination_threshold": "FeAT/iFeAT only", "termination_rule": "FeAT/iFeAT only",
                 "head_combination": "FeAT/iFeAT only"}
    #: An objective's own grid is in its own pieces' keys only (as their ``penalty_weights``,
    #: :meth:`ood_piece_key`), so giving CLOvE a grid leaves every other objective's pieces valid.
    OWN_GRID = {"objective_penalty_weights": "in the key of its objective's pieces alone, as their penalty_weights"}
    KEY_EXCLUSIONS = {
        # the learned features of one learner and seed (FeAT's fields kept for every learner:
        # the keys of features cached before exclusion stay valid)
        "features": {**PER_PIECE, **OOD_ONLY},
        # an OOD-stage piece (objective, learner, seed) on learned features: everything but what the piece names
        "ood": {**PER_PIECE, **OWN_GRID},
        # an ERM-NF piece: whole networks from their initialisation, no feature learning before
        "nf": {**PER_PIECE, **OWN_GRID, "ood_steps": "the frozen-feature columns' OOD stage (ERM-NF trains nf_ood_steps)",
               "epoch_scale": "feature learning (ERM-NF learns no features first)", **FEAT_ONLY},
        # the oracle run: ERM on the colour-free data
        "oracle": {**PER_PIECE, **OOD_ONLY, **FEAT_ONLY},
    }

    @classmethod
    def key_fields(cls, kind: str) -> tuple[str, ...]:
        """The fields in the key of a cached result of ``kind`` (a key of :data:`KEY_EXCLUSIONS`):
        every field of the protocol that the kind does not explicitly exclude."""
        excluded = cls.KEY_EXCLUSIONS[kind]
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in excluded)

    def key(self, fields: Sequence[str], **extra) -> str:
        """A short hash of the named fields (and ``extra``), of featlib's version and of the
        dataset's Table 6 schedule (:data:`SCHEDULES`, whose epochs every learner and the oracle
        use; a dataset it does not list has none, and each learner's result holds its registered
        schedule instead, :meth:`learner_extra`): cached results are only reused by a protocol that would recompute them identically
        (bump the version when a change alters what the learners or the OOD stage compute).
        While objective files are loaded in this process, every key also holds their SHA-256
        (``objective_files_loaded``): a file runs in-process and could change what any result
        computes, so nothing made beside one is ever cached under a key that a run without it reads."""
        from .objective_files import loaded_objective_files

        loaded = sorted(f.sha256 for f in loaded_objective_files())
        table6 = SCHEDULES.get(schedule_dataset(self.dataset))  # None: a dataset of one's own
        payload = ({f: getattr(self, f) for f in fields} | extra | {"featlib": __version__}
                   | ({"table6": table6} if table6 is not None else {})
                   | ({"objective_files_loaded": loaded} if loaded else {}))
        return store_key(payload)

    @staticmethod
    def piece_fields(learner: str) -> tuple[str, ...]:
        """The fields an OOD-stage piece of ``learner`` depends on: :attr:`NF_FIELDS` for ERM-NF,
        :attr:`OOD_FIELDS` for a learner's frozen features."""
        return CMNISTProtocol.NF_FIELDS if learner == "erm-nf" else CMNISTProtocol.OOD_FIELDS

    def ood_piece_key(self, objective: str, learner: str = "erm") -> str:
        """The key of ``objective``'s OOD-stage pieces on learned features (:attr:`OOD_FIELDS`), or of
        its ERM-NF pieces (``learner="erm-nf"``: :attr:`NF_FIELDS`, which leave out what only feature
        learning and the frozen columns read, so that two protocols that differ there share their
        ERM-NF pieces); for an objective loaded from a file of one's own, the file's SHA-256 too
        (:func:`featlib.experiments.objective_files.objective_source`: editing the file makes its pieces
        anew). An objective with a grid of its own (:meth:`penalty_grid`) has that grid as the
        key's ``penalty_weights``: its pieces are those of a protocol that gives every objective that
        grid, and no other objective's key changes."""
        from .objective_files import objective_source

        own = ({"penalty_weights": self.objective_penalty_weights[objective]}
               if objective in self.objective_penalty_weights else {})
        return self.key(self.piece_fields(learner), **objective_source(objective), **own, **self.learner_extra(learner))

    def piece_key(self, piece) -> str:
        """The key of a piece of this protocol (:class:`featlib.store.pieces.Piece`): the oracle's
        fields for a seed's oracle piece, else the OOD stage's (:meth:`ood_piece_key`)."""
        if piece.learner == ORACLE:  # ERM on the colour-free data, for ERM's epochs
            return self.key(CMNISTProtocol.ORACLE_FIELDS, **self.learner_extra("erm"))
        return self.ood_piece_key(piece.objective, piece.learner)

    def ood_fields(self, learner: str = "erm", objective: str | None = None) -> dict:
        """What a piece of ``learner`` (and ``objective``) records of its protocol: every field that
        changes its runs (:attr:`OOD_FIELDS`, or :attr:`NF_FIELDS` for ERM-NF), ``penalty_weights``
        being the weights that objective's runs tried (:meth:`penalty_grid`)."""
        fields = self.piece_fields(learner)
        out = {k: v for k, v in dataclasses.asdict(self).items() if k in fields}
        if objective is not None and "penalty_weights" in out:
            out["penalty_weights"] = self.penalty_grid(objective)
        return out

    def ood_config(self, objective: str, kind: str = "frozen") -> OODStageConfig:
        """The OOD stage of ``objective`` on frozen features (``kind="frozen"``: ``ood_steps``) or on
        the whole network (``"nf"``: ``nf_ood_steps``), evaluated every ``eval_every`` steps: the
        tables use the accuracies after the last step, and the evaluations in between say at which
        step a run diverged (:attr:`featlib.training.ood_stage.StackHistory.diverged_step`);
        evaluating never changes training."""
        check_choice("kind", kind, ("frozen", "nf"))
        options = dict(self.objective_options.get(objective, {}))
        steps = options.pop("steps", self.nf_ood_steps if kind == "nf" else self.ood_steps)
        l2_scope = options.pop("l2_scope", "all")
        minibatch = options.pop("minibatch", None)  # the authors' CLOvE loop: one random minibatch a step
        return OODStageConfig(objective, steps=steps, lr=self.lr, l2=self.l2,
                              eval_every=self.eval_every, env_reduction=self.env_reduction,
                              warmup_penalty_weight=self.warmup_penalty_weight, objective_kwargs=options,
                              l2_scope=l2_scope, path=self.ood_path, precision=self.precision, record="every",
                              minibatch=minibatch)

    def n_runs(self) -> int:
        """OOD-stage runs of the whole protocol."""
        return len(self.seeds) * len(self.learners) * sum(len(self.configurations(o)) for o in self.objectives)



#: The fields in each cached result's key (by exclusion, :meth:`CMNISTProtocol.key_fields`).
CMNISTProtocol.FEATURE_FIELDS = CMNISTProtocol.key_fields("features")
CMNISTProtocol.OOD_FIELDS = CMNISTProtocol.key_fields("ood")
CMNISTProtocol.NF_FIELDS = CMNISTProtocol.key_fields("nf")
CMNISTProtocol.ORACLE_FIELDS = CMNISTProtocol.key_fields("oracle")


def configurations(objective: str, penalty_weights, pretrain_epochs) -> list[tuple[float, int]]:
    """An objective's (penalty weight, ERM pre-training epochs) pairs in a protocol of these grids;
    an objective without a penalty (ERM) ignores both, so it has one."""
    if not OBJECTIVES.get(objective).has_penalty:
        return [(0.0, 0)]
    return list(itertools.product(penalty_weights, pretrain_epochs))


def runs_problem(piece: Piece, frame: pd.DataFrame, configs) -> str | None:
    """What is wrong with a piece's runs given its protocol's ``configs`` (every configuration
    once; an oracle piece: the seed's one row), or None."""
    if piece.learner == ORACLE:
        return None if len(frame) == 1 else f"it holds {len(frame)} rows, not the seed's one"
    configs = set(configs)
    if not {"penalty_weight", "pretrain_epochs"} <= set(frame.columns):
        return "it lacks the penalty_weight and pretrain_epochs columns of its runs' configurations"
    found = list(zip(frame["penalty_weight"], frame["pretrain_epochs"]))
    if len(found) != len(set(found)) or set(found) != configs:
        return f"it holds {len(set(found) & configs)} of the protocol's {len(configs)} configurations" + (
            f" and {len(set(found) - configs)} of another" if set(found) - configs else "")
    return None


def recorded_runs_problem(piece: Piece, frame: pd.DataFrame, record: dict) -> str | None:
    """:func:`runs_problem` against the protocol the piece's record names (a piece read from a
    results folder, :func:`featlib.experiments.table2_pieces.read_piece`): its rows must be every
    configuration of that protocol, once. For an objective not registered in this process (a file
    of one's own not loaded) the rows may be either the one configuration of an objective without a
    penalty or the whole grid."""
    if piece.learner == ORACLE:
        return runs_problem(piece, frame, ())
    protocol = record.get("protocol")
    if not isinstance(protocol, dict) or not all(isinstance(protocol.get(k), list)
                                                 for k in ("penalty_weights", "pretrain_epochs")):
        return "its record does not name its protocol's penalty weights and pre-training epochs"
    grid = (protocol["penalty_weights"], protocol["pretrain_epochs"])
    if piece.objective in OBJECTIVES:
        return runs_problem(piece, frame, configurations(piece.objective, *grid))
    problems = [runs_problem(piece, frame, configs) for configs in ([(0.0, 0)], list(itertools.product(*grid)))]
    return None if None in problems else problems[-1]


def make_protocol(preset: str = DEFAULT_PRESET, **overrides) -> CMNISTProtocol:
    """The protocol of ``preset`` (a name of :data:`~.cmnist_presets.PROTOCOL_PRESETS`) with
    ``overrides`` on top."""
    return CMNISTProtocol(**(PROTOCOL_PRESETS.get(preset).values | overrides))


@dataclass
class ColoredMNISTExperiment:
    """Runs a :class:`CMNISTProtocol`; results are cached in ``cache_dir`` (None: in memory only)."""

    protocol: CMNISTProtocol
    cache_dir: str | Path | None = None
    device: torch.device | None = None
    stacked: bool = True
    progress: bool = True
    mnist_source: str = "auto"
    #: Fields every piece this experiment computes records (``command``, ``commit``, ``preset``
    #: of the run that asked for it; the commit is read once when absent).
    origin: dict = field(default_factory=dict)
    _data: dict = field(default_factory=dict, repr=False)
    _features: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        check_mnist_source(self.mnist_source)
        self.device = self.device or get_device()
        # the protocol checked featlib's device; the experiment runs on its own
        check_fits_in_memory(f"the protocol's largest stack (hidden_dim={self.protocol.hidden_dim}, "
                             f"n_train={self.protocol.n_train})", self.protocol.memory_estimate(), self.device)
        self.cache_dir = check_writable("cache_dir", self.cache_dir) if self.cache_dir is not None else None
        #: The cache's pieces (Table 2's units of every protocol run with this cache, by key).
        self.pieces = PieceStore(self.cache_dir, keyed=True) if self.cache_dir is not None else None
        #: How many pieces this experiment trained (the others it returned were read from the cache):
        #: what a wall time measured around :meth:`run` is the cost of.
        self.pieces_trained = 0

    # -- data and features ---------------------------------------------------------------
    def data(self, seed: int, oracle: bool = False):
        key = (seed, oracle)
        if key not in self._data:
            p = self.protocol
            self._data[key] = make_colored_mnist(
                p.dataset, seed, oracle=oracle, n_train=p.n_train, n_test=p.n_test, n_val=p.n_val,
                source=self.mnist_source,
            ).to(self.device)
        return self._data[key]

    def _path(self, *parts: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir.joinpath(self.protocol.dataset, *parts)

    def _meta(self, key: str, seed: int, **extra) -> dict:
        """What a piece records about what made it (:func:`featlib.store.files.cached_meta`)."""
        return cached_meta(key, seed, device=self.device.type, **extra)

    def features(self, learner: str, seed: int) -> LearnedFeatures:
        """The feature learner ``learner`` run on seed ``seed`` (loaded from the cache when there)."""
        check_choice("learner", learner, FEATURE_LEARNERS.table_order())
        key = (learner, seed)
        if key in self._features:
            return self._features[key]
        feature_key = self.protocol.key(CMNISTProtocol.FEATURE_FIELDS, **self.protocol.learner_extra(learner))
        path = self._path("features", f"{learner}-seed{seed}-{feature_key}.pt")
        expect = {"key": feature_key, "seed": seed, "learner": learner}

        def load(path: Path) -> LearnedFeatures:
            saved = load_torch(path, keys=("state", "rounds", "epochs"), map_location=self.device, expect=expect)
            model = ColoredMNISTMLP(self.protocol.hidden_dim).to(self.device)
            try:
                model.load_state_dict(saved["state"])
            except (RuntimeError, TypeError, AttributeError, KeyError) as err:
                raise CorruptFileError(path, f"its network does not load into the protocol's MLP ({err})") from None
            if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
                raise CorruptFileError(path, "its network holds NaN or infinite weights (made by a run that diverged)")
            try:
                rounds = pd.DataFrame(saved["rounds"]).rename(columns=ROW_ALIASES)  # a piece saved under old names
            except (ValueError, TypeError) as err:
                raise CorruptFileError(path, f"its 'rounds' entry is not a table ({err})") from None
            if not isinstance(saved["epochs"], int) or isinstance(saved["epochs"], bool):
                raise CorruptFileError(path, f"its 'epochs' entry is a {type(saved['epochs']).__name__}")
            return LearnedFeatures(learner, model, rounds, saved["epochs"])

        def learn() -> LearnedFeatures:
            torch.manual_seed(seed)
            return FEATURE_LEARNERS.get(learner)(self.data(seed), seed, progress=self.progress,
                                              **self.protocol.learner_options(learner))

        def save(path: Path, learned: LearnedFeatures) -> None:
            save_torch(path, {"state": learned.model.state_dict(), "rounds": learned.rounds.to_dict("list"),
                              "epochs": learned.epochs}, meta=self._meta(feature_key, seed, learner=learner))

        learned = cached(path, load, learn, save, what="cached features")
        self._features[key] = learned
        return learned

    def rounds(self, learner: str) -> pd.DataFrame:
        """Per-round histories of a feature learner over all seeds (Table 7 for iFeAT)."""
        frames = [self.features(learner, s).rounds.assign(seed=s) for s in self.protocol.seeds]
        return pd.concat(frames, ignore_index=True).assign(dataset=self.protocol.dataset, learner=learner)

    # -- the OOD stage -------------------------------------------------------------------
    def _rows(self, final: dict, learner_of_group, seed_of_group, configs, objective) -> pd.DataFrame:
        """One row per run from the final metrics, arrays of shape (groups, configurations)."""
        rows = []
        for g, (learner, seed) in enumerate(zip(learner_of_group, seed_of_group)):
            for c, (weight, pretrain) in enumerate(configs):
                rows.append({"dataset": self.protocol.dataset, "learner": learner, "objective": objective, "seed": seed,
                             "penalty_weight": weight, "pretrain_epochs": pretrain,
                             **{k: (int(v[g, c]) if k == "diverged_step" else float(v[g, c]))
                                for k, v in final.items()}})
        return pd.DataFrame(rows)

    def _frozen_stack(self, objective: str, groups: list[tuple[str, int]], configs) -> pd.DataFrame:
        """Heads on frozen features: every (learner, seed) group x every configuration at once."""
        p = self.protocol
        learned = [self.features(learner, seed) for learner, seed in groups]
        with torch.no_grad():
            feats = torch.stack([lf.model.featurizer(self.data(s).train_x) for lf, (_, s) in zip(learned, groups)])
            test_feats = [torch.stack([lf.model.featurizer(self.data(s).test[e].x) for lf, (_, s) in zip(learned, groups)])
                          for e in range(len(self.data(groups[0][1]).test))]
            val_feats = [torch.stack([lf.model.featurizer(self.data(s).val[e].x) for lf, (_, s) in zip(learned, groups)])
                         for e in range(len(self.data(groups[0][1]).val))]
        stack = StackedHeads([[lf.model.classifier] * len(configs) for lf in learned]).to(self.device)
        data0 = self.data(groups[0][1])
        train = LabelledInputs(feats, torch.stack([self.data(s).train_y for _, s in groups]).unsqueeze(1), data0.env_slices)
        tests = [LabelledInputs(tf, torch.stack([self.data(s).test[e].y for _, s in groups]).unsqueeze(1))
                 for e, tf in enumerate(test_feats)]
        vals = [LabelledInputs(vf, torch.stack([self.data(s).val[e].y for _, s in groups]).unsqueeze(1))
                for e, vf in enumerate(val_feats)]
        weights = torch.tensor([[w for w, _ in configs]] * len(groups))
        warmups = torch.tensor([[k for _, k in configs]] * len(groups))
        history = train_stack(StackRuns.heads(stack, weights, warmups), Environments(train, tests, vals),
                              p.ood_config(objective))
        return self._rows(history.final(), [i for i, _ in groups], [s for _, s in groups], configs, objective)

    def _nf_stack(self, objective: str, seed: int, configs) -> pd.DataFrame:
        """ERM-NF: whole networks from the seed's random initialisation, one per configuration."""
        p = self.protocol
        data = self.data(seed)
        initial = ColoredMNISTMLP(p.hidden_dim, seed=seed)
        stack = StackedMLP([initial] * len(configs)).to(self.device)
        train = LabelledInputs(data.train_x, data.train_y, data.env_slices)
        tests = [LabelledInputs(env.x, env.y) for env in data.test]
        vals = [LabelledInputs(env.x, env.y) for env in data.val]
        weights = torch.tensor([w for w, _ in configs])
        warmups = torch.tensor([k for _, k in configs])
        history = train_stack(StackRuns.networks(stack, weights, warmups), Environments(train, tests, vals),
                              p.ood_config(objective, "nf"))
        final = {k: v[None] for k, v in history.final().items()}  # one group: this seed
        return self._rows(final, ["erm-nf"], [seed], configs, objective)

    # -- pieces: Table 2's units, computed once and kept in the cache's piece store ---------
    def piece_key(self, piece: Piece) -> str:
        """The key of ``piece``'s protocol (:meth:`CMNISTProtocol.piece_key`)."""
        return self.protocol.piece_key(piece)

    def pieces_of(self) -> list[Piece]:
        """Every piece of the protocol (no oracle): per objective, the frozen learners then ERM-NF, seed by seed."""
        p = self.protocol
        frozen = [l for l in p.learners if l != "erm-nf"]
        out = []
        for objective in p.objectives:
            out += [Piece(p.dataset, learner, objective, s) for learner in frozen for s in p.seeds]
            if "erm-nf" in p.learners:
                out += [Piece(p.dataset, "erm-nf", objective, s) for s in p.seeds]
        return out

    def piece_record(self, piece: Piece, seconds: float) -> dict:
        """What a piece records of what made it: its protocol (key and fields), preset, precision,
        OOD path, device, versions, commit and command (:attr:`origin`), and its wall seconds."""
        from ..store.provenance import git_commit
        from .objective_files import objective_file

        p = self.protocol
        if "commit" not in self.origin:
            self.origin["commit"] = git_commit()
        loaded = objective_file(piece.objective)
        oracle = piece.learner == ORACLE  # ERM on grey images: no OOD stage, so no precision or path of one
        return {"protocol_key": self.piece_key(piece), "protocol": p.ood_fields(piece.learner, piece.objective), "preset": preset_of(p),
                "precision": None if oracle else p.precision, "ood_path": None if oracle else p.ood_path,
                "device": describe_device(self.device),
                "torch": torch.__version__, "featlib_version": __version__, "wall_time_s": seconds, **self.origin,
                **({} if loaded is None else {"objective_file": loaded.path.name,
                                              "objective_file_sha256": loaded.sha256})}

    def _check_runs(self, piece: Piece, frame: pd.DataFrame, record: dict | None = None) -> str | None:
        """What is wrong with a piece's runs (every configuration of this protocol once), or None."""
        configs = () if piece.learner == ORACLE else self.protocol.configurations(piece.objective)
        return runs_problem(piece, frame, configs)

    def _read_piece(self, piece: Piece) -> tuple[pd.DataFrame, dict] | None:
        """The piece from the cache, or None (absent; a damaged or incomplete one is reported and
        recomputed, never used)."""
        if self.pieces is None:
            return None
        try:
            return self.pieces.read(piece, self.piece_key(piece), check=self._check_runs)
        except CorruptFileError as err:
            warnings.warn(f"bad cached piece {err}; recomputing it", CacheWarning, stacklevel=3)
            return None

    def _compute(self, piece: Piece) -> pd.DataFrame:
        if piece.learner == ORACLE:
            return self._oracle_row(piece.seed)
        return self.run_piece(piece.objective, "nf" if piece.learner == "erm-nf" else "frozen",
                              ((piece.learner, piece.seed),))

    def _keep(self, piece: Piece, frame: pd.DataFrame, seconds: float) -> tuple[pd.DataFrame, dict]:
        """Record a piece just trained (and write it to the cache, when there is one)."""
        self.pieces_trained += 1
        record = self.piece_record(piece, seconds)
        if self.pieces is not None:
            try:
                record = self.pieces.write(piece, frame, record, self.piece_key(piece))
            except OSError as err:
                raise CacheWriteError(f"{self.pieces.csv(piece, self.piece_key(piece))}: this finished piece cannot "
                                      f"be written ({err.strerror or err}); free space on its file system or choose "
                                      "another --cache-dir, then run again") from None
        return frame, record

    def unit(self, piece: Piece) -> tuple[pd.DataFrame, dict]:
        """A piece of the protocol and its record: from the cache when it is there and sound,
        else computed (under the piece's lock, so that processes sharing the cache compute it
        once) and kept there."""
        found = self._read_piece(piece)
        if found is not None:
            return found
        if self.pieces is None:
            t0 = time.perf_counter()
            frame = self._compute(piece)
            return self._keep(piece, frame, time.perf_counter() - t0)
        with PieceLock(self.pieces.csv(piece, self.piece_key(piece))):
            found = self._read_piece(piece)  # another process may have computed it meanwhile
            if found is not None:
                return found
            t0 = time.perf_counter()
            frame = self._compute(piece)
            return self._keep(piece, frame, time.perf_counter() - t0)

    def piece(self, objective: str, learner: str, seed: int) -> pd.DataFrame:
        """The OOD-stage runs of one (objective, learner, seed), every configuration of the
        protocol: one unit of Table 2 (read from the cache when there, else trained and kept)."""
        check_choice("learner", learner, learner_choices())
        return self.unit(Piece(self.protocol.dataset, learner, objective, seed))[0]

    def run_piece(self, objective: str, kind: str, groups) -> pd.DataFrame:
        configs = self.protocol.configurations(objective)
        if kind == "nf":
            seed = groups[0][1]
            if self.stacked:
                return self._nf_stack(objective, seed, configs)
            return pd.concat([self._nf_stack(objective, seed, [c]) for c in configs], ignore_index=True)
        if self.stacked:
            return self._frozen_stack(objective, list(groups), configs)
        return pd.concat([self._frozen_stack(objective, [g], [c]) for g in groups for c in configs], ignore_index=True)

    @staticmethod
    def _split(frame: pd.DataFrame, group) -> pd.DataFrame:
        learner, seed = group
        return frame[(frame["learner"] == learner) & (frame["seed"] == seed)].reset_index(drop=True)

    def _stack_missing_frozen(self, pieces: list[Piece], done=None) -> dict:
        """Train the missing frozen pieces of each objective as one stack (each piece's wall time
        its share of the stack's). With a cache, those that no other process is computing (their
        locks are taken without waiting) are kept there; without one, the computed pieces are
        returned, by piece. ``done(objective, n)`` is called after each stack with the number of
        pieces it trained (the OOD stage's progress bar)."""
        by_objective: dict[str, list[Piece]] = {}
        for piece in pieces:
            if piece.learner != "erm-nf" and self._read_piece(piece) is None:
                by_objective.setdefault(piece.objective, []).append(piece)
        computed = {}
        for objective, missing in by_objective.items():
            if len(missing) < 2 and self.pieces is not None:  # a lone cached piece is computed by unit() itself
                continue
            locks, todo = [], []
            try:
                for piece in missing:
                    if self.pieces is not None:
                        lock = PieceLock(self.pieces.csv(piece, self.piece_key(piece)))
                        if not lock.acquire(blocking=False):
                            continue  # another process is computing it: unit() waits for it
                        locks.append(lock)
                        if self._read_piece(piece) is not None:  # written meanwhile
                            continue
                    todo.append(piece)
                if not todo:
                    continue
                t0 = time.perf_counter()
                frame = self.run_piece(objective, "frozen", tuple((pc.learner, pc.seed) for pc in todo))
                share = (time.perf_counter() - t0) / len(todo)
                for piece in todo:
                    computed[piece] = self._keep(piece, self._split(frame, (piece.learner, piece.seed)), share)
                if done is not None:
                    done(objective, len(todo))
            finally:
                for lock in locks:
                    lock.release()
        return computed

    def run(self) -> pd.DataFrame:
        """Every OOD-stage run of the protocol, one row each (resumes from the cache; a cached
        piece that is damaged is reported and recomputed)."""
        pieces = self.pieces_of()
        frames = []
        with tqdm(total=len(pieces), desc=f"{self.protocol.dataset} OOD stage", disable=not self.progress) as bar:
            def stacked(objective: str, n: int) -> None:  # a stack of frozen pieces is done: the bar moves
                bar.set_postfix_str(f"{objective} (frozen stack of {n})")
                bar.update(n)

            computed = self._stack_missing_frozen(pieces, done=stacked) if self.stacked else {}
            for piece in pieces:
                if piece in computed:
                    frames.append(computed[piece][0])
                    continue
                bar.set_postfix_str(f"{piece.objective} ({piece.learner})")
                frames.append(self.unit(piece)[0])
                bar.update(1)
        return pd.concat(frames, ignore_index=True)

    def _oracle_row(self, seed: int) -> pd.DataFrame:
        p = self.protocol
        learned = FEATURE_LEARNERS.get("erm")(self.data(seed, oracle=True), seed, **p.learner_options("erm"))
        return pd.DataFrame([{"dataset": p.dataset, "seed": seed,
                              "worst_test_acc": float(learned.rounds["ood_acc"].iloc[0])}])

    def oracle(self) -> pd.DataFrame:
        """The oracle row: the same MLP trained with ERM (the dataset's ERM epochs) where colour
        carries no information, scored on the usual test environments (cached per seed)."""
        return pd.concat([self.oracle_piece(seed) for seed in self.protocol.seeds], ignore_index=True)

    def oracle_piece(self, seed: int) -> pd.DataFrame:
        """The oracle row of one seed (cached)."""
        return self.unit(Piece(self.protocol.dataset, ORACLE, "erm", seed))[0]


# -- summaries -------------------------------------------------------------------------------
def diverged(results: pd.DataFrame) -> pd.Series:
    """Per run: whether it diverged (``diverged_step`` >= 0; runs made before featlib 0.5 did not
    record it, and a non-finite accuracy counts too)."""
    steps = results["diverged_step"] if "diverged_step" in results else pd.Series(-1, index=results.index)
    return steps.fillna(-1).ge(0) | results["worst_test_acc"].isna()


def select_best(results: pd.DataFrame, score: str = "worst_test_acc") -> pd.DataFrame:
    """Per (dataset, learner, objective): the configuration with the best mean ``score`` over
    seeds, with the mean and std (numpy's, ddof=0, as the reference) of the worst-test accuracy
    over seeds there. ``score="worst_test_acc"`` is Table 2's rule (test-domain, "oracle"
    selection: the paper's numbers imply it, protocol.md section 2); ``"val_acc"`` is DomainBed's
    training-domain validation (the validation environments, coloured as the training ones).

    A configuration in which any seed diverged is never selected (its runs are scored as missing),
    and ``n_diverged`` counts such configurations per cell; a cell whose every configuration
    diverged has no value (NaN)."""
    keys = ["dataset", "learner", "objective"]
    runs = results[keys + ["penalty_weight", "pretrain_epochs", "seed"]]
    if runs.duplicated().any():
        raise ValueError(f"results hold {int(runs.duplicated().sum())} runs twice (same dataset, learner, objective, "
                         "configuration and seed): results of overlapping runs were concatenated")
    if score not in results:
        raise ValueError(f"the runs hold no {score!r} column to select by (runs made before featlib 0.5 have no "
                         "val_acc: select them by worst_test_acc)")
    config = keys + ["penalty_weight", "pretrain_epochs"]
    frame = results.assign(_diverged=diverged(results), _score=results[score])
    grouped = frame.groupby(config)
    stats = grouped.agg(mean=("worst_test_acc", "mean"), std=("worst_test_acc", lambda v: float(np.std(v))),
                        n_seeds=("worst_test_acc", "size"), _any_diverged=("_diverged", "any"),
                        _selection=("_score", "mean")).reset_index()
    stats.loc[stats["_any_diverged"], ["mean", "std", "_selection"]] = np.nan
    n_diverged = stats.groupby(keys)["_any_diverged"].sum().rename("n_diverged")
    rows = []
    for _, cell in stats.groupby(keys, sort=True):
        valid = cell["_selection"].dropna()
        rows.append(cell.loc[valid.idxmax()] if len(valid) else cell.iloc[0].copy().where(
            ~cell.columns.isin(["penalty_weight", "pretrain_epochs", "mean", "std"]), np.nan))
    if not rows:
        return pd.DataFrame(columns=[*config, "mean", "std", "n_seeds", "n_diverged"])
    best = pd.DataFrame(rows).reset_index(drop=True).drop(columns=["_any_diverged", "_selection"])
    best = best.merge(n_diverged.reset_index(), on=keys, how="left")
    best["n_seeds"] = best["n_seeds"].astype(int)
    best["n_diverged"] = best["n_diverged"].astype(int)
    for column in ("penalty_weight", "pretrain_epochs"):  # as the runs had them, where every cell has one
        if best[column].notna().all():
            best[column] = best[column].astype(results[column].dtype)
    if score != "worst_test_acc":
        best["selected_by"] = score
    return best


def paper_distance(best: pd.DataFrame) -> pd.DataFrame:
    """Each column of Table 2 set against the paper's, in the paper's standard deviations: per
    (dataset, learner) of :func:`select_best`'s cells, the mean over the penalised objectives of
    ``z = (ours - paper) / paper std`` (``z``), with the number of cells behind it (``cells``) and the
    smallest number of seeds among them (``min_seeds``). Cells the paper does not print, cells
    whose every configuration diverged, and the paper's zero-std cells (-025 CLOvE on ERM's
    features: 65.78 ± 0.00) are left out; on frozen features a row that repeats another
    (:data:`FROZEN_REPEATS`: IB-IRM's, which is IRMv1's) counts once. Issue 33's test of a
    protocol: each baseline column's mean z at least -1 (chapter 04, ``results/cmnist-gaps``)."""
    from .paper_values import TABLE2

    rows = []
    for (dataset, learner), cells in best[best["objective"] != "erm"].groupby(["dataset", "learner"], sort=False):
        if learner != "erm-nf":
            cells = cells[cells["objective"].isin(distinct_objectives(cells["objective"].unique()))]
        z, seeds = [], []
        for r in cells.itertuples():
            paper = TABLE2.get(dataset, {}).get(r.objective, {}).get(learner)
            if paper is None or not paper[1] > 0 or pd.isna(r.mean):
                continue
            z.append((100 * r.mean - paper[0]) / paper[1])
            seeds.append(int(r.n_seeds))
        rows.append({"dataset": dataset, "learner": learner, "z": float(np.mean(z)) if z else np.nan,
                     "cells": len(z), "min_seeds": min(seeds) if seeds else 0})
    return pd.DataFrame(rows, columns=["dataset", "learner", "z", "cells", "min_seeds"])


def format_mean_std(mean: float, std: float) -> str:
    return f"{100 * mean:.2f} ± {100 * std:.2f}"
