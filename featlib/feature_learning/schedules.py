"""The feature learners' schedules: Table 6's epochs per round, on a dataset and at a scale.

Below the experiments, so that what estimates or measures a learner's run (the memory model, the
cost benchmark) reads a schedule without importing the protocol (``featlib.experiments.colored_mnist``
re-exports these names, where they lived first).
"""
from __future__ import annotations

from dataclasses import replace

from ..data.colored_mnist import COLORED_MNIST
from ..hparams import TABLE6
from ..validation import check_choice, check_positive
from .learners import FEATURE_LEARNERS

#: Table 6 (Appendix F.1) per dataset and learner: full-batch epochs of each round
#: (featlib.hparams.TABLE6, with the decisions of featlib.hparams.TABLE6_DECISIONS).
SCHEDULES: dict[str, dict[str, dict]] = TABLE6


def _scaled(value, scale: float):
    if isinstance(value, tuple):
        return tuple(_scaled(v, scale) for v in value)
    return max(1, int(round(value * scale)))



def schedule_dataset(dataset: str) -> str:
    """The dataset whose Table 6 epochs (:data:`SCHEDULES`) ``dataset`` uses: itself, or for a
    variant that only draws the colour differently (``"cmnist025-patch"``) the dataset with the
    same label noise and colour flips drawn as channels (``"cmnist025"``); a dataset Table 6 does
    not list (one of one's own) is itself, its learners on their registered schedules."""
    spec = COLORED_MNIST.get(dataset)
    if dataset in SCHEDULES:
        return dataset
    channel = replace(spec, shortcut="channel")
    for name in SCHEDULES:
        if name in COLORED_MNIST and COLORED_MNIST.get(name) == channel:
            return name
    return dataset


def schedule(dataset: str, learner: str, epoch_scale: float = 1.0) -> dict:
    """Table 6's epochs of the feature learner ``learner`` on ``dataset`` (a patch variant uses
    its base dataset's; a learner or dataset Table 6 does not list, the schedule the learner was
    registered with), each multiplied by ``epoch_scale`` and rounded (at least 1): the keyword
    arguments ``epochs`` / ``round_epochs`` and ``synthesis_epochs`` / ``epochs_per_round``."""
    check_choice("learner", learner, FEATURE_LEARNERS.table_order())
    check_positive("epoch_scale", epoch_scale)
    table6 = SCHEDULES.get(schedule_dataset(dataset), {})
    lengths = table6[learner] if learner in table6 else FEATURE_LEARNERS.get(learner).schedule
    return {k: _scaled(v, epoch_scale) for k, v in lengths.items()}


