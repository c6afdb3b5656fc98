"""Chapter 08, "FeAT on your own data": its written-out FeAT rounds are the library's.

The chapter writes rounds 1 (ERM) and 2 (Eq. 7) of FeAT as plain PyTorch, then runs
``learn_features(train, "ifeat", ...)`` on the same data. These tests execute the chapter's own
code cells (parameters, data, the written-out rounds and the library cell) in one namespace and
check that the written-out rounds give the library's round-1 and round-2 training, retention and
OOD accuracies and set sizes, to float tolerance; and that the figure's ERM features train for as
many steps as FeAT spent. The whole chapter runs in tests/test_notebooks.py (small profile).
"""
from __future__ import annotations

import contextlib
import io

import pytest
import yaml

from featbook import chapters
from featbook.notebooks import NOTEBOOK_DIR

SOURCE = NOTEBOOK_DIR / "08_feat_on_your_own_data.md"
WRITTEN_OUT = "## One FeAT round, written out"
LIBRARY = "## The library's learner on your dataset"
OOD_STAGE = "## OOD objectives on the features"


def cells_by_section() -> dict[str, list]:
    """The chapter's cells, grouped under the ``## `` heading they follow ("" before the first)."""
    sections: dict[str, list] = {"": []}
    current = ""
    for cell in chapters.read_source(SOURCE).cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    current = line.strip()
                    sections.setdefault(current, [])
        sections[current].append(cell)
    return sections


def run_chapter(parameters: dict, upto: str = OOD_STAGE) -> tuple[dict, str]:
    """Execute the chapter's code cells before the section ``upto``, ``parameters`` set over the
    parameters cell's defaults as papermill sets them; (namespace, what the cells printed)."""
    namespace: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for heading, cells in cells_by_section().items():
            if heading == upto:
                break
            for cell in cells:
                if cell.cell_type != "code":
                    continue
                exec(cell.source, namespace)  # noqa: S102
                if "parameters" in cell.metadata.get("tags", []):
                    namespace.update(parameters)
    return namespace, printed.getvalue()


def small_profile() -> dict:
    profile = yaml.safe_load((NOTEBOOK_DIR / "profiles" / "small.yaml").read_text())
    return dict(profile["08_feat_on_your_own_data"] or {})


#: The chapter's CI profile, and a different dataset, network, seed and lambda.
CASES = {
    "small profile": small_profile(),
    "other data and seed": {"n_per_env": 300, "flips": [0.05, 0.3], "noise_dims": 6, "hidden_dim": 32,
                            "steps_per_round": 80, "max_rounds": 3, "retain_weight": 0.1, "seed": 3},
}


def test_the_chapter_keeps_its_sections_and_one_parameters_cell():
    sections = cells_by_section()
    for heading in (WRITTEN_OUT, LIBRARY, OOD_STAGE):
        assert heading in sections, heading
    tagged = [c for cells in sections.values() for c in cells
              if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and sections[""].count(tagged[0]) == 1


@pytest.mark.parametrize("case", [pytest.param(v, id=k, marks=[pytest.mark.slow] if k == "small profile" else [])
                                  for k, v in CASES.items()])
def test_the_written_out_rounds_are_the_librarys_rounds_1_and_2(case):
    ns, printed = run_chapter(case)
    for name, value in case.items():
        assert ns[name] == value, name  # the parameters reached the cells
    rows = ns["feat"].rounds
    assert list(rows["round"][:2]) == [1, 2]
    r1, r2 = rows.iloc[0], rows.iloc[1]
    tol = 1e-6
    # round 1: ERM from Net(seed); its split of the training set
    assert ns["train_acc1"] == pytest.approx(r1.train_acc, abs=tol)
    assert ns["ood1"] == pytest.approx(r1.ood_acc, abs=tol)
    assert int(ns["retention"].sum()) == r1.size_retention
    assert int(ns["augmentation"].sum()) == r1.size_augmentation
    # round 2: Eq. (7), the termination check's two terms, the new head on the reversed test set
    assert ns["train_acc"] == pytest.approx(r2.train_acc, abs=tol)
    assert ns["kept"] == pytest.approx(r2.retention_acc, abs=tol)
    assert ns["ood2"] == pytest.approx(r2.ood_acc, abs=tol)
    assert (ns["train_acc"] + ns["kept"] >= 1.30) == bool(r2.accepted)
    # what the cells print is what the library recorded
    assert f"training accuracy {r1.train_acc:.1%}, reversed test set {r1.ood_acc:.1%}" in printed
    assert f"round 2: training {r2.train_acc:.1%} + retention {r2.retention_acc:.1%}" in printed
    assert f"reversed test set {r2.ood_acc:.1%}" in printed  # percentages, as the round table prints them


def test_the_written_out_featurizer_after_round_2_is_the_librarys():
    """Not only the accuracies: round 2 leaves phi where the library's round 2 leaves it."""
    import torch

    from featlib.feature_learning import learn_features

    case = CASES["other data and seed"]
    ns, _ = run_chapter(case, upto=LIBRARY)
    two = learn_features(ns["train"], "ifeat", ns["Net"], seed=ns["seed"], tests={"reversed": ns["test"]},
                         steps_per_round=ns["steps_per_round"], max_rounds=2, retain_weight=ns["retain_weight"])
    assert bool(two.rounds["accepted"].iloc[1]), "round 2 must be kept for its featurizer to be the library's"
    for (name, ours), theirs in zip(ns["phi"].named_parameters(), two.model.featurizer.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5, msg=name)


def test_the_figures_erm_features_train_as_long_as_feat_did():
    ns, _ = run_chapter(CASES["other data and seed"])
    assert ns["erm"].steps == ns["feat"].steps == int(ns["feat"].rounds["steps"].sum())
    assert len(ns["feat"].rounds) * ns["steps_per_round"] == ns["feat"].steps


def test_the_penalty_choice_sentence_writes_powers_of_ten_and_names_each_rule():
    from featbook import leaks, own_data_views, prose

    assert prose.power(1e3, plain_below=1) == "10³" and prose.power(10.0, plain_below=1) == "10¹"
    assert prose.power(0.01, plain_below=1) == "10⁻²" and prose.power(100.0) == "100"
    test = {10.0: 0.389, 1e5: 0.676}
    two = own_data_views.penalty_choice(10.0, 1e5, test)
    assert two == ("In this run, choosing on all held-out examples picks 10¹ (test 38.9%); choosing on those "
                   "against the shortcut picks 10⁵ (test 67.6%)")
    same = own_data_views.penalty_choice(1e5, 1e5, test)
    assert same.startswith("Here both rules pick 10⁵ (test 67.6%)")
    for text in (two, same):
        assert "1e" not in text and not leaks.scan_text(text)
