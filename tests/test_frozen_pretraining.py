"""Chapter 03's frozen-feature study (featlib.experiments.gap_studies.frozen_pretraining): its ERM
snapshot after Table 6's epochs is the ERM learner's network (so its cell at that length is Table
2's ERM-feature protocol without warm-up), and every objective's heads train on every snapshot."""
import pytest
import torch

from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment
from featlib.experiments.gap_studies import frozen_pretraining

TINY = dict(n_train=400, n_test=200, n_val=200, hidden_dim=16, epoch_scale=0.04, penalty_weights=(1e2, 1e4),
            ood_steps=20, eval_every=10)


def test_the_snapshot_at_table6s_epochs_is_the_erm_learners_network():
    protocol = CMNISTProtocol(dataset="cmnist025", seeds=(1,), learners=("erm",), objectives=("erm",), **TINY)
    experiment = ColoredMNISTExperiment(protocol, progress=False, device=torch.device("cpu"))
    erm = experiment.features("erm", 1)  # Table 6's 150 epochs x 0.04 = 6
    assert erm.epochs == 6
    rows = frozen_pretraining(1, torch.device("cpu"), erm_epochs=(0, 6), objectives=("erm", "irmv1"), **TINY)
    assert set(rows["erm_epochs"]) == {0, 6, rows.loc[rows["learner"] == "ifeat", "erm_epochs"].iloc[0]}
    assert len(rows) == 3 * (1 + 2)  # 3 feature sets: ERM has one configuration, IRMv1 two
    ours = rows[(rows["learner"] == "erm") & (rows["erm_epochs"] == 6) & (rows["objective"] == "erm")]
    table2 = experiment.piece("erm", "erm", 1)  # Table 2's ERM cell on the ERM learner's features
    assert float(ours["worst_test_acc"].iloc[0]) == float(table2["worst_test_acc"].iloc[0])
    assert rows["diverged_step"].eq(-1).all() and rows["val_acc"].between(0, 1).all()


def test_the_clove_study_changes_one_of_the_authors_choices_at_a_time_and_scores_every_length():
    """``clove-01`` (featlib.experiments.gap_studies.clove_01): CLOvE on the three frozen features as
    the protocol trains it, without the head's L2, on one random minibatch per environment each step,
    and both, scored at every ``eval_every`` steps. Each variant differs by its change alone: with
    the protocol's L2 at zero, ``no-l2`` is the protocol's runs; with a minibatch as large as an
    environment, ``minibatch`` is too (every row each step, in another order)."""
    from featlib.experiments.gap_studies import CLOVE_VARIANTS, clove_01

    tiny = {k: v for k, v in TINY.items() if k not in ("ood_steps", "eval_every")}
    # an L2 that 20 steps feel, and environments of 1,200 images, more than the minibatch's 512
    rows = clove_01(1, torch.device("cpu"), steps=20, eval_every=10, **(tiny | {"l2": 0.5, "n_train": 2400}))
    assert set(rows["variant"]) == {v for v, _, _ in CLOVE_VARIANTS} and set(rows["learner"]) == {"erm", "bonsai", "ifeat"}
    assert set(rows["objective"]) == {"clove"} and set(rows["step"]) == {0, 10, 20}
    assert len(rows) == 4 * 3 * 3 * 2 * 6  # variants x learners x evaluations x weights x pre-training lengths
    key = ["learner", "penalty_weight", "pretrain_epochs", "step"]

    def variant(frame, name):
        return frame[frame["variant"] == name].set_index(key).sort_index()

    assert not variant(rows, "protocol")["train_acc"].equals(variant(rows, "no-l2")["train_acc"])
    assert not variant(rows, "protocol")["train_acc"].equals(variant(rows, "minibatch")["train_acc"])
    rows = clove_01(1, torch.device("cpu"), steps=20, eval_every=10, **(tiny | {"l2": 0.0}))
    for column in ("train_acc", "worst_test_acc", "val_acc"):
        assert variant(rows, "protocol")[column].equals(variant(rows, "no-l2")[column])


def test_a_minibatch_as_large_as_the_data_trains_as_the_full_batch_and_only_the_plain_path_takes_one():
    """OODStageConfig(minibatch=b) draws b rows of each training environment per step; with b at
    least an environment's size every row is drawn, so the step equals the full batch's (float64)."""
    from dataclasses import replace

    import pytest

    from featlib.models.stacked import StackedHeads
    from featlib.training.ood_stage import (Environments, LabelledInputs, OODStageConfig, StackRuns,
                                            train_stack)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 120, 6, generator=g, dtype=torch.float64)
    y = (torch.rand(120, generator=g) < 0.5).long()
    train = LabelledInputs(x, y, [slice(0, 60), slice(60, 120)])
    tests = [LabelledInputs(x[:, :30], y[:30])]
    head = torch.nn.Linear(6, 1).double()
    config = OODStageConfig("clove", steps=15, eval_every=5, path="plain")

    def history(c):
        stack = StackedHeads([[head] * 2]).double()
        return train_stack(StackRuns.heads(stack, torch.tensor([[10.0, 1000.0]])), Environments(train, tests), c)

    full, whole = history(config), history(replace(config, minibatch=60))
    assert torch.allclose(torch.as_tensor(full.train_acc), torch.as_tensor(whole.train_acc))
    assert torch.allclose(torch.as_tensor(full.penalty), torch.as_tensor(whole.penalty), rtol=1e-9, atol=1e-12)
    part = history(replace(config, minibatch=10))
    assert not torch.allclose(torch.as_tensor(full.penalty), torch.as_tensor(part.penalty))
    with pytest.raises(ValueError, match="plain path only"):
        replace(config, path="fast", minibatch=10)


def test_a_study_stopped_between_objectives_resumes_from_the_parts_it_finished(tmp_path, monkeypatch):
    """``ood_length`` (and so ``clove-01``, one call per variant) keeps each objective as a verified
    part in ``cache_dir/study-parts`` (gap_studies.study_part): run again after losing one part, it
    trains that objective only and returns the same rows, to the bit."""
    import pandas as pd

    from featlib.experiments import gap_studies

    tiny = {k: v for k, v in TINY.items() if k not in ("ood_steps", "eval_every")}
    cpu = torch.device("cpu")
    args = dict(steps=20, eval_every=10, objectives=("erm", "irmv1", "vrex"), cache_dir=tmp_path, **tiny)
    whole = gap_studies.ood_length(1, cpu, "cmnist025", **args)
    parts = sorted((tmp_path / "study-parts").glob("*.csv"))
    assert [p.name.split("-")[4] for p in parts] == ["erm", "irmv1", "vrex"]
    next(p for p in parts if "-irmv1-" in p.name).unlink()  # as if killed while training IRMv1
    trained = []
    real = gap_studies.train_stack
    monkeypatch.setattr(gap_studies, "train_stack", lambda runs, envs, config: trained.append(config.objective)
                        or real(runs, envs, config))
    again = gap_studies.ood_length(1, cpu, "cmnist025", **args)
    assert trained == ["irmv1"]
    pd.testing.assert_frame_equal(again, whole, check_exact=True)
    other = gap_studies.ood_length(1, cpu, "cmnist025", **(args | {"steps": 10}))  # another study: its own parts
    assert trained == ["irmv1", "erm", "irmv1", "vrex"] and set(other["step"]) == {0, 10}


def test_the_erm_length_study_trains_irmx_on_erm_features_only(tmp_path):
    """ood-length-025-erm: IRMX on ColoredMNIST-025's frozen ERM features, the protocol's grid,
    scored every 500 steps to 4,000 (here shortened), its parts apart from ood-length-025's;
    chapter 04 reads it as a length study of that cell (cell_evidence)."""
    import inspect

    from featlib.experiments import gap_studies
    from featlib.experiments.colored_mnist import CMNISTProtocol

    study = gap_studies.STUDIES.get("ood-length-025-erm")
    defaults = {k: v.default for k, v in inspect.signature(study).parameters.items()}
    assert defaults["steps"] == 4000 and defaults["eval_every"] == 500 and defaults["dataset"] == "cmnist025"
    assert gap_studies.study_key("ood-length-025-erm") != gap_studies.study_key("ood-length-025")
    tiny = {k: v for k, v in TINY.items() if k not in ("ood_steps", "eval_every")}
    rows = study(1, torch.device("cpu"), steps=20, eval_every=10, cache_dir=tmp_path, **tiny)
    assert set(rows["learner"]) == {"erm"} and set(rows["objective"]) == {"irmx"}
    assert set(rows["step"]) == {0, 10, 20} and set(rows["dataset"]) == {"cmnist025"}
    n_configs = len(CMNISTProtocol(dataset="cmnist025", **tiny).configurations("irmx"))
    assert len(rows) == 3 * n_configs
    evidence = gap_studies.cell_evidence({"ood-length-025-erm": rows}, "cmnist025", "erm", "irmx",
                                         protocol=CMNISTProtocol(dataset="cmnist025", ood_steps=20,
                                                                         penalty_weights=TINY["penalty_weights"]))
    assert list(evidence["change"]) == ["10 OOD steps", "20 OOD steps"]
    assert list(evidence["protocol"]) == [False, True]


def test_the_frozen_pretraining_study_resumes_from_its_finished_objectives(tmp_path, monkeypatch):
    """frozen_pretraining keeps each objective as a part too: losing one retrains that one only."""
    import pandas as pd

    from featlib.experiments import gap_studies

    args = dict(erm_epochs=(0, 6), objectives=("erm", "irmv1"), cache_dir=tmp_path, **TINY)
    whole = gap_studies.frozen_pretraining(1, torch.device("cpu"), **args)
    parts = sorted((tmp_path / "study-parts").glob("frozen-pretraining-*.csv"))
    assert len(parts) == 2
    next(p for p in parts if "-irmv1-" in p.name).unlink()
    trained = []
    real = gap_studies.train_stack
    monkeypatch.setattr(gap_studies, "train_stack", lambda runs, envs, config: trained.append(config.objective)
                        or real(runs, envs, config))
    again = gap_studies.frozen_pretraining(1, torch.device("cpu"), **args)
    assert trained == ["irmv1"]
    pd.testing.assert_frame_equal(again, whole, check_exact=True)



def test_feat_against_lengths_seed_by_seed_sets_each_seeds_feat_against_its_own_best_length():
    """Per seed: FeAT's best weight on that seed minus the best length of that seed's curve (not of
    the mean curve), by hand on a two-seed frame; and the sentence chapter 03 says of it."""
    import pandas as pd

    from featbook.ch03_views import seed_by_seed_sentence
    from featlib.experiments.cmnist_analysis import feat_against_lengths_by_seed

    def row(learner, seed, objective, epochs, weight, acc):
        return {"dataset": "cmnist025", "learner": learner, "seed": seed, "objective": objective,
                "pretrain_epochs": epochs, "penalty_weight": weight, "worst_test_acc": acc, "val_acc": acc,
                "train_acc": acc, "diverged_step": -1}

    erm = pd.DataFrame([
        # irmv1: best length 100 in seed 1 (0.66), 0 in seed 2 (0.64); clove: 0.70 and 0.60
        row("erm", 1, "irmv1", 0, 10.0, 0.50), row("erm", 1, "irmv1", 100, 10.0, 0.66),
        row("erm", 2, "irmv1", 0, 10.0, 0.64), row("erm", 2, "irmv1", 100, 10.0, 0.55),
        row("erm", 1, "clove", 0, 10.0, 0.70), row("erm", 1, "clove", 100, 10.0, 0.65),
        row("erm", 2, "clove", 0, 10.0, 0.60), row("erm", 2, "clove", 100, 10.0, 0.58),
    ])
    feat = pd.DataFrame([
        # each seed's FeAT at its own best weight: irmv1 0.70 and 0.69, clove 0.67 and 0.63
        row("ifeat", 1, "irmv1", 0, 10.0, 0.70), row("ifeat", 1, "irmv1", 0, 100.0, 0.60),
        row("ifeat", 2, "irmv1", 0, 10.0, 0.40), row("ifeat", 2, "irmv1", 0, 100.0, 0.69),
        row("ifeat", 1, "clove", 0, 10.0, 0.67), row("ifeat", 2, "clove", 0, 10.0, 0.63),
    ])
    by_seed = feat_against_lengths_by_seed(erm, feat).set_index("objective")
    assert by_seed.loc["irmv1", "margins"] == pytest.approx({1: 4.0, 2: 5.0})
    assert by_seed.loc["clove", "margins"] == pytest.approx({1: -3.0, 2: 3.0})
    assert by_seed.loc["clove", "mean"] == pytest.approx(0.0, abs=1e-9) and by_seed.loc["clove", "std"] == pytest.approx(3.0)
    assert list(by_seed["ahead"]) == [1, 2] and set(by_seed["seeds"]) == {2}
    said = seed_by_seed_sentence(by_seed.reset_index())
    assert said.startswith("Seed by seed (2\xa0seeds, ") and "lead in every seed for 1 of the 2" in said
    assert "CLOvE in 1 of 2, by 0.0 ± 3.0 points on average" in said
