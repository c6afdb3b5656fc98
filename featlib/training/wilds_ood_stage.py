"""The OOD stage of the WILDS experiments on frozen features (Sec. 6, Appendix F.2).

After feature learning the featurizer is frozen; its embeddings of every split are computed
once, and a linear head (started from the learned one) is trained with an OOD objective
(ERM, GroupDRO, IRMv1, V-REx or IRMX, as the Fish / WILDS implementations compute them: risks
and penalties averaged over the domains of the minibatch, no division by the penalty weight)
on domain-balanced minibatches of embeddings. All penalty weights of the sweep
``{1e-2, 1e-1, 1, 1e1, 1e2}`` train together as one stack of heads (``(P, d, C)`` weights, one
``einsum`` per step): run p's loss depends only on head p, so this is P independent trainings.

After every epoch each head is scored with the official WILDS metric on the OOD validation
and test splits; :func:`select` keeps, per run, the epoch with the best validation score (the
WILDS "best model") and then the penalty weight with the best mean validation score over
seeds (model selection on the OOD validation split, Appendix F.2).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..objectives import OBJECTIVES, cross_entropy_risk, make_objective
from ..validation import check_choice, check_int, check_positive, check_sequence
from .minibatch import DomainBatchSampler, make_optimizer

PENALTY_SWEEP = (1e-2, 1e-1, 1.0, 1e1, 1e2)
WILDS_OBJECTIVES = ("erm", "group_dro", "irmv1", "vrex", "irmx")


@dataclass(frozen=True)
class WildsOODConfig:
    objective: str
    epochs: int
    batch_size: int
    domains_per_batch: int
    lr: float
    weight_decay: float = 0.0
    optimizer: str = "adam"
    penalty_weights: tuple = PENALTY_SWEEP
    group_dro_eta: float = 0.01

    def __post_init__(self) -> None:
        OBJECTIVES.get(self.objective)
        check_int("ood_epochs", self.epochs, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("domains_per_batch", self.domains_per_batch, minimum=1)
        check_positive("lr", self.lr)
        check_choice("optimizer", self.optimizer, ("adam", "sgd"))
        check_sequence("penalty_weights", self.penalty_weights)
        for w in self.penalty_weights:
            check_positive("penalty_weights", w, allow_zero=True)

    @property
    def weights(self) -> tuple:
        """The sweep, or one run for objectives without a penalty (ERM, GroupDRO)."""
        return tuple(self.penalty_weights) if OBJECTIVES.get(self.objective).has_penalty else (0.0,)


def stacked_logits(feats: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``(n, d)`` embeddings, ``(P, d, C)`` weights, ``(P, C)`` biases -> ``(P, n, C)`` logits."""
    return torch.einsum("nd,pdc->pnc", feats, weight) + bias[:, None, :]


def train_heads(
    feats: torch.Tensor, y: torch.Tensor, domains: torch.Tensor, n_domains: int, init_head: torch.nn.Linear,
    config: WildsOODConfig, score: Callable[[torch.Tensor, torch.Tensor], dict[str, np.ndarray]], *,
    seed: int, progress: bool | str = False,
) -> pd.DataFrame:
    """Train one head per penalty weight; one row per (penalty weight, epoch) with the scores.

    ``score(weight, bias)`` returns, for the stacked heads, arrays of shape (P,) per split name
    (e.g. ``{"val": ..., "test": ...}``)."""
    device = feats.device
    weights = torch.tensor(config.weights, dtype=torch.float32, device=device)
    P = len(weights)
    W = init_head.weight.detach().t().to(device).float().expand(P, -1, -1).clone().requires_grad_(True)
    b = init_head.bias.detach().to(device).float().expand(P, -1).clone().requires_grad_(True)
    kwargs = {"n_groups": n_domains, "group_mask": torch.bincount(domains.cpu(), minlength=n_domains) > 0,
              "eta": config.group_dro_eta} if config.objective == "group_dro" else {}
    objective = make_objective(config.objective, risk_fn=cross_entropy_risk, rescale=False,
                               env_reduction="mean", risk_reduction="mean", **kwargs)
    optimizer = make_optimizer([W, b], config.optimizer, config.lr, config.weight_decay)
    steps_per_epoch = max(1, len(y) // config.batch_size)
    y, domains = y.to(device), domains.to(device)
    rows = []
    desc = progress if isinstance(progress, str) else config.objective
    bar = tqdm(total=config.epochs * steps_per_epoch, desc=desc, disable=not progress, leave=False)
    for epoch in range(config.epochs):
        sampler = DomainBatchSampler(domains, config.batch_size, config.domains_per_batch, seed=seed,
                                     stage=f"ood {config.objective} epoch {epoch}", stop=steps_per_epoch)
        for index in sampler:
            index = torch.as_tensor(index, device=device)
            logits = stacked_logits(feats[index], W, b)
            batch_domains = domains[index]
            ids = torch.unique(batch_domains).tolist()
            masks = [batch_domains == d for d in ids]
            out = objective([logits[:, m] for m in masks], [y[index][m] for m in masks], weights,
                            env_ids=ids if config.objective == "group_dro" else None)
            optimizer.zero_grad(set_to_none=True)
            out.loss.sum().backward()
            optimizer.step()
            bar.update(1)
        with torch.no_grad():
            scores = score(W.detach(), b.detach())
        for p in range(P):
            rows.append({"objective": config.objective, "penalty_weight": float(weights[p]), "epoch": epoch + 1,
                         **{f"{split}_metric": float(values[p]) for split, values in scores.items()}})
    bar.close()
    return pd.DataFrame(rows)


def best_epochs(history: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Per run (``keys`` + penalty weight), the row of the epoch with the best validation score
    (the earliest among ties)."""
    ordered = history.sort_values([*keys, "penalty_weight", "epoch"])
    index = ordered.groupby([*keys, "penalty_weight"], sort=False)["val_metric"].idxmax()
    return history.loc[index].reset_index(drop=True)


def select(best: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Per ``keys`` (e.g. method and objective), the penalty weight with the best mean validation
    score over seeds; its test scores as mean and std over seeds."""
    means = best.groupby([*keys, "penalty_weight"], as_index=False)["val_metric"].mean()
    chosen = means.loc[means.groupby(list(keys))["val_metric"].idxmax()][[*keys, "penalty_weight"]]
    picked = best.merge(chosen, on=[*keys, "penalty_weight"])
    return picked.groupby(list(keys), as_index=False).agg(
        penalty_weight=("penalty_weight", "first"), val_mean=("val_metric", "mean"),
        test_mean=("test_metric", "mean"), test_std=("test_metric", "std"), seeds=("seed", "nunique"))
