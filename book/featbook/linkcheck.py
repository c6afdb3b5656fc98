"""Static link check of a built HTML book (no network, no browser).

Every internal ``href``/``src`` of every ``.html`` page (not the theme's template snippets
under ``_static``) must name a file that exists under the
HTML directory, and a ``#fragment`` must name an ``id`` (or ``<a name>``) of the target page.
Links with a scheme (``http:``, ``https:``, ``mailto:``, ``javascript:``, ``data:`` ...),
protocol-relative links (``//host/...``) and the bare ``#`` are not checked.

    python -m featbook.linkcheck [HTML_DIR]      # default: _build/html
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
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


def main(argv: list[str] | None = None) -> int:
    from featbook.notebooks import REPO_ROOT

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html_dir", nargs="?", type=Path, default=REPO_ROOT / "_build" / "html")
    args = parser.parse_args(argv)
    if not args.html_dir.is_dir():
        print(f"error: {args.html_dir} is not a directory: build the book first (make book)", file=sys.stderr)
        return 2
    broken = find_broken_links(args.html_dir)
    for link in broken:
        print(link)
    for page, url in find_external_resources(args.html_dir):
        print(f"{page}: loads {url} from another site")
    print(f"{len(broken)} broken link(s) in {args.html_dir}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
