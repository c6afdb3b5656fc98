"""Full-batch gradient descent with a constant step, in phases (Sec. 4, Fig. 2).

A run is a list of :class:`Phase` (objective, number of steps, penalty weight): Fig. 2(a, b)
is ``[Phase("erm", T_pre), Phase("irmv1", T, 1e8)]`` and Fig. 2(c, d) is
``[Phase("irmv1", T, 1e8)]``. Every ``log_every`` steps (or at the steps ``record_at`` names, and
after the last update) the history records, for the weights
*before* that step's update: the loss, the penalty, train and test accuracy, the invariant and
spurious feature-learning coefficients (mean over j, r of <w_jr, j v1> and <w_jr, j v2>), and
the test loss, and per environment the risk R_e and C_IRMv1^e.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from tqdm.auto import tqdm

from ..data.two_bit import TwoBitData
from ..device import get_device
from ..models.two_layer_cnn import TwoLayerCNN
from ..objectives import OBJECTIVES, logistic_risk, make_objective
from ..theory import c_irmv1
from ..validation import check_int, check_positive


@dataclass(frozen=True)
class Phase:
    """``steps`` GD steps on ``objective`` with ``penalty_weight`` (lambda)."""

    objective: str
    steps: int
    penalty_weight: float = 0.0

    def __post_init__(self) -> None:
        OBJECTIVES.get(self.objective)  # unknown names fail with the list of valid ones
        check_int("steps", self.steps, minimum=0)
        check_positive("penalty_weight", self.penalty_weight, allow_zero=True)


def _accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return (torch.sign(logits) == y).float().mean().item()


def train_full_batch(
    model: TwoLayerCNN,
    train: TwoBitData,
    test: TwoBitData,
    phases: Sequence[Phase],
    lr: float,
    log_every: int = 1,
    progress: bool = True,
    device: torch.device | None = None,
    record_at: Collection[int] | None = None,
) -> pd.DataFrame:
    """Run the phases with constant step ``lr``; return the history as a DataFrame.

    The model is trained in place. Rows are indexed by the global step (0 = initialisation),
    every ``log_every`` steps, or only at the steps in ``record_at`` when it is given (a sweep that
    reads two points of each run skips the rest: recording costs about as much as a step); the
    last row is the state after the final update.
    """
    check_positive("lr", lr)
    check_int("log_every", log_every, minimum=1)
    if record_at is not None:
        for s in record_at:
            check_int("record_at[i]", s, minimum=0)
        record_at = set(record_at)
    if not phases:
        raise ValueError("phases must be a non-empty list of Phase(objective, steps, penalty_weight)")
    device = device or get_device()
    model = model.to(device)
    train, test = train.to(device), test.to(device)
    env_idx = train.env_indices()
    env_targets = [train.targets01()[i] for i in env_idx]
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    rows: list[dict] = []
    total = sum(p.steps for p in phases)

    def record(step: int, phase_id: int, phase: Phase, out, logits: torch.Tensor) -> None:
        with torch.no_grad():
            inv, spu = model.feature_coefficients()
            c = [c_irmv1(logits[i], train.y[i]) for i in env_idx]
            test_logits = model(test.x)
            row = {
                "step": step, "phase": phase_id, "objective": phase.objective,
                "penalty_weight": phase.penalty_weight,
                "loss": out.loss.item(), "penalty": out.penalty.item(),
                "train_acc": _accuracy(logits, train.y), "test_acc": _accuracy(test_logits, test.y),
                "test_loss": logistic_risk(test_logits, test.targets01()).item(),
                "inv": inv.item(), "spu": spu.item(),
            }
            for e in range(train.num_envs):
                row[f"risk_{e}"] = out.risks[e].item()
                row[f"c_irmv1_{e}"] = c[e].item()
        rows.append(row)

    step = 0
    bar = tqdm(total=total, disable=not progress, desc="GD", leave=False)
    for phase_id, phase in enumerate(phases):
        objective = make_objective(phase.objective)
        for _ in range(phase.steps):
            logits = model(train.x)
            out = objective([logits[i] for i in env_idx], env_targets, phase.penalty_weight)
            if (step in record_at) if record_at is not None else (step % log_every == 0):
                record(step, phase_id, phase, out, logits)
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            optimizer.step()
            step += 1
            bar.update(1)
    bar.close()
    last = phases[-1]
    logits = model(train.x)
    record(step, len(phases) - 1, last, make_objective(last.objective)(
        [logits[i] for i in env_idx], env_targets, last.penalty_weight), logits)
    return pd.DataFrame(rows).set_index("step")
