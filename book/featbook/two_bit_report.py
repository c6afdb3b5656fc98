"""Tables and numbers of the two-bit chapters (01 and 02), as the book shows them (:mod:`featbook.tables`),
and the committed paper-size simulation they lead with (``results/two-bit``: :func:`committed`,
:func:`over_seeds`, :func:`spread`)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from featbook import prose
from featbook.tables import Table, table


def final_values(rows: list[tuple], caption: str, columns=("end of training", "limit")) -> Table:
    """``(quantity, value, reference or None, ...)`` rows, one value per column of ``columns``,
    three decimals (a string is shown as it is: :func:`spread`)."""
    def cell(v):
        return v if isinstance(v, str) else prose.MISSING if v is None else COEFFICIENT(v)
    frame = pd.DataFrame([(name, *(cell(v) for v in values)) for name, *values in rows], columns=["", *columns])
    return table(frame, caption=caption)


def alpha_sweep_table(sweep: pd.DataFrame, probe_step: int, sweep_steps: int) -> Table:
    """Chapter 01's sweep: per alpha, spurious minus invariant coefficient early and at the end,
    and ERM's OOD accuracy."""
    frame = pd.DataFrame({
        "alpha": [prose.number(a, 2) for a in sweep["alpha"]],
        f"spurious − invariant, step {probe_step}": [fixed(v, 3, sign=True) for v in sweep["gap_probe"]],
        f"spurious − invariant, step {sweep_steps}": [fixed(v, 3, sign=True) for v in sweep["gap_final"]],
        "OOD test accuracy": [COEFFICIENT(v) for v in sweep["test_acc_final"]],
    })
    return table(frame, caption="ERM for each alpha")


def lead_phrase(share: float) -> str:
    """How often the spurious increment leads, as a reader says it: "every step", or "93.5% of the
    steps" (chapter 01)."""
    return "every step" if share >= 1.0 else f"{prose.percent(share)} of the steps"


def lead_table(leads: dict[str, float], caption: str | None = None,
               column: str = "steps where the spurious increment leads") -> Table:
    """Per activation psi: the share of steps where the spurious increment leads."""
    frame = pd.DataFrame({"activation psi": [n.replace("_", " ") for n in leads],
                          column: [prose.percent(v) for v in leads.values()]})
    return table(frame, caption=caption)


def lead_phrase_over_seeds(shares: Sequence[float]) -> str:
    """How often the spurious increment leads over several seeds' runs: "every step, in every
    seed", or "at least 97.5% of the steps in every seed" (the lowest seed's share)."""
    lowest = float(np.min(shares))
    if len(shares) == 1:
        return lead_phrase(lowest)
    return "every step, in every seed" if lowest >= 1.0 else f"at least {prose.percent(lowest)} of the steps in every seed"


#: How the prose names each activation psi.
ACTIVATION_WORDS = {"identity": "identity", "relu": "ReLU", "smoothed_relu": "smoothed ReLU cubed"}


def order_phrase(orders: Sequence[dict]) -> str:
    """How the increments compare over several seeds' runs (:func:`featlib.synthetic.increment_order`
    of each): "every step, in every seed"; where the invariant one is never the larger but some
    steps tie (equal in float32), "every step where the two differ, in every seed", with how many
    tie and from which step; else the lowest seed's share, as :func:`lead_phrase_over_seeds`."""
    if any(o["invariant"] for o in orders):
        return lead_phrase_over_seeds([o["spurious"] / (o["spurious"] + o["invariant"] + o["tie"]) for o in orders])
    ties = sum(o["tie"] for o in orders)
    every = "every step" if len(orders) == 1 else "every step, in every seed"
    if not ties:
        return every
    steps = sum(o["spurious"] + o["tie"] for o in orders)
    first = min(o["first_tie"] for o in orders if o["tie"])
    where = "every step where the two differ" + ("" if len(orders) == 1 else ", in every seed")
    counted = "steps" if len(orders) == 1 else "steps counted over the seeds"
    return (f"{where}; they are equal to float32's precision at {prose.integer(ties)} of the "
            f"{prose.integer(steps)} {counted}, none before step {prose.integer(first)}")


def activations_phrase(identity: str, others: Sequence[float]) -> str:
    """Chapter 01's sentence on the activations: ``identity`` is :func:`lead_phrase` (or
    :func:`lead_phrase_over_seeds`) of the identity's run, ``others`` the other activations'
    lowest shares."""
    if not others:
        return f"at {identity}"
    lowest = float(np.min(others))
    if lowest >= 1.0 and identity.startswith("every step"):
        return f"at {identity}, with the identity activation and with the others"
    said = "every step" if lowest >= 1.0 else f"{prose.percent(lowest)} or more of the steps"
    return f"at {identity} with the identity activation (and at {said} with the others)"


def pretraining_sweep_table(sweep: pd.DataFrame, caption: str = "IRMv1 after each length of ERM pre-training") -> Table:
    """Chapter 02's sweep: per pre-training length, the coefficients at the switch, the first
    IRMv1 step's change of the invariant one (when the sweep has it), the coefficients after
    IRMv1, and the OOD test loss after IRMv1."""
    frame = pd.DataFrame({
        "ERM steps": [prose.integer(v) for v in sweep["pretrain_steps"]],
        "invariant at the switch (end of pre-training)": [COEFFICIENT(v) for v in sweep["inv_switch"]],
        "spurious at the switch": [COEFFICIENT(v) for v in sweep["spu_switch"]],
        **({"first IRMv1 step, invariant": [CHANGE(v) for v in sweep["inv_first_step"]]}
           if "inv_first_step" in sweep else {}),
        "invariant after IRMv1": [COEFFICIENT(v) for v in sweep["inv_final"]],
        "spurious after IRMv1": [COEFFICIENT(v) for v in sweep["spu_final"]],
        "OOD test loss": [COEFFICIENT(v) for v in sweep["test_loss_final"]],
    })
    return table(frame, caption=caption)


# -- the committed paper-size simulation (results/two-bit) ---------------------------------------
#: What a chapter tells a reader to run where its paper-size simulation is not committed.
STUDY_COMMAND = ("python -m featlib.cli.gap_studies {name} --seeds 0 1 2 --out results/two-bit "
                 "--cache-dir _cache/two-bit")


@dataclass
class PaperSize:
    """The committed studies a two-bit chapter reads (``frames`` and ``provenance`` by study name,
    :mod:`featlib.experiments.two_bit_studies`)."""

    frames: dict[str, pd.DataFrame]
    provenance: dict[str, dict]

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.frames[name]

    @property
    def setting(self) -> dict:
        """The settings the studies ran with (alpha, betas, sizes, steps...: their options,
        :func:`featlib.experiments.two_bit_studies.study_options`), not the page's parameters."""
        from featlib.experiments.two_bit_studies import study_options

        merged: dict = {}
        for name in self.frames:
            merged |= study_options(name)
        return merged

    @property
    def seeds(self) -> list[int]:
        """The seeds every study holds."""
        common = set.intersection(*(set(f["seed"]) for f in self.frames.values()))
        return sorted(int(s) for s in common)

    def collapsed_line(self) -> str:
        """HTML: the one collapsed line under a figure, the commands (and their commits) folded."""
        from featbook import evidence

        runs = [r for prov in self.provenance.values() for r in (prov.get("runs") or [prov])]
        record = {"runs": runs} if len(runs) > 1 else runs[0]
        return evidence.command_block(record, summary="How the paper-size runs were made")

    def show_made_by(self) -> None:
        """Display :meth:`collapsed_line`."""
        from IPython.display import HTML, display

        display(HTML(self.collapsed_line()))


def committed(path, names: Sequence[str]) -> PaperSize | None:
    """The committed studies ``names`` of the folder ``path`` (``"../results/two-bit"``), read and
    checked by :func:`featbook.committed.locate` and :func:`featbook.committed.load` (fetched in
    Colab); None, after displaying why (:func:`featbook.evidence.missing`), when one is absent or
    could not be fetched."""
    from IPython.display import Markdown, display

    from featbook import committed as fetch, evidence
    from featlib.experiments.results import load_study

    located = fetch.locate(path)
    found = {name: fetch.load(located, load_study, name) for name in names}
    absent = [name for name, study in found.items() if study is None]
    if absent:
        display(Markdown(evidence.missing(located, "two-bit simulation at the paper's size",
                                          STUDY_COMMAND.format(name=absent[0]))))
        return None
    return PaperSize({n: s["frame"] for n, s in found.items()}, {n: s["provenance"] for n, s in found.items()})


def over_seeds(frame: pd.DataFrame, by: str | Sequence[str]) -> tuple[pd.DataFrame, tuple[pd.DataFrame, pd.DataFrame]]:
    """The mean over seeds of every numeric column of ``frame`` per value of ``by`` (indexed by it),
    and the band a figure shades around it: the lowest and the highest value over seeds."""
    keys = [by] if isinstance(by, str) else list(by)
    numeric = frame.drop(columns=["seed", *keys]).select_dtypes("number")
    grouped = numeric.groupby([frame[k] for k in keys])
    return grouped.mean(), (grouped.min(), grouped.max())


def per_seed(frame: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """``frame``'s rows of each seed, indexed by step (a history as :meth:`SyntheticSetup.run` returns)."""
    return {int(seed): rows.set_index("step") for seed, rows in frame.groupby("seed")}


def spread(values, fmt=None) -> str:
    """Values over seeds as the prose quotes them: "mean ± std" (numpy's std, ddof = 0), both
    written by ``fmt`` (default :data:`COEFFICIENT`, three decimals: a std below 0.0005 reads
    "0.000"); one value alone, as it is."""
    fmt = fmt or COEFFICIENT
    values = np.asarray(list(values), dtype=float)
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(values.mean())}{prose.NBSP}±{prose.NBSP}{fmt(values.std()).lstrip('+')}"


def fixed(x: float, digits: int = 3, sign: bool = False) -> str:
    """``x`` with ``digits`` decimals, always (never the scientific form :func:`featbook.prose.number`
    switches to for small values, so that one quantity reads one way in every seed and table); a
    value that rounds to zero is "0.000", never "−0.000"."""
    if x is None or np.isnan(x):
        return prose.MISSING
    x = 0.0 if round(float(x), digits) == 0 else float(x)
    return (f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}").replace("-", "−")


#: One written form per quantity of the two-bit chapters, in their tables and their prose alike.
COEFFICIENT = lambda v: fixed(v, 3)  # noqa: E731 (feature-learning coefficients, C, accuracies, losses)
TINY = lambda v: prose.scientific(v, 1)  # noqa: E731 (sizes that should be zero: |C|, a coefficient never learned)
CHANGE = lambda v: prose.scientific(v, 2, sign=True)  # noqa: E731 (one step's change of a coefficient, sum of C)


def DRIFT(v: float) -> str:  # noqa: N802 (one written form, as the constants above)
    """A change over many steps: three signed decimals ("−0.082") where it reads so, the scientific
    form only below 10⁻³, where three decimals would show nothing."""
    return fixed(v, 3, sign=True) if abs(v) >= 1e-3 else prose.scientific(v, 2, sign=True)


def values_table(rows: Sequence[tuple[str, str, str]], caption: str, columns: Sequence[str]) -> Table:
    """``(quantity, text, text)`` rows already written (:func:`spread`, the formats above)."""
    return table(pd.DataFrame(list(rows), columns=["", *columns]), caption=caption)


def erm_final_table(last: pd.DataFrame, sample: pd.DataFrame, limits: tuple[float, float]) -> Table:
    """Chapter 01's committed ERM run at its last step (``last``: one row per seed), beside where
    ERM converges on each seed's sample (``sample``: the alpha sweep's rows at the run's alpha,
    ``inv_sample_limit``, ``spu_sample_limit``) and the population limits: mean ± std over seeds."""
    sample = sample.set_index("seed").loc[last["seed"]]
    rows = [("invariant coefficient", spread(last["inv"]), spread(sample["inv_sample_limit"]), limits[0]),
            ("spurious coefficient", spread(last["spu"]), spread(sample["spu_sample_limit"]), limits[1]),
            ("training accuracy", spread(last["train_acc"]), None, None),
            ("OOD test accuracy", spread(last["test_acc"]), None, None)]
    return final_values(rows, f"The ERM run at its last step, mean ± std over {prose.count(len(last), 'seed')}",
                        columns=("end of training", "the sample's own limit", "population limit"))


def chapter01_numbers(paper: PaperSize, activation: str = "identity") -> dict[str, str]:
    """The phrases chapter 01's text quotes from the committed studies (name -> text), each from
    the runs: the seeds, the ERM run's end against the limits, the lead of the spurious
    increment, the first step's ratio, the alpha sweep's flip and the activations' leads."""
    from featlib.data import erm_population_logit_weights
    from featlib.synthetic import increment_order, increments, zero_crossing

    at = paper.setting
    beta_bar = float(np.mean(at["betas"]))
    u_inv, u_spu = erm_population_logit_weights(at["alpha"], at["betas"])
    erm = paper["two-bit-erm"]
    main = erm[erm["activation"] == activation]
    last = main[main["step"] == main["step"].max()].set_index("seed")
    sweep = paper["two-bit-alpha"]
    sample = sweep[np.isclose(sweep["alpha"], at["alpha"])].set_index("seed").loc[last.index]
    runs = per_seed(main)
    first = pd.DataFrame([increments(h).iloc[0] for h in runs.values()])
    to_sample = max((last["inv"] - sample["inv_sample_limit"]).abs().max(),
                    (last["spu"] - sample["spu_sample_limit"]).abs().max())
    flips = {when: [zero_crossing(rows["alpha"], rows[f"spu_{when}"] - rows[f"inv_{when}"])
                    for _, rows in sweep.groupby("seed")] for when in ("probe", "final")}
    others = {name: order_phrase([increment_order(h) for h in per_seed(rows).values()])
              for name, rows in erm.groupby("activation", sort=False) if name != activation}
    lead = order_phrase([increment_order(h) for h in runs.values()])
    alphas = np.sort(sweep["alpha"].unique())
    below, above = alphas[alphas < beta_bar].max(), alphas[alphas > beta_bar].min()  # the sweep's values around the flip
    return {
        "paper_seeds_text": prose.count(len(paper.seeds), "seed"),
        "paper_steps_text": prose.integer(int(main["step"].max())),
        "paper_inv_final": spread(last["inv"]), "paper_spu_final": spread(last["spu"]),
        "paper_inv_sample": spread(sample["inv_sample_limit"]), "paper_spu_sample": spread(sample["spu_sample_limit"]),
        "paper_to_sample": prose.scientific(to_sample, 1),
        "paper_train_acc": spread(last["train_acc"]), "paper_test_acc": spread(last["test_acc"]),
        "paper_lead_phrase": lead,
        "paper_ratio_predicted": fixed((1 - 2 * beta_bar) / (1 - 2 * at["alpha"]), 2),
        "paper_ratio_first": spread(first["spu"] / first["inv"], lambda v: fixed(v, 2)),
        "paper_probe_text": prose.integer(int(sweep["probe_step"].iloc[0])),
        "paper_sweep_steps_text": prose.integer(int(sweep["steps"].iloc[0])),
        "paper_flip_probe": spread(flips["probe"]),
        "paper_flip_final": spread(flips["final"]),
        "paper_beta_bar": COEFFICIENT(beta_bar),
        "paper_inv_limit": COEFFICIENT(u_inv / 2), "paper_spu_limit": COEFFICIENT(u_spu / 2),
        "paper_alpha_below": fixed(below, 2), "paper_alpha_above": fixed(above, 2),
        "paper_acc_below": spread(sweep.loc[sweep["alpha"] == below, "test_acc_final"]),
        "paper_acc_above": spread(sweep.loc[sweep["alpha"] == above, "test_acc_final"]),
        "paper_activations_phrase": prose.listing(f"with the {ACTIVATION_WORDS.get(name, name)} at {said}"
                                                  for name, said in others.items()),
    }


# -- chapter 02: Fig. 2, Cor. 4.4 and the pre-training sweep, over one run or several seeds' -----
def _runs(histories) -> list[pd.DataFrame]:
    """One history (a run of the page) or several (``{seed: history}``) as a list."""
    return [histories] if isinstance(histories, pd.DataFrame) else list(histories.values())


def _c_columns(history: pd.DataFrame) -> list[str]:
    return [c for c in history.columns if c.startswith("c_irmv1_")]


def figure2_numbers(with_pt, without_pt, pretrain_steps: int) -> dict[str, str]:
    """The quantities of Fig. 2 that chapter 02 states (Theorem 4.2, Prop. 4.3), written once for
    its table and its prose alike: at the switch, each environment's C and their sum, the first
    IRMv1 step's change of each coefficient, the coefficients and OOD accuracy from the switch to
    the end, how much the spurious coefficient still moved over the last quarter of the IRMv1
    phase; from scratch, the largest coefficient over the recorded steps, the largest final |C| and
    the final OOD loss. ``with_pt``, ``without_pt``: a history each, or ``{seed: history}`` (then
    "mean ± std" over seeds; maxima over seeds for the sizes that should be zero)."""
    with_runs, scratch = _runs(with_pt), _runs(without_pt)
    switch = [h.loc[pretrain_steps] for h in with_runs]
    after = [h.loc[pretrain_steps + 1] for h in with_runs]
    end = [h.iloc[-1] for h in with_runs]
    cols = _c_columns(with_runs[0])
    quarter = [h.loc[h.index >= h.index[-1] - (h.index[-1] - pretrain_steps) // 4].iloc[0] for h in with_runs]
    out = {f"c{i + 1}_switch": spread([s[c] for s in switch]) for i, c in enumerate(cols)}
    out |= {f"c{i + 1}_end": spread([e[c] for e in end]) for i, c in enumerate(cols)}
    out |= {
        "c_sum_switch": spread([s[cols].sum() for s in switch], CHANGE),
        "inv_first_step": spread([a["inv"] - s["inv"] for a, s in zip(after, switch)], CHANGE),
        "spu_first_step": spread([a["spu"] - s["spu"] for a, s in zip(after, switch)], CHANGE),
        "inv_switch": spread([s["inv"] for s in switch]), "inv_end": spread([e["inv"] for e in end]),
        "spu_switch": spread([s["spu"] for s in switch]), "spu_end": spread([e["spu"] for e in end]),
        "acc_switch": spread([s["test_acc"] for s in switch]), "acc_end": spread([e["test_acc"] for e in end]),
        "loss_end": spread([e["test_loss"] for e in end]),
        "spu_last_quarter": spread([e["spu"] - q["spu"] for e, q in zip(end, quarter)], DRIFT),
        "scratch_largest": TINY(max(float(h[["inv", "spu"]].abs().to_numpy().max()) for h in scratch)),
        "scratch_c_final": TINY(max(float(h[_c_columns(h)].iloc[-1].abs().max()) for h in scratch)),
        "scratch_loss_final": spread([h["test_loss"].iloc[-1] for h in scratch]),
    }
    return out


def figure2_table(numbers: dict[str, str], seeds: int = 1) -> Table:
    """:func:`figure2_numbers` as chapter 02's table (the words its prose uses)."""
    cs = sorted(k for k in numbers if k.startswith("c") and k.endswith("_switch") and k[1:-7].isdigit())
    rows = [(f"C of environment {k[1:-7]}, at the switch → at the end", f"{numbers[k]} → {numbers[k[:-7] + '_end']}")
            for k in cs]
    if rows:  # the first row says what the switch is
        rows[0] = (rows[0][0].replace("at the switch", "at the switch (end of pre-training)"), rows[0][1])
    rows += [("sum of the C at the switch", numbers["c_sum_switch"]),
             ("first IRMv1 step: change of the invariant coefficient", numbers["inv_first_step"]),
             ("first IRMv1 step: change of the spurious coefficient", numbers["spu_first_step"]),
             ("invariant coefficient, at the switch → at the end", f"{numbers['inv_switch']} → {numbers['inv_end']}"),
             ("spurious coefficient, at the switch → at the end", f"{numbers['spu_switch']} → {numbers['spu_end']}"),
             ("OOD test accuracy, at the switch → at the end", f"{numbers['acc_switch']} → {numbers['acc_end']}"),
             ("spurious coefficient's change over the last quarter of IRMv1", numbers["spu_last_quarter"]),
             ("from scratch: largest coefficient (absolute)", numbers["scratch_largest"]),
             ("from scratch: largest final |C|", numbers["scratch_c_final"]),
             ("from scratch: final OOD test loss", numbers["scratch_loss_final"])]
    what = "mean ± std over " + prose.count(seeds, "seed") + "; sizes that should be zero: the largest" if seeds > 1 else "this run"
    return table(pd.DataFrame(rows, columns=["", "value"]), caption=f"Fig. 2's runs in numbers ({what})", wrap=[""])


def corollary_numbers(short, premise, switch_step: int, alpha: float, betas: Sequence[float]) -> dict[str, str]:
    """Chapter 02's Cor. 4.4 section, written once for its table and prose: for the short
    pre-training on the paper's data (``short``) and the run that meets the corollary's premise
    (``premise``, :func:`featlib.synthetic.premise_run`), both switching at ``switch_step``: the
    coefficients at the switch (and their ratio), the first IRMv1 step's change of the invariant
    one, the lowest invariant coefficient during IRMv1, the coefficients, OOD accuracy and loss
    at the end; and, from the population limit (:func:`featlib.theory.premise_sign_change`), the
    spurious coefficient below which the corollary's first step goes down, beside the one ERM
    converges to."""
    from featlib.data import erm_population_logit_weights
    from featlib.theory import premise_sign_change

    out = {}
    for name, histories in (("short", short), ("premise", premise)):
        runs = _runs(histories)
        s0 = [h.loc[switch_step] for h in runs]
        s1 = [h.loc[switch_step + 1] for h in runs]
        irm = [h.loc[h.index >= switch_step] for h in runs]
        end = [h.iloc[-1] for h in runs]
        out |= {f"{name}_inv_switch": spread([s["inv"] for s in s0]),
                f"{name}_spu_switch": spread([s["spu"] for s in s0]),
                f"{name}_ratio_switch": spread([s["inv"] / s["spu"] for s in s0], lambda v: fixed(v, 2)),
                f"{name}_inv_first_step": spread([b["inv"] - a["inv"] for a, b in zip(s0, s1)], CHANGE),
                f"{name}_inv_lowest": spread([float(h["inv"].min()) for h in irm]),
                f"{name}_inv_end": spread([e["inv"] for e in end]), f"{name}_spu_end": spread([e["spu"] for e in end]),
                f"{name}_acc_end": spread([e["test_acc"] for e in end]),
                f"{name}_loss_end": spread([e["test_loss"] for e in end])}
    threshold = premise_sign_change(alpha, tuple(betas))
    out["premise_threshold"] = prose.MISSING if threshold is None else COEFFICIENT(threshold)
    out["spu_converged"] = COEFFICIENT(erm_population_logit_weights(alpha, tuple(betas))[1] / 2)
    out["ratio_predicted"] = fixed((1 - 2 * alpha) / (1 - 2 * float(np.mean(betas))), 2)
    return out


def corollary_table(numbers: dict[str, str], seeds: int = 1) -> Table:
    """:func:`corollary_numbers` as chapter 02's table: one column per run."""
    rows = [("invariant coefficient at the switch", "inv_switch"), ("spurious coefficient at the switch", "spu_switch"),
            ("their ratio, invariant / spurious", "ratio_switch"),
            ("first IRMv1 step: change of the invariant coefficient", "inv_first_step"),
            ("lowest invariant coefficient during IRMv1", "inv_lowest"),
            ("invariant coefficient at the end", "inv_end"), ("spurious coefficient at the end", "spu_end"),
            ("OOD test accuracy at the end", "acc_end"), ("OOD test loss at the end", "loss_end")]
    frame = pd.DataFrame([(label, numbers[f"short_{k}"], numbers[f"premise_{k}"]) for label, k in rows],
                         columns=["", "short pre-training", "premise met"])
    what = "mean ± std over " + prose.count(seeds, "seed") if seeds > 1 else "this run"
    return table(frame, caption=f"Too little pre-training, and Cor. 4.4's premise ({what})", wrap=[""])


def sweep_over_seeds(sweeps: pd.DataFrame) -> pd.DataFrame:
    """The pre-training sweep's mean over seeds per length (a frame like one sweep's)."""
    mean, _ = over_seeds(sweeps, "pretrain_steps")
    return mean.reset_index()


def sweep_numbers(sweeps: pd.DataFrame, invariant_solution: float, alpha: float) -> dict[str, str]:
    """Chapter 02's pre-training sweep in words, over the seeds of ``sweeps`` (one row per (seed,
    length), :func:`featlib.synthetic.pretraining_sweep`'s columns and ``seed``): the shortest
    length after which IRMv1 keeps at least half of the invariant solution's coefficient in every
    seed, the longest after which it does not, the lengths of ERM (no pre-training left out) at
    which IRMv1's first step lowers or raises the invariant coefficient (every seed), the length with the lowest mean OOD loss and
    that loss beside the longest length's, the spurious coefficient left at both, and the OOD loss
    of the invariant solution itself (log(1 / (1 - alpha)): the invariant feature alone, at its
    Bayes weight, on the test set where it always agrees)."""
    seeds = sweeps.groupby("pretrain_steps")
    recovered = seeds["inv_final"].min() >= 0.5 * invariant_solution
    lowers = seeds["inv_first_step"].max() < 0
    raises = seeds["inv_first_step"].min() > 0
    lengths = list(recovered.index)
    trained = [v for v in lengths if v > 0]  # from scratch the first step starts at the initialisation
    mean = sweep_over_seeds(sweeps).set_index("pretrain_steps")
    best = int(mean["test_loss_final"].idxmin())
    per_seed_best = sweeps.loc[sweeps.groupby("seed")["test_loss_final"].idxmin(), "pretrain_steps"]
    longest = int(max(lengths))
    steps = lambda ls: prose.listing(prose.integer(v) for v in ls)  # noqa: E731
    return {
        "sweep_recovered_from": steps([min(v for v in lengths if recovered[v])]) if recovered.any() else prose.MISSING,
        "sweep_lost_until": steps([max(v for v in lengths if not recovered[v])]) if (~recovered).any() else prose.MISSING,
        "sweep_lowers": steps([v for v in trained if lowers[v]]),
        "sweep_raises": steps([v for v in trained if raises[v]]),
        "sweep_best_length": prose.integer(best), "sweep_longest": prose.integer(longest),
        "sweep_best_where": ("in every seed" if (per_seed_best == best).all() and sweeps["seed"].nunique() > 1
                             else "on average over the seeds" if sweeps["seed"].nunique() > 1 else "in this run"),
        "sweep_best_loss": spread(sweeps.loc[sweeps["pretrain_steps"] == best, "test_loss_final"]),
        "sweep_longest_loss": spread(sweeps.loc[sweeps["pretrain_steps"] == longest, "test_loss_final"]),
        "sweep_best_spu": spread(sweeps.loc[sweeps["pretrain_steps"] == best, "spu_final"]),
        "sweep_longest_spu": spread(sweeps.loc[sweeps["pretrain_steps"] == longest, "spu_final"]),
        "sweep_best_inv": spread(sweeps.loc[sweeps["pretrain_steps"] == best, "inv_final"]),
        "sweep_longest_inv": spread(sweeps.loc[sweeps["pretrain_steps"] == longest, "inv_final"]),
        "invariant_solution_loss": COEFFICIENT(-np.log(1 - alpha)),
    }


def first_step_rule(sweeps: pd.DataFrame, invariant_solution: float) -> dict[str, str]:
    """Whether the sign of IRMv1's first step tells where IRMv1 ends, over the sweep's seeds, in
    words: ``sweep_rule``, for the lengths with some ERM pre-training (a length tells when its
    first step raises the invariant coefficient in every seed and IRMv1 then keeps at least half of
    the invariant solution's coefficient in every seed, or lowers it in every seed and keeps less
    than half in every seed); ``sweep_scratch``, the run without pre-training, where the rule has
    no premise: at zero logits the first step is of the initialisation's size (Theorem 4.2). Each
    is "" where the sweep lacks the lengths it speaks of."""
    by = sweeps.groupby("pretrain_steps")
    first_min, first_max = by["inv_first_step"].min(), by["inv_first_step"].max()
    kept, lost = by["inv_final"].min() >= 0.5 * invariant_solution, by["inv_final"].max() < 0.5 * invariant_solution
    trained = [int(v) for v in first_min.index if v > 0]
    out = {"sweep_rule": "", "sweep_scratch": ""}
    steps = lambda ls: prose.listing(prose.integer(v) for v in ls)  # noqa: E731
    if trained:
        tells = [v for v in trained if (first_min[v] > 0 and kept[v]) or (first_max[v] < 0 and lost[v])]
        if len(tells) == len(trained):
            out["sweep_rule"] = (
                f"After any ERM pre-training in the sweep ({prose.integer(min(trained))} steps or more), the first "
                "IRMv1 step tells where IRMv1 ends: every length after which it raises the invariant coefficient "
                "ends with the feature kept, and every one after which it lowers it ends with both coefficients "
                "near zero. Prop. 4.3 and Cor. 4.4 are the two sides of one boundary, not two separate regimes.")
        else:
            out["sweep_rule"] = (
                "In the sweep the sign of IRMv1's first step does not always tell where IRMv1 ends: after "
                f"{steps(v for v in trained if v not in tells)} steps of ERM it does not, in some seed. Prop. 4.3 "
                "and Cor. 4.4 describe the two ends of the sweep, with no sharp boundary between them.")
    if 0 in first_min.index:
        change = spread(sweeps.loc[sweeps["pretrain_steps"] == 0, "inv_first_step"], CHANGE)
        signs = ", of either sign over the seeds" if first_min[0] < 0 < first_max[0] else ""
        out["sweep_scratch"] = (
            f"Without pre-training the rule does not apply: from logits near zero the first step changes the invariant "
            f"coefficient by only {change} (the initialisation's size{signs}), and IRMv1 ends with no feature "
            "(Theorem 4.2)." if lost[0] else
            f"Without pre-training the first step changes the invariant coefficient by {change}, and IRMv1 keeps "
            "half of the invariant solution's coefficient or more in some seed, which Theorem 4.2 does not predict.")
    return out
