"""The introduction's table of the paper's claims is made from the committed results
(featbook.claims): each row reads its evidence, says its scale, and changes when the results do."""
import re
import shutil
from pathlib import Path

from featbook import claims, prose
from featlib.experiments.cmnist_analysis import frozen_columns, table2_pieces_choice
from featlib.experiments.results import load_study
from featlib.experiments.table2_pieces import load_pieces

REPO = Path(__file__).resolve().parents[1]


def test_every_claim_of_the_paper_has_a_row_from_the_committed_results():
    rows = claims.claims(REPO / "results")
    assert [r.paper for r in rows] == [p for p, *_ in claims.ROWS]
    table2 = next(r for r in rows if r.paper == "Table 2")
    final = REPO / "results" / "cmnist-table2"
    shown, which, apart = table2_pieces_choice(load_pieces(final) if final.exists() else None,
                                               load_pieces(REPO / "results" / claims.EARLIER_TABLE2))
    frozen = frozen_columns(shown["runs"])
    assert ("earlier protocol" in table2.scale) == (which == "earlier")
    assert ("today's protocol: " in table2.scale) == (apart is not None)
    for r in frozen.itertuples():
        assert f"{int(r.feat_best)} of {int(r.objectives)} on " in table2.agrees
        assert f"(the paper: {int(r.paper_feat_best)})" in table2.agrees
    # a verdict first, as every row has; the earlier protocol's ranking never stands without its caveat
    caveat = " (earlier protocol, weaker baselines)" if which == "earlier" else ""
    assert table2.agrees.startswith(claims.table2_verdict(frozen) + caveat + ": ")
    # today's OOD length was chosen against the paper's table: the row says it calibrates
    assert table2.agrees.endswith("; length calibrated on this table") == (which != "earlier")
    fig1b = next(r for r in rows if r.paper == "Fig. 1(b)")
    assert fig1b.agrees == "-" or fig1b.agrees.split(":")[0] in ("yes", "partly", "no", "not yet")
    if "too few to rank" in fig1b.scale:  # the frozen form's FeAT half, under 3 seeds: its seeds, no verdict
        assert re.search(r"\(\d+\xa0seeds?\)$", fig1b.agrees), fig1b.agrees
    table7 = next(r for r in rows if r.paper == "Table 7")
    assert "keep 2 rounds on ColoredMNIST-025" in table7.agrees and "10\xa0seeds" in table7.scale
    assert table7.agrees.split(":")[0] in ("yes", "partly", "no")
    # Table 14: the paper's quantity (whole training time / ERM's), a verdict; where it rests on
    # fabricated images (of the paper's size), the scale cell says so
    table14 = next(r for r in rows if r.paper == "Table 14")
    assert table14.agrees.split(":")[0] in ("yes", "partly", "no") and table14.scale.startswith("whole training time")
    from featbook import cost_views
    from featlib.cost import paper_table14

    committed = cost_views.load_committed(REPO / "results" / "cost")
    rests_on = [m for m in cost_views.measured(committed) if m.source.beside_paper
                and m.source.dataset in set(paper_table14()["dataset"])]
    assert ("(fabricated images, the paper's size)" in table14.scale) == any(m.source.fabricated for m in rests_on)
    assert all(r.scale for r in rows)


def test_without_results_every_row_says_not_yet_and_the_table_changes_with_them(tmp_path):
    empty = [r for r in claims.claims(tmp_path) if r.paper not in ("Theorem 4.1, Fig. 2(b)",
                                                                  "Theorem 4.2, Prop. 4.3, Cor. 4.4, Fig. 2")]
    assert all(r.scale.startswith("not yet") and r.agrees == "-" for r in empty)
    assert all(len(r.scale.split()) <= claims.CELL_WORDS for r in claims.claims(tmp_path))
    shutil.copytree(REPO / "results" / "cmnist-rounds", tmp_path / "cmnist-rounds")
    table7 = next(r for r in claims.claims(tmp_path) if r.paper == "Table 7")
    assert not table7.scale.startswith("not yet")


def test_the_table_is_markdown_with_a_link_per_chapter(tmp_path):
    text = claims.markdown(claims.claims(tmp_path))
    lines = text.strip().splitlines()
    assert len(lines) == 2 + len(claims.ROWS) and all(line.count("|") == 7 for line in lines)
    assert "{doc}`01 <../notebooks/01_erm_feature_learning>`" in text  # no section: the chapter's top
    # where the evidence has a section, the link lands on it (the build's link check proves the id exists)
    assert '<a href="../notebooks/04_feat_on_colored_mnist.html#table-2-at-full-scale">04</a>' in text
    assert set(claims.SECTIONS) <= {paper for paper, *_ in claims.ROWS}


def test_the_gpu_erm_nf_pieces_are_named_with_their_seeds_and_kept_apart(tmp_path):
    """The whole-network column comes from GPU sittings: the rows of Fig. 1(b) and Table 2 say
    how many seeds of it exist, and that under 3 they rank nothing."""
    assert "wait for a GPU" in claims._nf_pieces(tmp_path)
    assert claims._nf_dependence(tmp_path) is None
    shutil.copytree(REPO / "results" / claims.NF_PIECES, tmp_path / claims.NF_PIECES)
    runs = load_pieces(tmp_path / claims.NF_PIECES)["runs"].query("learner == 'erm-nf'")
    said = claims._nf_pieces(tmp_path)
    assert f"{runs['seed'].nunique()}\xa0seed" in said and "ColoredMNIST-025" in said
    assert ("too few to rank" in said) == (runs["seed"].nunique() < 3)
    fig1b = next(r for r in claims.claims(tmp_path) if r.paper == "Fig. 1(b)")
    assert said in fig1b.scale
    for extra in (tmp_path / claims.NF_PIECES).glob("pieces/*/*/*/seed*.*"):  # two seeds: apart, ranking nothing
        if int(extra.stem.removeprefix("seed")) > 2:
            extra.unlink()
    assert claims._nf_pieces(tmp_path) == "whole networks (ERM-NF): 2\xa0seeds on ColoredMNIST-025, too few to rank"


def test_fig1b_row_gives_the_whole_network_dependence_beside_the_frozen_form(tmp_path):
    """Fig. 1(b)'s own form (whole networks, ColoredMNIST-025) carries the dependence half of the
    row where its committed ERM-NF runs have at least the frozen study's seeds, with the measure
    chapter 03 states and the seeds' spread; a half under 3 seeds gives no verdict."""
    from featlib.experiments.cmnist_analysis import FIG1B_DEPENDENCE_POINTS, pretraining_findings
    from featlib.experiments.colored_mnist import select_best

    shutil.copytree(REPO / "results" / "cmnist-pretraining", tmp_path / "cmnist-pretraining")
    frozen_only = next(r for r in claims.claims(tmp_path) if r.paper == "Fig. 1(b)")
    assert "(frozen features, " in frozen_only.agrees and "wait for a GPU" in frozen_only.scale
    shutil.copytree(REPO / "results" / claims.NF_PIECES, tmp_path / claims.NF_PIECES)
    runs = load_pieces(tmp_path / claims.NF_PIECES)["runs"].query("learner == 'erm-nf' and dataset == 'cmnist025'")
    spread, noise, _, _ = pretraining_findings(runs, None)
    assert claims._nf_dependence(tmp_path) == (spread, noise, runs["seed"].nunique())
    row = next(r for r in claims.claims(tmp_path) if r.paper == "Fig. 1(b)")
    if runs["seed"].nunique() >= 3:
        assert f"moves accuracy {prose.points(spread / 100, sign=False)} (whole networks, " in row.agrees
        assert f"spread {prose.number(noise, 1)}" in row.agrees
        # the FeAT half from the frozen form, a verdict from 3 seeds on
        frame = load_study(tmp_path / "cmnist-pretraining", "frozen-pretraining")["frame"]
        erm = frame[frame["learner"] == "erm"].rename(columns={"erm_epochs": "pretrain_epochs"})
        feat = select_best(frame[frame["learner"] == "ifeat"].assign(pretrain_epochs=0))
        _, _, beats, n = pretraining_findings(erm, feat)
        feat_half = None if frame["seed"].nunique() < 3 else 2 * beats > n
        assert row.agrees.startswith(claims._verdict([spread >= FIG1B_DEPENDENCE_POINTS, feat_half]) + ": ")
        assert claims._verdict([True, True]) == "yes" and claims._verdict([True, None]) == "partly"
    for extra in (tmp_path / claims.NF_PIECES).glob("pieces/*/*/*/seed*.*"):  # keep the first seed only
        if extra.stem != f"seed{runs['seed'].min()}":
            extra.unlink()
    assert claims._nf_dependence(tmp_path)[2] == 1
    one = next(r for r in claims.claims(tmp_path) if r.paper == "Fig. 1(b)")
    # one whole-network seed: the dependence is read from whichever form has more seeds (the paper's
    # form on a tie), and a half under 3 seeds gives no verdict
    frozen_seeds = load_study(tmp_path / "cmnist-pretraining", "frozen-pretraining")["frame"]["seed"].nunique()
    form = "whole networks, 1\xa0seed" if frozen_seeds <= 1 else f"frozen features, {frozen_seeds}\xa0seeds"
    assert f"({form}" in one.agrees, one.agrees
    if frozen_seeds < 3:
        assert one.agrees.startswith("not yet: ")


def test_the_saliency_row_reads_the_committed_study_with_its_size_and_seeds(tmp_path):
    """Chapter 06's row: "not yet" without ``results/saliency``; with a committed study (here a
    fabricated one in the study folder's format), its size, seeds and the direction's count."""
    import json

    import pandas as pd

    from featlib.experiments.results import STUDIES_KIND
    from featlib.store.folders import ResultFolder

    row = next(r for r in claims.claims(tmp_path) if r.paper.startswith("Fig. 4"))
    assert row.scale.startswith("not yet") and row.agrees == "-"
    frame = pd.DataFrame([{"model": m, "seed": s, "n_train": 5000, "dataset": "cmnist025-patch",
                           "colour_share_gradcam": share, "colour_share_ig": share, "colour_flip_rate": share,
                           "ood_acc": 0.5} for s in (1, 2) for m, share in (("ERM 450 epochs", 0.6), ("FeAT 2 rounds", 0.2))])
    folder = ResultFolder(tmp_path / "saliency", kind=STUDIES_KIND)
    folder.add_csv("saliency-5k.csv", frame)
    folder.add_bytes("saliency-5k-provenance.json", json.dumps({"command": "python -m featlib.cli.gap_studies"}).encode())
    folder.commit({"studies": ["saliency-5k"]})
    row = next(r for r in claims.claims(tmp_path) if r.paper.startswith("Fig. 4"))
    assert row.scale == "reduced size (5,000 images), 2\xa0seeds, too few to rank"
    # reduced size: the direction after "not yet"; one ERM length: ERM's forgetting not measured, not said
    assert row.agrees == "not yet: FeAT leans on colour less than ERM in 6 of 6 (seed, measure) pairs"
    # Table 2's MLP at full size leads over the CNN on fewer images, and says that it has no GradCAM
    mlp = pd.DataFrame([{"model": m, "seed": s, "n_train": 50000, "dataset": "cmnist025", "colour_share_ig": share,
                         "colour_flip_rate": share, "ood_acc": 0.5}
                        for s in (1, 2, 3) for m, share in (("ERM 450 epochs", 0.6), ("FeAT 2 rounds", 0.7 if s == 3 else 0.2))])
    def commit(root, studies: dict) -> None:  # a whole study folder, as the CLI writes it
        folder = ResultFolder(root / "saliency", kind=STUDIES_KIND)
        for name, study in studies.items():
            folder.add_csv(f"{name}.csv", study)
            folder.add_bytes(f"{name}-provenance.json", json.dumps({"command": "python -m featlib.cli.gap_studies"}).encode())
        folder.commit({"studies": sorted(studies)})

    commit(tmp_path, {"saliency-5k": frame, "saliency-mlp": mlp})
    row = next(r for r in claims.claims(tmp_path) if r.paper.startswith("Fig. 4"))
    assert row.scale == ("full size (50,000 images, Table 2's MLP), 3\xa0seeds; the paper's CNN at 5,000 images, "
                         "2\xa0seeds (too few), maps not committed")
    assert row.agrees == "partly: FeAT leans on colour less than ERM in 4 of 6 (seed, measure) pairs, the CNN 6 of 6"
    # the CNN's maps committed beside it
    maps = pd.DataFrame([{"model": "ERM 450 epochs", "seed": 1, "image": 0, "row": 0, "col": 0, "gradcam": 0.5}])
    commit(tmp_path, {"saliency-5k": frame, "saliency-5k-maps": maps, "saliency-mlp": mlp})
    row = next(r for r in claims.claims(tmp_path) if r.paper.startswith("Fig. 4"))
    assert row.scale.endswith("2\xa0seeds (too few), maps drawn")
    # the MLP alone: no GradCAM at all
    alone = tmp_path / "alone"
    commit(alone, {"saliency-mlp": mlp})
    row = next(r for r in claims.claims(alone) if r.paper.startswith("Fig. 4"))
    assert row.scale == "full size (50,000 images, Table 2's MLP: no GradCAM maps yet), 3\xa0seeds"
    assert row.agrees == "partly: FeAT leans on colour less than ERM in 4 of 6 (seed, measure) pairs"
    # two ERM lengths: the paper's "forgetting" (ERM leaning on colour more with longer training, beyond
    # the seeds' spread) decides the verdict's second half, as chapter 06 says it (saliency_views.erm_trend)
    def longer(erm_150: float) -> pd.DataFrame:
        return pd.DataFrame([{"model": m, "seed": s, "n_train": 50000, "dataset": "cmnist025", "colour_share_ig": share,
                              "colour_flip_rate": share, "ood_acc": 0.5} for s in (1, 2, 3)
                             for m, share in (("ERM 150 epochs", erm_150), ("ERM 450 epochs", 0.6), ("FeAT 2 rounds", 0.2))])
    for erm_150, said in ((0.3, "yes: FeAT leans on colour less than ERM in 6 of 6 (seed, measure) pairs; ERM's forgetting shown"),
                          (0.9, ("partly: FeAT leans on colour less than ERM in 6 of 6 (seed, measure) pairs; ERM's "
                                 "forgetting not shown"))):
        root = tmp_path / f"longer{erm_150}"
        commit(root, {"saliency-mlp": longer(erm_150)})
        assert next(r for r in claims.claims(root) if r.paper.startswith("Fig. 4")).agrees == said


def test_the_saliency_row_says_no_more_than_chapter_06_on_the_committed_studies():
    """Issue 57: the ColoredMNIST row's cell claims no more than chapter 06: where its sentence says a
    committed study does not show ERM's forgetting, the row says so and its verdict is not "yes"."""
    from featbook import saliency_views
    from featlib.experiments.gap_studies import saliency_summary

    row = next(r for r in claims.claims(REPO / "results") if r.paper == "Fig. 4, Fig. 5")
    studies = claims._saliency_studies(REPO / "results")
    sentences = [saliency_views.erm_trend_sentence(saliency_summary(f["frame"])) for f in studies.values()]
    if studies and not any("as the paper's remark says" in s for s in sentences if s):
        assert "ERM's forgetting not shown" in row.agrees and not row.agrees.startswith("yes")


def test_the_wilds_saliency_row_says_not_yet_on_fabricated_data(tmp_path):
    """Figs. 6-12 and Table 15 are saliency maps of models trained on the WILDS datasets, which this
    project has only fabricated: the row says "not yet" and claims no agreement."""
    for results in (REPO / "results", tmp_path):
        row = next(r for r in claims.claims(results) if r.paper == "Figs. 6-12, Table 15")
        assert row.scale == "not yet: fabricated WILDS data only, a check of the pipeline" and row.agrees == "-"
    assert claims.SECTIONS["Figs. 6-12, Table 15"] and claims.SECTIONS["Fig. 4, Fig. 5"]


def test_the_table2_verdict_counts_the_datasets_where_feat_leads_most_objectives():
    import pandas as pd

    def frozen(*best):
        return pd.DataFrame([{"dataset": d, "feat_best": b, "objectives": 6} for d, b in zip(("cmnist025", "cmnist01"), best)])

    assert claims.table2_verdict(frozen(4, 6)) == "yes"
    assert claims.table2_verdict(frozen(0, 6)) == "partly"
    assert claims.table2_verdict(frozen(3, 2)) == "no"  # half is not most


def test_the_claims_table_reads_at_a_glance():
    """A row is read on a phone: every scale and agrees cell at most 25 words (the chapters give the
    rest), the agrees cell starting with its verdict."""
    for row in claims.claims(REPO / "results"):
        for name in ("paper", "says", "scale", "agrees"):
            assert len(getattr(row, name)) <= 600, (row.paper, name, len(getattr(row, name)))
        for name in ("scale", "agrees", "robust"):
            words = len(getattr(row, name).split())
            assert words <= claims.CELL_WORDS == 25, (row.paper, name, words, getattr(row, name))
        assert row.agrees == "-" or row.agrees.startswith(("yes", "partly", "no", "not yet")), row


def test_a_two_bit_rows_scale_says_full_or_reduced_against_the_chapters_defaults():
    """The theorem rows without their committed runs: "not yet", with the build's own run's size,
    "reduced" unless the run used every size of the parameters cell's defaults."""
    from featbook.chapters import NOTEBOOK_DIR
    from featbook.notebook_params import parameter_defaults

    stem = "01_erm_feature_learning"
    full = {n: parameter_defaults(NOTEBOOK_DIR / f"{stem}.ipynb")[n] for n in claims.TWO_BIT_SIZES[stem]}
    small = dict(full, n_per_env=1000)
    scale, agrees = claims._not_yet(stem, {"sizes": small, "scale_text": "a small run"}, "holds")
    assert scale == f"not yet: the build's own run only, reduced size (1,000 examples per environment, d = {full['d']})"
    assert agrees == "not yet (holds in the build's own run)" and "n_per_env" not in scale
    assert claims._not_yet(stem, {"sizes": full}, "holds")[0].startswith("not yet: the build's own run only, full size")
    assert claims._not_yet(stem, {"scale_text": "x"}, "holds")[0] == "not yet: the build's own run only, reduced size"


def test_the_two_bit_rows_read_the_committed_paper_size_runs_and_say_not_yet_without_them(tmp_path):
    """Issue 57: rows 01-02 said "yes" on the build's reduced-size run, which the table's own rule
    calls "not yet"; they read the committed paper-size runs (results/two-bit), and without them
    say "not yet", with what the reduced-size run shows."""
    results = Path(__file__).resolve().parents[1] / "results"
    for read in (claims._two_bit_erm, claims._two_bit_irm):
        scale, agrees = read(results, None)
        assert scale.startswith("the paper's size: 2,500 examples per environment, d = 100, 3") and "seeds" in scale
        assert agrees.startswith("yes"), agrees
        scale, agrees = read(tmp_path, None)  # nothing committed, nothing run
        assert scale.startswith("not yet") and agrees == "-"


def test_a_seed_that_breaks_chapter_02s_claim_makes_the_row_partly(tmp_path):
    from featlib.experiments.results import load_study

    irm = load_study(Path(__file__).resolve().parents[1] / "results" / "two-bit", "two-bit-irmv1")["frame"]
    assert all(claims._irmv1_checks(irm).values())
    broken = irm.copy()
    last = broken[(broken["run"] == "pretrained") & (broken["seed"] == 1)].index[-1]
    broken.loc[last, "spu"] = broken.loc[last, "inv"] + 1.0  # seed 1 ends on the spurious feature
    checks = claims._irmv1_checks(broken)
    assert checks == {"from scratch": True, "after ERM": False, "short pre-training": True}
