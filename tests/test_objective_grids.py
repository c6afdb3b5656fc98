"""An objective's own penalty grid (CMNISTProtocol.objective_penalty_weights): the decided CLOvE grid
of ColoredMNIST-01 (featlib.hparams.CLOVE_WEIGHTS_01, DECISIONS) enters Table 2 through it, and it
must change that objective's pieces alone."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from featlib import hparams
from featlib.experiments import colored_mnist
from featlib.experiments.colored_mnist import make_protocol, recorded_runs_problem
from featlib.store.pieces import Piece

REPO = Path(__file__).resolve().parents[1]
OWN = {"clove": hparams.CLOVE_WEIGHTS_01}


def carries_tables_key(record: Path) -> bool:
    """Whether a committed piece's record (pieces/<dataset>/<learner>/<objective>/seed<N>.json)
    holds the key that Table 2's protocol (preset featlib) gives that piece today."""
    dataset, learner, objective = record.parts[-4:-1]
    piece = Piece(dataset, learner, objective, int(record.stem.removeprefix("seed")))
    return make_protocol("featlib", dataset=dataset).piece_key(piece) == json.loads(record.read_text())["protocol_key"]


def test_an_objectives_own_grid_changes_its_configurations_and_its_key_alone():
    f1 = make_protocol("featlib", dataset="cmnist01", objective_penalty_weights={})  # Appendix F.1's for all
    own = make_protocol("featlib", dataset="cmnist01", objective_penalty_weights=OWN)
    table2 = make_protocol("featlib", dataset="cmnist01")  # hparams.OBJECTIVE_GRIDS: the decided grid
    assert table2.objective_penalty_weights == OWN and table2.ood_piece_key("clove", "ifeat") == own.ood_piece_key("clove", "ifeat")
    assert f1.penalty_grid("clove") == hparams.APPENDIX_F1["penalty_weights"].value
    assert own.penalty_grid("clove") == hparams.CLOVE_WEIGHTS_01 and own.penalty_grid("irmv1") == f1.penalty_weights
    assert {w for w, _ in own.configurations("clove")} == set(hparams.CLOVE_WEIGHTS_01)
    assert own.configurations("irmv1") == f1.configurations("irmv1") and own.configurations("erm") == [(0.0, 0)]
    for learner in ("erm", "bonsai", "ifeat", "erm-nf"):
        for objective in f1.objectives:
            same = f1.ood_piece_key(objective, learner) == own.ood_piece_key(objective, learner)
            assert same == (objective != "clove"), (learner, objective)
    # the pieces are those of a protocol that gives every objective that grid: the runs are the same
    everyone = make_protocol("featlib", dataset="cmnist01", penalty_weights=hparams.CLOVE_WEIGHTS_01)
    assert own.ood_piece_key("clove", "ifeat") == everyone.ood_piece_key("clove", "ifeat")
    # learned features and the oracle do not depend on the OOD stage's grids
    for kind in ("FEATURE_FIELDS", "ORACLE_FIELDS"):
        assert own.key(getattr(colored_mnist.CMNISTProtocol, kind)) == f1.key(getattr(colored_mnist.CMNISTProtocol, kind))
    assert own.n_runs() == f1.n_runs()  # five weights either way


def test_a_piece_records_the_weights_its_runs_tried_and_is_checked_against_them():
    own = make_protocol("featlib", dataset="cmnist01", objective_penalty_weights=OWN)
    record = json.loads(json.dumps({"protocol": own.ood_fields("ifeat", "clove")}))  # as a piece's file holds it
    assert tuple(record["protocol"]["penalty_weights"]) == hparams.CLOVE_WEIGHTS_01
    assert tuple(own.ood_fields("ifeat", "irmv1")["penalty_weights"]) == own.penalty_weights
    assert "objective_penalty_weights" not in record["protocol"]
    piece = Piece("cmnist01", "ifeat", "clove", 1)
    rows = pd.DataFrame(own.configurations("clove"), columns=["penalty_weight", "pretrain_epochs"])
    assert recorded_runs_problem(piece, rows, record) is None
    f1_rows = pd.DataFrame(make_protocol("featlib", dataset="cmnist01", objective_penalty_weights={}).configurations("clove"),
                           columns=["penalty_weight", "pretrain_epochs"])
    assert "of another" in recorded_runs_problem(piece, f1_rows, record)


def test_table_2s_grids_come_from_hparams_only_under_appendix_f1s_grid(monkeypatch):
    sentinel = {"clove": (2.0, 3.0)}  # not the landed grid, so that the entry is seen to be read
    monkeypatch.setattr(colored_mnist, "OBJECTIVE_GRIDS", {"cmnist01": sentinel})
    assert make_protocol("featlib", dataset="cmnist01").objective_penalty_weights == sentinel
    assert make_protocol("featlib", dataset="cmnist025").objective_penalty_weights == {}
    # a grid of one's own (chapter 04's colab profile) is not silently split; {} turns the entry off
    assert make_protocol("featlib", dataset="cmnist01", penalty_weights=(100.0, 1000.0)).objective_penalty_weights == {}
    assert make_protocol("featlib", dataset="cmnist01", objective_penalty_weights={}).objective_penalty_weights == {}


def test_the_decided_grid_is_table_2s_and_changed_the_keys_of_its_01_clove_pieces_alone(monkeypatch):
    """What landing the decision (hparams.OBJECTIVE_GRIDS = {"cmnist01": {"clove": ...}}) did to the
    committed Table 2: with the entry every committed piece has the protocol's key; without it
    (as before it landed), exactly the ColoredMNIST-01 CLOvE pieces would be another protocol's."""
    records = sorted((REPO / "results" / "cmnist-table2" / "pieces").glob("*/*/*/seed*.json"))
    assert records and {r.parts[-4] for r in records if r.parts[-2] == "clove"} == {"cmnist025", "cmnist01"}

    def stale():
        return {tuple(path.parts[i] for i in (-4, -2)) for path in records if not carries_tables_key(path)}

    assert colored_mnist.OBJECTIVE_GRIDS == hparams.OBJECTIVE_GRIDS == {"cmnist01": OWN}  # landed
    assert stale() == set()
    monkeypatch.setattr(colored_mnist, "OBJECTIVE_GRIDS", {})
    assert stale() == {("cmnist01", "clove")}


@pytest.mark.parametrize("value, said", [
    ("clove", "'clove' is not OBJECTIVE=W,W,..."),
    ("clove=x,1", "'clove=x,1' is not OBJECTIVE=W,W,..."),
    ("erm=1", "erm has no penalty"),
    ("clove=-1", "must be a finite number >= 0"),
])
def test_bad_objective_weights_get_one_line_and_exit_2_before_any_work(tmp_path, value, said):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "featlib.cli.run_cmnist", "--out", str(out), "--pieces",
                           "--size", "small", "--datasets", "cmnist01", "--objective-weights", value,
                           "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_the_replaced_appendix_f1_clove_pieces_keep_the_key_of_the_protocol_before_the_decision(monkeypatch):
    """results/cmnist-table2-clove01-appendix-f1 keeps the -01 CLOvE pieces that the decided grid
    replaced in Table 2 (chapter 09 sets them beside it): each is the piece of Appendix F.1's grid,
    the protocol before hparams.OBJECTIVE_GRIDS had its entry, and not of today's."""
    records = sorted((REPO / "results" / "cmnist-table2-clove01-appendix-f1" / "pieces").glob("*/*/*/seed*.json"))
    clove = [r for r in records if r.parts[-2] == "clove"]
    assert len(clove) == len(records) == 3 * 4  # three frozen columns, seeds 1-4

    assert not any(carries_tables_key(r) for r in clove)
    monkeypatch.setattr(colored_mnist, "OBJECTIVE_GRIDS", {})
    assert all(carries_tables_key(r) for r in clove)


def test_a_study_that_an_objectives_own_grid_changes_carries_it_in_its_keys(monkeypatch):
    """ood-length-01 runs -01 CLOvE on the protocol's grid, which hparams.OBJECTIVE_GRIDS changed: its
    study key (and its CLOvE part's) carries that grid, so a study made before the decision is never
    resumed or extended under it; a study the entry does not touch keeps its key. clove-01 studies
    the Appendix F.1-grid cell and pins that grid."""
    from featlib.experiments import gap_studies

    landed = {name: gap_studies.study_key(name) for name in ("ood-length-01", "ood-length-025", "clove-01", "clove-grid-01")}
    monkeypatch.setattr(colored_mnist, "OBJECTIVE_GRIDS", {"cmnist01": {"clove": (2.0, 3.0)}})
    moved = {name for name, key in landed.items() if gap_studies.study_key(name) != key}
    assert moved == {"ood-length-01"}
    calls = []
    monkeypatch.setattr(gap_studies, "ood_length", lambda *a, **kw: calls.append(kw) or pd.DataFrame())
    gap_studies.clove_01(1, "cpu")
    assert calls and all(kw["objective_penalty_weights"] == {} for kw in calls)


def test_objective_weights_on_the_command_line_keep_the_grids_of_the_objectives_not_named(tmp_path):
    """run_cmnist --objective-weights vrex=...: V-REx takes the given weights, -01 CLOvE keeps its decided
    grid (hparams.OBJECTIVE_GRIDS), every other objective Appendix F.1's; naming CLOvE replaces it."""
    from featlib.cli import run_cmnist

    def protocols(*weights):
        argv = ["--out", str(tmp_path / "out"), "--pieces", "--datasets", "cmnist01", "cmnist025",
                "--cache-dir", str(tmp_path / "cache"), "--objective-weights", *weights]
        return {p.dataset: p for p in run_cmnist.prepare(run_cmnist.parse_args(argv))}

    p = protocols("vrex=1,10")
    assert p["cmnist01"].penalty_grid("vrex") == p["cmnist025"].penalty_grid("vrex") == (1.0, 10.0)
    assert p["cmnist01"].penalty_grid("clove") == hparams.CLOVE_WEIGHTS_01
    assert p["cmnist025"].penalty_grid("clove") == p["cmnist01"].penalty_grid("irmv1") == hparams.APPENDIX_F1["penalty_weights"].value
    assert protocols("clove=2,3")["cmnist01"].penalty_grid("clove") == (2.0, 3.0)


def test_objective_weights_for_an_objective_not_run_get_one_line_and_exit_2(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "featlib.cli.run_cmnist", "--out", str(out), "--pieces",
                           "--size", "small", "--datasets", "cmnist01", "--objectives", "erm", "irmv1",
                           "--objective-weights", "clove=1,5", "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--objective-weights names clove, which --objectives does not run" in done.stderr
    assert not out.exists()
