"""The static link checker, on a fabricated HTML directory and on the built book."""
import json
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
def test_the_built_book_passes_the_builds_own_page_check(built_book):
    """What `make book` (featbook.build) checks after rendering, on the book the tests built: no page
    shows code, a test run beside the paper's numbers, or bookkeeping in its reading text."""
    from featbook.build import check_pages

    check_pages(built_book)


@pytest.mark.notebook
def test_every_chapter_the_profile_overrides_labels_its_injected_values(built_book):
    """A reader sees one parameters cell of defaults and, under it, the values the page ran with,
    said to replace them (papermill's own "# Parameters" looked like a second set of defaults)."""
    import re

    from featbook.executed import INJECTED_LABEL
    from featbook.notebooks import list_notebooks, load_profile

    overridden = [nb.stem for nb in list_notebooks() if load_profile("small").get(nb.stem)]
    assert overridden
    for stem in overridden:
        page = (built_book / "notebooks" / f"{stem}.html").read_text(encoding="utf-8")
        cell = page[page.index("tag_injected-parameters"):]
        text = re.sub(r"<[^>]+>", "", cell[:cell.index("</pre>")])
        assert INJECTED_LABEL in text.replace("&#39;", "'"), stem
        assert "# Parameters" not in text, stem


def test_the_built_book_serves_mathjax_itself(built_book):
    if mathjax_es5() is None:
        message = "the mathjax package (django-static-mathjax) is not installed: the book loads MathJax from a CDN"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    assert find_external_resources(built_book) == []
    page = (built_book / "notebooks" / "01_erm_feature_learning.html").read_text()
    assert f'src="../_static/mathjax/{MATHJAX_ENTRY}' in page
    assert (built_book / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


# -- the external check (--external), against a local server: no internet ---------------------------
@pytest.fixture
def web(tmp_path):
    """A local HTTP server (http.server) serving one file, ``/good.html``; every other path is 404,
    except ``/head-refused`` (405 to HEAD, 200 to GET), ``/busy`` (429), ``/moved`` (301 to
    ``/good.html``) and ``/hang`` (answers after 5 s). Yields (base URL, the requests it got)."""
    import functools
    import http.server
    import threading
    import time

    served = tmp_path / "served"
    served.mkdir()
    (served / "good.html").write_text("<p>here</p>")
    asked = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, head: bool):
            asked.append((self.command, self.path))
            if self.path == "/head-refused" and head:
                self.send_error(405)
            elif self.path in ("/head-refused", "/busy", "/moved", "/hang"):
                if self.path == "/hang":
                    time.sleep(5)
                code = {"/busy": 429, "/moved": 301}.get(self.path, 200)
                self.send_response(code)
                if code == 301:
                    self.send_header("Location", "/good.html")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                (super().do_HEAD if head else super().do_GET)()

        def do_HEAD(self):
            self.answer(True)

        def do_GET(self):
            self.answer(False)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()
    server.server_close()


def one_page(tmp_path, body: str):
    html = tmp_path / "html"
    write(html / "book" / "intro.html", body)
    return html


def test_external_a_good_link_passes_and_a_404_fails_naming_it(tmp_path, web, capsys):
    from featbook.linkcheck import main

    base, asked = web
    html = one_page(tmp_path, f'<a href="{base}/good.html">good</a><a href="{base}/missing.html">gone</a>'
                              '<a href="../notebooks/x.html">internal, not asked</a>')
    report = tmp_path / "links.json"
    assert main(["--external", "--report", str(report), str(html)]) == 1
    out = capsys.readouterr().out
    assert f"broken: {base}/missing.html: 404 " in out and "(linked from book/intro.html)" in out
    assert f"{base}/good.html:" not in out and "1 of 2 external link(s) broken" in out
    assert sorted(asked) == [("HEAD", "/good.html"), ("HEAD", "/missing.html")]  # each once, HEAD only
    written = json.loads(report.read_text())
    assert written["checked"] == 2 and written["rate_limited"] == []
    assert [(b["url"], b["status"], b["pages"]) for b in written["broken"]] == [
        (f"{base}/missing.html", 404, ["book/intro.html"])]
    # the same page without the 404: nothing broken, exit 0
    html = one_page(tmp_path, f'<a href="{base}/good.html">good</a>')
    assert main(["--external", str(html)]) == 0
    assert "0 of 1 external link(s) broken" in capsys.readouterr().out


def test_external_every_http_link_once_anchors_and_resources(tmp_path):
    from featbook.linkcheck import find_external_links

    html = tmp_path / "html"
    write(html / "index.html", '<meta http-equiv="Refresh" content="0; url=https://example.org/moved.html" />')
    write(html / "a.html", '<a href="https://example.org/p.html#one">a</a><img src="http://img.example.org/f.png">'
                           '<script src="//cdn.example.org/lib.js"></script><link rel="stylesheet" '
                           'href="https://css.example.org/s.css"><a href="mailto:x@y.z">m</a><a href="b.html">b</a>')
    write(html / "b.html", '<a href="https://example.org/p.html#two">again</a><a href="HTTPS://Example.org/Q">q</a>')
    write(html / "_static" / "t.html", '<a href="https://template.example.org/">theme template, not a page</a>')
    assert find_external_links(html) == {
        "https://example.org/p.html": ["a.html", "b.html"],
        "http://img.example.org/f.png": ["a.html"],
        "https://cdn.example.org/lib.js": ["a.html"],
        "https://css.example.org/s.css": ["a.html"],
        "HTTPS://Example.org/Q": ["b.html"],
        "https://example.org/moved.html": ["index.html"],
    }


def test_external_head_refused_falls_back_to_get_429_is_not_broken_redirects_followed(tmp_path, web, capsys):
    from featbook.linkcheck import main

    base, asked = web
    html = one_page(tmp_path, f'<a href="{base}/head-refused">a</a><a href="{base}/busy">b</a>'
                              f'<img src="{base}/moved">')
    assert main(["--external", str(html)]) == 0
    out = capsys.readouterr().out
    assert f"not counted (the server asks to slow down): {base}/busy: 429" in out
    assert "0 of 3 external link(s) broken" in out
    assert sorted(asked) == sorted([("HEAD", "/head-refused"), ("GET", "/head-refused"), ("HEAD", "/busy"),
                                    ("HEAD", "/moved"), ("HEAD", "/good.html")])  # the redirect stays HEAD


def test_external_no_answer_is_broken_and_the_check_is_bounded(tmp_path, web, capsys):
    import socket
    import time

    from featbook.linkcheck import main

    base, _ = web
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/x"
    html = one_page(tmp_path, f'<a href="{closed}">refused</a><a href="{base}/hang">slow</a>')
    started = time.monotonic()
    assert main(["--external", "--timeout", "0.5", str(html)]) == 1
    assert time.monotonic() - started < 4
    out = capsys.readouterr().out
    assert f"broken: {closed}: no answer (ConnectionRefusedError" in out
    assert f"broken: {base}/hang: no answer (" in out and "timed out" in out
    started = time.monotonic()
    assert main(["--external", "--deadline", "1", str(html)]) == 1  # the per-wait timeout (20 s) never fires
    assert time.monotonic() - started < 3
    assert f"broken: {base}/hang: not answered within the check's 1 s" in capsys.readouterr().out


@pytest.mark.parametrize("args, says", [
    (["--external", "{missing}"], "is not a directory"),
    (["--external", "{empty}"], "holds no .html pages"),
    (["--report", "{tmp}/r.json", "{site}"], "--report applies to the external check only: add --external"),
    (["--external", "--timeout", "0", "{site}"], "'0' is not a positive number of seconds"),
    (["--external", "--deadline", "soon", "{site}"], "'soon' is not a positive number of seconds"),
    (["--external", "--report", "{tmp}/no/r.json", "{site}"], "is in a folder that does not exist"),
    (["--external", "--report", "{tmp}", "{site}"], "is a folder"),
])
def test_external_bad_input_is_one_line_and_exit_2(tmp_path, site, capsys, args, says):
    from featbook.linkcheck import main

    (tmp_path / "empty").mkdir()
    names = {"missing": tmp_path / "nowhere", "empty": tmp_path / "empty", "tmp": tmp_path, "site": site}
    assert main([a.format(**names) for a in args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], captured.err
    assert captured.out == ""
