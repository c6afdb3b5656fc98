"""Experiments on the two-bit model with the CNN of Eq. (1): the drivers of chapters 01-02.

:class:`SyntheticSetup` bundles the data model (Definition 3.1), the network and the step size;
the functions below run the studies the chapters show: ERM feature learning and the sweep over
``alpha`` (Theorem 4.1), IRMv1 with and without ERM pre-training (Theorem 4.2, Prop. 4.3,
Cor. 4.4), and the sweep over the pre-training length.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .data.two_bit import TwoBitData, TwoBitSpec, sample_logit_weights
from .models.activations import ACTIVATIONS
from .models.two_layer_cnn import TwoLayerCNN
from .training.full_batch import Phase, train_full_batch
from .validation import check_int, check_positive, check_probability, check_sequence


@dataclass(frozen=True)
class SyntheticSetup:
    """Data model, network width ``m``, init scale ``sigma_0``, activation, GD step ``lr`` and
    seed. Defaults follow Appendix D.1 where the paper gives a value (sigma_0 = 0.01,
    psi(x) = x); ``m`` and ``lr`` are our choices (chapter 01 explains them)."""

    spec: TwoBitSpec = field(default_factory=TwoBitSpec)
    m: int = 20
    sigma_0: float = 0.01
    activation: str = "identity"
    lr: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("m", self.m, minimum=1)
        check_positive("sigma_0", self.sigma_0)
        ACTIVATIONS.get(self.activation)
        check_positive("lr", self.lr)
        check_int("seed", self.seed, minimum=0)

    def data(self) -> tuple[TwoBitData, TwoBitData]:
        """Training sample and the OOD test sample of Appendix D.1 (as large as the training set)."""
        return self.spec.sample_train(self.seed), self.spec.sample_test(seed=self.seed)

    def model(self) -> TwoLayerCNN:
        return TwoLayerCNN(self.spec.d, self.m, self.activation, self.sigma_0, seed=self.seed)

    def run(self, phases: Sequence[Phase], log_every: int = 1, progress: bool = True,
            record_at: Collection[int] | None = None, device: torch.device | None = None) -> pd.DataFrame:
        """Train a fresh model through ``phases``; return the history, every ``log_every`` steps
        (or at the steps ``record_at`` names) and after the last (:func:`train_full_batch`), on
        ``device`` (default: :func:`featlib.device.get_device`)."""
        train, test = self.data()
        return train_full_batch(self.model(), train, test, phases, self.lr, log_every, progress, device=device,
                                record_at=record_at)

    def with_alpha(self, alpha: float) -> "SyntheticSetup":
        return replace(self, spec=replace(self.spec, alpha=alpha))


def increments(history: pd.DataFrame, phase: int = 0) -> pd.DataFrame:
    """Per-step increments of the invariant and spurious coefficients within one phase."""
    rows = history[history["phase"] == phase]
    return rows[["inv", "spu"]].diff().dropna()


def spurious_lead_share(history: pd.DataFrame, phase: int = 0, rel_tol: float = 1e-3) -> float:
    """Share of the steps of ``phase`` at which the spurious coefficient grows more than the
    invariant one (Theorem 4.1 claims: all of them when alpha > mean(beta)). Steps where both
    increments are below ``rel_tol`` times the largest increment (training has converged) are
    left out."""
    inc = increments(history, phase)
    scale = inc.abs().to_numpy().max()
    active = inc[(inc.abs() > rel_tol * scale).any(axis=1)]
    if active.empty:
        return float("nan")
    return float((active["spu"] > active["inv"]).mean())


def increment_order(history: pd.DataFrame, phase: int = 0, rel_tol: float = 1e-3) -> dict[str, int]:
    """How the two increments compare over the steps :func:`spurious_lead_share` counts: at how
    many the spurious one is the larger (``spurious``), the invariant one (``invariant``), or the
    two are equal as recorded (``tie``: float32 coefficients, so equal to its precision), and the
    first step of a tie (``first_tie``, 0 when none)."""
    inc = increments(history, phase)
    scale = inc.abs().to_numpy().max()
    active = inc[(inc.abs() > rel_tol * scale).any(axis=1)]
    ties = active[active["spu"] == active["inv"]]
    return {"spurious": int((active["spu"] > active["inv"]).sum()), "invariant": int((active["spu"] < active["inv"]).sum()),
            "tie": len(ties), "first_tie": int(ties.index.min()) if len(ties) else 0}


def check_alpha_sweep(setup: SyntheticSetup, alphas: Sequence[float], steps: int, probe_step: int,
                      names: Sequence[str] = ("alphas", "steps", "probe_step")) -> None:
    """Every argument of :func:`alpha_sweep`, checked before its first run; ``names`` are the
    parameter names the messages use (a chapter passes its own: ``sweep_alphas``...)."""
    alphas_name, steps_name, probe_name = names
    check_sequence(alphas_name, alphas, unique=True)
    for alpha in alphas:
        setup.with_alpha(alpha)  # a probability, and the data model accepts it
    check_int(steps_name, steps, minimum=1)
    check_int(probe_name, probe_step, minimum=1, maximum=steps)


def alpha_sweep(setup: SyntheticSetup, alphas: Sequence[float], steps: int, probe_step: int,
                progress: bool = True, device: torch.device | None = None) -> pd.DataFrame:
    """ERM for each ``alpha`` (betas fixed): the coefficients at ``probe_step`` and at the end,
    the share of steps where the spurious increment leads, and where ERM converges on that
    alpha's training sample (``inv_sample_limit``, ``spu_sample_limit``: half the weights of
    :func:`featlib.data.sample_logit_weights`)."""
    check_alpha_sweep(setup, alphas, steps, probe_step)
    rows = []
    for alpha in tqdm(alphas, desc="alpha sweep", disable=not progress):
        at = setup.with_alpha(alpha)
        h = at.run([Phase("erm", steps)], progress=False, device=device)
        u_inv, u_spu = sample_logit_weights(at.data()[0])
        rows.append({
            "alpha": alpha,
            "inv_probe": h.loc[probe_step, "inv"], "spu_probe": h.loc[probe_step, "spu"],
            "inv_final": h["inv"].iloc[-1], "spu_final": h["spu"].iloc[-1],
            "inv_sample_limit": u_inv / 2, "spu_sample_limit": u_spu / 2,
            "spurious_lead_share": spurious_lead_share(h),
            "test_acc_final": h["test_acc"].iloc[-1],
        })
    return pd.DataFrame(rows)


def zero_crossing(x: Sequence[float], y: Sequence[float]) -> float:
    """The first x where y changes sign, by linear interpolation (NaN if it never does)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    for i in range(len(x) - 1):
        if y[i] == 0:
            return float(x[i])
        if y[i] * y[i + 1] < 0:
            return float(x[i] - y[i] * (x[i + 1] - x[i]) / (y[i + 1] - y[i]))
    return float("nan")


def check_pretraining_sweep(pretrain_steps: Sequence[int], irm_steps: int, penalty_weight: float,
                            names: Sequence[str] = ("pretrain_steps", "irm_steps", "penalty_weight")) -> None:
    """Every argument of :func:`pretraining_sweep`, checked before its first run; ``names`` are
    the parameter names the messages use."""
    steps_name, irm_name, weight_name = names
    check_sequence(steps_name, pretrain_steps, unique=True)
    for pre in pretrain_steps:
        check_int(f"{steps_name}[i]", pre, minimum=0)
    check_int(irm_name, irm_steps, minimum=1)
    check_positive(weight_name, penalty_weight)


def pretraining_sweep(setup: SyntheticSetup, pretrain_steps: Sequence[int], irm_steps: int,
                      penalty_weight: float, progress: bool = True,
                      device: torch.device | None = None) -> pd.DataFrame:
    """ERM pre-training for each length in ``pretrain_steps``, then IRMv1: the coefficients at
    the switch, their change over the first IRMv1 step (``inv_first_step``, ``spu_first_step``:
    the quantities of Prop. 4.3 and Cor. 4.4) and the coefficients at the end, test accuracy and
    test loss at the end."""
    check_pretraining_sweep(pretrain_steps, irm_steps, penalty_weight)
    rows = []
    for pre in tqdm(pretrain_steps, desc="pre-training sweep", disable=not progress):
        h = setup.run([Phase("erm", pre), Phase("irmv1", irm_steps, penalty_weight)], progress=False,
                      record_at=(pre, pre + 1), device=device)  # the switch and one step on; the end always
        rows.append({
            "pretrain_steps": pre,
            "inv_switch": h.loc[pre, "inv"], "spu_switch": h.loc[pre, "spu"],
            "inv_first_step": h.loc[pre + 1, "inv"] - h.loc[pre, "inv"],
            "spu_first_step": h.loc[pre + 1, "spu"] - h.loc[pre, "spu"],
            "inv_final": h["inv"].iloc[-1], "spu_final": h["spu"].iloc[-1],
            "test_acc_final": h["test_acc"].iloc[-1], "test_loss_final": h["test_loss"].iloc[-1],
        })
    return pd.DataFrame(rows)


def premise_run(setup: SyntheticSetup, pretrain_steps: int, irm_steps: int, penalty_weight: float,
                premise_alpha: float = 0.5, log_every: int = 1, record_at: Collection[int] | None = None,
                progress: bool = True, device: torch.device | None = None) -> pd.DataFrame:
    """Corollary 4.4 where its premise holds: the invariant coefficient o(1) and the spurious one
    Theta(1) when IRMv1 starts.

    ERM on ``setup``'s own environments never reaches that state (Theorem 4.1: the invariant
    coefficient grows at every step, in the ratio of the correlations), so the pre-training here
    runs ``pretrain_steps`` ERM steps on the same examples with the invariant coordinate drawn at
    flip rate ``premise_alpha`` (0.5: independent of the label, nothing to learn; the labels, the
    spurious coordinate and the noise are the same draws, :meth:`TwoBitSpec.sample_train`), and
    IRMv1 then trains those weights ``irm_steps`` steps on ``setup``'s own training set, the
    paper's environments, as the corollary's proof assumes. One history, indexed by the global
    step as :meth:`SyntheticSetup.run`'s: phase 0 is the pre-training (its rows measured on the
    pre-training data), phase 1 IRMv1 (measured on ``setup``'s data, from the switch on); the
    test set is ``setup``'s throughout. ``record_at``: global steps, as in
    :func:`featlib.training.train_full_batch`."""
    check_probability("premise_alpha", premise_alpha)
    check_int("pretrain_steps", pretrain_steps, minimum=1)
    check_int("irm_steps", irm_steps, minimum=1)
    check_positive("penalty_weight", penalty_weight)
    model = setup.model()
    blind, _ = setup.with_alpha(premise_alpha).data()
    train, test = setup.data()
    pre_at = None if record_at is None else [s for s in record_at if s < pretrain_steps]
    irm_at = None if record_at is None else [s - pretrain_steps for s in record_at if s >= pretrain_steps]
    first = train_full_batch(model, blind, test, [Phase("erm", pretrain_steps)], setup.lr, log_every, progress,
                             device=device, record_at=pre_at)
    second = train_full_batch(model, train, test, [Phase("irmv1", irm_steps, penalty_weight)], setup.lr, log_every,
                              progress, device=device, record_at=irm_at)
    first = first[first.index < pretrain_steps]  # its last row is the switch, measured again below on the paper's data
    second.index = second.index + pretrain_steps
    second["phase"] = 1
    return pd.concat([first, second]).rename_axis("step")


def recorded_steps(total: int, starts: Sequence[int] = (0,), dense: int = 100, every: int = 10) -> list[int]:
    """The steps a thinned history keeps: every step in the ``dense`` steps after each phase start
    in ``starts`` (where the coefficients move fastest: Prop. 4.3's and Cor. 4.4's first step
    included), every ``every``-th step elsewhere, and the last (``total``)."""
    check_int("total", total, minimum=0)
    check_int("dense", dense, minimum=0)
    check_int("every", every, minimum=1)
    steps = set(range(0, total + 1, every)) | {total}
    for start in starts:
        steps |= set(range(start, min(start + dense, total) + 1))
    return sorted(steps)
