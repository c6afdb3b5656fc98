"""Chapter 03's frozen-feature study (featlib.experiments.gap_studies.frozen_pretraining): its ERM
snapshot after Table 6's epochs is the ERM learner's network (so its cell at that length is Table
2's ERM-feature protocol without warm-up), and every objective's heads train on every snapshot."""
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


def test_the_clove_study_changes_only_the_heads_l2_and_scores_every_length():
    """``clove-01`` (featlib.experiments.gap_studies.clove_01): CLOvE on the three frozen features with
    the protocol's L2 on the head and without it, scored at every ``eval_every`` steps. Its two
    variants differ by the L2 alone: with the protocol's L2 at zero they are the same runs."""
    from featlib.experiments.gap_studies import clove_01

    tiny = {k: v for k, v in TINY.items() if k not in ("ood_steps", "eval_every")}
    rows = clove_01(1, torch.device("cpu"), steps=20, eval_every=10, **(tiny | {"l2": 0.5}))  # an L2 20 steps feel
    assert set(rows["head_l2"]) == {"protocol", "none"} and set(rows["learner"]) == {"erm", "bonsai", "ifeat"}
    assert set(rows["objective"]) == {"clove"} and set(rows["step"]) == {0, 10, 20}
    assert len(rows) == 2 * 3 * 3 * 2 * 6  # variants x learners x evaluations x weights x pre-training lengths
    key = ["learner", "penalty_weight", "pretrain_epochs", "step"]
    protocol, none = (rows[rows["head_l2"] == v].set_index(key).sort_index() for v in ("protocol", "none"))
    assert not protocol["train_acc"].equals(none["train_acc"])  # the L2 changes training
    rows = clove_01(1, torch.device("cpu"), steps=20, eval_every=10, **(tiny | {"l2": 0.0}))
    protocol, none = (rows[rows["head_l2"] == v].set_index(key).sort_index() for v in ("protocol", "none"))
    for column in ("train_acc", "worst_test_acc", "val_acc"):
        assert protocol[column].equals(none[column])
