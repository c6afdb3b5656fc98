"""Numbers printed in the paper, kept as data so chapters can show them *beside* ours, labelled.

Nothing here is ever used in place of a computed result.
"""
from __future__ import annotations

#: Table 2: OOD accuracy (%) on ColoredMNIST, mean and std over 10 seeds, per dataset,
#: objective and feature initialisation.
TABLE2: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "cmnist025": {
        "erm": {"erm-nf": (17.14, 0.73), "erm": (12.40, 0.32), "bonsai": (11.21, 0.49), "feat": (17.27, 2.55)},
        "irmv1": {"erm-nf": (67.29, 0.99), "erm": (59.81, 4.46), "bonsai": (70.28, 0.72), "feat": (70.57, 0.68)},
        "vrex": {"erm-nf": (68.62, 0.73), "erm": (65.96, 1.29), "bonsai": (70.31, 0.66), "feat": (70.82, 0.59)},
        "irmx": {"erm-nf": (67.00, 1.95), "erm": (64.05, 0.88), "bonsai": (70.46, 0.42), "feat": (70.78, 0.61)},
        "ib_irm": {"erm-nf": (56.09, 2.04), "erm": (59.81, 4.46), "bonsai": (70.28, 0.72), "feat": (70.57, 0.68)},
        "clove": {"erm-nf": (58.67, 7.69), "erm": (65.78, 0.00), "bonsai": (65.57, 3.02), "feat": (65.78, 2.68)},
        "iga": {"erm-nf": (51.22, 3.67), "erm": (62.43, 3.06), "bonsai": (70.17, 0.89), "feat": (67.11, 3.40)},
        "fishr": {"erm-nf": (69.38, 0.39), "erm": (67.74, 0.90), "bonsai": (68.75, 1.10), "feat": (70.56, 0.97)},
    },
    "cmnist01": {
        "erm": {"erm-nf": (73.06, 0.71), "erm": (73.75, 0.49), "bonsai": (70.95, 0.93), "feat": (76.05, 1.45)},
        "irmv1": {"erm-nf": (76.89, 3.25), "erm": (73.84, 0.56), "bonsai": (76.71, 4.10), "feat": (82.33, 1.77)},
        "vrex": {"erm-nf": (83.52, 2.52), "erm": (81.20, 3.27), "bonsai": (82.61, 1.76), "feat": (84.70, 0.69)},
        "irmx": {"erm-nf": (81.61, 1.98), "erm": (75.97, 0.88), "bonsai": (80.28, 1.62), "feat": (84.34, 0.97)},
        "ib_irm": {"erm-nf": (75.81, 0.63), "erm": (73.84, 0.56), "bonsai": (76.71, 4.10), "feat": (82.33, 1.77)},
        "clove": {"erm-nf": (75.66, 10.6), "erm": (74.73, 0.36), "bonsai": (72.73, 1.18), "feat": (75.12, 1.08)},
        "iga": {"erm-nf": (74.20, 2.45), "erm": (73.74, 0.48), "bonsai": (74.72, 3.60), "feat": (83.46, 2.17)},
        "fishr": {"erm-nf": (77.29, 1.61), "erm": (82.23, 1.35), "bonsai": (84.19, 0.66), "feat": (84.26, 0.93)},
    },
}

#: Table 2, last row: the oracle trained without the colour shortcut.
ORACLE: dict[str, tuple[float, float]] = {"cmnist025": (71.97, 0.34), "cmnist01": (86.55, 0.27)}

#: Table 7 (Appendix F.1): FeAT per round, mean and std (%). None where the paper prints "-".
TABLE7: dict[str, dict[str, list[tuple[float, float] | None]]] = {
    "cmnist025": {
        "train_acc": [(85.08, 0.14), (71.87, 0.96), (84.93, 1.26)],
        "retention_acc": [None, (88.11, 4.28), (43.82, 0.59)],
        "ood_acc": [(11.08, 0.30), (70.64, 0.62), (10.07, 0.26)],
    },
    "cmnist01": {
        "train_acc": [(88.63, 0.15), (74.25, 1.23), (86.07, 0.36), (77.29, 0.24)],
        "retention_acc": [None, (85.91, 1.78), (48.05, 1.39), (29.09, 1.15)],
        "ood_acc": [(73.50, 0.41), (17.32, 2.69), (85.40, 0.54), (12.48, 2.85)],
    },
}

#: The round at which the paper reports that FeAT's automatic termination stopped (Sec. 6).
FEAT_STOP_ROUND = {"cmnist025": 2, "cmnist01": 3}
