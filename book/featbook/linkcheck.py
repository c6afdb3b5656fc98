"""Link check of a built HTML book: its own links (offline), or its links to other sites (``--external``).

Every internal ``href``/``src`` of every ``.html`` page (not the theme's template snippets
under ``_static``) must name a file that exists under the
HTML directory, and a ``#fragment`` must name an ``id`` (or ``<a name>``) of the target page.
Links with a scheme (``http:``, ``https:``, ``mailto:``, ``javascript:``, ``data:`` ...),
protocol-relative links (``//host/...``) and the bare ``#`` are not checked.

With ``--external`` it checks the other sites' links instead, over the network (the weekly
``links`` workflow): every ``http(s)`` link of the pages, anchors and resources alike (``href``,
``src``, the front page's redirect; ``//host`` as ``https:``), each URL requested once (its
``#fragment`` dropped), ``HEAD`` first and ``GET`` when a server refuses ``HEAD`` (405, 403, 501),
redirects followed. A link is broken when the server answers 400 or more, or cannot be reached
(refused, unknown host, TLS, no answer within ``--timeout`` seconds per wait); 429 (too many
requests) is reported but not counted. The whole check stops after ``--deadline`` seconds, and a
link not answered by then counts as broken. ``--report FILE`` also writes what it found as JSON
(atomically), which the workflow turns into an issue.

    python -m featbook.linkcheck [HTML_DIR]                  # default: _build/html
    python -m featbook.linkcheck --external [--report FILE] [HTML_DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import queue
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

#: Attributes holding one URL.
URL_ATTRIBUTES = {"href", "src"}
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class BrokenLink:
    page: str  # the page holding the link, relative to the HTML directory
    url: str  # the link as written
    reason: str

    def __str__(self) -> str:
        return f"{self.page}: {self.url} ({self.reason})"


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self.ids: set[str] = set()
        self.external: list[tuple[str, str]] = []  # (tag, url) of resources loaded from elsewhere

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        if tag == "a" and attributes.get("name"):
            self.ids.add(attributes["name"])
        if tag == "meta" and (attributes.get("http-equiv") or "").lower() == "refresh":  # index.html's redirect
            match = re.search(r"url\s*=\s*['\"]?([^'\"\s]+)", attributes.get("content") or "", re.IGNORECASE)
            if match:
                self.urls.append(match.group(1))
        for name in URL_ATTRIBUTES:
            value = (attributes.get(name) or "").strip()
            if not value:
                continue
            self.urls.append(value)
            loaded = name == "src" or (tag == "link" and "stylesheet" in (attributes.get("rel") or "").split())
            if loaded and (value.startswith("//") or value.lower().startswith(("http:", "https:"))):
                self.external.append((tag, value))

    handle_startendtag = handle_starttag


def _parse(page: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser


def is_internal(url: str) -> bool:
    """Whether ``url`` names something inside the book (not another site, not a script, not ``#``)."""
    return not (url == "#" or url.startswith("//") or _SCHEME.match(url))


def _resolve(html_dir: Path, page: Path, path: str) -> Path:
    target = (html_dir if path.startswith("/") else page.parent) / unquote(path.lstrip("/"))
    return target / "index.html" if target.is_dir() else target


def book_pages(html_dir: Path) -> list[Path]:
    """The ``.html`` pages under ``html_dir``; ``_static`` holds theme templates, not pages."""
    return sorted(p for p in html_dir.rglob("*.html") if p.relative_to(html_dir).parts[0] != "_static")


def find_broken_links(html_dir: Path | str) -> list[BrokenLink]:
    """The broken internal links of every ``.html`` page under ``html_dir``."""
    html_dir = Path(html_dir).resolve()
    pages = book_pages(html_dir)
    # a page that is a link to nothing (or to something not a file) is itself broken, not a traceback
    broken = [BrokenLink(p.relative_to(html_dir).as_posix(), p.name, "the page is a link to no file")
              for p in pages if not p.is_file()]
    parsed: dict[Path, _PageParser] = {page: _parse(page) for page in pages if page.is_file()}
    for page, parser in list(parsed.items()):
        name = page.relative_to(html_dir).as_posix()
        for url in dict.fromkeys(parser.urls):  # each distinct link once per page
            if not is_internal(url):
                continue
            path, fragment = urldefrag(url)
            path = urlsplit(path).path  # drop ?query (Sphinx's ?v=checksum on static files)
            target = _resolve(html_dir, page, path).resolve() if path else page
            try:
                target.relative_to(html_dir)
            except ValueError:
                broken.append(BrokenLink(name, url, "points outside the HTML directory"))
                continue
            if not target.is_file():
                broken.append(BrokenLink(name, url, "no such file"))
                continue
            if fragment and target.suffix == ".html":
                if target not in parsed:
                    parsed[target] = _parse(target)
                if unquote(fragment) not in parsed[target].ids:
                    broken.append(BrokenLink(name, url, f"no id {unquote(fragment)!r} in {target.name}"))
    return broken


def find_external_resources(html_dir: Path | str) -> list[tuple[str, str]]:
    """``(page, url)`` of every script, image, frame or stylesheet a page loads from another site."""
    html_dir = Path(html_dir)
    return [(page.relative_to(html_dir).as_posix(), url)
            for page in book_pages(html_dir) if page.is_file() for _, url in _parse(page).external]


# -- other sites' links (--external) ------------------------------------------------------------
#: Seconds one wait for a server may take (connecting, each read), and the whole check in all.
EXTERNAL_TIMEOUT_S = 20.0
EXTERNAL_DEADLINE_S = 600.0
#: Requests in flight at once.
EXTERNAL_WORKERS = 8
#: Answers to ``HEAD`` after which the link is asked again with ``GET`` (servers that refuse ``HEAD``).
HEAD_REFUSED = (403, 405, 501)
#: An answer that says "not now", not "not there": reported, never counted as broken.
RATE_LIMITED = 429
USER_AGENT = "featbook-linkcheck (https link check of a Jupyter Book; one request per URL)"


def is_external(url: str) -> bool:
    """Whether ``url`` is another site's ``http(s)`` page or file (``//host/...`` included)."""
    return url.startswith("//") or url.lower().startswith(("http://", "https://"))


def find_external_links(html_dir: Path | str) -> dict[str, list[str]]:
    """Every external ``http(s)`` URL of the pages under ``html_dir`` (anchors and resources, the
    ``#fragment`` dropped, ``//host`` as ``https:``), with the pages that link to it, in order."""
    html_dir = Path(html_dir)
    found: dict[str, list[str]] = {}
    for page in book_pages(html_dir):
        if not page.is_file():
            continue
        name = page.relative_to(html_dir).as_posix()
        for url in _parse(page).urls:
            if not is_external(url):
                continue
            url = urldefrag("https:" + url if url.startswith("//") else url)[0]
            pages = found.setdefault(url, [])
            if name not in pages:
                pages.append(name)
    return found


@dataclass
class LinkStatus:
    url: str
    status: int | None  # the HTTP status of the last answer; None: no answer
    reason: str
    pages: list[str] = field(default_factory=list)

    @property
    def broken(self) -> bool:
        return self.status is None or (self.status >= 400 and self.status != RATE_LIMITED)

    def __str__(self) -> str:
        shown = ", ".join(self.pages[:3]) + (f" and {len(self.pages) - 3} more" if len(self.pages) > 3 else "")
        return f"{self.url}: {self.reason} (linked from {shown})"


class _KeepMethod(urllib.request.HTTPRedirectHandler):
    """Follow redirects with the method asked (urllib turns a redirected ``HEAD`` into a ``GET``)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            new.method = req.get_method()
        return new


_OPENER = urllib.request.build_opener(_KeepMethod)


def _ask(url: str, method: str, timeout: float) -> tuple[int | None, str]:
    request = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT, "Accept": "*/*"})
    try:
        with _OPENER.open(request, timeout=timeout) as response:  # noqa: S310 (http(s) only: is_external)
            return response.status, f"{response.status} {response.reason}"
    except urllib.error.HTTPError as err:
        err.close()
        return err.code, f"{err.code} {err.reason}"
    except (urllib.error.URLError, OSError, ValueError) as err:  # refused, DNS, TLS, timeout, a malformed URL
        reason = getattr(err, "reason", None) or err
        return None, f"no answer ({type(reason).__name__}: {reason})"
    except Exception as err:  # noqa: BLE001 (http.client's protocol errors: one link, not the whole check)
        return None, f"no answer ({type(err).__name__}: {err})"


def check_url(url: str, timeout: float = EXTERNAL_TIMEOUT_S) -> tuple[int | None, str]:
    """``(status, reason)`` of ``url``: ``HEAD``, then ``GET`` when the server refuses ``HEAD``."""
    status, reason = _ask(url, "HEAD", timeout)
    if status in HEAD_REFUSED:
        status, reason = _ask(url, "GET", timeout)
    return status, reason


def check_external(links: dict[str, list[str]], *, timeout: float = EXTERNAL_TIMEOUT_S,
                   deadline: float = EXTERNAL_DEADLINE_S, workers: int = EXTERNAL_WORKERS,
                   check=None) -> list[LinkStatus]:
    """Ask every URL of ``links`` (URL -> pages) once, ``workers`` at a time, for at most ``deadline``
    seconds in all; a URL not answered by then is broken ("not answered within ..."). The
    requests run in daemon threads, so a server that never answers cannot hold the process.
    ``check(url, timeout) -> (status, reason)`` asks one URL (default :func:`check_url`)."""
    check = check or check_url
    todo: queue.Queue = queue.Queue()
    for url in links:
        todo.put(url)
    answers: dict[str, tuple[int | None, str]] = {}
    lock = threading.Lock()

    def work() -> None:
        while True:
            try:
                url = todo.get_nowait()
            except queue.Empty:
                return
            answer = check(url, timeout)
            with lock:
                answers[url] = answer

    threads = [threading.Thread(target=work, daemon=True, name=f"linkcheck-{i}")
               for i in range(max(1, min(workers, len(links))))]
    for thread in threads:
        thread.start()
    ends = time.monotonic() + deadline
    for thread in threads:
        thread.join(max(0.0, ends - time.monotonic()))
    with lock:
        done = dict(answers)
    return [LinkStatus(url, *done.get(url, (None, f"not answered within the check's {deadline:g} s")), pages=list(pages))
            for url, pages in links.items()]


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def external_report(checked: list[LinkStatus], html_dir: Path) -> dict:
    """What ``--report`` writes: the folder, how many URLs were asked, the broken and the rate-limited ones."""
    def entry(link: LinkStatus) -> dict:
        return {"url": link.url, "status": link.status, "reason": link.reason, "pages": link.pages}

    return {"html_dir": str(html_dir), "checked": len(checked),
            "broken": [entry(link) for link in checked if link.broken],
            "rate_limited": [entry(link) for link in checked if link.status == RATE_LIMITED]}


def main_external(args) -> int:
    from featlib.store.atomic import atomic_write_text

    links = find_external_links(args.html_dir)
    checked = check_external(links, timeout=args.timeout, deadline=args.deadline)
    broken = [link for link in checked if link.broken]
    for link in broken:
        print(f"broken: {link}")
    for link in checked:
        if link.status == RATE_LIMITED:
            print(f"not counted (the server asks to slow down): {link}")
    print(f"{len(broken)} of {len(checked)} external link(s) broken in {args.html_dir}")
    if args.report is not None:
        try:
            atomic_write_text(args.report, json.dumps(external_report(checked, args.html_dir), indent=1) + "\n")
        except OSError as err:
            print(f"error: {args.report}: {err.strerror or err}; the report was not written: give --report a "
                  "writable file", file=sys.stderr)
            return 2
    return 1 if broken else 0


def main(argv: list[str] | None = None) -> int:
    from featbook.notebooks import REPO_ROOT
    from featlib.cli.common import OneLineParser

    parser = OneLineParser(prog="python -m featbook.linkcheck", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html_dir", nargs="?", type=Path, default=REPO_ROOT / "_build" / "html")
    parser.add_argument("--external", action="store_true",
                        help="check the links to other sites over the network instead of the book's own")
    parser.add_argument("--report", type=Path, help="with --external: also write what was found as JSON to this file")
    parser.add_argument("--timeout", type=_positive_seconds,
                        help=f"with --external: seconds one wait for a server may take (default {EXTERNAL_TIMEOUT_S:g})")
    parser.add_argument("--deadline", type=_positive_seconds,
                        help=f"with --external: seconds the whole check may take (default {EXTERNAL_DEADLINE_S:g})")
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help (0), or OneLineParser's one error line (2)
        return int(stop.code or 0)
    if not args.html_dir.is_dir():
        print(f"error: {args.html_dir} is not a directory: build the book first (make book)", file=sys.stderr)
        return 2
    external_only = [f"--{name}" for name in ("report", "timeout", "deadline") if getattr(args, name) is not None]
    if external_only and not args.external:
        print(f"error: {external_only[0]} applies to the external check only: add --external", file=sys.stderr)
        return 2
    if args.external:
        args.timeout = args.timeout or EXTERNAL_TIMEOUT_S
        args.deadline = args.deadline or EXTERNAL_DEADLINE_S
        if not book_pages(args.html_dir):
            print(f"error: {args.html_dir} holds no .html pages: build the book first (make book), or give its "
                  "_build/html", file=sys.stderr)
            return 2
        if args.report is not None and (args.report.is_dir() or not args.report.parent.is_dir()):
            what = "is a folder" if args.report.is_dir() else f"is in a folder that does not exist ({args.report.parent})"
            print(f"error: --report {args.report} {what}: give a file in an existing folder", file=sys.stderr)
            return 2
        return main_external(args)
    broken = find_broken_links(args.html_dir)
    for link in broken:
        print(link)
    for page, url in find_external_resources(args.html_dir):
        print(f"{page}: loads {url} from another site")
    print(f"{len(broken)} broken link(s) in {args.html_dir}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
