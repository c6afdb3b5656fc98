"""The claims table's robustness column (featbook.claims.robust_cell): each verdict read again under every
other protocol choice the committed results try, by the same function, and the cell says whether
it moved."""
import shutil
from pathlib import Path

import pandas as pd

from featbook import claims

REPO = Path(__file__).resolve().parents[1]
STARTS = ("unchanged by", "depends on", claims.ONE_PROTOCOL, "-")


def test_compare_says_unchanged_depends_or_one_protocol():
    assert claims.compare("the head", {"summed": "yes", "averaged": "yes"}) == (
        "unchanged by the head: yes with summed and averaged")
    assert claims.compare("the head", {"summed": "yes", "averaged": "partly"}) == (
        "depends on the head: yes (summed); partly (averaged)")
    assert claims.compare("the size", {"paper": "holds", "reduced": None}) == "one protocol tried (paper)"
    assert claims.compare("the size", {"paper": None}) == "-"


def test_every_row_has_a_short_cell_that_starts_with_its_kind():
    rows = claims.claims(REPO / "results")
    for row in rows:
        assert row.robust.startswith(STARTS), row
        assert len(row.robust.split()) <= claims.CELL_WORDS, (row.paper, row.robust)
    table = claims.markdown(rows)
    assert table.splitlines()[0].endswith(f"| {claims.ROBUST_HEADER} |") and table.count("| --- ") == 6


def test_table7_is_read_under_both_heads_from_the_committed_rounds(tmp_path):
    shutil.copytree(REPO / "results" / "cmnist-rounds", tmp_path / "cmnist-rounds")
    assert claims.robust_cell("Table 7", tmp_path, None).startswith(claims.ONE_PROTOCOL)
    shutil.copytree(REPO / "results" / "cmnist-rounds-average-head", tmp_path / "cmnist-rounds-average-head")
    both = claims.robust_cell("Table 7", tmp_path, None)
    assert both.startswith(("unchanged by the head", "depends on the head")), both
    # the same verdict under the two heads, by the row's own rule
    verdict = claims._table7(tmp_path, None)[1].split(":")[0]
    assert f": {verdict} with" in both or f"{verdict} (the summed head)" in both


def test_a_verdict_that_moves_with_the_protocol_says_so(tmp_path):
    """Table 2 with the earlier protocol's pieces a different verdict from today's: "depends on"."""
    shutil.copytree(REPO / "results" / "cmnist-table2", tmp_path / "cmnist-table2")
    shutil.copytree(REPO / "results" / claims.EARLIER_TABLE2, tmp_path / claims.EARLIER_TABLE2)
    from featlib.experiments.cmnist_analysis import frozen_columns
    from featlib.experiments.table2_pieces import load_pieces

    today = claims.table2_verdict(frozen_columns(load_pieces(tmp_path / "cmnist-table2")["runs"]))
    earlier = claims.table2_verdict(frozen_columns(load_pieces(tmp_path / claims.EARLIER_TABLE2)["runs"]))
    cell = claims.robust_cell("Table 2", tmp_path, None)
    if today == earlier:
        assert cell.startswith(f"unchanged by the protocol: {today}"), cell
    else:
        assert cell.startswith(f"depends on the protocol: {today} (today); {earlier} (earlier)"), cell


def test_the_length_studies_count_feats_leads_per_dataset():
    """FeAT leads where its cell is above the better baseline's; one seed: a margin above zero."""
    rows = []
    for step in (500, 1000):
        for objective in ("irmv1", "vrex"):
            for learner, acc in (("erm", 0.6), ("bonsai", 0.62), ("ifeat", 0.7 if objective == "irmv1" or step == 1000 else 0.5)):
                for weight in (10.0, 100.0, 1000.0):
                    rows.append({"dataset": "cmnist01", "seed": 1, "learner": learner, "objective": objective,
                                 "penalty_weight": weight, "pretrain_epochs": 0, "step": step, "train_acc": 0.8,
                                 "worst_test_acc": acc - (0.01 if weight != 100.0 else 0), "val_acc": 0.7})
    assert claims.length_leads_in({"01": pd.DataFrame(rows)}) == "FeAT leads 1-2/2 on -01 at 500-1,000 steps"
    assert claims.length_leads_in({}) == ""


def test_the_committed_length_studies_are_read_through_the_store():
    said = claims.length_leads(REPO / "results")
    assert said.startswith("FeAT leads ") and " on -01" in said and " on -025" in said


def test_the_fig_1b_cell_says_which_half_it_reads_in_two_forms():
    """Fig. 1(b)'s verdict has two halves; only the dependence on ERM's length has both forms (whole
    networks and frozen features), so the cell says so, and never reads as if FeAT's half did."""
    cell = claims.robust_cell("Fig. 1(b)", REPO / "results", None)
    assert cell.endswith(claims.FIG1B_ROBUST_SCOPE) and cell.startswith(STARTS)
    assert len(cell.split()) <= claims.CELL_WORDS
