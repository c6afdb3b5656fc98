"""Committed results fetched by their manifest (featbook.committed, issue 25)."""
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
