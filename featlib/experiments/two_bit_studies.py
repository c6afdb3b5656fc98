"""Chapters 01 and 02 at the paper's size, as studies of :mod:`featlib.experiments.gap_studies`.

The two-bit chapters (Theorem 4.1, Fig. 2(b); Theorem 4.2, Prop. 4.3, Cor. 4.4, Fig. 2) hold the
paper's sizes in their parameters cells (2,500 examples per environment, d = 100), but the book
is built with the small profile. These four studies run, for one seed, exactly what the chapters
compute at those defaults (the same :class:`~featlib.synthetic.SyntheticSetup`, the same calls:
the chapters' seed is ``seed``), and return tidy frames, one row per observation:

* ``two-bit-erm`` (chapter 01): the ERM run with each activation of ``compare_activations``
  (the chapter's main run is ``activation``'s), every step: ``activation``, ``step``, ``phase``,
  the two coefficients, accuracies and losses. Every step is kept: Theorem 4.1 is a statement
  about each step's increments (:func:`~featlib.synthetic.spurious_lead_share`).
* ``two-bit-alpha`` (chapter 01): the sweep over ``alpha``, one row per alpha
  (:func:`~featlib.synthetic.alpha_sweep`), with where ERM converges on that alpha's sample
  (the chapter's own ``alpha`` is one of the sweep's: its row describes the main run's sample).
* ``two-bit-irmv1`` (chapter 02): the runs of its figures, one row per (``run``, recorded step):
  ``pretrained`` (ERM ``pretrain_steps``, then IRMv1, Fig. 2(a, b)), ``scratch`` (IRMv1 alone,
  Fig. 2(c, d)), ``short`` (ERM ``short_pretrain_steps``, then IRMv1) and ``premise`` (Cor. 4.4
  where its premise holds: the same ``short_pretrain_steps`` of ERM with the invariant coordinate
  uninformative, then IRMv1, :func:`~featlib.synthetic.premise_run`), on the steps of
  :func:`~featlib.synthetic.recorded_steps` (every step for the first ``dense_steps`` of each
  phase, every ``every`` steps after: a few hundred rows a run, where every step would be
  thousands).
* ``two-bit-pretraining`` (chapter 02): the sweep over the pre-training length, one row per
  length (:func:`~featlib.synthetic.pretraining_sweep`).

Each option's default is the chapter's parameters cell's default of the same name
(``tests/test_two_bit_studies.py`` reads both), so that the study key (the defaults, hashed) changes
when a chapter's size does.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from ..data.two_bit import TwoBitSpec
from ..synthetic import SyntheticSetup, alpha_sweep, premise_run, pretraining_sweep, recorded_steps
from ..training import Phase

#: The names of the four studies, in the chapters' order.
TWO_BIT_STUDIES = ("two-bit-erm", "two-bit-alpha", "two-bit-irmv1", "two-bit-pretraining")
#: The chapter whose parameters cell gives each study's defaults.
STUDY_CHAPTERS = {"two-bit-erm": "01_erm_feature_learning", "two-bit-alpha": "01_erm_feature_learning",
                  "two-bit-irmv1": "02_irmv1_and_pretraining", "two-bit-pretraining": "02_irmv1_and_pretraining"}
#: The runs of ``two-bit-irmv1``, in the chapter's order.
IRMV1_RUNS = ("pretrained", "scratch", "short", "premise")
#: The columns each history keeps.
ERM_COLUMNS = ("phase", "inv", "spu", "train_acc", "test_acc")
IRMV1_COLUMNS = ("phase", "inv", "spu", "c_irmv1_0", "c_irmv1_1", "train_acc", "test_acc", "test_loss")


def _setup(seed: int, alpha: float, betas: Sequence[float], n_per_env: int, d: int, sigma_p: float, m: int,
           sigma_0: float, lr: float, activation: str = "identity") -> SyntheticSetup:
    spec = TwoBitSpec(alpha=alpha, betas=tuple(betas), n_per_env=n_per_env, d=d, sigma_p=sigma_p)
    return SyntheticSetup(spec=spec, m=m, sigma_0=sigma_0, activation=activation, lr=lr, seed=seed)


def _tidy(history: pd.DataFrame, columns: Sequence[str], **labels) -> pd.DataFrame:
    """``history`` (indexed by step) as rows labelled ``labels``, with ``step`` a column."""
    frame = history[list(columns)].rename_axis("step").reset_index()
    for i, (name, value) in enumerate(labels.items()):
        frame.insert(i, name, value)
    return frame


def two_bit_erm(seed: int, device: torch.device | None = None, alpha: float = 0.25, betas: tuple = (0.1, 0.2),
                n_per_env: int = 2500, d: int = 100, sigma_p: float = 0.01, m: int = 20, sigma_0: float = 0.01,
                lr: float = 1.0, steps: int = 1000,
                compare_activations: tuple = ("identity", "relu", "smoothed_relu")) -> pd.DataFrame:
    """Chapter 01's ERM runs: ``steps`` full-batch GD steps of ERM with each activation of
    ``compare_activations``, every step recorded."""
    frames = []
    for name in compare_activations:
        setup = _setup(seed, alpha, betas, n_per_env, d, sigma_p, m, sigma_0, lr, activation=name)
        history = setup.run([Phase("erm", steps)], progress=False, device=device)
        frames.append(_tidy(history, ERM_COLUMNS, seed=seed, activation=name))
    return pd.concat(frames, ignore_index=True)


def two_bit_alpha(seed: int, device: torch.device | None = None, alpha: float = 0.25, betas: tuple = (0.1, 0.2),
                  n_per_env: int = 2500, d: int = 100, sigma_p: float = 0.01, m: int = 20, sigma_0: float = 0.01,
                  lr: float = 1.0, activation: str = "identity",
                  sweep_alphas: tuple = (0.05, 0.08, 0.11, 0.14, 0.17, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45),
                  sweep_steps: int = 1000, probe_step: int = 20) -> pd.DataFrame:
    """Chapter 01's sweep over alpha (betas fixed): ERM for ``sweep_steps`` steps at each alpha,
    the coefficients at ``probe_step`` and at the end (:func:`~featlib.synthetic.alpha_sweep`)."""
    setup = _setup(seed, alpha, betas, n_per_env, d, sigma_p, m, sigma_0, lr, activation=activation)
    sweep = alpha_sweep(setup, list(sweep_alphas), sweep_steps, probe_step, progress=False, device=device)
    sweep.insert(0, "seed", seed)
    return sweep.assign(probe_step=probe_step, steps=sweep_steps)


def two_bit_irmv1(seed: int, device: torch.device | None = None, alpha: float = 0.25, betas: tuple = (0.1, 0.2),
                  n_per_env: int = 2500, d: int = 100, sigma_p: float = 0.01, m: int = 20, sigma_0: float = 0.01,
                  lr: float = 1.0, penalty_weight: float = 1e8, pretrain_steps: int = 1000, irm_steps: int = 4000,
                  short_pretrain_steps: int = 10, premise_alpha: float = 0.5, dense_steps: int = 100,
                  every: int = 20) -> pd.DataFrame:
    """Chapter 02's runs: ERM then IRMv1 (``pretrained``), IRMv1 from scratch (``scratch``), a
    short pre-training then IRMv1 (``short``) and Cor. 4.4's premise run (``premise``), each on
    its :func:`~featlib.synthetic.recorded_steps`."""
    setup = _setup(seed, alpha, betas, n_per_env, d, sigma_p, m, sigma_0, lr)
    irm = Phase("irmv1", irm_steps, penalty_weight)
    runs = {"pretrained": [Phase("erm", pretrain_steps), irm], "scratch": [irm],
            "short": [Phase("erm", short_pretrain_steps), irm]}
    frames = []
    for run in IRMV1_RUNS:
        if run == "premise":  # the short pre-training, on the examples with an uninformative invariant coordinate
            at = recorded_steps(short_pretrain_steps + irm_steps, (0, short_pretrain_steps), dense_steps, every)
            history = premise_run(setup, short_pretrain_steps, irm_steps, penalty_weight, premise_alpha, record_at=at,
                                  progress=False, device=device)
        else:
            phases = [p for p in runs[run] if p.steps > 0]
            starts = [sum(p.steps for p in phases[:i]) for i in range(len(phases))]
            at = recorded_steps(sum(p.steps for p in phases), starts, dense_steps, every)
            history = setup.run(phases, progress=False, record_at=at, device=device)
        frames.append(_tidy(history, IRMV1_COLUMNS, seed=seed, run=run))
    return pd.concat(frames, ignore_index=True)


def two_bit_pretraining(seed: int, device: torch.device | None = None, alpha: float = 0.25,
                        betas: tuple = (0.1, 0.2), n_per_env: int = 2500, d: int = 100, sigma_p: float = 0.01,
                        m: int = 20, sigma_0: float = 0.01, lr: float = 1.0, penalty_weight: float = 1e8,
                        sweep_pretrain_steps: tuple = (0, 2, 5, 10, 15, 20, 25, 30, 40, 60, 100, 1000),
                        sweep_irm_steps: int = 4000) -> pd.DataFrame:
    """Chapter 02's sweep over the pre-training length: ERM for each length, then
    ``sweep_irm_steps`` IRMv1 steps (:func:`~featlib.synthetic.pretraining_sweep`)."""
    setup = _setup(seed, alpha, betas, n_per_env, d, sigma_p, m, sigma_0, lr)
    sweep = pretraining_sweep(setup, list(sweep_pretrain_steps), sweep_irm_steps, penalty_weight, progress=False,
                              device=device)
    sweep.insert(0, "seed", seed)
    return sweep.assign(irm_steps=sweep_irm_steps)


def study_options(name: str) -> dict:
    """The settings a study runs with (its options' defaults, what the committed study was made
    with: its key hashes them), by option name; ``betas`` and other sequences as lists."""
    import inspect

    if name not in TWO_BIT_STUDIES:
        raise ValueError(f"study must be one of {', '.join(TWO_BIT_STUDIES)}; got {name!r}")
    study = {"two-bit-erm": two_bit_erm, "two-bit-alpha": two_bit_alpha, "two-bit-irmv1": two_bit_irmv1,
             "two-bit-pretraining": two_bit_pretraining}[name]  # as gap_studies registers them
    return {k: list(v.default) if isinstance(v.default, tuple) else v.default
            for k, v in inspect.signature(study).parameters.items()
            if v.default is not inspect.Parameter.empty and k != "device"}
