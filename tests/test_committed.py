"""Committed results fetched by their manifest (featbook.committed)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from featbook import committed, repository

REPO_ROOT = Path(__file__).resolve().parent.parent


def serve(root: Path, damage: dict | None = None):
    """A ``get`` serving ``root``'s files as GitHub's raw server would; ``damage`` maps a path to
    how many of its downloads arrive cut short."""
    damage = dict(damage or {})
    calls = []

    def get(url):
        path = url.split("/main/", 1)[1]
        calls.append(path)
        data = (root / path).read_bytes()
        if damage.get(path, 0) > 0:
            damage[path] -= 1
            return data[: len(data) // 2]
        return data
    return get, calls


@pytest.fixture
def upstream(tmp_path, monkeypatch):
    root = tmp_path / "upstream"
    (root / "results" / "cost" / "gpu").mkdir(parents=True)
    (root / "results" / "cost" / "gpu" / "summary.csv").write_text("round,ms\n1,2.5\n" * 50)
    (root / "results" / "cost" / "gpu" / "provenance.json").write_text('{"device": "H100"}')
    (root / "results" / "other").mkdir()
    (root / "results" / "other" / "x.csv").write_text("x\n1\n")
    committed.write_manifest(root / "results")
    monkeypatch.setenv(repository.ENV, "https://github.com/owner/book@main")
    monkeypatch.chdir(tmp_path)  # no results/ folder here: a Colab runtime
    return root


def test_only_the_manifests_files_of_the_folder_are_fetched(upstream):
    get, calls = serve(upstream)
    found = committed.locate("../results/cost", get=get)
    assert found.fetched and sorted(calls) == ["results/cost/gpu/provenance.json", "results/cost/gpu/summary.csv",
                                               "results/manifest.json"]
    assert (found.path / "gpu" / "summary.csv").read_bytes() == (upstream / "results/cost/gpu/summary.csv").read_bytes()


def test_an_interrupted_fetch_is_fetched_again_not_trusted(upstream):
    get, calls = serve(upstream)
    found = committed.locate("../results/cost", get=get)
    target = found.path / "gpu" / "summary.csv"
    target.write_bytes(target.read_bytes()[:10])  # what a killed download leaves
    calls.clear()
    again = committed.locate("../results/cost", get=get)
    assert calls == ["results/manifest.json", "results/cost/gpu/summary.csv"]  # only the damaged file
    assert target.read_bytes() == (upstream / "results/cost/gpu/summary.csv").read_bytes()
    assert "1 of them fetched now" in again.note
    calls.clear()
    assert "fetched earlier" in committed.locate("../results/cost", get=get).note and len(calls) == 1


def test_a_download_that_arrives_damaged_is_retried(upstream):
    get, calls = serve(upstream, damage={"results/cost/gpu/summary.csv": 1})
    found = committed.locate("../results/cost", get=get)
    assert found and calls.count("results/cost/gpu/summary.csv") == 2


def test_a_file_that_never_matches_is_reported_with_what_to_do_in_colab(upstream):
    get, _ = serve(upstream, damage={"results/cost/gpu/summary.csv": 5})
    found = committed.locate("../results/cost", get=get)
    assert not found and found.failed
    assert "do not match results/manifest.json" in found.note and "In Colab" in found.note


def test_offline_an_intact_earlier_fetch_is_used_and_a_broken_one_is_not(upstream):
    get, _ = serve(upstream)
    committed.locate("../results/cost", get=get)

    def offline(url):
        raise OSError("no network")
    earlier = committed.locate("../results/cost", get=offline)
    assert earlier and "Fetched earlier" in earlier.note and "could not be reached" in earlier.note
    (earlier.path / "gpu" / "summary.csv").write_text("cut")
    broken = committed.locate("../results/cost", get=offline)
    assert not broken and broken.failed and "run this cell again" in broken.note


def test_a_local_git_repository_serves_the_committed_files(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "results" / "f").mkdir(parents=True)
    (work / "results" / "f" / "a.csv").write_text("a\n1\n")
    committed.write_manifest(work / "results")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "results"], check=True)
    monkeypatch.setenv(repository.ENV, f"file://{work}/.git@main")
    monkeypatch.chdir(tmp_path)
    found = committed.locate("../results/f", fetch_dir="fetched")
    assert found and (found.path / "a.csv").read_text() == "a\n1\n"


def test_the_committed_manifest_lists_exactly_the_committed_results():
    differences = committed.manifest_differences(REPO_ROOT / "results")
    assert not differences, f"results/manifest.json is stale ({differences[:3]}): run python -m featbook.committed"


def test_manifest_command_rejects_a_missing_folder_and_reports_differences(tmp_path):
    cmd = [sys.executable, "-m", "featbook.committed"]
    bad = subprocess.run([*cmd, str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "does not exist" in bad.stderr
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "a.csv").write_text("a\n")
    assert subprocess.run([*cmd, str(tmp_path / "r")], capture_output=True).returncode == 0
    (tmp_path / "r" / "a.csv").write_text("b\n")
    check = subprocess.run([*cmd, "--check", str(tmp_path / "r")], capture_output=True, text=True)
    assert check.returncode == 1 and "results/a.csv changed" in check.stdout
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["files"]["results/a.csv"]["bytes"] == 2


# -- a connection cut mid-file, and what a chapter says after a failed fetch ----------------------
def cut_once(get, path):
    """``get``, except that the first download of ``path`` is cut mid-file, as a dropped connection
    leaves it (``http.client.IncompleteRead``)."""
    import http.client

    state = {"cut": False}

    def flaky(url):
        if url.endswith(path) and not state["cut"]:
            state["cut"] = True
            raise http.client.IncompleteRead(b"round", 997)
        return get(url)
    return flaky


@pytest.fixture
def no_backoff(monkeypatch):
    monkeypatch.setattr(committed, "BACKOFF_S", (0.0,))


def test_a_connection_cut_mid_file_is_retried(upstream, no_backoff):
    get, calls = serve(upstream)
    found = committed.locate("../results/cost", get=cut_once(get, "results/cost/gpu/summary.csv"))
    assert found and found.fetched and not found.failed
    assert (found.path / "gpu" / "summary.csv").read_bytes() == (upstream / "results/cost/gpu/summary.csv").read_bytes()
    assert calls.count("results/cost/gpu/summary.csv") == 1  # the cut try never reached the server fake


def test_a_connection_that_keeps_failing_is_one_message_with_what_to_do_in_colab(upstream, monkeypatch):
    import http.client
    import urllib.error

    pauses = []
    monkeypatch.setattr(committed.time, "sleep", pauses.append)
    for error in (http.client.IncompleteRead(b"", 10), ConnectionResetError("reset by peer"),
                  TimeoutError("timed out"), urllib.error.URLError("temporary failure in name resolution")):
        tries = []

        def broken(url, error=error):
            tries.append(url)
            raise error
        pauses.clear()
        found = committed.locate("../results/cost", get=broken)  # no traceback: a failed Located
        assert not found and found.failed and len(tries) == committed.NETWORK_ATTEMPTS
        assert pauses == list(committed.BACKOFF_S) and sum(pauses) < 10  # a short backoff between the tries
        assert f"the connection failed {committed.NETWORK_ATTEMPTS} times" in found.note
        assert "In Colab, check that the runtime is connected to the internet and run this cell again" in found.note


def test_a_missing_file_is_not_retried(upstream, monkeypatch):
    import urllib.error

    monkeypatch.setattr(committed.time, "sleep", lambda s: pytest.fail("a 404 is not worth another try"))
    tries = []

    def not_found(url):
        tries.append(url)
        raise urllib.error.HTTPError(url, 404, "Not Found", None, None)
    found = committed.locate("../results/cost", get=not_found)
    assert not found and found.failed and len(tries) == 1 and "run this cell again" in found.note


def test_after_a_failed_fetch_a_chapter_says_the_fetch_failed_not_that_nothing_is_committed(upstream, no_backoff):
    from featbook import evidence

    def offline(url):
        raise ConnectionRefusedError("connection refused")
    failed = committed.locate("../results/cost", get=offline)
    text = evidence.missing(failed, "cost measurement", "python -m featlib.cli.cost --out results/cost/<device>")
    assert "committed yet" not in text and "python -m featlib.cli.cost" not in text
    assert "fetching `results/cost`" in text and "failed" in text and "run this cell again" in text
    # several folders: the failed one is reported; none failed and none found: nothing is committed
    nothing = committed.Located(None, "Nothing is committed in `results/x` yet.")
    assert evidence.missing([nothing, failed], "Table 2", "python -m x") == text.replace("cost measurement", "Table 2")
    assert evidence.missing(nothing, "Table 2", "python -m x").startswith("No full-scale Table 2 is committed yet")
    # and the chapters' summaries do not claim it either
    from featbook import cost_views

    assert "none are committed" not in cost_views.memory_from_round_2({}, failed=True)


def test_a_fetched_folder_that_does_not_load_tells_a_colab_reader_to_run_the_cell_again(upstream):
    from featlib.store.files import CorruptFileError

    get, calls = serve(upstream)
    found = committed.locate("../results/cost", get=get)
    damaged = found.path / "gpu" / "summary.csv"

    def loader(path):
        raise CorruptFileError(damaged, "it is not the file provenance.json lists",
                               "rerun `python -m featlib.cli.cost --out x` or restore the folder from git")
    assert committed.load(found, loader) is None
    assert found.failed and not found and "run this cell again" in found.note
    assert "restore the folder from git" not in found.note and "python -m" not in found.note
    assert not damaged.exists()  # so the next run of the cell fetches it again
    calls.clear()
    again = committed.locate("../results/cost", get=get)
    assert again and calls == ["results/manifest.json", "results/cost/gpu/summary.csv"]
    assert committed.load(again, lambda path: sorted(p.name for p in path.iterdir())) == [
        committed.FETCH_MARKER, ".manifest.json", "gpu"]


def test_in_a_checkout_a_folder_that_does_not_load_keeps_the_loaders_remedy(tmp_path, monkeypatch):
    from featlib.store.files import CorruptFileError

    (tmp_path / "results" / "cost").mkdir(parents=True)
    (tmp_path / "results" / "cost" / "a.csv").write_text("a\n")
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    found = committed.locate("../results/cost")
    assert found and not found.fetched

    def loader(path):
        raise CorruptFileError(path / "a.csv", "it changed", "restore the folder from git")
    with pytest.raises(CorruptFileError, match="restore the folder from git"):
        committed.load(found, loader)
    assert committed.load(committed.locate(None), loader) is None  # nothing asked for: nothing loaded


@pytest.mark.parametrize("value, url, branch", [
    ("git@github.com:owner/repo.git", "git@github.com:owner/repo.git", "main"),
    ("git@github.com:owner/repo.git@dev", "git@github.com:owner/repo.git", "dev"),
    ("ssh://git@github.com/owner/repo.git", "ssh://git@github.com/owner/repo.git", "main"),
    ("ssh://git@github.com/owner/repo@feature/x", "ssh://git@github.com/owner/repo", "feature/x"),
    ("https://github.com/owner/repo@dev", "https://github.com/owner/repo", "dev"),
    ("https://user:token@github.com/owner/repo", "https://user:token@github.com/owner/repo", "main"),
    ("file:///tmp/feat-book.git@colab-sim", "file:///tmp/feat-book.git", "colab-sim"),
])
def test_repository_urls_parse_with_and_without_a_branch(value, url, branch):
    assert repository.parse(value) == repository.Repository(url, branch)


def test_an_ssh_github_url_reads_the_raw_files_of_the_same_repository():
    ssh = repository.parse("git@github.com:owner/repo.git")
    assert ssh.github == ("owner", "repo")
    assert ssh.raw_url("results/manifest.json") == "https://raw.githubusercontent.com/owner/repo/main/results/manifest.json"
