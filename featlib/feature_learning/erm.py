"""ERM feature learning: the paper's "ERM" features (Table 2; 150 full-batch epochs on
ColoredMNIST-025, 500 on -01, Table 6; Table 12's overall steps on WILDS) and round 1 of Bonsai.

:func:`erm` minimises the mean loss over all training examples (environments pooled) on any
:class:`.base.Loop`. :func:`erm_snapshots` keeps copies of one longer full-batch run at several
epochs (150, 300 and 450 by default), e.g. to compare with GradCAM what ERM's features look at as
training goes on (Fig. 4 / Fig. 6).
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import pandas as pd
from torch import nn

from ..hparams import APPENDIX_F1, TABLE6, values
from ..validation import check_int, check_sequence
from .base import Learned, Loop
from .learners import register
from .full_batch_loop import FullBatchLoop

PAPER = values(APPENDIX_F1)


def erm_loss(loop: Loop, net: nn.Module):
    """The pooled mean loss of ``net``, as a loop's ``loss_fn(x, y, index)``."""
    return lambda x, y, index: loop.per_sample_loss(net.classifier(net.featurizer(x)), y).mean()


def erm_row(loop: Loop, net: nn.Module, steps: int) -> dict:
    """ERM's one history row: training accuracy and the OOD score after ``steps``."""
    correct = loop.predict(net.classifier, loop.train_features(net.featurizer)) == loop.labels
    return {"round": 1, loop.length_unit: steps, "train_acc": correct.float().mean().item(),
            **loop.score(net.featurizer, {"": net.classifier}), "accepted": True}


@register("erm", label="ERM", order=1, schedule=TABLE6["cmnist025"]["erm"])
def erm(loop: Loop, *, steps: int = TABLE6["cmnist025"]["erm"]["epochs"]) -> Learned:
    """ERM from the seed's random initialisation for ``steps`` steps; one history row."""
    check_int("steps", steps, minimum=0)
    state = loop.resume("erm")
    if (learned := loop.finished("erm", state)) is not None:
        return learned
    net = loop.new_network(loop.seed)
    loop.train("erm", {"model": net}, erm_loss(loop, net), steps, save=lambda: {"learner": "erm"})
    return loop.finish("erm", net, [erm_row(loop, net, steps)], steps)


def erm_snapshots(
    data, seed: int, *, epochs: Sequence[int] = (150, 300, 450), model: str = "mlp",
    hidden_dim: int = PAPER["hidden_dim"], lr: float = PAPER["lr"], l2: float = PAPER["l2"], progress: bool = False,
) -> dict[int, Learned]:
    """One full-batch ERM run of ``max(epochs)`` epochs (one Adam optimiser) with a copy of the
    network kept after each epoch count in ``epochs``: ``{epoch: Learned}`` in increasing order.
    Each snapshot is what ERM with that many epochs returns (same network, same one-row history),
    at the cost of the longest run only."""
    epochs = check_sequence("epochs", epochs, min_length=1)
    for e in epochs:
        check_int("epochs", e, minimum=1)
    wanted = sorted(set(int(e) for e in epochs))
    loop = FullBatchLoop(data, seed, model=model, hidden_dim=hidden_dim, lr=lr, l2=l2, progress=progress)
    net = loop.new_network(seed)
    snapshots: dict[int, Learned] = {}

    def keep(epoch: int) -> None:
        if epoch in wanted:
            snapshots[epoch] = Learned("erm", copy.deepcopy(net), pd.DataFrame([erm_row(loop, net, epoch)]), epoch)

    loop.on_step = keep
    loop.train("erm", {"model": net}, erm_loss(loop, net), wanted[-1])
    return {e: snapshots[e] for e in wanted}
