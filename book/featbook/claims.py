"""The paper's claims at a glance: for each, the chapter, the scale at which the book shows it and
whether ours agrees, made from the committed results (and chapters 01-02's own runs) at build time.

The introduction includes the table (``book/claims.md``, written into the staged book by
:func:`featbook.build.stage`), so it changes when the committed results do. A claim reads:

* **evidence at the paper's scale** (``full``): committed results at the paper's data size, with
  their number of seeds;
* **a reduced form** (``reduced``): the same question at full data size in a form a CPU carries
  (frozen features instead of the whole network, Table 2's MLP instead of the paper's CNN),
  labelled as such;
* **not yet** (``none``): only a CPU test run, a run at reduced size or fabricated data exists,
  which ranks nothing; the row may give its direction after "not yet", never a verdict. For
  chapters 01-02 (the two-bit model, committed at the paper's size in ``results/two-bit``) without
  their committed runs, the row says what the build's own run at reduced size shows, inside "not
  yet". Fewer than 3 seeds give a direction, not a verdict.

A row is read at a glance, on a phone too: every scale and agrees cell is at most
:data:`CELL_WORDS` words. The scale cell gives the size and seeds; the agrees cell starts with its
verdict ("yes", "partly", "no" or "not yet"; "-" where there is no evidence) and gives the one or
two numbers that carry it, beside the paper's where it has one, computed from the numbers (never a
hard-coded verdict). The rest is in the chapter, where each row's link lands (:data:`SECTIONS`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from featbook import prose

#: The most words (``str.split``) in a scale, agrees or robustness cell.
CELL_WORDS = 25
#: The robustness column's header (:func:`robust_cell`; book/featbook.css names it on a phone).
ROBUST_HEADER = "Under every choice tried?"
#: Where the page that includes the table finds it (staged beside the introduction).
CLAIMS_FILE = "claims.md"
#: Table 2 under the earlier protocol (featlib 0.4), shown until today's has enough seeds
#: (:func:`featlib.experiments.cmnist_analysis.table2_pieces_choice`).
EARLIER_TABLE2 = "cmnist-table2-featlib04"


@dataclass(frozen=True)
class Claim:
    """One row: the paper's item, what it says, the chapter, the scale, the verdict and whether the
    verdict holds under every protocol choice tried (:func:`robust_cell`)."""

    paper: str
    says: str
    chapter: str
    scale: str
    agrees: str
    robust: str = "-"


def _records(executed_dir: Path | None, stem: str, needed: tuple[str, ...]) -> dict | None:
    """A chapter's recorded values, or None when it has not run (or recorded not all of ``needed``)."""
    if executed_dir is None or not (Path(executed_dir) / f"{stem}.ipynb").exists():
        return None
    from featbook.record import read_records

    records = read_records(Path(executed_dir) / f"{stem}.ipynb")
    return records if all(records.get(k) is not None for k in needed) else None


#: The sizes of the two-bit simulations that make a chapter's run full size: the parameters cell's
#: defaults (the paper gives the model, Appendix D.1, but not these sizes).
TWO_BIT_SIZES = {"01_erm_feature_learning": ("n_per_env", "d", "steps"),
                 "02_irmv1_and_pretraining": ("n_per_env", "d", "pretrain_steps", "irm_steps")}
#: How the prose names each size (a reader never sees a parameter's name: featbook.leaks).
_SIZE_WORDS = {"n_per_env": "{} examples per environment", "d": "d = {}"}


def _two_bit_full(stem: str, records: dict) -> bool:
    """Whether a two-bit chapter's run used every size of its parameters cell's defaults."""
    from featbook.chapters import NOTEBOOK_DIR
    from featbook.notebook_params import parameter_defaults

    defaults = parameter_defaults(NOTEBOOK_DIR / f"{stem}.ipynb")
    ran = records.get("sizes") or {}
    return bool(ran) and all(ran.get(n, 0) >= defaults[n] for n in TWO_BIT_SIZES[stem])


#: The folder of the committed paper-size two-bit runs (:mod:`featlib.experiments.two_bit_studies`).
TWO_BIT_RESULTS = "two-bit"


def _two_bit_committed(results: Path, study: str):
    """The committed paper-size study ``study`` (its frame), or None where it is not committed."""
    from featlib.experiments.results import load_study

    found = load_study(results / TWO_BIT_RESULTS, study)
    return None if found is None else found["frame"]


def _two_bit_paper_scale(frame) -> str:
    """The scale of the committed two-bit runs: their size (the studies' options) and seeds."""
    from featlib.experiments.two_bit_studies import study_options

    options = study_options("two-bit-erm")
    return (f"the paper's size: {prose.integer(options['n_per_env'])} examples per environment, "
            f"d = {options['d']}, {prose.count(frame['seed'].nunique(), 'seed')}")


def _not_yet(stem: str, records: dict | None, verdict: str) -> tuple[str, str]:
    """Without the committed runs: "not yet", with the build's own run's size (full or reduced against
    the parameters cell's defaults, :func:`_two_bit_full`) and what it shows."""
    if records is None:
        return "not yet (nothing committed, and the chapter has not been run)", "-"
    ran = records.get("sizes") or {}
    size = ", ".join(_SIZE_WORDS[n].format(prose.integer(ran[n])) for n in ("n_per_env", "d") if n in ran)
    # in a few words (the table's cells): the run's sizes are in the chapter (its scale_text)
    return (f"not yet: the build's own run only, {'full' if _two_bit_full(stem, records) else 'reduced'} size"
            + (f" ({size})" if size else ""), "not yet (" + verdict + " in the build's own run)")


def _two_bit_erm(results: Path, executed: Path | None) -> tuple[str, str]:
    from featlib.synthetic import increment_order

    erm = _two_bit_committed(results, "two-bit-erm")
    if erm is not None:
        runs = [rows.set_index("step") for _, rows in erm.query("activation == 'identity'").groupby("seed")]
        both = all(h.iloc[-1]["spu"] > h.iloc[-1]["inv"] > 0 for h in runs)
        never_behind = not any(increment_order(h)["invariant"] for h in runs)  # ties: equal in float32
        verdict = ("yes: in every seed both coefficients grow, the spurious one faster at every step where "
                   "the two differ" if both and never_behind
                   else "no: not every seed shows the spurious coefficient leading at every step")
        return _two_bit_paper_scale(erm), verdict
    r = _records(executed, "01_erm_feature_learning", ("erm_spu_final", "erm_inv_final", "erm_spurious_lead_share"))
    holds = r is not None and r["erm_spu_final"] > r["erm_inv_final"] > 0.3 and r["erm_spurious_lead_share"] >= 0.95
    return _not_yet("01_erm_feature_learning", r, "holds" if holds else "does not hold")


def _irmv1_checks(irm) -> dict[str, bool]:
    """Per claim of chapter 02, whether every seed of the committed runs shows it: from scratch no
    feature is learned; after ERM, IRMv1 ends with the invariant coefficient above the spurious one;
    after too short a pre-training, it ends below half of where it started."""
    def last(run):
        return irm[irm["run"] == run].groupby("seed").tail(1).set_index("seed")

    scratch = irm[irm["run"] == "scratch"]
    short = irm[irm["run"] == "short"]
    switch = short[short["phase"] == 1].groupby("seed").head(1).set_index("seed")
    end = last("short")
    pretrained = last("pretrained")
    return {"from scratch": bool(scratch[["inv", "spu"]].abs().max().max() < 0.01),
            "after ERM": bool((pretrained["inv"] > pretrained["spu"]).all()),
            "short pre-training": bool((end["inv"] < 0.5 * switch["inv"]).all())}


def _two_bit_irm(results: Path, executed: Path | None) -> tuple[str, str]:
    irm = _two_bit_committed(results, "two-bit-irmv1")
    if irm is not None:
        ok = _irmv1_checks(irm)
        verdict = ("yes, in every seed: from scratch no feature is learned; after ERM, IRMv1 re-weights towards "
                   "the invariant one, and not after too short a pre-training" if all(ok.values())
                   else "partly: " + (", ".join(n for n, v in ok.items() if v) or "none") + " holds in every seed")
        return _two_bit_paper_scale(irm), verdict
    r = _records(executed, "02_irmv1_and_pretraining", ("scratch_max_abs_coefficient", "pt_inv_final", "pt_spu_final",
                                                        "short_inv_final", "short_inv_switch"))
    holds = (r is not None and r["scratch_max_abs_coefficient"] < 0.01 and r["pt_inv_final"] > r["pt_spu_final"]
             and r["short_inv_final"] < 0.5 * r["short_inv_switch"])
    return _not_yet("02_irmv1_and_pretraining", r, "holds" if holds else "does not hold in full")


#: The whole-network (ERM-NF) pieces that GPU sittings add (chapters 03 and 04 read the same folder).
NF_PIECES = "cmnist-erm-nf-h200/fast-fp32"


def _nf_runs(results: Path):
    """The committed ERM-NF runs of GPU sittings (None without any)."""
    from featlib.experiments.table2_pieces import load_pieces

    pieces = load_pieces(results / NF_PIECES) if (results / NF_PIECES).exists() else None
    runs = None if pieces is None else pieces["runs"].query("learner == 'erm-nf'")
    return None if runs is None or runs.empty else runs


def _nf_dependence(results: Path) -> tuple[float, float, int] | None:
    """Fig. 1(b) in the paper's own form, whole networks, from the committed ERM-NF runs on
    ColoredMNIST-025 (the figure's dataset): (the spread, an objective's accuracy between its best
    and worst ERM length, on average, in points; the seeds' own spread; the seeds), by the same
    measure as the frozen form's (chapter 03 states it). None without such runs."""
    from featlib.experiments.cmnist_analysis import pretraining_findings

    runs = _nf_runs(results)
    runs = None if runs is None else runs[runs["dataset"] == "cmnist025"]
    if runs is None or runs.empty:
        return None
    spread, noise, _, _ = pretraining_findings(runs, None)
    return spread, noise, int(runs["seed"].nunique())


def _nf_pieces(results: Path) -> str:
    """How much of the ERM-NF column GPU sittings have committed, as a short phrase."""
    runs = _nf_runs(results)
    if runs is None:
        return "whole networks (ERM-NF) wait for a GPU"
    from featlib.experiments.labels import label

    seeds = runs["seed"].nunique()
    datasets = prose.listing(sorted({label("dataset", d) for d in runs["dataset"]}))
    return (f"whole networks (ERM-NF): {prose.count(seeds, 'seed')} on {datasets}"
            + (", too few to rank" if seeds < 3 else ""))


def _verdict(halves: list[bool | None]) -> str:
    """One word for a claim of several halves, each True (shown), False (not shown) or None (too
    few seeds to say): "yes" when every half is shown, "no" when none is and one is known not to
    be, "not yet" when none is known, else "partly"."""
    known = [h for h in halves if h is not None]
    if not known:
        return "not yet"
    if all(known) and len(known) == len(halves):
        return "yes"
    return "partly" if any(known) else "no"


def _fig1b(results: Path, executed: Path | None) -> tuple[str, str]:
    """Fig. 1(b) has two halves: OOD objectives depend on ERM's pre-training length (whole
    networks where 3 seeds of them are committed, else the frozen form), and FeAT's features remove
    the dependence (the frozen form: they beat the best length for most objectives). A half with
    fewer than 3 seeds gives its number without a verdict."""
    from featlib.experiments.cmnist_analysis import FIG1B_DEPENDENCE_POINTS, pretraining_findings
    from featlib.experiments.colored_mnist import select_best
    from featlib.experiments.results import load_study

    study = load_study(results / "cmnist-pretraining", "frozen-pretraining") if (
        results / "cmnist-pretraining").exists() else None
    nf = _nf_dependence(results)
    if study is None:
        scale = f"not yet at full size in frozen form; {_nf_pieces(results)}; chapter 03's own run is a CPU test run"
        if nf is None or nf[2] < 3:
            return scale, "-"
        spread, noise, seeds = nf
        shown = spread >= FIG1B_DEPENDENCE_POINTS
        return scale, (f"partly: ERM's length moves accuracy {prose.points(spread / 100, sign=False)} (whole networks, "
                       f"{prose.count(seeds, 'seed')}); FeAT's half not yet" if shown else
                       f"no: ERM's length moves accuracy only {prose.points(spread / 100, sign=False)} (whole "
                       f"networks, {prose.count(seeds, 'seed')})")
    frame = study["frame"]
    seeds = int(frame["seed"].nunique())
    # the numbers chapter 03 states under its frozen-feature figure, from the same function
    erm = frame[frame["learner"] == "erm"].rename(columns={"erm_epochs": "pretrain_epochs"})
    feat = select_best(frame[frame["learner"] == "ifeat"].assign(pretrain_epochs=0))
    spread, noise, beats, n_objectives = pretraining_findings(erm, feat)
    few = "" if seeds >= 3 else ", too few to rank"
    scale = f"full data size, frozen-feature form: {prose.count(seeds, 'seed')}{few}; {_nf_pieces(results)}"
    # the dependence from whole networks (the paper's form) where they have at least as many seeds
    form, dep_seeds, dep, dep_noise = "frozen features", seeds, spread, noise
    if nf is not None and nf[2] >= seeds:
        dep, dep_noise, dep_seeds = nf
        form = "whole networks"
    halves = [None if dep_seeds < 3 else dep >= FIG1B_DEPENDENCE_POINTS,
              None if seeds < 3 else 2 * beats > n_objectives]
    spread_said = f"; spread {prose.number(dep_noise, 1)}" if dep_seeds > 1 else ""
    verdict = (f"{_verdict(halves)}: ERM's length moves accuracy {prose.points(dep / 100, sign=False)} ({form}, "
               f"{prose.count(dep_seeds, 'seed')}{spread_said}); FeAT's features beat the best length in {beats} of "
               f"{n_objectives}" + ("" if seeds >= 3 else f" ({prose.count(seeds, 'seed')})"))
    return scale, verdict


def _table7(results: Path, executed: Path | None) -> tuple[str, str]:
    return _table7_at(results / "cmnist-rounds")


def _table7_at(folder: Path) -> tuple[str, str]:
    """Table 7's row from the committed rounds in ``folder`` (scale, agrees)."""
    from featlib.experiments.cmnist_analysis import stop_rounds
    from featlib.experiments.labels import label
    from featlib.experiments.paper_values import FEAT_STOP_ROUND
    from featlib.experiments.results import load_rounds

    loaded = load_rounds(folder) if folder.exists() else None
    if loaded is None:
        return "not yet", "-"
    stops = stop_rounds(loaded["rounds"])
    ifeat = stops[stops["learner"] == "ifeat"]
    parts, agree, seeds = [], [], ifeat["seed"].nunique()
    for dataset, paper in FEAT_STOP_ROUND.items():
        kept = ifeat.loc[ifeat["dataset"] == dataset, "rounds_kept"]
        if len(kept):
            same = int((kept == paper).sum())
            agree.append(same / len(kept))
            parts.append(f"{same} of {len(kept)} seeds keep {paper} rounds on "
                         f"{label('dataset', dataset)}")
    scale = f"full size (50,000 images), {prose.count(seeds, 'seed')} (the paper's 10)"
    if not parts:
        return scale, "-"
    # every seed as the paper: "yes"; most seeds: "partly"; under 3 seeds: no verdict
    word = ("not yet" if seeds < 3 else "yes" if min(agree) == 1 else "no" if max(agree) <= 0.5 else "partly")
    return scale, f"{word}: " + "; ".join(parts)


def _table2(results: Path, executed: Path | None) -> tuple[str, str]:
    """Table 2's frozen-feature columns: in how many penalised objectives FeAT's features are best per
    dataset, beside the paper's count. Chapter 04 gives the rest: the ties within a seed std
    (:func:`featbook.ch04_views.margin_sentence`), the distances from the paper's cells and the
    calibration behind them (:func:`featbook.ch04_views.frozen_columns_sentence`), and the selection
    rule (:func:`featbook.ch04_views.selection_sentence`)."""
    from featlib.experiments.cmnist_analysis import frozen_columns, table2_pieces_choice, whole_seeds
    from featlib.experiments.labels import label
    from featlib.experiments.table2_pieces import load_pieces

    def pieces_in(name):
        return load_pieces(results / name) if (results / name).exists() else None

    pieces, which, apart = table2_pieces_choice(pieces_in("cmnist-table2"), pieces_in(EARLIER_TABLE2))
    if pieces is None:
        return "not yet", "-"
    earlier = ", earlier protocol" if which == "earlier" else ""
    today = ""
    if apart is not None:
        today = f"; today's protocol: {prose.count(len(whole_seeds(apart['runs'])), 'whole seed')}, apart"
    frozen = frozen_columns(pieces["runs"])
    lo, hi = int(frozen["min_seeds"].min()), int(frozen["max_seeds"].max())
    seeds = f"{lo} seeds" if lo == hi else f"{lo}-{hi} seeds"
    scale = f"full size, frozen columns{earlier}: {seeds} a cell (the paper's 10){today}; {_nf_pieces(results)}"
    # the earlier protocol's baselines are weaker than the paper's (chapter 09), which widens FeAT's lead
    caveat = " (earlier protocol, weaker baselines)" if which == "earlier" else ""
    parts = [f"{int(r.feat_best)} of {int(r.objectives)} on {label('dataset', r.dataset)} (the paper: "
             f"{int(r.paper_feat_best)})" for r in frozen.itertuples()]
    # today's OOD length was chosen against the paper's table (chapter 09): a calibration, said
    calibrated = "; length calibrated on this table" if which != "earlier" else ""
    return scale, f"{table2_verdict(frozen)}{caveat}: FeAT best in " + ", ".join(parts) + calibrated


def table2_verdict(frozen) -> str:
    """Does ours agree with Table 2's claim (FeAT's features serve the OOD objectives best)? Per
    dataset of :func:`featlib.experiments.cmnist_analysis.frozen_columns`: it agrees where FeAT's features are best
    in more than half the penalised objectives, as in the paper's table. "yes" on every dataset, "no"
    on none, else "partly"."""
    agrees = [2 * int(r.feat_best) > int(r.objectives) for r in frozen.itertuples()]
    return "yes" if all(agrees) else "no" if not any(agrees) else "partly"


def _table3(results: Path, executed: Path | None) -> tuple[str, str]:
    folders = [p for p in results.glob("wilds*") if (p / "provenance.json").exists()]
    if not folders:
        return ("not yet: WILDS needs its data and a GPU; chapter 05's own run is a CPU test on fabricated data"), "-"
    return f"committed: {', '.join(sorted(p.name for p in folders))}", "see chapter 05"


def _saliency_studies(results: Path) -> dict:
    """Chapter 06's committed studies (``results/saliency``), the largest first."""
    from featlib.experiments.gap_studies import SALIENCY_STUDIES
    from featlib.experiments.results import load_study

    folder = results / "saliency"
    return {name: f for name in SALIENCY_STUDIES if folder.exists() and (f := load_study(folder, name))}


def _saliency(results: Path, executed: Path | None) -> tuple[str, str]:
    """Fig. 4 and Fig. 5 on ColoredMNIST, from chapter 06's committed studies: the largest one's size
    and seeds and, where it is Table 2's MLP (no GradCAM), the largest study in the paper's form (the
    CNN on the colour-patch images) beside it; in how many (seed, measure) pairs FeAT leans on colour
    less than ERM after its longest training, and whether a study shows ERM leaning on colour more
    with longer training (the paper's "forgetting", :func:`featbook.saliency_views.erm_trend`, as
    chapter 06 says it). A verdict only where the largest study is full size with 3 seeds."""
    from featbook.saliency_views import erm_trend, study_form
    from featlib.experiments.gap_studies import saliency_direction, saliency_summary
    from featlib.experiments.results import load_study

    found = _saliency_studies(results)
    if not found:
        return ("not yet: chapter 06's own run is a CPU test at reduced size, whose direction is not established"), "-"

    def size_and_seeds(frame) -> tuple[int, int, str]:
        n, seeds = int(frame["n_train"].iloc[0]), int(frame["seed"].nunique())
        return n, seeds, prose.count(seeds, "seed") + ("" if seeds >= 3 else ", too few to rank")

    def held(frame) -> tuple[int, int]:
        direction = saliency_direction(frame)
        return int(direction["holds"].sum()), len(direction)

    largest = next(iter(found.values()))
    frame = largest["frame"]
    n, seeds, seeds_said = size_and_seeds(frame)
    mlp = bool(study_form(frame))
    cnn = next(((other, f) for other, f in found.items() if not study_form(f["frame"])), None) if mlp else None
    shown = [largest] + ([cnn[1]] if cnn else [])
    scale = (f"{'full size' if n >= 50000 else 'reduced size'} ({prose.integer(n)} images"
             f"{', Table 2' + chr(39) + 's MLP' if mlp else ''}{': no GradCAM maps yet' if mlp and cnn is None else ''})"
             f", {seeds_said}")
    h, pairs = held(frame)
    agrees = f"FeAT leans on colour less than ERM in {h} of {pairs} (seed, measure) pairs"
    if cnn is not None:
        cnn_name, cnn_found = cnn
        cnn_n, cnn_count, _ = size_and_seeds(cnn_found["frame"])
        drawn = "maps drawn" if load_study(results / "saliency", f"{cnn_name}-maps") is not None else "maps not committed"
        scale += (f"; the paper's CNN at {prose.integer(cnn_n)} images, {prose.count(cnn_count, 'seed')}"
                  f"{' (too few)' if cnn_count < 3 else ''}, {drawn}")
        h2, pairs2 = held(cnn_found["frame"])
        agrees += f", the CNN {h2} of {pairs2}"
    trends = [t for f in shown if (t := erm_trend(saliency_summary(f["frame"]))[0])]  # studies with two ERM lengths
    towards = sum(t == "towards" for t in trends)
    if trends:
        agrees += ("; ERM's forgetting not shown" if not towards else "; ERM's forgetting shown"
                   if towards == len(trends) else f"; ERM's forgetting in {towards} of {len(trends)} studies")
    if n < 50000 or seeds < 3:  # reduced size or too few seeds: the direction, no verdict
        return scale, "not yet: " + agrees
    # both halves, FeAT's lesser reliance on colour in every pair and ERM's forgetting in every study
    # (unmeasured without two ERM lengths): "yes"; neither: "no"
    word = ("partly" if 0 < 2 * h - pairs < pairs else
            _verdict([h == pairs, towards == len(trends) if trends else None]))
    return scale, f"{word}: {agrees}"


def _saliency_wilds(results: Path, executed: Path | None) -> tuple[str, str]:
    """Figs. 6-12 and Table 15, saliency maps on the WILDS datasets: chapter 06 draws them from
    chapter 05's models, which this project has trained on fabricated WILDS data only; "not yet"
    unless a committed saliency study is on a WILDS dataset."""
    from featlib.data import WILDS_DATASETS

    names = set(WILDS_DATASETS.names())
    real = sorted({d for f in _saliency_studies(results).values() if "dataset" in f["frame"]
                   for d in f["frame"]["dataset"].unique() if d in names})
    if not real:
        return "not yet: fabricated WILDS data only, a check of the pipeline", "-"
    from featlib.experiments.labels import label

    return f"committed on {prose.listing(label('dataset', d) for d in real)}", "see chapter 06"


def _table14(results: Path, executed: Path | None) -> tuple[str, str]:
    """Table 14's quantity, the whole training time as a multiple of ERM's: ours by the paper's
    schedule at the committed step times, only where they measure the paper's sizes, resting on the
    paper's own dataset where one is measured (fabricated images of its size count: a step's cost
    does not depend on the pixels) with ColoredMNIST's unequal schedule beside it; in a few words
    (:func:`featbook.cost_views.table14_cells`: chapter 07's "What we see" says it in full)."""
    from featbook.cost_views import load_committed, table14_cells
    from featlib.cost import paper_table14

    folder = results / "cost"
    return table14_cells(paper_table14(), load_committed(folder) if folder.exists() else {})


#: The rows: (the paper's item, what it says, the chapter, the function that reads the evidence).
ROWS: list[tuple[str, str, str, Callable]] = [
    ("Theorem 4.1, Fig. 2(b)", "ERM learns both features, the spurious one faster when it correlates more",
     "../notebooks/01_erm_feature_learning", _two_bit_erm),
    ("Theorem 4.2, Prop. 4.3, Cor. 4.4, Fig. 2", "IRMv1 learns no new feature; it re-weights what ERM learned",
     "../notebooks/02_irmv1_and_pretraining", _two_bit_irm),
    ("Fig. 1(b)", "OOD objectives depend on ERM pre-training; FeAT's features remove the dependence",
     "../notebooks/03_ood_objectives_need_rich_features", _fig1b),
    ("Table 7", "FeAT's termination check keeps 2 rounds on -025 and 3 on -01 (the next round is tried and rolled back)",
     "../notebooks/04_feat_on_colored_mnist", _table7),
    ("Table 2", "OOD objectives do best on FeAT's features", "../notebooks/04_feat_on_colored_mnist", _table2),
    ("Table 3", "the same on six WILDS datasets, and DFR", "../notebooks/05_feat_on_wilds", _table3),
    ("Fig. 4, Fig. 5", ("On ColoredMNIST ERM looks at the colour, even forgetting features with longer training; "
                        "FeAT at the digit"), "../notebooks/06_which_features_are_learned", _saliency),
    ("Figs. 6-12, Table 15", ("On the WILDS datasets FeAT's saliency maps show more meaningful and diverse features "
                              "than ERM's and Bonsai's"), "../notebooks/06_which_features_are_learned", _saliency_wilds),
    ("Table 14", "FeAT trains in little more time than ERM, and in less than Bonsai",
     "../notebooks/07_cost_of_feature_learning", _table14),
]


def claims(results_dir: str | Path, executed_dir: str | Path | None = None) -> list[Claim]:
    """Every row of :data:`ROWS` from the committed results under ``results_dir`` and the executed
    chapters in ``executed_dir`` (chapters 01-02's records)."""
    results = Path(results_dir)
    executed = Path(executed_dir) if executed_dir is not None else None
    out = []
    for paper, says, chapter, read in ROWS:
        scale, agrees = read(results, executed)
        robust = robust_cell(paper, results, executed) if agrees != "-" else "-"
        out.append(Claim(paper, says, chapter, scale, agrees, robust))
    return out


#: Where in its chapter each row's evidence is (the section's HTML id): the link lands there, not
#: at the chapter's top, which on a phone is screens above it. Rows not named link to the top.
SECTIONS = {"Fig. 1(b)": "full-scale-evidence", "Table 7": "what-stops-feat-table-7-at-full-data-size",
            "Table 2": "table-2-at-full-scale", "Table 3": "full-scale-evidence",
            "Fig. 4, Fig. 5": "full-scale-evidence", "Figs. 6-12, Table 15": "full-scale-evidence",
            "Table 14": "full-scale-evidence-the-committed-measurements"}


def markdown(rows: list[Claim]) -> str:
    """The table as MyST markdown: a chapter link as a ``{doc}`` role, or, where :data:`SECTIONS`
    names the section holding the row's evidence, as a link to that section of the built page
    (the built book's link check, tests/test_linkcheck.py, fails on a section id that is not there)."""
    def cell(text: str) -> str:
        return str(text).replace("|", "/").replace("\n", " ")

    lines = [f"| The paper | What it says | Chapter | Shown here at | Does ours agree? | {ROBUST_HEADER} |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in rows:
        number = Path(c.chapter).name[:2]
        link = (f'<a href="{c.chapter}.html#{SECTIONS[c.paper]}">{number}</a>' if c.paper in SECTIONS
                else f"{{doc}}`{number} <{c.chapter}>`")
        lines.append(f"| {cell(c.paper)} | {cell(c.says)} | {link} | {cell(c.scale)} | {cell(c.agrees)} "
                     f"| {cell(c.robust)} |")
    return "\n".join(lines) + "\n"


def write(stage_dir: Path, results_dir: Path, executed_dir: Path | None) -> Path:
    """``book/claims.md`` in the staged book, from :func:`claims`."""
    path = Path(stage_dir) / "book" / CLAIMS_FILE
    from featlib.store.atomic import atomic_write_text

    return atomic_write_text(path, "<!-- made by featbook.claims from the committed results at build time -->\n"
                             + markdown(claims(results_dir, executed_dir)))


# -- the robustness column ---------------------------------------------------------------------
# The claims table's robustness column: for each verdict, whether it holds under every protocol
# choice the committed results try, or the choice it depends on.
#
# A row's verdict (the functions of :data:`ROWS`) is read under one protocol. Where the repository also
# holds the same measurement under another choice (a size, a form, a head, an OOD length, an earlier
# protocol, a device), the verdict is read again under it, by the same function, and the cell says
# whether the answer moved:
#
# * "unchanged by ..." -- every choice tried gives the same answer;
# * "depends on ..." -- the choice that moves it, with the answer under each;
# * "one protocol tried" -- nothing to compare yet (the column ranks nothing it has not seen);
# * "-" -- no verdict to test.
#
# Each cell is at most :data:`CELL_WORDS` words and starts with one of those words
# (tests/test_robustness.py). :func:`robust_cell` gives a row's cell; :func:`claims` fills it.

#: Where no committed result exists under a second choice.
ONE_PROTOCOL = "one protocol tried"


def _word(agrees: str) -> str:
    """A claims cell's verdict word: "yes", "partly", "no", "not yet" or "-"."""
    for word in ("not yet", "yes", "partly", "no", "-"):
        if agrees.startswith(word):
            return word
    return agrees.split(":")[0]


def _held(agrees: str) -> bool | None:
    """Whether a claims cell says the claim holds: "yes" True, "no" False, "partly" None; a
    "not yet" cell of a build's own run says "holds"/"does not hold" in brackets."""
    word = _word(agrees)
    if word == "not yet":
        return True if "(holds" in agrees else False if "does not hold" in agrees else None
    return {"yes": True, "no": False}.get(word)


def compare(choice: str, readings: dict[str, str | None]) -> str:
    """The cell for one protocol ``choice`` (e.g. "the size") read under each of its values:
    ``readings`` maps each value tried to the row's verdict word there ("yes", "no", "partly";
    None where that value has no committed result). One value: :data:`ONE_PROTOCOL`."""
    tried = {value: word for value, word in readings.items() if word is not None}
    if len(tried) < 2:
        return f"{ONE_PROTOCOL} ({next(iter(tried))})" if tried else "-"
    if len(set(tried.values())) == 1:
        return f"unchanged by {choice}: {next(iter(tried.values()))} with {prose.listing(tried)}"
    return f"depends on {choice}: " + "; ".join(f"{word} ({value})" for value, word in tried.items())


def _robust_two_bit(read: Callable, results: Path, executed: Path | None, study: str) -> str:
    """Chapters 01-02: the same verdict at the paper's size (committed) and at the build's own
    reduced size (its records)."""
    committed = read(results, None)[1] if _two_bit_committed(results, study) is not None else None
    own = read(Path("/nonexistent"), executed)[1] if executed is not None else None
    def said(cell):
        held = None if cell is None or cell == "-" else _held(cell)
        return None if held is None else ("holds" if held else "fails")
    readings = {"the paper's size": said(committed), "the build's reduced size": said(own)}
    return compare("the size", readings)


def _robust_two_bit_erm(results: Path, executed: Path | None) -> str:
    return _robust_two_bit(_two_bit_erm, results, executed, "two-bit-erm")


def _robust_two_bit_irm(results: Path, executed: Path | None) -> str:
    return _robust_two_bit(_two_bit_irm, results, executed, "two-bit-irmv1")


def _robust_fig1b(results: Path, executed: Path | None) -> str:
    """Fig. 1(b)'s first half (OOD objectives depend on ERM's length) in both forms the repository
    holds: whole networks (ERM-NF, GPU) and frozen features (CPU), each at 3 seeds or more."""
    from featlib.experiments.cmnist_analysis import FIG1B_DEPENDENCE_POINTS, pretraining_findings
    from featlib.experiments.results import load_study

    # the first half, the dependence on ERM's length, read as chapter 03 reads it
    readings: dict[str, str | None] = {"whole networks": None, "frozen features": None}
    nf = _nf_dependence(results)
    if nf is not None and nf[2] >= 3:
        readings["whole networks"] = "shown" if nf[0] >= FIG1B_DEPENDENCE_POINTS else "not shown"
    study = load_study(results / "cmnist-pretraining", "frozen-pretraining") if (
        results / "cmnist-pretraining").exists() else None
    if study is not None and study["frame"]["seed"].nunique() >= 3:
        frame = study["frame"]
        erm = frame[frame["learner"] == "erm"].rename(columns={"erm_epochs": "pretrain_epochs"})
        spread = pretraining_findings(erm, None)[0]
        readings["frozen features"] = "shown" if spread >= FIG1B_DEPENDENCE_POINTS else "not shown"
    cell = compare("the form", readings)
    # only the first half has two forms: FeAT's features exist like for like in the frozen one alone
    return cell if cell == "-" else cell + FIG1B_ROBUST_SCOPE


#: What the Fig. 1(b) robustness cell reads: the row's verdict has two halves, and only one has two forms.
FIG1B_ROBUST_SCOPE = " (ERM-length half; FeAT's half: frozen form only)"


def _robust_table7(results: Path, executed: Path | None) -> str:
    """Table 7's verdict (:func:`_table7_at`) under the two ways of combining the stored heads for
    the OOD accuracy the termination check reads: the authors' sum and Algorithm 1's average."""
    readings = {}
    for name, folder in (("the summed head", "cmnist-rounds"), ("the averaged head", "cmnist-rounds-average-head")):
        word = _word(_table7_at(results / folder)[1])
        readings[name] = word if word in ("yes", "partly", "no") else None
    return compare("the head", readings)


def _robust_table2(results: Path, executed: Path | None) -> str:
    """Table 2's verdict (:func:`featbook.table2_verdict`) under today's protocol, the
    earlier one (1,000 OOD steps, Bonsai's 150-epoch DRO round) and with ColoredMNIST-01's CLOvE
    cells on Appendix F.1's grid (the pieces the decided grid replaced); and how many rows FeAT
    leads along the OOD length in the one-seed length studies (:func:`length_leads`)."""
    import pandas as pd

    from featlib.experiments.cmnist_analysis import frozen_columns
    from featlib.experiments.table2_pieces import load_pieces

    def runs(folder: str):
        pieces = load_pieces(results / folder) if (results / folder).exists() else None
        return None if pieces is None else pieces["runs"]

    today, earlier, f1 = runs("cmnist-table2"), runs(EARLIER_TABLE2), runs("cmnist-table2-clove01-appendix-f1")
    readings: dict[str, str | None] = {"today": None, "earlier": None, "F.1's CLOvE grid": None}
    if today is not None:
        readings["today"] = table2_verdict(frozen_columns(today))
        if f1 is not None:  # today's table with -01's CLOvE cells on the grid they had before
            replaced = (today["dataset"] == "cmnist01") & (today["objective"] == "clove")
            readings["F.1's CLOvE grid"] = table2_verdict(frozen_columns(pd.concat([today[~replaced], f1])))
    if earlier is not None:
        readings["earlier"] = table2_verdict(frozen_columns(earlier))
    readings["fixed before looking"] = fixed_protocol_verdict(results)
    lengths = length_leads(results)
    return compare("the protocol", readings) + (f"; {lengths} (one seed)" if lengths else "")


def fixed_protocol_verdict(results: Path) -> str | None:
    """Table 2's verdict word (:func:`table2_verdict`'s rule: FeAT's features best in more than half
    the penalised objectives of a dataset) under the protocol fixed before looking, read from the
    committed margin curve (``results/cmnist-margin``) at each dataset's converged length; None
    until both datasets' curves have the seeds a verdict needs."""
    import pandas as pd

    from featbook.margin_views import STUDY_OF, read_studies
    from featlib.experiments.results import load_study

    folder = results / "cmnist-margin"
    if not folder.exists():
        return None
    found = read_studies({d: load_study(folder, name) for d, name in STUDY_OF.items()})
    if not all(found.whole(d) for d in STUDY_OF):
        return None
    read = {d: found.curves[d].at(found.curves[d].length) for d in STUDY_OF}
    return table2_verdict(pd.DataFrame([{"feat_best": int((m["margin"] > 0).sum()), "objectives": len(m)}
                                        for m in read.values()]))


def length_leads(results: Path) -> str:
    """:func:`length_leads_in` the committed one-seed ``ood-length`` studies (``results/cmnist-gaps``,
    read through the store's checking loader); "" without them."""
    from featlib.experiments.results import load_study

    frames = {}
    for dataset in ("01", "025"):
        found = load_study(results / "cmnist-gaps", f"ood-length-{dataset}") if (results / "cmnist-gaps").exists() else None
        if found is not None:
            frames[dataset] = found["frame"]
    return length_leads_in(frames)


def length_leads_in(frames: dict) -> str:
    """Per dataset (``"01"``, ``"025"`` -> an ``ood-length`` study's rows), the range over scored
    lengths of the penalised objectives FeAT's features lead (Appendix F.1's grid,
    :mod:`featlib.experiments.margin_curve`), as a phrase ("FeAT leads 6/6 on -01, 0-2/6 on -025 at
    500-3,000 steps"); "" without rows."""
    from featlib.experiments import margin_curve

    parts = []
    for dataset, frame in frames.items():
        counts = margin_curve.verdicts(margin_curve.margins(margin_curve.cells(frame, rule="f1")))
        if counts.empty:
            continue
        low, high = int(counts["lead"].min()), int(counts["lead"].max())
        total = int(counts[["lead", "tie", "loss"]].sum(axis=1).max())
        steps = counts["step"]
        lead = f"{low}" if low == high else f"{low}-{high}"
        parts.append((f"-{dataset}", f"{lead}/{total}", f"{prose.integer(int(steps.min()))}-{prose.integer(int(steps.max()))}"))
    if not parts:
        return ""
    spans = {span for _, _, span in parts}
    leads = ", ".join(f"{lead} on {name}" for name, lead, _ in parts)
    return (f"FeAT leads {leads} at {next(iter(spans))} steps" if len(spans) == 1 else
            "FeAT leads " + ", ".join(f"{lead} on {name} at {span} steps" for name, lead, span in parts))


def _robust_saliency(results: Path, executed: Path | None) -> str:
    """Fig. 4's direction (FeAT leans on colour less than ERM) in each form chapter 06 holds: Table
    2's MLP on the two-channel images and the paper's CNN on the colour-patch images."""
    from featbook.saliency_views import study_form
    from featlib.experiments.gap_studies import saliency_direction

    readings: dict[str, str | None] = {}
    for found in _saliency_studies(results).values():
        frame = found["frame"]
        form = "the MLP" if study_form(frame) else "the CNN"
        if form in readings or frame["seed"].nunique() < 3:
            continue
        direction = saliency_direction(frame)
        held = int(direction["holds"].sum())
        readings[form] = "yes" if held == len(direction) else "no" if 2 * held <= len(direction) else "mostly"
    return compare("the model", readings) if readings else "-"


def _robust_none(results: Path, executed: Path | None) -> str:
    return "-"


def _robust_table14(results: Path, executed: Path | None) -> str:
    """Table 14's verdict under each schedule the cost measurements price (:mod:`featbook.cost_views`):
    a paper dataset's own (like for like) and ColoredMNIST's, where iFeAT's schedule has 3x ERM's
    steps. Per measurement, as chapter 07 judges one: "yes" when iFeAT's whole-time ratio is within
    the paper's FeAT ratio (on the same dataset, else the paper's largest) and below Bonsai's,
    "partly" when below Bonsai's only, else "no"; a schedule measured on several devices gives their
    common word, or "partly"."""
    from featbook.cost_views import load_committed, measured, paper_ratios, table14_verdicts
    from featlib.cost import paper_table14
    from featlib.experiments.labels import label

    folder = results / "cost"
    if not folder.exists():
        return "-"
    feat = paper_ratios(paper_table14(), "feat")
    by_schedule: dict[str, list] = {}
    for m in measured(load_committed(folder)):
        if m.source.beside_paper and "ifeat" in m.time_x_erm:
            by_schedule.setdefault(f"{label('dataset', m.source.dataset)}'s schedule", []).append(m)
    # chapter 07's rule per measurement, against the paper's FeAT ratio on the same dataset, else its largest
    readings = {key: table14_verdicts(ms, lambda m: feat.get(m.source.dataset, max(feat.values())))[0]
                for key, ms in by_schedule.items()}
    return compare("the schedule", readings) if readings else "-"


#: Per claims row (:data:`ROWS`, by its paper item), the function of its cell.
ROBUSTNESS: dict[str, Callable[[Path, Path | None], str]] = {
    "Theorem 4.1, Fig. 2(b)": _robust_two_bit_erm,
    "Theorem 4.2, Prop. 4.3, Cor. 4.4, Fig. 2": _robust_two_bit_irm,
    "Fig. 1(b)": _robust_fig1b,
    "Table 7": _robust_table7,
    "Table 2": _robust_table2,
    "Table 3": _robust_none,
    "Fig. 4, Fig. 5": _robust_saliency,
    "Figs. 6-12, Table 15": _robust_none,
    "Table 14": _robust_table14,
}


def robust_cell(paper: str, results: Path, executed: Path | None) -> str:
    """The robustness cell of the claims row ``paper``."""
    return ROBUSTNESS.get(paper, _robust_none)(Path(results), executed)
