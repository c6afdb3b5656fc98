"""Chapters 01-02 at the paper's size (featlib.experiments.two_bit_studies, results/two-bit): the
studies run what the chapters run, at the chapters' defaults; their first IRMv1 steps are the
closed-form gradient's; the sample limit and the population sign change of Cor. 4.4 are what they
say; and the committed studies carry the theorems' claims at the paper's size."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from featlib.data import TwoBitSpec, erm_population_logit_weights, sample_logit_weights
from featlib.experiments.gap_studies import STUDIES, study_key
from featlib.experiments.two_bit_studies import (IRMV1_RUNS, STUDY_CHAPTERS, TWO_BIT_STUDIES, study_options,
                                                 two_bit_alpha, two_bit_erm, two_bit_irmv1, two_bit_pretraining)
from featlib.synthetic import (SyntheticSetup, premise_run, pretraining_sweep, recorded_steps,
                               spurious_lead_share, zero_crossing)
from featlib.theory import irmv1_gradient_identity, irmv1_population_penalty_gradient, premise_sign_change
from featlib.training import Phase, train_full_batch

CPU = torch.device("cpu")
TINY = dict(n_per_env=150, d=6)
RESULTS = Path(__file__).resolve().parents[1] / "results" / "two-bit"


def test_every_study_is_registered_and_runs_at_its_chapters_defaults():
    """Each option of a study is a parameter of its chapter with the same default (the thinning
    of the IRMv1 histories, which no chapter has, aside): the committed study is the chapter's run."""
    from featbook.chapters import NOTEBOOK_DIR
    from featbook.notebook_params import parameter_defaults

    assert set(TWO_BIT_STUDIES) <= set(STUDIES.names())
    for name in TWO_BIT_STUDIES:
        defaults = parameter_defaults(NOTEBOOK_DIR / f"{STUDY_CHAPTERS[name]}.ipynb")
        options = study_options(name)
        for option, value in options.items():
            if option in ("dense_steps", "every"):
                continue
            assert option in defaults, f"{name}: {option} is no parameter of {STUDY_CHAPTERS[name]}"
            chapter = list(defaults[option]) if isinstance(defaults[option], (list, tuple)) else defaults[option]
            assert chapter == value, f"{name}: {option} is {value!r} in the study and {chapter!r} in the chapter"
    ch01 = parameter_defaults(NOTEBOOK_DIR / "01_erm_feature_learning.ipynb")
    assert ch01["activation"] in study_options("two-bit-erm")["compare_activations"]  # its main run is there
    assert ch01["alpha"] in study_options("two-bit-alpha")["sweep_alphas"]  # its sample limit is in the sweep


def test_a_changed_default_changes_the_study_key(monkeypatch):
    before = study_key("two-bit-erm")
    monkeypatch.setattr(two_bit_erm, "__defaults__", tuple(
        2000 if d == 1000 else d for d in two_bit_erm.__defaults__))
    assert study_key("two-bit-erm") != before


def test_the_erm_study_is_the_chapters_erm_run_at_every_step():
    frame = two_bit_erm(3, CPU, **TINY, steps=15, compare_activations=("identity", "relu"))
    assert list(frame["activation"].unique()) == ["identity", "relu"] and set(frame["seed"]) == {3}
    for name in ("identity", "relu"):
        setup = SyntheticSetup(spec=TwoBitSpec(**TINY), activation=name, seed=3)
        chapter = setup.run([Phase("erm", 15)], progress=False)
        rows = frame[frame["activation"] == name].set_index("step")
        assert list(rows.index) == list(range(16))
        pd.testing.assert_frame_equal(rows[["inv", "spu", "train_acc", "test_acc"]],
                                      chapter[["inv", "spu", "train_acc", "test_acc"]])


def test_the_irmv1_study_keeps_the_chapters_runs_at_its_recorded_steps():
    options = dict(pretrain_steps=12, irm_steps=30, short_pretrain_steps=3, dense_steps=4, every=5)
    frame = two_bit_irmv1(2, CPU, **TINY, **options)
    assert list(frame["run"].unique()) == list(IRMV1_RUNS)
    setup = SyntheticSetup(spec=TwoBitSpec(**TINY), seed=2)
    irm = Phase("irmv1", 30, 1e8)
    chapter = {"pretrained": setup.run([Phase("erm", 12), irm], progress=False),
               "scratch": setup.run([irm], progress=False),
               "short": setup.run([Phase("erm", 3), irm], progress=False),
               "premise": premise_run(setup, 3, 30, 1e8, 0.5, progress=False)}
    columns = ["inv", "spu", "c_irmv1_0", "c_irmv1_1", "test_acc", "test_loss"]
    for run, history in chapter.items():
        rows = frame[frame["run"] == run].set_index("step")
        switch = {"pretrained": 12, "short": 3, "premise": 3}.get(run)
        if switch is not None:  # the switch and the first IRMv1 step are kept: Prop. 4.3 and Cor. 4.4 read them
            assert {switch, switch + 1} <= set(rows.index)
        assert rows.index[-1] == history.index[-1]
        pd.testing.assert_frame_equal(rows[columns], history.loc[rows.index, columns], check_names=False)


def test_the_sweeps_are_the_chapters_sweeps():
    setup = SyntheticSetup(spec=TwoBitSpec(**TINY), seed=1)
    sweep = two_bit_pretraining(1, CPU, **TINY, sweep_pretrain_steps=(0, 4), sweep_irm_steps=10)
    pd.testing.assert_frame_equal(sweep.drop(columns=["seed", "irm_steps"]),
                                  pretraining_sweep(setup, [0, 4], 10, 1e8, progress=False))
    alphas = two_bit_alpha(1, CPU, **TINY, sweep_alphas=(0.1, 0.3), sweep_steps=12, probe_step=3)
    assert list(alphas["alpha"]) == [0.1, 0.3] and set(alphas["probe_step"]) == {3} and set(alphas["steps"]) == {12}


def _switch_weights(setup: SyntheticSetup, erm_steps: int, premise_alpha: float | None = None):
    """The filters when IRMv1 starts, trained as the study trains them, and the IRMv1 data."""
    model = setup.model()
    train, test = setup.data()
    pre = setup.with_alpha(premise_alpha).data()[0] if premise_alpha is not None else train
    train_full_batch(model, pre, test, [Phase("erm", erm_steps)], setup.lr, progress=False)
    return model.weight.detach().clone(), train


@pytest.mark.parametrize("run, erm_steps, premise_alpha", [("pretrained", 40, None), ("short", 3, None),
                                                          ("premise", 3, 0.5)])
def test_the_first_irmv1_step_is_the_closed_form_gradients(run, erm_steps, premise_alpha):
    """Appendix D.1's gradient (featlib.theory, no autograd), divided by lambda as the IRMv1 phase
    divides its objective, moves each coefficient by what the study recorded over the first step."""
    setup = SyntheticSetup(spec=TwoBitSpec(n_per_env=300, d=6), seed=4)
    frame = two_bit_irmv1(4, CPU, n_per_env=300, d=6, pretrain_steps=40, irm_steps=5, short_pretrain_steps=3,
                          dense_steps=3, every=5)
    rows = frame[frame["run"] == run].set_index("step")
    weight, train = _switch_weights(setup, erm_steps, premise_alpha)
    grad = irmv1_gradient_identity(weight, train.to(CPU), 1e8)
    signed = grad * torch.tensor([1.0, -1.0], dtype=grad.dtype).view(2, 1, 1)
    for column, coord in (("inv", 0), ("spu", 1)):
        predicted = -setup.lr / 1e8 * float(signed[..., coord].mean())
        recorded = rows.loc[erm_steps + 1, column] - rows.loc[erm_steps, column]
        assert recorded == pytest.approx(predicted, rel=2e-3, abs=1e-7), (run, column)


def test_the_first_step_signs_follow_the_population_closed_form():
    """Prop. 4.3 after converged ERM and Cor. 4.4 where its premise holds, at a moderate n: the
    sign of each first step is the population limit's (featlib.theory)."""
    spec = TwoBitSpec(n_per_env=1500, d=5)
    setup = SyntheticSetup(spec=spec, m=4, seed=0)
    irm = Phase("irmv1", 1, 1e8)
    runs = {"pretrained": (setup.run([Phase("erm", 150), irm], progress=False), 150),
            "premise": (premise_run(setup, 5, 1, 1e8, 0.5, progress=False), 5)}
    for run, (rows, switch) in runs.items():
        s0, s1 = rows.loc[switch], rows.loc[switch + 1]
        grad = irmv1_population_penalty_gradient(spec.alpha, spec.betas, 2 * s0["inv"], 2 * s0["spu"])
        assert np.sign(s1["inv"] - s0["inv"]) == -np.sign(grad[0]), run
        assert np.sign(s1["spu"] - s0["spu"]) == -np.sign(grad[1]), run
    premise = runs["premise"][0]
    assert abs(premise.loc[5, "inv"]) < 0.1 * premise.loc[5, "spu"]  # the premise: o(1) against Theta(1)
    assert premise.loc[6, "inv"] < premise.loc[5, "inv"]  # Cor. 4.4


def test_the_premise_sign_change_is_where_the_population_gradient_changes_sign():
    alpha, betas = 0.25, (0.1, 0.2)
    t = premise_sign_change(alpha, betas)
    converged = erm_population_logit_weights(alpha, betas)[1] / 2
    assert 0 < t < converged
    below = irmv1_population_penalty_gradient(alpha, betas, 0.0, 2 * (t - 0.01))[0]
    above = irmv1_population_penalty_gradient(alpha, betas, 0.0, 2 * (t + 0.01))[0]
    assert below > 0 > above  # the first step lowers the invariant coefficient below t and raises it above
    assert premise_sign_change(alpha, betas, upper=t / 2) is None


def test_the_population_gradient_is_the_large_sample_closed_form():
    """At n large and no noise, Appendix D.1's finite-sample gradient of the penalty approaches the
    population limit's."""
    spec = TwoBitSpec(n_per_env=200000, d=3, sigma_p=0.0)
    train = spec.sample_train(0)
    m, u = 1, torch.tensor([0.3, 0.8, 0.0])
    weight = torch.stack([u / 2, -u / 2]).view(2, m, 3)  # (1/m) sum (w_{+1} - w_{-1}) = u
    lam = 1e6
    erm_only = irmv1_gradient_identity(weight, train, 0.0)
    both = irmv1_gradient_identity(weight, train, lam)
    penalty = (both - erm_only)[0, 0] / lam  # d(sum_e C_e^2)/du, as the filters' gradient carries it (m = 1)
    expected = irmv1_population_penalty_gradient(spec.alpha, spec.betas, 0.3, 0.8)
    assert float(penalty[0]) == pytest.approx(expected[0], abs=4e-3)
    assert float(penalty[1]) == pytest.approx(expected[1], abs=4e-3)


def test_erm_ends_at_the_samples_own_limit_which_approaches_the_populations():
    spec = TwoBitSpec(n_per_env=400, d=5)
    setup = SyntheticSetup(spec=spec, m=4, seed=2)
    history = setup.run([Phase("erm", 2500)], progress=False)
    u = sample_logit_weights(setup.data()[0])
    assert history["inv"].iloc[-1] == pytest.approx(u[0] / 2, abs=2e-3)
    assert history["spu"].iloc[-1] == pytest.approx(u[1] / 2, abs=2e-3)
    big = sample_logit_weights(TwoBitSpec(n_per_env=100000, d=3).sample_train(0))
    population = erm_population_logit_weights(spec.alpha, spec.betas)
    assert big == pytest.approx(population, abs=0.03)
    separable = TwoBitSpec(n_per_env=20, d=3).sample_train(0)
    separable.x[:, 0, 0] = separable.y  # the invariant coordinate now equals the label
    with pytest.raises(ValueError, match="^the logistic regression on the sample's two feature coordinates"):
        sample_logit_weights(separable)


def test_recorded_steps_and_the_premise_runs_bad_input():
    assert recorded_steps(30, (0, 20), dense=3, every=10) == [0, 1, 2, 3, 10, 20, 21, 22, 23, 30]
    assert recorded_steps(7, every=5, dense=0) == [0, 5, 7]
    setup = SyntheticSetup(spec=TwoBitSpec(**TINY))
    with pytest.raises(ValueError, match=r"^premise_alpha must be a probability in the open interval \(0, 1\); got 1.0$"):
        premise_run(setup, 3, 5, 1e8, premise_alpha=1.0)
    with pytest.raises(ValueError, match=r"^pretrain_steps must be an integer in \[1, inf\]; got 0$"):
        premise_run(setup, 0, 5, 1e8)
    with pytest.raises(ValueError, match="^study must be one of two-bit-erm"):
        study_options("two-bit-nothing")


# -- the committed paper-size studies (results/two-bit) -----------------------------------------
@pytest.fixture(scope="module")
def committed():
    from featlib.experiments.results import load_study

    found = {name: load_study(RESULTS, name) for name in TWO_BIT_STUDIES}
    if any(f is None for f in found.values()):
        pytest.skip("results/two-bit holds not every two-bit study")
    return {name: f["frame"] for name, f in found.items()}


def test_the_committed_studies_hold_the_same_seeds_at_the_papers_size(committed):
    seeds = [set(frame["seed"]) for frame in committed.values()]
    assert len(seeds[0]) >= 3 and all(s == seeds[0] for s in seeds)
    erm = committed["two-bit-erm"]
    assert erm.groupby(["seed", "activation"])["step"].max().eq(study_options("two-bit-erm")["steps"]).all()


def test_the_committed_studies_carry_theorem_4_1(committed):
    erm, sweep = committed["two-bit-erm"], committed["two-bit-alpha"]
    beta_bar = float(np.mean(study_options("two-bit-alpha")["betas"]))
    for (seed, activation), rows in erm.groupby(["seed", "activation"]):
        history = rows.set_index("step")
        assert spurious_lead_share(history) >= 0.95, (seed, activation)
        final = history.iloc[-1]
        assert 0.3 < final["inv"] < final["spu"] and final["test_acc"] < 0.5, (seed, activation)
    for seed, rows in sweep.groupby("seed"):
        for when in ("probe", "final"):
            flip = zero_crossing(rows["alpha"], rows[f"spu_{when}"] - rows[f"inv_{when}"])
            assert flip == pytest.approx(beta_bar, abs=0.02), (seed, when)
        assert (rows["inv_final"] > 0).all() and (rows["spu_final"] > 0).all()  # both features, at every alpha
        main = rows[rows["alpha"] == study_options("two-bit-alpha")["alpha"]].iloc[0]
        assert main["inv_final"] == pytest.approx(main["inv_sample_limit"], abs=1e-3)


def test_the_committed_studies_carry_theorem_4_2_prop_4_3_and_cor_4_4(committed):
    runs, sweep = committed["two-bit-irmv1"], committed["two-bit-pretraining"]
    options = study_options("two-bit-irmv1")
    pre, short = options["pretrain_steps"], options["short_pretrain_steps"]
    for seed, rows in runs.groupby("seed"):
        run = {name: r.set_index("step") for name, r in rows.groupby("run")}
        assert run["scratch"][["inv", "spu"]].abs().to_numpy().max() < 0.01  # Theorem 4.2
        s0, s1 = run["pretrained"].loc[pre], run["pretrained"].loc[pre + 1]
        assert abs(s0["c_irmv1_0"] + s0["c_irmv1_1"]) < 2e-3 and s1["inv"] > s0["inv"] and s1["spu"] < s0["spu"]
        p0, p1 = run["premise"].loc[short], run["premise"].loc[short + 1]
        assert abs(p0["inv"]) < 0.05 < p0["spu"] and p1["inv"] < p0["inv"]  # Cor. 4.4, its premise met
    solution = erm_population_logit_weights(options["alpha"], tuple(options["betas"]))[0] / 2
    recovered = sweep.groupby("pretrain_steps")["inv_final"].min() >= 0.5 * solution
    raises = sweep.groupby("pretrain_steps")["inv_first_step"].min() > 0
    longer = recovered.index > 0
    assert recovered[longer].equals(raises[longer])  # IRMv1 recovers exactly where its first step raises it
    assert not recovered.loc[0] and recovered.iloc[-1]


# -- the views of the committed studies (featbook.two_bit_report), on fabricated runs -----------
def _history(steps, inv, spu, c=(0.0, 0.0), phase_at=None):
    """A history of ``steps`` + 1 rows whose coefficients follow the arrays ``inv`` and ``spu``."""
    index = pd.Index(range(steps + 1), name="step")
    frame = pd.DataFrame({"inv": inv, "spu": spu, "c_irmv1_0": c[0], "c_irmv1_1": c[1], "train_acc": 0.85,
                          "test_acc": 0.2, "test_loss": 0.8}, index=index)
    frame["phase"] = 0 if phase_at is None else (index >= phase_at).astype(int)
    return frame


def test_spread_and_the_lead_phrases_say_what_the_seeds_hold():
    from featbook import prose
    from featbook.two_bit_report import CHANGE, activations_phrase, lead_phrase_over_seeds, spread

    nb = prose.NBSP
    assert spread([0.5, 0.6]) == f"0.550{nb}±{nb}0.050" and spread([0.5]) == "0.500"
    assert spread([1e-4, 3e-4], CHANGE) == f"+2.00{nb}×{nb}10⁻⁴{nb}±{nb}1.00{nb}×{nb}10⁻⁴"  # no sign on the std
    assert lead_phrase_over_seeds([1.0, 1.0]) == "every step, in every seed"
    assert lead_phrase_over_seeds([1.0, 0.97]) == "at least 97.0% of the steps in every seed"
    assert lead_phrase_over_seeds([0.97]) == "97.0% of the steps"
    every = "every step, in every seed"
    assert activations_phrase(every, [1.0, 1.0]) == f"at {every}, with the identity activation and with the others"
    assert activations_phrase(every, [1.0, 0.9]) == (f"at {every} with the identity activation (and at 90.0% or more of "
                                                     "the steps with the others)")
    assert activations_phrase("every step", []) == "at every step"


def test_figure2_and_corollary_numbers_write_each_quantity_one_way_in_table_and_prose():
    from featbook import prose
    from featbook.two_bit_report import (TINY, corollary_numbers, corollary_table, figure2_numbers, figure2_table)

    t = np.arange(21)
    with_pt = _history(20, np.where(t <= 10, 0.5, 0.5 + 0.01 * (t - 10)), np.where(t <= 10, 0.9, 0.9 - 0.02 * (t - 10)),
                       (np.where(t <= 10, -0.1, 0.0), np.where(t <= 10, 0.1 + 1e-5, 0.0)), phase_at=10)
    scratch = _history(20, 0.002 * np.exp(-t), -0.001 * np.exp(-t))
    numbers = figure2_numbers({1: with_pt, 2: with_pt}, {1: scratch, 2: scratch * 2}, 10)
    assert numbers["c_sum_switch"].startswith("+1.00\u00a0×\u00a010⁻⁵")  # the sum of C: scientific, with its sign
    assert numbers["inv_first_step"].startswith("+1.00\u00a0×\u00a010⁻²")
    assert numbers["scratch_largest"] == TINY(0.004)  # the largest over seeds, one form
    html = figure2_table(numbers, seeds=2)._repr_html_()
    for key in ("c_sum_switch", "inv_first_step", "scratch_largest", "scratch_c_final"):
        assert numbers[key] in html  # the table shows the string the prose quotes
    one = figure2_numbers(with_pt, scratch, 10)
    assert one["inv_switch"] == "0.500" and "±" not in one["inv_end"]
    short = _history(20, np.where(t <= 3, 0.1 * t, 0.3 - 0.01 * (t - 3)), np.where(t <= 3, 0.15 * t, 0.45), phase_at=3)
    cor = corollary_numbers({0: short}, {0: short}, 3, 0.25, (0.1, 0.2))
    assert cor["short_ratio_switch"] == prose.number(0.3 / 0.45, 2)
    assert cor["short_inv_first_step"].startswith("−1.00")
    assert cor["premise_threshold"] == "0.779" and cor["spu_converged"] == prose.number(np.log(0.85 / 0.15) / 2, 3)
    assert cor["short_inv_lowest"] in corollary_table(cor)._repr_html_()


def test_sweep_numbers_find_the_boundary_the_first_step_and_the_best_length():
    from featbook.two_bit_report import sweep_numbers

    rows = []
    for seed in (0, 1):
        for length, inv, first, loss, spu in ((0, 0.0, 1e-6, 0.693, 0.0), (5, 0.01, -1e-3, 0.69, 0.0),
                                              (15, 0.67, 2e-3, 0.30 + seed / 100, 0.2),
                                              (1000, 0.71, 1e-3, 0.34, 0.32)):
            rows.append({"seed": seed, "pretrain_steps": length, "inv_switch": 0.1, "spu_switch": 0.2,
                         "inv_first_step": first, "spu_first_step": -1e-3, "inv_final": inv, "spu_final": spu,
                         "test_acc_final": 1.0, "test_loss_final": loss})
    said = sweep_numbers(pd.DataFrame(rows), invariant_solution=0.55, alpha=0.25)
    assert said["sweep_recovered_from"] == "15" and said["sweep_lost_until"] == "5"
    assert said["sweep_lowers"] == "5" and said["sweep_raises"] == "15 and 1,000"  # no pre-training left out
    assert said["sweep_best_length"] == "15" and said["sweep_longest"] == "1,000"
    assert said["sweep_best_loss"] == "0.305\u00a0±\u00a00.005" and said["sweep_best_where"] == "in every seed"
    assert said["invariant_solution_loss"] == "0.288"  # log(4/3): the invariant feature alone at its Bayes weight


def test_the_increments_order_counts_ties_apart_and_the_phrase_says_so():
    from featbook.two_bit_report import order_phrase
    from featlib.synthetic import increment_order

    inv = np.array([0.0, 1.0, 1.5, 1.75, 1.875, 2.0, 2.125])
    spu = np.array([0.0, 1.5, 2.25, 2.625, 2.75, 2.875, 3.0])  # increments 1.5, .75, .375 ahead, then three ties
    history = pd.DataFrame({"inv": inv, "spu": spu, "phase": 0}, index=pd.Index(range(7), name="step"))
    order = increment_order(history)
    assert order == {"spurious": 3, "invariant": 0, "tie": 3, "first_tie": 4}
    assert order_phrase([order]) == ("every step where the two differ; they are equal to float32's precision at 3 "
                                     "of the 6 steps, none before step 4")
    assert order_phrase([{"spurious": 5, "invariant": 0, "tie": 0, "first_tie": 0}] * 2) == "every step, in every seed"
    assert order_phrase([{"spurious": 9, "invariant": 1, "tie": 0, "first_tie": 0},
                         {"spurious": 5, "invariant": 0, "tie": 0, "first_tie": 0}]) == (
        "at least 90.0% of the steps in every seed")


def test_first_step_rule_says_whether_the_first_step_tells_and_leaves_no_pre_training_out():
    from featbook.two_bit_report import DRIFT, first_step_rule

    def sweeps(cells):
        return pd.DataFrame([{"seed": seed, "pretrain_steps": length, "inv_first_step": first[seed], "inv_final": inv[seed]}
                             for length, first, inv in cells for seed in (0, 1)])

    # the committed sweep's shape: 0 steps raises (or not, by seed) and still learns nothing; past 0 the sign tells
    holds = sweeps([(0, (1e-4, -9e-5), (0.001, 0.0)), (2, (-2e-3, -2e-3), (0.01, 0.02)),
                    (15, (1e-3, 1e-3), (0.6, 0.7)), (1000, (1e-4, 2e-4), (0.5, 0.5))])
    said = first_step_rule(holds, invariant_solution=0.55)
    assert said["sweep_rule"].startswith("After any ERM pre-training in the sweep (2 steps or more)")
    assert "does not apply" in said["sweep_scratch"] and "of either sign over the seeds" in said["sweep_scratch"]
    assert "Theorem 4.2" in said["sweep_scratch"]
    # a length whose first step raises the coefficient but whose run loses the feature breaks the rule
    broken = sweeps([(2, (-2e-3, -2e-3), (0.01, 0.02)), (15, (1e-3, 1e-3), (0.6, 0.1))])
    said = first_step_rule(broken, invariant_solution=0.55)
    assert "does not always tell" in said["sweep_rule"] and "after 15 steps" in said["sweep_rule"]
    assert said["sweep_scratch"] == ""  # no run without pre-training in the sweep
    # from scratch one sign in every seed, and a seed that keeps the feature: said, not hidden
    odd = sweeps([(0, (1e-4, 2e-4), (0.4, 0.0)), (15, (1e-3, 1e-3), (0.6, 0.7))])
    said = first_step_rule(odd, invariant_solution=0.55)
    assert "either sign" not in said["sweep_scratch"] and "Theorem 4.2 does not predict" in said["sweep_scratch"]
    assert DRIFT(-0.0815) == "−0.082" and DRIFT(2e-4) == "+2.00\u00a0×\u00a010⁻⁴"
