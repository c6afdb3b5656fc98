"""Executed chapters kept by what determines their outputs: a rebuild executes only what changed.

A chapter's outputs depend on its code cells (their sources and tags), the parameters papermill
gives it (the profile's), the code they import (every ``.py`` of ``featlib/`` and of
``book/featbook/``), the committed results it may read (every file under ``results/``, whether or
not the manifest was rewritten), the versions of Python and of the numerical packages, and the
device. :func:`chapter_key` hashes exactly those; its prose (markdown cells) is not in the key.

:func:`execute_cached` executes a chapter through papermill once per key and keeps the executed
notebook in :data:`CACHE_DIR` (``_build/executed-cache/<stem>-<key>.ipynb``; the :data:`KEEP`
most recently used per chapter). When the key is
there, the chapter is not executed: :func:`with_outputs` puts the kept outputs under today's
cells (today's prose, the same code), so a prose edit re-renders without re-executing and a code
edit re-executes that chapter alone. Nothing a chapter computes is ever reused under another
key; ``--fresh`` (``featbook.build``) executes every chapter anyway.
"""
from __future__ import annotations

import hashlib
import json
import platform
from importlib import metadata
from pathlib import Path

import nbformat

from featbook.chapters import REPO_ROOT

CACHE_DIR = REPO_ROOT / "_build" / "executed-cache"
#: The packages whose version is in every key (what the chapters compute with and draw with).
PACKAGES = ("torch", "numpy", "pandas", "matplotlib", "scikit-learn", "captum", "transformers", "wilds")
#: Where the code the chapters import lives, and the committed results' manifest.
CODE_DIRS = (REPO_ROOT / "featlib", REPO_ROOT / "book" / "featbook")
RESULTS_MANIFEST = REPO_ROOT / "results" / "manifest.json"  # results/ is its parent
#: Executed copies kept per chapter (older keys are removed beyond this).
KEEP = 3


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def code_digest(dirs=CODE_DIRS) -> str:
    """SHA-256 over every ``.py`` file under ``dirs`` (path and bytes), in a fixed order."""
    digest = hashlib.sha256()
    for root in dirs:
        for path in sorted(Path(root).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment() -> dict:
    """Python, the packages of :data:`PACKAGES` with their versions, and the device the chapters
    run on (``FEATLIB_DEVICE``, whether a GPU is there)."""
    import os

    import torch

    return {"python": platform.python_version(), **{p: _version(p) for p in PACKAGES},
            "device": os.environ.get("FEATLIB_DEVICE", ""), "cuda": torch.cuda.is_available()}


def code_cells(nb: nbformat.NotebookNode) -> list[dict]:
    """What of each code cell is executed: its source and its tags (``parameters`` among them)."""
    return [{"source": cell.source, "tags": sorted(cell.get("metadata", {}).get("tags", []))}
            for cell in nb.cells if cell.cell_type == "code"]


def results_digest(root: Path = RESULTS_MANIFEST.parent) -> str:
    """SHA-256 over every file under ``results/`` (path and bytes; hidden files aside): the
    committed results as they are on disk, whether or not their manifest was rewritten yet."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def chapter_key(nb: nbformat.NotebookNode, parameters: dict, *, code: str | None = None,
                results: bytes | str | None = None) -> str:
    """The key of a chapter's outputs: its code cells, ``parameters``, featlib's and featbook's
    source (``code``: :func:`code_digest`), the committed results (``results``:
    :func:`results_digest`) and the environment (packages and the device the chapters use)."""
    if results is None:
        results = results_digest() if RESULTS_MANIFEST.parent.exists() else ""
    results = results if isinstance(results, str) else hashlib.sha256(results).hexdigest()
    payload = {"cells": code_cells(nb), "parameters": parameters, "code": code or code_digest(),
               "results": results, "environment": environment()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _is_injected(cell) -> bool:
    return "injected-parameters" in cell.get("metadata", {}).get("tags", [])


#: The first line of the cell papermill injects under a chapter's parameters cell, as the book shows
#: it: papermill's own ("# Parameters") left a reader with two parameter cells, the second silently
#: overriding the first.
INJECTED_LABEL = "# This page ran with these values, which replace the defaults above"


def label_injected(nb: nbformat.NotebookNode) -> int:
    """Give each injected-parameters cell of ``nb`` :data:`INJECTED_LABEL` as its first line (in
    place of papermill's "# Parameters"); return how many cells were labelled."""
    labelled = 0
    for cell in nb.cells:
        if cell.cell_type != "code" or not _is_injected(cell):
            continue
        lines = cell.source.splitlines()
        if lines and lines[0].strip() in ("# Parameters", INJECTED_LABEL):
            lines = lines[1:]
        cell.source = "\n".join([INJECTED_LABEL, *lines])
        labelled += 1
    return labelled


def with_outputs(source: nbformat.NotebookNode, executed: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    """``source``'s cells (today's prose) with the outputs of ``executed`` (the same code cells,
    executed by papermill, with its injected-parameters cell after the ``parameters`` cell); None
    when the code cells differ (then the chapter must be executed)."""
    ran = [c for c in executed.cells if c.cell_type == "code" and not _is_injected(c)]
    injected = [c for c in executed.cells if _is_injected(c)]
    mine = [c for c in source.cells if c.cell_type == "code"]
    if code_cells(nbformat.from_dict({"cells": mine})) != code_cells(nbformat.from_dict({"cells": ran})):
        return None
    merged = nbformat.from_dict(json.loads(json.dumps(executed)))  # the executed notebook's metadata
    cells, outputs = [], iter(ran)
    for cell in source.cells:
        cell = nbformat.from_dict(json.loads(json.dumps(cell)))
        if cell.cell_type == "code":
            done = next(outputs)
            cell.outputs, cell.execution_count = done.outputs, done.execution_count
            cell.metadata = done.metadata
        cells.append(cell)
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            cells.extend(injected)
    merged.cells = cells
    return merged


def cached_path(stem: str, key: str, cache_dir: Path = CACHE_DIR) -> Path:
    return Path(cache_dir) / f"{stem}-{key}.ipynb"


def execute_cached(notebook: Path, output: Path, parameters: dict, cwd: Path, execute, *,
                   cache_dir: Path = CACHE_DIR, fresh: bool = False, code: str | None = None) -> tuple[float, bool]:
    """Write the executed ``notebook`` (a book notebook made from its source) to ``output``:
    from the cache when its :func:`chapter_key` is there (and not ``fresh``), else through
    ``execute(notebook, output, parameters, cwd)`` (papermill), then kept in the cache. Returns
    (seconds, whether it was executed)."""
    from featbook.chapters import write_text
    from featlib.store.atomic import atomic_write_text

    source = nbformat.read(str(notebook), as_version=4)
    key = chapter_key(source, parameters, code=code)
    kept = cached_path(notebook.stem, key, cache_dir)
    if kept.exists() and not fresh:
        merged = with_outputs(source, nbformat.read(str(kept), as_version=4))
        if merged is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(output, write_text(merged))
            kept.touch()  # in use: the pruning below keeps the most recently used copies
            return 0.0, False
    seconds = execute(notebook, output, parameters, cwd)
    atomic_write_text(kept, output.read_text(encoding="utf-8"))
    for old in sorted(Path(cache_dir).glob(f"{notebook.stem}-*.ipynb"), key=lambda p: p.stat().st_mtime)[:-KEEP]:
        old.unlink(missing_ok=True)
    return seconds, True
