"""The chapters' sources, MyST markdown notebooks, and the ``.ipynb`` notebooks made from them.

Each chapter is written once, as a MyST markdown notebook (``notebooks/NN_name.md``, jupytext's
``myst`` format): prose with MyST roles (``{cite:p}``, ``{numref}``, ``{glue:text}``...) and
``{code-cell}`` blocks. Two notebooks are made from it:

* the **book's** (:func:`book_notebook`): the cells as written, roles intact, for papermill to
  execute and Jupyter Book to render (``featbook.build`` builds the pages from it);
* the **Colab** one (:func:`colab_notebook`), committed beside the source as ``NN_name.ipynb``:
  what Colab, papermill batch runs and sweeps open. Its first code cell installs featlib (given
  by the caller: ``featbook.install_cell``) and its markdown shows no MyST syntax, since Colab
  renders plain Markdown: citations become author-year text with links
  (:func:`plain_markdown`), figure references "the figure above/below" (several in a row said
  once: "the figures above"), chapter references
  links to that chapter's notebook, and a paragraph that quotes recorded values becomes a
  collapsed cell that shows it with this run's numbers (:mod:`featbook.quoted`).

``python -m featbook.sync`` writes the ``.ipynb`` from the sources and checks that they agree.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

REPO_ROOT = Path(__file__).resolve().parents[2]  # book/featbook/chapters.py
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
BOOK_DIR = REPO_ROOT / "book"

#: The chapters' sources, by file name: two digits, an underscore, a name.
SOURCE_GLOB = "[0-9][0-9]_*.md"
BIBLIOGRAPHY = REPO_ROOT / "book" / "references.bib"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}

#: A MyST role: ``{name}`content```.
ROLE = re.compile(r"\{([a-z]+(?::[a-z]+)?)\}`([^`]*)`")
#: Roles the Colab notebook may not show (every role: Colab renders plain Markdown).
GLUE = "glue:text"
#: Two or more ``{numref}`` roles in a row, joined by commas, "and" or "&": written out together,
#: so that two figures above read "the figures above", not "the figure above and the figure above".
NUMREF = re.compile(r"\{numref\}`([^`]*)`")
NUMREF_RUN = re.compile(r"\{numref\}`[^`]*`(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+|\s*&\s*)\{numref\}`[^`]*`)+")
#: The plural of each way :meth:`Context.figure` names one figure.
PLURAL = {"the figure above": "the figures above", "the figure below": "the figures below"}


def sources(directory: Path = NOTEBOOK_DIR) -> list[Path]:
    """The chapters' MyST sources, in chapter order."""
    return sorted(directory.glob(SOURCE_GLOB))


def read_source(path: Path) -> nbformat.NotebookNode:
    """The notebook a MyST source describes (jupytext), cells as written."""
    import jupytext

    return jupytext.read(path, fmt="md:myst")


def _clean(nb: nbformat.NotebookNode, stem: str) -> nbformat.NotebookNode:
    """Outputs removed, deterministic cell ids, the book's kernel, no jupytext bookkeeping."""
    nb.metadata = nbformat.NotebookNode({"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}})
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{stem[:2]}-{i:02d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def book_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook the book executes and renders: the source's cells, MyST roles intact."""
    return _clean(read_source(path), path.stem)


# -- the Colab notebook ------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _bibliography(path: str = str(BIBLIOGRAPHY)) -> dict[str, tuple[str, str, str | None]]:
    """``key -> (authors as cited, year, link)`` for every entry of the book's bibliography."""
    from pybtex.database import parse_file

    out = {}
    for key, entry in parse_file(path).entries.items():
        names = [re.sub(r"[{}\\']", "", " ".join(p.last_names)) for p in entry.persons.get("author", [])]
        authors = (names[0] if len(names) == 1 else f"{names[0]} and {names[1]}" if len(names) == 2
                   else f"{names[0]} et al.")
        fields = entry.fields
        link = fields.get("url") or (f"https://doi.org/{fields['doi']}" if fields.get("doi") else None)
        out[key] = (authors, fields.get("year", ""), link)
    return out


def citation(keys: str, textual: bool, bibliography: dict | None = None) -> str:
    """A citation as plain Markdown, author-year: ``(Arjovsky et al., 2019; ...)`` for
    ``{cite:p}``, ``Arjovsky et al. (2019)`` for ``{cite:t}``; linked where the entry has a
    URL or DOI."""
    bib = bibliography if bibliography is not None else _bibliography()
    parts = []
    for key in (k.strip() for k in keys.split(",")):
        if key not in bib:
            raise ValueError(f"citation key {key!r} is not in {BIBLIOGRAPHY.name}; add the entry or fix the key")
        authors, year, link = bib[key]
        text = f"{authors} ({year})" if textual else f"{authors}, {year}"
        parts.append(f"[{text}]({link})" if link else text)
    return "; ".join(parts) if textual else f"({'; '.join(parts)})"


def _title(path: Path) -> str:
    """A chapter's title: the first ``# `` heading of its source."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def _figure_labels(nb: nbformat.NotebookNode) -> dict[str, int]:
    """``figure name -> cell index`` of the cells whose output is a named figure."""
    out = {}
    for i, cell in enumerate(nb.cells):
        name = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name")
        if name:
            out[name] = i
    return out


class Context:
    """What the plain-Markdown rewrite of one chapter needs to know: where its figures are, the
    other chapters' titles and figures, and the URL of a chapter's notebook."""

    def __init__(self, stem: str, nb: nbformat.NotebookNode, directory: Path = NOTEBOOK_DIR,
                 notebook_url=None):
        self.stem = stem
        self.figures = _figure_labels(nb)
        self.titles = {p.stem: _title(p) for p in sources(directory)}
        self.other_figures = {}
        for p in sources(directory):
            if p.stem != stem:
                for name in _figure_labels(read_source(p)):
                    self.other_figures[name] = p.stem
        self.notebook_url = notebook_url or _colab_url

    def figure(self, name: str, cell_index: int) -> str:
        if name in self.figures:
            return "the figure above" if self.figures[name] < cell_index else "the figure below"
        if name in self.other_figures:
            return f"a figure of chapter {self.other_figures[name][:2]}"
        raise ValueError(f"{self.stem}: {{numref}} names {name!r}, which no chapter's figure is called")

    def several_figures(self, names: list[str], cell_index: int) -> str:
        """Several figures referred to together: each place said once ("the figures above", "the
        figure above and the figure below", "figures of chapter 02")."""
        places = [self.figure(name, cell_index) for name in names]
        said = [(PLURAL.get(p) or re.sub(r"^a figure of", "figures of", p)) if places.count(p) > 1 else p
                for p in dict.fromkeys(places)]
        return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]

    def chapter(self, target: str) -> str:
        """A ``{doc}`` role's target as a Markdown link: the chapter's title, or the role's own text
        where it gives one (``{doc}`chapter 03 <03_ood_objectives_need_rich_features>```). A page of
        the book's own (``{doc}`../book/running```) links to its source in the repository."""
        explicit = re.fullmatch(r"\s*(.*?)\s*<([^<>]+)>\s*", target)
        text, target = (explicit.group(1), explicit.group(2)) if explicit else (None, target)
        stem = Path(target).stem
        page = BOOK_DIR / f"{stem}.md"
        if target.startswith("../book/") and page.is_file():
            return f"[{text or _title(page)}]({_page_url(page)})"
        if stem not in self.titles:
            raise ValueError(f"{self.stem}: {{doc}} names {target!r}, which is not a chapter; known: {sorted(self.titles)}")
        return f"[{text or self.titles[stem]}]({self.notebook_url(stem)})"


def _page_url(page: Path) -> str:
    """A book page's source in the book's repository (``_config.yml``), for a notebook opened
    outside the book (Colab)."""
    from featbook.repository import from_config

    repo = from_config()
    path = page.relative_to(REPO_ROOT).as_posix()
    return f"{repo.url}/blob/{repo.branch}/{path}" if repo.github else path


def _colab_url(stem: str) -> str:
    """The chapter's notebook opened in Colab from the book's repository (``_config.yml``)."""
    from featbook.repository import from_config

    repo = from_config()
    owner_name = repo.github
    if owner_name is None:
        return f"{stem}.ipynb"
    return (f"https://colab.research.google.com/github/{owner_name[0]}/{owner_name[1]}/blob/{repo.branch}/"
            f"notebooks/{stem}.ipynb")


def plain_markdown(text: str, context: Context, cell_index: int) -> str:
    """``text`` with every MyST role but ``{glue:text}`` as plain Markdown (see the module)."""
    def replace(match: re.Match) -> str:
        role, content = match.groups()
        if role == GLUE:
            return match.group(0)
        if role in ("cite:p", "cite"):
            return citation(content, textual=False)
        if role == "cite:t":
            return citation(content, textual=True)
        if role == "numref":
            return context.figure(content, cell_index)
        if role == "doc":
            return context.chapter(content)
        raise ValueError(f"{context.stem}: the role {{{role}}} has no plain-Markdown form; "
                         "write it out or teach featbook.chapters.plain_markdown")
    text = NUMREF_RUN.sub(lambda m: context.several_figures(NUMREF.findall(m.group(0)), cell_index), text)
    return ROLE.sub(replace, text)


def quoting_cell(text: str) -> nbformat.NotebookNode:
    """A paragraph that quotes recorded values, as Colab shows it: a collapsed ("form") code cell
    that displays the paragraph with this run's values (:func:`featbook.quoted.show`)."""
    if '"""' in text:
        raise ValueError('a paragraph that quotes values may not contain """; rephrase it')
    source = ("# @title A paragraph with this run's numbers (run the cell)\n"
              "from featbook.quoted import show\n"
              f'show(r"""\n{text}\n""")')
    return new_code_cell(source, metadata={"cellView": "form", "tags": ["quoted-text"]})


def blocks(text: str) -> list[str]:
    """``text`` cut at blank lines into blocks, never inside a ``$$`` equation or a fenced block."""
    out: list[str] = []
    for part in text.split("\n\n"):
        if out and (out[-1].count("$$") % 2 or out[-1].count("```") % 2):
            out[-1] += "\n\n" + part
        else:
            out.append(part)
    return out


def colab_markdown(text: str) -> list[nbformat.NotebookNode]:
    """The cells a plain-Markdown ``text`` becomes: its blocks that quote recorded values as
    :func:`quoting_cell` cells, the runs of other blocks as markdown cells."""
    cells, plain = [], []
    for block in blocks(text):
        if ROLE.search(block):
            if plain:
                cells.append(new_markdown_cell("\n\n".join(plain)))
                plain = []
            cells.append(quoting_cell(block))
        else:
            plain.append(block)
    if plain:
        cells.append(new_markdown_cell("\n\n".join(plain)))
    return cells


def colab_notebook(path: Path, install_source: str, directory: Path | None = None,
                   notebook_url=None) -> nbformat.NotebookNode:
    """The notebook Colab opens: ``install_source`` as its first code cell, then the source's
    cells with their markdown in plain Markdown (no MyST roles)."""
    nb = read_source(path)
    context = Context(path.stem, nb, directory or path.parent, notebook_url)
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            cells.extend(colab_markdown(plain_markdown(cell.source, context, i)))
        else:
            cells.append(cell)
    # the install cell runs before any other code, a paragraph's quoting cell included
    first_code = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
    cells.insert(first_code, new_code_cell(install_source))
    nb.cells = cells
    return _clean(nb, path.stem)


def write_text(nb: nbformat.NotebookNode) -> str:
    """The notebook as the file holds it (nbformat's JSON, one trailing newline)."""
    return nbformat.writes(nb).rstrip("\n") + "\n"
