"""Equation numbers cited in the library, the tools and the book are the paper's (its LaTeX
numbering: the CNN is Eq. 1, the ERM objective Eq. 2, IRMv1 Eq. 4, FeAT's objective Eq. 7), and
the passage around each citation names what that equation is."""
import re
from pathlib import Path

import pytest

from featlib.experiments.paper_values import EQUATIONS

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for folder in ("featlib", "tools", "book", "notebooks", "benchmarks") for p in (ROOT / folder).rglob("*")
           if p.suffix in (".py", ".md") and ".ipynb_checkpoints" not in p.parts] + [ROOT / "README.md"]
#: "Eq. (7)", "Eq. 4-5", "Eq. (4)-(5)", "Eqs. 3 and 4": the numbers after "Eq."
CITATION = re.compile(r"\bEqs?\.\s*~?\(?(\d+)\)?(?:\s*(?:-|–|and|,)\s*\(?(\d+)\)?)?")


def _citations():
    for path in SOURCES:
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            numbers = [int(n) for n in match.groups() if n]
            window = text[max(0, match.start() - 200):match.end() + 200]
            line = text.count("\n", 0, match.start()) + 1
            yield f"{path.relative_to(ROOT)}:{line}", numbers, window


def test_the_equation_table_matches_the_papers_latex():
    """The table's numbering is the order of the numbered equations in the paper's main text."""
    paper = ROOT.parent / "shared" / "paper" / "000_2c38d1ce383e8c9f.txt"
    if not paper.exists():
        pytest.skip("the paper's LaTeX (../shared/paper) is not beside this checkout")
    body = paper.read_text(encoding="utf-8").split("\\appendix")[0]
    labels = re.findall(r"\\begin\{(?:equation|align)\}\s*%?\s*\\label\{([^}]+)\}|\\label\{(eq:decompostion)\}", body)
    order = [a or b for a, b in labels]
    assert order == ["eq:cnn", "eq:logistic_loss", "eq:irm", "eq:irml", "eq:irml_cnn", "eq:decompostion",
                     "eq:fat_upd"]
    assert len(order) == len(EQUATIONS)


def test_every_cited_equation_exists_and_the_passage_names_it():
    wrong = []
    found = 0
    for where, numbers, window in _citations():
        for n in numbers:
            found += 1
            if n not in EQUATIONS:
                wrong.append(f"{where}: Eq. {n} is not one of the paper's equations 1-{max(EQUATIONS)}")
                continue
            what, words = EQUATIONS[n]
            if not any(w.lower() in window.lower() for w in words):
                wrong.append(f"{where}: Eq. {n} is {what}, but the passage names none of {words}")
    assert found > 10  # the scan sees the citations
    assert not wrong, "\n".join(wrong)
