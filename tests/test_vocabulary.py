"""One name per concept across chapters, profiles, command lines, protocols and results.

The feature learner is ``learner`` (a list of them ``learners``; never ``init``/``inits`` as the
ColoredMNIST code said, nor ``method``/``methods`` as the WILDS and cost code said), FeAT's check
is ``termination_threshold`` and ``termination_rule``, the score of FeAT's final head (the
rounds' heads averaged or summed, ``head_combination``) is ``*_combined_head``, and the multiplier of the paper's training
length is ``epoch_scale``. Committed results written under the old names are read under these
(:mod:`featlib.experiments.results`), never rewritten."""
import dataclasses
from pathlib import Path

import pytest
import yaml

from featbook.notebook_params import parameter_defaults
from featbook.notebooks import list_notebooks
from featlib.cost.benchmark import CostSettings
from featlib.experiments.colored_mnist import CMNISTProtocol
from featlib.experiments.results import load_rounds
from featlib.experiments.wilds_experiment import WildsProtocol
from featlib.feature_learning.minibatch_loop import WildsTrainConfig

ROOT = Path(__file__).resolve().parents[1]
#: Old names of one concept each, and the name that replaced them.
RETIRED = {"init": "learner", "inits": "learners", "method": "learner", "methods": "learners",
           "termination": "termination_threshold or termination_rule", "threshold": "termination_threshold",
           "scale": "epoch_scale"}


def keys(tree) -> set[str]:
    """Every mapping key in a nested YAML document."""
    if isinstance(tree, dict):
        return set(tree) | {k for v in tree.values() for k in keys(v)}
    if isinstance(tree, list):
        return {k for v in tree for k in keys(v)}
    return set()


@pytest.mark.parametrize("notebook", list_notebooks(), ids=lambda p: p.stem[:2])
def test_no_chapter_parameter_uses_a_retired_name(notebook):
    found = set(parameter_defaults(notebook)) & set(RETIRED)
    assert not found, {name: RETIRED[name] for name in found}


@pytest.mark.parametrize("profile", sorted((ROOT / "notebooks" / "profiles").glob("*.yaml")), ids=lambda p: p.name)
def test_no_profile_key_uses_a_retired_name(profile):
    found = keys(yaml.safe_load(profile.read_text())) & set(RETIRED)
    assert not found, {name: RETIRED[name] for name in found}


def test_protocols_and_settings_name_the_learners_alike():
    for cls in (CMNISTProtocol, WildsProtocol, WildsTrainConfig, CostSettings):
        fields = {f.name for f in dataclasses.fields(cls)}
        assert not fields & set(RETIRED), (cls.__name__, fields & set(RETIRED))
    for cls in (CMNISTProtocol, WildsProtocol, CostSettings):
        assert "learners" in {f.name for f in dataclasses.fields(cls)}, cls.__name__
    assert {"epoch_scale"} <= {f.name for f in dataclasses.fields(CMNISTProtocol)} & {f.name for f in dataclasses.fields(WildsProtocol)}


@pytest.mark.parametrize("module, argv", [
    ("featlib.cli.run_cmnist", ["--out", "x"]),
    ("featlib.cli.run_rounds", ["--out", "x"]),
    ("featlib.cli.run_wilds", ["--dataset", "camelyon17", "--root", "r", "--out", "x"]),
    ("featlib.cli.cost", ["--out", "x"]),
])
def test_command_lines_take_learners_and_still_accept_the_old_option(module, argv):
    import importlib

    parse = importlib.import_module(module).parse_args
    new = vars(parse(argv + ["--learners", "erm"]))
    assert new["learners"] == ["erm"] and not set(new) & set(RETIRED)
    old = "--methods" if module.endswith(("run_wilds", "cost")) else "--inits"
    assert vars(parse(argv + [old, "erm"]))["learners"] == ["erm"]


@pytest.mark.parametrize("folder", ["cmnist-rounds", "cmnist-rounds-average-head"])
def test_committed_results_written_under_old_names_read_under_todays(folder):
    loaded = load_rounds(ROOT / "results" / folder)
    columns = set(loaded["rounds"].columns)
    assert {"learner", "termination_threshold", "ood_acc_combined_head"} <= columns
    assert not columns & {"init", "method", "threshold", "ood_acc_average_head"}
    for protocol in loaded["provenance"]["protocols"]:
        assert "learners" in protocol and not set(protocol) & {"inits", "methods", "termination"}


def test_a_cached_piece_written_under_the_old_names_is_still_used(tmp_path):
    import pandas as pd

    from featlib.store.files import cached_meta, read_verified_csv, write_verified_csv

    path = tmp_path / "piece.csv"
    old = pd.DataFrame({"dataset": ["cmnist025"], "init": ["erm"], "seed": [1], "worst_test_acc": [0.5]})
    write_verified_csv(path, old, cached_meta("k", 1, init="erm"))  # as featlib 0.4 wrote it
    frame = read_verified_csv(path, lambda f: None if "learner" in f.columns else "no learner column",
                              expect={"key": "k", "seed": 1, "learner": "erm"})
    assert frame["learner"].tolist() == ["erm"] and "init" not in frame.columns


def test_a_checkpoint_or_cache_saved_under_the_old_round_names_is_read_under_todays(tmp_path):
    """A WILDS checkpoint of a finished learner, saved when the combined head's scores were
    ``*_average_head``, gives rows under today's names (the same rename the ColoredMNIST feature
    cache and the committed results go through)."""
    import torch
    from torch import nn

    from featlib.store.legacy import ROW_ALIASES
    from featlib.feature_learning.minibatch_loop import MinibatchLoop

    assert ROW_ALIASES == {"ood_acc_average_head": "ood_acc_combined_head",
                           "val_metric_average_head": "val_metric_combined_head",
                           "test_metric_average_head": "test_metric_combined_head"}
    loop = MinibatchLoop.__new__(MinibatchLoop)  # only finished() is exercised: no data needed
    loop.new_model, loop.seed, loop.device = (lambda seed: nn.Linear(2, 1)), 1, torch.device("cpu")
    state = {"learner": "ifeat", "done": True, "model": nn.Linear(2, 1).state_dict(), "steps": 3,
             "rows": [{"round": 1, "val_metric_average_head": 0.5, "test_metric_average_head": 0.4}]}
    learned = loop.finished("ifeat", state)
    assert list(learned.rounds.columns) == ["round", "val_metric_combined_head", "test_metric_combined_head"]
