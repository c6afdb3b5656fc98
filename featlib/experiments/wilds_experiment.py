"""The WILDS protocol of Table 3 (Sec. 6, Appendix F.2), resumable piece by piece.

For one dataset and every (feature learner, seed):

1. **feature learning** (:mod:`featlib.feature_learning.wilds_learners`): ERM, Bonsai, FeAT or
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
recomputes nothing that is there. ``scale`` multiplies Table 12's step counts (1.0 is the
paper's), so small CPU runs keep the protocol's shape.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import __version__
from ..atomic import atomic_write
from ..data.wilds_data import WILDS_DATASETS, WildsData, WildsSpec, load_wilds, require_local
from ..device import get_device
from ..evaluation.dfr import dfr_fit_predict, train_test_split_for_dfr
from ..feature_learning.termination import DEFAULT_TERMINATION, termination_rule
from ..feature_learning.wilds_learners import (
    WILDS_LEARNERS, WildsLearned, WildsRun, WildsTrainConfig, embed,
)
from ..models.wilds_backbones import BACKBONES, WildsModel, make_backbone
from ..training.minibatch import Checkpoint
from ..training.wilds_ood_stage import (
    PENALTY_SWEEP, WILDS_OBJECTIVES, WildsOODConfig, best_epochs, select, stacked_logits, train_heads,
)
from ..validation import check_bool, check_choice, check_int, check_positive, check_sequence
from .labels import INIT_LABELS

#: Table 3's initialisations in its row order (its FeAT rows are iFeAT's, Sec. 5), and FeAT as
#: Algorithm 1 with every set kept.
METHODS = ("erm", "bonsai", "ifeat", "feat")
METHOD_LABELS = {m: INIT_LABELS[m] for m in METHODS}
DFR_SPLITS = {"ood_val": ("val", None), "train_test": ("train", "test"), "val_test": ("val", "test")}


@dataclass(frozen=True)
class WildsProtocol:
    """What one Table 3 column needs; defaults are the paper's (Tables 10 and 12)."""

    dataset: str
    methods: tuple = ("erm", "bonsai", "ifeat")
    objectives: tuple = WILDS_OBJECTIVES
    seeds: tuple | None = None  # default: range(spec.n_seeds)
    penalty_weights: tuple = PENALTY_SWEEP
    backbone: str | None = None  # default: spec.backbone
    pretrained: bool | str = "auto"
    scale: float = 1.0  # multiplies Table 12's steps
    rounds: int | None = None  # default: Table 12
    batch_size: int | None = None
    lr: float | None = None  # default: Table 10's (small from-scratch CPU runs need a larger one)
    ood_epochs: int | None = None  # default: Table 10's epochs
    resolution: int | None = None  # image side; default: the WILDS transform's
    max_examples: int | None = None  # cap per split (quick runs)
    max_token_length: int | None = None
    termination: str = DEFAULT_TERMINATION  # FeAT's stopping rule (featlib.feature_learning.termination)
    dfr: bool = True
    checkpoint_every: int = 500

    def __post_init__(self) -> None:
        spec = WILDS_DATASETS.get(self.dataset)
        check_sequence("methods", self.methods)
        for m in self.methods:
            check_choice("methods", m, METHODS)
        check_sequence("objectives", self.objectives)
        for o in self.objectives:
            check_choice("objectives", o, WILDS_OBJECTIVES)
        if self.seeds is not None:
            check_sequence("seeds", self.seeds)
            for s in self.seeds:
                check_int("seeds", s, minimum=0)
        if self.backbone is not None:
            BACKBONES.get(self.backbone)
        if self.pretrained not in (True, False, "auto"):
            raise ValueError(f"pretrained must be True, False or 'auto'; got {self.pretrained!r}")
        check_positive("scale", self.scale)
        if self.lr is not None:
            check_positive("lr", self.lr)
        for name in ("rounds", "batch_size", "ood_epochs", "resolution", "max_examples", "max_token_length"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=1)
        termination_rule(self.termination)
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
        steps = max(1, round(spec.fl_steps * self.scale))
        return WildsTrainConfig(
            steps_per_round=max(1, steps // rounds), rounds=rounds,
            erm_steps=max(1, round(spec.erm_steps * self.scale)),
            batch_size=self.batch_size or spec.batch_size, domains_per_batch=spec.domains_per_batch,
            lr=self.lr or spec.lr, weight_decay=spec.weight_decay, optimizer=spec.optimizer, scheduler=spec.scheduler,
            retain_weight=spec.retain_penalty, termination=self.termination, checkpoint_every=self.checkpoint_every,
        )

    def ood_config(self, objective: str) -> WildsOODConfig:
        spec = self.spec
        return WildsOODConfig(
            objective=objective, epochs=self.ood_epochs or spec.epochs,
            batch_size=self.batch_size or spec.batch_size, domains_per_batch=spec.domains_per_batch,
            lr=self.lr or spec.lr, weight_decay=spec.weight_decay, optimizer=spec.optimizer,
            penalty_weights=tuple(self.penalty_weights),
        )

    def key(self) -> str:
        """A short hash of everything that changes results (not the seeds, methods or objectives:
        each piece is its own file), with featlib's version."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("methods", "objectives", "seeds")}
        blob = json.dumps({**fields, "featlib": __version__}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


@dataclass
class WildsResults:
    ood: pd.DataFrame  # one row per (method, seed, objective, penalty, epoch)
    dfr: pd.DataFrame  # one row per (method, seed, target)
    rounds: pd.DataFrame  # feature-learning history, one row per (method, seed, round)
    backbone: str = ""  # the backbone's description (pretrained or not)
    notes: list = field(default_factory=list)

    def best(self) -> pd.DataFrame:
        return best_epochs(self.ood, ["method", "objective", "seed"])

    def table(self) -> pd.DataFrame:
        """Table 3's OOD-objective rows: per (method, objective) the selected penalty weight and
        test score (mean, std over seeds)."""
        return select(self.best(), ["method", "objective"])


class WildsExperiment:
    """Runs (or resumes) a :class:`WildsProtocol` with its pieces cached under ``cache_dir``."""

    def __init__(self, protocol: WildsProtocol, root, cache_dir, *, download: bool = False,
                 device: torch.device | None = None, progress: bool = False):
        self.protocol = protocol
        self.root = root
        self.download = check_bool("download", download)
        self.device = device or get_device()
        self.progress = progress
        self.dir = Path(cache_dir) / f"{protocol.dataset}-{protocol.key()}"
        self._data: WildsData | None = None
        self._backbone_description = ""
        self._text_transform = None

    # ------------------------------------------------------------------ data and models
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
    def checkpoint(self, method: str, seed: int) -> Checkpoint:
        return Checkpoint(self._path(f"learn-{method}-s{seed}.pt"), every=self.protocol.checkpoint_every)

    def learn(self, method: str, seed: int) -> WildsLearned:
        """Feature learning (resumes from its checkpoint; returns at once when finished)."""
        check_choice("method", method, METHODS)
        run = WildsRun(data=self.data, new_model=self.new_model, config=self.protocol.train_config(), seed=seed,
                       checkpoint=self.checkpoint(method, seed), device=self.device, progress=self.progress)
        return WILDS_LEARNERS.get(method)(run)

    def embeddings(self, method: str, seed: int) -> dict[str, torch.Tensor]:
        """The frozen featurizer's embeddings of every split, and the learned head."""
        path = self._path(f"embed-{method}-s{seed}.pt")
        if path.exists():
            return torch.load(path, weights_only=False)
        learned = self.learn(method, seed)
        cfg = self.protocol.train_config()
        out = {split: embed(learned.model.featurizer, subset, self.device, cfg.eval_batch_size, cfg.num_workers,
                            desc=f"embed {split}" if self.progress else None)
               for split, subset in self.data.splits.items()}
        out["head"] = learned.model.classifier.cpu()
        atomic_write(path, lambda tmp: torch.save(out, tmp))
        return out

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

    def ood(self, method: str, seed: int, objective: str) -> pd.DataFrame:
        """The OOD stage's history for one (method, seed, objective): all penalty weights."""
        path = self._path(f"ood-{method}-s{seed}-{objective}.csv")
        if path.exists():
            return pd.read_csv(path)
        emb = self.embeddings(method, seed)
        history = train_heads(
            emb["train"].to(self.device), self.data.labels("train"), self.data.groups("train"),
            self.data.grouper.n_groups, emb["head"], self.protocol.ood_config(objective), self._score_heads(emb),
            seed=seed, progress=f"{method} s{seed} {objective}" if self.progress else False,
        )
        history.insert(0, "seed", seed)
        history.insert(0, "method", method)
        atomic_write(path, lambda tmp: history.to_csv(tmp, index=False))
        return history

    def dfr(self, method: str, seed: int) -> pd.DataFrame:
        """DFR (target: the label) and DFR-s (target: the spurious attribute, when the dataset
        has one) on the embeddings, with the dataset's protocol (Appendix F.2)."""
        path = self._path(f"dfr-{method}-s{seed}.csv")
        if path.exists():
            return pd.read_csv(path)
        spec = self.protocol.spec
        emb = self.embeddings(method, seed)
        rows = []
        for target in ("label", "spurious"):
            if target == "spurious" and spec.spurious_field is None:
                continue
            rows.append(run_dfr(self.data, emb, spec, target, seed))
        table = pd.DataFrame(rows)
        table.insert(0, "seed", seed)
        table.insert(0, "method", method)
        atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
        return table

    def rounds(self, method: str, seed: int) -> pd.DataFrame:
        table = self.learn(method, seed).rounds.copy()
        table.insert(0, "seed", seed)
        table.insert(0, "method", method)
        return table

    def run(self) -> WildsResults:
        """Every piece of the protocol (cached ones are read back)."""
        p = self.protocol
        ood, dfr, rounds = [], [], []
        for method in p.methods:
            for seed in p.seed_list:
                rounds.append(self.rounds(method, seed))
                for objective in p.objectives:
                    ood.append(self.ood(method, seed, objective))
                if p.dfr and p.spec.dfr_protocol != "none":
                    dfr.append(self.dfr(method, seed))
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
