"""Helpers to write chapter notebooks from Python (kept without outputs)."""
import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from featlib.repository import from_config  # noqa: E402

# The book's one repository setting: `repository` in _config.yml (url and branch). The install
# cell is written from it; change it there and re-run tools/make_chNN.py.
REPOSITORY = from_config()

COLAB_CELL = f'''# In Colab: install featlib from the book's repository (does nothing elsewhere). FEATLIB_REPOSITORY
# tells featlib where to fetch the committed results from: the same repository and branch.
import os, sys
if "google.colab" in sys.modules:
    os.environ["FEATLIB_REPOSITORY"] = "{REPOSITORY.url}@{REPOSITORY.branch}"
    %pip install -q "{REPOSITORY.pip_spec}"'''


# The first cell of the WILDS chapters (05, 06, 07).
WILDS_COLAB = COLAB_CELL + r'''
    # WILDS extras, and torch-scatter (wilds' grouped metrics) as PyG's prebuilt wheel for Colab's
    # torch (PyG publishes one index per torch minor version, named x.y.0).
    import torch
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    cuda = "cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else "cpu"
    pyg_index = f"https://data.pyg.org/whl/torch-{major}.{minor}.0+{cuda}.html"
    %pip install -q "wilds==2.0.0" "pandas<3" transformers
    %pip install -q torch-scatter -f $pyg_index'''


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
