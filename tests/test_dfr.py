"""Deep Feature Reweighting (Sec. 6, Appendix F.2; Kirichenko et al. 2022, Izmailov et al. 2022)."""
import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from featlib.evaluation import DFR_CS, DFRResult, dfr_fit_predict, train_test_split_for_dfr, worst_group_accuracy


def spurious_embeddings(n: int, p_majority: float, seed: int, extra_dims: int = 8):
    """Label y, spurious attribute a (= y with probability p_majority), group = 2y + a.

    Dimension 0 carries y with noise (the core feature), dimension 1 carries a almost noiselessly
    (the spurious feature), the rest is noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < p_majority, y, 1 - y)
    x = np.column_stack([(2 * y - 1) + 0.7 * rng.standard_normal(n), (2 * a - 1) + 0.1 * rng.standard_normal(n),
                         rng.standard_normal((n, extra_dims))])
    return x.astype(np.float32), y, a, 2 * y + a


@pytest.fixture(scope="module")
def data():
    fit = spurious_embeddings(2000, 0.97, seed=0)
    test = spurious_embeddings(4000, 0.5, seed=1)
    return fit, test


def test_group_balancing_recovers_the_minority_groups(data):
    (x, y, _, g), (xt, yt, _, gt) = data
    result = dfr_fit_predict(x, y, g, xt, seed=0)
    plain = LogisticRegression(max_iter=1000).fit(x, y).predict(xt)
    dfr_wga, plain_wga = worst_group_accuracy(result.predictions, yt, gt), worst_group_accuracy(plain, yt, gt)
    assert dfr_wga > 0.8 and plain_wga < 0.7 and dfr_wga > plain_wga + 0.15
    assert result.evaluate(yt, gt)["worst_group_acc"] == pytest.approx(dfr_wga)
    assert result.converged and result.group_size > 0 and result.n_retrains == 20


def test_c_is_chosen_from_the_grid_by_held_out_worst_group_accuracy(data):
    (x, y, _, g), (xt, _, _, _) = data
    result = dfr_fit_predict(x, y, g, xt, seed=0, n_retrains=1)
    assert isinstance(result, DFRResult) and result.C in DFR_CS
    assert list(result.tuning["C"]) == list(DFR_CS) and len(result.tuning) == len(DFR_CS)
    assert set(result.tuning.columns) >= {"C", "worst_group_acc", "mean_acc"}
    best = result.tuning["worst_group_acc"].max()
    assert result.tuning_worst_group_acc == best
    assert result.C == result.tuning.loc[result.tuning["worst_group_acc"] == best, "C"].max()  # ties -> larger C


def test_dfr_s_predicts_the_spurious_attribute(data):
    (x, _, a, g), (xt, _, at, gt) = data
    result = dfr_fit_predict(x, a, g, xt, seed=0, n_retrains=2)
    assert worst_group_accuracy(result.predictions, at, gt) > 0.95


def test_seeded_and_indifferent_to_input_types(data):
    (x, y, _, g), (xt, _, _, _) = data
    first = dfr_fit_predict(x, y, g, xt, seed=2, n_retrains=3)
    again = dfr_fit_predict(torch.from_numpy(x).double(), torch.from_numpy(y), list(g), torch.from_numpy(xt),
                            seed=2, n_retrains=3)
    np.testing.assert_array_equal(first.predictions, again.predictions)
    assert first.C == again.C


def test_multiclass_targets_and_sparse_group_ids():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 900)
    x = 2.0 * np.eye(3)[y] + rng.standard_normal((900, 3))
    groups = 10 * y + 7 * rng.integers(0, 2, 900)  # ids 0, 7, 10, 17, 20, 27: no contiguous range
    result = dfr_fit_predict(x, y, groups, x, seed=0, n_retrains=2)
    assert set(np.unique(result.predictions)) == {0, 1, 2}
    assert np.mean(result.predictions == y) > 0.75


def test_bad_inputs_give_clear_errors(data):
    (x, y, _, g), (xt, _, _, _) = data
    with pytest.raises(ValueError, match="lengths differ"):
        dfr_fit_predict(x, y[:-1], g, xt)
    with pytest.raises(ValueError, match="single class"):
        dfr_fit_predict(x, np.ones_like(y), g, xt)
    with pytest.raises(ValueError, match="features"):
        dfr_fit_predict(x, y, g, xt[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        dfr_fit_predict(np.full_like(x, np.nan), y, g, xt)
    with pytest.raises(ValueError, match="Cs"):
        dfr_fit_predict(x, y, g, xt, Cs=())
    rare = np.zeros(len(y), dtype=int)
    rare[:2] = 1  # two examples of class 1, and groups that ignore the label with a singleton group:
    singleton = (np.arange(len(y)) == len(y) - 1).astype(int)  # balancing keeps one example per group
    with pytest.raises(ValueError, match=r"lacks target class\(es\) \[1\]"):
        dfr_fit_predict(x, rare, singleton, xt, n_retrains=1)


def test_camelyon_split_never_scores_a_fitted_example():
    fit_train, fit_test, eval_test = train_test_split_for_dfr(300, 100, seed=0)
    assert len(np.intersect1d(fit_test, eval_test)) == 0
    np.testing.assert_array_equal(np.union1d(fit_test, eval_test), np.arange(100))
    assert len(fit_train) + len(fit_test) == 200 and fit_train.max() < 300
    again = train_test_split_for_dfr(300, 100, seed=0)
    for a, b in zip((fit_train, fit_test, eval_test), again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(fit_test, train_test_split_for_dfr(300, 100, seed=1)[1])
    with pytest.raises(ValueError, match="n_test"):
        train_test_split_for_dfr(10, 0, seed=0)
