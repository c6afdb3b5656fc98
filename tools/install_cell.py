"""The first cell of every chapter notebook: installs featlib (and a chapter's extras) in Colab.

The one place that says what a chapter's install cell is. ``install_cell_source(chapter)`` returns
the cell's source for a chapter number ("01" ... "07"); the notebook writers put it into the
notebook's first code cell. Its repository and branch come from ``_config.yml`` (``repository``).
"""
import os
import sys

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



WILDS_CHAPTERS = ("05", "06", "07")


def install_cell_source(chapter: str) -> str:
    """The install cell of chapter ``chapter`` ("01" ... "07")."""
    return WILDS_COLAB if chapter in WILDS_CHAPTERS else COLAB_CELL
