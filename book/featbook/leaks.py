"""Find code that leaked into the pages a reader sees: reprs, braces, paths, long float tails.

A reader should meet prose, tables and figures. What gives a page away as unedited output:

* ``{`` ... ``}`` pairs outside mathematics: an f-string that was not formatted, a dict repr;
* ``dict(``-like reprs: ``dict(``, ``OrderedDict(``, ``Name(field=``, ``<... object at 0x...>``;
* absolute paths of the machine that built the page (``/home/...``, ``site-packages``);
* long float tails (``0.6666666666666666``, ``0.925000``) and ``NaN``;
* references to the project's issue tracker ("issue 3", "this book's issue tracker");
* the preflight's run-time estimate (:data:`PREFLIGHT`), printed by a cell whose output shows;
* template leftovers (:data:`TEMPLATE`): a phrase repeated inside its own parenthesis ("the
  committed rounds (the committed rounds (5 seeds ...))"), "seed(s)", a parameter's name in the
  prose ("after probe_step steps"), a number in code's "e-05" notation;
* bookkeeping (:data:`BOOKKEEPING`): how a result was made -- pieces, caches, sittings, wall
  time, manifests, checksums, commits by hash, the library's version history -- belongs in the
  one collapsed provenance line under a figure or table (``details.feat-provenance``,
  :func:`featbook.evidence.command_block`), the glossary that defines these words, and the
  reference pages (:data:`REFERENCE_PAGES`: the running page, chapter 09, your own objective),
  never in a chapter's reading text;
* a name of the chapter's parameters cell written as inline code where its value belongs
  (:func:`bare_parameters`: "ERM for `pretrain_steps` steps", "the first `n_attribution` test
  images"). Other inline code is left out of the scan: naming a parameter to explain it
  ("`cache_dir` keeps finished pieces") is fine.

:func:`scan_html` reads a rendered page, drops what is code or mathematics by nature (the
code cells' input, MathJax, scripts, the navigation) and scans what is left, prose and
outputs alike, then looks for the names of the page's parameters cell in the inline code of its
prose and outputs; :func:`scan_book` does every page of a built book. ``featbook.build`` fails the
build on a finding, and the browser test runs the same scan on the text the browser shows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: (kind, pattern) of each leak; the first group, if any, is what is reported.
PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("braces", re.compile(r"\{[^{}]{0,300}\}")),
    ("repr", re.compile(r"\b(?:dict|OrderedDict|defaultdict|array|tensor|Series|DataFrame)\(")),
    ("repr", re.compile(r"\b[A-Z]\w*\((?:[a-z_]\w*)=")),
    ("repr", re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>")),
    ("path", re.compile(r"(?<![\w.:/])/(?:home|usr|tmp|root|content|opt|var|work|Users|private|mnt|srv)/[\w./-]+")),
    ("path", re.compile(r"site-packages|dist-packages|[A-Z]:\\\\?[\w]")),
    ("float tail", re.compile(r"(?<![\w.])\d+\.\d{6,}(?!\d*%)")),
    ("NaN", re.compile(r"\b(?:NaN|nan)\b")),
    ("tracker", re.compile(r"(?i)\bissue tracker\b|\bissues? #?\d+\b")),
    ("estimate", re.compile(r"Estimated time of this run|not measured on a T4|WARNING: this runtime has no GPU"
                            r"|Estimated peak GPU memory|of GPU memory at its peak|on a GPU this run would need")),
)

#: What the preflight (``featbook.runtime.preflight``) prints: for someone about to run the
#: notebook, never for the page (a ``remove-input`` cell would still show it).
PREFLIGHT = PATTERNS[-1][1]

#: Words of bookkeeping: how a result was made, not what it shows (see the module docstring).
BOOKKEEPING = re.compile(
    r"(?i)\b(?:pieces?|cache[ds]?|caching|sittings?|wall[- ]time|manifests?|checksums?|sha-?256)\b"
    r"|\bfeatlib \d+\.\d+|\bcommits? [0-9a-f]{7,40}\b")
#: Pages where bookkeeping is the subject (paths relative to the built book's html folder): running
#: the notebooks, how the numbers were made, and running an objective of your own through Table 2.
REFERENCE_PAGES = ("book/running.html", "notebooks/09_how_the_numbers_were_made.html", "book/own_objective.html")
#: Where bookkeeping may stand on any page: the collapsed provenance block, and the glossary that
#: defines its words (the introduction's, a ``glossary`` div).
PROVENANCE = "details.feat-provenance, div.glossary"

#: Markdown emphasis a rendered page shows as asterisks (a glued sentence is plain text): only
#: rendered text is scanned for it, since the Markdown a cell displays is rendered.
UNRENDERED_MARKDOWN = re.compile(r"(?<![\w*])\*\*[A-Z][^*]{0,80}\*\*")

#: (kind, pattern) of template leftovers in prose: what an unedited f-string template writes.
TEMPLATE: tuple[tuple[str, re.Pattern], ...] = (
    ("doubled phrase", re.compile(r"\b((?:\w[\w-]*\s+){2,8}\w[\w-]*)\s*[(,:]?\s*\(?\s*\1\b", re.I)),
    ("plural placeholder", re.compile(r"\w\(s\)")),
    ("parameter name", re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w./-])")),
    ("e-notation", re.compile(r"(?<![a-fA-F])\d[eE][−+-]?0\d")),  # not inside a commit's hex (fcc0a2e4e006)
)

#: Elements whose text is code or mathematics by nature (CSS selectors for BeautifulSoup).
SKIPPED = ("script", "style", "noscript", "nav", "header", "footer", ".cell_input", ".math", "mjx-container",
           ".headerlink", ".bd-sidebar-primary", ".bd-sidebar-secondary", ".bd-header-article",
           ".prev-next-area", "div.highlight-python", "div.highlight-bash", "div.highlight-text",
           "div.highlight-ipython3", "div.highlight-default", "div.highlight-yaml", "div.highlight-console",
           "code.literal", ".citation-label")

#: Inline code that holds a parameter's name stands where the value belongs when a counted noun
#: follows it within two words ("`pretrain_steps` steps", "`n_attribution` OOD test images") or a
#: word that asks for a number comes right before it ("after `probe_step`", "the first `n`").
COUNTED = (r"(?:steps?|epochs?|images?|examples?|seeds?|rounds?|runs?|samples?|iterations?|batches|pixels|tokens|"
           r"minutes|seconds|hours)")
QUANTITY_AFTER = re.compile(rf"^\s+(?:[\w-]+\s+){{0,2}}?{COUNTED}\b", re.I)
QUANTITY_BEFORE = re.compile(r"\b(?:after|for|first|last|every|only)\s+$", re.I)
INLINE_CODE = re.compile(r"`\s*([A-Za-z_]\w*)\s*`")
#: Cells whose input is the page's parameters (its own, and the overrides papermill injects).
PARAMETER_CELLS = (".tag_parameters .cell_input", ".tag_injected-parameters .cell_input")


@dataclass(frozen=True)
class Leak:
    kind: str
    text: str
    context: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.text!r} in ...{self.context}..."


def scan_text(text: str) -> list[Leak]:
    """Every leak in ``text`` (plain text, as a reader reads it)."""
    found = []
    for kind, pattern in PATTERNS + TEMPLATE:
        for match in pattern.finditer(text):
            start, end = match.span()
            context = " ".join(text[max(0, start - 40):end + 40].split())
            found.append(Leak(kind, match.group(0), context))
    return found


def parameter_names(source: str) -> set[str]:
    """The names a parameters cell's source assigns (``name = ...`` and ``name: type = ...``)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    return names | {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)}


def bare_parameters(text: str, names) -> list[Leak]:
    """Every parameter name of ``names`` written as inline code (in backticks in ``text``) where
    its value belongs: "ERM for `pretrain_steps` steps" (:data:`QUANTITY_AFTER`,
    :data:`QUANTITY_BEFORE`). Write the number instead (a glued value)."""
    found = []
    for match in INLINE_CODE.finditer(text):
        if match.group(1) not in names:
            continue
        start, end = match.span()
        if QUANTITY_AFTER.match(text[end:end + 80]) or QUANTITY_BEFORE.search(text[max(0, start - 20):start]):
            context = " ".join(text[max(0, start - 40):end + 40].split())
            found.append(Leak("parameter name", match.group(1), context))
    return found


def _article(html: str):
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    return soup.select_one("article") or soup.select_one("main") or soup.body or soup


def page_text(html: str) -> str:
    """The text a reader reads on a rendered page: the article, less code input, mathematics,
    literal code in the prose and the navigation."""
    article = _article(html)
    for selector in SKIPPED:
        for element in article.select(selector):
            element.decompose()
    return article.get_text(" ")


def page_parameters(html: str) -> set[str]:
    """The names of the rendered page's parameters cell (and of the parameters papermill injected)."""
    article = _article(html)
    return {n for selector in PARAMETER_CELLS for cell in article.select(selector) for n in parameter_names(cell.get_text())}


def inline_code_text(html: str) -> str:
    """The page's text as :func:`page_text` has it, but with the inline code kept, in backticks."""
    article = _article(html)
    for code in article.select("code.literal"):
        code.replace_with(f"`{code.get_text()}`")
    for selector in SKIPPED:
        for element in article.select(selector):
            element.decompose()
    return article.get_text(" ")


#: The heading of a chapter's own run at reduced size: nothing under it stands beside a paper number.
RUN_IT_YOURSELF = "Run it yourself"
PAPER_WORD = re.compile(r"\bpaper'?s?\b", re.I)


def test_run_beside_paper(html: str) -> list[Leak]:
    """Tables under a "Run it yourself" heading (a chapter's own run at reduced size, which
    ranks nothing) that set the paper's values beside its numbers: a test run's numbers are never
    shown beside the paper's (:mod:`featbook.evidence`). A table's caption may name the paper's
    table it mirrors; its header and cells may not hold the paper's values."""
    article = _article(html)
    found = []
    for heading in article.select("h2, h3"):
        if not heading.get_text(" ").strip().startswith(RUN_IT_YOURSELF):
            continue
        section = heading.find_parent("section")
        for cell in (section.select("table th, table td") if section is not None else []):
            text = " ".join(cell.get_text(" ").split())
            second = cell.select_one(".feat-paper")  # a grey second line holding the paper's value
            if PAPER_WORD.search(text) or second is not None:
                found.append(Leak("paper value beside a test run", text[:60], heading.get_text(" ").strip()[:60]))
    return found


def bookkeeping(html: str) -> list[Leak]:
    """Bookkeeping words (:data:`BOOKKEEPING`) in a page's reading text: its text as
    :func:`page_text` has it, less the collapsed provenance blocks (:data:`PROVENANCE`)."""
    article = _article(html)
    for selector in (PROVENANCE, *SKIPPED):
        for element in article.select(selector):
            element.decompose()
    text = article.get_text(" ")
    return [Leak("bookkeeping", m.group(0), " ".join(text[max(0, m.start() - 40):m.end() + 40].split()))
            for m in BOOKKEEPING.finditer(text)]


def scan_html(html: str, reference: bool = False) -> list[Leak]:
    """The leaks of one rendered page: in its text (:func:`scan_text`), the names of its
    parameters cell where their values belong in the inline code of its prose (:func:`bare_parameters`),
    a test run's numbers beside the paper's (:func:`test_run_beside_paper`) and, unless the page
    is a ``reference`` page (:data:`REFERENCE_PAGES`), bookkeeping in its reading text
    (:func:`bookkeeping`)."""
    text = page_text(html)
    found = (scan_text(text) + [Leak("markdown", m.group(0), text[max(0, m.start() - 40):m.end() + 40])
                                for m in UNRENDERED_MARKDOWN.finditer(text)]
             + test_run_beside_paper(html) + ([] if reference else bookkeeping(html)))
    names = page_parameters(html)
    return found + (bare_parameters(inline_code_text(html), names) if names else [])


def scan_book(html_dir: str | Path, pages: list[str] | None = None) -> dict[str, list[Leak]]:
    """Leaks per page (path relative to ``html_dir``) of a built book's chapter and book pages;
    pages without leaks are left out."""
    html_dir = Path(html_dir)
    if pages is None:
        pages = sorted(str(p.relative_to(html_dir)) for sub in ("notebooks", "book")
                       for p in (html_dir / sub).glob("*.html"))
    found = {}
    for page in pages:
        leaks = scan_html((html_dir / page).read_text(encoding="utf-8"), reference=page in REFERENCE_PAGES)
        if leaks:
            found[page] = leaks
    return found


def report(found: dict[str, list[Leak]]) -> str:
    """A readable list of the leaks, page by page."""
    return "\n".join(f"{page}:\n" + "\n".join(f"  {leak}" for leak in leaks) for page, leaks in found.items())
