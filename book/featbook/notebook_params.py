"""Check a notebook's parameters before it runs: names, types and ranges.

Every chapter has one cell tagged ``parameters`` (the defaults, plain assignments) and one or
more cells tagged ``validate``: the notebook's own checks, which build its configuration
objects (``TwoBitSpec``, ``CMNISTProtocol``, ``WildsProtocol``...) and so reject a value out
of range with a message naming the parameter and what it accepts. :func:`check_parameters`
runs the same checks *outside* the notebook, in this process, before papermill starts a
kernel:

1. an unknown parameter name is rejected with the list of the notebook's parameters;
2. a value whose type does not match the parameter's is rejected with the type expected. The
   type is the annotation when the parameters cell has one, else the default's (a float default
   accepts integers; a None default accepts anything and leaves the check to the ``validate``
   cells). Annotations are written so that papermill can parse them too, as a quoted
   ``Optional[...]`` or ``Union[...]`` (``pretrained: "Union[bool, str]" = "auto"``): papermill's
   pattern has no ``|``, and a parameter it cannot parse draws its "Passed unknown parameter"
   warning, which must mean a real typo (``bool | str`` is still read here);
3. the ``parameters`` cell, the overrides and the ``validate`` cells are executed in a fresh
   namespace (output discarded), so their range checks raise here, not minutes into a run; an
   error of another type than ValueError (a validate cell iterating over an int given for a
   list) is turned into one ValueError line naming the notebook and the values.

``featbook.notebooks.execute_notebook`` (the book build, the profiles) and ``featbook.sweep``
(every combination, before any runs) call it. A notebook run directly with papermill still
executes its own ``validate`` cells first, with the same messages.
"""
from __future__ import annotations

import ast
import contextlib
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PARAMETERS_TAG = "parameters"
VALIDATE_TAG = "validate"


def _cells(notebook: str | Path, tag: str) -> list[str]:
    nb = json.loads(Path(notebook).read_text())
    return ["".join(c["source"]) for c in nb["cells"]
            if c["cell_type"] == "code" and tag in c.get("metadata", {}).get("tags", [])]


def parameter_defaults(notebook: str | Path) -> dict[str, Any]:
    """The notebook's parameters and their default values (its ``parameters`` cell, executed)."""
    cells = _cells(notebook, PARAMETERS_TAG)
    if len(cells) != 1:
        raise ValueError(f"{Path(notebook).name} must have exactly one cell tagged 'parameters'; found {len(cells)}")
    namespace: dict[str, Any] = {}
    exec(compile(cells[0], f"{Path(notebook).name}:parameters", "exec"), namespace)  # noqa: S102 (our own notebook)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


_TYPE_NAMES = {"bool": (bool, "True or False"), "int": (int, "an integer"), "float": (float, "a number"),
               "str": (str, "a string"), "list": (list, "a list"), "dict": (dict, "a mapping"),
               "None": (type(None), "None")}


def _annotation_types(node: ast.expr) -> list[str]:
    """``bool | str | None``, ``"Union[bool, str]"``, ``"Optional[str]"`` -> the type names
    (names and unions only)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _annotation_types(node.left) + _annotation_types(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _annotation_types(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ("Union", "Optional"):
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        names = [n for e in inner for n in _annotation_types(e)]
        return names + (["None"] if node.value.id == "Optional" else [])
    if isinstance(node, ast.Constant) and node.value is None:
        return ["None"]
    if isinstance(node, ast.Name) and node.id in _TYPE_NAMES:
        return [node.id]
    raise ValueError(f"unsupported parameter annotation {ast.unparse(node)!r}; use unions of "
                     f"{', '.join(_TYPE_NAMES)}")


def parameter_annotations(notebook: str | Path) -> dict[str, tuple[str, tuple[type, ...]]]:
    """For annotated parameters, what they accept: (description, types)."""
    out = {}
    for node in ast.parse(_cells(notebook, PARAMETERS_TAG)[0]).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = _annotation_types(node.annotation)
            types = tuple(t for n in names for t in ((int, float) if n == "float" else (_TYPE_NAMES[n][0],)))
            out[node.target.id] = (" or ".join(_TYPE_NAMES[n][1] for n in names), types)
    return out


def _kind(default: Any) -> tuple[str, tuple[type, ...]] | None:
    """What a value must be, judged from the default: None accepts anything."""
    if default is None:
        return None
    if isinstance(default, bool):
        return "True or False", (bool,)
    if isinstance(default, int):
        return "an integer", (int,)
    if isinstance(default, float):
        return "a number", (int, float)
    if isinstance(default, str):
        return "a string", (str,)
    if isinstance(default, (list, tuple)):
        return "a list", (list, tuple)
    if isinstance(default, dict):
        return "a mapping", (dict,)
    return None


def _check_type(name: str, value: Any, default: Any, annotated=None) -> None:
    kind = annotated or _kind(default)
    if kind is None:
        return
    text, types = kind
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        raise ValueError(f"{name} must be {text} (its default is {default!r}); got {value!r}")


@contextlib.contextmanager
def _working_directory(path: Path):
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def check_parameters(notebook: str | Path, params: Mapping[str, Any], cwd: str | Path | None = None) -> None:
    """Raise ``ValueError`` (or the notebook's own error, e.g. a missing dataset folder) for
    parameters the notebook would reject; return None when it would accept them. The checks
    run in ``cwd`` (default: the notebook's folder, where papermill runs it), so relative
    paths mean what they mean in the notebook."""
    notebook = Path(notebook).resolve()
    defaults = parameter_defaults(notebook)
    annotations = parameter_annotations(notebook)
    for name, value in params.items():
        if name not in defaults:
            raise ValueError(f"unknown parameter {name!r} for {notebook.stem}; its parameters are: "
                             f"{', '.join(defaults)}")
        _check_type(name, value, defaults[name], annotations.get(name))
    namespace: dict[str, Any] = {**defaults, **params}
    with contextlib.redirect_stdout(io.StringIO()), _working_directory(Path(cwd or notebook.parent)):
        for i, source in enumerate(_cells(notebook, VALIDATE_TAG)):
            try:
                exec(compile(source, f"{notebook.name}:validate[{i}]", "exec"), namespace)  # noqa: S102
            except (TypeError, AttributeError, KeyError, IndexError) as err:
                given = ", ".join(f"{k}={v!r}" for k, v in params.items()) or "its defaults"
                raise ValueError(f"{notebook.stem} cannot use {given}: {type(err).__name__}: {err} (a value of the "
                                 "wrong type? see the notebook's parameters cell)") from None
