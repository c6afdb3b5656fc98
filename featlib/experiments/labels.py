"""The names readers see: learners, objectives and datasets, one place for all chapters.

Tables and figures show these labels, never the ids that parameters take (``"ib_irm"``,
``"cmnist01"``). The paper's FeAT column is iFeAT (Sec. 5, "Practical implementations":
"Throughout the whole experiment, we will use iFeAT"), so iFeAT carries the paper's name and
Algorithm 1 with every set kept is labelled as such.
"""
from __future__ import annotations

#: Learners (ColoredMNIST and WILDS), in the order of the tables' columns.
LEARNER_LABELS = {"erm-nf": "ERM-NF", "erm": "ERM", "bonsai": "Bonsai", "ifeat": "FeAT (iFeAT)",
               "feat": "FeAT, Alg. 1 (all sets)"}

#: The sentence of the paper that makes iFeAT its FeAT column.
IFEAT_IS_FEAT = ("The paper's FeAT column is iFeAT: \"Throughout the whole experiment, we will use iFeAT\" "
                 "(Sec. 5, Practical implementations). Algorithm 1 with every augmentation and retention set kept "
                 "is a different learner with no column in the paper.")

#: OOD objectives, ColoredMNIST's and WILDS', and the DFR rows.
OBJECTIVE_LABELS = {"erm": "ERM", "irmv1": "IRMv1", "vrex": "V-REx", "irmx": "IRMX", "ib_irm": "IB-IRM",
                    "clove": "CLOvE", "iga": "IGA", "fishr": "Fishr", "group_dro": "GroupDRO",
                    "dfr": "DFR", "dfr-s": "DFR-s"}

DATASET_LABELS = {"cmnist025": "ColoredMNIST-025", "cmnist01": "ColoredMNIST-01",
                  "cmnist025-patch": "ColoredMNIST-025 (colour patch)", "cmnist01-patch": "ColoredMNIST-01 (colour patch)",
                  "camelyon17": "Camelyon17", "civilcomments": "CivilComments", "fmow": "FMoW",
                  "iwildcam": "iWildCam", "amazon": "Amazon", "rxrx1": "RxRx1"}


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
