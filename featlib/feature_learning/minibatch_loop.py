"""The minibatch loop of the WILDS experiments (Sec. 6, Appendix F.2).

The algorithms are the ColoredMNIST ones (:mod:`.erm`, :mod:`.bonsai`, :mod:`.feat`); only the
optimisation differs. Each stage trains its steps (Table 12) on domain-balanced minibatches
(Table 10) with the dataset's optimiser, with bfloat16 autocast on GPU, and cross-entropy over the
classes. After each round one pass over the training set gives the features the round's fate and
split are decided on (training + retention accuracy, Appendix F.1); a head is scored on the OOD
validation and test splits with the official WILDS metric (``val_metric``, ``test_metric``).

Every run checkpoints itself (every ``checkpoint_every`` steps and at each round's end) into one
file; running the learner again with the same checkpoint path resumes where it stopped, without
redoing a finished round, and returns at once when the run had finished.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from ..hparams import APPENDIX_F1
from ..models.wilds_backbones import WildsModel, linear_head
from ..objectives import per_sample_cross_entropy
from ..training.minibatch import Checkpoint, DomainBatchSampler, autocast, make_optimizer, make_scheduler, stream_seed
from ..training.profiling import training_step
from ..validation import check_bool, check_choice, check_int, check_positive
from ..store.legacy import ROW_ALIASES
from .base import FeatureLearningDiverged, Learned
from .feat_rounds import DEFAULT_HEAD_COMBINATION, HEAD_COMBINATIONS
from .learners import FEATURE_LEARNERS
from .termination import DEFAULT_TERMINATION_THRESHOLD, WILDS_DEFAULT_TERMINATION, termination_rule


@dataclass(frozen=True)
class WildsTrainConfig:
    """Optimisation of one feature-learning run (Tables 10 and 12, possibly scaled down)."""

    steps_per_round: int
    rounds: int
    erm_steps: int
    batch_size: int
    domains_per_batch: int
    lr: float
    weight_decay: float = 0.0
    optimizer: str = "adam"
    scheduler: str | None = None
    retain_weight: float = APPENDIX_F1["retain_weight"].value  # WildsProtocol passes Table 12's per dataset
    termination_threshold: float = DEFAULT_TERMINATION_THRESHOLD
    #: A rule of featlib.feature_learning.termination; WILDS runs Table 12's rounds unchecked.
    termination_rule: str = WILDS_DEFAULT_TERMINATION
    head_combination: str = DEFAULT_HEAD_COMBINATION  # "average" (the paper's text) or "sum" (the authors' code)
    keep_full_set: bool = True
    checkpoint_every: int = 500
    eval_batch_size: int = 256
    num_workers: int = 0

    def __post_init__(self) -> None:
        check_int("steps_per_round", self.steps_per_round, minimum=1)
        check_int("rounds", self.rounds, minimum=1)
        check_int("erm_steps", self.erm_steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("domains_per_batch", self.domains_per_batch, minimum=1)
        check_positive("lr", self.lr)
        check_positive("weight_decay", self.weight_decay, allow_zero=True)
        check_choice("optimizer", self.optimizer, ("adam", "sgd"))
        check_positive("retain_weight", self.retain_weight, allow_zero=True)
        check_positive("termination_threshold", self.termination_threshold)
        termination_rule(self.termination_rule)
        HEAD_COMBINATIONS.get(self.head_combination)
        check_bool("keep_full_set", self.keep_full_set)
        check_int("checkpoint_every", self.checkpoint_every, minimum=1)
        check_int("eval_batch_size", self.eval_batch_size, minimum=1)
        check_int("num_workers", self.num_workers, minimum=0)

    def learner_options(self, learner: str) -> dict:
        """The options of ``learner`` (:data:`.learners.FEATURE_LEARNERS`) for this configuration
        (Table 12), from the schedule it was registered with: a learner of one stage (ERM) for
        ``erm_steps``; one of rounds (Bonsai's rounds and its synthesis, FeAT's and iFeAT's up to
        ``rounds`` rounds) ``steps_per_round`` steps each; with those of this configuration's fields
        the learner takes (:attr:`.learners.Learner.protocol_fields`; ``max_rounds`` is ``rounds``)."""
        check_choice("learner", learner, FEATURE_LEARNERS.table_order())
        registered = FEATURE_LEARNERS.get(learner)
        options = registered.run_lengths(self.steps_per_round, self.rounds, single=self.erm_steps)
        fields = {f.name for f in dataclasses.fields(self)}
        for name in registered.protocol_fields:
            field_name = "rounds" if name == "max_rounds" else name
            if field_name in fields:
                options[name] = getattr(self, field_name)
        return options


class _Indexed(Dataset):
    """A WILDS subset whose items also carry their position, so FeAT can look up set membership."""

    def __init__(self, subset):
        self.subset = subset

    def __len__(self) -> int:
        return len(self.subset)

    def __getitem__(self, i):
        x, y, _ = self.subset[i]
        return x, y, i


@torch.no_grad()
def embed(featurizer: nn.Module, subset, device, batch_size: int = 256, num_workers: int = 0,
          desc: str | None = None) -> torch.Tensor:
    """``phi(x)`` of every example of a split, in order, as float32 on the CPU."""
    was_training = featurizer.training
    featurizer.eval()
    out = []
    loader = DataLoader(subset, batch_size=batch_size, shuffle=False, num_workers=num_workers)
    for x, _, _ in tqdm(loader, desc=desc, disable=desc is None, leave=False):
        with autocast(device):
            out.append(featurizer(x.to(device)).float().cpu())
    featurizer.train(was_training)
    return torch.cat(out)


def saved_learner(state: dict) -> str | None:
    """The learner a checkpoint belongs to (featlib 0.4 wrote it as "method")."""
    return state["method"] if "method" in state else state.get("learner")


@dataclass
class MinibatchLoop:
    """:class:`.base.Loop` over a WILDS dataset: the data, a model factory, the optimisation and
    the run's checkpoint."""

    data: object  # featlib.data.wilds_data.WildsData
    new_model: Callable[[int], WildsModel]  # seed -> freshly initialised backbone + head
    config: WildsTrainConfig
    seed: int
    checkpoint: Checkpoint
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    progress: bool = False
    state: dict = field(default_factory=dict)  # the checkpoint being resumed (loaded lazily)

    length_unit = "steps"

    @property
    def labels(self) -> torch.Tensor:
        return self.data.labels("train").to(self.device)

    def new_network(self, seed: int) -> nn.Module:
        return self.new_model(seed).to(self.device)

    def new_head(self, seed: int, like: nn.Linear, copies: int = 1) -> nn.Module:
        return linear_head(like.in_features, copies * like.out_features, seed=seed).to(self.device)

    def per_sample_loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return per_sample_cross_entropy(logits.float(), y)

    def train(self, stage: str, networks: dict[str, nn.Module], loss_fn, steps: int, *, save=None,
              resample=None) -> None:
        """The stage's steps, resuming inside it when the checkpoint stopped there (networks,
        optimiser and schedule); checkpoints every ``checkpoint_every`` steps (the learner saves at
        the end of the stage). ``resample``: the batches are drawn from these positions (with
        their multiplicity) instead of the training set."""
        cfg = self.config
        params = [p for net in networks.values() for p in net.parameters() if p.requires_grad]
        optimizer = make_optimizer(params, cfg.optimizer, cfg.lr, cfg.weight_decay)
        scheduler = make_scheduler(optimizer, cfg.scheduler, steps)
        start = 0
        if self.state.get("stage") == stage:
            for name, net in networks.items():
                net.load_state_dict(self.state["networks"][name])
            if self.state.get("step", 0) > 0:
                start = self.state["step"]
                optimizer.load_state_dict(self.state["optimizer"])
                if scheduler is not None:
                    scheduler.load_state_dict(self.state["scheduler"])
        multiplicity = None if resample is None else np.bincount(np.asarray(resample), minlength=len(self.labels))
        sampler = DomainBatchSampler(self.data.groups("train"), cfg.batch_size, cfg.domains_per_batch, seed=self.seed,
                                     stage=stage, start=start, stop=steps, multiplicity=multiplicity)
        for net in networks.values():
            net.train()
        loader = DataLoader(_Indexed(self.data.splits["train"]), batch_sampler=sampler, num_workers=cfg.num_workers)
        bar = tqdm(total=steps, initial=start, desc=stage, disable=not self.progress, leave=False)
        smoothed = None
        for step, (x, y, index) in enumerate(loader, start):
            torch.manual_seed(stream_seed(self.seed, stage, step, "dropout"))
            with training_step(stage, self.device):
                with autocast(self.device):
                    loss = loss_fn(x.to(self.device), y.to(self.device), index.to(self.device))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
            value = loss.item()
            if not math.isfinite(value):  # a diverged stage never becomes a round or features
                raise FeatureLearningDiverged(stage, step + 1)
            smoothed = value if smoothed is None else 0.9 * smoothed + 0.1 * value
            bar.update(1)
            bar.set_postfix(loss=f"{smoothed:.4f}")
            done = step + 1
            if self.checkpoint.due(done) and done < steps:
                self.checkpoint.save({
                    **(save() if save is not None else {}), "stage": stage, "step": done,
                    "networks": {k: copy.deepcopy(v.state_dict()) for k, v in networks.items()},
                    "optimizer": optimizer.state_dict(),
                    "scheduler": None if scheduler is None else scheduler.state_dict(),
                })
        bar.close()

    def _embed(self, featurizer: nn.Module, split: str) -> torch.Tensor:
        cfg = self.config
        return embed(featurizer, self.data.splits[split], self.device, cfg.eval_batch_size, cfg.num_workers)

    def train_features(self, featurizer: nn.Module) -> torch.Tensor:
        return self._embed(featurizer, "train").to(self.device)

    @torch.no_grad()
    def predict(self, head: nn.Module, features: torch.Tensor) -> torch.Tensor:
        return head(features.to(next(head.parameters()).device)).float().argmax(-1).to(self.device)

    def score(self, featurizer: nn.Module, heads: dict[str, nn.Module]) -> dict:
        """``val_metric<key>`` and ``test_metric<key>``: the official metric of each head on the OOD
        validation and test splits (NaN for a split the dataset lacks); each split embedded once."""
        out = {}
        for split in ("val", "test"):
            feats = self._embed(featurizer, split) if split in self.data.splits else None
            for key, head in heads.items():
                out[f"{split}_metric{key}"] = (float("nan") if feats is None else
                                               self.data.score(split, self.predict(head, feats).cpu()))
        return {k: out[k] for key in heads for k in (f"val_metric{key}", f"test_metric{key}")}

    def resume(self, learner: str) -> dict:
        state = self.checkpoint.load() or {}
        saved = saved_learner(state)
        if state and saved != learner:
            raise ValueError(f"checkpoint {self.checkpoint.path} belongs to {saved!r}, not {learner!r}; "
                             "use another checkpoint path")
        self.state = state
        if state and not state.get("done"):
            where = state.get("stage") or f"the start of round {state.get('round')}"
            tqdm.write(f"resuming {learner} (seed {self.seed}) from {self.checkpoint.path.name}: {where}, "
                       f"step {state.get('step', 0)}")
        return state

    def save(self, state: dict) -> None:
        self.state = {}
        self.checkpoint.save(state)

    def finished(self, learner: str, state: dict) -> Learned | None:
        if not state.get("done"):
            return None
        model = self.new_model(self.seed).to(self.device)
        model.load_state_dict(state["model"])
        return Learned(learner, model, pd.DataFrame(state["rows"]).rename(columns=ROW_ALIASES), state["steps"])

    def finish(self, learner: str, model: nn.Module, rows: list[dict], steps: int) -> Learned:
        self.checkpoint.save({"learner": learner, "done": True, "model": model.state_dict(), "rows": rows,
                              "steps": steps})
        return Learned(learner, model, pd.DataFrame(rows), steps)
