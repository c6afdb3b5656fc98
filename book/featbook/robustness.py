"""The claims table's robustness column: for each verdict, whether it holds under every protocol
choice the committed results try, or the choice it depends on.

A row's verdict (:mod:`featbook.claims`) is read under one protocol. Where the repository also
holds the same measurement under another choice (a size, a form, a head, an OOD length, an earlier
protocol, a device), the verdict is read again under it, by the same function, and the cell says
whether the answer moved:

* "unchanged by ..." -- every choice tried gives the same answer;
* "depends on ..." -- the choice that moves it, with the answer under each;
* "one protocol tried" -- nothing to compare yet (the column ranks nothing it has not seen);
* "-" -- no verdict to test.

Each cell is at most :data:`featbook.claims.CELL_WORDS` words and starts with one of those words
(tests/test_robustness.py). :func:`cells` gives the column in the order of
:data:`featbook.claims.ROWS`.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from featbook import prose

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


def _two_bit(read: Callable, results: Path, executed: Path | None, study: str) -> str:
    """Chapters 01-02: the same verdict at the paper's size (committed) and at the build's own
    reduced size (its records)."""
    from featbook import claims

    committed = read(results, None)[1] if claims._two_bit_committed(results, study) is not None else None
    own = read(Path("/nonexistent"), executed)[1] if executed is not None else None
    def said(cell):
        held = None if cell is None or cell == "-" else _held(cell)
        return None if held is None else ("holds" if held else "fails")
    readings = {"the paper's size": said(committed), "the build's reduced size": said(own)}
    return compare("the size", readings)


def _two_bit_erm(results: Path, executed: Path | None) -> str:
    from featbook import claims

    return _two_bit(claims._two_bit_erm, results, executed, "two-bit-erm")


def _two_bit_irm(results: Path, executed: Path | None) -> str:
    from featbook import claims

    return _two_bit(claims._two_bit_irm, results, executed, "two-bit-irmv1")


def _fig1b(results: Path, executed: Path | None) -> str:
    """Fig. 1(b)'s first half (OOD objectives depend on ERM's length) in both forms the repository
    holds: whole networks (ERM-NF, GPU) and frozen features (CPU), each at 3 seeds or more."""
    from featbook import claims
    from featlib.experiments.cmnist_analysis import FIG1B_DEPENDENCE_POINTS, pretraining_findings
    from featlib.experiments.results import load_study

    # the first half, the dependence on ERM's length, read as chapter 03 reads it
    readings: dict[str, str | None] = {"whole networks": None, "frozen features": None}
    nf = claims._nf_dependence(results)
    if nf is not None and nf[2] >= 3:
        readings["whole networks"] = "shown" if nf[0] >= FIG1B_DEPENDENCE_POINTS else "not shown"
    study = load_study(results / "cmnist-pretraining", "frozen-pretraining") if (
        results / "cmnist-pretraining").exists() else None
    if study is not None and study["frame"]["seed"].nunique() >= 3:
        frame = study["frame"]
        erm = frame[frame["learner"] == "erm"].rename(columns={"erm_epochs": "pretrain_epochs"})
        spread = pretraining_findings(erm, None)[0]
        readings["frozen features"] = "shown" if spread >= FIG1B_DEPENDENCE_POINTS else "not shown"
    return compare("the form", readings)


def _table7(results: Path, executed: Path | None) -> str:
    """Table 7's stopping round under the two ways of combining the stored heads for the OOD
    accuracy the termination check reads: the authors' sum and Algorithm 1's average."""
    from featlib.experiments.cmnist_analysis import stop_rounds
    from featlib.experiments.paper_values import FEAT_STOP_ROUND
    from featlib.experiments.results import load_rounds

    readings = {}
    for name, folder in (("the summed head", "cmnist-rounds"), ("the averaged head", "cmnist-rounds-average-head")):
        if not (results / folder).exists():
            readings[name] = None
            continue
        stops = stop_rounds(load_rounds(results / folder)["rounds"])
        ifeat = stops[stops["learner"] == "ifeat"]
        shares = [float((ifeat.loc[ifeat["dataset"] == d, "rounds_kept"] == paper).mean())
                  for d, paper in FEAT_STOP_ROUND.items() if (ifeat["dataset"] == d).any()]
        seeds = ifeat["seed"].nunique()
        readings[name] = (None if not shares or seeds < 3 else "yes" if min(shares) == 1 else
                          "no" if max(shares) <= 0.5 else "partly")
    return compare("the head", readings)


def _table2(results: Path, executed: Path | None) -> str:
    """Table 2's verdict (:func:`featbook.claims.table2_verdict`) under today's protocol, the
    earlier one (1,000 OOD steps, Bonsai's 150-epoch DRO round) and with ColoredMNIST-01's CLOvE
    cells on Appendix F.1's grid (the pieces the decided grid replaced); and how many rows FeAT
    leads along the OOD length in the one-seed length studies (:func:`length_leads`)."""
    import pandas as pd

    from featbook import claims
    from featlib.experiments.cmnist_analysis import frozen_columns
    from featlib.experiments.table2_pieces import load_pieces

    def runs(folder: str):
        pieces = load_pieces(results / folder) if (results / folder).exists() else None
        return None if pieces is None else pieces["runs"]

    today, earlier, f1 = runs("cmnist-table2"), runs(claims.EARLIER_TABLE2), runs("cmnist-table2-clove01-appendix-f1")
    readings: dict[str, str | None] = {"today": None, "earlier": None, "F.1's CLOvE grid": None}
    if today is not None:
        readings["today"] = claims.table2_verdict(frozen_columns(today))
        if f1 is not None:  # today's table with -01's CLOvE cells on the grid they had before
            replaced = (today["dataset"] == "cmnist01") & (today["objective"] == "clove")
            readings["F.1's CLOvE grid"] = claims.table2_verdict(frozen_columns(pd.concat([today[~replaced], f1])))
    if earlier is not None:
        readings["earlier"] = claims.table2_verdict(frozen_columns(earlier))
    lengths = length_leads(results)
    return compare("the protocol", readings) + (f"; {lengths} (one seed)" if lengths else "")


def length_leads(results: Path) -> str:
    """Per dataset of the one-seed ``ood-length`` studies, the range over scored lengths of the
    penalised objectives FeAT's features lead (Appendix F.1's grid, :mod:`featlib.experiments.margin_curve`),
    as a phrase ("FeAT leads 6/6 on -01, 0-2/6 on -025 at 500-3,000 steps"); "" without the studies."""
    import pandas as pd

    from featlib.experiments import margin_curve

    parts = []
    for dataset in ("01", "025"):
        path = results / "cmnist-gaps" / f"ood-length-{dataset}.csv"
        if not path.exists():
            continue
        frame = pd.read_csv(path, comment="#")
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


def _saliency(results: Path, executed: Path | None) -> str:
    """Fig. 4's direction (FeAT leans on colour less than ERM) in each form chapter 06 holds: Table
    2's MLP on the two-channel images and the paper's CNN on the colour-patch images."""
    from featbook import claims
    from featbook.saliency_views import study_form
    from featlib.experiments.gap_studies import saliency_direction

    readings: dict[str, str | None] = {}
    for found in claims._saliency_studies(results).values():
        frame = found["frame"]
        form = "the MLP" if study_form(frame) else "the CNN"
        if form in readings or frame["seed"].nunique() < 3:
            continue
        direction = saliency_direction(frame)
        held = int(direction["holds"].sum())
        readings[form] = "yes" if held == len(direction) else "no" if 2 * held <= len(direction) else "mostly"
    return compare("the model", readings) if readings else "-"


def _none(results: Path, executed: Path | None) -> str:
    return "-"


def _table14(results: Path, executed: Path | None) -> str:
    """Table 14's ordering (FeAT's time below Bonsai's) on each device the cost measurements ran on."""
    from featbook.cost_views import load_committed, measured

    folder = results / "cost"
    if not folder.exists():
        return "-"
    readings: dict[str, str | None] = {}
    for m in measured(load_committed(folder)):
        if "bonsai" not in m.time_x_erm or not m.source.beside_paper:
            continue
        below = m.time_x_erm["ifeat"] < m.time_x_erm["bonsai"]
        previous = readings.get(m.source.device)
        word = "below Bonsai" if below else "not below Bonsai"
        readings[m.source.device] = word if previous in (None, word) else "mixed"
    return compare("the device", readings) if readings else "-"


#: Per claims row (:data:`featbook.claims.ROWS`, by its paper item), the function of its cell.
READERS: dict[str, Callable[[Path, Path | None], str]] = {
    "Theorem 4.1, Fig. 2(b)": _two_bit_erm,
    "Theorem 4.2, Prop. 4.3, Cor. 4.4, Fig. 2": _two_bit_irm,
    "Fig. 1(b)": _fig1b,
    "Table 7": _table7,
    "Table 2": _table2,
    "Table 3": _none,
    "Fig. 4, Fig. 5": _saliency,
    "Figs. 6-12, Table 15": _none,
    "Table 14": _table14,
}


def cell(paper: str, results: Path, executed: Path | None) -> str:
    """The robustness cell of the claims row ``paper``."""
    return READERS.get(paper, _none)(Path(results), executed)
