"""How to cite: CITATION.cff is valid Citation File Format 1.2.0 and says what the repository says.

CITATION.cff (the book, as software, with the paper as its ``preferred-citation``) is validated
offline against the official CFF 1.2.0 JSON schema, vendored at :data:`SCHEMA`, with
check-jsonschema (pinned in requirements.txt; tests/test_workflows.py validates the workflows with
it too). The schema file is the one the ``cffconvert`` wheel ships: ``pip download cffconvert==2.0.0
--no-deps``, unzipped, ``cffconvert/schemas/1.2.0/schema.json`` (its ``$id`` is
https://citation-file-format.github.io/1.2.0/schema.json); :data:`SCHEMA_SHA256` keeps it as
fetched. check-jsonschema's own vendored copy (``--builtin-schema vendor.citation-file-format``)
differs from it only in one description's spelling, but follows the format's main branch, not 1.2.0.

Then: the file's version is pyproject.toml's, its licence the one pyproject.toml declares and
LICENSE holds, its preferred citation is the paper as book/references.bib and the paper's LaTeX
(../shared/paper, when beside the checkout) name it, the README's BibTeX block is that citation,
and the front page (book/intro.md) ends with how to cite. No network: seconds.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parent.parent
CFF = REPO / "CITATION.cff"
SCHEMA = REPO / "tests" / "schemas" / "citation-file-format-1.2.0.json"
SCHEMA_SHA256 = "0b8d22140da702d766df318dcff3a91af2f39521298dcf36d76315fd99cc169b"
SCHEMA_ID = "https://citation-file-format.github.io/1.2.0/schema.json"
PAPER_LATEX = REPO.parent / "shared" / "paper" / "000_2c38d1ce383e8c9f.txt"
ARXIV = "2304.11327"


def cff() -> dict:
    return yaml.safe_load(CFF.read_text(encoding="utf-8"))


def validate(path: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA),
                           "--force-filetype", "yaml", str(path)], capture_output=True, text=True, timeout=120)
    assert "No module named" not in done.stderr, "check-jsonschema is not installed: pip install -r requirements.txt"
    return done


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def names(authors) -> list[tuple[str, str]]:
    """(family, given) of each person of a CFF author list."""
    return [(a["family-names"], a["given-names"]) for a in authors]


def bib_names(entry) -> list[tuple[str, str]]:
    """(family, given) of each author of a pybtex entry."""
    return [(" ".join(p.last_names), " ".join(p.first_names + p.middle_names)) for p in entry.persons["author"]]


def readme_bibtex():
    """The BibTeX entry of the README's "How to cite" section, parsed by pybtex."""
    from pybtex.database import parse_string

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## How to cite\n", 1)
    assert len(section) == 2, "README.md has no '## How to cite' section"
    blocks = re.findall(r"```bibtex\n(.*?)```", section[1].split("\n## ", 1)[0], re.S)
    assert len(blocks) == 1, f"the README's How to cite section holds {len(blocks)} bibtex blocks, not one"
    entries = parse_string(blocks[0], "bibtex").entries
    assert len(entries) == 1
    return next(iter(entries.values()))


# --- the schema and the validation -----------------------------------------------------------

def test_the_vendored_schema_is_the_cff_1_2_0_schema_cffconvert_ships():
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256, (
        f"{SCHEMA.name} changed: fetch it again as this module's docstring says, or restore it from git")
    import json

    schema = json.loads(SCHEMA.read_text())
    assert schema["$id"] == SCHEMA_ID
    assert schema["properties"]["cff-version"]["pattern"] == r"^1\.2\.0$"


def test_citation_cff_validates_against_the_schema_offline():
    assert cff()["cff-version"] == "1.2.0"
    done = validate(CFF)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("change, complaint", [
    (("type: conference-paper", "type: inproceedings"), "'inproceedings' is not one of"),  # BibTeX's, not CFF's
    (("cff-version: 1.2.0", 'cff-version: "1.2"'), "does not match"),
    (("  - name: The FeAT book authors", "  - nam: The FeAT book authors"), "authors"),
])
def test_the_validation_fails_on_an_invalid_file(tmp_path, change, complaint):
    text = CFF.read_text(encoding="utf-8")
    assert text.count(change[0]) == 1, change[0]
    broken = tmp_path / "CITATION.cff"
    broken.write_text(text.replace(change[0], change[1]), encoding="utf-8")
    done = validate(broken)
    assert done.returncode == 1 and complaint in done.stdout + done.stderr, done.stdout + done.stderr


# --- what the file says ----------------------------------------------------------------------

def test_the_book_is_the_software_at_pyprojects_version_under_its_licence():
    record, project = cff(), pyproject()
    assert record["type"] == "software"
    assert record["version"] == project["version"], "CITATION.cff's version is not pyproject.toml's: change both"
    assert record["title"].startswith("The FeAT book: an executable companion to ")
    assert record["title"].endswith(record["preferred-citation"]["title"])
    assert record["authors"] == [{"name": "The FeAT book authors"}]
    assert record["license"] == project["license"]["text"] == "MIT"
    licence = (REPO / "LICENSE").read_text()
    assert licence.startswith("MIT License\n") and "Copyright (c) 2026 The FeAT book authors" in licence
    assert "repository-code" not in record  # the repository is set in one place: _config.yml


def test_the_preferred_citation_is_the_paper_as_the_bibliography_and_its_latex_name_it():
    from pybtex.database import parse_file

    paper = cff()["preferred-citation"]
    assert paper["type"] == "conference-paper"
    assert paper["conference"]["name"] == "NeurIPS 2023" and paper["year"] == 2023 and paper["volume"] == 36
    assert paper["collection-title"] == "Advances in Neural Information Processing Systems"
    assert paper["url"] == "https://openreview.net/forum?id=eozEoAtjG8"
    assert [i["value"] for i in paper["identifiers"]] == [f"https://arxiv.org/abs/{ARXIV}"]
    bib = parse_file(str(REPO / "book" / "references.bib")).entries["chen2023feat"]
    assert paper["title"] == bib.fields["title"]
    assert names(paper["authors"]) == bib_names(bib)
    assert ARXIV in bib.fields["url"]
    if not PAPER_LATEX.exists():
        pytest.skip("the paper's LaTeX (../shared/paper) is not beside this checkout")
    latex = PAPER_LATEX.read_text(encoding="utf-8")
    assert re.search(r"\\title\{([^}]*)\}", latex)[1] == paper["title"]
    block = latex.split("\\author{", 1)[1].split("\\begin{document}", 1)[0]
    in_latex = [(m[1].split()[-1], " ".join(m[1].split()[:-1]))
                for m in re.finditer(r"(?:^|[,\\]|AND)\s*([A-Z][a-z]+ [A-Z][a-z]+)\$\^", block, re.M)]
    assert in_latex == names(paper["authors"]), in_latex


def test_the_readmes_bibtex_is_the_preferred_citation():
    paper = cff()["preferred-citation"]
    entry = readme_bibtex()
    assert entry.type == "inproceedings"
    assert entry.fields["title"] == paper["title"]
    assert bib_names(entry) == names(paper["authors"])
    assert entry.fields["booktitle"] == paper["collection-title"]
    assert int(entry.fields["volume"]) == paper["volume"] and int(entry.fields["year"]) == paper["year"]
    assert entry.fields["url"] == paper["url"]
    assert entry.fields["eprint"] == ARXIV and entry.fields["archiveprefix"].lower() == "arxiv"


def test_the_readme_and_the_front_page_say_how_to_cite_where_they_should():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    # the first lines stay the two commands
    assert lines[0] == "# The FeAT book" and lines[2] == "```bash"
    assert lines[3].startswith("make book") and lines[4].startswith("make test")
    headings = [line for line in lines if line.startswith("## ")]
    assert headings.index("## How to cite") == headings.index("## Three ways to use the book") + 1
    section = readme.split("\n## How to cite\n", 1)[1].split("\n## ", 1)[0]
    assert "CITATION.cff" in section and "LICENSE" in section
    intro = (REPO / "book" / "intro.md").read_text(encoding="utf-8")
    last = intro.rsplit("\n## ", 1)[1]
    assert last.startswith("How to cite\n"), "book/intro.md does not end with its How to cite section"
    assert "{cite:t}`chen2023feat`" in last and "CITATION.cff" in last and "{" not in last.replace(
        "{cite:t}`chen2023feat`", "")  # no BibTeX braces on the page (featbook.leaks)
