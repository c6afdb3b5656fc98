"""The two implementations of the feature learners that featlib had before one learner per
algorithm (commit 1e62748), kept as the reference that ``tests/test_one_learner_per_algorithm.py``
runs beside today's code.

* Full batch (ColoredMNIST): ``feature_learning/base.py`` (``fit`` and the accuracies),
  ``erm.py``, ``bonsai.py`` and ``feat.py`` as they were.
* Minibatch (WILDS): ``feature_learning/wilds_learners.py`` as it was (``train_stage``, ``embed``,
  the official scores and the four learners).

Copied with their arithmetic unchanged, statement for statement; left out is what computes no
number: argument checks, progress bars, and the WILDS checkpoints and resuming (a fresh run saves
checkpoints that it never reads; resuming has its own tests in ``tests/test_wilds_pipeline.py``).
Bonsai's helpers (DRO groups, synthesis resampling, head averaging) are copied too, since they
live in a module the merge rewrote. What the merge did not touch is imported from featlib and so
shared by both sides: the data, the models, the optimiser factory and batch sampler of
``featlib.training.minibatch``, the cross-entropy of ``featlib.objectives``, and FeAT's round
bookkeeping (``feature_learning/feat_rounds.py`` and ``termination.py``, unchanged since
1e62748 but for a default read from ``featlib.hparams``); their own tests guard them.

Checked when copied: on the machine whose numbers the test used to store (the file
``tests/data/learner_reference.json`` that 1e62748's own code wrote), this copy gave every stored
row and weight fingerprint of the seven full-batch and four minibatch cases.

Do not "fix" this file to follow featlib: it is what today's learners must agree with. A change of
a learner's numbers on purpose is made here too (or the comparison for that learner retired),
and the commit says why.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from featlib.feature_learning.feat_rounds import DEFAULT_HEAD_COMBINATION, FeATRounds, batch_mean
from featlib.feature_learning.termination import DEFAULT_TERMINATION, DEFAULT_TERMINATION_THRESHOLD
from featlib.models.cmnist_models import make_cmnist_model
from featlib.models.mlp import fresh_head, xavier_linear
from featlib.models.wilds_backbones import linear_head
from featlib.objectives import per_sample_cross_entropy
from featlib.training.minibatch import DomainBatchSampler, autocast, make_optimizer, make_scheduler, stream_seed
from featlib.training.ood_stage import accuracy as batched_accuracy
from featlib.training.ood_stage import per_run_squared_norm


@dataclass
class FormerLearned:
    learner: str
    model: nn.Module
    rounds: pd.DataFrame
    steps: int  # full batch: epochs


# ============================================================================ full batch (1e62748)
def per_sample_bce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, y, reduction="none")


def fit(params, loss_fn: Callable[[], torch.Tensor], epochs: int, lr: float, l2: float) -> None:
    params = list(params)
    optimizer = torch.optim.Adam(params, lr=lr)
    for _ in range(epochs):
        loss = loss_fn() + l2 * per_run_squared_norm(params, ())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


@torch.no_grad()
def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return batched_accuracy(logits, y).item()


@torch.no_grad()
def worst_test_accuracy(model, tests) -> float:
    return min(accuracy(model(env.x), env.y) for env in tests)


def train_erm(model: nn.Module, x, y, epochs: int, lr: float, l2: float) -> None:
    fit(model.parameters(), lambda: per_sample_bce(model(x), y).mean(), epochs, lr, l2)


def erm_features(data, seed: int, *, epochs: int = 150, model: str = "mlp", hidden_dim: int = 256,
                 lr: float = 1e-3, l2: float = 1e-3) -> FormerLearned:
    net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=seed).to(data.train_x.device)
    train_erm(net, data.train_x, data.train_y, epochs, lr, l2)
    with torch.no_grad():
        rows = pd.DataFrame([{"round": 1, "epochs": epochs, "train_acc": accuracy(net(data.train_x), data.train_y),
                              "ood_acc": worst_test_accuracy(net, data.test), "accepted": True}])
    return FormerLearned("erm", net, rows, epochs)


def split_groups(correct_per_round: list[torch.Tensor]) -> list[torch.Tensor]:
    return [m for correct in correct_per_round for m in (correct, ~correct)]


def worst_group_risk(per_sample: torch.Tensor, groups: list[torch.Tensor], index: torch.Tensor | None = None):
    risks = [batch_mean(per_sample, (g if index is None else g[index]).to(per_sample.dtype)) for g in groups]
    risks = [r for r in risks if r is not None]
    return torch.stack(risks).max() if risks else per_sample.mean()


def synthesis_index(correct: torch.Tensor, n: int, rng: np.random.Generator) -> np.ndarray:
    correct = torch.as_tensor(correct).cpu()
    agree = (correct.all(1) | (~correct).all(1)).numpy()
    if agree.all() or not agree.any():
        return np.arange(len(agree))
    pools = [np.flatnonzero(agree), np.flatnonzero(~agree)]
    return np.concatenate([rng.choice(p, n // 2, replace=True) for p in pools])


def average_round_heads(multi_head: nn.Linear, rounds: int) -> nn.Linear:
    out_features = multi_head.out_features // rounds
    averaged = nn.Linear(multi_head.in_features, out_features).to(multi_head.weight.device)
    with torch.no_grad():
        averaged.weight.copy_(multi_head.weight.reshape(rounds, out_features, -1).mean(0))
        averaged.bias.copy_(multi_head.bias.reshape(rounds, out_features).mean(0))
    return averaged


def bonsai_features(data, seed: int, *, round_epochs=(50, 150), synthesis_epochs: int = 500, model: str = "mlp",
                    hidden_dim: int = 256, lr: float = 1e-3, l2: float = 1e-3) -> FormerLearned:
    x, y = data.train_x, data.train_y
    groups, predictions, rows = [], [], []
    for r, epochs in enumerate(round_epochs):
        net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=1000 * seed + r).to(x.device)
        if r == 0:
            train_erm(net, x, y, epochs, lr, l2)
        else:
            split = split_groups(groups)
            fit(net.parameters(), lambda: worst_group_risk(per_sample_bce(net(x), y), split), epochs, lr, l2)
        with torch.no_grad():
            predicted = (net(x) > 0).to(y.dtype)
        groups.append(predicted == y)
        predictions.append(predicted)
        rows.append({"round": r + 1, "epochs": epochs, "train_acc": accuracy(net(x), y),
                     "ood_acc": worst_test_accuracy(net, data.test), "n_groups": 2 * r,
                     "size_correct": int(groups[-1].sum()), "size_wrong": int((~groups[-1]).sum())})

    correct = torch.stack(groups, dim=1)
    agree = correct.all(1) | (~correct).all(1)
    index = torch.as_tensor(synthesis_index(correct, len(y), np.random.default_rng(seed)), device=x.device)
    x_syn, targets = x[index], torch.stack(predictions, dim=1)[index]
    net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=1000 * seed + len(round_epochs)).to(x.device)
    k = len(round_epochs)
    net.classifier = xavier_linear(hidden_dim, k, torch.Generator().manual_seed(seed)).to(x.device)
    fit(net.parameters(), lambda: per_sample_bce(net.classifier(net.featurizer(x_syn)), targets).mean(),
        synthesis_epochs, lr, l2)
    net.classifier = average_round_heads(net.classifier, k)
    rows.append({"round": "synthesis", "epochs": synthesis_epochs, "train_acc": accuracy(net(x), y),
                 "ood_acc": worst_test_accuracy(net, data.test), "size_agree": int(agree.sum()),
                 "size_disagree": int((~agree).sum())})
    return FormerLearned("bonsai", net, pd.DataFrame(rows), sum(round_epochs) + synthesis_epochs)


def feat_features(data, seed: int, *, variant: str, epochs_per_round: int = 150, max_rounds: int = 5,
                  retain_weight: float = 0.01, termination_threshold: float = DEFAULT_TERMINATION_THRESHOLD,
                  termination_rule: str = DEFAULT_TERMINATION, head_combination: str = DEFAULT_HEAD_COMBINATION,
                  model: str = "mlp", hidden_dim: int = 256, lr: float = 1e-3, l2: float = 1e-3,
                  keep_full_set: bool = True) -> FormerLearned:
    x, y = data.train_x, data.train_y
    state = FeATRounds(len(y), variant, retain_weight=retain_weight, termination_threshold=termination_threshold,
                       termination_rule=termination_rule, keep_full_set=keep_full_set,
                       head_combination=head_combination, device=x.device)
    net = make_cmnist_model(model, data.image_shape, hidden_dim, seed=seed).to(x.device)
    phi = net.featurizer
    accepted_state, rows, epochs = None, [], 0

    def round_loss(head):
        feats = phi(x)
        retained = [per_sample_bce(w(feats).squeeze(-1), y) for w in state.retained_heads]
        return state.loss(per_sample_bce(head(feats).squeeze(-1), y), retained)

    for k in range(1, max_rounds + 1):
        head = net.classifier if k == 1 else fresh_head(hidden_dim, seed=1000 * seed + k).to(x.device)
        fit(list(phi.parameters()) + list(head.parameters()), lambda: round_loss(head), epochs_per_round, lr, l2)
        epochs += epochs_per_round
        with torch.no_grad():
            feats = phi(x)
            row = {"round": k, "epochs": epochs_per_round,
                   "ood_acc": worst_test_accuracy(lambda z: head(phi(z)).squeeze(-1), data.test),
                   "ood_acc_average_head": worst_test_accuracy(
                       lambda z: state.combine(state.heads + [head])(phi(z)).squeeze(-1), data.test)}
        row.update(state.end_round(head, lambda w: (w(feats).squeeze(-1) > 0).to(y.dtype) == y))
        rows.append(row)
        if not row["accepted"]:
            phi.load_state_dict(accepted_state)
            break
        accepted_state = copy.deepcopy(phi.state_dict())
    net.classifier = state.final_head().requires_grad_(True)
    rounds = pd.DataFrame(rows)
    rounds["accepted_rounds"] = len(state.heads)
    return FormerLearned(variant, net, rounds, epochs)


FULL_BATCH_LEARNERS = {
    "erm": erm_features, "bonsai": bonsai_features,
    "feat": lambda data, seed, **kw: feat_features(data, seed, variant="feat", **kw),
    "ifeat": lambda data, seed, **kw: feat_features(data, seed, variant="ifeat", **kw),
}


# ============================================================================ minibatch (1e62748)
@dataclass
class WildsRun:
    data: object  # featlib.data.wilds_data.WildsData
    new_model: Callable[[int], nn.Module]
    config: object  # WildsTrainConfig
    seed: int
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def train_domains(self) -> torch.Tensor:
        return self.data.groups("train")

    @property
    def train_labels(self) -> torch.Tensor:
        return self.data.labels("train").to(self.device)


class _Indexed(Dataset):
    def __init__(self, subset):
        self.subset = subset

    def __len__(self) -> int:
        return len(self.subset)

    def __getitem__(self, i):
        x, y, _ = self.subset[i]
        return x, y, i


@torch.no_grad()
def embed(featurizer: nn.Module, subset, device, batch_size: int = 256, num_workers: int = 0) -> torch.Tensor:
    was_training = featurizer.training
    featurizer.eval()
    out = []
    for x, _, _ in DataLoader(subset, batch_size=batch_size, shuffle=False, num_workers=num_workers):
        with autocast(device):
            out.append(featurizer(x.to(device)).float().cpu())
    featurizer.train(was_training)
    return torch.cat(out)


def _head_logits(head: nn.Module, feats: torch.Tensor) -> torch.Tensor:
    return head(feats.to(next(head.parameters()).device)).float()


def _official(run: WildsRun, split: str, featurizer, head) -> float:
    if split not in run.data.splits:
        return float("nan")
    feats = embed(featurizer, run.data.splits[split], run.device, run.config.eval_batch_size, run.config.num_workers)
    return run.data.score(split, _head_logits(head, feats).argmax(-1).cpu())


def train_stage(run: WildsRun, stage: str, networks: dict[str, nn.Module], loss_fn, steps: int,
                multiplicity=None) -> None:
    cfg = run.config
    params = [p for net in networks.values() for p in net.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, cfg.optimizer, cfg.lr, cfg.weight_decay)
    scheduler = make_scheduler(optimizer, cfg.scheduler, steps)
    sampler = DomainBatchSampler(run.train_domains, cfg.batch_size, cfg.domains_per_batch, seed=run.seed,
                                 stage=stage, start=0, stop=steps, multiplicity=multiplicity)
    for net in networks.values():
        net.train()
    loader = DataLoader(_Indexed(run.data.splits["train"]), batch_sampler=sampler, num_workers=cfg.num_workers)
    for step, (x, y, index) in enumerate(loader):
        torch.manual_seed(stream_seed(run.seed, stage, step, "dropout"))
        with autocast(run.device):
            loss = loss_fn(x.to(run.device), y.to(run.device), index.to(run.device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()


def _ce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return per_sample_cross_entropy(logits.float(), y)


def erm_wilds(run: WildsRun) -> FormerLearned:
    model = run.new_model(run.seed).to(run.device)
    train_stage(run, "erm", {"model": model}, lambda x, y, i: _ce(model(x), y).mean(), run.config.erm_steps)
    row = {"round": 1, "steps": run.config.erm_steps, "accepted": True,
           "val_metric": _official(run, "val", model.featurizer, model.classifier),
           "test_metric": _official(run, "test", model.featurizer, model.classifier)}
    return FormerLearned("erm", model, pd.DataFrame([row]), run.config.erm_steps)


def _feat_wilds(run: WildsRun, variant: str) -> FormerLearned:
    cfg = run.config
    y = run.train_labels
    rounds = FeATRounds(len(y), variant, retain_weight=cfg.retain_weight, termination_threshold=cfg.termination_threshold,
                        termination_rule=cfg.termination_rule, keep_full_set=cfg.keep_full_set,
                        head_combination=cfg.head_combination, device=run.device)
    model = run.new_model(run.seed).to(run.device)
    phi, n_features, n_classes = model.featurizer, model.classifier.in_features, model.classifier.out_features
    rows, accepted_phi = [], None
    stopped = False
    for k in range(1, cfg.rounds + 1):
        head = model.classifier if k == 1 else linear_head(n_features, n_classes, seed=1000 * run.seed + k).to(run.device)

        def loss_fn(x, yb, index, head=head):
            feats = phi(x)
            retained = [_ce(w(feats), yb) for w in rounds.retained_heads]
            return rounds.loss(_ce(head(feats), yb), retained, index)

        train_stage(run, f"{variant} round {k}", {"phi": phi, "head": head}, loss_fn, cfg.steps_per_round)
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
    model.classifier = rounds.final_head().requires_grad_(True)
    steps = sum(r["steps"] for r in rows)
    if not stopped:
        rows[-1]["val_metric_average_head"] = _official(run, "val", phi, model.classifier)
        rows[-1]["test_metric_average_head"] = _official(run, "test", phi, model.classifier)
    for r in rows:
        r["accepted_rounds"] = len(rounds.heads)
    return FormerLearned(variant, model, pd.DataFrame(rows), steps)


def bonsai_wilds(run: WildsRun) -> FormerLearned:
    cfg = run.config
    y = run.train_labels
    correct, predictions, rows = [], [], []
    for r in range(cfg.rounds):
        net = run.new_model(1000 * run.seed + r).to(run.device)
        groups = split_groups(correct)
        if r == 0:
            def loss_fn(x, yb, index, net=net):
                return _ce(net(x), yb).mean()
        else:
            def loss_fn(x, yb, index, net=net, groups=groups):
                return worst_group_risk(_ce(net(x), yb), groups, index)
        train_stage(run, f"bonsai round {r + 1}", {"net": net}, loss_fn, cfg.steps_per_round)
        feats = embed(net.featurizer, run.data.splits["train"], run.device, cfg.eval_batch_size, cfg.num_workers)
        predicted = _head_logits(net.classifier, feats).argmax(-1).to(run.device)
        correct.append(predicted == y)
        predictions.append(predicted)
        rows.append({"round": r + 1, "steps": cfg.steps_per_round, "train_acc": correct[-1].float().mean().item(),
                     "val_metric": _official(run, "val", net.featurizer, net.classifier),
                     "test_metric": _official(run, "test", net.featurizer, net.classifier),
                     "n_groups": 2 * r, "size_correct": int(correct[-1].sum()),
                     "size_wrong": int((~correct[-1]).sum()), "accepted": True})

    rounds_done = len(predictions)
    index = synthesis_index(torch.stack(correct, 1), len(y), np.random.default_rng(run.seed))
    multiplicity = np.bincount(index, minlength=len(y))
    targets = torch.stack(predictions, 1)  # (n, rounds)
    net = run.new_model(1000 * run.seed + rounds_done).to(run.device)
    n_features, n_classes = net.classifier.in_features, net.classifier.out_features
    net.classifier = linear_head(n_features, rounds_done * n_classes, seed=run.seed).to(run.device)

    def synthesis_loss(x, yb, idx):  # the mean of the rounds' mean losses
        logits = net(x).reshape(len(x), rounds_done, n_classes)
        return torch.stack([_ce(logits[:, r], targets[idx, r]).mean() for r in range(rounds_done)]).mean()

    train_stage(run, "bonsai synthesis", {"net": net}, synthesis_loss, cfg.steps_per_round, multiplicity=multiplicity)
    net.classifier = average_round_heads(net.classifier, rounds_done)
    feats = embed(net.featurizer, run.data.splits["train"], run.device, cfg.eval_batch_size, cfg.num_workers)
    agree = torch.stack(correct, 1)
    agree = agree.all(1) | (~agree).all(1)
    rows.append({"round": "synthesis", "steps": cfg.steps_per_round,
                 "train_acc": (_head_logits(net.classifier, feats).argmax(-1).to(run.device) == y).float().mean().item(),
                 "val_metric": _official(run, "val", net.featurizer, net.classifier),
                 "test_metric": _official(run, "test", net.featurizer, net.classifier),
                 "size_agree": int(agree.sum()), "size_disagree": int((~agree).sum()), "accepted": True})
    return FormerLearned("bonsai", net, pd.DataFrame(rows), cfg.steps_per_round * (rounds_done + 1))


WILDS_LEARNERS = {"erm": erm_wilds, "feat": lambda run: _feat_wilds(run, "feat"),
                  "ifeat": lambda run: _feat_wilds(run, "ifeat"), "bonsai": bonsai_wilds}
