"""How the WILDS chapter (05) shows its results: tables that fit the column, figures in the
book's style. The numbers come from :class:`~featlib.experiments.wilds_experiment.WildsResults` and
the frames of :mod:`featlib.experiments.wilds_report` (Table 3, DFR, which ``run_wilds`` also writes);
this module lays them out (ours and the paper's value in one cell, labels instead of ids, no index
column, no ``NaN``) and draws them."""
from __future__ import annotations

import numpy as np
import pandas as pd

from featbook import style
from featbook import prose
from featbook.tables import Stacked, Table, table
from featlib.data.wilds_data import WILDS_DATASETS
from featlib.evaluation.dfr import DFR_CS
from featlib.experiments.labels import LEARNER_LABELS, OBJECTIVE_LABELS
from featlib.experiments.paper_values import TABLE3, TABLE3_COLUMNS


#: How a reader reads the WILDS split names (the package's ``train``, ``val``, ``test``, ``id_val``, ``id_test``).
SPLIT_LABELS = {"train": "training", "val": "OOD validation", "test": "OOD test", "id_val": "ID validation",
                "id_test": "ID test"}


def is_fabricated(data) -> bool:
    """Whether ``data`` (a loaded :class:`~featlib.data.wilds_data.WildsData`) was read from a folder
    that :func:`featlib.data.wilds_fabricate.fabricate_wilds` wrote: its marker file lies beside the
    data. Read from the data on disk, not from a notebook's parameters, so a fabricated folder
    passed as ``data_root`` is labelled fabricated even with ``fabricate=False``."""
    from pathlib import Path

    from featlib.data.wilds_fabricate import MARKER

    folder = getattr(data.dataset, "data_dir", None)
    return folder is not None and (Path(folder) / MARKER).is_file()


def data_kind(data) -> str:
    """"fabricated" or "real": how captions and titles name the data a run read (:func:`is_fabricated`)."""
    return "fabricated" if is_fabricated(data) else "real"


def data_title(data) -> str:
    """"Camelyon17 (fabricated data)": the dataset as every caption and title over it names it."""
    return f"{data.spec.title} ({data_kind(data)} data)"


def split_summary(data) -> Table:
    """Per split (named as a reader reads it): examples, training domains present (the grouper's
    groups) and label shares; the caption names the dataset and whether its data are fabricated."""
    rows = []
    for split in data.splits:
        y = data.labels(split).numpy()
        groups = data.groups(split).numpy()
        rows.append({"split": SPLIT_LABELS.get(split, split), "examples": len(y),
                     "domains (groups)": len(np.unique(groups)),
                     **{f"share of class {c}": round(float((y == c).mean()), 3) for c in range(min(data.n_classes, 4))}})
    frame = pd.DataFrame(rows)
    shares = [c for c in frame.columns if c.startswith("share of class")]
    return table(frame, caption=f"The WILDS splits of {data_title(data)}, this run",
                 formats={c: lambda v: prose.percent(v, 1) for c in shares} | {"examples": prose.integer})


def _stack(ours: str, paper: str) -> Stacked:
    return Stacked(ours, "" if paper in ("", "-", None) else paper, paper=True)


def table3(frame: pd.DataFrame, metric_label: str, caption: str, with_paper: bool = True) -> Table:
    """Table 3's OOD-objective rows (the frame of
    :func:`featlib.experiments.wilds_report.table3_frame`): ours with the
    paper's value under it (``with_paper``: full-scale results only, never a test run's), the OOD
    validation score and the selected penalty weight."""
    if frame.empty:
        return table(frame, caption=caption)
    ours, paper = f"ours: {metric_label}", f"paper: {metric_label}"
    shown = pd.DataFrame({
        "features": frame["Init."],
        "objective": frame["Method"],
        f"test {metric_label}": [_stack(o, p if with_paper else "") for o, p in zip(frame[ours], frame[paper])],
        "OOD val.": frame["ours: OOD val."],
        "penalty weight": frame["penalty weight"].replace({"-": prose.MISSING}),
        "seeds": frame["seeds"],
    })
    return table(shown, caption=caption, note=("Test score: ours (mean ± std over seeds), the paper's Table 3 under it "
                 "in grey where it prints one. " if with_paper else "Test score: mean ± std over seeds. ")
                 + "Penalty weight chosen on OOD validation.")


def dfr_table(frame: pd.DataFrame, caption: str, with_paper: bool = True) -> Table:
    """DFR / DFR-s rows (the frame of
    :func:`featlib.experiments.wilds_report.dfr_table_frame`); the paper's values under
    ours only ``with_paper`` (full-scale results, never a test run's)."""
    if frame.empty:
        return table(frame, caption=caption)
    shown = pd.DataFrame({
        "features": frame["Init."],
        "refit": frame["Method"],
        "test score": [_stack(o, p if with_paper else "") for o, p in zip(frame["ours"], frame["paper"])],
        "what is measured": frame["what is measured"],
        "chosen C, per seed": frame["C per seed"],
    })
    c_note = (" Chosen C: the inverse L1 strength of DFR's logistic regression, picked per seed from "
              f"{', '.join(f'{c:g}' for c in DFR_CS)} by worst-group accuracy on a held-out half of the fit set "
              "(the DFR authors' grid; featlib.evaluation.dfr).")
    return table(shown, caption=caption, wrap=["what is measured", "chosen C, per seed"],
                 note=("Ours (mean ± std over seeds), the paper's under it in grey where it prints one." if with_paper
                       else "Mean ± std over seeds.") + c_note)


def rounds_table_frame(results) -> pd.DataFrame:
    """The feature-learning history of :class:`~featlib.experiments.wilds_experiment.WildsResults`:
    per learner, seed and round, training / retention accuracy, official OOD validation and test
    scores of the round's classifier, and acceptance."""
    keep = ["learner", "seed", "round", "steps", "train_acc", "retention_acc", "val_metric", "test_metric",
            "accepted", "size_augmentation", "size_retention"]
    frame = results.rounds[[c for c in keep if c in results.rounds.columns]].copy()
    frame["learner"] = frame["learner"].map(dict(LEARNER_LABELS))
    return frame


def rounds_table(frame: pd.DataFrame, caption: str, note: str | None = None) -> Table:
    """The feature-learning history (the frame of :func:`rounds_table_frame`), with ``note`` under
    it (e.g. :func:`rounds_note`; none when empty)."""
    shown = pd.DataFrame({
        "learner": frame["learner"], "seed": frame["seed"], "round": frame["round"],
        "steps": [prose.integer(v) for v in frame["steps"]],
        "train acc.": [prose.percent(v) for v in frame["train_acc"]],
        "retention acc.": [prose.percent(v) for v in frame.get("retention_acc", pd.Series([np.nan] * len(frame)))],
        "OOD val.": [prose.percent(v) for v in frame["val_metric"]],
        "OOD test": [prose.percent(v) for v in frame["test_metric"]],
        "kept": ["yes" if bool(v) else "no" for v in frame["accepted"]],
    })
    return table(shown, caption=caption, note=note or None)


def rounds_at_chance(frame: pd.DataFrame, n_classes: int, within: float = 0.02) -> pd.DataFrame:
    """The rounds of :func:`rounds_table_frame` whose classifier ended within ``within`` of chance
    (``1 / n_classes``) on its own training data: learner, seed, round, train_acc."""
    if frame.empty or n_classes < 2:
        return frame.iloc[0:0]
    return frame[(frame["train_acc"] - 1 / n_classes).abs() <= within]


def rounds_note(frame: pd.DataFrame, n_classes: int, full_scale: bool) -> str:
    """A sentence under the rounds table of a run at reduced size or on fabricated data: which rounds
    ended at chance on their own training data, and why that says nothing about FeAT at the paper's
    size (empty when none did, or for a run at the paper's size, whose table speaks for itself)."""
    chance = rounds_at_chance(frame, n_classes)
    if full_scale or chance.empty:
        return ""
    names = "; ".join(f"{r.learner} seed {r.seed}, round {r.round}" for r in chance.itertuples())
    count = len(chance)
    return (f"{prose.count(count, 'round')} of this run ended at chance on {'its' if count == 1 else 'their'} own "
            f"training data ({names}): from the second round on, FeAT's DRO step weighs the augmentation set, the "
            "examples the previous round got wrong, which in a run this small is a handful of images, and the "
            "WILDS default keeps every round. It shows that the round runs, not how FeAT fares at the paper's size.")


def paper_table3(dataset: str) -> Table:
    """The paper's Table 3 for one dataset, alone (no number of ours beside it): per objective (DFR
    and DFR-s first, as the paper prints them), the score on each feature learner's features, mean
    ± std over the paper's seeds; what a reader compares a full-scale run with."""
    spec = WILDS_DATASETS.get(dataset)
    cells = TABLE3.get(dataset, {})
    learners = [m for m in LEARNER_LABELS if any(k[0] == m for k in cells)]
    objectives = [o for o in ("dfr", "dfr-s", *OBJECTIVE_LABELS) if any(k[1] == o for k in cells)]
    objectives = list(dict.fromkeys(objectives))
    rows = [{"objective": OBJECTIVE_LABELS.get(o, o),
             **{LEARNER_LABELS[m]: (prose.mean_std(*cells[(m, o)]) if (m, o) in cells else prose.MISSING)
                for m in learners}} for o in objectives]
    return table(pd.DataFrame(rows), caption=f"The paper's Table 3 for {spec.title} ({spec.metric_label}): "
                 "not a result of this book", note="The paper's numbers (mean ± std over its seeds), by the features "
                 "each objective trains on; no run of ours is shown beside them until full-scale results are committed.")


def committed_table3(frame: pd.DataFrame, caption: str) -> Table:
    """A committed ``table3.csv`` (the frame :func:`featlib.experiments.wilds_report.table3_frame` wrote)."""
    metric = next((c[len("ours: "):] for c in frame.columns if c.startswith("ours: ") and c != "ours: OOD val."), "score")
    frame = frame.fillna("-").astype({c: str for c in frame.columns if c != "seeds"})
    return table3(frame, metric, caption)


def examples(data, per_group: int = 4, split: str = "train"):
    """A few raw inputs of ``split`` per domain (at most six domains): a grid of images, or a
    table of texts, titled (captioned) with the dataset and whether its data are fabricated."""
    subset = data.splits[split]
    groups = data.groups(split).numpy()
    labels = data.labels(split).numpy()
    picks = [(g, np.flatnonzero(groups == g)[:per_group]) for g in np.unique(groups)[:6]]
    names = {g: data.grouper.group_str(int(g)) for g, _ in picks}
    if data.spec.modality == "text":
        rows = [{"domain": names[g], "label": int(labels[i]), "text": data.dataset.get_input(subset.indices[i])}
                for g, idx in picks for i in idx]
        return table(pd.DataFrame(rows), caption=f"Training comments of a few domains, {data_title(data)}", wrap=["text"])
    fig, axes = style.subplots(len(picks), per_group, panel_height=1.25, width=min(style.COLUMN_WIDTH, 1.5 * per_group + 1.6),
                               extra_height=0.45)
    for row, (g, idx) in zip(axes, picks):
        for ax, i in zip(row, list(idx) + [None] * (per_group - len(idx))):
            ax.axis("off")
            if i is not None:
                ax.imshow(data.dataset.get_input(subset.indices[i]))
                ax.set_title(f"y = {labels[i]}", fontsize=style.MIN_TEXT_PT)
        row[0].text(-0.1, 0.5, names[g], transform=row[0].transAxes, ha="right", va="center", fontsize=style.MIN_TEXT_PT)
    fig.suptitle(f"{data_title(data)}: training inputs per domain", fontsize=9)
    return fig


def clipped_error(means, stds, low: float = 0.0, high: float = 100.0) -> np.ndarray:
    """Error bars of one std, cut at the score's range (every metric of Table 3 is a percentage):
    a 2 x n array for ``yerr`` whose bars never reach past ``low`` or ``high``."""
    means, stds = np.nan_to_num(np.asarray(means, float)), np.nan_to_num(np.asarray(stds, float))
    return np.vstack([np.minimum(stds, np.maximum(means - low, 0)), np.minimum(stds, np.maximum(high - means, 0))])


def method_label(learner: str) -> str:
    return LEARNER_LABELS.get(learner, learner)


# -- the recipe: the paper's whole Table 3, a command and a cost per dataset ----------------------
#: The rows of Table 3 as the paper prints them: the DFR block, then the OOD objectives.
TABLE3_ROWS = ("dfr", "dfr-s", "erm", "group_dro", "irmv1", "vrex", "irmx")


def paper_table3_frame(cells: dict | None = None) -> pd.DataFrame:
    """The paper's Table 3, every dataset (``cells``: :data:`TABLE3`'s layout, dataset ->
    (learner, row) -> (mean, std)): one row per (features, objective) in the paper's order, one
    column per dataset (its title and metric), "mean ± std" or a dash where the paper prints none."""
    cells = TABLE3 if cells is None else cells
    datasets = [d for d in TABLE3_COLUMNS if d in cells]
    keys = {k for d in datasets for k in cells[d]}
    rows = []
    for objective in TABLE3_ROWS:
        for learner in LEARNER_LABELS:
            if (learner, objective) not in keys:
                continue
            row = {"features": LEARNER_LABELS[learner], "objective": OBJECTIVE_LABELS.get(objective, objective)}
            for d in datasets:
                spec = WILDS_DATASETS.get(d)
                value = cells[d].get((learner, objective))
                row[f"{spec.title}: {spec.metric_label}"] = prose.MISSING if value is None else prose.mean_std(*value)
            rows.append(row)
    return pd.DataFrame(rows)


#: Table 3's datasets in two tables that fit the column: the image datasets, then the text ones.
TABLE3_GROUPS = (("camelyon17", "fmow", "iwildcam", "rxrx1"), ("civilcomments", "amazon"))


def paper_table3_all(cells: dict | None = None, datasets=None) -> Table:
    """:func:`paper_table3_frame` as the book shows it, captioned as the paper's numbers; ``datasets``:
    only these columns (one of :data:`TABLE3_GROUPS`: six columns do not fit the page)."""
    cells = TABLE3 if cells is None else cells
    shown = [d for d in TABLE3_COLUMNS if d in cells and (datasets is None or d in datasets)]
    seeds = {d: WILDS_DATASETS.get(d).n_seeds for d in shown}
    counts = sorted(set(seeds.values()), reverse=True)
    over = "; ".join(f"{prose.count(n, 'seed')} for "
                     f"{prose.listing(WILDS_DATASETS.get(d).title for d in shown if seeds[d] == n)}"
                     for n in counts)
    which = ("all six WILDS datasets" if len(shown) == len(TABLE3_COLUMNS) else
             prose.listing(WILDS_DATASETS.get(d).title for d in shown))
    return table(paper_table3_frame({d: cells[d] for d in shown}),
                 caption=f"The paper's Table 3 on {which}, at the paper's full size: the paper's "
                         "numbers, not this book's",
                 note=f"Mean ± std over the paper's seeds ({over}), each dataset in its official metric; a dash "
                      "where the paper prints none. DFR and DFR-s re-fit the last layer on held-out data; the "
                      "other rows train a linear head with that objective on the frozen features.",
                 wrap=["objective"])


def table3_leaders(cells: dict | None = None) -> pd.DataFrame:
    """Per dataset of the paper's Table 3: the features whose DFR is highest (ties: all of them,
    ``dfr_best``; empty where the paper reports no DFR) and the features of the best OOD-objective
    cell (``objective_best``, ties: all), with that cell's objective and mean."""
    cells = TABLE3 if cells is None else cells
    rows = []
    for d in [d for d in TABLE3_COLUMNS if d in cells]:
        c = cells[d]
        dfr = {m: v[0] for (m, o), v in c.items() if o == "dfr"}
        ood = {(m, o): v[0] for (m, o), v in c.items() if o not in ("dfr", "dfr-s")}
        top = max(ood.values())
        best = [k for k, v in ood.items() if v == top]
        rows.append({"dataset": d,
                     "dfr_best": tuple(m for m, v in dfr.items() if v == max(dfr.values())) if dfr else (),
                     "objective_best": tuple(dict.fromkeys(m for m, _ in best)),
                     "objective": best[0][1], "score": top})
    return pd.DataFrame(rows)


def table3_reading(leaders: pd.DataFrame, learner: str = "ifeat") -> str:
    """What the paper's Table 3 says of ``learner``'s features (:func:`table3_leaders`): on how
    many of the datasets with DFR its DFR is the highest (ties counted), and on how many it holds
    the best OOD-objective cell, naming the datasets where it does not."""
    with_dfr = leaders[leaders["dfr_best"].map(len) > 0]
    dfr_wins = with_dfr[with_dfr["dfr_best"].map(lambda t: learner in t)]
    ood_wins = leaders[leaders["objective_best"].map(lambda t: learner in t)]
    title = lambda d: WILDS_DATASETS.get(d).title  # noqa: E731
    others = [title(d) for d in leaders["dataset"] if d not in set(ood_wins["dataset"])]
    label = LEARNER_LABELS[learner]
    return (f"In the paper's numbers, {label}'s features have the highest DFR score on "
            f"{len(dfr_wins)} of the {len(with_dfr)} datasets where DFR is reported (ties counted), and the best "
            f"OOD-objective result on {len(ood_wins)} of {len(leaders)}"
            + (f" (not on {prose.listing(others)})" if others else "") + ".")


def table3_margins(cells: dict | None = None, learner: str = "ifeat", baseline: str = "erm") -> pd.DataFrame:
    """Per dataset of the paper's Table 3: ``learner``'s best OOD-objective mean and its std,
    ``baseline``'s best mean, their gap in points (``gap``), and the two learners' DFR-s means
    (NaN where the paper prints none)."""
    cells = TABLE3 if cells is None else cells
    rows = []
    for d in TABLE3_COLUMNS:
        c = cells.get(d, {})
        best = {m: max((v for (k, o), v in c.items() if k == m and o not in ("dfr", "dfr-s")), key=lambda v: v[0])
                for m in (learner, baseline)}
        rows.append({"dataset": d, "best": best[learner][0], "std": best[learner][1], "baseline_best": best[baseline][0],
                     "gap": round(best[learner][0] - best[baseline][0], 2),
                     "dfr_s": c.get((learner, "dfr-s"), (np.nan,))[0],
                     "baseline_dfr_s": c.get((baseline, "dfr-s"), (np.nan,))[0]})
    return pd.DataFrame(rows)


def margins_reading(margins: pd.DataFrame, learner: str = "ifeat", baseline: str = "erm") -> str:
    """How large the paper's margins are (:func:`table3_margins`): the datasets where ``learner``'s
    best OOD-objective cell is within a point of ``baseline``'s, the others with their gap and
    std, and where its DFR-s is lower or higher than the baseline's."""
    title = lambda d: WILDS_DATASETS.get(d).title  # noqa: E731
    a, b = LEARNER_LABELS[learner], LEARNER_LABELS[baseline]
    close = margins[margins["gap"].abs() < 1]
    far = margins[margins["gap"].abs() >= 1]
    parts = []
    if len(close):
        parts.append(f"{a}'s best OOD-objective cell is within a point of {b}'s on "
                     f"{prose.listing(title(d) for d in close['dataset'])}")
    if len(far):
        parts.append("the gap is " + prose.listing(
            f"{prose.number(r.gap, 1, sign=True)} points on {title(r.dataset)} (std over seeds "
            f"{prose.number(r.std, 1)})" for r in far.itertuples()))
    text = "; ".join(parts) + "." if parts else ""
    text = text[:1].upper() + text[1:]
    both = margins.dropna(subset=["dfr_s", "baseline_dfr_s"])
    lower = [title(d) for d, x, y in zip(both["dataset"], both["dfr_s"], both["baseline_dfr_s"]) if x < y]
    higher = [title(d) for d, x, y in zip(both["dataset"], both["dfr_s"], both["baseline_dfr_s"]) if x > y]
    if len(both):
        text += (f" DFR-s, the spurious attribute read off the features, is lower on {a}'s features than on {b}'s on "
                 f"{prose.listing(lower)}" + (f" and higher on {prose.listing(higher)}" if higher else "") + ".")
    return text.strip()


def run_wilds_command(dataset: str, root: str = "data/wilds", out: str = "results/wilds") -> str:
    """The command that runs Table 3's column ``dataset`` at the paper's settings (Tables 11-12,
    the paper's learners and seeds: ``run_wilds``'s defaults), fetching the data into ``root``."""
    WILDS_DATASETS.get(dataset)
    return f"python -m featlib.cli.run_wilds --dataset {dataset} --root {root} --download --out {out}/{dataset}"


def recipe_frame(root: str = "data/wilds", datasets=None) -> pd.DataFrame:
    """One row per dataset: its :func:`run_wilds_command`, the paper's seed count, and the cost
    model's figures for one seed at the paper's settings (:func:`featbook.estimate.wilds`, no
    download): GPU hours on a Colab T4 (the GPU its step times assume), the largest stage's peak
    GPU memory in GB, whether that fits a T4's 16 GB, and the download in GB."""
    from featbook import estimate
    from featlib.data.wilds_data import download_size_gb
    from featlib.experiments.wilds_experiment import WildsProtocol
    from featlib.training.memory import T4_BYTES

    rows = []
    for d in datasets or TABLE3_COLUMNS:
        paper = WildsProtocol(d)
        est = estimate.wilds(WildsProtocol(d, seeds=paper.seed_list[:1]))
        peak = est.peak
        rows.append({"dataset": d, "title": paper.spec.title, "command": run_wilds_command(d, root),
                     "seeds": len(paper.seed_list), "gpu_hours": est.t4_s / 3600,
                     "feature_learning_hours": est.parts["feature learning"][0] / 3600, "peak_gb": peak.gpu_bytes / 1e9,
                     "peak_stage": peak.stage, "fits_t4": peak.gpu_bytes <= T4_BYTES,
                     "download_gb": download_size_gb(d)})
    return pd.DataFrame(rows)


def recipe_table(frame: pd.DataFrame) -> Table:
    """:func:`recipe_frame` as the book shows it."""
    from featlib.training.memory import T4_BYTES

    shown = pd.DataFrame({
        "dataset": frame["title"],
        "command": frame["command"],
        "GPU hours, one seed": [prose.number(v, 1) for v in frame["gpu_hours"]],
        "peak GPU memory": [f"{prose.number(v, 1)} GB" for v in frame["peak_gb"]],
        "fits a T4": frame["fits_t4"].map({True: "yes", False: "no"}),
        "seeds in the paper": frame["seeds"],
        "download": [f"{prose.number(v, 1)} GB" if v >= 1 else f"{prose.integer(round(1000 * v))} MB"
                     for v in frame["download_gb"]],
    })
    return table(shown, wrap=["command"],
                 caption="Estimates from the book's cost model for one seed of each dataset at the paper's settings "
                         "(Tables 11-12: ERM, Bonsai and FeAT features, then every OOD objective and DFR), in hours "
                         "of a Colab T4-class GPU, whose throughput the model assumes, not measured runs",
                 note=f"The command runs the paper's seeds, so its time is the hours times the seeds. Peak memory: "
                      f"the largest stage of the run (the backbone's training step, the embedding pass or the OOD "
                      f"stage), against a T4's {prose.number(T4_BYTES / 1e9, 1)} GB; a larger GPU is faster than "
                      "the hours say. The download is the compressed archive the command fetches once. "
                      + cost_caveat(frame))


def paper_hours(dataset: str, learners=("erm", "bonsai", "feat")) -> float | None:
    """The paper's Table 14 training time of one run of each of ``learners`` on ``dataset``, summed,
    in hours on the paper's GPU (its FeAT row is iFeAT, filed as "feat"); None where the paper
    reports no time for the dataset."""
    from featlib.experiments.paper_values import TABLE14, TABLE14_TIME_UNIT

    if dataset not in TABLE14:
        return None
    per_hour = {"min": 60.0, "h": 1.0}[TABLE14_TIME_UNIT[dataset]]
    return sum(TABLE14[dataset][m]["time"][0] for m in learners) / per_hour


def cost_caveat(frame: pd.DataFrame) -> str:
    """What the cost model leaves out, checked where the paper reports times (:func:`paper_hours`):
    per such dataset, the paper's hours for one run of its three feature learners against the
    model's feature-learning hours for one seed (``frame``: :func:`recipe_frame`), and how many
    times more the paper's are; a plain caveat where the paper reports none."""
    pairs = [(r.title, paper_hours(r.dataset), r.feature_learning_hours) for r in frame.itertuples()
             if paper_hours(r.dataset) is not None]
    lead = ("The model counts training steps and the FLOPs of each; data loading, evaluation passes and a "
            "GPU's idle time are not in it")
    if not pairs:
        return lead + ", so read its hours as a lower bound."
    papers = prose.listing(f"{prose.number(p, 1)} h ({t})" for t, p, _ in pairs)
    models = prose.listing(f"{prose.number(m, 1)} h" for _, _, m in pairs)
    low, high = min(p / m for _, p, m in pairs), max(p / m for _, p, m in pairs)
    factor = prose.number(low, 0) if round(low) == round(high) else f"{prose.number(low, 0)} to {prose.number(high, 0)}"
    return (f"{lead}. Where the paper reports training times (its Table 14), one run of ERM, Bonsai and FeAT "
            f"took {papers} on the paper's GPU, against the model's {models} of feature learning on a T4: "
            f"about {factor} times as long. Read the hours above as a lower bound, and the memory as what the "
            "largest stage needs.")


def cost_reading(frame: pd.DataFrame) -> str:
    """What the recipe table (:func:`recipe_frame`) says of the costs: the cheapest and dearest
    dataset per seed, feature learning's share of the hours, and which datasets' peak memory
    exceeds a T4's."""
    cheap, dear = frame.loc[frame["gpu_hours"].idxmin()], frame.loc[frame["gpu_hours"].idxmax()]
    share = frame["feature_learning_hours"] / frame["gpu_hours"]
    over = list(frame.loc[~frame["fits_t4"], "title"])
    return (f"By the cost model, {cheap.title} is the cheapest column to reproduce ({prose.number(cheap.gpu_hours, 1)} "
            f"T4 hours a seed) and {dear.title} the dearest ({prose.number(dear.gpu_hours, 0)}); feature learning is "
            f"{prose.percent(share.min(), 0)} to {prose.percent(share.max(), 0)} of each dataset's hours"
            + (f", and {prose.listing(over)} needs more memory than a T4 has." if over else "."))


def own_size(dataset: str, fabricate: bool, seeds: int, max_examples: int | None = None) -> str:
    """The size of this page's own run, for its heading: "fabricated Camelyon17, 120 training
    examples, 2 seeds" (the fabricated copy's or the real dataset's training split, capped by
    ``max_examples``)."""
    from featbook.estimate import REAL_SPLIT_SIZES, fabricated_split_sizes

    spec = WILDS_DATASETS.get(dataset)
    n = (fabricated_split_sizes(dataset) if fabricate else REAL_SPLIT_SIZES[dataset])["train"]
    if max_examples is not None:
        n = min(n, max_examples)
    noun = "images" if spec.modality == "image" else "texts"
    return (f"{'fabricated' if fabricate else 'real'} {spec.title}, {prose.integer(n)} training {noun}, "
            f"{prose.count(seeds, 'seed')}")


# -- the central step: DFR on features whose spurious attribute is known -------------------------
def toy_features(n: int, agree: float, seed: int, dims: int = 8):
    """Frozen features of a two-class problem with a spurious attribute ``a`` that equals the label
    ``y`` on a share ``agree`` of the examples: feature 0 is ``±1`` (by ``y``) plus unit noise (the
    invariant feature), feature 1 ``±2`` (by ``a``) plus unit noise (the spurious one, stronger),
    the rest noise. Returns ``(x, y, groups)`` with ``groups = 2 a + y`` (four groups)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < agree, y, 1 - y)
    x = rng.normal(size=(n, dims))
    x[:, 0] += 2 * y - 1
    x[:, 1] += 2 * (2 * a - 1)
    return x, y, 2 * a + y


def verdict(title: str, fetch_failed: bool = False) -> str:
    """The chapter's verdict where no full-scale result of ``title`` can be shown: none exists in
    this project (or, ``fetch_failed``, the committed ones could not be read in this runtime)."""
    if fetch_failed:
        return (f"**Verdict**: the full-scale results for {title} could not be read in this runtime, so this page "
                "can neither confirm nor contradict the paper's Table 3; the note above says what to do.")
    return (f"**Verdict**: no full-scale WILDS result for {title} exists in this project. Table 3 above is the "
            "paper's alone: this page neither confirms nor contradicts it, and the recipe below is what making one "
            "of its columns takes.")
