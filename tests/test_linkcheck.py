"""The static link checker, on a fabricated HTML directory and on the built book."""
import os

import pytest

from featbook.build import MATHJAX_ENTRY, mathjax_es5
from featbook.linkcheck import find_broken_links, find_external_resources, is_internal


def write(path, body):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<!DOCTYPE html><html><body>{body}</body></html>")


@pytest.fixture
def site(tmp_path):
    write(tmp_path / "index.html", '<meta http-equiv="Refresh" content="0; url=book/intro.html" />')
    write(tmp_path / "book" / "intro.html",
          '<h1 id="intro">Intro</h1><a href="#intro">self</a><a href="#">top</a>'
          '<a href="../notebooks/ch1.html#eq-1">eq</a><a name="old"></a><a href="intro.html#old">old</a>'
          '<a href="https://example.org/x.html">web</a><a href="mailto:a@b.c">mail</a>'
          '<a href="javascript:void(0)">js</a><img src="../_images/fig.png">'
          '<script src="../_static/app.js?v=1234"></script><a href="../notebooks/">dir</a>')
    write(tmp_path / "notebooks" / "ch1.html", '<span id="eq-1"></span><a href="../book/intro.html">back</a>')
    write(tmp_path / "notebooks" / "index.html", "")
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "fig.png").write_bytes(b"\x89PNG")
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "app.js").write_text("")
    write(tmp_path / "_static" / "template.html", "<a href=\"{{ pathto('x') }}\">theme snippet, not a page</a>")
    return tmp_path


def test_a_sound_site_has_no_broken_links(site):
    assert find_broken_links(site) == []
    assert find_external_resources(site) == []


def test_the_checker_catches_a_missing_file_and_a_missing_anchor(site):
    write(site / "notebooks" / "ch2.html",
          '<a href="ch1.html#eq-2">missing anchor</a><img src="../_images/nowhere.png">'
          '<a href="#here">missing local anchor</a><a href="../book/intro.html#intro">fine</a>'
          '<script src="https://cdn.example.org/lib.js"></script>')
    broken = {(b.page, b.url): b.reason for b in find_broken_links(site)}
    assert broken == {
        ("notebooks/ch2.html", "ch1.html#eq-2"): "no id 'eq-2' in ch1.html",
        ("notebooks/ch2.html", "../_images/nowhere.png"): "no such file",
        ("notebooks/ch2.html", "#here"): "no id 'here' in ch2.html",
    }
    assert find_external_resources(site) == [("notebooks/ch2.html", "https://cdn.example.org/lib.js")]


def test_the_redirect_of_the_front_page_is_checked(site):
    (site / "book" / "intro.html").unlink()
    assert ("index.html", "book/intro.html") in {(b.page, b.url) for b in find_broken_links(site)}


@pytest.mark.parametrize("url, internal", [
    ("page.html", True), ("#x", True), ("/a/b.html", True), ("#", False), ("https://x.org", False),
    ("HTTP://x.org", False), ("//cdn.org/a.js", False), ("mailto:x@y", False), ("javascript:void(0)", False),
    ("data:image/png;base64,AA", False),
])
def test_internal_links(url, internal):
    assert is_internal(url) is internal


@pytest.mark.notebook
def test_the_built_book_has_no_broken_links(built_book):
    broken = find_broken_links(built_book)
    assert not broken, "broken links:\n" + "\n".join(map(str, broken))


@pytest.mark.notebook
def test_the_built_book_serves_mathjax_itself(built_book):
    if mathjax_es5() is None:
        message = "the mathjax package (django-static-mathjax) is not installed: the book loads MathJax from a CDN"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    assert find_external_resources(built_book) == []
    page = (built_book / "notebooks" / "01_erm_feature_learning.html").read_text()
    assert f'src="../_static/mathjax/{MATHJAX_ENTRY}' in page
    assert (built_book / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
