"""Named results: record a notebook's headline values and read them back.

``record(name, value)`` glues the value with myst-nb, so that the book can quote it in the
text (``{glue:text}`name:.3f```) and batch runs and tests can read it back from the executed
notebook with :func:`read_records`. Where myst-nb is missing (Colab) it only keeps the value in
:data:`RECORDED`, which :mod:`featbook.quoted` reads to show a paragraph with this run's numbers.
"""
from __future__ import annotations

import ast
import json
import numbers
from pathlib import Path
from typing import Any

import numpy as np

#: Every value recorded in this process, by name (the kernel's own copy of the glued values).
RECORDED: dict[str, Any] = {}


def _plain(value: Any) -> Any:
    """numpy scalars and arrays -> Python literals, so that the glued text round-trips."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, bool, type(None))) or isinstance(value, numbers.Number):
        return value
    raise TypeError(f"record() takes numbers, strings, lists and dicts of them; got {type(value).__name__}")


def record(name: str, value: Any) -> None:
    """Glue ``value`` under ``name`` (not displayed; without myst-nb only kept in
    :data:`RECORDED`). Returns nothing, so that a cell ending with it shows nothing."""
    plain = _plain(value)
    RECORDED[name] = plain
    try:
        from myst_nb import glue
    except ImportError:  # Colab and plain Jupyter: nothing to glue into
        return None
    glue(name, plain, display=False)
    return None


def read_records(notebook: str | Path) -> dict[str, Any]:
    """The values recorded in an executed notebook, by name."""
    nb = json.loads(Path(notebook).read_text())
    records: dict[str, Any] = {}
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook")
            if not meta:
                continue
            key = meta.get("mime_prefix", "") + "text/plain"
            text = output.get("data", {}).get(key)
            if text is None:
                continue
            text = "".join(text) if isinstance(text, list) else text
            records[meta["name"]] = _literal(text)
    return records


class _Floats(ast.NodeTransformer):
    """``nan`` and ``inf``, as Python prints those floats, read as floats."""

    def visit_Name(self, node: ast.Name):
        if node.id in ("nan", "inf"):
            return ast.copy_location(ast.Constant(float(node.id)), node)
        return node


def _literal(text: str) -> Any:
    """The value a recorded text prints (Python literals, and ``nan``/``inf`` where a chapter
    recorded a non-finite float: a diverged run's score is a value, not a broken record)."""
    try:
        return ast.literal_eval(text)
    except ValueError:
        return ast.literal_eval(_Floats().visit(ast.parse(text.strip(), mode="eval")))
