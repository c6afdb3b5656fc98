"""Provenance records name featlib's own commit, or "unknown" when featlib is not run from its checkout."""
import re
import shutil
import subprocess

from featlib.store.provenance import UNKNOWN_COMMIT, featlib_root, git_commit


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_own_checkout_gives_its_head(repo_root):
    if not (repo_root / ".git").exists():  # an installed or copied featlib: nothing to compare with
        assert git_commit() == UNKNOWN_COMMIT
        return
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root, capture_output=True, text=True).stdout.strip()
    assert featlib_root() == repo_root.resolve()
    assert re.fullmatch(r"[0-9a-f]{40}(\+uncommitted changes)?", git_commit())
    assert git_commit().startswith(head)


def test_a_copy_inside_another_repository_is_unknown(tmp_path, repo_root):
    """The H100 run of 2026-11-22 ran from a copy of the tree inside another repository and
    recorded that repository's HEAD; a copy must say "unknown" instead."""
    outer = tmp_path / "outer"
    outer.mkdir()
    _git(outer, "init", "-q")
    _git(outer, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "other project")
    copy = outer / "copy"
    shutil.copytree(repo_root / "featlib", copy / "featlib", ignore=shutil.ignore_patterns("__pycache__"))
    assert git_commit(copy) == UNKNOWN_COMMIT


def test_a_plain_copy_is_unknown(tmp_path, repo_root):
    shutil.copytree(repo_root / "featlib", tmp_path / "featlib", ignore=shutil.ignore_patterns("__pycache__"))
    assert git_commit(tmp_path) == UNKNOWN_COMMIT


def test_a_repository_that_does_not_track_featlib_is_unknown(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x")
    assert git_commit(tmp_path) == UNKNOWN_COMMIT
