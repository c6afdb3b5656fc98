"""Numbers printed in the paper, kept as data so chapters can show them *beside* ours, labelled.

Nothing here is ever used in place of a computed result.

Table and figure numbers are those of the published paper (the numbering the project's protocol
notes use); the LaTeX source numbers tables one lower (two for the overhead table) and figures
from the GradCAM figure on one lower: TABLES and FIGURES give both.
"""
from __future__ import annotations

import re

#: Table 2: OOD accuracy (%) on ColoredMNIST, mean and std over 10 seeds, per dataset,
#: objective and learner. The paper's "FeAT" column is filed under "ifeat": its
#: experiments use iFeAT throughout (Sec. 5, "Practical implementations": "Throughout the whole
#: experiment, we will use iFeAT"). Algorithm 1 with every set kept has no column in the paper.
TABLE2: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "cmnist025": {
        "erm": {"erm-nf": (17.14, 0.73), "erm": (12.40, 0.32), "bonsai": (11.21, 0.49), "ifeat": (17.27, 2.55)},
        "irmv1": {"erm-nf": (67.29, 0.99), "erm": (59.81, 4.46), "bonsai": (70.28, 0.72), "ifeat": (70.57, 0.68)},
        "vrex": {"erm-nf": (68.62, 0.73), "erm": (65.96, 1.29), "bonsai": (70.31, 0.66), "ifeat": (70.82, 0.59)},
        "irmx": {"erm-nf": (67.00, 1.95), "erm": (64.05, 0.88), "bonsai": (70.46, 0.42), "ifeat": (70.78, 0.61)},
        "ib_irm": {"erm-nf": (56.09, 2.04), "erm": (59.81, 4.46), "bonsai": (70.28, 0.72), "ifeat": (70.57, 0.68)},
        "clove": {"erm-nf": (58.67, 7.69), "erm": (65.78, 0.00), "bonsai": (65.57, 3.02), "ifeat": (65.78, 2.68)},
        "iga": {"erm-nf": (51.22, 3.67), "erm": (62.43, 3.06), "bonsai": (70.17, 0.89), "ifeat": (67.11, 3.40)},
        "fishr": {"erm-nf": (69.38, 0.39), "erm": (67.74, 0.90), "bonsai": (68.75, 1.10), "ifeat": (70.56, 0.97)},
    },
    "cmnist01": {
        "erm": {"erm-nf": (73.06, 0.71), "erm": (73.75, 0.49), "bonsai": (70.95, 0.93), "ifeat": (76.05, 1.45)},
        "irmv1": {"erm-nf": (76.89, 3.25), "erm": (73.84, 0.56), "bonsai": (76.71, 4.10), "ifeat": (82.33, 1.77)},
        "vrex": {"erm-nf": (83.52, 2.52), "erm": (81.20, 3.27), "bonsai": (82.61, 1.76), "ifeat": (84.70, 0.69)},
        "irmx": {"erm-nf": (81.61, 1.98), "erm": (75.97, 0.88), "bonsai": (80.28, 1.62), "ifeat": (84.34, 0.97)},
        "ib_irm": {"erm-nf": (75.81, 0.63), "erm": (73.84, 0.56), "bonsai": (76.71, 4.10), "ifeat": (82.33, 1.77)},
        "clove": {"erm-nf": (75.66, 10.6), "erm": (74.73, 0.36), "bonsai": (72.73, 1.18), "ifeat": (75.12, 1.08)},
        "iga": {"erm-nf": (74.20, 2.45), "erm": (73.74, 0.48), "bonsai": (74.72, 3.60), "ifeat": (83.46, 2.17)},
        "fishr": {"erm-nf": (77.29, 1.61), "erm": (82.23, 1.35), "bonsai": (84.19, 0.66), "ifeat": (84.26, 0.93)},
    },
}

#: Table 2, last row: the oracle trained without the colour shortcut.
ORACLE: dict[str, tuple[float, float]] = {"cmnist025": (71.97, 0.34), "cmnist01": (86.55, 0.27)}

#: Table 7 (Appendix F.1): FeAT (that is, iFeAT, as every experiment of the paper) per round, mean
#: and std (%). None where the paper prints "-". The retention accuracy is the reference code's:
#: the stored head's accuracy on its retention set divided by k-1 at round k (43.82 at round 3 of
#: -025 is about 0.88 / 2); see featlib.feature_learning.termination.
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

#: The round at which the paper reports that FeAT's (iFeAT's) automatic termination stopped (Sec. 6).
FEAT_STOP_ROUND = {"cmnist025": 2, "cmnist01": 3}

#: Table 3: WILDS, per dataset, (learner, objective) -> (mean, std) in the dataset's metric
#: (accuracy in %, Macro F1 for iWildCam); "dfr" / "dfr-s" are the DFR rows. Missing where the
#: paper prints "-". Columns in the paper's order. The paper's FeAT rows are filed under "ifeat"
#: (its experiments use iFeAT throughout, Sec. 5).
TABLE3_COLUMNS = ("camelyon17", "civilcomments", "fmow", "iwildcam", "amazon", "rxrx1")
_T3_ROWS = {
    ("erm", "dfr"): [(95.14, 1.96), (77.34, 0.50), (41.96, 1.90), (23.15, 0.24), (48.00, 0.00), None],
    ("erm", "dfr-s"): [None, (82.24, 0.13), (56.17, 0.62), (52.44, 0.34), None, None],
    ("bonsai", "dfr"): [(95.17, 0.18), (77.07, 0.85), (43.26, 0.82), (21.36, 0.41), (46.67, 0.00), None],
    ("bonsai", "dfr-s"): [None, (81.26, 1.86), (58.58, 1.17), (50.85, 0.18), None, None],
    ("ifeat", "dfr"): [(95.28, 0.19), (77.34, 0.59), (43.54, 1.26), (23.54, 0.52), (49.33, 0.00), None],
    ("ifeat", "dfr-s"): [None, (79.56, 0.38), (57.69, 0.78), (52.31, 0.38), None, None],
    ("erm", "erm"): [(74.30, 5.96), (55.53, 1.78), (33.58, 1.02), (28.22, 0.78), (51.11, 0.63), (30.21, 0.09)],
    ("erm", "group_dro"): [(76.09, 6.46), (69.50, 0.15), (33.03, 0.52), (28.51, 0.58), (52.00, 0.00), (29.99, 0.13)],
    ("erm", "irmv1"): [(75.68, 7.41), (68.84, 0.95), (33.45, 1.07), (28.76, 0.45), (52.00, 0.00), (30.10, 0.05)],
    ("erm", "vrex"): [(71.60, 7.88), (69.03, 1.08), (33.06, 0.46), (28.82, 0.47), (52.44, 0.63), (29.88, 0.35)],
    ("erm", "irmx"): [(73.49, 9.33), (68.91, 1.19), (33.13, 0.86), (28.82, 0.47), (52.00, 0.00), (30.10, 0.05)],
    ("bonsai", "erm"): [(73.98, 5.30), (63.34, 3.49), (31.91, 0.51), (28.27, 1.05), (48.58, 0.56), (24.22, 0.44)],
    ("bonsai", "group_dro"): [(72.82, 5.37), (70.23, 1.33), (33.12, 1.20), (27.16, 1.18), (42.67, 1.09), (22.95, 0.46)],
    ("bonsai", "irmv1"): [(73.59, 6.16), (68.39, 2.01), (32.51, 1.23), (27.60, 1.57), (47.11, 0.63), (23.35, 0.43)],
    ("bonsai", "vrex"): [(76.39, 5.32), (68.67, 1.29), (33.17, 1.26), (25.81, 0.42), (48.00, 0.00), (23.34, 0.42)],
    ("bonsai", "irmx"): [(64.77, 10.1), (69.56, 0.95), (32.63, 0.75), (27.62, 0.66), (46.67, 0.00), (23.34, 0.40)],
    ("ifeat", "erm"): [(77.80, 2.48), (68.11, 2.27), (33.13, 0.78), (28.47, 0.67), (52.89, 0.63), (30.66, 0.42)],
    ("ifeat", "group_dro"): [(80.41, 3.30), (71.29, 0.46), (33.55, 1.67), (28.38, 1.32), (52.58, 0.56), (29.99, 0.11)],
    ("ifeat", "irmv1"): [(77.97, 3.09), (70.33, 1.14), (34.04, 0.70), (29.66, 1.52), (52.89, 0.63), (29.99, 0.19)],
    ("ifeat", "vrex"): [(75.12, 6.55), (70.97, 1.06), (34.00, 0.71), (29.48, 1.94), (52.89, 0.63), (30.57, 0.53)],
    ("ifeat", "irmx"): [(76.91, 6.76), (71.18, 1.10), (33.99, 0.73), (29.04, 2.96), (52.89, 0.63), (29.92, 0.16)],
}
TABLE3: dict[str, dict[tuple[str, str], tuple[float, float]]] = {
    dataset: {row: values[i] for row, values in _T3_ROWS.items() if values[i] is not None}
    for i, dataset in enumerate(TABLE3_COLUMNS)
}

#: Table 14 (Appendix F.3): training time and memory (% of a V100's memory) of each method, mean
#: and std, on two WILDS datasets. The paper's FeAT row is iFeAT (Sec. 5: "we will use iFeAT").
#: Camelyon17 times are minutes, CivilComments times hours.
TABLE14: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "camelyon17": {
        "erm": {"time": (56.21, 8.29), "memory_pct": (22.56, 0.00)},
        "bonsai": {"time": (214.55, 1.13), "memory_pct": (51.75, 0.01)},
        "feat": {"time": (101.14, 12.79), "memory_pct": (51.92, 0.04)},
    },
    "civilcomments": {
        "erm": {"time": (24.22, 0.33), "memory_pct": (36.46, 0.00)},
        "bonsai": {"time": (58.47, 0.91), "memory_pct": (64.43, 0.31)},
        "feat": {"time": (28.19, 1.15), "memory_pct": (56.21, 0.48)},
    },
}
TABLE14_TIME_UNIT = {"camelyon17": "min", "civilcomments": "h"}


#: The paper's numbered equations of the main text (the LaTeX's numbering: ``eq:cnn`` is the
#: first), each with words one of which any passage citing it should use. Docstrings and chapters
#: cite equations by these numbers; a test checks every citation against this table.
EQUATIONS: dict[int, tuple[str, tuple[str, ...]]] = {
    1: ("the two-layer CNN f = F_{+1} - F_{-1} (Sec. 3)", ("CNN", "network", "psi", "F_j", "filter")),
    2: ("the ERM objective: the sum over environments of the mean logistic loss (Sec. 3)",
        ("ERM", "risk", "logistic", "loss")),
    3: ("IRM's bi-level problem (Sec. 3)", ("IRM", "bi-level")),
    4: ("IRMv1 (Sec. 3)", ("IRMv1", "penalty")),
    5: ("IRMv1 for the CNN and the logistic loss (Sec. 3)", ("IRMv1", "penalty", "CNN")),
    6: ("the signal-noise decomposition of the filters (Lemma, Sec. 3)", ("decomposition", "coefficient", "gamma")),
    7: ("FeAT's objective: DRO over the augmentation sets plus the retention risks (Sec. 5)",
        ("FeAT", "augmentation", "retention")),
}


#: The paper's tables in order: LaTeX label (or a name for an unlabeled one, see UNLABELED) ->
#: (number in the LaTeX source, number in the published paper, which the book cites, what it is).
TABLES: dict[str, tuple[int, int, str]] = {
    "tab:sythetic": (1, 2, "OOD accuracy on ColoredMNIST-025 and -01 per objective and feature learner"),
    "tab:wilds_results": (2, 3, "OOD performance on the six WILDS datasets"),
    "tab:termin_check": (3, 4, "FeAT's accuracies at each round on ColoredMNIST-025 (Sec. 6)"),
    "notations": (4, 5, "notations (Appendix A)"),
    "tab:cmnist_epoch_appdx": (5, 6, "epochs of each round per feature learner on ColoredMNIST"),
    "tab:termin_check_appdx": (6, 7, "FeAT's accuracies on each set at each round, both ColoredMNIST datasets"),
    "tab:wilds_summary_appdx": (7, 8, "WILDS datasets: data, classes, domains, metric, backbone"),
    "tab:wilds_stat_appdx": (8, 9, "WILDS datasets: examples and domains per split"),
    "tab:referred_code_appdx": (9, 10, "the papers and code the WILDS experiments build on"),
    "tab:hyper_wilds_appdx": (10, 11, "WILDS general hyperparameters: seeds, optimiser, batch, group-by, epochs"),
    "tab:wilds_step_appdx": (11, 12, "WILDS feature learning: steps, rounds, FeAT's retention penalty"),
    "overhead": (12, 14, "training time and memory of ERM, Bonsai and FeAT on Camelyon17 and CivilComments"),
    "tab:viz_label_appdx": (13, 15, "labels and predictions of the WILDS samples whose saliency is drawn"),
}

#: The paper's figures in order, as TABLES. The published paper counts the FeAT algorithm box
#: (an algorithm inside a wrapfigure in the LaTeX) as its third figure, hence the shift from the
#: GradCAM figure on.
FIGURES: dict[str, tuple[int, int, str]] = {
    "fig:flood_phenon": (1, 1, "(a) FeAT against ERM, (b) OOD accuracy against ERM pre-training epochs"),
    "f5": (2, 2, "convergence of C_IRMv1 and feature learning with and without ERM pre-training"),
    "fig:gradcam_cmnist": (3, 4, "GradCAM on ColoredMNIST-025 (patch): ERM 300 epochs, FeAT 2 rounds"),
    "fig:gradcam_cmnist_appdx": (4, 5, "GradCAM on ColoredMNIST-025 (patch): ERM 150/300/450 epochs, FeAT"),
    "fig:gradcam_wilds_nlp_appdx": (5, 6, "saliency on CivilComments"),
    "fig:gradcam_wilds_nlp2_appdx": (6, 7, "saliency on Amazon"),
    "fig:gradcam_wilds_nlp3_appdx": (7, 8, "saliency on Amazon (part 2)"),
    "fig:gradcam_camelyon17_appdx": (8, 9, "GradCAM on Camelyon17"),
    "fig:gradcam_fmow_appdx": (9, 10, "GradCAM on FMoW"),
    "fig:gradcam_iwildcam_appdx": (10, 11, "GradCAM on iWildCam"),
    "fig:gradcam_rxrx_appdx": (11, 12, "GradCAM on RxRx1"),
}

#: Names of the floats that have no label in the LaTeX, by the start of their caption.
UNLABELED = {"Notations for key concepts": "notations", "Training and memory overhead": "overhead"}

_FLOATS = {"table": "table", "wraptable": "table", "figure": "figure", "wrapfigure": "figure",
           "algorithm": "algorithm"}
_TOKEN = re.compile(r"\\(begin|end)\{(\w+)\*?\}|\\caption\{|\\label\{([^}]*)\}")


def latex_float_numbers(text: str, unlabeled: dict[str, str] = UNLABELED) -> dict[str, tuple[str, int]]:
    """``{label: ("table" | "figure", number)}`` for the captioned floats of a LaTeX source,
    numbered as LaTeX numbers them: tables and wraptables share one counter, figures and
    wrapfigures another, and both run on through the appendix. An ``algorithm`` (even inside a
    wrapfigure) has a counter of its own and is left out. A label inside a float, a subfigure's
    included, names that float. A captioned float without a label is keyed by ``unlabeled[p]``
    where its caption starts with ``p``, else by its caption."""
    text = re.sub(r"(?<!\\)%.*", "", text)  # comments
    counters = {"table": 0, "figure": 0}
    found: dict[str, tuple[str, int]] = {}
    stack: list[dict] = []  # the open float environments, innermost last
    for m in _TOKEN.finditer(text):
        begin_end, env, label = m.groups()
        if env is not None:
            if env not in _FLOATS:
                continue
            if begin_end == "begin":
                stack.append({"kind": _FLOATS[env], "number": None, "labels": [], "caption": ""})
                continue
            float_ = stack.pop()
            if float_["number"] is None:
                continue
            keys = float_["labels"] or [next((name for p, name in unlabeled.items()
                                              if float_["caption"].startswith(p)), float_["caption"])]
            for key in keys:
                found[key] = (float_["kind"], float_["number"])
        elif not stack:
            continue
        elif label is not None:
            stack[-1]["labels"].append(label)
        elif stack[-1]["kind"] != "algorithm":  # a caption: LaTeX steps the counter here
            kind = stack[-1]["kind"]
            counters[kind] += 1
            stack[-1]["number"] = counters[kind]
            stack[-1]["caption"] = " ".join(text[m.end():m.end() + 200].split())
    return found
