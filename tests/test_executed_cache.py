"""Rebuilds redo only what changed (featbook.executed, featbook.build.sync_tree): a chapter is
executed once per key of what determines its outputs; a prose edit reuses the outputs under the
new prose, a code, parameter or library edit executes it again; the stage keeps unchanged files."""
import os
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from featbook import executed
from featbook.build import sync_tree
from featbook.notebooks import execute_notebook


def chapter(tmp_path, prose="Some prose.", code="y = x * 2\nprint(y)", name="01_tiny.ipynb"):
    nb = new_notebook()
    params = new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [new_markdown_cell(f"# Tiny\n\n{prose}"), params, new_code_cell(code), new_markdown_cell("The end.")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "sources" / name
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def run(tmp_path):
    calls = []

    def execute(notebook, output, parameters, cwd):
        calls.append(notebook.name)
        return execute_notebook(notebook, output, parameters, cwd=cwd)

    def once(source, parameters=None, code="library-1", fresh=False):
        out = tmp_path / "executed" / source.name
        seconds, ran = executed.execute_cached(source, out, parameters or {}, tmp_path, execute,
                                               cache_dir=tmp_path / "cache", code=code, fresh=fresh)
        return nbformat.read(str(out), as_version=4), ran
    once.calls = calls
    return once


def outputs(nb):
    return [o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def test_a_prose_edit_reuses_the_outputs_under_the_new_prose(tmp_path, run):
    first, ran = run(chapter(tmp_path), parameters={"x": 4})
    assert ran and outputs(first) == ["8\n"]
    again, ran = run(chapter(tmp_path, prose="Better prose, one more sentence."), parameters={"x": 4})
    assert not ran and run.calls == ["01_tiny.ipynb"]
    assert "Better prose" in again.cells[0].source and outputs(again) == ["8\n"]
    tags = [c.metadata.get("tags", []) for c in again.cells]
    assert ["injected-parameters"] in tags and tags.index(["injected-parameters"]) == tags.index(["parameters"]) + 1


@pytest.mark.parametrize("change", ["code", "parameters", "library", "fresh"])
def test_a_code_parameter_or_library_edit_executes_again(tmp_path, run, change):
    run(chapter(tmp_path))
    source = chapter(tmp_path, code="y = x * 3\nprint(y)") if change == "code" else chapter(tmp_path)
    nb, ran = run(source, parameters={"x": 5} if change == "parameters" else None,
                  code="library-2" if change == "library" else "library-1", fresh=change == "fresh")
    assert ran and len(run.calls) == 2
    assert outputs(nb) == [{"code": "3\n", "parameters": "10\n"}.get(change, "2\n")]


def test_only_the_edited_chapter_is_executed(tmp_path, run):
    a, b = chapter(tmp_path, name="01_a.ipynb"), chapter(tmp_path, name="02_b.ipynb")
    run(a), run(b)
    run(a), run(chapter(tmp_path, name="02_b.ipynb", code="y = x + 40\nprint(y)"))
    assert run.calls == ["01_a.ipynb", "02_b.ipynb", "02_b.ipynb"]


def test_the_committed_results_are_in_the_key(tmp_path):
    nb = nbformat.read(str(chapter(tmp_path)), as_version=4)
    one = executed.chapter_key(nb, {}, code="c", results=b'{"files": {"results/a.csv": 1}}')
    assert one != executed.chapter_key(nb, {}, code="c", results=b'{"files": {"results/a.csv": 2}}')
    assert one == executed.chapter_key(nb, {}, code="c", results=b'{"files": {"results/a.csv": 1}}')


def test_the_stage_keeps_the_time_of_unchanged_files_and_drops_stale_ones(tmp_path):
    source, target = tmp_path / "new", tmp_path / "stage"
    (source / "notebooks").mkdir(parents=True)
    (source / "notebooks" / "a.ipynb").write_text("same")
    (source / "intro.md").write_text("old")
    assert sync_tree(source, target) == 2
    old = time.time() - 3600
    os.utime(target / "notebooks" / "a.ipynb", (old, old))
    (source / "intro.md").write_text("new")
    (target / "stale.md").write_text("gone soon")
    assert sync_tree(source, target) == 1
    assert (target / "notebooks" / "a.ipynb").stat().st_mtime == pytest.approx(old)
    assert (target / "intro.md").read_text() == "new" and not (target / "stale.md").exists()


def test_a_result_file_changed_without_its_manifest_changes_the_key(tmp_path):
    (tmp_path / "cmnist-table2").mkdir()
    piece = tmp_path / "cmnist-table2" / "seed1.csv"
    piece.write_text("a\n1\n")
    (tmp_path / "manifest.json").write_text("{}")
    before = executed.results_digest(tmp_path)
    (tmp_path / ".pieces.lock").write_text("")  # hidden files are no results
    assert executed.results_digest(tmp_path) == before
    piece.write_text("a\n2\n")  # a pieces run added numbers; the manifest was not rewritten
    assert executed.results_digest(tmp_path) != before


def test_the_injected_cell_is_labelled_for_the_reader_and_keeps_its_values(tmp_path, run):
    from featbook.executed import INJECTED_LABEL, label_injected

    nb, _ = run(chapter(tmp_path), parameters={"x": 4})
    assert label_injected(nb) == 1
    injected = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert injected.source.splitlines() == [INJECTED_LABEL, "x = 4"]
    assert label_injected(nb) == 1 and injected.source.splitlines() == [INJECTED_LABEL, "x = 4"]  # idempotent
    defaults = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})])
    assert label_injected(defaults) == 0 and defaults.cells[0].source == "x = 1"
