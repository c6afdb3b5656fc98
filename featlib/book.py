"""Build the Jupyter Book (1.x) from notebooks executed with a parameter profile.

The book's source is the repository root (``_config.yml``, ``_toc.yml``, ``book/``,
``notebooks/``). Notebooks are kept without outputs, so the build stages a copy of the source
in ``_build/stage`` with the notebooks replaced by copies executed through papermill (the
``small`` profile on CPU by default), then renders ``_build/html`` with warnings as errors.
A failing notebook fails the build.

    python -m featlib.book [--profile small|full] [--executed DIR]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .notebooks import REPO_ROOT, execute_all, list_notebooks

BOOK_SOURCES = ("_config.yml", "_toc.yml", "book")


def stage(executed_dir: Path, stage_dir: Path) -> None:
    """Copy the book source to ``stage_dir``, with the executed notebooks in place."""
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    stage_dir.mkdir(parents=True)
    for name in BOOK_SOURCES:
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, stage_dir / name)
    (stage_dir / "notebooks").mkdir()
    for nb in list_notebooks():
        executed = executed_dir / nb.name
        if not executed.exists():
            raise FileNotFoundError(f"{executed} is missing: execute the notebooks first (python -m featlib.notebooks)")
        shutil.copy2(executed, stage_dir / "notebooks" / nb.name)


def render(stage_dir: Path, out_root: Path) -> Path:
    """Run ``jupyter-book build`` on the staged source; return the HTML directory."""
    out_root.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(stage_dir), "--path-output", str(out_root),
           "-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    return out_root / "_build" / "html"


def build(profile: str | None = "small", executed_dir: Path | None = None, out_root: Path = REPO_ROOT) -> Path:
    """Execute (unless ``executed_dir`` is given), stage and render; return the HTML directory."""
    start = time.perf_counter()
    if executed_dir is None:
        executed_dir = out_root / "_build" / "executed"
        execute_all(profile, executed_dir)
    stage_dir = out_root / "_build" / "stage"
    stage(executed_dir, stage_dir)
    html = render(stage_dir, out_root)
    print(f"book built in {time.perf_counter() - start:.1f} s: {html / 'index.html'}")
    return html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="small", help="parameter profile for the notebooks (small or full)")
    parser.add_argument("--executed", type=Path, default=None, help="use notebooks already executed in DIR")
    args = parser.parse_args(argv)
    try:
        build(args.profile, args.executed)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"error: jupyter-book failed with exit code {err.returncode}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
