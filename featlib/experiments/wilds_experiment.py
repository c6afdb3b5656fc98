"""The WILDS protocol of Table 3 (Sec. 6, Appendix F.2), resumable piece by piece.

For one dataset and every (feature learner, seed):

1. **feature learning** (:mod:`featlib.feature_learning.minibatch_loop`): ERM, Bonsai, FeAT or
   iFeAT with Table 12's steps, rounds and retain penalty on the dataset's backbone, with a
   checkpoint file that a killed run resumes from;
2. **embeddings** of the train / OOD validation / test splits by the frozen featurizer;
3. **the OOD stage** (:mod:`featlib.training.wilds_ood_stage`): ERM, GroupDRO, IRMv1, V-REx and
   IRMX heads on the embeddings, the penalty sweep trained as one stack, scored per epoch with
   the official metric (``dataset.eval``) on OOD validation and test;
4. **DFR / DFR-s** (:mod:`featlib.evaluation.dfr`): L1 logistic regression on the embeddings,
   on the OOD validation set (CivilComments, FMoW), or on the authors' train + test split
   (Camelyon17) or validation + test split (iWildCam, Amazon), labelled as theirs.

Every finished piece is a file under ``cache_dir/<dataset>-<protocol key>/``; a second call
recomputes nothing that is there. The key holds what changes the learned features (not the
run-control options ``dfr`` and ``checkpoint_every``); the OOD stage's pieces also carry the key
of its own options (penalty weights, epochs) in their names. Pieces are verified when read back
(a damaged one is reported and recomputed) and each is computed by one process at a time
(:mod:`featlib.store.files`). ``epoch_scale`` multiplies Table 12's step counts (1.0 is the
paper's), so small CPU runs keep the protocol's shape.
"""
from __future__ import annotations

import dataclasses
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import __version__
from ..store.keys import key as store_key
from ..store.files import CacheWarning, CorruptFileError, PieceLock, cached, expect_keys, load_torch, cached_meta, read_verified_csv, save_torch, write_verified_csv
from ..data.wilds_data import WILDS_DATASETS, WildsData, WildsSpec, load_wilds, require_local
from ..device import get_device
from ..hparams import PAPER_LEARNERS
from ..evaluation.dfr import dfr_fit_predict, train_test_split_for_dfr
from ..feature_learning.feat_rounds import DEFAULT_HEAD_COMBINATION, HEAD_COMBINATIONS
from ..feature_learning.termination import WILDS_DEFAULT_TERMINATION, termination_rule
from ..feature_learning import FEATURE_LEARNERS, Learned
from ..feature_learning.minibatch_loop import MinibatchLoop, WildsTrainConfig, embed, saved_learner
from ..models.wilds_backbones import BACKBONES, WildsModel, make_backbone
from ..training.minibatch import Checkpoint
from ..training.wilds_ood_stage import (
    PENALTY_SWEEP, WILDS_OBJECTIVES, WildsOODConfig, best_epochs, select, stacked_logits, train_heads,
)
from ..validation import (
    check_bool, check_choice, check_int, check_positive, check_seed, check_sequence, check_writable,
)

DFR_SPLITS = {"ood_val": ("val", None), "train_test": ("train", "test"), "val_test": ("val", "test")}


@dataclass(frozen=True)
class WildsProtocol:
    """What one Table 3 column needs; defaults are the paper's (Tables 10 and 12)."""

    dataset: str
    #: Table 3's initialisations (its FeAT rows are iFeAT's, Sec. 5); any registered learner may run
    learners: tuple = PAPER_LEARNERS
    objectives: tuple = WILDS_OBJECTIVES
    seeds: tuple | None = None  # default: range(spec.n_seeds)
    penalty_weights: tuple = PENALTY_SWEEP
    backbone: str | None = None  # default: spec.backbone
    pretrained: bool | str = "auto"
    #: multiplies Table 12's steps (the name ColoredMNIST gives the multiplier of Table 6's epochs)
    epoch_scale: float = 1.0
    rounds: int | None = None  # default: Table 12
    batch_size: int | None = None
    lr: float | None = None  # default: Table 10's (small from-scratch CPU runs need a larger one)
    ood_epochs: int | None = None  # default: Table 10's epochs
    resolution: int | None = None  # image side; default: the WILDS transform's
    max_examples: int | None = None  # cap per split (quick runs)
    max_token_length: int | None = None
    #: FeAT's stopping rule (featlib.feature_learning.termination): "never" runs Table 12's rounds as
    #: the paper did; "paper" (ColoredMNIST's 130% rule) can be chosen by name.
    termination_rule: str = WILDS_DEFAULT_TERMINATION
    head_combination: str = DEFAULT_HEAD_COMBINATION  # FeAT's combined head: "average" or "sum"
    dfr: bool = True
    checkpoint_every: int = 500

    def __post_init__(self) -> None:
        spec = WILDS_DATASETS.get(self.dataset)
        check_sequence("learners", self.learners, unique=True)
        for m in self.learners:
            check_choice("learners", m, FEATURE_LEARNERS.table_order())
        check_sequence("objectives", self.objectives, unique=True)
        for o in self.objectives:
            check_choice("objectives", o, WILDS_OBJECTIVES)
        if self.seeds is not None:
            check_sequence("seeds", self.seeds, unique=True)
            for s in self.seeds:
                check_seed("seeds", s)
        check_sequence("penalty_weights", self.penalty_weights, unique=True)
        for w in self.penalty_weights:
            check_positive("penalty_weights", w)
        for name in ("learners", "objectives", "seeds", "penalty_weights"):  # lists from a notebook: frozen as tuples
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.backbone is not None:
            BACKBONES.get(self.backbone)
        if self.pretrained not in (True, False, "auto"):
            raise ValueError(f"pretrained must be True, False or 'auto'; got {self.pretrained!r}")
        check_positive("epoch_scale", self.epoch_scale)
        if self.lr is not None:
            check_positive("lr", self.lr)
        for name in ("rounds", "batch_size", "ood_epochs", "resolution", "max_examples", "max_token_length"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=1)
        termination_rule(self.termination_rule)
        HEAD_COMBINATIONS.get(self.head_combination)
        check_bool("dfr", self.dfr)
        check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        del spec

    @property
    def spec(self) -> WildsSpec:
        return WILDS_DATASETS.get(self.dataset)

    @property
    def seed_list(self) -> tuple:
        return tuple(self.seeds) if self.seeds is not None else tuple(range(self.spec.n_seeds))

    def train_config(self) -> WildsTrainConfig:
        spec = self.spec
        rounds = self.rounds or spec.fl_rounds
        steps = max(1, round(spec.fl_steps * self.epoch_scale))
        return WildsTrainConfig(
            steps_per_round=max(1, steps // rounds), rounds=rounds,
            erm_steps=max(1, round(spec.erm_steps * self.epoch_scale)),
            batch_size=self.batch_size or spec.batch_size, domains_per_batch=spec.domains_per_batch,
            lr=self.lr or spec.lr, weight_decay=spec.weight_decay, optimizer=spec.optimizer, scheduler=spec.scheduler,
            retain_weight=spec.retain_penalty, termination_rule=self.termination_rule,
            head_combination=self.head_combination, checkpoint_every=self.checkpoint_every,
        )

    def ood_config(self, objective: str) -> WildsOODConfig:
        spec = self.spec
        return WildsOODConfig(
            objective=objective, epochs=self.ood_epochs or spec.epochs,
            batch_size=self.batch_size or spec.batch_size, domains_per_batch=spec.domains_per_batch,
            lr=self.lr or spec.lr, weight_decay=spec.weight_decay, optimizer=spec.optimizer,
            penalty_weights=tuple(self.penalty_weights),
        )

    #: Fields that no key holds: each piece names its learner, seed and objective itself, and
    #: ``dfr`` and ``checkpoint_every`` only say what to run and how often to save, not what a
    #: piece holds (changing either once restarted every run from scratch).
    PER_PIECE_FIELDS = ("learners", "objectives", "seeds")
    RUN_CONTROL_FIELDS = ("dfr", "checkpoint_every")
    #: Fields that change the OOD stage only (not the learned features, embeddings or DFR).
    OOD_FIELDS = ("penalty_weights", "ood_epochs")

    def _hash(self, fields: dict) -> str:
        return store_key(json.loads(json.dumps({**fields, "featlib": __version__}, default=str)))

    def key(self) -> str:
        """A short hash, with featlib's version, of everything that changes the learned features,
        their embeddings and DFR: the cache folder's name."""
        skip = self.PER_PIECE_FIELDS + self.RUN_CONTROL_FIELDS + self.OOD_FIELDS
        return self._hash({k: v for k, v in dataclasses.asdict(self).items() if k not in skip})

    def ood_key(self) -> str:
        """A short hash of what changes the OOD stage on top of :meth:`key` (in its pieces' names)."""
        return self._hash({k: getattr(self, k) for k in self.OOD_FIELDS})


class VerifiedCheckpoint(Checkpoint):
    """A feature-learning checkpoint written with its size, checksum and record (config key, seed,
    learner) (:func:`featlib.store.files.save_torch`); one that is damaged, another run's, or not a
    checkpoint dict is reported by path and the run starts again rather than resuming from it."""

    def __init__(self, path, every: int = 500, meta: dict | None = None):
        super().__init__(path, every=every)
        self.meta = meta or {}

    def load(self) -> dict | None:
        if not self.path.exists():
            return None
        expect = {k: self.meta[k] for k in ("key", "seed", "learner") if k in self.meta}
        try:
            state = load_torch(self.path, expect=expect)
            if not isinstance(state, dict):
                raise CorruptFileError(self.path, f"it holds a {type(state).__name__}, not a checkpoint")
            if "learner" in self.meta and saved_learner(state) != self.meta["learner"]:
                raise CorruptFileError(self.path, f"it is not a checkpoint of {self.meta['learner']!r} (its learner: "
                                                  f"{saved_learner(state)!r})")
        except CorruptFileError as err:
            warnings.warn(f"bad checkpoint {err}; starting this run again", CacheWarning, stacklevel=2)
            return None
        return state

    def save(self, state: dict) -> None:
        save_torch(self.path, state, self.meta)


def protocols_for(datasets, learners, overrides: dict) -> dict[str, WildsProtocol]:
    """A :class:`WildsProtocol` per dataset of ``datasets`` with ``learners``, each with the fields
    ``overrides[dataset]`` sets (chapter 06's ``wilds_overrides``). ValueError, naming the key,
    for an override of a name that is no WILDS dataset (a misspelt name would otherwise be dropped
    and the dataset run at full scale) or an unknown protocol field; an override of a dataset that
    is not run now (a profile's values for a dataset the reader may add) is kept unused."""
    names = list(check_sequence("wilds_datasets", datasets, min_length=0, unique=True))
    if not isinstance(overrides, dict) or not all(isinstance(v, dict) for v in overrides.values()):
        raise ValueError(f"wilds_overrides must be a dict of dataset -> protocol fields; got {overrides!r}")
    # A key that names no WILDS dataset is a misspelling (it would be dropped and the dataset run
    # at full scale); an override of a known dataset that is not run now is kept for when it is.
    stray = [k for k in overrides if k not in WILDS_DATASETS.names()]
    if stray:
        raise ValueError(f"wilds_overrides names {', '.join(map(repr, stray))}, which is not a WILDS dataset "
                         f"(wilds_datasets is {names}); use the datasets' names: {', '.join(WILDS_DATASETS.names())}")
    fields = {f.name for f in dataclasses.fields(WildsProtocol)} - {"dataset", "learners"}
    for name, values in overrides.items():
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ValueError(f"wilds_overrides[{name!r}] sets unknown field(s) {', '.join(unknown)}; "
                             f"WildsProtocol's fields are: {', '.join(sorted(fields))}")
    return {name: WildsProtocol(dataset=name, learners=tuple(learners), **overrides.get(name, {})) for name in names}


@dataclass
class WildsResults:
    ood: pd.DataFrame  # one row per (learner, seed, objective, penalty, epoch)
    dfr: pd.DataFrame  # one row per (learner, seed, target)
    rounds: pd.DataFrame  # feature-learning history, one row per (learner, seed, round)
    backbone: str = ""  # the backbone's description (pretrained or not)
    notes: list = field(default_factory=list)

    def best(self) -> pd.DataFrame:
        return best_epochs(self.ood, ["learner", "objective", "seed"])

    def table(self) -> pd.DataFrame:
        """Table 3's OOD-objective rows: per (learner, objective) the selected penalty weight and
        test score (mean, std over seeds)."""
        return select(self.best(), ["learner", "objective"])


class WildsExperiment:
    """Runs (or resumes) a :class:`WildsProtocol` with its pieces cached under ``cache_dir``."""

    def __init__(self, protocol: WildsProtocol, root, cache_dir, *, download: bool = False,
                 device: torch.device | None = None, progress: bool = False):
        self.protocol = protocol
        self.root = root
        self.download = check_bool("download", download)
        self.device = device or get_device()
        self.progress = progress
        self._cache_root = check_writable("cache_dir", cache_dir)
        self._data: WildsData | None = None
        self._backbone_description = ""
        self._text_transform = None
        #: Pieces (embeddings, OOD-stage histories, DFR tables) this object computed rather than read
        #: from ``cache_dir``: 0 after a run that found every piece cached (chapter 05 says so).
        self.pieces_trained = 0

    def _counted(self, compute):
        """``compute``, counted in :attr:`pieces_trained` when it runs (a cache miss)."""
        def run():
            self.pieces_trained += 1
            return compute()
        return run

    # ------------------------------------------------------------------ data and models
    @property
    def dir(self) -> Path:
        """This protocol's cache folder, ``<cache_dir>/<dataset>-<key>``; the key holds the
        backbone's weights as loaded (``pretrained="auto"`` is resolved first, by loading it)."""
        if self.protocol.pretrained == "auto":
            self.data  # noqa: B018  (resolves "auto")
        return self._cache_root / f"{self.protocol.dataset}-{self.protocol.key()}"

    @property
    def backbone_name(self) -> str:
        return self.protocol.backbone or self.protocol.spec.backbone

    def _backbone(self, seed: int):
        spec = self.protocol.spec
        return make_backbone(self.backbone_name, pretrained=self.protocol.pretrained, seed=seed,
                             max_token_length=self.protocol.max_token_length or spec.max_token_length or 300)

    @property
    def data(self) -> WildsData:
        if self._data is None:
            spec = self.protocol.spec
            if not self.download:
                require_local(spec.name, self.root)  # fail before building a backbone
            backbone = self._backbone(0)
            if self.protocol.pretrained == "auto":  # what it loaded enters the keys, not "auto"
                self.protocol = dataclasses.replace(self.protocol, pretrained=bool(backbone.pretrained))
            self._backbone_description = backbone.description
            self._text_transform = backbone.text_transform
            side = self.protocol.resolution
            self._data = load_wilds(
                spec.name, self.root, download=self.download,
                transform=backbone.text_transform if spec.modality == "text" else None,
                resolution=None if side is None else (side, side), max_examples=self.protocol.max_examples,
            )
        return self._data

    @property
    def backbone_description(self) -> str:
        self.data  # noqa: B018  (loads the backbone once)
        return self._backbone_description

    @property
    def text_transform(self):
        """The text backbone's string -> (ids, mask) transform the data was loaded with (its
        ``tokenizer`` decodes the ids); None for image datasets."""
        self.data  # noqa: B018  (loads the backbone once)
        return self._text_transform

    def new_model(self, seed: int) -> WildsModel:
        return WildsModel(self._backbone(seed), self.data.n_classes, seed=seed)

    def _path(self, name: str) -> Path:
        return self.dir / name

    # ------------------------------------------------------------------ pieces
    def _meta(self, seed: int, **extra) -> dict:
        """What a piece records about what made it (:func:`featlib.store.files.cached_meta`)."""
        return cached_meta(self.protocol.key(), seed, device=self.device.type, **extra)

    def checkpoint(self, learner: str, seed: int) -> Checkpoint:
        return VerifiedCheckpoint(self._path(f"learn-{learner}-s{seed}.pt"), every=self.protocol.checkpoint_every,
                                  meta=self._meta(seed, learner=learner))

    def learn(self, learner: str, seed: int) -> Learned:
        """Feature learning (resumes from its checkpoint; returns at once when finished). One
        process at a time learns a (learner, seed): another waits, then resumes from the finished
        checkpoint."""
        check_choice("learner", learner, FEATURE_LEARNERS.table_order())
        checkpoint = self.checkpoint(learner, seed)
        loop = MinibatchLoop(data=self.data, new_model=self.new_model, config=self.protocol.train_config(), seed=seed,
                             checkpoint=checkpoint, device=self.device, progress=self.progress)
        with PieceLock(checkpoint.path):
            return FEATURE_LEARNERS.get(learner).on(loop, **loop.config.learner_options(learner))

    def _read_embeddings(self, path: Path, learner: str, seed: int) -> dict[str, torch.Tensor]:
        splits = self.data.splits
        emb = load_torch(path, keys=[*splits, "head"], expect={"key": self.protocol.key(), "seed": seed, "learner": learner})
        for split, subset in splits.items():
            if not torch.is_tensor(emb[split]) or emb[split].shape[0] != len(subset):
                raise CorruptFileError(path, f"its {split!r} embeddings do not hold one row per example of the split "
                                             f"({len(subset)})")
        return emb

    def embeddings(self, learner: str, seed: int) -> dict[str, torch.Tensor]:
        """The frozen featurizer's embeddings of every split, and the learned head."""
        def compute() -> dict[str, torch.Tensor]:
            learned = self.learn(learner, seed)
            cfg = self.protocol.train_config()
            out = {split: embed(learned.model.featurizer, subset, self.device, cfg.eval_batch_size, cfg.num_workers,
                                desc=f"embed {split}" if self.progress else None)
                   for split, subset in self.data.splits.items()}
            out["head"] = learned.model.classifier.cpu()
            return out

        return cached(self._path(f"embed-{learner}-s{seed}.pt"), lambda path: self._read_embeddings(path, learner, seed),
                      self._counted(compute), lambda path, emb: save_torch(path, emb, self._meta(seed, learner=learner)),
                      what="cached embeddings")

    def _score_heads(self, emb: dict[str, torch.Tensor]):
        splits = [s for s in ("val", "test") if s in emb]
        feats = {s: emb[s].to(self.device) for s in splits}

        def score(W, b):
            out = {}
            for s in splits:
                preds = stacked_logits(feats[s], W, b).argmax(-1).cpu()
                out[s] = np.array([self.data.score(s, p) for p in preds])
            return out
        return score

    def ood(self, learner: str, seed: int, objective: str) -> pd.DataFrame:
        """The OOD stage's history for one (learner, seed, objective): all penalty weights."""
        config = self.protocol.ood_config(objective)
        expected = [(learner, seed, objective, float(np.float32(w)), e + 1)
                    for e in range(config.epochs) for w in config.weights]
        check = expect_keys(["learner", "seed", "objective", "penalty_weight", "epoch"], expected, allow_nan=True)

        def compute() -> pd.DataFrame:
            emb = self.embeddings(learner, seed)
            history = train_heads(
                emb["train"].to(self.device), self.data.labels("train"), self.data.groups("train"),
                self.data.grouper.n_groups, emb["head"], config, self._score_heads(emb),
                seed=seed, progress=f"{learner} s{seed} {objective}" if self.progress else False,
            )
            history.insert(0, "seed", seed)
            history.insert(0, "learner", learner)
            return history

        meta = self._meta(seed, learner=learner, objective=objective, ood_key=self.protocol.ood_key())
        expect = {k: meta[k] for k in ("key", "seed", "learner", "objective", "ood_key")}
        return cached(self._path(f"ood-{learner}-s{seed}-{objective}-{self.protocol.ood_key()}.csv"),
                      lambda path: read_verified_csv(path, check, expect=expect), self._counted(compute),
                      lambda path, frame: write_verified_csv(path, frame, meta), what="cached OOD-stage piece")

    def dfr(self, learner: str, seed: int) -> pd.DataFrame:
        """DFR (target: the label) and DFR-s (target: the spurious attribute, when the dataset
        has one) on the embeddings, with the dataset's protocol (Appendix F.2)."""
        spec = self.protocol.spec
        targets = [t for t in ("label", "spurious") if t == "label" or spec.spurious_field is not None]
        check = expect_keys(["learner", "seed", "target"], [(learner, seed, t) for t in targets], allow_nan=True)

        def compute() -> pd.DataFrame:
            emb = self.embeddings(learner, seed)
            table = pd.DataFrame([run_dfr(self.data, emb, spec, target, seed) for target in targets])
            table.insert(0, "seed", seed)
            table.insert(0, "learner", learner)
            return table

        meta = self._meta(seed, learner=learner)

        def read(path: Path) -> pd.DataFrame:
            table = read_verified_csv(path, check, expect={"key": meta["key"], "seed": seed, "learner": learner})
            if "failure" not in table.columns:
                raise CorruptFileError(path, "it lacks the column failure")
            return table.assign(failure=table["failure"].fillna("").astype(str))  # "" reads back as NaN

        return cached(self._path(f"dfr-{learner}-s{seed}.csv"), read, self._counted(compute),
                      lambda path, table: write_verified_csv(path, table, meta), what="cached DFR piece")

    def rounds(self, learner: str, seed: int) -> pd.DataFrame:
        table = self.learn(learner, seed).rounds.copy()
        table.insert(0, "seed", seed)
        table.insert(0, "learner", learner)
        return table

    def run(self) -> WildsResults:
        """Every piece of the protocol (cached ones are read back)."""
        p = self.protocol
        ood, dfr, rounds = [], [], []
        for learner in p.learners:
            for seed in p.seed_list:
                rounds.append(self.rounds(learner, seed))
                for objective in p.objectives:
                    ood.append(self.ood(learner, seed, objective))
                if p.dfr and p.spec.dfr_protocol != "none":
                    dfr.append(self.dfr(learner, seed))
        notes = []
        if p.spec.dfr_protocol in ("train_test", "val_test"):
            fit, scored = DFR_SPLITS[p.spec.dfr_protocol]
            notes.append(f"DFR on {p.spec.title} follows the authors' protocol: the logistic regression is fitted on a "
                         f"random half of {fit} + {scored} and scored on the {scored} examples it did not see.")
        return WildsResults(pd.concat(ood, ignore_index=True), pd.concat(dfr, ignore_index=True) if dfr else
                            pd.DataFrame(), pd.concat(rounds, ignore_index=True), self.backbone_description, notes)


def _score_subset(data: WildsData, split: str, index: np.ndarray, pred: np.ndarray) -> float:
    """The official metric on some examples of a split (the authors' split-based DFR protocols)."""
    index = torch.as_tensor(index, dtype=torch.long)
    results, _ = data.dataset.eval(torch.as_tensor(pred).long(), data.labels(split)[index], data.metadata(split)[index])
    return float(results[data.spec.metric])


def _dfr_arrays(data: WildsData, emb, split: str, target: str, spec: WildsSpec):
    y = data.labels(split).numpy()
    attr = data.attribute(split, spec.spurious_field).numpy() if spec.spurious_field else None
    fit_y = y if target == "label" else attr
    domain = data.groups(split).numpy() if target == "label" else attr
    groups = domain * data.n_classes + y  # balance domains (or attribute values) and classes
    return emb[split].numpy(), fit_y, groups, y, attr


def run_dfr(data: WildsData, emb: dict, spec: WildsSpec, target: str, seed: int) -> dict:
    """One DFR (``target="label"``) or DFR-s (``"spurious"``) fit; returns its row.

    DFR is scored with the official metric on the test examples; DFR-s, whose target is the
    spurious attribute, by its worst-group accuracy (groups: attribute x label) at predicting
    that attribute on them (higher = the features carry more of the spurious attribute).
    A fit that cannot be made (a balanced sample lacking a class, on tiny data) gives a row with
    NaN scores and the reason in ``failure``."""
    fit_split, scored_split = DFR_SPLITS[spec.dfr_protocol]
    fx, fy, fg, _, _ = _dfr_arrays(data, emb, fit_split, target, spec)
    tx, ty, tg, t_label, t_attr = _dfr_arrays(data, emb, scored_split or "test", target, spec)
    if scored_split is None:  # fit on the OOD validation set, score on the whole test split
        eval_index = np.arange(len(tx))
        fit_x, fit_y, fit_g = fx, fy, fg
    else:  # the authors' protocol: a random half of fit split + test
        fit_a, fit_b, eval_index = train_test_split_for_dfr(len(fx), len(tx), seed)
        fit_x = np.concatenate([fx[fit_a], tx[fit_b]])
        fit_y = np.concatenate([fy[fit_a], ty[fit_b]])
        fit_g = np.concatenate([fg[fit_a], tg[fit_b]])
    row = {"target": target, "protocol": spec.dfr_protocol, "n_fit": len(fit_y), "n_scored": len(eval_index)}
    try:
        result = dfr_fit_predict(fit_x, fit_y, fit_g, tx[eval_index], seed=seed)
    except ValueError as err:  # e.g. a group-balanced sample without one class (tiny fit sets)
        return {**row, "C": float("nan"), "test_metric": float("nan"), "failure": str(err)}
    if target == "label":
        score = _score_subset(data, "test", eval_index, result.predictions)
    else:
        correct = result.predictions == ty[eval_index]
        groups = tg[eval_index]
        score = min(correct[groups == g].mean() for g in np.unique(groups))
    return {**row, "C": result.C, "test_metric": float(score), "failure": ""}
