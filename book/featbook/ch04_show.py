"""Chapter 04's committed evidence as the page shows it, one call of a visible cell each:
Table 7 and the stop seed by seed, Table 2 at full size (FeAT's column first), the verdict beside
the paper's, FeAT's margin, the table under training-domain validation, the far cells and the
whole-network column; how each result was made is folded under it
(:func:`featbook.cmnist_shared.collapsed_provenance`). The tables and sentences themselves are
:mod:`featbook.ch04_views`'.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from featbook.ch04_views import (
    describe_early_stop,
    distance_table,
    far_cells_section,
    frozen_columns_sentence,
    margin_sentence,
    margin_table,
    nf_column_sentence,
    nf_made,
    progress_sentence,
    selection_sentence,
    so_far_sentence,
    stop_margin_table,
    table2_from_pieces,
)
from featbook.cmnist_shared import table2 as table2_tables
from featbook.cmnist_shared import table2_frame
from featbook.evidence import show_all as _show
from featlib.experiments.cmnist_analysis import FROZEN_LEARNERS, TABLE2_MIN_SEEDS
from featlib.experiments.labels import DATASET_LABELS, LEARNER_LABELS


def table7(committed_rounds: str | None):
    """Table 7 at full size from the committed rounds (``committed_rounds``: their folder): per
    dataset, how many rounds each seed kept, the paper's stop, Table 7 beside the paper's and one
    collapsed line on how the rounds were made. Returns the rounds (``None`` when none are
    committed, which is said instead)."""
    from featbook import committed, evidence
    from featbook.cmnist_shared import (
        collapsed_provenance,
        describe_stops,
        round_table,
        round_table_frame,
    )
    from featlib.experiments.cmnist_analysis import stop_rounds
    from featlib.experiments.paper_values import FEAT_STOP_ROUND
    from featlib.experiments.results import load_rounds

    located = committed.locate(committed_rounds)
    found = committed.load(located, load_rounds)
    if found is None:
        _show(evidence.missing(located, "feature-learning record (Table 7)",
                               "python -m featlib.cli.run_rounds --out results/cmnist-rounds"))
        return None
    rounds = found["rounds"]
    stops = stop_rounds(rounds)
    for d in [d for d in DATASET_LABELS if d in set(rounds["dataset"])]:
        frame = round_table_frame(rounds[rounds["learner"] == "ifeat"], d)
        _show(f"**{DATASET_LABELS[d]}, FeAT (iFeAT)**: {describe_stops(stops, d, 'ifeat')}. The paper reports "
              f"that the termination check stopped at round {FEAT_STOP_ROUND[d]}.",
              round_table(frame, f"Table 7 at full size (50,000 training images), {DATASET_LABELS[d]}: "
                                 f"{LEARNER_LABELS['ifeat']} per round, ours beside the paper's"))
    _show(collapsed_provenance(found["provenance"], size="50,000 training images", what="The rounds"))
    return rounds


def stops(rounds: pd.DataFrame | None) -> None:
    """The stop seed by seed: per dataset, what stopping one round earlier or later costs
    (:func:`describe_early_stop`) and each seed's score at its last kept and its discarded round."""
    from featlib.experiments.cmnist_analysis import early_stop_consequence, stop_margins

    for d in [] if rounds is None else [d for d in DATASET_LABELS if d in set(rounds["dataset"])]:
        _show(f"**{DATASET_LABELS[d]}.** " + describe_early_stop(early_stop_consequence(rounds, d, "ifeat")),
              stop_margin_table(stop_margins(rounds, d, "ifeat"),
                                f"Full size, {DATASET_LABELS[d]}: where each seed of {LEARNER_LABELS['ifeat']} "
                                "stopped"))


def table2_evidence(committed_results, committed_pieces, committed_pieces_earlier, committed_nf_pieces):
    """What Table 2 is read from: today's committed runs, or the earlier protocol's while today's
    have fewer than :data:`TABLE2_MIN_SEEDS` seeds in a cell (today's then kept apart, ``so_far``),
    with the whole-network (ERM-NF) column joined where each of a dataset's cells holds that many.
    A namespace: ``pieces``, ``which`` ("today" / "earlier"), ``so_far``, ``nf`` (the ERM-NF runs'
    folder, loaded), ``located`` (the folders, for the notes), ``full`` (a whole committed Table 2)."""
    from types import SimpleNamespace

    from featbook import committed
    from featlib.experiments.cmnist_analysis import (
        frozen_cell_seeds,
        table2_pieces_choice,
        with_nf_column,
    )
    from featlib.experiments.results import load_results
    from featlib.experiments.table2_pieces import load_pieces

    located = SimpleNamespace(results=committed.locate(committed_results), pieces=committed.locate(committed_pieces),
                              nf=committed.locate(committed_nf_pieces))
    full = committed.load(located.results, load_results)
    today = committed.load(located.pieces, load_pieces)
    earlier = None
    if committed_pieces_earlier and (today is None or frozen_cell_seeds(today["runs"]) < TABLE2_MIN_SEEDS):
        earlier = committed.load(committed.locate(committed_pieces_earlier), load_pieces)
    pieces, which, so_far = table2_pieces_choice(today, earlier)
    nf = committed.load(located.nf, load_pieces)
    shown = None if pieces is None else with_nf_column(pieces, nf if which == "today" else None)
    return SimpleNamespace(pieces=pieces, shown=shown, which=which, so_far=so_far, nf=nf, located=located, full=full,
                           runs=None if pieces is None or pieces["runs"].empty else pieces["runs"])


EARLIER_NOTE = ("Today's protocol does not yet have {n} seeds in every cell, so this Table 2 is the earlier "
                "protocol's (featlib 0.4: Bonsai's DRO round 150 epochs on ColoredMNIST-025, 1,000 OOD steps, no "
                "validation accuracy recorded); today's runs so far are shown after the selection rule.")


def table2(t2) -> None:
    """Table 2 at full size beside the paper's (:func:`table2_evidence`), FeAT's column first so that a
    phone shows it beside the objective, and one collapsed line on how its runs were made."""
    from featbook import evidence
    from featbook.cmnist_shared import collapsed_provenance

    if t2.which == "earlier":
        _show(EARLIER_NOTE.format(n=TABLE2_MIN_SEEDS))
    if t2.pieces is None:
        _show(evidence.missing([t2.located.results, t2.located.pieces], "Table 2",
                               "python -m featlib.cli.run_cmnist --out results/cmnist-table2 --budget-minutes 30"))
        return
    intro, shown = table2_from_pieces(t2.shown, ("erm-nf", "erm", "bonsai", "ifeat"), first=("ifeat",))
    _show(shown, collapsed_provenance(intro.replace("*", "")))


def margins(runs: pd.DataFrame | None) -> pd.DataFrame | None:
    """FeAT's margin per row of Table 2 and the sentence on it; returns the margins."""
    from featlib.experiments.cmnist_analysis import feat_margins

    if runs is None:
        return None
    margins = feat_margins(runs)
    _show(margin_table(margins), margin_sentence(margins))
    return margins


def validated(t2, learners: Sequence[str]) -> pd.DataFrame | None:
    """Table 2 with every cell chosen on the validation environments (training-domain validation)
    and what the test-domain rule carries per column; returns the runs it is made from (``None``
    where no committed runs record validation accuracy). While Table 2 is the earlier protocol's,
    today's runs so far follow, with their distance from the paper's cells."""
    from featlib.experiments.cmnist_analysis import selection_agreement, selection_gaps

    validated = next((p["runs"] for p in (t2.pieces, t2.so_far)
                      if p is not None and not selection_gaps(p["runs"]).empty), None)
    if t2.pieces is not None and validated is None:
        _show("These runs record no validation accuracy (made before featlib 0.5), so only the test-domain table "
              "exists for them.")
    elif validated is not None:
        if validated is not t2.pieces["runs"]:
            _show("The earlier protocol's runs record no validation accuracy, so this table is made from today's "
                  "protocol's runs so far (each cell says its number of seeds).")
        held = [learner for learner in learners if learner in set(validated["learner"])]
        frame = table2_frame(validated, with_paper=False, learners=held, score="val_acc", with_n=True)
        _show(table2_tables(frame, "Table 2 at full size under training-domain validation",
                            note="Each cell: the configuration with the best mean validation accuracy, its mean ± std "
                                 "worst-test accuracy over seeds (%).", first=("ifeat",)),
              selection_sentence(selection_gaps(validated), selection_agreement(validated)))
    if t2.so_far is not None:
        runs = t2.so_far["runs"]
        _show("**Today's protocol, so far.** While Table 2 above is the earlier protocol's, today's runs are shown "
              "here, with each frozen column's distance from the paper's cells in paper standard deviations, the "
              "measure the protocol's decisions were taken by (so these distances are partly built in by them: "
              "chapter 09). " + progress_sentence(runs),
              distance_table(runs, "Each frozen column's distance from the paper's cells"),
              table2_tables(table2_frame(runs, t2.so_far["oracle"], with_n=True, learners=FROZEN_LEARNERS),
                            "Today's protocol so far, at full size",
                            note="Each cell: ours (mean ± std over its n seeds, %), the paper's under it in grey."))
    return validated


def far_cells(t2, committed_gaps) -> list[dict]:
    """The frozen cells far from the paper's, each with what the gap studies measured on it
    (:func:`far_cells_section`); returns the verdicts."""
    from featbook import committed
    from featlib.experiments.gap_studies import STUDY_CHOICES
    from featlib.experiments.results import load_study

    located = committed.locate(committed_gaps)
    frames = {name: study["frame"] for name in STUDY_CHOICES
              if (study := committed.load(located, load_study, name)) is not None}
    today = next((p["runs"] for p in (t2.pieces if t2.which == "today" else None, t2.so_far)
                  if p is not None and not p["runs"].empty), None)
    if today is None:
        _show("Today's protocol has no committed runs yet.")
        return []
    lead, verdicts = far_cells_section(today, frames)
    _show(lead, "\n".join(f"* {v['sentence']}" for v in verdicts))
    return verdicts


def nf_column(t2, folder: str) -> None:
    """The whole-network (ERM-NF) column at full size, with where it stands (:func:`nf_column_sentence`)."""
    from featbook import evidence

    nf = t2.nf
    if nf is None or not (nf["runs"]["learner"] == "erm-nf").any():
        _show(evidence.missing(t2.located.nf, "ERM-NF column",
                               "python3 benchmarks/gpu_sitting.py start --wait --steps erm-nf"))
        return
    from featbook.cmnist_shared import collapsed_provenance

    runs = nf["runs"].query("learner == 'erm-nf'")
    _show(nf_column_sentence(runs, nf["records"], folder.removeprefix("../"), provenance=False),
          table2_tables(table2_frame(runs, with_n=True), "The ERM-NF column at full size (50,000 training images)",
                 note="Each cell: the best configuration's worst-test accuracy (%), its seeds given as n; the "
                      "paper's: mean ± std over 10 seeds."),
          collapsed_provenance(nf_made(runs, nf["records"], folder.removeprefix("../"))))


def verdict(t2) -> str:
    """What Table 2 at full size shows beside the paper's (:func:`frozen_columns_sentence` on the
    runs it is read from, with where the ERM-NF column stands), and, while Table 2 is the earlier
    protocol's, where today's runs stand (:func:`so_far_sentence`)."""
    from featlib.experiments.cmnist_analysis import frozen_columns

    if t2.runs is None:
        return ("Table 2 at the paper's scale could not be read in this runtime (the note above it says what to do)"
                if t2.located.pieces.failed else "Table 2 at the paper's scale is not committed yet") + \
            "; this page's own run below only shows the protocol working."
    earlier = t2.which == "earlier"
    joined = set(t2.shown["runs"].query("learner == 'erm-nf'")["dataset"]) if t2.shown is not None else set()
    text = frozen_columns_sentence(frozen_columns(t2.runs), "the earlier protocol's runs" if earlier else
                                   "the committed runs", earlier=earlier, nf_datasets=sorted(joined))
    if t2.so_far is not None and not t2.so_far["runs"].empty:
        text += "\n\n" + so_far_sentence(t2.so_far["runs"])
    return text


def protocols(margins: pd.DataFrame | None, found) -> None:
    """FeAT's margin per row under the calibrated protocol (Table 2 above: ``margins``) beside the
    protocol fixed before looking (``found``: :func:`featbook.margin_views.committed_margin`, read
    at each dataset's converged length), with the paper's, and per dataset what depends on the
    choice; or what the comparison waits for."""
    from featbook import margin_views, prose
    from featlib.experiments.margin_curve import CURVE_MIN_SEEDS

    whole = [d for d in found.datasets if found.whole(d)]
    if margins is None or not whole:
        waiting = "Table 2's committed runs" if margins is None else (
            f"a margin curve with {CURVE_MIN_SEEDS} seeds on at least one dataset")
        _show(f"The two protocols are set side by side once there is {waiting}.")
        return
    fixed = margin_views.fixed_margins(found)
    seeds = {d: f"{margin_views.size_phrase(found.curves[d])}, {prose.integer(found.curves[d].length)} steps"
             for d in whole}
    calibrated = margins[margins["dataset"].isin(whole)]
    _show(margin_views.protocols_table(
              calibrated, fixed,
              caption="FeAT's margin over the better baseline per row, at full size (50,000 training images): the "
                      "paper's, ours under Table 2's calibrated protocol and under the protocol fixed before looking "
                      f"({', '.join(f'{DATASET_LABELS[d]}: {s}' for d, s in seeds.items())})",
              note="Points; lead, tie or loss by the larger seed std of the two cells compared."),
          " ".join(margin_views.verdict_sentence(calibrated, fixed, d) for d in whole))
