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
    f1 = make_protocol("featlib", dataset="cmnist01")
    own = make_protocol("featlib", dataset="cmnist01", objective_penalty_weights=OWN)
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
    f1_rows = pd.DataFrame(make_protocol("featlib", dataset="cmnist01").configurations("clove"),
                           columns=["penalty_weight", "pretrain_epochs"])
    assert "of another" in recorded_runs_problem(piece, f1_rows, record)


def test_table_2s_grids_come_from_hparams_only_under_appendix_f1s_grid(monkeypatch):
    monkeypatch.setattr(colored_mnist, "OBJECTIVE_GRIDS", {"cmnist01": OWN})
    assert make_protocol("featlib", dataset="cmnist01").objective_penalty_weights == OWN
    assert make_protocol("featlib", dataset="cmnist025").objective_penalty_weights == {}
    # a grid of one's own (chapter 04's colab profile) is not silently split; {} turns the entry off
    assert make_protocol("featlib", dataset="cmnist01", penalty_weights=(100.0, 1000.0)).objective_penalty_weights == {}
    assert make_protocol("featlib", dataset="cmnist01", objective_penalty_weights={}).objective_penalty_weights == {}


def test_the_decided_grid_changes_the_keys_of_the_committed_01_clove_pieces_and_no_others(monkeypatch):
    """What landing the decision (hparams.OBJECTIVE_GRIDS = {"cmnist01": {"clove": ...}}) does to the
    committed Table 2: today every committed piece has today's key; with the entry, exactly the
    ColoredMNIST-01 CLOvE pieces need making anew."""
    records = sorted((REPO / "results" / "cmnist-table2" / "pieces").glob("*/*/*/seed*.json"))
    assert records

    def stale():
        return {tuple(path.parts[i] for i in (-4, -2)) for path in records if not carries_tables_key(path)}

    assert colored_mnist.OBJECTIVE_GRIDS == hparams.OBJECTIVE_GRIDS == {}  # not landed: Table 2 is F.1's
    assert stale() == set()
    monkeypatch.setattr(colored_mnist, "OBJECTIVE_GRIDS", {"cmnist01": OWN})
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


def test_the_decided_grids_pieces_already_carry_the_key_that_landing_it_gives(monkeypatch):
    """results/cmnist-table2-clove01 holds the -01 CLOvE pieces made with --objective-weights before
    the decision lands: each must be the piece Table 2's protocol asks for once hparams.OBJECTIVE_GRIDS
    has the entry (so that they merge into results/cmnist-table2 as they are), and not before."""
    records = sorted((REPO / "results" / "cmnist-table2-clove01" / "pieces").glob("*/*/*/seed*.json"))
    clove = [r for r in records if r.parts[-2] == "clove"]
    assert clove

    assert not any(carries_tables_key(r) for r in clove)
    monkeypatch.setattr(colored_mnist, "OBJECTIVE_GRIDS", {"cmnist01": OWN})
    assert all(carries_tables_key(r) for r in records)
