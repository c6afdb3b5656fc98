"""Helpers to write chapter notebooks from Python (kept without outputs)."""
import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

sys.path.insert(0, os.path.dirname(__file__))
from install_cell import install_cell_source  # noqa: E402,F401  (re-exported for make_chNN.py)

def md(text):
    return new_markdown_cell(text.strip("\n"))


def code(text, tags=None, caption=None, name=None):
    """A code cell; ``caption`` (and ``name``, for {numref} cross-references) make its image
    output a numbered figure with that caption in the book (myst-nb's ``mystnb.figure``)."""
    cell = new_code_cell(text.strip("\n"))
    if tags:
        cell.metadata["tags"] = list(tags)
    if caption:
        cell.metadata["mystnb"] = {"figure": {"caption": caption, **({"name": name} if name else {})}}
    return cell


def write(path, cells):
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.validate(nb)
    nbformat.write(nb, path)
