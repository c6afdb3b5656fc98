"""Chapter 07's views of the cost measurements (featbook.cost_views): what a committed folder
measured is read from its provenance, fabricated data are named in every caption and never set
beside the paper's Table 14, and the chapter's "What we see" and the introduction's claims row
compare the same quantity as the paper (whole training time as a multiple of ERM's) with the same
numbers."""
from pathlib import Path

import pandas as pd
import pytest

from featbook import claims, cost_views as views, leaks, tables
from featlib.cost import paper_schedules, paper_table14

REPO = Path(__file__).resolve().parents[1]
PAPER = paper_table14()


def _prov(command: str, device: str = "cuda (NVIDIA H200)", cases=("cmnist", "wilds")) -> dict:
    return {"command": command, "device": device, "cpu_count": 2, "threads": 2, "commit": "0123456789abcdef" * 2,
            "cases": {c: "whatever the case said" for c in cases}}


def _run(prov: dict, ifeat: float, bonsai: float | None, *, step: float = 1.1, memory: float = 1.2,
         benches=("cmnist",)) -> dict:
    """A committed folder as views.load_committed returns it, its one measured round's step times
    made so that today's paper schedule (what chapter 07 reads, views.committed_schedule) gives
    ``ifeat`` and ``bonsai`` times ERM's whole training. Its stored schedule.csv says something else
    on purpose: the chapter must not read it."""
    sources = views.committed_sources(prov)
    learners = {"erm": 1.0, "ifeat": ifeat, **({"bonsai": bonsai} if bonsai else {})}
    schedules = paper_schedules({b: sources[b].dataset for b in benches}, list(learners))
    schedule, summary = [], []
    for bench in benches:
        erm_steps = sum(schedules[bench]["erm"])
        for learner, ratio in learners.items():
            schedule.append({"benchmark": bench, "learner": learner, "paper_steps": 1, "rounds": 1,
                             "estimated_s": 99.0, "time_x_erm": 99.0})  # stale on purpose
            summary.append({"benchmark": bench, "learner": learner, "round": "1",
                            "step_ms": ratio * erm_steps / sum(schedules[bench][learner]), "step_ms_min": 0.9,
                            "step_ms_max": 1.1, "peak_mb": 100.0,
                            "time_x_erm": 1.0 if learner == "erm" else step,
                            "memory_x_erm": 1.0 if learner == "erm" else memory})
    return {"provenance": prov, "schedule": pd.DataFrame(schedule), "summary": pd.DataFrame(summary)}


FULL = "python -m featlib.cli.cost --out results/cost/x"
REAL = "python -m featlib.cli.cost --real-data --pretrained true --out results/cost/x"


def test_what_a_committed_folder_measured_comes_from_its_provenance():
    committed = views.load_committed(REPO / "results" / "cost")
    for folder, run in committed.items():
        sources = views.committed_sources(run["provenance"])
        assert set(sources) == set(run["provenance"]["cases"])
        for bench, source in sources.items():
            # the CLI fabricates WILDS unless told --real-data; ColoredMNIST is MNIST itself
            assert source.fabricated == (bench == "wilds" and "--real-data" not in run["provenance"]["command"])
            assert ("fabricated" in source.label) == bool(source.fabricated)
            # fabricated images of the paper's size stand beside it (tests/test_cost_content.py: a step's
            # operations and shapes do not depend on the pixels); unrecorded data or smaller sizes do not
            assert source.beside_paper == (source.fabricated is not None and source.at_paper_sizes)
    wilds = views.committed_sources(_prov(FULL))["wilds"]
    assert wilds.fabricated and wilds.pretrained is False and wilds.at_paper_sizes and wilds.beside_paper
    assert wilds.label == "fabricated Camelyon17 (untrained DenseNet-121 at 96\xa0px, batch 32) on one NVIDIA H200"
    real = views.committed_sources(_prov(REAL))["wilds"]
    assert real.beside_paper and real.label.startswith("Camelyon17 (pretrained DenseNet-121")
    small = views.committed_sources(_prov("python -m featlib.cost --n-train 5000 --hidden-dim 64", device="cpu"))
    assert not small["cmnist"].beside_paper and small["cmnist"].apart_because == "smaller than the paper's sizes"
    assert small["cmnist"].device == "a 2-core CPU"
    unreadable = views.committed_sources(_prov("python -m featlib.cli.cost --no-such-option"))
    assert all(s.fabricated is None and not s.beside_paper for s in unreadable.values())


def test_captions_over_fabricated_data_say_so():
    committed = {Path("x"): _run(_prov(FULL), 2.0, 4.0, benches=("cmnist", "wilds"))}
    sources = views.committed_sources(_prov(FULL))
    run = committed[Path("x")]
    for shown in (views.summary_table(run["summary"], "Step time", sources),
                   views.schedule_table(run["schedule"], "Schedule", sources)):
        captions = {t.caption for t in shown.tables}
        assert any("fabricated Camelyon17" in c for c in captions)
        assert all(("Camelyon17" in c) <= ("fabricated" in c) for c in captions)
    import matplotlib.pyplot as plt

    fig = views.cost_figure(run["summary"], sources)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    plt.close(fig)
    assert "fabricated Camelyon17: step time" in titles and all(
        ("Camelyon17" in t) <= ("fabricated" in t) for t in titles)
    from featlib.cost import CMNISTCost, WildsCost

    cases = [CMNISTCost(n_train=200, hidden_dim=8), WildsCost(backbone="small_cnn", resolution=32, batch_size=4)]
    run_sources = views.case_sources(cases, "cpu", cpu_count=2)
    assert run_sources["wilds"].label == "fabricated Camelyon17 (untrained small CNN at 32\xa0px, batch 4) on a 2-core CPU"
    assert not any(s.at_paper_sizes for s in run_sources.values())


SMALL = "python -m featlib.cost --n-train 5000 --hidden-dim 64"


def test_table14_sets_only_full_size_measurements_beside_the_paper():
    committed = {Path("cpu"): _run(_prov(FULL, device="cpu"), 2.1, 4.6, benches=("cmnist", "wilds")),
                 Path("gpu"): _run(_prov(FULL, cases=("cmnist",)), 2.2, 7.4),
                 Path("small"): _run(_prov(SMALL, device="cpu", cases=("cmnist",)), 2.0, 4.0)}
    table = views.table14(PAPER, committed)
    ours = table.frame[table.frame["measured"].str.startswith("ours")]
    # the paper's own dataset first; fabricated images named in the row and the note
    assert list(ours["dataset"]) == ["Camelyon17", "ColoredMNIST-025", "ColoredMNIST-025"]
    assert list(ours["measured"]) == ["ours, a 2-core CPU, fabricated images", "ours, a 2-core CPU",
                                      "ours, one NVIDIA H200"]
    assert set(table.frame.loc[~table.frame.index.isin(ours.index), "measured"]) == {"the paper, V100 GPUs"}
    assert "50,000 images per full-batch step, MLP of width 256" in table.note
    assert f"The Camelyon17 images were fabricated, of the paper's size: {views.PIXELS_FREE}." in table.note
    assert tables.fits(table.frame), table.frame
    apart = views.kept_apart(committed)
    assert apart.startswith("Not set beside the paper's numbers: ColoredMNIST-025 (5,000 images") and (
        "smaller than the paper's sizes" in apart and "a 2-core CPU" in apart)
    only_small = {Path("small"): committed[Path("small")]}
    table = views.table14(PAPER, only_small)
    assert set(table.frame["measured"]) == {"the paper, V100 GPUs"} and "ours" not in table.caption
    assert "fabricated" not in views.table14(PAPER, {Path("gpu"): committed[Path("gpu")]}).note
    assert views.kept_apart({Path("gpu"): _run(_prov(FULL, cases=("cmnist",)), 2.2, 7.4)}) == ""


@pytest.mark.parametrize("ifeat, bonsai, verdict", [
    (1.5, 3.0, "yes"),      # within the paper's FeAT ratios (up to 1.80x) and cheaper than Bonsai
    (2.2, 7.4, "partly"),   # cheaper than Bonsai, above the paper's FeAT
    (2.2, 2.0, "no"),       # not cheaper than Bonsai
    (1.5, None, "yes"),     # no Bonsai measured: within the paper's FeAT
    (2.5, None, "no"),
])
def test_the_verdict_on_table14_follows_the_numbers(ifeat, bonsai, verdict):
    committed = {Path("gpu"): _run(_prov(FULL, cases=("cmnist",)), ifeat, bonsai)}
    agreed = views.agreement(PAPER, committed)
    assert agreed.verdict == verdict
    scale, agrees = views.table14_claim(PAPER, committed)
    assert agrees.startswith(f"{verdict}: ") and f"iFeAT {ifeat:.2f}× ERM's time" in agrees
    assert "whole training time" in scale and "one NVIDIA H200" in scale
    assert "on another dataset than the paper's Camelyon17 and CivilComments: ColoredMNIST-025" in scale
    assert ("schedule has 3.00× ERM's steps" in agrees) == (ifeat > 1.80)  # 2 rounds kept + the rolled-back one
    text = views.what_we_see(PAPER, committed)
    assert text.startswith(f"**Does ours agree with Table 14? {verdict.capitalize()}.**") and agreed.ours in text
    assert not leaks.scan_text(text) and not leaks.scan_text(agrees)
    # the claims table's cells: the same verdict and ratio in a few words
    short_scale, short = views.table14_cells(PAPER, committed)
    assert short.startswith(f"{verdict}: iFeAT {ifeat:.2f}× ERM's time (the paper's FeAT: 1.16-1.80×)")
    assert ("Bonsai's" in short) == (bonsai is not None)
    assert bonsai is None or f"{'below' if ifeat < bonsai else 'not below'} Bonsai's {bonsai:.2f}×" in short
    assert short_scale.startswith("whole training time") and short_scale.endswith("(not the paper's datasets)")
    assert max(len(short.split()), len(short_scale.split())) <= 25 and not leaks.scan_text(short)


def test_devices_that_disagree_read_partly_and_smaller_sizes_stay_out_of_the_claim():
    committed = {Path("a"): _run(_prov(FULL, cases=("cmnist",)), 1.5, 3.0),
                 Path("b"): _run(_prov(FULL, device="cpu", cases=("cmnist",)), 2.2, 7.4),
                 Path("c"): _run(_prov(SMALL, device="cpu", cases=("cmnist",)), 1.01, 9.0)}
    assert views.agreement(PAPER, committed).verdict == "partly"
    scale, agrees = views.table14_claim(PAPER, committed)
    assert scale.endswith("ColoredMNIST-025 on a 2-core CPU kept apart") and "1.01" not in agrees
    small = {Path("c"): committed[Path("c")]}
    scale, agrees = views.table14_claim(PAPER, small)
    assert scale.startswith("not yet at the paper's sizes: only ColoredMNIST-025 on a 2-core CPU") and agrees == "-"
    assert "1.01" not in views.what_we_see(PAPER, small)
    assert views.table14_claim(PAPER, {}) == ("not yet", "-")
    assert views.table14_cells(PAPER, small) == views.table14_claim(PAPER, small)  # "not yet", "-"
    assert views.table14_cells(PAPER, {}) == ("not yet", "-")


@pytest.mark.parametrize("ifeat, bonsai, verdict", [
    (1.02, 1.56, "yes"),    # within the paper's Camelyon17 FeAT ratio (1.80x) and cheaper than Bonsai
    (2.0, 3.0, "partly"),   # cheaper than Bonsai, above the paper's 1.80x on Camelyon17
    (1.5, 1.4, "no"),       # not cheaper than Bonsai
    (1.7, None, "yes"),     # no Bonsai measured: within the paper's Camelyon17 ratio
    (1.9, None, "no"),      # above the paper's Camelyon17 ratio, no Bonsai to compare with
])
def test_the_verdict_rests_on_the_papers_own_dataset_with_colored_mnist_beside_it(ifeat, bonsai, verdict):
    """A measurement of Camelyon17 at the paper's sizes (fabricated images) decides the verdict against
    the paper's Camelyon17 ratios; ColoredMNIST's ratios, whatever they are, are said beside it with
    why they are larger (an unequal schedule), and change nothing."""
    wilds = _run(_prov(FULL, device="cpu", cases=("wilds",)), ifeat, bonsai, benches=("wilds",))
    for cmnist in (None, (3.2, 7.0), (1.1, 0.9)):
        committed = {Path("cpu"): wilds}
        if cmnist:
            committed[Path("gpu")] = _run(_prov(FULL, cases=("cmnist",)), *cmnist)
        agreed = views.agreement(PAPER, committed)
        assert agreed.like and agreed.verdict == verdict
        assert agreed.ours.startswith(f"on Camelyon17, iFeAT {ifeat:.2f}× ERM's time") and "ColoredMNIST" not in agreed.ours
        assert "(fabricated images of the paper's size)" in agreed.ours and "Camelyon17 (V100 GPUs)" in agreed.paper
        assert "CivilComments" not in agreed.paper
        assert ("ColoredMNIST-025 beside it" in agreed.scale) == bool(cmnist)
        assert agreed.scale.startswith("whole training time by the paper's schedule: Camelyon17 on a 2-core CPU "
                                       "(fabricated images, the paper's size)")
        text = views.what_we_see(PAPER, committed)
        assert text.startswith(f"**Does ours agree with Table 14? {verdict.capitalize()}.**") and agreed.ours in text
        assert views.PIXELS_FREE in text and not leaks.scan_text(text)
        assert (agreed.unequal in text) and bool(agreed.unequal) == bool(cmnist)
        if cmnist:
            assert f"iFeAT {cmnist[0]:.2f}× ERM's time" in agreed.unequal and "3.00× ERM's steps" in agreed.unequal
            assert "per step iFeAT costs 1.10× ERM's" in agreed.unequal  # _run's step ratio
        scale, short = views.table14_cells(PAPER, committed)
        assert scale == agreed.scale and short.startswith(
            f"{verdict}: iFeAT {ifeat:.2f}× ERM's time on Camelyon17 (the paper's FeAT: 1.80×)")
        assert ("Bonsai's" in short) == (bonsai is not None)
        assert bonsai is None or "(the paper's: 3.82×)" in short
        assert short.endswith(f"ColoredMNIST-025's unequal schedule: {cmnist[0]:.2f}×") if cmnist else "unequal" not in short
        assert max(len(short.split()), len(scale.split())) <= 25 and not leaks.scan_text(short)


def test_the_claims_row_and_chapter_07_say_the_same_on_the_committed_measurements():
    """The row is chapter 07's verdict and ratios in a few words (views.table14_cells); the chapter's
    sentence (views.what_we_see) gives every device's ratios."""
    committed = views.load_committed(REPO / "results" / "cost")
    row = next(r for r in claims.claims(REPO / "results") if r.paper == "Table 14")
    agreed = views.agreement(PAPER, committed)
    assert (row.scale, row.agrees) == views.table14_cells(PAPER, committed)
    assert row.agrees.startswith(agreed.verdict + ": ") and agreed.ours in views.what_we_see(PAPER, committed)
    beside = [m.time_x_erm["ifeat"] for m in views.measured(committed) if m.source.beside_paper]
    assert f"{min(beside):.2f}" in row.agrees and f"{max(beside):.2f}×" in row.agrees
    for m in views.measured(committed):  # only full-size measurements stand beside the paper's numbers
        said = agreed.ours + agreed.unequal
        assert (f"{m.time_x_erm['ifeat']:.2f}×" in said) == m.source.beside_paper, m
        assert (f"{m.time_x_erm['ifeat']:.2f}×" in agreed.ours) == (m.source.beside_paper and agreed.like == (
            m.source.dataset in set(PAPER["dataset"]))), m
        assert m.source.beside_paper or f"{m.time_x_erm['ifeat']:.2f}" not in row.agrees, m


def test_the_commit_goes_in_the_folded_block_not_the_provenance_sentence(monkeypatch):
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    prov = _prov(FULL, device="cpu")
    views.show_committed("cpu-2core", prov, views.committed_sources(prov))
    line, block = shown[0].data, shown[1].data
    assert "0123456789ab" not in line and "commit 0123456789ab" in block and "<details" in block
    assert "fabricated Camelyon17" in line and "a 2-core CPU" in line


def test_every_table_and_sentence_reads_the_committed_times_by_todays_schedule():
    """The committed CPU folder ran when Bonsai's DRO round on ColoredMNIST-025 was Table 6's 150
    epochs (its schedule.csv: 700 steps); today's is 500 (featlib.hparams.TABLE6_DECISIONS). The
    schedule table and the Table 14 comparison must give Bonsai the same ratio, today's."""
    from featlib.hparams import TABLE6

    committed = views.load_committed(REPO / "results" / "cost")
    bonsai = TABLE6["cmnist025"]["bonsai"]
    for folder, results in committed.items():
        schedule = views.committed_schedule(results).set_index(["benchmark", "learner"])
        if ("cmnist", "bonsai") in schedule.index:
            assert schedule.loc[("cmnist", "bonsai"), "paper_steps"] == sum(bonsai["round_epochs"]) + bonsai["synthesis_epochs"]
        for m in views.measured({folder: results}):
            for learner, ratio in m.time_x_erm.items():
                assert ratio == pytest.approx(schedule.loc[(m.source.benchmark, learner), "time_x_erm"])


def test_paper_schedules_follow_tables_6_and_12():
    from featlib.experiments.paper_values import FEAT_STOP_ROUND
    from featlib.hparams import TABLE6

    got = paper_schedules({"cmnist": "cmnist01"}, ["erm", "bonsai", "ifeat"])["cmnist"]
    assert got["erm"] == [TABLE6["cmnist01"]["erm"]["epochs"]]
    assert got["bonsai"] == [*TABLE6["cmnist01"]["bonsai"]["round_epochs"], TABLE6["cmnist01"]["bonsai"]["synthesis_epochs"]]
    # FeAT's rounds: the kept ones and the one the termination check trains and rolls back
    assert got["ifeat"] == [TABLE6["cmnist01"]["ifeat"]["epochs_per_round"]] * (FEAT_STOP_ROUND["cmnist01"] + 1)
    wilds = paper_schedules({"wilds": "camelyon17"}, ["erm", "bonsai", "ifeat"])["wilds"]
    assert len(wilds["bonsai"]) == len(wilds["ifeat"]) + 1  # a synthesis round more



def test_the_memory_sentence_names_each_device_in_words_not_its_folder():
    """Chapter 07 once read "the committed full-size measurements cpu-2core, ... and the committed
    full-size measurements h200, ...": folder names as prose, the phrase said twice. One phrase
    now, each measurement with the device it was made on, from its provenance."""
    committed = views.load_committed(REPO / "results" / "cost")
    said = views.memory_from_round_2(committed)
    assert said.count("the committed full-size measurements") == 1 and said.endswith("(ERM's peak memory = 1)")
    for folder, results in committed.items():
        assert Path(folder).name not in said
        device = str(results["provenance"]["device"])
        assert ("on the 2-core CPU" if device == "cpu" else f"on the {device.split('(')[1].rstrip(')')}") in said
    assert views.memory_from_round_2({}) == "the committed full-size measurements (none are committed yet) the same holds"
