"""Full-size studies: the cells where our Table 2 differs from the paper's, and the claims a CPU carries.

The H100 run of 2026-11-22 (seeds 1-3) left three gaps that the termination rule does not
explain. Each study here trains, at full data size, only what is needed to test one explanation,
and records per-step histories so that one run answers "what if the reference stopped earlier":

* ``erm-nf-erm`` -- the ERM objective in the ERM-NF column (ours 25.9, paper 17.14 on -025):
  the whole MLP from its random initialisation trained with ERM, once with our risk (the sum of
  the two environments' risks, Eq. (2)) and once with the reference code's (``erm_train``: the
  mean over the pooled examples, which with Adam equals the sum with twice the L2 weight: Adam ignores the factor 1/2 on the whole loss), evaluated
  every ``eval_every`` steps. The reference runs 501 steps (``run_exp.py``'s default, the IRM
  paper's ERM baseline); our protocol ran ``ood_steps`` = 1000 then (2,500 since
  the ``ood-length`` studies).
* ``frozen-steps`` -- V-REx and Fishr on frozen ERM features of ColoredMNIST-01 (ours 76.4 / 76.2,
  paper 81.20 / 82.23): heads trained from the learned ERM head for penalty weights 1e1-1e6
  without warm-up (the reference's frozen runs use none), with and without L2 on the head (the
  reference's Fishr has none), recorded over 5,001 steps (the FeAT README runs V-REx on -01 for
  5,001 steps at 1e6; ``run_exp.py`` defaults to 501).
* ``bonsai-dro-length`` -- Bonsai's second (DRO) round on ColoredMNIST-025: Table 6 says 150
  epochs, the paper's text and the Bonsai authors' script 500. Both variants' features, then the
  frozen IRMv1 / V-REx grid of the protocol on each.
* ``frozen-pretraining`` -- chapter 03's claim (Fig. 1(b)) in its frozen-feature form, which a CPU
  carries at full size: ERM's featurizer after 0 to 250 epochs, frozen, each objective's head on
  it, beside the same heads on iFeAT's features.
* ``saliency`` (and ``saliency-20k``, ``-10k``, ``-5k``, ``-2k`` on fewer images) -- chapter 06's
  ColoredMNIST saliency study, per seed: how much of each model's attribution falls on the colour
  patch, ERM after 150 to 450 epochs against Bonsai and FeAT. Each has a ``-maps`` twin
  (``saliency-maps``, ``saliency-5k-maps``, ...) that keeps the GradCAM maps the figures draw, on
  a few OOD test images, from the same models (trained once: both read the models' cache).
* ``saliency-mlp`` -- the same models and measures on the two-channel ColoredMNIST-025 of Table 2
  with Table 2's MLP, at all 50,000 images (a CPU carries it: minutes a seed where the CNN takes
  hours): the colour-versus-shape split of integrated gradients and the colour-swap flip rate, no
  GradCAM (the MLP has no convolution to explain).
* ``clove-grid-01`` -- CLOvE on ColoredMNIST-01's three frozen features with the penalty weights
  the Bonsai authors' script gives CLOvE there (1 to 100; the other objectives 1e3 to 1e5).
* ``ood-length-025`` and ``ood-length-01`` -- the OOD stage's length, which the paper never gives
  (featlib 0.5 runs 2,500, decided by these studies; the FeAT authors' ``run_exp.py`` 501), for the
  whole frozen table at once: every objective's grid (5 penalty weights x 6 pre-training lengths)
  on the ERM, Bonsai and iFeAT features of the protocol (featlib 0.5: Bonsai's DRO round 500
  epochs), trained 3,000 steps and scored every 500, on the test environments and on the
  validation environments, so that one run gives Table 2 at 500, 1,000, ..., 3,000 steps under
  both selection rules. IB-IRM is left out:
  on frozen features its bottleneck term is a constant, so it trains exactly as IRMv1 (its cell is
  IRMv1's, as in the paper's table).
* ``two-bit-erm``, ``two-bit-alpha``, ``two-bit-irmv1`` and ``two-bit-pretraining`` -- chapters 01
  and 02 at their parameters cells' defaults, the paper's size (2,500 examples per environment,
  d = 100), where the book builds them at the small profile's: the two-bit model's ERM runs and
  sweep over alpha (Theorem 4.1), IRMv1 with and without ERM pre-training, after a short one and
  where Cor. 4.4's premise holds, and the sweep over the pre-training length
  (:mod:`featlib.experiments.two_bit_studies`, committed in ``results/two-bit``).

    python -m featlib.cli.gap_studies erm-nf-erm --seeds 1 2 --out results/cmnist-gaps

(:mod:`featlib.cli.gap_studies`) writes ``<study>.csv`` and ``<study>-provenance.json`` to ``--out``, a result folder shared by the
studies (:mod:`featlib.store.folders`: replaced as a whole, the other studies' files carried over,
``provenance.json`` listing every file). Each (study, seed) piece is cached in ``--cache-dir``
with the shared cache code (:func:`featlib.store.files.cached`: verified CSV with its study key and seed,
one process per piece, exact floats), so a killed run resumes and writes the same bytes.
"""
from __future__ import annotations

import functools
import inspect
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .. import __version__
from ..hparams import CLOVE_WEIGHTS_01, PAPER_LEARNERS
from ..data.colored_mnist import make_colored_mnist
from ..feature_learning import FEATURE_LEARNERS
from ..store.keys import key as store_key
from ..store.files import cached, cached_meta, read_verified_csv, write_verified_csv
from ..models.mlp import ColoredMNISTMLP
from ..models.stacked import StackedHeads, StackedMLP
from ..registry import Registry
from ..training.ood_stage import Environments, LabelledInputs, OODStageConfig, StackHistory, StackRuns, train_stack
from .colored_mnist import CMNISTProtocol, schedule
from .two_bit_studies import two_bit_alpha, two_bit_erm, two_bit_irmv1, two_bit_pretraining

STUDIES: Registry[Callable[..., pd.DataFrame]] = Registry("study")


def history_frame(history: StackHistory, labels: list[dict]) -> pd.DataFrame:
    """One row per (evaluation step, run): ``labels[r]`` describes run r of a 1-D stack."""
    rows = []
    for t, step in enumerate(history.steps):
        for r, label in enumerate(labels):
            rows.append({**label, "step": step, "train_acc": float(history.train_acc[t].reshape(-1)[r]),
                         "worst_test_acc": float(history.worst_test_acc[t].reshape(-1)[r])})
    return pd.DataFrame(rows)


@STUDIES.register("erm-nf-erm")
def erm_nf_erm(seed: int, device: torch.device, steps: int = 1001, eval_every: int = 25,
               dataset: str = "cmnist025", n_train: int = 50000, n_test: int = 10000) -> pd.DataFrame:
    """ERM on the whole MLP from the seed's initialisation: our summed risk and the reference's
    pooled mean, ``steps`` full-batch Adam steps (lr 1e-3, L2 1e-3, as the protocol)."""
    data = make_colored_mnist(dataset, seed, n_train=n_train, n_test=n_test).to(device)
    p = CMNISTProtocol(dataset=dataset)
    train = LabelledInputs(data.train_x, data.train_y, data.env_slices)
    tests = [LabelledInputs(env.x, env.y) for env in data.test]
    frames = []
    for risk in ("sum", "mean"):
        stack = StackedMLP([ColoredMNISTMLP(p.hidden_dim, seed=seed)]).to(device)
        config = OODStageConfig("erm", steps=steps, lr=p.lr, l2=p.l2, eval_every=eval_every,
                                objective_kwargs={"risk_reduction": risk})
        history = train_stack(StackRuns.networks(stack, torch.zeros(1)), Environments(train, tests), config)
        frames.append(history_frame(history, [{"dataset": dataset, "seed": seed, "risk": risk}]))
    return pd.concat(frames, ignore_index=True)


@STUDIES.register("frozen-steps")
def frozen_steps(seed: int, device: torch.device, steps: int = 5001, eval_every: int = 100,
                 dataset: str = "cmnist01", n_train: int = 50000, n_test: int = 10000,
                 epoch_scale: float = 1.0) -> pd.DataFrame:
    """V-REx and Fishr heads on the seed's frozen ERM features (Table 6's ERM epochs), from the
    learned head, penalty weights 1e1-1e6 from step 0, with L2 on the head (ours) and without."""
    data = make_colored_mnist(dataset, seed, n_train=n_train, n_test=n_test).to(device)
    p = CMNISTProtocol(dataset=dataset)
    torch.manual_seed(seed)
    learned = FEATURE_LEARNERS.get("erm")(data, seed, hidden_dim=p.hidden_dim, lr=p.lr, l2=p.l2,
                                          **schedule(dataset, "erm", epoch_scale))
    weights = [1e1, 1e2, 1e3, 1e4, 1e5, 1e6]
    with torch.no_grad():
        feats = learned.model.featurizer(data.train_x).unsqueeze(0)
        test_feats = [learned.model.featurizer(env.x).unsqueeze(0) for env in data.test]
    train = LabelledInputs(feats, data.train_y.view(1, 1, -1), data.env_slices)
    tests = [LabelledInputs(f, env.y.view(1, 1, -1)) for f, env in zip(test_feats, data.test)]
    frames = []
    for objective in ("vrex", "fishr"):
        for l2 in (p.l2, 0.0):
            stack = StackedHeads([[learned.model.classifier] * len(weights)]).to(device)
            config = OODStageConfig(objective, steps=steps, lr=p.lr, l2=l2, eval_every=eval_every,
                                    env_reduction=p.env_reduction)
            history = train_stack(StackRuns.heads(stack, torch.tensor([weights])), Environments(train, tests), config)
            labels = [{"dataset": dataset, "seed": seed, "objective": objective, "head_l2": l2, "penalty_weight": w}
                      for w in weights]
            frames.append(history_frame(history, labels))
    return pd.concat(frames, ignore_index=True)


@STUDIES.register("bonsai-dro-length")
def bonsai_dro_length(seed: int, device: torch.device, dataset: str = "cmnist025", **overrides) -> pd.DataFrame:
    """Bonsai with a 150- and a 500-epoch DRO round, then the protocol's frozen IRMv1 and V-REx
    grids (5 penalty weights x 6 pre-training lengths) on each, 1,000 OOD steps as when the study was
    made (``overrides`` may set another ``ood_steps``); final metrics."""
    from .colored_mnist import ColoredMNISTExperiment

    frames = []
    for dro_epochs in (150, 500):
        p = CMNISTProtocol(dataset=dataset, seeds=(seed,), learners=("bonsai",), objectives=("irmv1", "vrex"),
                           **({"ood_steps": 1000} | overrides))
        experiment = ColoredMNISTExperiment(p, device=device, progress=False)
        data = experiment.data(seed)
        torch.manual_seed(seed)
        first = p.learner_options("bonsai")["round_epochs"][0]
        options = p.learner_options("bonsai") | {"round_epochs": (first, max(1, round(dro_epochs * p.epoch_scale)))}
        experiment._features[("bonsai", seed)] = FEATURE_LEARNERS.get("bonsai")(data, seed, **options)
        rows = experiment.run().assign(dro_epochs=dro_epochs)
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def ood_length(seed: int, device: torch.device, dataset: str, steps: int = 3000, eval_every: int = 500,
               learners: tuple = PAPER_LEARNERS,
               objectives: tuple = ("erm", "irmv1", "vrex", "irmx", "clove", "iga", "fishr"),
               cache_dir: Path | None = None, progress: bool = False, **overrides) -> pd.DataFrame:
    """Every configuration of ``objectives`` on the frozen features of ``learners`` (the
    protocol's, with ``overrides`` of its fields; cached in ``cache_dir`` like the pieces'
    features), trained ``steps`` steps with
    the protocol's OOD stage (fast path, fp32, the head's L2 1e-3) and scored every
    ``eval_every`` steps: one row per (learner, objective, configuration, step) with
    ``train_acc``, ``worst_test_acc`` and ``val_acc`` (the validation environments' mean).
    ``progress``: bars for feature learning and each objective's stack (stderr)."""
    from dataclasses import replace as replace_config

    from .colored_mnist import ColoredMNISTExperiment

    p = CMNISTProtocol(dataset=dataset, seeds=(seed,), learners=learners, objectives=objectives, **overrides)
    experiment = ColoredMNISTExperiment(p, cache_dir=cache_dir, device=device, progress=progress)
    data = experiment.data(seed)
    learned = [experiment.features(learner, seed) for learner in learners]
    with torch.no_grad():
        def features(x):
            return torch.stack([lf.model.featurizer(x) for lf in learned])

        train = LabelledInputs(features(data.train_x), data.train_y.expand(len(learned), 1, -1), data.env_slices)
        tests = [LabelledInputs(features(env.x), env.y.expand(len(learned), 1, -1)) for env in data.test]
        vals = [LabelledInputs(features(env.x), env.y.expand(len(learned), 1, -1)) for env in data.val]
    def fit(objective: str) -> pd.DataFrame:
        configs = p.configurations(objective)
        stack = StackedHeads([[lf.model.classifier] * len(configs) for lf in learned]).to(device)
        config = replace_config(p.ood_config(objective), steps=steps, eval_every=eval_every, record="every")
        runs = StackRuns.heads(stack, torch.tensor([[w for w, _ in configs]] * len(learned)),
                               torch.tensor([[k for _, k in configs]] * len(learned)))
        bar = {"progress": f"{dataset} seed {seed} {objective}"} if progress else {}
        history = train_stack(runs, Environments(train, tests, vals), config, **bar)
        val = history.mean_val_acc
        return pd.DataFrame([{"dataset": dataset, "seed": seed, "learner": learner, "objective": objective,
                              "penalty_weight": weight, "pretrain_epochs": pretrain, "step": step,
                              "train_acc": float(history.train_acc[t, g, c]),
                              "worst_test_acc": float(history.worst_test_acc[t, g, c]), "val_acc": float(val[t, g, c])}
                             for t, step in enumerate(history.steps) for g, learner in enumerate(learners)
                             for c, (weight, pretrain) in enumerate(configs)])

    # each objective is a part of its own in the cache folder, so a study stopped after an hour keeps
    # the objectives (clove-01: the variants) it finished and resumes from them
    # (an objective's own grid, hparams.OBJECTIVE_GRIDS, is in its part's key: overrides do not show it)
    # (clove-01's pinned {} is left out: with it a part is what it was before the decision, and keeps its key)
    kept = {k: v for k, v in overrides.items() if not (k == "objective_penalty_weights" and not v)}
    what = {"dataset": dataset, "seed": seed, "steps": steps, "eval_every": eval_every, "learners": list(learners),
            "overrides": kept, "featlib": __version__}

    def part_what(objective: str) -> dict:
        own = p.objective_penalty_weights
        return what | {"objective": objective} | ({"own_grid": list(own[objective])} if objective in own else {})

    return pd.concat([study_part(cache_dir, f"ood-length-{dataset}", seed, objective, part_what(objective),
                                 functools.partial(fit, objective)) for objective in objectives], ignore_index=True)


def study_part(cache_dir: Path | None, name: str, seed: int, part: str, what: dict,
               compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """One part of a long study (an objective, a variant), read from ``cache_dir/study-parts`` when
    a finished, sound copy made for the same ``what`` (everything the part depends on, hashed into
    its key) is there, else computed and written verified (:func:`featlib.store.files.cached`):
    a study killed in its second hour resumes from the parts it finished. ``cache_dir`` None:
    computed, nothing kept."""
    part_key = store_key(what)
    path = None if cache_dir is None else Path(cache_dir) / "study-parts" / f"{name}-seed{seed}-{part}-{part_key}.csv"
    expect = {"key": part_key, "seed": seed, "study": name, "part": part}
    return cached(path, lambda p: read_verified_csv(p, expect=expect), compute,
                  lambda p, frame: write_verified_csv(p, frame, cached_meta(part_key, seed, study=name, part=part)),
                  what=f"cached {name} part")


STUDIES.register("ood-length-025")(functools.partial(ood_length, dataset="cmnist025"))
STUDIES.register("ood-length-01")(functools.partial(ood_length, dataset="cmnist01"))
#: The OOD stage's length for the one cell that stays far from the paper's at the protocol's length
#: over Table 2's seeds, IRMX on ColoredMNIST-025's frozen ERM features, over as many seeds as
#: Table 2's and to 4,000 steps: ``ood-length-025`` trains every column but on one seed, which put
#: that cell still rising at 2,500 steps. Its features are learned as the pieces' are, so at the
#: protocol's length it repeats Table 2's runs of the cell up to float rounding (the machine that
#: made the pieces' features may differ), which this unsettled cell amplifies: up to 3.5 points a run
#: for the seeds whose features it learned again (results/cmnist-gaps/README.md).
STUDIES.register("ood-length-025-erm")(functools.partial(
    ood_length, dataset="cmnist025", learners=("erm",), objectives=("irmx",), steps=4000))

#: The margin curve (chapter 04; the protocol fixed before looking, :data:`featlib.hparams.CONVERGED_PROTOCOL`):
#: the whole frozen table trained 6,000 OOD steps and scored every 500, so that one run gives Table 2
#: at every length from the FeAT authors' 501 steps (scored at 500) to convergence, under both
#: selection rules. Every penalised objective tries Appendix F.1's grid widened by a decade each way
#: (1e0 to 1e6), so that a choice on F.1's edge is seen to bind or not without another run; on
#: ColoredMNIST-01 CLOvE also tries the Bonsai authors' weights (1 to 100), so that the calibrated
#: grid, F.1's and their union are all read from the same runs.
MARGIN_STEPS = 6000
MARGIN_WEIGHTS = (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6)
MARGIN_CLOVE_01 = tuple(sorted(set(MARGIN_WEIGHTS) | set(CLOVE_WEIGHTS_01)))
STUDIES.register("margin-curve-025")(functools.partial(
    ood_length, dataset="cmnist025", steps=MARGIN_STEPS, penalty_weights=MARGIN_WEIGHTS,
    objective_penalty_weights={}, progress=True))
STUDIES.register("margin-curve-01")(functools.partial(
    ood_length, dataset="cmnist01", steps=MARGIN_STEPS, penalty_weights=MARGIN_WEIGHTS,
    objective_penalty_weights={"clove": MARGIN_CLOVE_01}, progress=True))


#: ``clove-01``'s variants: (name, CLOvE's options, protocol overrides). Each differs from the
#: protocol's CLOvE in one of the authors' choices, and ``reference`` in both.
CLOVE_VARIANTS = (
    ("protocol", {}, {}),
    ("no-l2", {"l2_scope": "none"}, {}),
    ("minibatch", {"minibatch": 512}, {"ood_path": "plain"}),
    ("reference", {"l2_scope": "none", "minibatch": 512}, {"ood_path": "plain"}),
)


@STUDIES.register("clove-01")
def clove_01(seed: int, device: torch.device, dataset: str = "cmnist01", steps: int = 2500, eval_every: int = 500,
             cache_dir: Path | None = None, **overrides) -> pd.DataFrame:
    """The one frozen cell that sits well above the paper's under today's protocol, ColoredMNIST-01
    CLOvE on FeAT's features (seed 1: 79.5 against 75.12 ± 1.08), with its two columns beside it:
    CLOvE on the three frozen features as the protocol trains it (full batch, the head's L2 of
    Appendix F.1) and with each of the authors' two departures (:data:`CLOVE_VARIANTS`): no L2
    (CLOvE's computed, never added) and one random 512-example minibatch per environment each step
    for the risk and the MMCE (their loop keeps only the last of its shuffled minibatches; on the
    plain path), then both. Scored every ``eval_every`` steps, so step 500 gives the reference code's
    501-step length. Every variant runs Appendix F.1's weights, the grid of the cell it studies (the
    protocol's before CLOvE's own -01 grid was decided, :data:`featlib.hparams.OBJECTIVE_GRIDS`), as
    the committed study did. Rows as :func:`ood_length`'s, with ``variant``."""
    frames = []
    for variant, options, protocol in CLOVE_VARIANTS:
        frame = ood_length(seed, device, dataset, steps=steps, eval_every=eval_every, objectives=("clove",),
                           cache_dir=cache_dir, **({"objective_options": {"clove": options}, "objective_penalty_weights": {}}
                                                   | protocol | overrides))
        frames.append(frame.assign(variant=variant))
    return pd.concat(frames, ignore_index=True)


#: CLOvE's penalty weights in the Bonsai authors' ColoredMNIST-01 script (TjuJianyu/RFC,
#: scripts/coloredmnist/inversecoloredmnist_rfc.sh: "1 5 10 50 100 500", of which its loop runs the
#: first five; every other objective there, and CLOvE on ColoredMNIST-025, gets 1e3-1e5). The FeAT
#: authors' ColoredMNIST code is built on that repository.
RFC_CLOVE_WEIGHTS_01 = CLOVE_WEIGHTS_01  # featlib.hparams: the grid decided for Table 2's -01 CLOvE cells


@STUDIES.register("clove-grid-01")
def clove_grid_01(seed: int, device: torch.device, dataset: str = "cmnist01", steps: int = 2500,
                  eval_every: int = 500, cache_dir: Path | None = None, **overrides) -> pd.DataFrame:
    """CLOvE on ColoredMNIST-01's three frozen features with the penalty weights the Bonsai authors'
    script gives CLOvE there (:data:`RFC_CLOVE_WEIGHTS_01`, with the protocol's six pre-training
    lengths), in place of the protocol's 1e1-1e5: the one open choice that could put the -01
    CLOvE-on-FeAT cell (ours 79, the paper's 75.12) at the paper's while its two baseline columns
    stay at theirs, since the paper's ERM objective on FeAT's features (76.05) is above its CLOvE
    cell and our CLOvE gives the paper's value at its two weakest weights. Rows as
    :func:`ood_length`'s, the protocol's OOD stage otherwise."""
    return ood_length(seed, device, dataset, steps=steps, eval_every=eval_every, objectives=("clove",),
                      cache_dir=cache_dir, **({"penalty_weights": RFC_CLOVE_WEIGHTS_01} | overrides))


@STUDIES.register("frozen-pretraining")
def frozen_pretraining(seed: int, device: torch.device, dataset: str = "cmnist025",
                       erm_epochs: tuple = (0, 50, 100, 150, 200, 250),
                       objectives: tuple = ("erm", "irmv1", "vrex", "irmx", "clove", "iga", "fishr"),
                       cache_dir: Path | None = None, **overrides) -> pd.DataFrame:
    """Fig. 1(b) in its frozen-feature form (chapter 03): the featurizer of one ERM run from the
    seed's initialisation, kept after each of ``erm_epochs`` full-batch epochs (0: the random
    initialisation), frozen; on each, every objective's head (from that snapshot's head) trained
    with the protocol's OOD stage for each penalty weight, no further warm-up; beside them the
    same heads on iFeAT's features (the protocol's, cached in ``cache_dir``). One row per
    (features, ERM epochs, objective, penalty weight): ``worst_test_acc``, ``val_acc``,
    ``train_acc``, ``diverged_step``. IB-IRM is left out: on frozen features it trains exactly
    as IRMv1."""
    from ..feature_learning.erm import erm_snapshots
    from .colored_mnist import ColoredMNISTExperiment

    p = CMNISTProtocol(dataset=dataset, seeds=(seed,), learners=("ifeat",), objectives=objectives, **overrides)
    experiment = ColoredMNISTExperiment(p, cache_dir=cache_dir, device=device, progress=False)
    data = experiment.data(seed)
    trained = [e for e in erm_epochs if e > 0]
    torch.manual_seed(seed)
    snapshots = erm_snapshots(data, seed, epochs=trained, hidden_dim=p.hidden_dim, lr=p.lr, l2=p.l2) if trained else {}
    nets = {e: (snapshots[e].model if e else ColoredMNISTMLP(p.hidden_dim, seed=seed).to(device)) for e in erm_epochs}
    feat = experiment.features("ifeat", seed)
    groups = [("erm", e, net) for e, net in nets.items()] + [("ifeat", feat.epochs, feat.model)]
    with torch.no_grad():
        def features(x):
            return torch.stack([net.featurizer(x) for _, _, net in groups])

        n = len(groups)
        train = LabelledInputs(features(data.train_x), data.train_y.expand(n, 1, -1), data.env_slices)
        tests = [LabelledInputs(features(env.x), env.y.expand(n, 1, -1)) for env in data.test]
        vals = [LabelledInputs(features(env.x), env.y.expand(n, 1, -1)) for env in data.val]
    def fit(objective: str) -> pd.DataFrame:
        weights = [w for w, _ in p.configurations(objective)]
        weights = list(dict.fromkeys(weights))  # one per weight: no warm-up on frozen snapshots
        stack = StackedHeads([[net.classifier] * len(weights) for _, _, net in groups]).to(device)
        history = train_stack(StackRuns.heads(stack, torch.tensor([weights] * n)), Environments(train, tests, vals),
                              p.ood_config(objective))
        final = history.final()
        return pd.DataFrame([{"dataset": dataset, "seed": seed, "learner": learner, "erm_epochs": epochs,
                              "objective": objective, "penalty_weight": weight,
                              **{k: (int(v[g, c]) if k == "diverged_step" else float(v[g, c])) for k, v in final.items()
                                 if k in ("train_acc", "worst_test_acc", "val_acc", "diverged_step")}}
                             for g, (learner, epochs, _) in enumerate(groups) for c, weight in enumerate(weights)])

    # each objective a resumable part, as in ood_length (the ERM snapshots are retrained on resume: minutes)
    what = {"dataset": dataset, "seed": seed, "erm_epochs": list(erm_epochs), "overrides": overrides,
            "featlib": __version__}
    return pd.concat([study_part(cache_dir, f"frozen-pretraining-{dataset}", seed, objective,
                                 what | {"objective": objective}, functools.partial(fit, objective))
                      for objective in objectives], ignore_index=True)


def _saliency_study(seed: int, device: torch.device, dataset: str, n_train: int, n_test: int, n_attribution: int,
                    epoch_scale: float, cache_dir: Path | None):
    """The :class:`~featlib.experiments.saliency_cmnist.SaliencyStudy` of a ``saliency`` study and its
    ``-maps`` twin, its models kept beside ``cache_dir`` (in ``<cache_dir>/../saliency``): one place
    builds both, so the maps describe the networks the measures do."""
    from .saliency_cmnist import SaliencyProtocol, SaliencyStudy

    protocol = SaliencyProtocol(dataset=dataset, seed=seed, n_train=n_train, n_test=n_test,
                                n_attribution=n_attribution, epoch_scale=epoch_scale)
    models = None if cache_dir is None else Path(cache_dir).parent / "saliency"
    return SaliencyStudy(protocol, cache_dir=models, device=device)


@STUDIES.register("saliency")
def saliency(seed: int, device: torch.device, dataset: str = "cmnist025-patch", n_train: int = 50000,
             n_test: int = 10000, n_attribution: int = 1000, epoch_scale: float = 1.0,
             cache_dir: Path | None = None) -> pd.DataFrame:
    """Chapter 06's ColoredMNIST study for one seed (the paper's Fig. 4, Figs. 5-12): on the patch
    variant with the small CNN, ERM after 150, 300 and 450 epochs, Bonsai and FeAT (2 rounds),
    trained on ``n_train`` images (:class:`featlib.experiments.saliency_cmnist.SaliencyStudy`, the
    models kept in ``cache_dir``); per model its accuracies, the colour flip rate and the share of
    attribution on the colour patch (GradCAM, integrated gradients) over ``n_attribution`` OOD test
    images, mean and std over the images. One row per model. ``saliency-20k``, ``-10k`` and ``-5k``
    are the same study on fewer training images, to find the largest size a CPU carries at which
    the direction (FeAT's features on colour less than ERM's) holds over seeds."""
    table = _saliency_study(seed, device, dataset, n_train, n_test, n_attribution, epoch_scale, cache_dir).table()
    return table.assign(dataset=dataset, seed=seed, n_train=n_train)


def saliency_maps(seed: int, device: torch.device, dataset: str = "cmnist025-patch", n_train: int = 50000,
                  n_test: int = 10000, n_maps: int = 8, epoch_scale: float = 1.0,
                  cache_dir: Path | None = None) -> pd.DataFrame:
    """The figures of chapter 06's ColoredMNIST study for one seed, as data: the GradCAM maps of
    the paper's Fig. 4 models on the first ``n_maps`` OOD test images, on the explained layer's
    coarse grid (:meth:`featlib.experiments.saliency_cmnist.SaliencyStudy.coarse_gradcam_rows`;
    :func:`saliency_map_images` draws the images again). The models are those of the
    ``saliency`` study of the same size and seed (the same protocol, the same models' cache), so
    the maps and the measures describe the same networks."""
    study = _saliency_study(seed, device, dataset, n_train, n_test, n_maps, epoch_scale, cache_dir)
    return study.coarse_gradcam_rows(n_maps).assign(dataset=dataset, seed=seed, n_train=n_train, n_test=n_test)


STUDIES.register("saliency-maps")(saliency_maps)
for _size in (20000, 10000, 5000, 2000):
    STUDIES.register(f"saliency-{_size // 1000}k")(functools.partial(saliency, n_train=_size))
    STUDIES.register(f"saliency-{_size // 1000}k-maps")(functools.partial(saliency_maps, n_train=_size))
# Table 2's own data and network at full size: colour is which channel holds the digit, so the
# colour share is integrated gradients' chrominance part (featlib.saliency.colour_shape_attribution)
STUDIES.register("saliency-mlp")(functools.partial(saliency, dataset="cmnist025"))
# Chapters 01 and 02 at the paper's size (featlib.experiments.two_bit_studies)
STUDIES.register("two-bit-erm")(two_bit_erm)
STUDIES.register("two-bit-alpha")(two_bit_alpha)
STUDIES.register("two-bit-irmv1")(two_bit_irmv1)
STUDIES.register("two-bit-pretraining")(two_bit_pretraining)


def study_key(name: str) -> str:
    """A short hash of what a study's pieces depend on: its name, its options' defaults (what
    :func:`run_study` runs), featlib's version and, where its dataset gives one of its objectives a
    grid of its own (:data:`featlib.hparams.OBJECTIVE_GRIDS`: -01 CLOvE in ``ood-length-01``), that
    grid, so that a study made before the grid was decided is not resumed or extended under it."""
    study = STUDIES.get(name)
    options = {k: v.default for k, v in inspect.signature(study).parameters.items()
               if v.default is not inspect.Parameter.empty and k != "progress"}  # bars change no number
    payload = {"study": name, "options": options, "featlib": __version__}
    # a registered partial's keywords that the signature does not show (they go to ``**overrides``:
    # the margin curve's grids) are in the key too; studies without such keywords keep their keys
    hidden = {k: v for k, v in getattr(study, "keywords", {}).items() if k not in options and k != "progress"}
    payload |= {"overrides": hidden} if hidden else {}
    if "dataset" in options and "objectives" in options:
        own = CMNISTProtocol(dataset=options["dataset"]).objective_penalty_weights
        grids = {objective: list(own[objective]) for objective in options["objectives"] if objective in own}
        payload |= {"objective_grids": grids} if grids else {}
    payload = json.dumps(payload, sort_keys=True, default=str)
    return store_key(json.loads(payload))


def run_study(name: str, seeds: list[int], cache_dir: Path | None, device: torch.device) -> pd.DataFrame:
    """Every seed of the study ``name``, each read from ``cache_dir`` when a finished, sound piece
    made for this study key and seed is there (:func:`featlib.store.files.cached`), else computed under
    the piece's lock and written verified."""
    study = STUDIES.get(name)
    key = study_key(name)
    # a study that learns the protocol's features keeps them where the pieces' runs keep theirs
    takes_cache = "cache_dir" in inspect.signature(study).parameters
    extra = {"cache_dir": Path(cache_dir) / "cmnist"} if takes_cache and cache_dir is not None else {}
    frames = []
    for seed in tqdm(seeds, desc=name):
        path = None if cache_dir is None else Path(cache_dir) / f"{name}-seed{seed}-{key}.csv"
        meta = cached_meta(key, seed, device=getattr(device, "type", device), study=name)

        def check(frame: pd.DataFrame, seed=seed) -> str | None:
            if not len(frame) or "seed" not in frame.columns or set(frame["seed"]) != {seed}:
                return f"it does not hold rows of seed {seed} only"
            return None

        frames.append(cached(path, lambda p, check=check, seed=seed: read_verified_csv(
                                 p, check, expect={"key": key, "seed": seed, "study": name}),
                             lambda seed=seed: study(seed, device, **extra),
                             lambda p, f, meta=meta: write_verified_csv(p, f, meta), what=f"cached {name} piece"))
    return pd.concat(frames, ignore_index=True)


def at_steps(history: pd.DataFrame, steps, keys) -> pd.DataFrame:
    """Mean and std over seeds of the worst-test accuracy at the evaluation steps ``steps``."""
    picked = history[history["step"].isin(steps)]
    return (picked.groupby(keys + ["step"])["worst_test_acc"]
            .agg(mean="mean", std=lambda v: float(np.std(v)), n_seeds="count").reset_index())


def erm_nf_erm_summary(frame: pd.DataFrame, steps=(501, 1001)) -> pd.DataFrame:
    """The ERM-NF x ERM cell under each risk (``sum``: Eq. (2), ours; ``mean``: the reference's
    pooled mean) after ``steps`` steps (the evaluation step closest to each): worst-test accuracy,
    mean and std over seeds."""
    evaluated = np.array(sorted(frame["step"].unique()))
    chosen = [int(evaluated[np.abs(evaluated - s).argmin()]) for s in steps]
    return at_steps(frame, chosen, ["risk"])


def frozen_steps_summary(frame: pd.DataFrame, steps=(1000, 2500, 5000)) -> pd.DataFrame:
    """For each (objective, head L2, step): the penalty weight with the best mean worst-test
    accuracy over seeds at that step (test-domain selection, as Table 2), its mean, std and the
    number of seeds. The steps: featlib 0.4's length, today's protocol's
    (:data:`featlib.hparams.APPENDIX_F1` ``ood_steps``, whose evidence cites this study at 2,500) and
    the longest scored."""
    evaluated = np.array(sorted(frame["step"].unique()))
    chosen = [int(evaluated[np.abs(evaluated - s).argmin()]) for s in steps]
    cells = at_steps(frame, chosen, ["objective", "head_l2", "penalty_weight"])
    best = cells.loc[cells.groupby(["objective", "head_l2", "step"])["mean"].idxmax()]
    return best.reset_index(drop=True)


def clove_01_summary(frame: pd.DataFrame, steps: tuple[int, ...] | None = None) -> pd.DataFrame:
    """A ``clove-01`` study per (variant, step, learner): Table 2's rule (:func:`select_best`) over
    each variant's configurations at each of ``steps`` (default: the authors' 501-step length, scored
    at step 500, and the protocol's OOD length), with mean, std and number of seeds; variants in
    :data:`CLOVE_VARIANTS`' order."""
    from ..hparams import APPENDIX_F1
    from .colored_mnist import select_best

    steps = steps or (500, int(APPENDIX_F1["ood_steps"].value))
    order = [name for name, _, _ in CLOVE_VARIANTS]
    parts = []
    for (variant, step), runs in frame[frame["step"].isin(steps)].groupby(["variant", "step"]):
        parts.append(select_best(runs.drop(columns=["step", "variant"])).assign(variant=variant, step=int(step)))
    columns = ["variant", "step", "dataset", "learner", "objective", "penalty_weight", "pretrain_epochs", "mean",
               "std", "n_seeds"]
    if not parts:
        return pd.DataFrame(columns=columns)
    out = pd.concat(parts, ignore_index=True)
    out["_order"] = out["variant"].map({v: i for i, v in enumerate(order)}).fillna(len(order))
    out = out.sort_values(["_order", "step", "learner"]).drop(columns="_order").reset_index(drop=True)
    return out[[c for c in columns if c in out] + [c for c in out if c not in columns]]


def clove_grid_summary(frame: pd.DataFrame, table2_runs: pd.DataFrame | None = None,
                       step: int | None = None) -> pd.DataFrame:
    """The ``clove-grid-01`` study beside Table 2: per (grid, learner), the ColoredMNIST-01 CLOvE
    cell Table 2's rule (:func:`select_best`) gives at the protocol's OOD length (``step``), its
    mean, std and seeds, and its distance from the paper's cell in paper stds (``z``). Grid
    ``"script"`` is the study's (:data:`RFC_CLOVE_WEIGHTS_01`); ``"f1"`` Appendix F.1's, from
    ``table2_runs`` (pieces made under it: results/cmnist-table2-clove01-appendix-f1), when given:
    only a (learner, seed) whose runs tried exactly Appendix F.1's five weights counts, so runs of
    the decided grid, which shares two of them, never enter it (a seed that holds both grids' runs
    counts for neither: pass the Appendix F.1 pieces apart)."""
    from ..hparams import APPENDIX_F1
    from .colored_mnist import select_best
    from .paper_values import TABLE2

    step = int(APPENDIX_F1["ood_steps"].value) if step is None else step
    parts = [select_best(frame[frame["step"] == step].drop(columns="step")).assign(grid="script")]
    if table2_runs is not None:
        f1 = table2_runs[(table2_runs["dataset"] == "cmnist01") & (table2_runs["objective"] == "clove")
                         & table2_runs["learner"].isin(set(frame["learner"]))]
        grid = APPENDIX_F1["penalty_weights"].value
        kept = f1.groupby(["learner", "seed"]).filter(lambda runs: same_grid(runs["penalty_weight"], grid))
        if len(f1) and kept.empty:
            warnings.warn("clove_grid_summary: table2_runs hold ColoredMNIST-01 CLOvE runs, but no (learner, seed) "
                          "tried exactly Appendix F.1's five weights: pass the Appendix F.1 pieces "
                          "(results/cmnist-table2-clove01-appendix-f1), not Table 2's", stacklevel=2)
        f1 = kept
        if len(f1):
            parts.append(select_best(f1).assign(grid="f1"))
    out = pd.concat(parts, ignore_index=True)
    paper = [TABLE2[r.dataset][r.objective][r.learner] for r in out.itertuples()]
    out["z"] = [(100 * r.mean - mean) / std for r, (mean, std) in zip(out.itertuples(), paper)]
    return out[["grid", "dataset", "learner", "objective", "penalty_weight", "pretrain_epochs", "mean", "std",
                "n_seeds", "z"]]


def bonsai_dro_length_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (DRO length, objective): the frozen-feature configuration with the best mean worst-test
    accuracy over seeds (test-domain selection, as Table 2), its mean, std and number of seeds."""
    from .colored_mnist import select_best

    parts = [select_best(rows).assign(dro_epochs=int(length)) for length, rows in frame.groupby("dro_epochs")]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["dro_epochs", "objective", "penalty_weight", "pretrain_epochs", "mean", "std", "n_seeds"])



def ood_length_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 2 at each evaluated length of an ``ood-length`` study, set against the paper's: per
    (dataset, step, selection rule, learner), the mean over penalised objectives of the cells'
    distance from the paper's in paper standard deviations (``z``; the paper's zero-std cells left
    out), and the cells' mean (``mean``, %), with the number of cells and seeds. ``score`` is the
    selection rule: ``worst_test_acc`` (the test environments, Table 2's) or ``val_acc``."""
    from .colored_mnist import paper_distance, select_best

    rows = []
    seeds = frame["seed"].nunique()
    for step, part in frame[frame["step"] > 0].groupby("step"):
        runs = part.drop(columns="step")
        for score in ("worst_test_acc", "val_acc"):
            best = select_best(runs[runs["objective"] != "erm"], score=score)
            z = paper_distance(best).set_index(["dataset", "learner"])["z"]
            for (dataset, learner), cells in best.groupby(["dataset", "learner"]):
                rows.append({"dataset": dataset, "step": int(step), "score": score, "learner": learner,
                             "z": float(z.get((dataset, learner), np.nan)), "mean": 100 * float(cells["mean"].mean()),
                             "cells": len(cells), "n_seeds": seeds})
    return pd.DataFrame(rows)


#: The saliency studies by size, largest first (chapter 06 leads with the largest committed): the
#: paper's form (the CNN on the colour-patch variant), then Table 2's MLP on the two-channel images
#: at full size, then the CNN on fewer images. A CNN study's maps are the study ``<name>-maps``.
SALIENCY_STUDIES = ("saliency", "saliency-mlp", "saliency-20k", "saliency-10k", "saliency-5k", "saliency-2k")
SALIENCY_MEASURES = ("colour_share_gradcam", "colour_share_ig", "colour_flip_rate", "ood_acc")


def saliency_map_images(maps: pd.DataFrame, seed: int, mnist_source: str = "auto") -> np.ndarray:
    """The OOD test images of a ``saliency-maps`` study's seed, ``(n, C, H, W)`` in [0, 1], drawn
    again from the data (:func:`featlib.data.make_colored_mnist` with the study's dataset, seed and
    sizes), checked against the labels and colours the study recorded for them."""
    from ..data.colored_mnist import make_colored_mnist

    part = maps[maps["seed"] == seed]
    if part.empty:
        raise ValueError(f"seed must be one of the maps' seeds {sorted(set(maps['seed']))}; got {seed!r}")
    first = part.iloc[0]
    per_image = part.drop_duplicates("image").sort_values("image")
    n = int(per_image["image"].max()) + 1
    data = make_colored_mnist(str(first["dataset"]), int(seed), n_train=int(first["n_train"]),
                              n_test=int(first["n_test"]), source=mnist_source)
    env = data.test[0]
    drawn = pd.DataFrame({"label": env.y[:n].int().cpu().numpy(), "colour": env.colour[:n].cpu().numpy()})
    recorded = per_image[["label", "colour"]].reset_index(drop=True).astype(int)
    if not drawn.astype(int).equals(recorded):
        raise ValueError(f"the images drawn again for seed {seed} do not carry the labels and colours the maps "
                         "recorded; the data has changed since the study ran: run it again")
    return env.images(slice(0, n)).cpu().numpy()


def saliency_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """A ``saliency`` study over its seeds: per model (in the study's order), the mean and std over
    seeds (numpy's, ddof=0) of each of :data:`SALIENCY_MEASURES` it holds (``<measure>`` and
    ``<measure>_std``), with ``n_seeds``, ``n_train`` and ``dataset``."""
    measures = [m for m in SALIENCY_MEASURES if m in frame]
    order = list(dict.fromkeys(frame["model"]))
    grouped = frame.groupby("model", sort=False)
    out = grouped[measures].mean()
    out = out.join(grouped[measures].agg(lambda v: float(np.std(v))).add_suffix("_std"))
    out["n_seeds"] = grouped["seed"].nunique()
    out["n_train"] = grouped["n_train"].first()
    if "dataset" in frame:
        out["dataset"] = grouped["dataset"].first()
    return out.reindex(order).reset_index()


def saliency_direction(frame: pd.DataFrame) -> pd.DataFrame:
    """The direction chapter 06 tests (Sec. 6, Fig. 4: FeAT's features lean on colour less than
    ERM's), per seed and measure: FeAT's share on colour (or flip rate) minus that of the
    longest-trained ERM snapshot, in points; ``holds`` where it is negative. One row per (seed,
    measure)."""
    erm = [m for m in dict.fromkeys(frame["model"]) if m.startswith("ERM ")]
    feat = [m for m in dict.fromkeys(frame["model"]) if m.startswith("FeAT ")]
    if not erm or not feat:
        return pd.DataFrame(columns=["seed", "measure", "feat_minus_erm", "holds", "erm_model"])
    longest = max(erm, key=lambda m: int(m.split()[1]))
    rows = []
    for seed, part in frame.groupby("seed"):
        by_model = part.set_index("model")
        for measure in [m for m in SALIENCY_MEASURES if m != "ood_acc" and m in frame]:
            diff = 100 * (by_model.loc[feat[0], measure] - by_model.loc[longest, measure])
            rows.append({"seed": int(seed), "measure": measure, "feat_minus_erm": float(diff), "holds": bool(diff < 0),
                         "erm_model": longest})
    return pd.DataFrame(rows)


#: What each study that can explain a frozen cell of Table 2 varies, as a reader reads it: the
#: choice and where the paper leaves it open (chapter 04, "Cells far from the paper's").
STUDY_CHOICES = {
    "ood-length-025": "the OOD stage's length, which the paper never gives",
    "ood-length-01": "the OOD stage's length, which the paper never gives",
    "ood-length-025-erm": "the OOD stage's length, which the paper never gives",
    "frozen-steps": "the OOD stage's length and the head's L2, neither of which the paper gives for this stage",
    "bonsai-dro-length": "Bonsai's DRO round, 150 epochs in Table 6 and 500 in Appendix F.1's text",
    "clove-01": "the authors' CLOvE code: one 512-example minibatch per environment and step, no L2, 501 steps",
    "clove-grid-01": "CLOvE's penalty weights, 1e1 to 1e5 for every objective in Appendix F.1 and 1 to 100 for "
                     "CLOvE alone in the Bonsai authors' ColoredMNIST-01 script",
}


def same_grid(weights, grid) -> bool:
    """Whether the penalty weights a study's runs tried (``weights``, with repeats) are exactly
    ``grid``, in any order, to float rounding."""
    tried, grid = np.unique(np.asarray(weights, dtype=float)), np.unique(np.asarray(grid, dtype=float))
    return len(tried) == len(grid) and bool(np.allclose(tried, grid, rtol=1e-9, atol=0.0))


def _best_cell(rows: pd.DataFrame) -> pd.Series | None:
    """Table 2's rule on one cell's runs: the configuration with the best mean worst-test accuracy."""
    from .colored_mnist import select_best

    best = select_best(rows)
    return None if best.empty or pd.isna(best["mean"].iloc[0]) else best.iloc[0]


def cell_evidence(studies: dict[str, pd.DataFrame], dataset: str, learner: str, objective: str,
                  protocol: CMNISTProtocol | None = None) -> pd.DataFrame:
    """What the committed gap studies (``{study name: frame}``, as :func:`run_study` writes them)
    measured on one frozen cell of Table 2, each cell chosen by Table 2's rule (the configuration
    with the best mean worst-test accuracy over the study's seeds): one row per setting a study
    tried, with ``study``, ``change`` (the setting, in words), ``protocol`` (True where the
    setting is the protocol's own: its OOD length and the penalty weights it gives the objective,
    :meth:`CMNISTProtocol.penalty_grid`; ``protocol``: the default :class:`CMNISTProtocol` of
    ``dataset``, so -01 CLOvE's is the decided grid of :data:`featlib.hparams.OBJECTIVE_GRIDS`;
    ``frozen-steps``, which studies V-REx and Fishr and tried 1e6 beyond their grid, is judged by its
    length and head L2 alone),
    ``mean``, ``std`` (fractions, over seeds) and ``n_seeds``. Frozen IB-IRM trains as IRMv1 (see
    the module docstring), so its cell reads IRMv1's rows. Studies that do not cover the cell add
    no rows."""
    protocol = protocol or CMNISTProtocol(dataset=dataset)
    trained_as = "irmv1" if objective == "ib_irm" else objective
    rows = []

    def protocols_grid(runs: pd.DataFrame) -> bool:
        return trained_as == "erm" or same_grid(runs["penalty_weight"], protocol.penalty_grid(trained_as))

    def add(study, change, is_protocol, best):
        if best is not None:
            rows.append({"study": study, "change": change, "protocol": bool(is_protocol), "mean": float(best["mean"]),
                         "std": float(best["std"]), "n_seeds": int(best["n_seeds"])})

    for study, frame in studies.items():
        if frame is None or frame.empty or "dataset" not in frame or dataset not in set(frame["dataset"]):
            continue
        part = frame[frame["dataset"] == dataset]
        if study.startswith("ood-length") or study == "clove-01":
            part = part[(part["learner"] == learner) & (part["objective"] == trained_as) & (part["step"] > 0)]
            variants = part.groupby("variant") if "variant" in part else [("protocol", part)]
            steps = (500, protocol.ood_steps) if study == "clove-01" else sorted(part["step"].unique())
            for variant, runs in variants:
                for step in steps:
                    at = runs[runs["step"] == step].drop(columns=["step", "variant"], errors="ignore")
                    if at.empty:
                        continue
                    change = f"{int(step):,} OOD steps" if variant == "protocol" else f"{variant} at {int(step):,} steps"
                    own_grid = protocols_grid(at)
                    if study == "clove-01" and variant == "protocol":  # the protocol's code, on the study's grid
                        change = f"the protocol's CLOvE{'' if own_grid else ' code'} at {int(step):,} steps"
                    if not own_grid:  # said where a study's weights are not the protocol's
                        change += f" (weights {', '.join(f'{w:g}' for w in sorted(set(at['penalty_weight'])))})"
                    add(study, change, variant == "protocol" and step == protocol.ood_steps and own_grid, _best_cell(at))
        elif study == "clove-grid-01":
            part = part[(part["learner"] == learner) & (part["objective"] == trained_as)
                        & (part["step"] == protocol.ood_steps)]
            if not part.empty:
                weights = ", ".join(f"{w:g}" for w in sorted(part["penalty_weight"].unique()))
                add(study, f"the Bonsai authors' -01 grid for CLOvE (weights {weights})", protocols_grid(part),
                    _best_cell(part.drop(columns="step")))
        elif study == "frozen-steps" and learner == "erm":
            part = part[part["objective"] == trained_as]
            if part.empty:
                continue
            for best in frozen_steps_summary(part, steps=(1000, protocol.ood_steps, 5000)).to_dict("records"):
                add(study, f"{int(best['step']):,} OOD steps, head L2 {best['head_l2']:g}",
                    best["step"] == protocol.ood_steps and np.isclose(best["head_l2"], protocol.l2), best)
        elif study == "bonsai-dro-length" and learner == "bonsai":
            part = part[part["objective"] == trained_as]
            for length, runs in part.groupby("dro_epochs"):
                add(study, f"a DRO round of {int(length)} epochs (1,000 OOD steps)", False,
                    _best_cell(runs.drop(columns="dro_epochs")))
    return pd.DataFrame(rows, columns=["study", "change", "protocol", "mean", "std", "n_seeds"])
