"""Recording named results and reading them back."""
import builtins
import json

import numpy as np
import pytest

from featbook import record as results


def test_record_is_a_no_op_without_myst_nb(monkeypatch, capsys):
    real_import = builtins.__import__

    def no_myst(name, *args, **kwargs):
        if name.startswith("myst_nb"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_myst)
    assert results.record("x", 1.5) is None  # a cell ending with record() shows nothing
    assert results.RECORDED["x"] == 1.5
    assert capsys.readouterr().out == ""


def test_read_records_parses_glued_outputs(tmp_path):
    outputs = [
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}},
         "data": {"application/papermill.record/text/plain": text}}
        for name, text in [("a", "0.25"), ("b", "{'x': [1, 2]}"), ("c", "None")]
    ]
    nb = {"cells": [{"cell_type": "code", "outputs": outputs, "source": "", "metadata": {}}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert results.read_records(path) == {"a": 0.25, "b": {"x": [1, 2]}, "c": None}


def test_numpy_values_become_literals():
    assert results._plain({"a": np.float32(0.5), "b": np.arange(2)}) == {"a": 0.5, "b": [0, 1]}
    with pytest.raises(TypeError, match="record\\(\\) takes numbers"):
        results._plain(object())
