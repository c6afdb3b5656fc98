"""The chapters' MyST sources and their notebooks: in sync, and the notebook Colab opens reads
clean (no MyST roles in its markdown), with the install cell first."""
import json
import re
import shutil

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from featbook import chapters, quoted
from featbook.notebooks import NOTEBOOK_DIR, REPO_ROOT, list_notebooks


def sync_tool():
    from featbook import sync

    return sync


def install_cell(chapter):
    from featbook.install_cell import install_cell_source

    return install_cell_source(chapter)


def test_every_chapter_is_one_myst_source_with_its_notebook_and_no_generators_remain():
    assert [p.stem for p in chapters.sources()] == [p.stem for p in list_notebooks()]
    for source in chapters.sources():
        assert source.read_text().startswith("---\njupytext:"), source.name
    assert not (REPO_ROOT / "tools").exists()  # the generator scripts (make_ch*.py, nbgen.py) are gone


def test_committed_notebooks_are_in_sync_with_their_sources():
    stale, orphans = sync_tool().out_of_sync()
    assert not stale, f"out of sync (run python -m featbook.sync): {[p.name for p in stale]}"
    assert not orphans, f"notebooks without a source: {[p.name for p in orphans]}"


def test_sync_check_fails_on_an_edited_source_and_writing_brings_the_pair_back(tmp_path, capsys):
    tool = sync_tool()
    copy = tmp_path / "notebooks"
    copy.mkdir()
    for path in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.*")):
        shutil.copy2(path, copy / path.name)
    assert tool.main(["--check", "--dir", str(copy)]) == 0
    source = copy / "01_erm_feature_learning.md"
    source.write_text(source.read_text().replace("## Both coefficients grow", "## Both coefficients grow together"))
    assert tool.main(["--check", "--dir", str(copy)]) == 1
    assert "out of sync: 01_erm_feature_learning.ipynb" in capsys.readouterr().out
    assert tool.main(["--dir", str(copy)]) == 0
    assert tool.main(["--check", "--dir", str(copy)]) == 0
    nb = json.loads((copy / "01_erm_feature_learning.ipynb").read_text())
    assert any("## Both coefficients grow together" in "".join(c["source"]) for c in nb["cells"])


def test_sync_check_fails_on_a_notebook_without_its_source(tmp_path, capsys):
    tool = sync_tool()
    copy = tmp_path / "notebooks"
    copy.mkdir()
    for path in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.*")):
        shutil.copy2(path, copy / path.name)
    (copy / "07_cost_of_feature_learning.md").unlink()
    assert tool.main(["--check", "--dir", str(copy)]) == 1
    assert "07_cost_of_feature_learning.ipynb has no source" in capsys.readouterr().err
    assert tool.main(["--dir", str(copy)]) == 0  # writing reports the orphan and leaves it alone
    assert (copy / "07_cost_of_feature_learning.ipynb").exists()


def test_sync_refuses_a_folder_without_sources(tmp_path, capsys):
    assert sync_tool().main(["--check", "--dir", str(tmp_path / "nowhere")]) == 2
    assert "holds no chapter sources" in capsys.readouterr().err


def test_the_install_cell_comes_first_from_tools_install_cell():
    for path in list_notebooks():
        code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        assert "".join(code[0]["source"]) == install_cell(path.stem[:2]), path.name
    for source in chapters.sources():  # the source itself never holds it
        assert "google.colab" not in source.read_text(), source.name


MYST = re.compile(r"\{[a-z]+(?::[a-z]+)?\}`|^```\{|^:::", re.M)


def test_colab_notebooks_show_no_myst_syntax_in_markdown():
    for path in list_notebooks():
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                assert not MYST.search(text), f"{path.name}: {MYST.search(text).group(0)!r} in {text[:120]!r}"


def test_the_book_notebook_keeps_the_roles_and_has_no_install_cell():
    source = NOTEBOOK_DIR / "01_erm_feature_learning.md"
    nb = chapters.book_notebook(source)
    text = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "{numref}`fig-erm-coefficients`" in text and "{glue:text}`erm_inv_final:.3f`" in text
    assert not any("google.colab" in c.source for c in nb.cells)
    assert all(c.outputs == [] for c in nb.cells if c.cell_type == "code")


def context_for(cells, stem="01_x"):
    nb = new_notebook(cells=cells)
    return chapters.Context(stem, nb, directory=NOTEBOOK_DIR, notebook_url=lambda s: f"https://nb/{s}.ipynb")


def test_plain_markdown_writes_citations_figure_and_chapter_references_out():
    figure = new_code_cell("plot()", metadata={"mystnb": {"figure": {"caption": "c", "name": "fig-a"}}})
    context = context_for([new_markdown_cell("x"), figure, new_markdown_cell("y")])
    bib = {"a2020": ("Arjovsky et al.", "2019", "https://arxiv.org/abs/1907.02893"), "b": ("Ba and Li", "2021", None)}
    assert chapters.citation("a2020, b", textual=False, bibliography=bib) == (
        "([Arjovsky et al., 2019](https://arxiv.org/abs/1907.02893); Ba and Li, 2021)")
    assert chapters.citation("b", textual=True, bibliography=bib) == "Ba and Li (2021)"
    with pytest.raises(ValueError, match="'nokey' is not in references.bib"):
        chapters.citation("nokey", textual=False, bibliography=bib)
    assert chapters.plain_markdown("see {numref}`fig-a`", context, 0) == "see the figure below"
    assert chapters.plain_markdown("see {numref}`fig-a`", context, 2) == "see the figure above"
    assert chapters.plain_markdown("in {numref}`fig-irmv1-sweep`", context, 2) == "in a figure of chapter 02"
    linked = chapters.plain_markdown("{doc}`02_irmv1_and_pretraining`", context, 2)
    assert linked.startswith("[IRMv1") and linked.endswith("](https://nb/02_irmv1_and_pretraining.ipynb)")
    # a role with its own text keeps it (MyST's {doc}`text <target>`)
    assert chapters.plain_markdown("{doc}`chapter 02 <02_irmv1_and_pretraining>`", context, 2) == (
        "[chapter 02](https://nb/02_irmv1_and_pretraining.ipynb)")
    with pytest.raises(ValueError, match="which is not a chapter"):
        chapters.plain_markdown("{doc}`chapter 99 <99_none>`", context, 2)
    # a page of the book's own links to its source in the book's repository (Colab has no book around it)
    from featbook.repository import from_config

    repo = from_config()
    assert chapters.plain_markdown("{doc}`../book/running`", context, 2) == (
        f"[Running the notebooks]({repo.url}/blob/{repo.branch}/book/running.md)")
    with pytest.raises(ValueError, match="which is not a chapter"):
        chapters.plain_markdown("{doc}`../book/no_such_page`", context, 2)
    assert chapters.plain_markdown("{glue:text}`v:.2f`", context, 2) == "{glue:text}`v:.2f`"  # left for the run
    with pytest.raises(ValueError, match=r"the role \{eq\} has no plain-Markdown form"):
        chapters.plain_markdown("{eq}`e1`", context, 2)
    with pytest.raises(ValueError, match="which no chapter's figure is called"):
        chapters.plain_markdown("{numref}`fig-none`", context, 2)


def test_figure_references_in_a_row_are_said_once_in_the_colab_text():
    figure = lambda name: new_code_cell("plot()", metadata={"mystnb": {"figure": {"caption": "c", "name": name}}})
    context = context_for([figure("fig-a"), figure("fig-b"), new_markdown_cell("x"), figure("fig-c")])
    plain = lambda text: chapters.plain_markdown(text, context, 2)
    assert plain("({numref}`fig-a`, {numref}`fig-b`)") == "(the figures above)"
    assert plain("({numref}`fig-a`\nand {numref}`fig-b`)") == "(the figures above)"
    assert plain("{numref}`fig-a`, {numref}`fig-b` and {numref}`fig-c`") == "the figures above and the figure below"
    assert plain("{numref}`fig-irmv1-sweep` and {numref}`fig-irmv1-short`") == "figures of chapter 02"
    assert plain("see {numref}`fig-a`; and then {numref}`fig-c`") == "see the figure above; and then the figure below"
    for path in list_notebooks():  # no committed notebook repeats a figure reference
        text = " ".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
        assert not re.search(r"(the figures? (?:above|below))(?:,| and) \1", text), path.name


def test_a_paragraph_quoting_values_becomes_a_collapsed_cell_and_the_rest_stays_markdown():
    text = "## Heading\n\nValue {glue:text}`v:.2f` here.\n\n$$\na\n\nb\n$$\n\nPlain."
    cells = chapters.colab_markdown(text)
    assert [c.cell_type for c in cells] == ["markdown", "code", "markdown"]
    assert cells[0].source == "## Heading" and cells[2].source == "$$\na\n\nb\n$$\n\nPlain."
    assert cells[1].metadata["cellView"] == "form" and "show(r\"\"\"\nValue {glue:text}`v:.2f` here.\n\"\"\")" in cells[1].source


def test_quoted_text_fills_recorded_values_as_the_book_formats_them():
    values = {"acc": 0.91234, "scale": "2 seeds", "n": 7}
    assert quoted.fill("acc {glue:text}`acc:.3f`, {glue:text}`scale`, {glue:text}`n`", values) == "acc 0.912, 2 seeds, 7"
    assert quoted.fill("later: {glue:text}`missing:.1f`", values) == f"later: {quoted.NOT_YET}"


def test_recorded_values_are_kept_for_the_quoted_text():
    from featbook.record import RECORDED, record

    record("test_chapters_value", 0.5)
    assert RECORDED["test_chapters_value"] == 0.5
    assert quoted.fill("{glue:text}`test_chapters_value:.2f`") == "0.50"


#: What a visible code cell must not do (tests/test_browser.py checks the same on the built pages).
MACHINERY = ("record(", "prose.say(", "runtime.preflight(", "preflight_text(", "check_int(", "check_bool(",
             "check_sequence(", "check_writable(", "check_positive(", "display(Markdown(")
HIDDEN = {"remove-cell", "remove-input", "hide-cell", "hide-input"}


def test_cells_that_record_validate_preflight_or_assemble_prose_are_off_the_page():
    for source in chapters.sources():
        for cell in chapters.read_source(source).cells:
            if cell.cell_type != "code" or set(cell.metadata.get("tags", [])) & HIDDEN:
                continue
            shown = [m for m in MACHINERY if m in cell.source]
            assert not shown, f"{source.name}: a visible cell calls {shown}: {cell.source[:120]!r}"
        validate = [c for c in chapters.read_source(source).cells if "validate" in c.metadata.get("tags", [])]
        assert validate and all("hide-cell" in c.metadata["tags"] for c in validate), source.name


def test_the_install_cell_runs_before_a_paragraph_that_quotes_values(tmp_path):
    source = tmp_path / "01_tiny.md"
    source.write_text("---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
                      "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
                      "# Tiny\n\nIt took {glue:text}`t:.0f` s.\n\n```{code-cell}\nx = 1\n```\n")
    nb = chapters.colab_notebook(source, "# install", notebook_url=lambda s: s)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code][0] == "# install" and "quoted-text" in code[1].metadata["tags"]
    assert code[2].source == "x = 1" and nb.cells[0].source == "# Tiny"


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds, names it reads) by the cell's syntax tree; IPython magics are skipped."""
    import ast

    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound, read


def test_a_visible_code_cell_reads_no_name_that_only_a_removed_cell_defines():
    """A reader who copies the code on the page (d2l's way) finds every name it uses on the page:
    in a visible cell or a collapsed one (hide-cell, hide-input), never only in a removed cell."""
    import builtins

    removed_tags = {"remove-cell", "remove-input"}
    for source in chapters.sources():
        on_page, only_removed, missing = set(), set(), {}
        for cell in chapters.read_source(source).cells:
            if cell.cell_type != "code":
                continue
            bound, read = _names(cell.source)
            if set(cell.metadata.get("tags", [])) & removed_tags:
                only_removed |= bound - on_page
                continue
            for name in (read - bound - on_page) & only_removed:
                if not hasattr(builtins, name):
                    missing.setdefault(name, cell.source[:80])
            on_page |= bound
        assert not missing, f"{source.name}: visible code uses names defined only in removed cells: {missing}"


def test_a_visible_code_cell_fits_the_column_without_scrolling_sideways():
    """The code a reader reads (d2l's cells) keeps to 80 characters a line: at 1280 px the book's
    code box shows about 80, and a longer line hides its end behind a sideways scroll. The
    parameters cell is a list of settings with a comment each, read in Colab as much as here."""
    for path in list_notebooks():
        for cell in chapters.read_source(path.with_suffix(".md")).cells:
            tags = set(cell.metadata.get("tags", []))
            if cell.cell_type != "code" or tags & (HIDDEN | {"parameters"}):
                continue
            for line in cell.source.splitlines():
                assert len(line) <= 80, f"{path.name}: a visible line of {len(line)} characters: {line.strip()[:60]}"


#: Every chapter (issue 57: "one shape for every empirical chapter").
CHAPTERS = tuple(p.stem for p in list_notebooks())
#: Chapters whose whole page is its own run (08: FeAT on a dataset of the reader's) or a methods
#: chapter over committed runs (09): no "Run it yourself" section apart from the rest.
NO_OWN_RUN_SECTION = ("08_feat_on_your_own_data", "09_how_the_numbers_were_made")
HIDING = {"hide-cell", "remove-cell", "remove-input", "hide-input"}


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_chapter_keeps_its_code_on_the_page_and_ends_with_a_summary_and_exercises(stem):
    """d2l's way: at most 30% of the code cells hidden (collapsed or removed); the committed
    evidence first and the page's own run after it ("Run it yourself", its size in the heading,
    its outputs not folded); no "What we see" repeating the text; then a Summary of 3-5 points
    and 2-3 Exercises, each setting a parameter of the parameters cell."""
    nb = chapters.read_source(NOTEBOOK_DIR / f"{stem}.md")
    code = [c for c in nb.cells if c.cell_type == "code"]
    hidden = [c for c in code if set(c.metadata.get("tags", [])) & HIDING]
    assert len(hidden) <= 0.3 * len(code), f"{stem}: {len(hidden)} of {len(code)} code cells hidden"
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[-2:] == ["Summary", "Exercises"], headings
    assert "What we see" not in headings
    own = [h for h in headings if h.startswith("Run it yourself")]
    if stem not in NO_OWN_RUN_SECTION:
        assert len(own) == 1 and re.match(r"Run it yourself: \S", own[0]), own  # its size in the heading
        before = text[:text.index("## Run it yourself")]  # the evidence (or its absence, said) comes first
        assert "committed" in before or re.search(r"^## (Full-scale evidence|Evidence)", before, flags=re.M)
        after = False
        for cell in nb.cells:
            if cell.cell_type == "markdown" and "## Run it yourself" in cell.source:
                after = True
            elif after and cell.cell_type == "code":
                assert "hide-output" not in cell.metadata.get("tags", []), f"{stem}: a folded output of its own run"
    summary = text[text.index("## Summary"):text.index("## Exercises")]
    assert 3 <= len(re.findall(r"^[*-] ", summary, flags=re.M)) <= 5
    exercises = re.findall(r"^\d\. (.+?)(?=^\d\. |\Z)", text[text.index("## Exercises"):], flags=re.M | re.S)
    params = next(c.source for c in code if "parameters" in c.metadata.get("tags", []))
    names = set(re.findall(r"^(\w+)\s*[:=]", params, flags=re.M))
    assert 2 <= len(exercises) <= 3
    for exercise in exercises:
        set_here = re.findall(r"`(\w+) = [^`]+`", exercise)
        assert set_here and set(set_here) <= names, exercise[:80]


def test_at_most_30_percent_of_the_books_code_cells_are_hidden():
    counts = [(len([c for c in nb.cells if c.cell_type == "code" and set(c.metadata.get("tags", [])) & HIDING]),
               len([c for c in nb.cells if c.cell_type == "code"]))
              for nb in (chapters.read_source(NOTEBOOK_DIR / f"{stem}.md") for stem in CHAPTERS)]
    hidden, total = map(sum, zip(*counts))
    assert hidden <= 0.3 * total, f"{hidden} of {total} code cells hidden"


def test_a_figure_cell_shows_no_provenance_line_beside_its_figure():
    """MyST-NB gives a figure cell's label to each of its outputs: a collapsed provenance line
    displayed in the same cell as the figure makes the label twice, and the book build fails on
    the duplicate target. The line goes in the next cell (as in chapters 01-03)."""
    extra = re.compile(r"\.show_source\(|\.show_made_by\(|evidence\.show\w*\(|display\((?:HTML|Markdown)\(")
    for source in chapters.sources():
        for cell in chapters.read_source(source).cells:
            if cell.cell_type == "code" and "figure" in (cell.metadata.get("mystnb") or {}):
                assert not extra.search(cell.source), f"{source.name}: {cell.source[:120]!r}"
