"""Execute the book's notebooks with a parameter profile (papermill).

Each notebook's ``parameters`` cell holds the full-scale (paper) defaults. A profile,
``notebooks/profiles/<name>.yaml``, maps notebook names (file stems) to the parameters that
override them, e.g. the ``small`` profile that CI and the CPU book build use.

A chapter is written as a MyST markdown notebook (``notebooks/NN_name.md``, see
:mod:`featbook.chapters`); the committed ``NN_name.ipynb`` beside it is the notebook Colab and
papermill open. :func:`execute_all` runs the book's version of each chapter, made from its
source (MyST roles intact, for the book to render), unless ``from_sources=False``.

    python -m featbook.notebooks --profile small --out _build/executed
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import yaml

from featbook.chapters import NOTEBOOK_DIR, REPO_ROOT, book_notebook, write_text
from featlib.store.atomic import atomic_write_text

PROFILE_DIR = NOTEBOOK_DIR / "profiles"


def list_notebooks(directory: Path = NOTEBOOK_DIR) -> list[Path]:
    """The chapter notebooks, in chapter order (their names start with the chapter number)."""
    return sorted(p for p in directory.glob("[0-9][0-9]_*.ipynb"))


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name: str | None) -> dict[str, dict]:
    """Parameters per notebook stem for the profile ``name`` (``None`` or ``full``: no overrides)."""
    if name in (None, "full"):
        return {}
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.exists():
        raise ValueError(f"profile must be one of {['full'] + available_profiles()}; got {name!r}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"profile {name!r} ({path}) is not valid YAML{at}: {problem}; fix the file") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"profile {name!r} ({path}) must map notebook names to their parameters "
                         "(`01_erm_feature_learning: {steps: 300}`); fix the file")
    known = {p.stem for p in list_notebooks()}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"profile {name!r} names notebooks that do not exist: {unknown}; known: {sorted(known)}")
    return data


def execute_notebook(notebook: Path, output: Path, parameters: dict | None = None, cwd: Path | None = None) -> float:
    """Run ``notebook`` through papermill into ``output``; return the wall time in seconds.

    Parameters are checked first (:func:`featbook.notebook_params.check_parameters`): unknown
    names, wrong types and out-of-range values raise before papermill starts. A failing cell
    raises (papermill's ``PapermillExecutionError``) after the partly executed notebook has
    been written, so the error is visible in ``output``.
    """
    import papermill as pm

    from featbook.notebook_params import check_parameters

    check_parameters(notebook, parameters or {}, cwd or notebook.parent)  # reject bad values before a kernel starts
    from featlib.store.atomic import remove_stale_temporaries, temporary_sibling

    output.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(output, ".ipynb")
    start = time.perf_counter()
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        partial = temporary_sibling(output, ".ipynb")  # papermill writes as it goes: readers see the old or the whole
        try:
            pm.execute_notebook(
                str(notebook), str(partial), parameters=parameters or {}, cwd=str(cwd or notebook.parent),
                kernel_name="python3", progress_bar=False, log_output=False,
            )
            break
        except Exception as err:
            if attempt == KERNEL_START_ATTEMPTS or not kernel_never_started(err, partial):
                raise
            print(f"{notebook.name}: the kernel did not start ({err}); starting it again "
                  f"(attempt {attempt + 1} of {KERNEL_START_ATTEMPTS})", file=sys.stderr, flush=True)
            partial.unlink(missing_ok=True)
            time.sleep(random.uniform(0.5, 3.0))  # kernels started at once race for the same ports
        finally:  # a failed cell's notebook too, so that its error is visible in ``output``
            if partial.exists():
                os.replace(partial, output)
    return time.perf_counter() - start


#: How many times :func:`execute_notebook` starts a kernel that never answered before it gives up.
KERNEL_START_ATTEMPTS = 3

#: The start-up failures of jupyter_client / nbclient: raised before the first cell runs.
_KERNEL_START_FAILURES = ("Kernel didn't respond", "Kernel died before replying to kernel_info")


def kernel_never_started(err: BaseException, partial: Path) -> bool:
    """Whether ``err`` is a kernel that failed to start, before any cell of ``partial`` ran.

    Kernels started at the same moment (a sweep's workers) can pick the same ports, and one of
    them then never answers (papermill#239, #776): that run did nothing and is safe to start
    again. A failure after a cell ran is the notebook's own and is never retried.
    """
    import json

    if not isinstance(err, RuntimeError) or not str(err).startswith(_KERNEL_START_FAILURES):
        return False
    try:
        cells = json.loads(partial.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        return True  # papermill had not written the notebook yet: nothing ran
    return all(c.get("execution_count") is None for c in cells if c.get("cell_type") == "code")


#: The file an execution writes into its ``--out``: the folder holds executed chapters that a later
#: execution may replace (:func:`check_executed_out`).
EXECUTED_MARKER = ".executed-by-featbook"


def _written_by_papermill(path: Path) -> bool:
    """Whether the notebook ``path`` is one papermill executed (an earlier execution's, before the
    marker): its metadata names papermill."""
    import json

    try:
        return "papermill" in json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
        return False


def check_executed_out(value, names: list[str]) -> Path:
    """``--out`` of an execution, checked before anything is written (ValueError, one line naming
    the value and the remedy): absent, empty, or a folder of executed chapters (it holds
    :data:`EXECUTED_MARKER`, or only ``_sources/`` and chapter notebooks that papermill executed);
    never the working directory or a folder holding it, a git checkout or featlib's own checkout
    (:func:`featlib.store.folders.check_out`'s guards), and never a folder where a file of a name
    this run writes (``names``) is the user's."""
    from featlib.store.folders import check_out

    from featlib.store.atomic import remove_stale_temporaries

    chapters = [nb.name for nb in list_notebooks()]
    for name in chapters if Path(value).is_dir() else ():  # partial outputs of killed executions: no one's files
        remove_stale_temporaries(Path(value) / name, ".ipynb")
    path = check_out("--out", value, "featbook.notebooks", keep=(EXECUTED_MARKER, "_sources", *chapters, *names))
    target = path.resolve()
    if not target.is_dir() or (target / EXECUTED_MARKER).is_file():
        return path
    theirs = [name for name in names if (target / name).exists() and not _written_by_papermill(target / name)]
    if (target / "_sources").exists() and not (target / "_sources").is_dir():
        theirs.append("_sources")
    if theirs:
        raise ValueError(f"--out {value} holds {theirs[0]}, which no execution wrote, and this run writes a file of that "
                         "name: move it out, or name a new or empty folder")
    return path


def book_notebooks(out_dir: Path, notebooks: list[Path]) -> list[Path]:
    """The book's notebook of each chapter (:func:`featbook.chapters.book_notebook`), made from the
    chapter's MyST source into ``out_dir``; their paths, in the order of ``notebooks``."""

    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for nb in notebooks:
        source = nb.with_suffix(".md")
        if not source.exists():
            raise ValueError(f"{nb.name} has no MyST source {source.name}; write the chapter as {source.name}")
        path = out_dir / nb.name
        atomic_write_text(path, write_text(book_notebook(source)))
        made.append(path)
    return made


def execute_all(profile: str | None, out_dir: Path, names: list[str] | None = None,
                from_sources: bool = True, fresh: bool = False) -> dict[str, float]:
    """Execute every chapter (or those named) with ``profile`` into ``out_dir``; wall time per
    chapter (0 for a chapter whose outputs were reused). ``from_sources``: run the book's
    notebooks made from the MyST sources (what the book renders) rather than the committed
    ``.ipynb`` (what Colab opens). The book's notebooks are executed once per key of what
    determines their outputs (:mod:`featbook.executed`): a chapter whose code, parameters,
    library and committed results are unchanged is not executed again unless ``fresh``."""
    params = load_profile(profile)
    notebooks = list_notebooks()
    if names:
        by_stem = {p.stem: p for p in notebooks}
        missing = [n for n in names if n not in by_stem]
        if missing:
            raise ValueError(f"notebook must be one of {sorted(by_stem)}; got {missing}")
        notebooks = [by_stem[n] for n in names]
    check_executed_out(out_dir, [nb.name for nb in notebooks])  # before anything is written
    if from_sources:
        notebooks = book_notebooks(out_dir / "_sources", notebooks)
    from featbook.notebook_params import check_parameters

    for nb in notebooks:  # every notebook's parameters, before the first one runs
        check_parameters(nb, params.get(nb.stem, {}), NOTEBOOK_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / EXECUTED_MARKER, "chapters executed by featbook.notebooks: a later execution replaces "
                                                 "them\n")
    times = {}
    if from_sources:
        from featbook.executed import code_digest, execute_cached

        code = code_digest()
    for nb in notebooks:
        parameters = params.get(nb.stem, {})
        if not from_sources:
            times[nb.stem] = execute_notebook(nb, out_dir / nb.name, parameters, cwd=NOTEBOOK_DIR)
            print(f"executed {nb.name} with profile {profile or 'full'} in {times[nb.stem]:.1f} s", flush=True)
            continue
        times[nb.stem], ran = execute_cached(nb, out_dir / nb.name, parameters, NOTEBOOK_DIR,
                                             lambda n, o, p, c: execute_notebook(n, o, p, cwd=c), fresh=fresh, code=code)
        print(f"executed {nb.name} with profile {profile or 'full'} in {times[nb.stem]:.1f} s" if ran else
              f"reused {nb.name}: its code, parameters, featlib, featbook and the committed results are unchanged "
              "(only its prose is rendered anew)", flush=True)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", help="notebook names (file stems); default: all")
    parser.add_argument("--profile", default="small", help="parameter profile: full, or a file in notebooks/profiles")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "_build" / "executed")
    parser.add_argument("--ipynb", action="store_true",
                        help="run the committed .ipynb (what Colab opens) instead of the book's notebooks made from the .md")
    parser.add_argument("--fresh", action="store_true", help="execute every chapter, even one whose outputs are kept")
    args = parser.parse_args(argv)
    try:
        execute_all(args.profile, args.out, args.notebooks, from_sources=not args.ipynb, fresh=args.fresh)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
