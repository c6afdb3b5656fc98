"""What readers meet, checked without a browser: the figure style, the prose and table helpers,
the leaked-code scan, the run-time estimates of the colab profile, committed results fetched in
Colab, the one repository setting and the bibliography's author-year labels."""
import json
import re
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from featbook import committed, estimate, leaks, prose, repository, style, tables
from featbook.notebooks import REPO_ROOT, list_notebooks, load_profile  # noqa: E402


# -- figures -----------------------------------------------------------------------------------
def test_book_figures_fit_the_column_and_keep_their_text_legible():
    style.use(retina=False)
    fig, axes = style.subplots(2, 2)
    assert style.width_px(fig) <= style.COLUMN_PX
    assert matplotlib.rcParams["font.size"] >= 8 and matplotlib.rcParams["legend.fontsize"] >= 7.5
    axes[0, 0].plot([0, 1], [0, 1], label="a")
    axes[1, 1].plot([0, 1], [1, 0], label="b")
    legend = style.legend_below(fig, axes.flat)
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]
    fig.canvas.draw()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer())  # what the inline backend crops to
    assert bbox.width * fig.dpi <= style.COLUMN_PX
    plt.close(fig)
    with pytest.raises(ValueError, match="at most the column"):
        style.figsize(1, 4, width=10)
    assert style.grid_shape(4) == (2, 2) and style.grid_shape(3, max_columns=3) == (1, 3)
    assert style.grid_shape(5, max_columns=5) == (2, 3)  # plots: at most three a row


def test_the_two_bit_figure_2_is_a_grid_that_fits_the_column():
    from featbook.plotting import figure2

    steps = pd.RangeIndex(0, 11)
    history = pd.DataFrame({"inv": np.linspace(0, 1, 11), "spu": np.linspace(0, 0.5, 11),
                            "c_irmv1_0": np.zeros(11), "c_irmv1_1": np.zeros(11)}, index=steps)
    style.use(retina=False)
    fig = figure2(history, history, 5, ["a", "b"], {"limit": 0.5})
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 4 and style.width_px(fig) <= style.COLUMN_PX
    assert all(ax.get_xlim()[0] >= 0 for ax in fig.axes)  # no negative steps
    plt.close(fig)


def test_table_2_against_the_papers_puts_each_frozen_cell_at_the_papers_and_our_means():
    from featbook.ch09_views import table2_against_paper_figure
    from featlib.experiments.paper_values import TABLE2

    rows = [{"dataset": d, "learner": l, "objective": o, "penalty_weight": 1e2, "pretrain_epochs": 0, "seed": s,
             "worst_test_acc": (TABLE2[d][o][l][0] + (1.0 if s == 1 else -1.0)) / 100}  # mean the paper's, std 1
            for d in ("cmnist025", "cmnist01") for o in TABLE2[d] for l in ("erm", "bonsai", "ifeat") for s in (1, 2)]
    style.use(retina=False)
    fig = table2_against_paper_figure(pd.DataFrame(rows))
    assert [ax.get_title() for ax in fig.axes] == ["ColoredMNIST-025", "ColoredMNIST-01"]
    assert style.width_px(fig) <= style.COLUMN_PX
    for ax in fig.axes:
        points = [line.get_xydata() for line in ax.lines if line.get_linestyle() == "None"]
        assert len(points) == 3 and all(len(p) == 7 for p in points)  # 3 columns x 7 penalised objectives
        assert all(np.allclose(p[:, 0], p[:, 1]) for p in points)  # on the diagonal: ours = the paper's
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["ERM", "Bonsai", "FeAT (iFeAT)"]
    plt.close(fig)


def test_table_2_from_pieces_says_the_seeds_once_when_every_cell_has_as_many():
    from featbook.ch04_views import table2_from_pieces

    def pieces(seeds_of):
        runs = pd.DataFrame([{"dataset": "cmnist025", "learner": l, "objective": o, "penalty_weight": 1e2,
                              "pretrain_epochs": 0, "seed": s, "worst_test_acc": 0.6 + 0.01 * s}
                             for l in ("erm", "ifeat") for o in ("erm", "irmv1") for s in seeds_of(l, o)])
        oracle = pd.DataFrame({"dataset": "cmnist025", "seed": [1, 2, 3], "worst_test_acc": [0.7, 0.71, 0.72]})
        records = runs[["learner"]].drop_duplicates().assign(device="cpu")
        return {"runs": runs, "oracle": oracle, "records": records}

    intro, shown = table2_from_pieces(pieces(lambda l, o: (1, 2, 3)), ("erm-nf", "erm", "ifeat"))
    assert "made on a CPU); every cell is over 3\u00a0seeds" in intro and "ERM-NF column is not in these pieces" in intro
    text = repr(shown)
    assert "(n = " not in text and "over 3\u00a0seeds" in shown.tables[-1].note
    # a column without a single piece is left out (it would read "not yet run" in every row), a missing cell is not
    assert "FeAT (iFeAT)" in text and "ERM-NF" not in text and "not yet run" not in text
    assert "*not yet run*" not in intro  # no cell is missing: the legend is not needed
    gap_intro, gap_shown = table2_from_pieces(pieces(lambda l, o: () if (l, o) == ("ifeat", "irmv1") else (1, 2, 3)),
                                              ("erm-nf", "erm", "ifeat"))
    assert "not yet run" in repr(gap_shown) and "A cell marked *not yet run* has no piece yet" in gap_intro
    intro, shown = table2_from_pieces(pieces(lambda l, o: (1, 2) if l == "ifeat" else (1, 2, 3)), ("erm", "ifeat"))
    assert "each cell says over how many seeds it is" in intro and "ERM-NF" not in intro
    assert "(n = 2)" in repr(shown) and "(n = 3)" in repr(shown)


# -- prose and tables --------------------------------------------------------------------------
def test_prose_formats_values_as_text_a_reader_reads():
    assert prose.number(0.6666666666666666, 3) == "0.667"
    assert prose.percent(0.7057) == "70.6%" and prose.ratio(1.426) == "1.43×"
    assert prose.mean_std(0.2110, 0.0060, scale=100) == "21.10\u00a0±\u00a00.60"
    assert prose.number(-0.5, 1) == "−0.5" and prose.number(3.2e-5, 2) == "3.2\u00a0×\u00a010⁻⁵"
    assert prose.scientific(-7.3e-5, 2, sign=True) == "−7.30\u00a0×\u00a010⁻⁵" and prose.scientific(0.0) == "0"
    assert prose.scientific(1.5e8, sign=True) == "+1.5\u00a0×\u00a010⁸"
    assert prose.listing(["a", "b", "c"]) == "a, b and c" and prose.listing([]) == "none"
    phrase = prose.by_label({"cmnist": 1.426, "wilds": 1.202}, prose.ratio, {"cmnist": "ColoredMNIST", "wilds": "WILDS"})
    assert phrase == "1.43× on ColoredMNIST and 1.20× on WILDS"
    assert not leaks.scan_text(phrase) and prose.number(float("nan")) == prose.MISSING
    with pytest.raises(TypeError, match="format"):
        prose.say("x", {"a": 1})


def test_prose_says_values_over_seeds_and_where_they_were_computed_in_one_way():
    """The phrases the ColoredMNIST pages share (chapters 03, 04, 09): a value over seeds has no
    spread at one seed, a distance in paper stds is always signed, devices read as a reader says them."""
    assert prose.seed_mean(0.8036, 0.022, 3, scale=100) == "80.36\u00a0±\u00a02.20"
    assert prose.seed_mean(0.8036, 0.022, 1, scale=100) == "80.36"  # one seed: no spread to show
    assert prose.seed_mean(79.0, float("nan"), 2) == "79.00" and prose.seed_mean(None, 0.1, 3) == prose.MISSING
    assert prose.over_seeds(1) == "one seed (no spread to show)"
    assert prose.over_seeds(3) == "mean ± std over 3\u00a0seeds"
    assert prose.seeds_caveat(1) == "one seed, so this gives a direction, not a size"
    assert prose.seeds_caveat(4) == "4\u00a0seeds"
    assert prose.seed_list([2]) == "seed 2 only" and prose.seed_list([1, 2, 3]) == "seeds 1, 2 and 3"
    assert prose.stds(1.26) == "+1.3" and prose.stds(-0.14) == "\u22120.1" and prose.stds(0.0) == "0.0"
    assert prose.stds(-0.04) == "0.0" and prose.signed(-1.374) == "\u22121.37" and prose.signed(0.004) == "0.00"
    assert prose.power(1e4) == "10⁴" and prose.power(5e3) == "5\u00a0×\u00a010³" and prose.power(100.0) == "100"
    assert prose.power(1e6) == "10⁶" and prose.power(5e-4) == "5\u00a0×\u00a010⁻⁴"
    devices = pd.Series(["cuda (NVIDIA H200)", "cpu", "cuda (NVIDIA H200)"])
    assert prose.devices(devices) == "cpu and one NVIDIA H200"
    assert prose.devices(devices, cpu="a CPU") == "a CPU and one NVIDIA H200"
    assert not any(leaks.scan_text(t) for t in (prose.over_seeds(3), prose.devices(devices, cpu="a CPU")))


def test_tables_show_labels_one_line_values_and_no_index_or_nan():
    frame = pd.DataFrame({"objective": ["IRMv1", "V-REx"], "value": [0.925, np.nan], "kept": [True, False]})
    html = tables.table(frame, caption="A table")._repr_html_()
    assert "feat-table-caption" in html and "A table" in html and "NaN" not in html and "nan" not in html
    assert html.index("A table") < html.index("<table")  # above the table's scroll box, wrapping in the column
    assert "0.93" in html and "0.925000" not in html and "yes" in html and "white-space: nowrap" in html
    assert "<th" in html and html.count("<tr>") == 3  # header and two rows, no index column
    assert not leaks.scan_text(str(tables.table(frame)))


def test_paired_columns_become_one_cell_with_the_papers_value_under_ours():
    columns = pd.MultiIndex.from_tuples([("ERM", "ours"), ("ERM", "paper"), ("FeAT", "ours"), ("FeAT", "paper")])
    frame = pd.DataFrame([["10.0 ± 1.0", "12.0 ± 0.5", "70.0 ± 1.0", "-"]], columns=columns, index=["IRMv1"])
    cells = tables.paired(frame, paper_prefix="")
    assert list(cells.columns) == ["ERM", "FeAT"]
    assert cells.loc["IRMv1", "ERM"] == tables.Stacked("10.0 ± 1.0", "12.0 ± 0.5", paper=True)
    assert cells.loc["IRMv1", "FeAT"] == tables.Stacked("70.0 ± 1.0", "")  # the paper has no value
    html = tables.table(cells.reset_index(), caption="Table 2")._repr_html_()
    assert "feat-table-key" in html and html.index("feat-table-key") < html.index("<table")  # the key above the rows
    assert "feat-table-key" not in tables.table(frame.droplevel(1, axis=1).iloc[:, :1].reset_index())._repr_html_()
    assert "under it in grey, the paper&#x27;s</span>" in html
    # a grey line that holds a distance from the paper says so in the key (chapter 09's Table 7 by head)
    from featbook import ch09_views

    comparison = pd.DataFrame([{"round": 1, "metric": "train_acc", "choice": "sum", "mean": 0.9, "std": 0.01,
                                "n_seeds": 3, "z": 0.8, "paper_mean": 0.89, "paper_std": 0.0125}])
    keyed = ch09_views.table7_choices_table(comparison, "Table 7")._repr_html_()
    assert "under it in grey, ours minus the paper&#x27;s, in the paper&#x27;s stds</span>" in keyed
    parts = tables.split_by(pd.concat({"ColoredMNIST-025": frame, "ColoredMNIST-01": frame}, axis=1))
    assert list(parts) == ["ColoredMNIST-025", "ColoredMNIST-01"]


def test_a_cells_grey_line_and_a_hyphenated_header_do_not_break_inside_on_a_phone():
    import re

    frame = pd.DataFrame({"objective": ["CLOvE"], "ERM-NF": [tables.Stacked("+0.12 ± 0.40", "25.0 → 24.5")],
                          "Free text": [tables.Stacked("a b", "c d")]})
    html = tables.table(frame, wrap=["Free text"])._repr_html_()
    assert re.search(r'<span class="feat-sub" style="[^"]*white-space: nowrap">25\.0 → 24\.5</span>', html)
    assert '<th style="' in html and '<span style="white-space: nowrap">ERM-NF</span></th>' in html
    assert "<th" in html and re.search(r">Free text</th>", html)  # words without a hyphen may still wrap
    assert re.search(r'<span class="feat-sub" style="[^"]*; ">c d</span>', html)  # a wrapping column's grey line wraps too


def test_table_2_is_one_table_per_dataset_narrow_enough_for_the_column():
    from featbook import cmnist_shared

    rng = np.random.default_rng(0)
    rows = [{"dataset": d, "learner": i, "objective": o, "seed": s, "penalty_weight": 1.0, "pretrain_epochs": 0,
             "worst_test_acc": rng.uniform(0.4, 0.8)}
            for d in ("cmnist025", "cmnist01") for i in ("erm-nf", "erm", "bonsai", "ifeat", "feat")
            for o in ("erm", "irmv1", "ib_irm") for s in (1, 2)]
    shown = cmnist_shared.table2(cmnist_shared.table2_frame(pd.DataFrame(rows)), "Table 2")
    assert len(shown.tables) == 2
    for t in shown.tables:
        assert list(t.frame.columns)[0] == "objective" and "IB-IRM" in list(t.frame["objective"])
        assert tables.fits(t.frame), t.frame
        assert "ib_irm" not in t._repr_html_() and "cmnist01" not in t._repr_html_()


def test_no_code_cell_ends_by_showing_a_recorded_value():
    """``prose.say(...)`` returns its text: as a cell's last expression the notebook would show
    its repr (a quoted string) on the page. ``record(...)`` returns nothing, so it may end a cell."""
    from featbook.record import record

    assert record("presentation_test_value", {"a": 1}) is None
    import ast

    for path in list_notebooks():
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "\n".join(l for l in "".join(cell["source"]).splitlines() if not l.lstrip().startswith("%"))
            body = ast.parse(source).body
            last = body[-1].value if body and isinstance(body[-1], ast.Expr) else None
            if isinstance(last, ast.Call):
                assert ast.unparse(last.func).split(".")[-1] != "say", f"{path.name}: {ast.unparse(last)[:80]}"


# -- the leaked-code scan ----------------------------------------------------------------------
@pytest.mark.parametrize("text, kind", [
    ("took {'cmnist': 1.426, 'wilds': 1.202} times ERM's step time", "braces"),
    ("per seed: {s: int(k) for s, k in stops[d].items()}", "braces"),
    ("dict(a=1)", "repr"),
    ("TwoBitSpec(alpha=0.25, betas=(0.1, 0.2))", "repr"),
    ("<featlib.Foo object at 0x7f3a2c>", "repr"),
    ("loaded from /usr/lib/python3/site-packages/captum/attr.py", "path"),
    ("see /home/runner/work/book", "path"),
    ("a share of 0.6666666666666666", "float tail"),
    ("0.925000", "float tail"),
    ("NaN", "NaN"),
    ("set in this book's issue tracker", "tracker"),
    ("as issue 3 showed", "tracker"),
    ("on the committed full-size rounds (the committed full-size rounds (5 seeds per dataset))", "doubled phrase"),
    ("a run with 2 seed(s)", "plural placeholder"),
    ("ERM for pretrain_steps steps", "parameter name"),
    ("final |C^e| <= 7.3e-05", "e-notation"),
    ("a penalty weight of 1e04", "e-notation"),
    ("Estimated time of this run: about 2.9 h on a Colab T4 GPU", "estimate"),
    ("(estimated from step times measured on an H100 and on a 2-core CPU, not measured on a T4)", "estimate"),
])
def test_the_scan_finds_leaked_code(text, kind):
    assert kind in {leak.kind for leak in leaks.scan_text(f"Some prose: {text}. More prose.")}


def test_the_scan_leaves_prose_numbers_and_math_alone():
    html = """<html><body><nav>{'nav': 1}</nav><article>
      <p>FeAT scored 70.57 ± 0.68 (paper 70.57) in 1.43× ERM's time; 12.5% of 50,000 images.</p>
      <p>ERM after 1,000 steps (ERM-NF, 2 seeds) on ColoredMNIST-025; 7.3 × 10⁻⁵; see results/cmnist-rounds.</p>
      <details class="feat-provenance"><summary>How this was made</summary>
      <p>Computed on cuda (NVIDIA H200), commit fcc0a2e4e006 (8 s of wall time).</p></details>
      <span class="math">\\(\\{x_1, x_2\\}\\)</span><div class="math">\\[ \\sum_{e} C^{e} \\]</div>
      <div class="cell_input"><pre>record("x", {"a": 1})</pre></div>
      <p>Run <code class="literal">python -m featbook.build --executed _build/full</code>.</p>
    </article></body></html>"""
    assert leaks.scan_html(html) == []
    assert leaks.scan_html(html.replace("</article>", "<div class='cell_output'><pre>{'a': 0.6666666666666666}"
                                                    "</pre></div></article>"))


@pytest.mark.parametrize("sentence", [
    "59 s (training 148 of its 160 pieces).",
    "2 of 2 runs wrote the folder from the cache.",
    "The results of the second sitting, 8 s of wall time.",
    "Computed at commit fcc0a2e4e006.",
    "featlib 0.4's 1,000 steps.",
    "Every file's checksum is in the manifest.",
])
def test_the_scan_finds_bookkeeping_in_reading_text_but_not_in_the_provenance_line_or_a_reference_page(sentence):
    """Issue 57: how a result was made stays out of the reading text: at most one collapsed
    provenance line under a figure or table, the rest on the reference pages."""
    page = f"<html><body><article><p>Prose.</p><p>{sentence}</p></article></body></html>"
    assert "bookkeeping" in {leak.kind for leak in leaks.scan_html(page)}
    folded = page.replace(f"<p>{sentence}</p>", f"<details class='feat-provenance'><summary>How it was made</summary>"
                                               f"<p>{sentence}</p></details>")
    assert "bookkeeping" not in {leak.kind for leak in leaks.scan_html(folded)}
    assert "bookkeeping" not in {leak.kind for leak in leaks.scan_html(page, reference=True)}


def test_a_built_books_reference_pages_may_hold_bookkeeping(tmp_path):
    page = "<html><body><article><p>Training 148 of its 160 pieces took 59 s of wall time.</p></article></body></html>"
    for name in ("book/running.html", "notebooks/09_how_the_numbers_were_made.html", "notebooks/04_x.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(page)
    assert list(leaks.scan_book(tmp_path)) == ["notebooks/04_x.html"]
    assert set(leaks.REFERENCE_PAGES) == {"book/running.html", "notebooks/09_how_the_numbers_were_made.html",
                                          "book/own_objective.html"}


def test_the_glossary_may_define_the_bookkeeping_words_and_nothing_else_may():
    """The introduction's glossary defines "piece" and "sitting" (a ``glossary`` div); the same
    words in the introduction's prose outside it are found."""
    glossary = ("<div class='glossary'><dl><dt>Piece, GPU sitting</dt><dd>Full-size results are computed in "
                "pieces; a sitting is one session on a borrowed GPU.</dd></dl></div>")
    page = f"<html><body><article><p>Prose.</p>{glossary}</article></body></html>"
    assert "bookkeeping" not in {leak.kind for leak in leaks.scan_html(page)}
    outside = page.replace("</article>", "<p>This table took 3 sittings.</p></article>")
    assert "bookkeeping" in {leak.kind for leak in leaks.scan_html(outside)}


def test_the_scan_finds_an_estimate_printed_by_a_cell_whose_input_is_removed():
    from featbook.estimate import Estimate
    from featbook.runtime import preflight_text

    printed = preflight_text(Estimate(t4_s=600.0, cpu_s=3600.0))
    # a remove-input cell: its input is gone from the page, its output is not
    page = f"<html><body><article><p>Prose.</p><div class='cell tag_remove-input'><div class='cell_output'><pre>{printed}</pre></div></div></article></body></html>"
    assert "estimate" in {leak.kind for leak in leaks.scan_html(page)}
    assert leaks.PREFLIGHT.search(printed)


def test_the_scan_finds_a_parameter_name_in_inline_code_where_its_value_belongs():
    names = leaks.parameter_names('pretrain_steps = 1000  # ERM steps\nprobe_step = 20\nn_attribution: int = 1000\n'
                                  'cache_dir: "Optional[str]" = "_cache"\n')
    assert names == {"pretrain_steps", "probe_step", "n_attribution", "cache_dir"}
    for text in ("(a, b) ERM for `pretrain_steps` steps, then IRMv1", "early in training (after `probe_step` steps)",
                 "over the first `n_attribution` OOD test images", "stop after `probe_step`."):
        assert [leak.kind for leak in leaks.bare_parameters(text, names)] == ["parameter name"], text
    for text in ("`cache_dir` keeps finished pieces, so a stopped run resumes",  # naming a parameter to explain it
                 "set `pretrain_steps` to 0 to skip it", "ERM for 1,000 steps", "ERM for `other_steps` steps"):
        assert leaks.bare_parameters(text, names) == [], text
    # on a rendered page: the names come from its parameters cell, the text from its prose and outputs
    page = """<html><body><article>
      <div class="cell tag_parameters"><div class="cell_input"><pre>pretrain_steps = 1000
probe_step = 20</pre></div></div>
      <p>Two runs: (a, b) ERM for <code class="literal"><span class="pre">{}</span></code> steps, then IRMv1.</p>
      <p>Set <code class="literal"><span class="pre">pretrain_steps</span></code> to change it.</p>
    </article></body></html>"""
    assert leaks.scan_html(page.format("1,000").replace('<code class="literal"><span class="pre">1,000</span></code>',
                                                        "1,000")) == []
    found = leaks.scan_html(page.format("pretrain_steps"))
    assert [(leak.kind, leak.text) for leak in found] == [("parameter name", "pretrain_steps")]
    assert leaks.scan_html(page.format("pretrain_steps").replace("tag_parameters", "tag_other")) == []


def test_no_chapter_writes_a_parameter_name_where_its_value_belongs():
    from featbook import chapters

    for source in chapters.sources():
        nb = chapters.read_source(source)
        params = [c.source for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
        prose_text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        found = leaks.bare_parameters(prose_text, leaks.parameter_names(params[0]))
        assert not found, f"{source.name}: write the value (a glued number):\n" + "\n".join(map(str, found))


# -- run-time estimates and the colab profile --------------------------------------------------
def test_full_scale_estimates_match_the_measured_cpu_and_gpu_runs():
    from featlib.experiments.colored_mnist import CMNISTProtocol

    # the measured runs trained the frozen columns 1,000 OOD steps (featlib 0.4's length)
    full = estimate.cmnist([CMNISTProtocol(dataset=d, learners=("erm-nf", "erm", "bonsai", "ifeat"), ood_steps=1000)
                            for d in ("cmnist025", "cmnist01")])
    # benchmarks/stacked_training.py on the H100: about 2 hours (ERM-NF 120 min); on the 2-core CPU about 26 days
    assert 1.5 * 3600 < full.t4_s / estimate.T4_OVER_H100 < 2.5 * 3600
    assert 20 * 86400 < full.cpu_s < 32 * 86400
    assert "not measured on a T4" in full.describe()


def test_the_estimate_counts_each_column_at_its_own_length():
    """ERM-NF trains nf_ood_steps, the frozen columns ood_steps: each estimate follows its own."""
    from featlib.experiments.colored_mnist import CMNISTProtocol

    def parts(**lengths):
        est = estimate.cmnist([CMNISTProtocol(learners=("erm-nf", "erm"), **lengths)], oracle=False)
        return {name: t4 for name, (t4, _cpu) in est.parts.items()}

    base, nf, frozen = parts(), parts(nf_ood_steps=2000), parts(ood_steps=5000)
    assert nf["ERM-NF runs"] == pytest.approx(2 * base["ERM-NF runs"] * 1000 / CMNISTProtocol().nf_ood_steps)
    assert nf["frozen-feature runs"] == base["frozen-feature runs"]
    assert frozen["ERM-NF runs"] == base["ERM-NF runs"] and frozen["frozen-feature runs"] > base["frozen-feature runs"]


def test_estimates_never_put_a_gpu_behind_a_cpu_and_count_fabricated_data_as_fabricated():
    from featlib.experiments.wilds_experiment import WildsProtocol

    small = load_profile("small")["05_feat_on_wilds"]
    protocol = WildsProtocol(dataset=small["dataset"], learners=tuple(small["learners"]), seeds=tuple(small["seeds"]),
                             epoch_scale=small["epoch_scale"], backbone=small["backbone"], pretrained=small["pretrained"],
                             lr=small["lr"], batch_size=small["batch_size"], ood_epochs=small["ood_epochs"],
                             resolution=small["resolution"])
    fabricated = estimate.wilds(protocol, fabricated=True)
    real = estimate.wilds(protocol)
    assert fabricated.cpu_s < real.cpu_s / 100  # 120 fabricated training images, not Camelyon17's 302,436
    assert all(t4 <= cpu for t4, cpu in (fabricated + real).parts.values())
    # the book's small run took about a minute: it is called short, not "34 min" or "2.9 h"
    assert fabricated.describe().startswith("a few minutes at most") and "h on" not in fabricated.describe()
    assert "about" in real.describe() and real.t4_s <= real.cpu_s


def _protocols(stem, params):
    """The configuration objects a chapter builds from ``params`` (its validate cells)."""
    from featbook.notebook_params import parameter_defaults

    values = parameter_defaults(next(p for p in list_notebooks() if p.stem == stem)) | params
    return values


def colab_estimates():
    """Estimated seconds on a Colab T4 of every chapter under the colab profile."""
    from featlib import cost
    from featlib.experiments.colored_mnist import make_protocol
    from featlib.experiments.colored_mnist import CMNISTProtocol
    from featlib.experiments.saliency_cmnist import SaliencyProtocol
    from featlib.experiments.wilds_experiment import WildsProtocol

    profile = load_profile("colab")
    out = {}
    v = _protocols("01_erm_feature_learning", profile.get("01_erm_feature_learning", {}))
    out["01"] = estimate.two_bit(v["steps"] * (1 + len(v["compare_activations"])) + v["sweep_steps"] * len(v["sweep_alphas"]),
                                 v["n_per_env"] * len(v["betas"]), v["d"])
    v = _protocols("02_irmv1_and_pretraining", profile.get("02_irmv1_and_pretraining", {}))
    out["02"] = estimate.two_bit(v["pretrain_steps"] + 2 * v["irm_steps"] + 2 * (v["short_pretrain_steps"] + v["irm_steps"])
                                 + sum(v["sweep_pretrain_steps"]) + v["sweep_irm_steps"] * len(v["sweep_pretrain_steps"]),
                                 v["n_per_env"] * len(v["betas"]), v["d"])
    v = _protocols("03_ood_objectives_need_rich_features", profile["03_ood_objectives_need_rich_features"])
    fields = ("seeds", "objectives", "penalty_weights", "pretrain_epochs", "ood_steps", "hidden_dim", "n_train",
              "n_test", "epoch_scale")
    out["03"] = estimate.cmnist([CMNISTProtocol(dataset=v["dataset"], learners=("erm-nf", "feat"),
                                                **{f: tuple(v[f]) if isinstance(v[f], list) else v[f] for f in fields})])
    v = _protocols("04_feat_on_colored_mnist", profile["04_feat_on_colored_mnist"])
    out["04"] = estimate.cmnist([make_protocol(v["preset"], dataset=d, learners=tuple(v["learners"]), max_rounds=v["max_rounds"],
                                               **{f: tuple(v[f]) if isinstance(v[f], list) else v[f] for f in fields
                                                  if v[f] is not None})  # None: the preset's value
                                 for d in v["datasets"]])
    v = _protocols("05_feat_on_wilds", profile["05_feat_on_wilds"])
    out["05"] = estimate.wilds(WildsProtocol(dataset=v["dataset"], learners=tuple(v["learners"]), seeds=tuple(v["seeds"]),
                                             epoch_scale=v["epoch_scale"], max_examples=v["max_examples"],
                                             max_token_length=v["max_token_length"]), download=True)
    v = _protocols("06_which_features_are_learned", profile["06_which_features_are_learned"])
    assert v["wilds_datasets"] == []
    out["06"] = estimate.saliency(SaliencyProtocol(dataset=v["dataset"], n_train=v["n_train"], n_test=v["n_test"],
                                                   hidden_dim=v["hidden_dim"], erm_epochs=tuple(v["erm_epochs"]),
                                                   feat_rounds=v["feat_rounds"], epoch_scale=v["epoch_scale"]))
    v = _protocols("07_cost_of_feature_learning", profile.get("07_cost_of_feature_learning", {}))
    out["07"] = estimate.cost(cost.CostSettings(tuple(v["learners"]), v["rounds"], v["steps"], v["warmup"], v["repeats"]),
                              [cost.CMNISTCost(n_train=v["n_train"], hidden_dim=v["hidden_dim"]),
                               cost.WildsCost(backbone=v["backbone"], resolution=v["resolution"], batch_size=v["batch_size"])])
    return out


def test_the_colab_profile_fits_a_colab_session_per_chapter_on_full_data():
    profile = load_profile("colab")
    assert set(profile) == {p.stem for p in list_notebooks()}  # every chapter is sized, even if by its defaults
    for stem in ("03_ood_objectives_need_rich_features", "04_feat_on_colored_mnist", "06_which_features_are_learned"):
        assert not {"n_train", "hidden_dim", "ood_steps", "epoch_scale"} & set(profile[stem]), stem  # full data and steps
    minutes = {chapter: e.t4_s / 60 for chapter, e in colab_estimates().items()}
    assert all(m <= 16 for m in minutes.values()), minutes
    assert minutes["03"] > 5 and minutes["04"] > 5  # not a small profile in disguise


def test_the_colab_profile_fits_a_t4s_memory_per_chapter():
    """The profile the memory warning names (featbook.runtime.memory_text) fits what it is for."""
    from featlib.training.memory import T4_BYTES

    peaks = {chapter: e.peak for chapter, e in colab_estimates().items()}
    assert all(p.gpu_bytes <= T4_BYTES for p in peaks.values()), {c: p.gpu_bytes / 2**30 for c, p in peaks.items()}


def test_every_profile_only_sets_parameters_each_notebook_accepts():
    from featbook.notebook_params import check_parameters

    for name in ("small", "colab"):
        for stem, params in load_profile(name).items():
            check_parameters(next(p for p in list_notebooks() if p.stem == stem), params)


# -- committed results in Colab ----------------------------------------------------------------
def fake_github(root: Path):
    """A ``get`` that serves the repository's raw files from ``root`` (and refuses API calls)."""
    calls = []

    def get(url):
        calls.append(url)
        assert not url.startswith("https://api.github.com/"), "no API listing"
        path = url.split("/main/", 1)[1]
        return (root / path).read_bytes()
    return get, calls


def test_committed_results_are_read_in_a_checkout_and_fetched_without_one(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "results" / "cmnist-rounds").mkdir(parents=True)
    (repo / "results" / "cmnist-rounds" / "provenance.json").write_text('{"datasets": []}')
    (repo / "results" / "cost" / "cpu").mkdir(parents=True)
    (repo / "results" / "cost" / "cpu" / "summary.csv").write_text("a,b\n1,2\n")
    committed.write_manifest(repo / "results")
    get, calls = fake_github(repo)

    # a checkout: read in place, nothing fetched; a missing sub-folder means nothing is committed
    notebooks = repo / "notebooks"
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)
    found = committed.locate("../results/cmnist-rounds", get=get)
    assert found.path == Path("../results/cmnist-rounds") and not found.fetched and not calls
    assert not committed.locate("../results/cmnist", get=get) and not calls

    # Colab: no results folder; the files the manifest lists are fetched from the repository
    colab = tmp_path / "content"
    colab.mkdir()
    monkeypatch.chdir(colab)
    monkeypatch.setenv(repository.ENV, "https://github.com/owner/book@main")
    found = committed.locate("../results/cost", fetch_dir="_cache/committed", get=get)
    assert found.fetched and (found.path / "cpu" / "summary.csv").read_text() == "a,b\n1,2\n"
    assert "come from https://github.com/owner/book (branch main): fetched into" in found.note
    assert calls == ["https://raw.githubusercontent.com/owner/book/main/results/manifest.json",
                     "https://raw.githubusercontent.com/owner/book/main/results/cost/cpu/summary.csv"]
    assert not committed.locate("../results/cmnist", fetch_dir="_cache/committed", get=get)

    def offline(url):
        raise OSError("no network")
    failed = committed.locate("../results/wilds", fetch_dir="_cache/other", get=offline)
    assert not failed and failed.failed and "failed" in failed.note and "In Colab" in failed.note


# -- one repository setting ------------------------------------------------------------------
def test_the_repository_is_set_in_one_place():
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text())["repository"]
    repo = repository.from_config()
    assert (repo.url, repo.branch) == (config["url"].rstrip("/"), config.get("branch", "main"))
    for path in list_notebooks():  # the install cell of every notebook, written from _config.yml
        first = "".join(next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")["source"])
        assert f'os.environ.setdefault("FEATLIB_REPOSITORY", "{repo.url}@{repo.branch}")' in first
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    written = [f for f in tracked if f.endswith((".py", ".md", ".yml", ".yaml", ".toml", ".txt", ".cfg"))
               and repo.url in (REPO_ROOT / f).read_text(errors="ignore")]
    assert written == ["_config.yml"], written


def test_repository_setting_parses_urls_and_branches(monkeypatch):
    assert repository.parse("https://github.com/a/b@dev") == repository.Repository("https://github.com/a/b", "dev")
    assert repository.parse("https://github.com/a/b/") == repository.Repository("https://github.com/a/b", "main")
    monkeypatch.setenv(repository.ENV, "https://github.com/a/b@x")
    assert repository.repository().raw_url("results/f.csv") == "https://raw.githubusercontent.com/a/b/x/results/f.csv"


# -- bibliography ------------------------------------------------------------------------------
def test_same_author_same_year_works_get_distinct_labels():
    from pybtex.database import parse_file

    bib = parse_file(str(REPO_ROOT / "book" / "references.bib"))
    labels = {}
    for key, entry in bib.entries.items():
        first = entry.persons["author"][0].last_names[0]
        label = (re.sub(r"[{}\\']", "", first), entry.fields["year"])
        assert label not in labels, f"{key} and {labels[label]} both cite as {label}: add a letter to the year"
        labels[label] = key


def test_recorded_commands_lose_the_machines_folders_but_nothing_else():
    recorded = ("python -m featlib.cli.run_rounds --out /tmp/runs/cmnist-rounds --datasets cmnist025 "
                "--cache-dir /work/main/_cache/cmnist")
    shown = prose.command(recorded)
    assert shown == ("python -m featlib.cli.run_rounds --out …/runs/cmnist-rounds --datasets cmnist025 "
                     "--cache-dir …/_cache/cmnist")
    assert leaks.scan_text(recorded) and not leaks.scan_text(shown)
    assert prose.command("python -m featlib.cli.cost --out results/cost/cpu-2core") == "python -m featlib.cli.cost --out results/cost/cpu-2core"


def test_the_bibliography_labels_entries_as_the_text_cites_them_and_links_them():
    from pybtex.database import parse_file

    from featbook.sphinx_fixes import author_year_label, register_bibliography_style
    from pybtex.plugin import find_plugin

    bib = parse_file(str(REPO_ROOT / "book" / "references.bib"))
    assert author_year_label(bib.entries["chen2023feat"]) == "Chen et al., 2023b"
    assert author_year_label(bib.entries["gulrajani2021search"]) == "Gulrajani and Lopez-Paz, 2021"
    register_bibliography_style()
    labels = [e.label for e in find_plugin("pybtex.style.formatting", "featbook")().format_bibliography(bib)]
    assert len(set(labels)) == len(labels) == len(bib.entries) and [l.split()[0] for l in labels] == sorted((l.split()[0] for l in labels), key=str.lower)
    assert all("url" in e.fields for e in bib.entries.values()), [k for k, e in bib.entries.items() if "url" not in e.fields]
    for key in ("arjovsky2019invariant", "krueger2021out", "chen2023pareto", "ahuja2021invariance", "wald2021calibration",
                "koyama2020out", "rame2022fishr", "sagawa2020distributionally", "gulrajani2021search"):
        assert key in bib.entries, key  # every OOD objective of chapter 03, and DomainBed


def test_no_figure_code_sets_text_smaller_than_the_styles_minimum():
    """The browser test measures figure text as featbook.style.MIN_TEXT_PT at each figure's measured
    display scale; that holds only if no figure sets a smaller font by hand (a literal size below
    the minimum, or a relative size such as "small" that the style's base size would shrink)."""
    import ast

    roots = [REPO_ROOT / "featlib", REPO_ROOT / "book" / "featbook", REPO_ROOT / "notebooks"]
    too_small = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.keyword) and node.arg in ("fontsize", "labelsize", "size", "titlesize"):
                    value = node.value
                    if isinstance(value, ast.Constant) and (
                            (isinstance(value.value, (int, float)) and node.arg != "size" and value.value < style.MIN_TEXT_PT)
                            or (isinstance(value.value, str) and "small" in value.value)):
                        too_small.append(f"{path.name}:{node.lineno} {node.arg}={value.value!r}")
    assert not too_small, f"figure text below {style.MIN_TEXT_PT} pt: {too_small}"


def test_the_leak_scan_finds_a_paper_value_beside_a_test_run():
    """Under a "Run it yourself" heading (a chapter's own run at reduced size), a table cell with
    the paper's value under ours, or a header naming the paper, is a leak; elsewhere it is not."""
    cell = tables.table(pd.DataFrame({"score": [tables.Stacked("61.0 ± 2.0", "70.57 ± 0.68", paper=True)]}))
    plain = tables.table(pd.DataFrame({"step time": [tables.Stacked("2.4 ms", "2.3–2.5")]}))

    def page(heading, table_html):
        return (f'<article class="bd-article"><section><h2>{heading}</h2><p>text</p>{table_html}</section>'
                "</article>")

    found = leaks.test_run_beside_paper(page("Run it yourself#", cell._repr_html_()))
    assert len(found) == 1 and found[0].kind == "paper value beside a test run"
    assert leaks.test_run_beside_paper(page("Table 2 at full scale", cell._repr_html_())) == []
    assert leaks.test_run_beside_paper(page("Run it yourself", plain._repr_html_())) == []  # a range, not the paper


def test_the_erm_nf_column_joins_table_2_for_a_dataset_only_when_each_of_its_cells_has_three_seeds():
    import pandas as pd

    from featbook import ch04_views
    from featlib.experiments import cmnist_analysis as analysis
    from featlib.experiments.paper_values import TABLE2

    def runs(learner, dataset, objectives, seeds):
        return pd.DataFrame([dict(dataset=dataset, learner=learner, objective=o, seed=s, penalty_weight=10.0,
                                  pretrain_epochs=0, worst_test_acc=0.6 + 0.01 * s)
                             for o in objectives for s in seeds])

    def records(frame, device):
        return frame[["dataset", "learner", "objective", "seed"]].drop_duplicates().assign(
            device=device, precision="fp32", wall_time_s=1.0, commit="a" * 40)

    every = list(TABLE2["cmnist025"])
    frozen = pd.concat([runs("erm", d, every, [1, 2, 3]) for d in ("cmnist025", "cmnist01")], ignore_index=True)
    oracle = pd.DataFrame([dict(dataset=d, seed=s, worst_test_acc=0.7) for d in ("cmnist025", "cmnist01")
                           for s in (1, 2, 3)])
    pieces = dict(runs=frozen, oracle=oracle, records=records(frozen, "cpu"))
    # -025 has every objective at 3 seeds, -01 one objective short of it and -01's IGA at 2 seeds
    nf = pd.concat([runs("erm-nf", "cmnist025", every, [1, 2, 3]), runs("erm-nf", "cmnist01", every[:-1], [1, 2, 3]),
                    runs("erm-nf", "cmnist01", ["fishr"], [1, 2])], ignore_index=True)
    nf_pieces = dict(runs=nf, oracle=oracle.assign(worst_test_acc=0.1), records=records(nf, "cuda (NVIDIA H200)"))
    assert analysis.nf_ranked_datasets(nf) == ["cmnist025"]
    joined = analysis.with_nf_column(pieces, nf_pieces)
    added = joined["runs"].query("learner == 'erm-nf'")
    assert set(added["dataset"]) == {"cmnist025"} and len(added) == len(every) * 3
    assert joined["oracle"] is oracle  # the frozen pieces' oracle, not the sitting's
    assert len(joined["records"]) == len(pieces["records"]) + len(every) * 3
    assert analysis.with_nf_column(pieces, None) is pieces
    assert analysis.with_nf_column(pieces, dict(nf_pieces, runs=nf.query("seed < 3"))) is pieces
    intro, shown = ch04_views.table2_from_pieces(joined, ("erm-nf", "erm", "bonsai", "ifeat"))
    assert "the ERM-NF column on ColoredMNIST-025 on one NVIDIA H200, from GPU sittings" in intro
    assert "made on a CPU;" in intro and "shown apart below" not in intro
    html = shown._repr_html_()
    assert "ERM-NF" in html and "not yet run" in html  # -01's ERM-NF cells


def test_the_scan_finds_markdown_emphasis_a_glued_sentence_left_unrendered():
    """A glued sentence is plain text: "**The first half, shown.**" shows its asterisks."""
    def page(text):
        return f"<html><body><article><p>{text}</p></article></body></html>"

    found = leaks.scan_html(page("Our verdict on each: **The first half, shown.** In whole networks ..."))
    assert [leak.kind for leak in found] == ["markdown"]
    assert leaks.scan_html(page("The penalty is x**2 + y**2, and 2**10 is 1,024.")) == []
    # the Markdown a cell displays is rendered: its source text is not a leak
    assert leaks.scan_text("**Does ours agree with Table 14? Yes.** The paper's ...") == []
