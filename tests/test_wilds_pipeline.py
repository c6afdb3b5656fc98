"""The WILDS pipeline: shared FeAT bookkeeping, minibatch pieces, the stacked OOD stage, and the
whole protocol end to end on fabricated data through the real ``wilds`` loaders, including a
run killed after its first round and resumed."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch

from featlib.data.wilds_fabricate import fabricate_wilds
from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol
from featlib.experiments.wilds_report import dfr_table_frame, table3_frame
from featbook.wilds_views import rounds_table_frame
from featlib.feature_learning import FeATRounds
from featlib.objectives import cross_entropy_risk, make_objective, scale_gradients
from featlib.training.minibatch import Checkpoint, DomainBatchSampler
from featlib.training.wilds_ood_stage import WildsOODConfig, best_epochs, select, train_heads


# ---------------------------------------------------------------------------------- FeAT rounds
def test_feat_loss_on_a_batch_uses_the_batch_members_of_each_set():
    torch.manual_seed(0)
    n = 12
    rounds = FeATRounds(n, "feat", retain_weight=0.5)
    head = torch.nn.Linear(2, 2)
    splitter = rounds.accept(head)
    correct = torch.tensor([True] * 8 + [False] * 4)
    rounds.split(splitter, correct)
    losses, retained = torch.rand(n), torch.rand(n)
    full = rounds.loss(losses, [retained])
    expected = torch.maximum(losses.mean(), losses[~correct].mean()) + 0.5 * retained[correct].mean()
    assert torch.allclose(full, expected)
    # a batch: positions 0, 1, 9 -> D^a_1 holds only example 9
    index = torch.tensor([0, 1, 9])
    batch = rounds.loss(losses[index], [retained[index]], index)
    expected = torch.maximum(losses[index].mean(), losses[9]) + 0.5 * retained[[0, 1]].mean()
    assert torch.allclose(batch, expected)
    # the whole set as an explicit index equals the full-batch path
    assert torch.allclose(rounds.loss(losses, [retained], torch.arange(n)), full)
    # a batch with no member of the retention set leaves the retention term out
    only_wrong = torch.tensor([9, 10])
    assert torch.allclose(rounds.loss(losses[only_wrong], [retained[only_wrong]], only_wrong), losses[only_wrong].mean())


def test_feat_keeps_every_set_and_ifeat_only_the_latest():
    n = 10
    feat, ifeat = FeATRounds(n, "feat"), FeATRounds(n, "ifeat")
    for k in range(3):
        correct = torch.arange(n) >= k + 1
        for state in (feat, ifeat):
            state.split(state.accept(torch.nn.Linear(2, 2)), correct)
    assert len(feat.aug_sets) == 4 and len(feat.retention) == 3 and len(feat.heads) == 3
    assert len(ifeat.aug_sets) == 2 and len(ifeat.retention) == 1 and len(ifeat.heads) == 3
    copy = FeATRounds(n, "feat")
    copy.load_state_dict(feat.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(copy.aug_sets, feat.aug_sets))
    with pytest.raises(ValueError, match="ifeat"):
        FeATRounds(n, "ifeat").load_state_dict(feat.state_dict())


# ---------------------------------------------------------------------------------- minibatches
def test_domain_batches_hold_distinct_domains_and_resume_identically():
    domains = torch.tensor([0] * 30 + [1] * 20 + [2] * 5 + [3] * 45)
    sampler = DomainBatchSampler(domains, 12, 3, seed=4, stage="s", stop=50)
    batches = list(sampler)
    assert len(batches) == 50
    for batch in batches:
        assert len(batch) == 12
        assert len(set(domains[batch].tolist())) == 3
    resumed = list(DomainBatchSampler(domains, 12, 3, seed=4, stage="s", start=20, stop=50))
    assert resumed == batches[20:]
    other = list(DomainBatchSampler(domains, 12, 3, seed=5, stage="s", stop=50))
    assert other != batches
    only = np.zeros(100, dtype=int)
    only[[3, 40]] = 2
    picked = set(np.concatenate(list(DomainBatchSampler(domains, 4, 2, seed=0, stage="s", stop=10,
                                                        multiplicity=only))).tolist())
    assert picked <= {3, 40}


def test_checkpoint_round_trips_atomically(tmp_path):
    ckpt = Checkpoint(tmp_path / "c.pt", every=3)
    assert ckpt.load() is None and not ckpt.due(0) and ckpt.due(3) and not ckpt.due(4)
    ckpt.save({"a": torch.ones(2), "rows": [{"x": 1}]})
    assert torch.equal(ckpt.load()["a"], torch.ones(2))
    assert not list(tmp_path.glob("*.tmp"))


# ---------------------------------------------------------------------------------- objectives
def test_multiclass_irmv1_penalty_matches_a_finite_difference():
    torch.manual_seed(1)
    logits, y = torch.randn(7, 3), torch.randint(0, 3, (7,))
    objective = make_objective("irmv1", risk_fn=cross_entropy_risk)
    (grad,) = scale_gradients(objective, [logits], [y], create_graph=False)
    eps = 1e-3
    fd = (cross_entropy_risk(logits * (1 + eps), y) - cross_entropy_risk(logits * (1 - eps), y)) / (2 * eps)
    assert torch.allclose(grad, fd, atol=1e-4)
    # with run dimensions (P, n, C) each run gets its own derivative
    stacked = torch.stack([logits, 2 * logits])
    (grads,) = scale_gradients(objective, [stacked], [y], create_graph=False).unbind(0)
    (second,) = scale_gradients(objective, [2 * logits], [y], create_graph=False)
    assert torch.allclose(grads[0], grad) and torch.allclose(grads[1], second)


def test_group_dro_over_dataset_groups_follows_the_wilds_update():
    eta, n_groups = 0.5, 4
    mask = torch.tensor([True, True, False, True])
    objective = make_objective("group_dro", eta=eta, n_groups=n_groups, group_mask=mask, risk_fn=cross_entropy_risk)
    q = torch.tensor([1 / 3, 1 / 3, 0.0, 1 / 3])
    torch.manual_seed(0)
    for ids in ([0, 3], [1, 0], [3, 1]):
        logits = [torch.randn(5, 2) for _ in ids]
        targets = [torch.randint(0, 2, (5,)) for _ in ids]
        out = objective(logits, targets, env_ids=ids)
        risks = torch.stack([cross_entropy_risk(lg, t) for lg, t in zip(logits, targets)])
        q[ids] = q[ids] * torch.exp(eta * risks)
        q = q / q.sum()
        assert torch.allclose(out.loss, (q[ids] * risks).sum(), atol=1e-6)
        assert torch.allclose(objective.q, q, atol=1e-6)
    assert objective.q[2] == 0
    with pytest.raises(ValueError, match="env_ids"):
        objective([torch.randn(3, 2)], [torch.zeros(3, dtype=torch.long)], env_ids=[7])


def test_stacked_ood_heads_equal_training_each_penalty_alone():
    torch.manual_seed(0)
    n, d, C = 60, 5, 2
    feats, y = torch.randn(n, d), torch.randint(0, C, (n,))
    domains = torch.arange(n) % 3
    head = torch.nn.Linear(d, C)

    def score(W, b):
        return {"val": np.asarray(W[:, 0, 0]), "test": np.asarray(b[:, 0])}  # (class sums never move under CE)

    config = WildsOODConfig("irmv1", epochs=2, batch_size=12, domains_per_batch=2, lr=1e-2, penalty_weights=(0.1, 10.0))
    together = train_heads(feats, y, domains, 3, head, config, score, seed=3)
    for w in (0.1, 10.0):
        alone = train_heads(feats, y, domains, 3, head, WildsOODConfig(
            "irmv1", epochs=2, batch_size=12, domains_per_batch=2, lr=1e-2, penalty_weights=(w,)), score, seed=3)
        mine = together[np.isclose(together.penalty_weight, w)].reset_index(drop=True)
        assert len(mine) == 2 and mine.val_metric.nunique() == 2  # two epochs, and the head moved
        np.testing.assert_allclose(mine[["val_metric", "test_metric"]], alone[["val_metric", "test_metric"]], rtol=1e-5)
    erm = train_heads(feats, y, domains, 3, head, WildsOODConfig("erm", epochs=1, batch_size=12, domains_per_batch=2,
                                                                 lr=1e-2), score, seed=3)
    assert len(erm) == 1 and erm.penalty_weight.tolist() == [0.0]  # no sweep without a penalty


def test_selection_takes_the_best_epoch_then_the_best_mean_penalty():
    rows = []
    for seed in (0, 1):
        for w, val, test in ((0.1, [0.5, 0.7], [0.4, 0.6]), (10.0, [0.8, 0.6], [0.9, 0.2])):
            for epoch, (v, t) in enumerate(zip(val, test), 1):
                rows.append({"learner": "feat", "objective": "irmv1", "seed": seed, "penalty_weight": w,
                             "epoch": epoch, "val_metric": v + 0.01 * seed, "test_metric": t})
    best = best_epochs(pd.DataFrame(rows), ["learner", "objective", "seed"])
    assert sorted(best.epoch.tolist()) == [1, 1, 2, 2]
    table = select(best, ["learner", "objective"])
    assert table.penalty_weight.item() == 10.0 and table.test_mean.item() == pytest.approx(0.9)


# ---------------------------------------------------------------------------------- end to end
SMALL = dict(backbone="small_cnn", pretrained=False, epoch_scale=0.002, ood_epochs=2, resolution=32,
             batch_size=12, lr=0.003, checkpoint_every=5)


@pytest.fixture(scope="module")
def wilds_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("wilds")
    fabricate_wilds("camelyon17", root)
    fabricate_wilds("civilcomments", root, n_val=120, n_test=120)
    return root


def test_camelyon17_protocol_end_to_end(wilds_root, tmp_path):
    protocol = WildsProtocol("camelyon17", learners=("erm", "bonsai", "feat", "ifeat"), seeds=(0,), **SMALL)
    experiment = WildsExperiment(protocol, wilds_root, tmp_path)
    results = experiment.run()
    assert set(results.ood.learner) == {"erm", "bonsai", "feat", "ifeat"}
    assert set(results.ood.objective) == {"erm", "group_dro", "irmv1", "vrex", "irmx"}
    assert results.ood.val_metric.between(0, 1).all() and results.ood.test_metric.between(0, 1).all()
    table = table3_frame(results, "camelyon17")
    assert len(table) == 20 and "paper: Avg. acc. (%)" in table.columns
    dfr = dfr_table_frame(results, "camelyon17")
    assert set(dfr.Method) == {"DFR", "DFR-s"}
    assert (results.dfr.protocol == "train_test").all()
    assert (results.dfr.n_scored < len(experiment.data.labels("test"))).all()  # half of test is fitted on
    rounds = rounds_table_frame(results)
    assert rounds[rounds.learner == "Bonsai"]["round"].astype(str).tolist()[-1] == "synthesis"
    assert "random initialisation" in results.backbone
    # everything is cached: a second run reads back the same numbers without training
    before = {p.name: p.stat().st_mtime_ns for p in experiment.dir.iterdir()}
    # 4 learners x (embeddings, DFR, 5 objectives' OOD stage) were computed, and none of them again
    assert experiment.pieces_trained == 4 * (1 + 1 + 5)
    second = WildsExperiment(protocol, wilds_root, tmp_path)
    again = second.run()
    assert second.pieces_trained == 0  # chapter 05 then says its time is the time to read the cache
    pd.testing.assert_frame_equal(again.ood, results.ood)
    assert {p.name: p.stat().st_mtime_ns for p in experiment.dir.iterdir()} == before


def test_civilcomments_with_the_offline_text_backbone(wilds_root, tmp_path):
    protocol = WildsProtocol("civilcomments", learners=("erm", "feat"), seeds=(0,), backbone="minilm",
                             epoch_scale=0.0003, ood_epochs=2, max_token_length=24, lr=1e-4, checkpoint_every=50)
    results = WildsExperiment(protocol, wilds_root, tmp_path).run()
    assert "MiniLM" in results.backbone or "minilm" in results.backbone.lower()
    assert set(results.dfr.target) == {"label", "spurious"}
    table = table3_frame(results, "civilcomments")
    assert table["paper: Worst acc. (%)"].iloc[0] == "55.53 ± 1.78"  # ERM / ERM, the paper's, labelled
    assert results.ood.val_metric.between(0, 1).all()


def test_captions_and_titles_over_the_data_say_whether_it_is_fabricated(wilds_root, tmp_path):
    """Chapter 05's data section names the data a run read, from the folder on disk (its
    fabrication marker), not from a notebook's parameters: a copy without the marker reads as real."""
    import shutil

    import matplotlib.pyplot as plt

    from featbook import wilds_views
    from featlib.data.wilds_data import load_wilds
    from featlib.data.wilds_fabricate import MARKER

    data = load_wilds("camelyon17", wilds_root, resolution=32)
    assert wilds_views.is_fabricated(data) and wilds_views.data_kind(data) == "fabricated"
    assert "Camelyon17 (fabricated data), this run" in wilds_views.split_summary(data).caption
    figure = wilds_views.examples(data, per_group=2)
    assert figure.get_suptitle().startswith("Camelyon17 (fabricated data)")
    plt.close(figure)
    texts = load_wilds("civilcomments", wilds_root)
    assert "CivilComments (fabricated data)" in wilds_views.examples(texts, per_group=1).caption
    copy = tmp_path / "copy"
    shutil.copytree(wilds_root / "camelyon17_v1.0", copy / "camelyon17_v1.0")
    (copy / "camelyon17_v1.0" / MARKER).unlink()
    real = load_wilds("camelyon17", copy, resolution=32)
    assert not wilds_views.is_fabricated(real) and "Camelyon17 (real data)" in wilds_views.split_summary(real).caption


def test_bad_protocol_parameters_name_the_parameter():
    with pytest.raises(ValueError, match="dataset must be one of"):
        WildsProtocol("imagenet")
    with pytest.raises(ValueError, match="learners must be one of"):
        WildsProtocol("camelyon17", learners=("rfc",))
    with pytest.raises(ValueError, match="epoch_scale"):
        WildsProtocol("camelyon17", epoch_scale=-1.0)
    with pytest.raises(ValueError, match="backbone must be one of"):
        WildsProtocol("camelyon17", backbone="vgg")


def test_a_run_killed_after_its_first_round_resumes_without_redoing_it(wilds_root, tmp_path):
    args = ["--dataset", "camelyon17", "--root", str(wilds_root), "--learners", "feat", "--seeds", "0",
            "--backbone", "small_cnn", "--pretrained", "false", "--epoch-scale", "0.006", "--ood-epochs", "1",
            "--resolution", "32", "--batch-size", "12", "--lr", "0.003", "--checkpoint-every", "5", "--no-dfr"]
    cache, out = tmp_path / "cache", tmp_path / "out"
    env = {**os.environ, "FEATLIB_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "featlib.cli.run_wilds", *args, "--cache-dir", str(cache), "--out", str(out)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    state = None
    try:
        while time.time() < deadline and process.poll() is None:
            ckpts = list(cache.glob("*/learn-feat-s0.pt"))
            state = Checkpoint(ckpts[0]).load() if ckpts else None
            if state is not None and state.get("round", 1) >= 2:
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait()
    assert state is not None and state.get("round", 1) >= 2 and not state.get("done"), "the run was not caught mid-way"
    assert not (out / "provenance.json").exists()
    first_round = state["rows"][0]

    resumed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming feat (seed 0)" in resumed.stderr + resumed.stdout
    rows = pd.read_csv(out / "rounds.csv")
    assert rows.iloc[0]["train_acc"] == pytest.approx(first_round["train_acc"])

    # the resumed run gives what an uninterrupted one gives (same process settings: same threads)
    fresh_command = [sys.executable, "-m", "featlib.cli.run_wilds", *args, "--cache-dir", str(tmp_path / "fresh"),
                     "--out", str(tmp_path / "fresh-out")]
    assert subprocess.run(fresh_command, env=env, capture_output=True, timeout=300).returncode == 0
    fresh = pd.read_csv(tmp_path / "fresh-out" / "rounds.csv")
    pd.testing.assert_frame_equal(rows, fresh)
    pd.testing.assert_frame_equal(pd.read_csv(out / "ood.csv"), pd.read_csv(tmp_path / "fresh-out" / "ood.csv"))
    provenance = json.loads((out / "provenance.json").read_text())
    assert {"command", "commit", "device", "wall_time_s"} <= set(provenance)
