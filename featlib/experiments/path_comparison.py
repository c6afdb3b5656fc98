"""Table 2 judged at table level across the OOD stage's paths and precisions.

A single OOD-stage run is chaotic on ColoredMNIST: the fast path and the plain loop agree to
2e-12 in float64 (``tests/test_fast_ood_stage.py``), yet in float32 the rounding of the fused
Adam alone moves one ERM-NF run by up to 17 points. So a path or a precision is not judged run by
run but where the paper's claims live: Table 2, the best configuration of each cell (dataset,
learner, objective) with its mean and standard deviation over seeds (Sec. 5,
Appendix F.1; :func:`~featlib.experiments.colored_mnist.select_best`).

A *variant* is an OOD path of :data:`featlib.training.OOD_PATHS` and a precision of
:data:`featlib.training.PRECISIONS`, named ``<path>-<precision>`` (``fast-fp32``, the
protocol's default; ``plain-fp32``; ``fast-bf16``). Each variant's protocol is run as Table 2
pieces that accumulate (:mod:`featlib.experiments.table2_pieces`), at a size a 2-core CPU carries
(``SIZES["reduced"]``: 2,000 training images and width 64; every column, objective and
configuration, the paper's steps and epochs):

    <folder>/<variant>/pieces/<dataset>/<learner>/<objective>/seed<k>.csv (+ .json)
    <folder>/comparison.csv    one row per (variant, dataset, learner, objective)
    <folder>/provenance.json   the comparison's command, commit and the pieces behind it

:func:`run_variants` computes the missing pieces in Table 2's order, seed by seed, each piece for
every variant before the next, so that a sitting cut short leaves pieces that every variant has
(the comparison pairs them). Feature learning does not depend on the variant: it is cached once
in the cache folder. Variants are compared only where their pieces share one protocol but for the
path and precision.

:func:`compare` sets each variant's Table 2 beside the reference's (default ``fast-fp32``) on the
seeds both have. Per cell: both means and standard deviations, the difference of the means, and a
paired test over seeds (both variants train the same seeds' data and initial weights): the
per-seed differences of the two best configurations, their standard error, and whether the
difference lies outside the 95% interval of Student's t with n - 1 degrees of freedom
(:func:`t_quantile`). With one seed there is no test. About one cell in twenty differs by chance
alone; :func:`summarise` says how many to expect beside how many do.

:func:`verdicts` judges each variant at table level: it agrees with the reference when no more
cells differ than chance explains (a binomial tail) and the table as a whole does not move (a t
interval over cells of the signed differences). Only a variant that agrees may become the default
(the path and precision of :data:`featlib.training.OOD_PATHS` and
:data:`featlib.training.DEFAULT_PRECISION`).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..device import get_device
from ..store.files import CorruptFileError
from ..store.folders import frame, read_folder
from ..training import DEFAULT_PRECISION, OOD_PATHS, PRECISIONS
from .cmnist_presets import SIZES
from .labels import label
from .results import PATHS_KIND
from .colored_mnist import (DEFAULT_OOD_PATH, TABLE2_LEARNERS, CMNISTProtocol, ColoredMNISTExperiment, make_protocol,
                            select_best)
from .table2_pieces import ORACLE, compute_piece, list_pieces, load_pieces, missing_pieces, pieces_of, read_piece

#: The variant every other is compared with: the protocol's default path and precision ("fast-fp32").
REFERENCE = f"{DEFAULT_OOD_PATH}-{DEFAULT_PRECISION}"
#: The comparison's default variants: the reference, the plain loop (path), bf16 (precision).
DEFAULT_VARIANTS = ("fast-fp32", "plain-fp32", "fast-bf16")
#: The size the comparison runs at by default (:data:`featlib.experiments.cmnist_presets.SIZES`).
DEFAULT_SIZE = "reduced"
COMPARISON = "comparison.csv"
CELL = ["dataset", "learner", "objective"]

#: Two-sided 95% quantiles of Student's t, t_{0.975}(df), df = 1..30 (Fisher and Yates' table;
#: tests/test_path_comparison.py checks them against scipy where it is installed).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile(df: int) -> float:
    """t_{0.975}(df), the half-width in standard errors of a two-sided 95% interval: the table for
    df <= 30, beyond it the Cornish-Fisher expansion of t about the normal quantile z = 1.95996,
    z + (z^3 + z) / (4 df) + (5 z^5 + 16 z^3 + 3 z) / (96 df^2) (Abramowitz and Stegun 26.7.5; within
    1e-4 of t there)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1; got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Variant:
    """An OOD path and a precision, named ``<path>-<precision>``."""

    path: str
    precision: str

    @property
    def name(self) -> str:
        return f"{self.path}-{self.precision}"

    @classmethod
    def parse(cls, name: str, who: str = "--variants") -> "Variant":
        """``"fast-bf16"`` -> Variant("fast", "bf16"); a ValueError naming the value and the choices
        otherwise (paths may hold hyphens: the precision is the last part)."""
        path, _, precision = str(name).rpartition("-")
        if path not in OOD_PATHS or precision not in PRECISIONS:
            raise ValueError(f"{who}: {name!r} is no variant; name one as <path>-<precision>, a path of "
                             f"{', '.join(OOD_PATHS.names())} and a precision of {', '.join(PRECISIONS.names())} "
                             "(for example fast-bf16)")
        return cls(path, precision)


def variant_protocols(variant: Variant, *, datasets: Sequence[str], seeds: Sequence[int],
                      learners: Sequence[str] = TABLE2_LEARNERS, objectives: Sequence[str] | None = None,
                      preset: str = "featlib", size: str = DEFAULT_SIZE) -> list[CMNISTProtocol]:
    """One protocol per dataset: ``preset`` at ``size``, run on ``variant``'s path and precision."""
    fields = dict(SIZES[size], seeds=tuple(seeds), learners=tuple(learners), ood_path=variant.path,
                  precision=variant.precision)
    if objectives is not None:
        fields["objectives"] = tuple(objectives)
    return [make_protocol(preset, dataset=d, **fields) for d in datasets]


def run_variants(folder: str | Path, variants: Sequence[Variant], *, datasets: Sequence[str], seeds: Sequence[int],
                 preset: str, commit: str, command: str | None = None, budget_s: float | None = None,
                 cache_dir: str | Path | None = None,
                 mnist_source: str = "auto", device=None, progress=print, **protocol_options) -> dict:
    """Compute the missing pieces of every variant into ``folder/<variant>``, piece by piece in
    Table 2's order (seed by seed, dataset by dataset; within them as
    :func:`~featlib.experiments.table2_pieces.pieces_of`), each piece for every variant before the
    next, until ``budget_s`` seconds have passed: the piece in hand is finished, at least one piece
    is computed, and a sitting cut short leaves pieces that every variant has (the comparison
    pairs them). ``protocol_options``: ``learners``, ``objectives``, ``size``
    (:func:`variant_protocols`). Returns ``done``, ``remaining`` (per variant, the pieces still
    missing) and ``wall_time_s``."""
    from contextlib import ExitStack

    from .table2_pieces import folder_lock

    with ExitStack() as held:  # every variant's folder held from its listing to its last piece
        for v in variants:
            held.enter_context(folder_lock(Path(folder) / v.name, "this comparison"))
        return _run_variants_locked(folder, variants, datasets=datasets, seeds=seeds, preset=preset, commit=commit,
                                    command=command, budget_s=budget_s, cache_dir=cache_dir,
                                    mnist_source=mnist_source, device=device, progress=progress, **protocol_options)


def _run_variants_locked(folder, variants, *, datasets, seeds, preset, commit, command, budget_s, cache_dir,
                         mnist_source, device, progress, **protocol_options) -> dict:
    start, done = time.perf_counter(), 0
    device = device or get_device()
    have = {v.name: set(list_pieces(Path(folder) / v.name)) for v in variants}
    experiments = {}  # (variant, dataset) -> experiment; feature learning is shared through cache_dir
    todo = []
    for seed in seeds:
        for dataset in datasets:
            protocols = {v.name: variant_protocols(v, datasets=[dataset], seeds=[seed], preset=preset,
                                                   **protocol_options)[0] for v in variants}
            for piece in pieces_of(protocols[variants[0].name]):
                todo += [(v, protocols[v.name], piece) for v in variants if piece not in have[v.name]]
    for k, (variant, protocol, piece) in enumerate(todo):
        if done and budget_s is not None and time.perf_counter() - start >= budget_s:
            break
        key = (variant.name, protocol.dataset)
        if key not in experiments:
            experiments[key] = ColoredMNISTExperiment(
                replace(protocol, seeds=tuple(seeds)), cache_dir=cache_dir, mnist_source=mnist_source, device=device,
                progress=False)
        seconds = compute_piece(experiments[key], piece, Path(folder) / variant.name, preset=preset, commit=commit,
                                command=command)
        done += 1
        progress(f"[{k + 1}/{len(todo)}] {variant.name} {piece.dataset} {piece.learner} {piece.objective} "
                 f"seed {piece.seed}: {seconds:.1f} s")
    return {"done": done, "remaining": remaining_pieces(folder, variants, datasets=datasets, seeds=seeds, preset=preset,
                                                        **protocol_options),
            "wall_time_s": time.perf_counter() - start}


def remaining_pieces(folder: str | Path, variants: Sequence[Variant], *, datasets: Sequence[str],
                     seeds: Sequence[int], preset: str, **protocol_options) -> dict[str, list]:
    """Per variant, the pieces of its protocols that ``folder/<variant>`` lacks."""
    return {v.name: missing_pieces(variant_protocols(v, datasets=datasets, seeds=seeds, preset=preset,
                                                     **protocol_options), Path(folder) / v.name)
            for v in variants}


def load_variants(folder: str | Path, variants: Iterable[str]) -> dict[str, dict]:
    """Each variant's pieces (:func:`~featlib.experiments.table2_pieces.load_pieces`), checked,
    for the variants that have any, with ``cell_protocols``: per cell, the protocol its pieces
    were made with less the path and precision (what may differ between variants). A ValueError
    where a folder's pieces were made on another path or precision than its name says."""
    loaded = {}
    for name in variants:
        pieces = load_pieces(Path(folder) / name)
        if pieces is None:
            continue
        variant = Variant.parse(name, who="variant folder")
        records = pieces["records"]
        trained = records[records["learner"] != ORACLE]  # the oracle trains no OOD stage
        made = set(zip(trained["ood_path"], trained["precision"]))
        if made and made != {(variant.path, variant.precision)}:
            raise ValueError(f"{Path(folder) / name}: its pieces were made with (path, precision) "
                             f"{sorted(made)}, not those its name says; keep one variant per folder, named after it")
        protocols = {}
        for piece in list_pieces(Path(folder) / name):
            if piece.learner != ORACLE:
                record = read_piece(Path(folder) / name, piece)[1]
                fields = {k: v for k, v in record.get("protocol", {}).items() if k not in ("precision", "ood_path")}
                protocols[(piece.dataset, piece.learner, piece.objective)] = json.dumps(
                    {**fields, "preset": record.get("preset")}, sort_keys=True, default=list)
        loaded[name] = {**pieces, "cell_protocols": protocols}
    return loaded


def _best_per_seed(runs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The cell's best configuration (:func:`select_best`) and its worst-test accuracy per seed."""
    best = select_best(runs).iloc[0]
    chosen = runs[(runs["penalty_weight"] == best["penalty_weight"])
                  & (runs["pretrain_epochs"] == best["pretrain_epochs"])]
    return best, chosen.set_index("seed")["worst_test_acc"].sort_index()


def compare(loaded: Mapping[str, dict], reference: str = REFERENCE) -> pd.DataFrame:
    """Every other variant's Table 2 beside ``reference``'s, cell by cell, on the seeds both have
    in that cell (accuracies as fractions). Columns: the cell, ``variant``, ``n_seeds``, ``seeds``,
    ``reference_mean``/``_std``, ``mean``/``std`` (numpy's std, ddof = 0, as Table 2), ``difference``
    (mean - reference_mean), ``paired_se`` (the standard error of the mean per-seed difference, ddof
    = 1; NaN for one seed), ``half_width`` (t_{0.975}(n - 1) x paired_se), ``differs`` (True, False,
    or NA for one seed), ``same_configuration`` and both configurations."""
    if reference not in loaded:
        raise ValueError(f"the reference variant {reference!r} has no pieces; run it first "
                         f"(variants with pieces: {', '.join(loaded) or 'none'})")
    ref_runs = loaded[reference]["runs"]
    columns = CELL + ["variant", "n_seeds", "seeds", "reference_mean", "reference_std", "mean", "std", "difference",
                      "paired_se", "half_width", "differs", "reference_penalty_weight", "reference_pretrain_epochs",
                      "penalty_weight", "pretrain_epochs", "same_configuration"]
    if ref_runs.empty:  # only oracle pieces so far
        return pd.DataFrame(columns=columns)
    rows = []
    for name, data in loaded.items():
        if name == reference:
            continue
        cells = dict(list(data["runs"].groupby(CELL, sort=False))) if len(data["runs"]) else {}
        for cell, ref_cell in ref_runs.groupby(CELL, sort=False):
            mine = cells.get(cell)
            seeds = [] if mine is None else sorted(set(ref_cell["seed"]) & set(mine["seed"]))
            if not seeds:
                continue
            _check_same_protocol(loaded, reference, name, cell)
            ref_best, ref_acc = _best_per_seed(ref_cell[ref_cell["seed"].isin(seeds)])
            best, acc = _best_per_seed(mine[mine["seed"].isin(seeds)])
            diffs = (acc - ref_acc).to_numpy()
            n = len(seeds)
            se = float(np.std(diffs, ddof=1) / math.sqrt(n)) if n > 1 else math.nan
            half = t_quantile(n - 1) * se if n > 1 else math.nan
            difference = float(acc.mean() - ref_acc.mean())
            rows.append({
                **dict(zip(CELL, cell)), "variant": name, "n_seeds": n, "seeds": " ".join(map(str, seeds)),
                "reference_mean": float(ref_acc.mean()), "reference_std": float(np.std(ref_acc.to_numpy())),
                "mean": float(acc.mean()), "std": float(np.std(acc.to_numpy())), "difference": difference,
                "paired_se": se, "half_width": half,
                "differs": pd.NA if n == 1 else bool(abs(difference) > half),
                "reference_penalty_weight": ref_best["penalty_weight"],
                "reference_pretrain_epochs": ref_best["pretrain_epochs"],
                "penalty_weight": best["penalty_weight"], "pretrain_epochs": best["pretrain_epochs"],
                "same_configuration": bool(ref_best["penalty_weight"] == best["penalty_weight"]
                                           and ref_best["pretrain_epochs"] == best["pretrain_epochs"]),
            })
    return pd.DataFrame(rows, columns=columns)


def _check_same_protocol(loaded: Mapping[str, dict], reference: str, name: str, cell: tuple) -> None:
    """A ValueError where the two variants' pieces of ``cell`` differ in more than path and precision."""
    ours, theirs = (loaded[v].get("cell_protocols", {}).get(cell) for v in (reference, name))
    if ours is None or theirs is None or ours == theirs:
        return
    a, b = json.loads(ours), json.loads(theirs)
    differing = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    raise ValueError(f"cell {'/'.join(cell)}: {name}'s pieces were made with another protocol than {reference}'s "
                     f"(differing: {', '.join(differing)}), not only another path or precision; compare variants "
                     "of one protocol")


def summarise(comparison: pd.DataFrame, reference: str = REFERENCE) -> list[str]:
    """One sentence per variant: how many cells were compared at how many seeds, how many differ
    from ``reference`` at 95% (and how many chance alone would give), the mean and largest absolute
    difference of the means (the cell named by its labels, :mod:`featlib.experiments.labels`), and
    how many cells chose another configuration."""
    lines = []
    for name, part in comparison.groupby("variant", sort=False):
        tested = part[part["n_seeds"] > 1]
        seeds = sorted(set(part["n_seeds"]))
        seed_text = f"{seeds[0]} seed{'s' if seeds[0] != 1 else ''}" if len(seeds) == 1 else \
            f"{seeds[0]}-{seeds[-1]} seeds"
        worst = part.loc[part["difference"].abs().idxmax()]
        largest = f"{100 * worst['difference']:+.2f}".replace("-", "\u2212")  # a minus sign, as the book prints
        where = ", ".join(label(kind, worst[kind]) for kind in CELL)  # CELL's columns are label kinds
        text = (f"{name} against {reference}: {len(part)} cells at {seed_text}; mean |difference| "
                f"{100 * part['difference'].abs().mean():.2f} points, largest {largest} ({where})")
        if len(tested):
            differing = int(tested["differs"].astype(bool).sum())
            text += (f"; {differing} of {len(tested)} cells differ at 95% (paired t over seeds; chance alone gives "
                     f"about {0.05 * len(tested):.1f})")
        else:
            text += "; one seed per cell: no test yet"
        other = int((~part["same_configuration"]).sum())
        text += f"; {other} cell{'s' if other != 1 else ''} chose another configuration."
        lines.append(text)
    return lines


#: The level of both tests of :func:`verdicts`, and the chance that one cell differs at 95% by chance.
LEVEL = 0.05


def binomial_tail(k: int, n: int, p: float = LEVEL) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed exactly: the chance that at least ``k`` of ``n``
    independent cells differ at the 95% level when no cell truly differs (p = 0.05)."""
    if not 0 <= k <= n or not 0 <= p <= 1:
        raise ValueError(f"binomial_tail needs 0 <= k <= n and 0 <= p <= 1; got k={k}, n={n}, p={p}")
    if k == 0:
        return 1.0
    return float(min(1.0, sum(math.comb(n, j) * p**j * (1 - p)**(n - j) for j in range(k, n + 1))))


@dataclass(frozen=True)
class Verdict:
    """Whether a variant's Table 2 is the reference's at table level (:func:`verdicts`).

    ``identical``: the cells compared at two seeds or more where the variant reproduces the
    reference exactly in every seed (as bf16 must on frozen features, whose head and objective run
    in float32); they are left out of both tests, which they could only pad. ``cells``: the other
    cells compared at two seeds or more; ``differing``: those whose paired 95% interval excludes
    0; ``chance_p``: :func:`binomial_tail` of that count; ``shift`` and ``shift_half_width``: the
    mean over those cells of the signed difference of the means and the half-width of its 95% t
    interval over cells (fractions, as accuracies are); ``agrees``: neither test rejects at
    :data:`LEVEL` (None when no cell has two seeds)."""

    variant: str
    reference: str
    cells: int
    differing: int
    chance_p: float
    shift: float
    shift_half_width: float
    agrees: bool | None
    identical: int = 0

    @property
    def sentence(self) -> str:
        """The verdict in one sentence, as the book and the command print it."""
        if self.agrees is None:
            return f"{self.variant}: no cell has two seeds of both variants yet, so no verdict."
        pts = lambda x: f"{100 * x:+.2f}".replace("-", "\u2212")  # a minus sign, as the book prints
        if not self.cells:
            return (f"{self.variant} agrees with {self.reference} at table level: all {self.identical} cells are "
                    "identical seed by seed. Either may stand for the other as the default.")
        same = (f"{self.identical} cells are identical seed by seed; of the other {self.cells}, " if self.identical
                else "")
        expected = f"{LEVEL * self.cells:.1f}"
        if self.differing:
            counted = f"{self.differing}" if self.identical else f"{self.differing} of {self.cells} cells"
            tested = (f"{counted} differ at 95% (chance alone gives about {expected}; at least {self.differing} "
                      f"by chance: {_p_value(self.chance_p)})")
        else:  # no test to quote: P(at least 0) is 1 whatever the cells
            tested = (f"none differ at 95% (about {expected} expected by chance)" if self.identical else
                      f"none of the {self.cells} cells differs at 95% (about {expected} expected by chance)")
        evidence = same + (f"{tested}, and the mean difference over cells is {pts(self.shift)} "
                           f"± {100 * self.shift_half_width:.2f} points")
        if self.agrees:
            return (f"{self.variant} agrees with {self.reference} at table level: {evidence}. Either may stand for the "
                    "other as the default.")
        reasons = []
        if self.chance_p < LEVEL:
            reasons.append("more cells differ than chance explains")
        if abs(self.shift) > self.shift_half_width:
            reasons.append("the table as a whole moves")
        return (f"{self.variant} does not agree with {self.reference} at table level ({' and '.join(reasons)}): "
                f"{evidence}. It is no candidate default.")


def _p_value(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}" if p < 0.01 else f"p = {p:.2f}"


def identical_cells(comparison: pd.DataFrame) -> pd.Series:
    """Per row of :func:`compare`'s frame, whether the variant gave the reference's accuracy in
    every seed: at two seeds or more, the difference of the means and its paired standard error
    are both 0 (so every per-seed difference is). :func:`verdicts` counts these cells apart."""
    return (comparison["n_seeds"] > 1) & (comparison["difference"] == 0) & (comparison["paired_se"] == 0)


def verdicts(comparison: pd.DataFrame, reference: str = REFERENCE) -> list[Verdict]:
    """Per variant of :func:`compare`'s frame, the judgement at table level: the variant agrees with
    ``reference`` when, over the cells compared at two seeds or more, (1) no more cells differ at
    95% than chance explains (:func:`binomial_tail` >= :data:`LEVEL`) and (2) the mean signed
    difference over those cells has a 95% t interval that holds 0 (no shift of the table as a
    whole). Cells share features and seeds, so (2) treats them as more independent than they are,
    which makes it stricter, not looser. Cells where the variant gives the reference's accuracy in
    every seed (difference and paired standard error 0) are counted apart and left out of both
    tests: they cannot differ, so counting them would only let more differing cells pass as
    chance. A variant with no cell at two seeds gets ``agrees=None``."""
    out = []
    for name, part in comparison.groupby("variant", sort=False):
        tested = part[part["n_seeds"] > 1]
        same = identical_cells(tested)
        identical = int(same.sum())
        tested = tested[~same]
        m = len(tested)
        if not m:  # every cell identical (agreement by construction), or none at two seeds (no verdict)
            out.append(Verdict(name, reference, 0, 0, 1.0, 0.0, 0.0, True, identical) if identical else
                       Verdict(name, reference, 0, 0, math.nan, math.nan, math.nan, None))
            continue
        differing = int(tested["differs"].astype(bool).sum())
        d = tested["difference"].to_numpy(dtype=float)
        shift = float(d.mean())
        half = float(t_quantile(m - 1) * np.std(d, ddof=1) / math.sqrt(m)) if m > 1 else math.inf
        chance = binomial_tail(differing, m)
        out.append(Verdict(name, reference, m, differing, chance, shift, half,
                           bool(chance >= LEVEL and abs(shift) <= half), identical))
    return out


def pieces_record(data: dict) -> dict:
    """What a variant's loaded pieces (:func:`load_variants`) were: how many, made on what, their
    seeds per dataset (learners' pieces), the protocols (keys) and ``pieces_sha256``, one SHA-256
    over their sorted checksums (what :func:`load_comparison` checks the pieces against)."""
    records = data["records"]
    runs = records[records["learner"] != ORACLE]
    return {"pieces": len(records), "devices": sorted(set(records["device"])),
            "commits": sorted(set(records["commit"])), "torch": sorted(set(records["torch"])),
            "protocol_keys": sorted(set(records["protocol_key"])),
            "wall_time_s": float(records["wall_time_s"].sum()),
            "seeds": {d: sorted(int(s) for s in set(part["seed"])) for d, part in runs.groupby("dataset")},
            "pieces_sha256": hashlib.sha256("\n".join(sorted(records["sha256"])).encode()).hexdigest()}


def _comparison_remedy(folder: Path) -> str:
    return (f"compare the pieces there again (`python -m featlib.cli.compare_paths --out {folder} --compare-only` "
            "with the variants and seeds of its provenance.json) or restore the folder from git")


def load_comparison(folder: str | Path) -> dict | None:
    """A comparison written by ``python -m featlib.cli.compare_paths`` (None when ``folder`` is
    absent or holds none): ``comparison`` (the frame of :func:`compare`), ``provenance``, and
    ``variants`` (:func:`load_variants`). Every file is checked: ``comparison.csv`` against the
    manifest in ``provenance.json``, each piece against its record, and each variant's pieces
    against the checksum the comparison recorded (:func:`pieces_record`), so a folder whose pieces
    changed after the comparison raises :class:`~featlib.store.files.CorruptFileError` instead of
    showing a comparison of other pieces. Section "Paths and precisions" of chapter 04 reads it."""
    folder = Path(folder)
    remedy = _comparison_remedy(folder)
    if not (folder / "provenance.json").exists():
        return None
    found = read_folder(folder, remedy, kind=PATHS_KIND)
    if found is None:
        return None
    record, files = found
    recorded = record.get("pieces")
    if not isinstance(recorded, dict) or not recorded:
        raise CorruptFileError(folder / "provenance.json", "it records no variants' pieces", remedy)
    variants = load_variants(folder, list(recorded))
    for name, entry in recorded.items():
        if name not in variants:
            raise CorruptFileError(folder / name, "the comparison was made on its pieces, which are gone", remedy)
        if not isinstance(entry, dict) or pieces_record(variants[name])["pieces_sha256"] != entry.get("pieces_sha256"):
            raise CorruptFileError(folder / name, "its pieces are not those the comparison was made on (pieces were "
                                                  "added or changed after it)", remedy)
    comparison = frame(files, folder, COMPARISON, remedy)
    if not comparison.empty:
        comparison["differs"] = comparison["differs"].map(
            lambda v: pd.NA if pd.isna(v) else str(v).strip().lower() in ("true", "1"))
    return {"comparison": comparison, "provenance": record, "variants": variants}
