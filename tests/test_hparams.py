"""One home for the paper's hyper-parameters (featlib.hparams): every value says where it comes
from, and every protocol, learner and preset takes its defaults from there."""
import dataclasses
import inspect
import re
import subprocess
import sys

import pytest

from featlib import hparams
from featlib.data.wilds_data import WILDS_DATASETS
from featlib.experiments.cmnist_presets import PROTOCOL_PRESETS
from featlib.experiments.colored_mnist import SCHEDULES, CMNISTProtocol
from featlib.feature_learning import FEATURE_LEARNERS
from featlib.feature_learning.termination import DEFAULT_TERMINATION_THRESHOLD

#: A source names a table, section, algorithm or equation of the paper, a file of the authors'
#: code, or says the value is ours (and why).
SOURCE = re.compile(r"Table \d+|Appendix [A-F](\.\d)?|Sec\. \d|Algorithm \d|Eq\. \(?\d|^ours: .{20,}|\.(py|sh)\b")

TABLES = {"APPENDIX_F1": hparams.APPENDIX_F1, "REFERENCE_CODE": hparams.REFERENCE_CODE,
          "RFC_ERM_NF": hparams.RFC_ERM_NF, **{f"WILDS[{d}]": t for d, t in hparams.WILDS.items()}}


@pytest.mark.parametrize("table", TABLES, ids=str)
def test_every_value_says_where_it_comes_from(table):
    for name, h in TABLES[table].items():
        assert isinstance(h, hparams.HParam) and SOURCE.search(h.source), f"{table}.{name}: {h.source!r}"


def test_the_colored_mnist_protocol_defaults_are_appendix_f1():
    defaults = {f.name: f.default for f in dataclasses.fields(CMNISTProtocol)}
    for name, h in hparams.APPENDIX_F1.items():
        assert defaults[name] == h.value, name
    assert DEFAULT_TERMINATION_THRESHOLD == hparams.APPENDIX_F1["termination_threshold"].value == 1.30
    assert SCHEDULES is hparams.TABLE6


def test_the_learners_defaults_are_table_6_and_appendix_f1():
    def defaults(fn):
        return {k: p.default for k, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}

    table6 = hparams.TABLE6["cmnist025"]
    assert defaults(FEATURE_LEARNERS.get("erm").algorithm)["steps"] == table6["erm"]["epochs"]
    bonsai = defaults(FEATURE_LEARNERS.get("bonsai").algorithm)
    assert (tuple(bonsai["round_steps"]), bonsai["synthesis_steps"]) == (table6["bonsai"]["round_epochs"],
                                                                          table6["bonsai"]["synthesis_epochs"])
    from featlib.feature_learning.feat import _feat
    feat = defaults(_feat)
    assert feat["steps_per_round"] == table6["ifeat"]["epochs_per_round"]
    assert feat["retain_weight"] == hparams.APPENDIX_F1["retain_weight"].value
    assert feat["max_rounds"] == hparams.APPENDIX_F1["max_rounds"].value
    call = defaults(FEATURE_LEARNERS.get("ifeat").__call__)
    assert (call["hidden_dim"], call["lr"], call["l2"]) == (256, 1e-3, 1e-3)


@pytest.mark.parametrize("dataset", list(hparams.WILDS))
def test_every_wilds_dataset_takes_tables_10_and_12_from_the_table(dataset):
    spec = WILDS_DATASETS.get(dataset)
    for name, h in hparams.WILDS[dataset].items():
        assert getattr(spec, name) == h.value, (dataset, name)
    assert set(hparams.WILDS) == set(WILDS_DATASETS.names())


def test_the_presets_are_the_reference_tables():
    assert PROTOCOL_PRESETS.get("reference").values == hparams.values(hparams.REFERENCE_CODE)
    assert PROTOCOL_PRESETS.get("rfc-erm-nf").values == hparams.values(hparams.RFC_ERM_NF)
    assert PROTOCOL_PRESETS.get("featlib").values == {}  # Appendix F.1's values: the protocol's defaults


def test_the_tables_print_with_their_sources():
    out = subprocess.run([sys.executable, "-m", "featlib.hparams"], capture_output=True, text=True, check=True).stdout
    assert "Appendix F.1: Adam with a learning rate of 1e-3" in out and "WILDS rxrx1 (Tables 10 and 12)" in out
    assert "coloredmnist_anneal.sh" in out and "Table 6" in out


def test_the_decisions_table_states_the_values_the_code_runs():
    """hparams.DECISIONS is prose for the book (chapter 04): each value it states is the one the
    protocol, the learners and the tables actually use, so the two cannot drift apart."""
    from featlib.experiments.colored_mnist import select_best
    from featlib.feature_learning.feat_rounds import DEFAULT_HEAD_COMBINATION
    from featlib.training.ood_stage import OODStageConfig

    d = {name: h.value for name, h in hparams.DECISIONS.items()}
    p = CMNISTProtocol()
    dro = hparams.TABLE6["cmnist025"]["bonsai"]["round_epochs"][1]
    assert d["Bonsai's DRO round, ColoredMNIST-025"] == f"{dro} epochs" == "500 epochs"
    assert d["OOD stage's length, frozen features"] == f"{p.ood_steps} steps"
    assert d["OOD stage's length, ERM-NF"] == f"{p.nf_ood_steps} steps"
    assert p.ood_config("irmv1").steps == p.ood_steps and p.ood_config("irmv1", "nf").steps == p.nf_ood_steps
    assert OODStageConfig("erm").l2_scope == "all" and p.ood_config("fishr").l2_scope == "all"
    assert d["The head's L2 in the OOD stage"].startswith(f"{p.l2:g} on every trained tensor")
    assert DEFAULT_HEAD_COMBINATION == "sum" and p.head_combination == "sum"
    assert d["FeAT's combined head"] == "the sum of the rounds' heads"
    assert inspect.signature(select_best).parameters["score"].default == "worst_test_acc"
    assert d["How a cell's configuration is chosen"] == "test-domain (oracle) selection"
    assert d["The OOD stage's precision"] == "float32" and p.precision == "fp32"
    assert d["CLOvE's penalty weights, ColoredMNIST-01"].startswith("1, 5, 10, 50, 100 (the Bonsai authors' script)")
    assert p.penalty_weights == (1e1, 1e2, 1e3, 1e4, 1e5) and "clove" not in p.objective_options
    p01 = CMNISTProtocol(dataset="cmnist01")
    assert p01.penalty_grid("clove") == hparams.CLOVE_WEIGHTS_01 == (1.0, 5.0, 10.0, 50.0, 100.0)
    assert p01.penalty_grid("irmv1") == p.penalty_grid("clove") == p.penalty_weights  # CLOvE on -01 alone
    for name, h in hparams.DECISIONS.items():
        assert "Measured" in h.source or "measured" in h.source or "results/" in h.source, name


def test_chapter_09_folds_each_decisions_measurement_under_its_one_paragraph():
    from featbook.ch09_views import decisions_html

    text = decisions_html(hparams.DECISIONS)
    assert text.count("<strong>") == len(hparams.DECISIONS)
    measured = [h for h in hparams.DECISIONS.values() if " Measured" in h.source]
    assert text.count("<summary>What was measured</summary>") == len(measured) > 0
    for block in text.split("<strong>")[1:]:  # the paragraph before the fold stays short
        assert len(block.split("</p>")[0]) < 900, block[:200]
