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
