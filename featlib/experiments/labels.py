"""The names readers see: learners, objectives and datasets, one place for all chapters.

Tables and figures show these labels, never the ids that parameters take (``"ib_irm"``,
``"cmnist01"``). The paper's FeAT column is iFeAT (Sec. 5, "Practical implementations":
"Throughout the whole experiment, we will use iFeAT"), so iFeAT carries the paper's name and
Algorithm 1 with every set kept is labelled as such.

A learner's and a dataset's label is read from its registration (:class:`featlib.feature_learning.Learner`'s
``label``, a dataset spec's ``title``), when asked: a learner or dataset registered in a file of
one's own has its label and its place in the tables without an entry here.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

#: Table 2's column that learns no features first (the whole network from scratch), before the
#: registered learners.
NO_FEATURE_LEARNING = {"erm-nf": "ERM-NF"}


class RegisteredLabels(Mapping):
    """A read-only mapping name -> label built from the registries each time it is read, in the
    order of the tables' columns (learners) or of registration (datasets)."""

    def __init__(self, build: Callable[[], dict[str, str]]):
        self._build = build

    def __getitem__(self, key: str) -> str:
        return self._build()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())

    def __repr__(self) -> str:
        return repr(self._build())


def _learner_labels() -> dict[str, str]:
    from ..feature_learning import FEATURE_LEARNERS

    return NO_FEATURE_LEARNING | {n: FEATURE_LEARNERS.get(n).label for n in FEATURE_LEARNERS.table_order()}


def _algorithm_labels() -> dict[str, str]:
    from ..feature_learning import FEATURE_LEARNERS

    return {n: FEATURE_LEARNERS.get(n).short_label for n in FEATURE_LEARNERS.table_order()}


def _dataset_labels() -> dict[str, str]:
    from ..data.colored_mnist import COLORED_MNIST
    from ..data.wilds_data import WILDS_DATASETS

    return ({n: COLORED_MNIST.get(n).title or n for n in COLORED_MNIST}
            | {n: WILDS_DATASETS.get(n).title for n in WILDS_DATASETS})


#: Learners (ColoredMNIST and WILDS), in the order of the tables' columns: ERM-NF, then every
#: registered feature learner (:meth:`featlib.feature_learning.learners.LearnerRegistry.table_order`).
LEARNER_LABELS: Mapping[str, str] = RegisteredLabels(_learner_labels)

#: Each registered learner under its algorithm's own name (ERM, Bonsai, iFeAT, FeAT), where learners
#: are compared as algorithms rather than as the paper's columns (the cost chapter).
ALGORITHM_LABELS: Mapping[str, str] = RegisteredLabels(_algorithm_labels)

#: The sentence of the paper that makes iFeAT its FeAT column.
IFEAT_IS_FEAT = ("The paper's FeAT column is iFeAT: \"Throughout the whole experiment, we will use iFeAT\" "
                 "(Sec. 5, Practical implementations). Algorithm 1 with every augmentation and retention set kept "
                 "is a different learner with no column in the paper.")

#: OOD objectives, ColoredMNIST's and WILDS', and the DFR rows.
OBJECTIVE_LABELS = {"erm": "ERM", "irmv1": "IRMv1", "vrex": "V-REx", "irmx": "IRMX", "ib_irm": "IB-IRM",
                    "clove": "CLOvE", "iga": "IGA", "fishr": "Fishr", "group_dro": "GroupDRO",
                    "dfr": "DFR", "dfr-s": "DFR-s"}

#: Datasets, ColoredMNIST's (:data:`featlib.data.colored_mnist.COLORED_MNIST`) then WILDS'
#: (:data:`featlib.data.wilds_data.WILDS_DATASETS`), each registry in its order.
DATASET_LABELS: Mapping[str, str] = RegisteredLabels(_dataset_labels)


def label(kind: str, key: str) -> str:
    """The label of ``key`` among ``kind`` ("learner", "objective" or "dataset"); for an objective
    of one's own (featlib.experiments.objective_files) the ``label`` its class declares; else the key itself."""
    table = {"learner": LEARNER_LABELS, "objective": OBJECTIVE_LABELS, "dataset": DATASET_LABELS}[kind]
    if kind == "objective" and key not in table:
        return declared_label(key) or key
    return table.get(key, key)


def declared_label(name: str) -> str | None:
    """The ``label`` that the objective class registered as ``name`` declares, if any (a string)."""
    from ..objectives import OBJECTIVES

    if name not in OBJECTIVES:
        return None
    value = getattr(OBJECTIVES.get(name), "label", None)
    return value if isinstance(value, str) else None
