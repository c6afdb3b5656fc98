"""The committed full-scale evidence as the chapters show it (featbook.evidence)."""
import pandas as pd

from featbook import evidence, leaks

PROV = {"command": "python -m featlib.cli.run_rounds --out /tmp/runs/cmnist-rounds --cache-dir /work/main/_cache/cmnist",
        "commit": "1152ffb3e5bea8a9076293deb15e6cd881eed77c", "device": "cpu", "threads": 2,
        "wall_time_s": 471.8, "seeds": [1, 2, 3, 4, 5], "datasets": ["cmnist025", "cmnist01"]}


def test_the_provenance_line_says_size_seeds_device_and_time_once_and_folds_the_commit():
    line = evidence.provenance_line("Committed full-size rounds", PROV, size="50,000 training images")
    assert line == ("Committed full-size rounds: 50,000 training images, 5\u00a0seeds per dataset, on a CPU "
                    "(2\u00a0threads), 8\u00a0min of wall time.")
    # the commit inside the fold, not in the line the narrative shows
    assert "<summary>The command that made them</summary><p>At commit 1152ffb3e5be of this repository:</p>" in (
        evidence.command_block(PROV))
    assert not leaks.scan_text(line)
    assert evidence.provenance_line("Cost", {"device": "NVIDIA H100"}) == "Cost: on NVIDIA H100."
    # a folder whose runs were all read from an earlier run's cache says so: its wall time is not their cost
    cached = evidence.provenance_line("Rounds", PROV | {"wall_time_s_per_run": {"cmnist025/ifeat/seed1": 0.03}})
    assert cached.endswith("8\u00a0min of wall time (every run was read from the cache of an earlier run, so this is "
                           "the time of writing the folder, not of training).")
    trained = evidence.provenance_line("Rounds", PROV | {"wall_time_s_per_run": {"cmnist025/ifeat/seed1": 95.0}})
    assert "cache" not in trained
    some = evidence.provenance_line("Rounds", PROV | {"wall_time_s_per_run": {"a": 0.01, "b": 0.02, "c": 470.0}})
    assert "(2 of 3 runs were read from the cache of an earlier run, so this is not what training them all took)" in some
    # a study folder written from its cached pieces in under a second (gap_studies' note) says so too
    study = evidence.provenance_line("Study", {"device": "cpu", "wall_time_s": 0.04,
                                               "note": "wall time includes pieces read from --cache-dir, if any"})
    assert "read from the cache of an earlier run, so this is the time of writing the folder, not of training" in study
    assert "cache" not in evidence.provenance_line("Study", {"device": "cpu", "wall_time_s": 1885.6,
                                                             "note": "wall time includes pieces read from --cache-dir"})
    # a study folder several runs added to, one of which wrote it from the cache: the sum is not the cost
    runs = [{"command": "a", "wall_time_s": 0.04}, {"command": "b", "wall_time_s": 2691.6}]
    added = evidence.provenance_line("Study", {"device": "cpu", "runs": runs})
    assert added == ("Study: on a CPU (2\u00a0runs, 45\u00a0min of wall time in all; 1 of 2 runs wrote the folder from "
                     "the cache of an earlier run, so this is not what training took: the folder's README gives that).")
    assert "cache" not in evidence.provenance_line("Study", {"device": "cpu", "runs": [runs[1], runs[1]]})


def test_the_command_is_folded_and_loses_the_machines_folders():
    block = evidence.command_block(PROV)
    assert block.startswith('<details class="feat-provenance"><summary>') and "</details>" in block
    assert "…/runs/cmnist-rounds" in block and "/work/main" not in block and "/tmp/" not in block


def test_run_it_yourself_and_nothing_committed_claim_no_ranking():
    from featbook.run_scale import RunScale

    text = evidence.run_it_yourself("a small check of the pipeline: 2\u00a0seeds")
    assert "ranks nothing" in text and "beat" not in text and not leaks.scan_text(text)
    assert evidence.run_it_yourself(RunScale("small", "2 seeds")) == evidence.run_it_yourself(RunScale("small", "2 seeds").summary)
    paper = evidence.run_it_yourself(RunScale("paper", "10 seeds, 50,000 training images"))
    assert "reduced size" not in paper and "the paper's full protocol: 10 seeds" in paper and not leaks.scan_text(paper)
    assert evidence.nothing_committed("Table 2", "python -m x").startswith("No full-scale Table 2 is committed yet")


def test_termination_summary_counts_the_rule_and_the_cap():
    stops = pd.DataFrame({"learner": ["ifeat"] * 3 + ["feat"], "dataset": ["a", "a", "b", "a"], "seed": [1, 2, 1, 1],
                          "rounds_kept": [2, 5, 3, 5], "discarded_round": [3, None, 4, None]})
    stops["discarded_round"] = stops["discarded_round"].astype(float)
    assert evidence.termination_summary(stops, max_rounds=5) == (
        "The 130% check discarded a round, and the featurizer rolled back, in 2 of 3\u00a0seed-dataset runs of "
        "FeAT (iFeAT); 1 ran to the cap of 5\u00a0rounds.")
    assert evidence.termination_summary(stops[stops["learner"] == "feat"], 5, learner="ifeat") == "No rounds of FeAT (iFeAT) are recorded."


def test_a_folder_that_runs_added_to_names_every_run_commit_and_the_summed_wall_time():
    from featbook import evidence

    prov = {"seeds": [1, 2], "datasets": ["cmnist01"], "device": "cpu", "threads": 2, "commit": "b" * 40,
            "wall_time_s": 60.0,
            "runs": [{"command": "python -m featlib.cli.run_rounds --seeds 1", "commit": "a" * 40, "wall_time_s": 600.0},
                     {"command": "python -m featlib.cli.run_rounds --seeds 2", "commit": "b" * 40, "wall_time_s": 60.0}]}
    line = evidence.provenance_line("Rounds", prov).replace("\xa0", " ")
    assert "2 seeds" in line and "aaaa" not in line and "2 runs, 11 min of wall time in all" in line
    block = evidence.command_block(prov)
    assert "<summary>The 2 commands that made them</summary><p>At commits aaaaaaaaaaaa and bbbbbbbbbbbb" in block
    assert "--seeds 1" in block and "--seeds 2" in block


def test_a_recorded_command_whose_entry_point_moved_names_todays():
    assert evidence.moved_entry_point("python -m featlib.experiments.run_rounds --out x --inits ifeat") == (
        "featlib.experiments.run_rounds", "featlib.cli.run_rounds")
    assert evidence.moved_entry_point("python -m featlib.experiments.gap_studies x") == (
        "featlib.experiments.gap_studies", "featlib.cli.gap_studies")
    assert evidence.moved_entry_point("python -m featlib.cli.run_rounds --out x") is None  # today's already
    assert evidence.moved_entry_point("python -m featlib.experiments.no_such_thing") is None
    assert evidence.moved_entry_point("python benchmarks/stacked_training.py") is None
    block = evidence.command_block({"command": "python -m featlib.experiments.run_rounds --out x", "commit": "abc"})
    assert "<code>featlib.experiments.run_rounds</code> is <code>featlib.cli.run_rounds</code> today" in block
    assert "today" not in evidence.command_block({"command": "python -m featlib.cli.run_rounds --out x"})
