"""Staging the book (no notebook execution, no rendering): MathJax served locally, the CDN fallback,
and the Sphinx extension that keeps one copy of each page script."""
import shutil

import pytest
import yaml

import featbook.build as book
from featbook.notebooks import list_notebooks
from featbook.sphinx_fixes import drop_duplicate_scripts


@pytest.fixture
def unexecuted(tmp_path):
    """The chapter notebooks as they are stored (staging only copies them)."""
    out = tmp_path / "executed"
    out.mkdir()
    for nb in list_notebooks():
        shutil.copy2(nb, out / nb.name)
    return out


def staged_config(stage_dir):
    return yaml.safe_load((stage_dir / "_config.yml").read_text())


def test_staging_serves_mathjax_from_the_book(unexecuted, tmp_path):
    if book.mathjax_es5() is None:
        pytest.skip("the mathjax package (django-static-mathjax) is not installed")
    stage_dir = tmp_path / "stage"
    book.stage(unexecuted, stage_dir)
    config = staged_config(stage_dir)
    assert config["sphinx"]["config"]["mathjax_path"] == "mathjax/tex-mml-chtml.js"
    assert "_mathjax" in config["sphinx"]["config"]["html_static_path"]
    mathjax = stage_dir / "_mathjax" / "mathjax"
    assert (mathjax / "tex-mml-chtml.js").is_file()
    assert any((mathjax / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert (mathjax / "input" / "tex" / "extensions").is_dir()  # autoloaded TeX packages
    assert not (mathjax / "tex-svg.js").exists()  # combined components the pages never load
    assert config["sphinx"]["local_extensions"] == {"featlib_sphinx_fixes": "_ext"}
    assert not (stage_dir / "_static").exists()  # Jupyter Book would add every static .js to every page
    assert (stage_dir / "_featbook" / "featbook.css").is_file()
    assert "featbook.css" in config["sphinx"]["config"]["html_css_files"]
    assert "_featbook" in config["sphinx"]["config"]["html_static_path"]
    assert (stage_dir / "_ext" / "featlib_sphinx_fixes.py").is_file()
    # The rest of the repository's configuration is kept.
    original = yaml.safe_load((book.REPO_ROOT / "_config.yml").read_text())
    assert config["sphinx"]["config"]["html_context"] == original["sphinx"]["config"]["html_context"]
    assert config["repository"] == original["repository"] and config["title"] == original["title"]


def test_staging_falls_back_to_the_cdn_without_the_mathjax_package(unexecuted, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(book, "mathjax_es5", lambda: None)
    stage_dir = tmp_path / "stage"
    book.stage(unexecuted, stage_dir)
    config = staged_config(stage_dir)["sphinx"]["config"]
    assert "mathjax_path" not in config and "_mathjax" not in config.get("html_static_path", [])
    assert not (stage_dir / "_mathjax").exists()
    assert "load MathJax from a CDN" in capsys.readouterr().out


def test_a_missing_executed_notebook_stops_the_staging(tmp_path):
    with pytest.raises(FileNotFoundError, match="execute the notebooks first"):
        book.stage(tmp_path, tmp_path / "stage")


def test_duplicate_page_scripts_are_dropped():
    from sphinx.builders.html._assets import _JavaScript

    thebe = "const THEBE_JS_URL = 'x'"
    scripts = [_JavaScript("_static/doctools.js", priority=200), _JavaScript(None, body=thebe, priority=500),
               _JavaScript("_static/sphinx-thebe.js", priority=500), _JavaScript("", body=thebe, priority=500),
               _JavaScript("_static/doctools.js", priority=200)]
    context = {"script_files": scripts}
    drop_duplicate_scripts(None, "page", "page.html", context, None)
    assert context["script_files"] is scripts  # edited in place
    assert [(s.filename, s.attributes.get("body")) for s in scripts] == [
        ("_static/doctools.js", None), (None, thebe), ("_static/sphinx-thebe.js", None)]
