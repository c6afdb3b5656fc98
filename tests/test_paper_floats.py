"""The paper's table and figure numbers: TABLES and FIGURES against the paper's LaTeX, every
"Table N" / "Fig. N" the library, the tools and the book cite against them, and the reference
chapter's table of both numberings."""
import re
from pathlib import Path

import pytest

from featlib.experiments.paper_values import FIGURES, TABLES, latex_float_numbers

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT.parent / "shared" / "paper" / "000_2c38d1ce383e8c9f.txt"
SOURCES = ([p for folder in ("featlib", "tools", "benchmarks", "book") for p in (ROOT / folder).rglob("*")
            if p.suffix in (".py", ".md") and ".ipynb_checkpoints" not in p.parts]
           + sorted((ROOT / "notebooks").glob("*.md")) + [ROOT / "README.md", ROOT / "CONTRIBUTING.md"])
#: A number of the paper's: not one followed by ".digit" ("Fig. 3.1" is the book's own figure).
_NUMBER = r"\d+(?!\d|\.\d)"
_ITEM = rf"{_NUMBER}(?:\s*(?:-|–|to)\s*{_NUMBER})?"
#: "Table 2", "Table~13's", "Tables 8-11", "Tables 10 and 12", "Fig. 4", "Figs. 4-5, 9-12", "Figure 2".
CITATION = re.compile(rf"\b(Tables?|Figs?\.|Figures?)\s*~?({_ITEM}(?:(?:\s*,\s*|\s+and\s+){_ITEM})*)")


def _numbers(name: str, span: str) -> list[int]:
    """The numbers a citation names, ranges expanded; a singular name takes one number
    ("Table 6 and 500 epochs" cites Table 6)."""
    items = [[int(n) for n in re.findall(r"\d+", item)] for item in re.findall(_ITEM, span)]
    if name in ("Table", "Fig.", "Figure"):
        items = items[:1]
    return [n for item in items for n in range(item[0], item[-1] + 1)]


def _citations():
    for path in SOURCES:
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            name, span = match.groups()
            kind = "table" if name.startswith("Table") else "figure"
            line = text.count("\n", 0, match.start()) + 1
            yield f"{path.relative_to(ROOT)}:{line}", kind, _numbers(name, span), match.group(0)


def _expected() -> dict[str, tuple[str, int]]:
    return ({k: ("table", v[0]) for k, v in TABLES.items()}
            | {k: ("figure", v[0]) for k, v in FIGURES.items()})


def test_the_float_tables_match_the_papers_latex():
    """TABLES and FIGURES hold every captioned table and figure of the LaTeX, at its LaTeX number."""
    if not PAPER.exists():
        pytest.skip("the paper's LaTeX (../shared/paper) is not beside this checkout")
    found = latex_float_numbers(PAPER.read_text(encoding="utf-8"))
    assert {k: found.get(k) for k in _expected()} == _expected()
    assert set(found.values()) == set(_expected().values())  # no float left out
    # subfigure labels name their figure; the FeAT algorithm box (a wrapfigure) is no figure
    assert found["fig:ood_sweep"] == found["fig:fat_illustration"] == ("figure", 1)
    assert found["f5d"] == ("figure", 2) and "alg:fat" not in found


def test_the_parser_counts_floats_as_latex_does():
    text = r"""
    \begin{figure}\subfigure{\label{fig:a1}}\subfigure{\label{fig:a2}}\caption{A.}\label{fig:a}\end{figure}
    % \begin{table}\caption{Commented out.}\label{tab:gone}\end{table}
    \begin{wrapfigure}{r}{0.5\textwidth}\begin{algorithm}[H]\caption{Algo.}\label{alg:x}\end{algorithm}
    \end{wrapfigure}
    \begin{table}[t]\caption{First.}\label{tab:one}\end{table}
    \begin{wraptable}{r}{0.6\textwidth}\caption{Second.}\label{tab:two}\end{wraptable}
    \begin{figure*}\caption{B.}\label{fig:b}\end{figure*}
    \begin{table}\centering no caption, no number \end{table}
    \appendix
    \begin{table}[ht]\caption{Training and memory overhead of this.}\end{table}
    \begin{algorithm}\caption{Algo 2.}\label{alg:y}\end{algorithm}
    \begin{table}\caption{Third.}\label{tab:three}\end{table}
    \begin{figure}\caption{C.}
    \label{fig:c}\end{figure}
    """
    assert latex_float_numbers(text) == {
        "fig:a1": ("figure", 1), "fig:a2": ("figure", 1), "fig:a": ("figure", 1),
        "tab:one": ("table", 1), "tab:two": ("table", 2), "fig:b": ("figure", 2),
        "overhead": ("table", 3), "tab:three": ("table", 4), "fig:c": ("figure", 3)}


def test_the_citation_scan_reads_ranges_lists_and_leaves_the_books_own_numbers():
    def cited(text):
        return [(kind, _numbers(name, span)) for name, span in CITATION.findall(text)
                for kind in ["table" if name.startswith("Table") else "figure"]]
    assert cited("Tables 8-11; Figs. 4-5, 9-12; Table 6 and 500 epochs; Table~2's cells") == [
        ("table", [8, 9, 10, 11]), ("figure", [4, 5, 9, 10, 11, 12]), ("table", [6]), ("table", [2])]
    assert cited("Fig. 3.1 and Figure 6.12 are the book's; Figs. 5 and 9-12, Fig. 2(b)") == [
        ("figure", [5, 9, 10, 11, 12]), ("figure", [2])]


def test_every_cited_table_and_figure_is_one_of_the_published_papers():
    """A "Table N" or "Fig. N" names a float by the published paper's number (TABLES, FIGURES)."""
    book = {"table": {v[1] for v in TABLES.values()}, "figure": {v[1] for v in FIGURES.values()}}
    wrong, found = [], 0
    for where, kind, numbers, text in _citations():
        found += 1
        wrong += [f"{where}: {text!r}: the published paper has no {kind} {n}" for n in numbers
                  if n not in book[kind]]
    assert found > 100  # the scan sees the citations
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("floats", [TABLES, FIGURES], ids=["tables", "figures"])
def test_the_published_numbers_keep_the_latex_order(floats):
    """Both numberings count the same floats in the same order: the published one only inserts."""
    by_latex = sorted(floats.values())
    assert [latex for latex, _, _ in by_latex] == list(range(1, len(floats) + 1))
    book = [published for _, published, _ in by_latex]
    assert all(a < b for a, b in zip(book, book[1:])), book


def paper_numbers_table() -> str:
    """The markdown table of book/running.md's section "The paper's numbers" (bare numbers, so
    that the LaTeX's never reads as a citation)."""
    rows = ["| | LaTeX source | Published paper, this book | What it is |", "| --- | --- | --- | --- |"]
    for name, floats in (("Table", TABLES), ("Figure", FIGURES)):
        rows += [f"| {name} | {latex} | {published} | {what[0].upper()}{what[1:]} |"
                 for latex, published, what in sorted(floats.values())]
    return "\n".join(rows)


def test_the_reference_chapter_shows_both_numberings_as_the_tables_give_them():
    text = (ROOT / "book" / "running.md").read_text(encoding="utf-8")
    section = text.split("(paper-numbers)=\n## The paper's numbers\n", 1)[1].split("\n## ", 1)[0]
    assert paper_numbers_table() in section, "book/running.md's table should read:\n" + paper_numbers_table()
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    assert "{ref}`the published paper <paper-numbers>`" in intro
