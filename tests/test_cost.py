"""The cost benchmark: its memory count, its step hook, its ratios and its targets.

No test here asserts a timing: speed targets are printed by the benchmark, not tested."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from featlib.cost import (
    CMNISTCost, CostSettings, PeakMemory, StepRecorder, check_targets, measure, run_cost_benchmark, schedule_estimate,
    summarise,
)
from featlib.cost.recorder import LiveTensorBytes
from featlib.data import make_colored_mnist
from featlib.feature_learning import FEATURE_LEARNERS
from featlib.training.profiling import recording, training_step

CPU = torch.device("cpu")
MB = 2**20


def test_live_tensor_bytes_counts_new_storage_once_and_subtracts_what_is_freed():
    base = torch.zeros(1000)  # 4,000 bytes alive before
    with LiveTensorBytes("cpu", [base]) as mode:
        assert mode.current == 4000
        a = torch.ones(256, 1024)  # 1 MiB
        view = a[:10].t()  # a view: same storage, not counted again
        assert mode.current == 4000 + MB
        b = a * 2  # another MiB
        del a, view
        assert mode.current == 4000 + MB  # a's storage freed, b's alive
        c = torch.ones(512, 1024)  # 2 MiB
        assert mode.peak == 4000 + 3 * MB
        del b, c
    assert mode.current == 4000


def test_peak_memory_of_a_cpu_step_counts_what_was_alive_before():
    x = torch.randn(4096, 256)  # 4 MiB of data, alive before the step
    w = torch.nn.Parameter(torch.randn(256, 256))
    with PeakMemory(CPU) as peak:
        h = x @ w  # 4 MiB of activations
        h.relu().sum().backward()
        del h
    # data + parameter + activation + its ReLU + the gradient (at least); the whole process holds more
    assert peak.bytes >= x.nbytes + w.nbytes + 2 * 4 * MB + w.nbytes
    assert peak.bytes < x.nbytes + w.nbytes + 6 * 4 * MB + 64 * MB


def test_step_recorder_skips_warmup_measures_memory_once_then_times():
    recorder = StepRecorder(warmup=2, memory=True)
    with recording(recorder):
        for _ in range(7):
            with training_step("stage a", CPU):
                torch.ones(100).sum()
        with training_step("stage b", CPU):
            pass
    a, b = recorder.stages["stage a"], recorder.stages["stage b"]
    assert (a.steps, len(a.seconds)) == (7, 4) and a.peak_bytes is not None and a.peak_bytes > 0
    assert (b.steps, len(b.seconds), b.peak_bytes) == (1, 0, None)
    assert np.isnan(b.median_seconds)
    with training_step("after", CPU):  # no recorder installed: nothing is recorded
        pass
    assert "after" not in recorder.stages


def test_the_hook_sees_every_step_of_the_real_learners_under_their_stage_names():
    data = make_colored_mnist("cmnist025", 1, n_train=300, n_test=100)
    recorder = StepRecorder(warmup=0, memory=False)
    with recording(recorder):
        FEATURE_LEARNERS.get("feat")(data, 1, epochs_per_round=5, max_rounds=3, termination_threshold=1e-9, hidden_dim=8)
        FEATURE_LEARNERS.get("bonsai")(data, 1, round_epochs=(4, 6), synthesis_epochs=3, hidden_dim=8)
    steps = {s: m.steps for s, m in recorder.stages.items()}
    assert steps == {"feat round 1": 5, "feat round 2": 5, "feat round 3": 5, "bonsai round 1": 4,
                     "bonsai round 2": 6, "bonsai synthesis": 3}  # the stage names of both loops


@pytest.fixture(scope="module")
def small_case():
    case = CMNISTCost(n_train=600, n_test=100, hidden_dim=16)
    case.prepare(CPU)
    return case


def test_measure_labels_rounds_and_memory_follows_the_stored_state(small_case):
    settings = CostSettings(rounds=4, steps=4, warmup=1, repeats=1)
    frames = {m: measure(small_case, m, settings, CPU) for m in settings.learners}
    assert frames["erm"]["round"].tolist() == ["1"]
    assert frames["bonsai"]["round"].tolist() == ["1", "2", "3", "4", "synthesis"]
    for m in ("feat", "ifeat"):
        assert frames[m]["round"].tolist() == ["1", "2", "3", "4"]
        assert (frames[m]["timed_steps"] == 2).all()
    # Memory on the CPU is deterministic. FeAT stores one more head and two more sets every round
    # and evaluates every stored head; iFeAT keeps the latest sets and evaluates one head, so from
    # round 2 on its peak grows only by the accepted round's head kept for the final average.
    feat, ifeat = frames["feat"]["peak_bytes"].to_numpy(), frames["ifeat"]["peak_bytes"].to_numpy()
    one_head = 4 * (16 + 1)  # Linear(16, 1) in float32
    assert (np.diff(ifeat[1:]) == one_head).all()
    assert (np.diff(feat[1:]) > 2 * 600 + one_head).all()  # two bool masks over 600 examples, a head, more
    # and round 1 of both is an ERM step on the same model and batch, plus the mask of D^a_0 = D_tr
    assert feat[0] == ifeat[0] == frames["erm"]["peak_bytes"].iloc[0] + 600


def _frame(step_ms: dict, peak_mb: dict) -> pd.DataFrame:
    rows = []
    for (learner, rnd), ms in step_ms.items():
        for repeat, jitter in enumerate((0.99, 1.0, 1.01)):
            rows.append({"benchmark": "b", "repeat": repeat, "learner": learner, "round": rnd, "stage": f"{learner} {rnd}",
                         "steps": 10, "timed_steps": 8, "step_s": ms * jitter / 1e3,
                         "peak_bytes": peak_mb[(learner, rnd)] * MB, "run_wall_s": 1.0})
    return pd.DataFrame(rows)


def test_ratios_and_targets_on_known_numbers():
    step = {("erm", "1"): 10.0, ("ifeat", "1"): 10.0, ("ifeat", "2"): 12.0, ("ifeat", "3"): 12.0,
            ("feat", "1"): 10.0, ("feat", "2"): 11.0, ("feat", "3"): 12.0, ("feat", "4"): 13.0}
    peak = {k: (100.0 if k[1] == "1" else 120.0) for k in step}
    summary = summarise(_frame(step, peak))
    ifeat = summary[summary["learner"] == "ifeat"].set_index("round")
    assert ifeat.loc["2", "time_x_erm"] == pytest.approx(1.2)
    assert ifeat.loc["3", "memory_x_erm"] == pytest.approx(1.2)
    targets = check_targets(summary).set_index("target")
    assert targets["met"].all()
    # a step 1.4x ERM, memory 1.6x ERM and a quadratic FeAT all fail their targets
    step.update({("ifeat", "3"): 14.0, ("feat", "3"): 14.0, ("feat", "4"): 19.0})
    peak.update({("ifeat", "3"): 160.0})
    failed = check_targets(summarise(_frame(step, peak)))
    assert not failed["met"].any()


def test_schedule_estimate_uses_each_rounds_step_time():
    step = {("erm", "1"): 10.0, ("bonsai", "1"): 10.0, ("bonsai", "2"): 20.0, ("bonsai", "synthesis"): 30.0,
            ("feat", "1"): 10.0, ("feat", "2"): 11.0}
    summary = summarise(_frame(step, {k: 1.0 for k in step}))
    est = schedule_estimate(summary, {"b": {"erm": [150], "bonsai": [50, 150, 500], "feat": [150, 150, 150]}})
    est = est.set_index("learner")["estimated_s"]
    assert est["erm"] == pytest.approx(1.5)
    assert est["bonsai"] == pytest.approx((50 * 10 + 150 * 20 + 500 * 30) / 1e3)
    assert est["feat"] == pytest.approx((150 * 10 + 150 * 11 + 150 * 11) / 1e3)  # round 3: last measured


def test_a_rerun_reuses_finished_measurements(small_case, tmp_path, monkeypatch):
    settings = CostSettings(learners=("erm", "ifeat"), rounds=2, steps=3, warmup=1, repeats=1)
    first = run_cost_benchmark([small_case], settings, device=CPU, out=tmp_path, progress=False)
    assert len(list((tmp_path / "records").glob("*.csv"))) == 2

    def fail(*args, **kwargs):
        raise AssertionError("a finished measurement was run again")

    monkeypatch.setattr(small_case, "run", fail)
    again = run_cost_benchmark([small_case], settings, device=CPU, out=tmp_path, progress=False)
    pd.testing.assert_frame_equal(first, again, check_dtype=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"learners": ("feat",)}, "learners must include 'erm'"),
    ({"learners": ("erm", "rfc")}, "learners must be one of 'erm', 'bonsai', 'ifeat', 'feat'; got 'rfc'"),
    ({"steps": 3, "warmup": 3}, "steps must be an integer in [5, inf]; got 3"),
    ({"repeats": 0}, "repeats must be an integer in [1, inf]; got 0"),
])
def test_bad_settings_name_the_parameter(kwargs, message):
    with pytest.raises(ValueError) as err:
        CostSettings(**kwargs)
    assert message in str(err.value)


def test_cli_rejects_bad_input_before_measuring(tmp_path):
    out = subprocess.run([sys.executable, "-m", "featlib.cli.cost", "--benchmarks", "cmnist", "--n-train", "0"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "n_train must be an integer in [2, 50000]; got 0" in out.stderr


def test_cli_prints_the_table_and_targets_and_writes_provenance(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "featlib.cli.cost", "--benchmarks", "cmnist", "--n-train", "400", "--hidden-dim", "8",
         "--rounds", "3", "--steps", "4", "--warmup", "1", "--repeats", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "time/ERM" in out.stdout and "memory/ERM" in out.stdout
    assert "iFeAT step time <= 1.3x ERM" in out.stdout and "FeAT step time linear in k" in out.stdout
    import json
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert {"command", "commit", "device", "wall_time_s", "torch"} <= set(prov)
    summary = pd.read_csv(tmp_path / "summary.csv", dtype={"round": str})
    assert set(summary["learner"]) == {"erm", "bonsai", "feat", "ifeat"}


def test_the_wilds_case_measures_the_minibatch_learners_round_by_round(tmp_path):
    from featlib.cost import WildsCost

    case = WildsCost(root=str(tmp_path / "wilds"), backbone="small_cnn", resolution=32, batch_size=8)
    case.prepare(CPU)
    settings = CostSettings(rounds=2, steps=3, warmup=0, repeats=1)
    frames = {m: measure(case, m, settings, CPU) for m in settings.learners}
    assert {m: f["round"].tolist() for m, f in frames.items()} == {
        "erm": ["1"], "bonsai": ["1", "2", "synthesis"], "feat": ["1", "2"], "ifeat": ["1", "2"]}
    assert all((f["steps"] == 3).all() and (f["timed_steps"] == 2).all() for f in frames.values())
    assert case.schedule("feat") == [5000, 5000] and case.schedule("bonsai") == [5000, 5000, 5000]
    assert "camelyon17, small CNN at 32px, batch 8" in case.describe()
