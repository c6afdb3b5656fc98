"""Feature learning on WILDS (Sec. 6, Appendix F.2): ERM, FeAT, iFeAT and Bonsai with minibatches.

The algorithms are the ColoredMNIST ones; only the optimisation differs. FeAT and iFeAT keep
their sets, stored heads and stopping rule in the same :class:`FeATRounds` as the full-batch
learner (Eq. (7) evaluated on each minibatch), and Bonsai uses the same DRO groups, synthesis
resampling and head averaging (:mod:`.bonsai`). Each round trains ``steps_per_round`` steps of
Table 12 on domain-balanced minibatches (Table 10) with the dataset's optimiser, with bfloat16
autocast on GPU. After each round one pass over the training set decides the round's fate
(training + retention accuracy, Appendix F.1) and splits the data; the round's classifier is
scored on the OOD validation and test splits with the official WILDS metric.

Every run checkpoints itself (every ``checkpoint_every`` steps and at each round's end) into
one file; calling the learner again with the same checkpoint path resumes where it stopped,
without redoing a finished round, and returns at once when the run had finished.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from ..models.wilds_backbones import WildsModel, linear_head
from ..objectives import per_sample_cross_entropy
from ..training.profiling import training_step
from ..registry import Registry
from ..training.minibatch import (
    Checkpoint, DomainBatchSampler, autocast, make_optimizer, make_scheduler, stream_seed,
)
from ..validation import check_bool, check_choice, check_int, check_positive
from .bonsai import average_round_heads, split_groups, synthesis_index, worst_group_risk
from .feat_rounds import DEFAULT_HEAD_COMBINATION, HEAD_COMBINATIONS, FeATRounds
from .termination import DEFAULT_TERMINATION_THRESHOLD, WILDS_DEFAULT_TERMINATION, termination_rule

WILDS_LEARNERS: Registry[Callable[..., "WildsLearned"]] = Registry("feature learner")


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
    retain_weight: float = 0.01
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


@dataclass
class WildsLearned:
    """A learned ``w o phi`` and one history row per round."""

    method: str
    model: WildsModel
    rounds: pd.DataFrame
    steps: int


@dataclass
class WildsRun:
    """What a learner needs: the data, a model factory, the optimisation and the checkpoint."""

    data: object  # featlib.data.wilds_data.WildsData
    new_model: Callable[[int], WildsModel]  # seed -> freshly initialised backbone + head
    config: WildsTrainConfig
    seed: int
    checkpoint: Checkpoint
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    progress: bool = False
    state: dict = field(default_factory=dict)  # the checkpoint being resumed (loaded lazily)

    @property
    def train_domains(self) -> torch.Tensor:
        return self.data.groups("train")

    @property
    def train_labels(self) -> torch.Tensor:
        return self.data.labels("train").to(self.device)


class _Indexed(Dataset):
    """A WILDS subset whose items also carry their position, so FeAT can look up set membership."""

    def __init__(self, subset):
        self.subset = subset

    def __len__(self) -> int:
        return len(self.subset)

    def __getitem__(self, i):
        x, y, _ = self.subset[i]
        return x, y, i


def _train_loader(run: WildsRun, batch_sampler: DomainBatchSampler) -> DataLoader:
    return DataLoader(_Indexed(run.data.splits["train"]), batch_sampler=batch_sampler,
                      num_workers=run.config.num_workers)


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


def _head_logits(head: nn.Module, feats: torch.Tensor) -> torch.Tensor:
    head_device = next(head.parameters()).device
    return head(feats.to(head_device)).float()


def _official(run: WildsRun, split: str, featurizer, head) -> float:
    if split not in run.data.splits:
        return float("nan")
    feats = embed(featurizer, run.data.splits[split], run.device, run.config.eval_batch_size, run.config.num_workers)
    return run.data.score(split, _head_logits(head, feats).argmax(-1).cpu())


def train_stage(run: WildsRun, stage: str, networks: dict[str, nn.Module], loss_fn, steps: int,
                save_extra: Callable[[], dict], multiplicity=None) -> None:
    """``steps`` optimiser steps of ``loss_fn(x, y, index)`` on domain-balanced minibatches,
    resuming inside the stage when the checkpoint stopped there; checkpoints every
    ``checkpoint_every`` steps (the caller saves at the end of the stage)."""
    cfg = run.config
    params = [p for net in networks.values() for p in net.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, cfg.optimizer, cfg.lr, cfg.weight_decay)
    scheduler = make_scheduler(optimizer, cfg.scheduler, steps)
    start = 0
    if run.state.get("stage") == stage and run.state.get("step", 0) > 0:
        start = run.state["step"]
        optimizer.load_state_dict(run.state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(run.state["scheduler"])
    sampler = DomainBatchSampler(run.train_domains, cfg.batch_size, cfg.domains_per_batch, seed=run.seed,
                                 stage=stage, start=start, stop=steps, multiplicity=multiplicity)
    for net in networks.values():
        net.train()
    bar = tqdm(total=steps, initial=start, desc=stage, disable=not run.progress, leave=False)
    smoothed = None
    for step, (x, y, index) in enumerate(_train_loader(run, sampler), start):
        torch.manual_seed(stream_seed(run.seed, stage, step, "dropout"))
        with training_step(stage, run.device):
            with autocast(run.device):
                loss = loss_fn(x.to(run.device), y.to(run.device), index.to(run.device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
        smoothed = loss.item() if smoothed is None else 0.9 * smoothed + 0.1 * loss.item()
        bar.update(1)
        bar.set_postfix(loss=f"{smoothed:.4f}")
        done = step + 1
        if run.checkpoint.due(done) and done < steps:
            run.checkpoint.save({
                **save_extra(), "stage": stage, "step": done,
                "networks": {k: copy.deepcopy(v.state_dict()) for k, v in networks.items()},
                "optimizer": optimizer.state_dict(),
                "scheduler": None if scheduler is None else scheduler.state_dict(),
            })
    bar.close()


def _resume(run: WildsRun, method: str) -> dict:
    state = run.checkpoint.load() or {}
    if state and state.get("method") != method:
        raise ValueError(f"checkpoint {run.checkpoint.path} belongs to {state.get('method')!r}, not {method!r}; "
                         "use another checkpoint path")
    run.state = state
    if state and not state.get("done"):
        where = state.get("stage") or f"the start of round {state.get('round')}"
        tqdm.write(f"resuming {method} (seed {run.seed}) from {run.checkpoint.path.name}: {where}, "
                   f"step {state.get('step', 0)}")
    return state


def _finish(run: WildsRun, method: str, model: WildsModel, rows: list[dict], steps: int) -> WildsLearned:
    run.checkpoint.save({"method": method, "done": True, "model": model.state_dict(), "rows": rows, "steps": steps})
    return WildsLearned(method, model, pd.DataFrame(rows), steps)


def _finished(run: WildsRun, method: str, state: dict) -> WildsLearned | None:
    if not state.get("done"):
        return None
    model = run.new_model(run.seed).to(run.device)
    model.load_state_dict(state["model"])
    return WildsLearned(method, model, pd.DataFrame(state["rows"]), state["steps"])


def _ce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return per_sample_cross_entropy(logits.float(), y)


# ---------------------------------------------------------------------------------- ERM
@WILDS_LEARNERS.register("erm")
def erm_wilds(run: WildsRun) -> WildsLearned:
    """ERM for ``erm_steps`` steps (Table 12's overall steps; 15,000 on RxRx1)."""
    state = _resume(run, "erm")
    if (learned := _finished(run, "erm", state)) is not None:
        return learned
    model = run.new_model(run.seed).to(run.device)
    if state:
        model.load_state_dict(state["networks"]["model"])
    train_stage(run, "erm", {"model": model}, lambda x, y, i: _ce(model(x), y).mean(), run.config.erm_steps,
                lambda: {"method": "erm"})
    row = {"round": 1, "steps": run.config.erm_steps, "accepted": True,
           "val_metric": _official(run, "val", model.featurizer, model.classifier),
           "test_metric": _official(run, "test", model.featurizer, model.classifier)}
    return _finish(run, "erm", model, [row], run.config.erm_steps)


# ---------------------------------------------------------------------------------- FeAT / iFeAT
def _feat_wilds(run: WildsRun, variant: str) -> WildsLearned:
    cfg = run.config
    state = _resume(run, variant)
    if (learned := _finished(run, variant, state)) is not None:
        return learned
    y = run.train_labels
    rounds = FeATRounds(len(y), variant, retain_weight=cfg.retain_weight, termination_threshold=cfg.termination_threshold,
                        termination_rule=cfg.termination_rule, keep_full_set=cfg.keep_full_set,
                        head_combination=cfg.head_combination, device=run.device)
    model = run.new_model(run.seed).to(run.device)
    phi, n_features, n_classes = model.featurizer, model.classifier.in_features, model.classifier.out_features
    rows, first, accepted_phi = [], 1, None
    if state:
        rounds.load_state_dict(state["learner"])
        rows, first, accepted_phi = state["rows"], state["round"], state["accepted_phi"]
        model.load_state_dict(state["model"])
    stopped = False
    for k in range(first, cfg.rounds + 1):
        head = model.classifier if k == 1 else linear_head(n_features, n_classes, seed=1000 * run.seed + k).to(run.device)
        stage = f"{variant} round {k}"
        if run.state.get("stage") == stage:
            phi.load_state_dict(run.state["networks"]["phi"])
            head.load_state_dict(run.state["networks"]["head"])

        def loss_fn(x, yb, index, head=head):
            feats = phi(x)
            retained = [_ce(w(feats), yb) for w in rounds.retained_heads]
            return rounds.loss(_ce(head(feats), yb), retained, index)

        def extra():
            return {"method": variant, "learner": rounds.state_dict(), "rows": rows, "round": k,
                    "accepted_phi": accepted_phi, "model": model.state_dict()}

        train_stage(run, stage, {"phi": phi, "head": head}, loss_fn, cfg.steps_per_round, extra)
        feats = embed(phi, run.data.splits["train"], run.device, cfg.eval_batch_size, cfg.num_workers).to(run.device)

        row = {"round": k, "steps": cfg.steps_per_round,
               "val_metric": _official(run, "val", phi, head), "test_metric": _official(run, "test", phi, head)}
        row.update(rounds.end_round(head, lambda w: _head_logits(w, feats).argmax(-1) == y))
        rows.append(row)
        stopped = not row["accepted"]
        if stopped:
            phi.load_state_dict(accepted_phi)
            break
        accepted_phi = copy.deepcopy(phi.state_dict())
        run.state = {}
        run.checkpoint.save({**extra(), "round": k + 1, "stage": None, "step": 0})
    model.classifier = rounds.final_head().requires_grad_(True)
    steps = sum(r["steps"] for r in rows)
    if not stopped:
        # the averaged head is the model's classifier; score it like the rounds
        rows[-1]["val_metric_average_head"] = _official(run, "val", phi, model.classifier)
        rows[-1]["test_metric_average_head"] = _official(run, "test", phi, model.classifier)
    for r in rows:
        r["accepted_rounds"] = len(rounds.heads)
    return _finish(run, variant, model, rows, steps)


@WILDS_LEARNERS.register("feat")
def feat_wilds(run: WildsRun) -> WildsLearned:
    """FeAT (Algorithm 1) on minibatches: every set and head kept."""
    return _feat_wilds(run, "feat")


@WILDS_LEARNERS.register("ifeat")
def ifeat_wilds(run: WildsRun) -> WildsLearned:
    """iFeAT (Algorithm 2) on minibatches: the latest sets and one averaged head."""
    return _feat_wilds(run, "ifeat")


# ---------------------------------------------------------------------------------- Bonsai
@WILDS_LEARNERS.register("bonsai")
def bonsai_wilds(run: WildsRun) -> WildsLearned:
    """Bonsai: ERM round, ``rounds - 1`` DRO rounds with fresh networks, then the synthesis round
    (one network, one head per round on the rounds' predicted labels, 50/50 resampling of
    agreeing / disagreeing examples, heads averaged)."""
    cfg = run.config
    state = _resume(run, "bonsai")
    if (learned := _finished(run, "bonsai", state)) is not None:
        return learned
    y = run.train_labels
    correct, predictions, rows, first = [], [], [], 0
    if state:
        correct = [c.to(run.device) for c in state["correct"]]
        predictions = [p.to(run.device) for p in state["predictions"]]
        rows, first = state["rows"], state["round"]

    def extra(r):
        return {"method": "bonsai", "correct": [c.cpu() for c in correct],
                "predictions": [p.cpu() for p in predictions], "rows": rows, "round": r}

    for r in range(first, cfg.rounds):
        net = run.new_model(1000 * run.seed + r).to(run.device)
        stage = f"bonsai round {r + 1}"
        if run.state.get("stage") == stage:
            net.load_state_dict(run.state["networks"]["net"])
        groups = split_groups(correct)
        if r == 0:
            def loss_fn(x, yb, index, net=net):
                return _ce(net(x), yb).mean()
        else:
            def loss_fn(x, yb, index, net=net, groups=groups):
                return worst_group_risk(_ce(net(x), yb), groups, index)
        train_stage(run, stage, {"net": net}, loss_fn, cfg.steps_per_round, lambda r=r: extra(r))
        feats = embed(net.featurizer, run.data.splits["train"], run.device, cfg.eval_batch_size, cfg.num_workers)
        predicted = _head_logits(net.classifier, feats).argmax(-1).to(run.device)
        correct.append(predicted == y)
        predictions.append(predicted)
        rows.append({"round": r + 1, "steps": cfg.steps_per_round, "train_acc": correct[-1].float().mean().item(),
                     "val_metric": _official(run, "val", net.featurizer, net.classifier),
                     "test_metric": _official(run, "test", net.featurizer, net.classifier),
                     "n_groups": 2 * r, "size_correct": int(correct[-1].sum()),
                     "size_wrong": int((~correct[-1]).sum()), "accepted": True})
        run.state = {}
        run.checkpoint.save({**extra(r + 1), "stage": None, "step": 0})

    rounds_done = len(predictions)
    index = synthesis_index(torch.stack(correct, 1), len(y), np.random.default_rng(run.seed))
    multiplicity = np.bincount(index, minlength=len(y))
    targets = torch.stack(predictions, 1)  # (n, rounds)
    net = run.new_model(1000 * run.seed + rounds_done).to(run.device)
    n_features, n_classes = net.classifier.in_features, net.classifier.out_features
    net.classifier = linear_head(n_features, rounds_done * n_classes, seed=run.seed).to(run.device)
    if run.state.get("stage") == "bonsai synthesis":
        net.load_state_dict(run.state["networks"]["net"])

    def synthesis_loss(x, yb, idx):
        logits = net(x).reshape(len(x), rounds_done, n_classes)
        return torch.stack([_ce(logits[:, r], targets[idx, r]).mean() for r in range(rounds_done)]).mean()

    train_stage(run, "bonsai synthesis", {"net": net}, synthesis_loss, cfg.steps_per_round,
                lambda: extra(rounds_done), multiplicity=multiplicity)
    net.classifier = average_round_heads(net.classifier, rounds_done)
    feats = embed(net.featurizer, run.data.splits["train"], run.device, cfg.eval_batch_size, cfg.num_workers)
    agree = torch.stack(correct, 1)
    agree = agree.all(1) | (~agree).all(1)
    rows.append({"round": "synthesis", "steps": cfg.steps_per_round,
                 "train_acc": (_head_logits(net.classifier, feats).argmax(-1).to(run.device) == y).float().mean().item(),
                 "val_metric": _official(run, "val", net.featurizer, net.classifier),
                 "test_metric": _official(run, "test", net.featurizer, net.classifier),
                 "size_agree": int(agree.sum()), "size_disagree": int((~agree).sum()), "accepted": True})
    return _finish(run, "bonsai", net, rows, cfg.steps_per_round * (rounds_done + 1))
