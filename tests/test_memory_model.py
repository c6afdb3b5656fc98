"""The memory model (:mod:`featlib.training.memory`) against measured peaks, and the preflight's memory line.

Measured peaks: on the CPU, the peak of live tensor memory by :class:`featlib.cost.PeakMemory` (the
cost benchmark's own measurement: every tensor alive when the block starts and every storage made
inside it until freed) around small runs of the real experiments; on the GPU, the committed peaks of
``results/cost`` (``torch.cuda.max_memory_allocated`` on an H200, and the 2-core CPU's PeakMemory).
The model's coefficients were fitted to peaks counted by another counter (``PeakCounter``, of the
tensors made inside a run only) on other, smaller runs; these tests compare it with whole runs.

Stated bounds, the model over the measurement: within :data:`CPU_FACTOR` of a CPU measurement (the
model counts the stages' worst moments and every seed's data as resident, so it may only lie
above by a little) and within :data:`GPU_TOLERANCE` of the committed H200 peaks.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from featlib.cost import CMNISTCost, CostSettings, PeakMemory, WildsCost, run_cost_benchmark
from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment
from featlib.training import memory

CPU = torch.device("cpu")
REPO = Path(__file__).resolve().parents[1]
#: The model over the peak PeakMemory measures on the CPU.
CPU_FACTOR = (0.9, 1.25)
#: The model (with :data:`featlib.training.memory.GPU_EXTRA_BYTES`) over a committed H200 peak.
GPU_TOLERANCE = (0.95, 1.12)


def live_bytes() -> int:
    """Tensor bytes alive in this process now (PeakMemory of an empty block)."""
    with PeakMemory(CPU) as now:
        pass
    return now.bytes


def small_protocol(**fields) -> CMNISTProtocol:
    base = dict(dataset="cmnist025", seeds=(1, 2), objectives=("irmv1",), learners=("erm-nf",),
                penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=6, nf_ood_steps=6, hidden_dim=64,
                n_train=2000, n_test=500, n_val=500, epoch_scale=0.02)
    return CMNISTProtocol(**(base | fields))


def measured_run(protocol: CMNISTProtocol) -> int:
    """PeakMemory's peak around a whole run of ``protocol`` on the CPU, beyond what was alive before."""
    before = live_bytes()
    experiment = ColoredMNISTExperiment(protocol, cache_dir=None, device=CPU, progress=False)
    with PeakMemory(CPU) as peak:
        experiment.run()
    return peak.bytes - before


def test_peak_memory_counts_no_dead_proxy_or_fake_tensor_torch_compile_leaves_alive():
    """torch.compile leaves weakref proxies whose tensor is gone and fake tensors (shapes without
    memory, some of symbolic size) among the live objects: after tests/test_gpu_paths.py, every
    later PeakMemory on the CPU raised ReferenceError, and then reported sympy expressions."""
    import weakref

    from torch._subclasses.fake_tensor import FakeTensorMode

    held = [torch.zeros(10)]
    proxy = weakref.proxy(held[0])
    del held[:]
    with FakeTensorMode():
        fake = torch.empty(2**28)  # 1 GiB that no memory holds
    before = live_bytes()
    with PeakMemory(CPU) as peak:
        made = torch.ones(1000)
    assert isinstance(peak.bytes, int) and peak.bytes - before == 4000
    assert proxy is not None and fake is not None and made is not None


# -- the CPU: whole runs measured now ------------------------------------------------------------
@pytest.mark.parametrize("fields", [
    {},  # ERM-NF, IRMv1: two seeds' stacks of 4 configurations
    {"objectives": ("iga",)},  # the dearest objective of a whole-network stack
    {"objectives": ("fishr",), "learners": ("erm", "ifeat")},  # feature learning, then a frozen-feature stack
], ids=["erm-nf-irmv1", "erm-nf-iga", "frozen-fishr"])
def test_the_model_is_within_its_factor_of_the_peak_measured_around_a_protocol_run(fields):
    protocol = small_protocol(**fields)
    measured = measured_run(protocol)
    modelled = memory.largest(memory.cmnist_peaks([protocol], oracle=False)).bytes
    assert CPU_FACTOR[0] <= modelled / measured <= CPU_FACTOR[1], (modelled, measured, modelled / measured)
    assert memory.protocol_bytes(protocol) >= modelled  # the check before a run also counts the oracle's data


def test_the_model_grows_with_the_stack_as_the_measurement_does():
    """Two and five penalty weights (4 and 10 configurations per ERM-NF stack): both grow, and by
    amounts within the stated factor of each other."""
    small, large = small_protocol(), small_protocol(penalty_weights=(1e1, 1e2, 1e3, 1e4, 1e5))
    measured = [measured_run(p) for p in (small, large)]
    modelled = [memory.largest(memory.cmnist_peaks([p], oracle=False)).bytes for p in (small, large)]
    assert measured[1] > 1.2 * measured[0] and modelled[1] > 1.2 * modelled[0]
    grown = (modelled[1] - modelled[0]) / (measured[1] - measured[0])
    assert CPU_FACTOR[0] <= grown <= CPU_FACTOR[1], (measured, modelled)


def test_the_cost_benchmarks_steps_measured_on_the_cpu_match_the_model(tmp_path, monkeypatch):
    """Both cases in one process as chapter 07 runs them: the ColoredMNIST case's data stay
    resident while the WILDS case (fabricated Camelyon17, the small CNN) runs. Each case's
    learners' measured steps against the model's stage (its dearest learner). The WILDS loader's
    decoded images, which a small split keeps after their first read
    (:class:`featlib.data.wilds_data.RememberingSubset`), stay in the host's memory on a GPU, so
    they are not kept here: the CPU then measures what the device holds. The WILDS case is larger
    than chapter 07's small profile (32 px, batch 12), whose step is a few MB, where the loader's
    batch alone is a tenth of it."""
    from featlib.data import wilds_data

    monkeypatch.setattr(wilds_data.RememberingSubset.__init__, "__defaults__", (0.0,))
    settings = CostSettings(("erm", "bonsai", "ifeat"), rounds=2, steps=3, warmup=1, repeats=1)
    cases = [CMNISTCost(n_train=2000, hidden_dim=64),
             WildsCost(root=str(tmp_path / "wilds"), backbone="small_cnn", resolution=64, batch_size=32)]
    before = live_bytes()
    frame = run_cost_benchmark(cases, settings, device=CPU, progress=False)
    measured = frame.groupby(["benchmark", "learner"])["peak_bytes"].max() - before
    modelled = {case.name: peak.bytes for case, peak in zip(cases, memory.cost_peaks(cases, settings.learners))}
    ratios = {key: modelled[key[0]] / value for key, value in measured.items()}
    assert all(CPU_FACTOR[0] <= r <= CPU_FACTOR[1] for key, r in ratios.items()
               if measured[key] == measured[key[0]].max()), ratios  # each case's dearest learner
    assert all(r >= CPU_FACTOR[0] for r in ratios.values()), ratios  # no learner above the model's stage


# -- committed measurements ----------------------------------------------------------------------
def committed_cost(folder: str) -> tuple[pd.DataFrame, dict]:
    path = REPO / "results" / "cost" / folder
    return pd.read_csv(path / "raw.csv", dtype={"round": str}), json.loads((path / "provenance.json").read_text())


def cost_cases(provenance: dict) -> list:
    """The cases a committed cost run measured, from its provenance's descriptions."""
    cases = []
    for name, text in provenance["cases"].items():
        if name == "cmnist":
            assert text == "ColoredMNIST (cmnist025), MLP H=256, full batch of 50000 images", text
            cases.append(CMNISTCost())
        else:
            assert text == "WILDS camelyon17, densenet121 at 96px, batch 32", text
            cases.append(WildsCost(backbone="densenet121", resolution=96, batch_size=32))
    return cases


def modelled_per_learner(cases, learners) -> dict[tuple[str, str], float]:
    """The model's peak of each (case, learner): the case's stage with that learner alone."""
    return {(case.name, learner): memory.cost_peaks(cases[: i + 1], (learner,))[-1].bytes
            for i, case in enumerate(cases) for learner in learners}


def test_the_committed_cpu_cost_peaks_match_the_model():
    """results/cost/cpu-2core: the 2-core CPU's PeakMemory of each learner's worst round, ColoredMNIST
    (50,000 images, H = 256) and then DenseNet-121 (96 px, batch 32) with the ColoredMNIST case's
    data still resident."""
    raw, provenance = committed_cost("cpu-2core")
    cases = cost_cases(provenance)
    learner_column = "method" if "method" in raw else "learner"  # featlib 0.3's name
    measured = raw.groupby(["benchmark", learner_column])["peak_bytes"].max()
    modelled = modelled_per_learner(cases, provenance["settings"].get("methods") or provenance["settings"]["learners"])
    ratios = {key: modelled[key] / measured[key] for key in modelled}
    assert all(CPU_FACTOR[0] <= r <= CPU_FACTOR[1] for r in ratios.values()), ratios
    assert all(0.97 <= r <= 1.03 for key, r in ratios.items() if key[0] == "cmnist"), ratios  # the fitted learners


def test_the_committed_h200_cost_peaks_match_the_model_within_its_tolerance():
    """results/cost/h200: ``torch.cuda.max_memory_allocated`` of each learner's worst round on an
    H200 (ColoredMNIST, 50,000 images, H = 256) against the model on a GPU. The ratio of every
    learner is in the message; ERM's is 1 by construction (it sets GPU_EXTRA_BYTES)."""
    raw, provenance = committed_cost("h200")
    assert provenance["device"] == "cuda (NVIDIA H200)"
    cases = cost_cases(provenance)
    measured = raw.groupby(["benchmark", "learner"])["peak_bytes"].max()
    modelled = modelled_per_learner(cases, provenance["settings"]["learners"])
    ratios = {key: (modelled[key] + memory.GPU_EXTRA_BYTES) / measured[key] for key in modelled}
    report = ", ".join(f"{learner} {r:.3f}" for (_, learner), r in ratios.items())
    assert all(GPU_TOLERANCE[0] <= r <= GPU_TOLERANCE[1] for r in ratios.values()), report
    assert ratios[("cmnist", "erm")] == pytest.approx(1.0, abs=1e-6), report


def test_the_gpu_constant_is_the_committed_erm_step_less_the_counted_model():
    raw, provenance = committed_cost("h200")
    erm = raw[(raw["benchmark"] == "cmnist") & (raw["learner"] == "erm")]["peak_bytes"]
    assert erm.nunique() == 1  # every repeat measured the same bytes
    counted = memory.cost_peaks(cost_cases(provenance), ("erm",))[0].bytes
    assert memory.GPU_EXTRA_BYTES == pytest.approx(int(erm.iloc[0]) - counted, abs=64)


def test_every_committed_peak_is_compared_here():
    """A sitting that commits new peak measurements (a peak column anywhere under results/) must
    bring its comparison with the model into this file: today only the cost benchmark's are there
    (results/bench holds step times and bytes moved, results/sittings no peaks)."""
    holding = set()
    for path in (REPO / "results").rglob("*.csv"):
        columns = pd.read_csv(path, nrows=0).columns
        if any("peak" in c for c in columns):
            holding.add(path.relative_to(REPO).as_posix())
    assert holding == {f"results/cost/{d}/{f}" for d in ("cpu-2core", "h200") for f in ("raw.csv", "summary.csv")}


# -- the preflight's memory line -------------------------------------------------------------------
def paper_protocols() -> list[CMNISTProtocol]:
    """Chapter 04's default protocols: the paper's, on both datasets."""
    return [CMNISTProtocol(dataset=d) for d in ("cmnist025", "cmnist01")]


def test_a_run_beyond_a_t4_is_one_warning_line_with_the_remedy():
    from featbook import estimate, leaks, runtime

    est = estimate.cmnist(paper_protocols())
    assert est.peak.gpu_bytes > memory.T4_BYTES  # two datasets' data and IGA's stack of 30 networks
    assert est.peak.stage == "ERM-NF stack" and est.peak.sizes["objective"] == "iga"
    text = runtime.preflight_text(est)  # this machine has no GPU: compared with a T4
    warnings = [line for line in text.replace("\xa0", " ").splitlines() if "memory" in line]
    assert len(warnings) == 1
    line = warnings[0]
    assert line.startswith("WARNING: on a GPU this run would need about 15.") and "more than a Colab T4's 15.0 GiB" in line
    assert 'profiles.apply("colab", globals())' in line and "fewer penalty_weights or pretrain_epochs" in line
    assert "leave IGA, the dearest objective, out" in line and "30 configurations" in line
    assert leaks.PREFLIGHT.search(line)  # a page that showed it would fail the build


def test_on_a_gpu_the_line_compares_with_that_gpu(monkeypatch):
    from featbook import estimate, runtime

    monkeypatch.setattr(runtime, "has_gpu", lambda: True)
    est = estimate.cmnist(paper_protocols())
    monkeypatch.setattr(runtime, "gpu_capacity", lambda: (15 * 2**30, "Tesla T4"))
    small_gpu = [line for line in runtime.preflight_text(est).splitlines() if "memory" in line]
    assert len(small_gpu) == 1 and small_gpu[0].startswith("WARNING: this run needs about 15.")
    assert "more than the 15.0 GiB of this runtime's GPU (Tesla T4)" in small_gpu[0]
    monkeypatch.setattr(runtime, "gpu_capacity", lambda: (80 * 2**30, "NVIDIA H100"))
    text = runtime.preflight_text(est)
    assert "WARNING" not in text
    assert "Estimated peak GPU memory of this run: about 15." in text and "within the 80.0 GiB of this runtime's GPU" in text


def test_a_run_that_fits_gets_the_estimate_and_no_warning():
    from featbook import estimate, leaks, profiles, runtime

    small = profiles.load("small")["04_feat_on_colored_mnist"]
    protocols = [small_protocol(dataset=d, seeds=tuple(small["seeds"]), objectives=CMNISTProtocol().objectives,
                                learners=CMNISTProtocol().learners, penalty_weights=tuple(small["penalty_weights"]),
                                pretrain_epochs=tuple(small["pretrain_epochs"]), hidden_dim=small["hidden_dim"],
                                n_train=small["n_train"], n_test=small["n_test"], n_val=small["n_val"])
                 for d in ("cmnist025", "cmnist01")]
    text = runtime.preflight_text(estimate.cmnist(protocols))
    line = next(line for line in text.splitlines() if "memory" in line)
    assert line.startswith("Estimated peak GPU memory of this run: about ") and "within a Colab T4's 15.0 GiB" in line
    assert "WARNING" not in text
    assert leaks.PREFLIGHT.search(line)


@pytest.mark.parametrize("peak, words, remedy", [
    (memory.StagePeak("backbone step", 20 * 2**30, {"backbone": "densenet121", "dataset": "fmow", "side": 224,
                                                    "batch_size": 256}),
     "a training step of the DenseNet-121 on 256 examples of 224 px", "use a smaller batch_size, or a smaller resolution"),
    (memory.StagePeak("backbone step", 20 * 2**30, {"backbone": "distilbert", "dataset": "amazon", "tokens": 512,
                                                    "batch_size": 64}),
     "the DistilBERT on 64 examples of 512 tokens", "use a smaller batch_size, or a smaller max_token_length"),
    (memory.StagePeak("frozen-feature stack", 20 * 2**30, {"objective": "clove", "configurations": 30, "groups": 40,
                                                           "seeds": 10, "n_train": 50000, "hidden_dim": 256}),
     "40 featurizers (learners x seeds) x 30 configurations", "train fewer seeds or learners"),
    (memory.StagePeak("feature learning", 20 * 2**30, {"learner": "bonsai", "n_train": 50000, "hidden_dim": 256,
                                                       "model": "cnn"}),
     "Bonsai, the CNN on 50,000 images", "fewer training images (n_train)"),
])
def test_each_stage_says_what_it_is_and_what_to_shrink(peak, words, remedy):
    from featbook import runtime
    from featbook.estimate import Estimate

    line = runtime.memory_text(Estimate().need([peak]), memory.T4_BYTES, profile="small").replace("\xa0", " ")
    assert line.startswith("WARNING: on a GPU") and words in line and remedy in line
    assert 'profiles.apply("small", globals())' in line and "\n" not in line


def test_the_memory_command_refuses_an_unknown_part_in_one_line(capsys):
    assert pytest.raises(SystemExit, memory.main, ["stack"]).value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'stack'" in err
