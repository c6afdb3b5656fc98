"""The behaviour chapters 01-02 claim, at small scale (Theorems 4.1-4.2, Prop. 4.3, Cor. 4.4)."""
import math

import pytest

from featlib.data import TwoBitSpec, erm_population_logit_weights
from featlib.synthetic import SyntheticSetup, alpha_sweep, spurious_lead_share, zero_crossing
from featlib.training import Phase, train_full_batch

SMALL = TwoBitSpec(alpha=0.25, betas=(0.1, 0.2), n_per_env=1000, d=30)


@pytest.fixture(scope="module")
def setup():
    return SyntheticSetup(spec=SMALL, m=10, lr=1.0, seed=0)


@pytest.fixture(scope="module")
def erm_history(setup):
    return setup.run([Phase("erm", 600)], progress=False)


def test_history_records_the_tracked_quantities(erm_history):
    expected = {"loss", "penalty", "train_acc", "test_acc", "test_loss", "inv", "spu",
                "risk_0", "risk_1", "c_irmv1_0", "c_irmv1_1", "phase", "objective"}
    assert expected <= set(erm_history.columns)
    assert list(erm_history.index[:2]) == [0, 1] and erm_history.index[-1] == 600


def test_erm_converges_to_the_population_limit():
    spec = TwoBitSpec(alpha=0.25, betas=(0.1, 0.2), n_per_env=40000, d=5, sigma_p=0.01)
    h = SyntheticSetup(spec=spec, m=4, lr=1.0, seed=1).run([Phase("erm", 400)], progress=False)
    u1, u2 = erm_population_logit_weights(spec.alpha, spec.betas)
    # coefficient = u / 2; sampling error of the log-odds at n = 80000 is about 0.01
    assert h["inv"].iloc[-1] == pytest.approx(u1 / 2, abs=0.03)
    assert h["spu"].iloc[-1] == pytest.approx(u2 / 2, abs=0.03)


def test_theorem_4_1_spurious_grows_faster_when_alpha_exceeds_mean_beta(erm_history):
    assert spurious_lead_share(erm_history) == 1.0
    final = erm_history.iloc[-1]
    assert final["inv"] > 0.3 and final["spu"] > final["inv"]  # both learned, spurious more
    assert final["test_acc"] < 0.5  # ERM fails on the reversed test distribution


def test_theorem_4_1_order_reverses_when_alpha_is_below_mean_beta(setup):
    h = setup.with_alpha(0.05).run([Phase("erm", 300)], progress=False)
    assert spurious_lead_share(h) == 0.0
    assert h["test_acc"].iloc[-1] > 0.9


def test_alpha_sweep_flips_at_mean_beta(setup):
    sweep = alpha_sweep(setup, [0.05, 0.1, 0.13, 0.17, 0.2, 0.3], steps=100, probe_step=20, progress=False)
    flip = zero_crossing(sweep["alpha"], sweep["spu_probe"] - sweep["inv_probe"])
    assert flip == pytest.approx(0.15, abs=0.02)


def test_zero_crossing_interpolates():
    assert zero_crossing([0, 1, 2], [-1, 1, 3]) == 0.5
    assert math.isnan(zero_crossing([0, 1], [1, 2]))


def test_theorem_4_2_irmv1_from_scratch_learns_no_feature(setup):
    h = setup.run([Phase("irmv1", 800, 1e8)], progress=False)
    assert h[["inv", "spu"]].abs().to_numpy().max() < 0.01
    assert max(abs(h["c_irmv1_0"].iloc[-1]), abs(h["c_irmv1_1"].iloc[-1])) < 2e-4
    assert h["test_loss"].iloc[-1] == pytest.approx(math.log(2), abs=0.01)


def test_prop_4_3_irmv1_after_converged_erm_moves_towards_the_invariant_feature(setup):
    h = setup.run([Phase("erm", 600), Phase("irmv1", 1500, 1e8)], progress=False)
    switch, nxt, end = h.loc[600], h.loc[601], h.iloc[-1]
    assert abs(switch["c_irmv1_0"] + switch["c_irmv1_1"]) < 2e-3  # sum_e C^e = 0 at convergence
    assert switch["c_irmv1_0"] < 0 < switch["c_irmv1_1"]
    assert nxt["inv"] > switch["inv"] and nxt["spu"] < switch["spu"]
    assert end["inv"] > switch["inv"] and end["spu"] < switch["spu"] and end["inv"] > end["spu"]
    assert end["test_acc"] > 0.95


def test_cor_4_4_irmv1_after_short_pretraining_loses_the_invariant_feature(setup):
    h = setup.run([Phase("erm", 4), Phase("irmv1", 1500, 1e8)], progress=False)
    switch, nxt, end = h.loc[4], h.loc[5], h.iloc[-1]
    assert nxt["inv"] < switch["inv"]
    assert end["inv"] < 0.5 * switch["inv"]


def test_bad_training_arguments(setup):
    train, test = setup.data()
    with pytest.raises(ValueError, match=r"^steps must be an integer in \[0, inf\]; got -5"):
        Phase("erm", -5)
    with pytest.raises(ValueError, match="^objective must be one of"):
        Phase("vrex_typo", 5)
    with pytest.raises(ValueError, match="^lr must be"):
        train_full_batch(setup.model(), train, test, [Phase("erm", 1)], lr=0.0)
    with pytest.raises(ValueError, match="^phases must be"):
        train_full_batch(setup.model(), train, test, [], lr=1.0)
    with pytest.raises(ValueError, match="^activation must be one of"):
        SyntheticSetup(activation="gelu")


def test_recording_only_named_steps_changes_no_value(setup):
    """record_at (what the pre-training sweep uses) keeps the rows it names and the last, equal to
    the same rows of a history recorded at every step: recording never changes training."""
    phases = [Phase("erm", 7), Phase("irmv1", 20, 1e2)]
    every = setup.run(phases, progress=False)
    some = setup.run(phases, progress=False, record_at=(0, 7))
    assert list(some.index) == [0, 7, 27]
    assert some.equals(every.loc[[0, 7, 27]])
    with pytest.raises(ValueError, match=r"^record_at\[i\] must be an integer in \[0, inf\]; got -1"):
        setup.run(phases, progress=False, record_at=(-1,))
