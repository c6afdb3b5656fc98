"""Notebook parameters are checked before a kernel starts: names, types (annotation or default)
and the notebook's own range checks (its ``validate`` cells)."""
import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from featlib.data.wilds_data import WildsDatasetNotFoundError
from featbook.notebook_params import check_parameters, parameter_annotations, parameter_defaults
from featbook.notebooks import execute_notebook, list_notebooks, load_profile


def chapter(prefix):
    return next(p for p in list_notebooks() if p.stem.startswith(prefix))


def test_every_chapter_has_validate_cells_and_accepts_its_profiles():
    small = load_profile("small")
    for nb in list_notebooks():
        cells = json.loads(nb.read_text())["cells"]
        assert any("validate" in c.get("metadata", {}).get("tags", []) for c in cells), nb.name
        check_parameters(nb, small.get(nb.stem, {}))
    for nb in list_notebooks():  # the defaults (chapter 05's download the real data when it is missing)
        check_parameters(nb, {})


@pytest.mark.parametrize("prefix, params, exception, message", [
    ("01", {"stepz": 3}, ValueError, "unknown parameter 'stepz' for 01_erm_feature_learning; its parameters are: alpha, "),
    ("01", {"steps": "10"}, ValueError, "steps must be an integer (its default is 1000); got '10'"),
    ("01", {"steps": True}, ValueError, "steps must be an integer (its default is 1000); got True"),
    ("01", {"alpha": 1.5}, ValueError, "alpha must be a probability in the open interval (0, 1); got 1.5"),
    ("02", {"penalty_weight": -1.0}, ValueError, "penalty_weight must be a finite number > 0; got -1.0"),
    ("03", {"seeds": 3}, ValueError, "seeds must be a list (its default is [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]); got 3"),
    ("04", {"datasets": ["cmnist02"]}, ValueError, "dataset must be one of 'cmnist025', 'cmnist01'; got 'cmnist02'"),
    ("05", {"dataset": "imagenet", "fabricate": True}, ValueError, "dataset must be one of 'camelyon17', "),
    ("05", {"pretrained": 3}, ValueError, "pretrained must be True or False or a string (its default is 'auto'); got 3"),
    ("05", {"fabricate": "yes"}, ValueError, "fabricate must be True or False (its default is False); got 'yes'"),
    ("05", {"data_root": "/nowhere", "download": False}, WildsDatasetNotFoundError, "/nowhere/camelyon17_v1.0 does not exist"),
])
def test_bad_parameters_are_rejected_with_the_parameter_named(prefix, params, exception, message):
    with pytest.raises(exception) as err:
        check_parameters(chapter(prefix), params)
    assert message in str(err.value)


def test_annotations_and_defaults_give_the_accepted_types():
    nb = chapter("05")
    assert parameter_annotations(nb)["pretrained"][1] == (bool, str)
    assert parameter_defaults(nb)["epoch_scale"] == 1.0
    check_parameters(nb, {"pretrained": False, "epoch_scale": 2, "fabricate": True})  # an int for a float is fine
    check_parameters(chapter("03"), {"cache_dir": None})  # annotated str | None


def test_execute_notebook_rejects_before_a_kernel_starts(tmp_path):
    out = tmp_path / "out.ipynb"
    with pytest.raises(ValueError, match="alpha must be a probability"):
        execute_notebook(chapter("01"), out, {"alpha": 2.0})
    assert not out.exists()


def test_relative_paths_are_checked_from_the_notebooks_folder(tmp_path):
    nb = new_notebook(cells=[new_code_cell('root = "data"', metadata={"tags": ["parameters"]}),
                             new_code_cell("import os\nassert os.path.isdir(root), root", metadata={"tags": ["validate"]})])
    (tmp_path / "data").mkdir()
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    check_parameters(path, {})
    with pytest.raises(AssertionError):
        check_parameters(path, {"root": "elsewhere"})
