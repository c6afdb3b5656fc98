"""A fresh Colab-like runtime for one chapter notebook (used by tests/test_colab.py, issue 25).

What it builds, as Colab would meet a chapter:

* a **base layer**: a virtual environment holding only what Colab preinstalls that the book
  relies on (torch, torchvision, numpy, pandas, matplotlib, seaborn, papermill, ipykernel),
  installed by pip from the configured package index; built once and kept under
  ``FEATLIB_COLAB_BASE`` (default ``~/.cache/featlib/colab-base-<python>``), since it only
  stands for Colab's image;
* per chapter, a **fresh virtual environment** on top of it (a ``.pth`` file adds the base
  layer's site-packages, as Colab's system packages sit below what a notebook installs), so that
  everything the install cell installs lands in an empty environment;
* a **fake ``google.colab`` module**, imported at kernel start (IPython startup file), so that the
  install cell's Colab branch runs, and ``featbook.runtime.in_colab()`` is true;
* a **local git repository** (a bare clone holding the worktree's current state as one branch)
  passed as ``FEATLIB_REPOSITORY``: the install cell installs featlib from that git URL and
  :mod:`featbook.committed` fetches the committed results from it;
* an **empty folder** holding only the ``.ipynb``, executed there by papermill with the kernel of
  the fresh environment and ``PYTHONPATH`` unset (the checkout is not importable).

``python tests/colab_sim.py base`` builds the base layer alone (the slow part: torch).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
#: What Colab preinstalls, of what the book uses (versions as the book's requirements.txt pins them).
COLAB_PREINSTALLED = ["pip>=24.1", "torch==2.14.1", "torchvision==0.29.1", "numpy==2.4.6", "pandas==2.3.3",
                      "matplotlib==3.11.2", "seaborn==0.13.2", "papermill==2.7.0", "ipykernel==7.4.0"]
BRANCH = "colab-sim"


def _base_python() -> str:
    return getattr(sys, "_base_executable", None) or sys.executable


def base_layer() -> Path:
    """The base layer's folder, built on first use (``.complete`` lists what a finished build
    installed; a different list rebuilds it)."""
    root = Path(os.environ.get("FEATLIB_COLAB_BASE") or Path.home() / ".cache" / "featlib" / f"colab-base-{PY}")
    marker = root / ".complete"
    if marker.exists() and marker.read_text().split() == COLAB_PREINSTALLED:
        return root
    if root.exists():
        shutil.rmtree(root)  # an interrupted build of our own cache folder
    subprocess.run([_base_python(), "-m", "venv", str(root)], check=True)
    subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", *COLAB_PREINSTALLED], check=True,
                   env=_clean_env())
    marker.write_text(" ".join(COLAB_PREINSTALLED) + "\n")
    return root


def _site(venv: Path) -> Path:
    return venv / "lib" / f"python{PY}" / "site-packages"


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "FEATLIB_REPOSITORY", "JUPYTER_PATH", "IPYTHONDIR")}
    env.update(extra)
    return env


def local_repository(dest: Path) -> str:
    """A bare git repository at ``dest`` whose branch :data:`BRANCH` is the worktree's current
    state (its tracked files, committed or not); returns ``FEATLIB_REPOSITORY`` for it."""
    snapshot = subprocess.run(["git", "stash", "create"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip() or "HEAD"
    subprocess.run(["git", "init", "-q", "--bare", str(dest)], check=True)
    subprocess.run(["git", "push", "-q", str(dest), f"{snapshot}:refs/heads/{BRANCH}"], cwd=REPO, check=True,
                   capture_output=True)
    return f"file://{dest}@{BRANCH}"


def chapter_runtime(work: Path, base: Path) -> tuple[Path, dict]:
    """A fresh environment over ``base`` with the fake ``google.colab``; (its python, the env)."""
    venv = work / "venv"
    subprocess.run([_base_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    # pip comes from the base layer too (Colab's image has it); a .pth puts the base layer below.
    _site(venv).joinpath("colab_base.pth").write_text(f"{_site(base)}\n")
    fake = work / "fake_colab"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "colab" / "__init__.py").write_text('"""Stands for Colab\'s own module (tests only)."""\n')
    ipython = work / "ipython"
    startup = ipython / "profile_default" / "startup"
    startup.mkdir(parents=True)
    startup.joinpath("00-colab.py").write_text(f"import sys\nsys.path.append({str(fake)!r})\nimport google.colab\n")
    kernels = work / "jupyter"
    subprocess.run([str(venv / "bin" / "python"), "-m", "ipykernel", "install", "--prefix", str(kernels),
                    "--name", "python3"], check=True, capture_output=True, env=_clean_env())
    env = _clean_env(IPYTHONDIR=str(ipython), JUPYTER_PATH=str(kernels / "share" / "jupyter"),
                     PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", MPLBACKEND="Agg")
    return venv / "bin" / "python", env


def run_chapter(notebook: Path, work: Path, repository: str, parameters: dict, timeout_s: int = 3600) -> dict:
    """Execute ``notebook`` alone in ``work/run`` in a fresh Colab-like runtime; the times (install
    cell, whole run) and the executed notebook's path. Raises on a failing cell."""
    import nbformat

    base = base_layer()
    python, env = chapter_runtime(work, base)
    env["FEATLIB_REPOSITORY"] = repository
    run = work / "run"
    run.mkdir()
    shutil.copy(notebook, run / notebook.name)
    out = run / f"executed-{notebook.name}"
    params = work / "parameters.yaml"
    import yaml

    params.write_text(yaml.safe_dump(parameters))
    start = time.perf_counter()
    done = subprocess.run([str(python), "-m", "papermill", notebook.name, out.name, "-f", str(params), "-k", "python3",
                           "--cwd", str(run), "--no-progress-bar", "--execution-timeout", str(timeout_s)],
                          cwd=run, env=env, capture_output=True, text=True, timeout=timeout_s + 600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{notebook.name} failed in the Colab-like runtime:\n{done.stderr[-6000:]}")
    nb = nbformat.read(out, as_version=4)
    install = nb.cells[[i for i, c in enumerate(nb.cells) if c.cell_type == "code"][0]]
    install_s = install.metadata.get("papermill", {}).get("duration") or 0.0
    return {"install_s": float(install_s), "run_s": wall, "executed": out, "python": python}


if __name__ == "__main__":
    if sys.argv[1:] == ["base"]:
        print(base_layer())
    else:
        print("usage: python tests/colab_sim.py base", file=sys.stderr)
        sys.exit(2)
