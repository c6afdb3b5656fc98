"""Deep Feature Reweighting (DFR): a linear probe that measures what a frozen featurizer learned.

DFR (Kirichenko, Izmailov & Wilson, "Last Layer Re-Training is Sufficient for Robustness to
Spurious Correlations", 2022) drops the trained head and refits a logistic regression on the
featurizer's embeddings of a *group-balanced* held-out set, where the spurious correlation does
not hold. Izmailov et al. ("On Feature Learning in the Presence of Spurious Correlations",
NeurIPS 2022) use its worst-group accuracy as a measure of how well the invariant features
were learned. The FeAT paper (Sec. 6, Table 3; Appendix F.2) reports it on WILDS as "DFR",
and "DFR-s" with the spurious attribute (the environment) as the regression target, which
measures how much spurious signal the features carry.

The procedure follows ``dfr_evaluate_spurious.py`` in izmailovpavel/spurious_feature_learning
(the code the paper used, Table 7), see :func:`dfr_fit_predict`, with these deliberate
differences, each recorded here so a reader can weigh them:

* the embeddings are standardised with the mean/std of the whole fit set, for tuning and for
  the final fit alike (the reference code fits the tuning scaler on the balanced half only);
* groups are the *observed* group ids (``np.unique``), so an empty group id cannot make the
  balanced subsample empty (the reference code iterates ``range(max(g) + 1)``);
* multiclass targets use the ``saga`` solver with a multinomial L1 model (``liblinear`` no
  longer fits more than two classes in scikit-learn >= 1.8); binary targets use ``liblinear``
  as the reference does;
* random draws come from ``numpy.random.default_rng(seed)`` rather than the global RNG.
"""
from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..validation import check_int

DFR_CS = (1.0, 0.7, 0.3, 0.1, 0.07, 0.03, 0.01)  # C_OPTIONS of the reference code
DFR_RETRAINS = 20  # the reference code averages the weights of 20 balanced refits
_CLASS_DRAWS = 20  # redraws of a balanced subsample that misses a class (as the reference)


@dataclass
class DFRResult:
    """What :func:`dfr_fit_predict` returns.

    ``predictions``: predicted targets (labels, or spurious attributes for DFR-s) for
    ``eval_x``; ``C``: the selected inverse L1 strength; ``tuning_worst_group_acc``: its
    worst-group accuracy on the held-out half of the fit set; ``tuning``: one row per C with
    columns ``C``, ``worst_group_acc``, ``mean_acc``, ``converged``; ``converged``: False if any
    logistic regression stopped at ``max_iter`` (scikit-learn's ConvergenceWarning, silenced
    and recorded here); ``group_size``: examples per group in each final balanced refit."""

    predictions: np.ndarray
    C: float
    tuning_worst_group_acc: float
    tuning: pd.DataFrame
    converged: bool = True
    group_size: int = 0
    n_retrains: int = 1

    def evaluate(self, y: Any, groups: Any) -> dict[str, float]:
        """Worst-group and mean accuracy of ``predictions`` against the eval targets."""
        y, groups = _as_vector("y", y), _as_vector("groups", groups)
        _check_lengths(predictions=self.predictions, y=y, groups=groups)
        return {"worst_group_acc": worst_group_accuracy(self.predictions, y, groups),
                "mean_acc": float(np.mean(self.predictions == y))}


# --------------------------------------------------------------------------- inputs


def _to_numpy(name: str, value: Any) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except Exception as err:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name} must be an array or tensor; got {type(value).__name__}") from err


def _as_matrix(name: str, value: Any) -> np.ndarray:
    array = _to_numpy(name, value)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"{name} must be a real (n, n_features) matrix of embeddings; got shape {array.shape}, "
                         f"dtype {array.dtype}")
    array = array.astype(np.float64, copy=False)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return array


def _as_vector(name: str, value: Any) -> np.ndarray:
    array = _to_numpy(name, value)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one entry per example); got shape {array.shape}")
    return array


def _check_lengths(**arrays: np.ndarray) -> None:
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"lengths differ: {', '.join(f'{k}={v}' for k, v in lengths.items())}")


def _check_cs(Cs: Any) -> tuple[float, ...]:
    if isinstance(Cs, (str, bytes)) or not isinstance(Cs, Sequence) or len(Cs) == 0:
        raise ValueError(f"Cs must be a non-empty sequence of positive numbers; got {Cs!r}")
    values = []
    for c in Cs:
        if isinstance(c, bool) or not isinstance(c, (int, float, np.number)) or not math.isfinite(c) or c <= 0:
            raise ValueError(f"Cs must hold finite numbers > 0; got {c!r}")
        values.append(float(c))
    if len(set(values)) != len(values):
        raise ValueError(f"Cs has duplicates: {Cs!r}")
    return tuple(values)


# --------------------------------------------------------------------------- metrics


def group_accuracies(pred: Any, y: Any, groups: Any) -> dict[Any, float]:
    """Accuracy of ``pred`` against ``y`` within each group present in ``groups``."""
    pred, y, groups = _as_vector("pred", pred), _as_vector("y", y), _as_vector("groups", groups)
    _check_lengths(pred=pred, y=y, groups=groups)
    if len(y) == 0:
        raise ValueError("group accuracies need at least one example")
    correct = pred == y
    return {g.item() if hasattr(g, "item") else g: float(correct[groups == g].mean()) for g in np.unique(groups)}


def worst_group_accuracy(pred: Any, y: Any, groups: Any) -> float:
    """The minimum over observed groups of the within-group accuracy (the DFR / WILDS metric)."""
    return min(group_accuracies(pred, y, groups).values())


# --------------------------------------------------------------------------- balanced subsamples


def _balanced_subsample(index: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Down-sample every group present in ``groups[index]`` to the smallest group's size."""
    members = [index[groups[index] == g] for g in np.unique(groups[index])]
    size = min(len(m) for m in members)
    return np.concatenate([rng.permutation(m)[:size] for m in members]), size


def _balanced_with_classes(index: np.ndarray, y: np.ndarray, groups: np.ndarray, classes: np.ndarray,
                           rng: np.random.Generator, what: str) -> tuple[np.ndarray, int]:
    """A balanced subsample holding every class; redrawn up to 20 times (as the reference code)."""
    for _ in range(_CLASS_DRAWS):
        chosen, size = _balanced_subsample(index, groups, rng)
        missing = np.setdiff1d(classes, y[chosen])
        if len(missing) == 0:
            return chosen, size
    raise ValueError(
        f"the group-balanced subsample of {what} ({size} per group) lacks target class(es) "
        f"{missing.tolist()} in {_CLASS_DRAWS} draws; DFR needs every class of fit_y in it. "
        "Make the groups include the target (e.g. group = label x environment) or use a larger fit set")


# --------------------------------------------------------------------------- logistic regression


def l1_logistic_regression(C: float, n_classes: int = 2, max_iter: int = 1000, seed: int = 0):
    """An unfitted L1-penalised LogisticRegression: liblinear for two classes, saga (multinomial)
    for more; the L1 penalty named as the installed scikit-learn names it (``l1_ratio=1`` from 1.8
    on, ``penalty="l1"`` before), so one call serves Colab's older release and this one."""
    from sklearn.linear_model import LogisticRegression

    solver = "liblinear" if n_classes == 2 else "saga"
    parameters = inspect.signature(LogisticRegression).parameters
    if parameters["penalty"].default == "deprecated":  # scikit-learn >= 1.8: l1_ratio selects the penalty
        penalty = {"l1_ratio": 1.0}
    else:
        penalty = {"penalty": "l1"}
    return LogisticRegression(C=C, solver=solver, max_iter=max_iter, random_state=seed, **penalty)


def _fit(x: np.ndarray, y: np.ndarray, C: float, n_classes: int, max_iter: int, seed: int):
    """Fit one probe; returns (model, converged) with ConvergenceWarning silenced but recorded."""
    from sklearn.exceptions import ConvergenceWarning

    model = l1_logistic_regression(C, n_classes, max_iter, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y)
    converged = True
    for item in caught:
        if issubclass(item.category, ConvergenceWarning):
            converged = False
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)
    return model, converged


def _predict(coef: np.ndarray, intercept: np.ndarray, classes: np.ndarray, x: np.ndarray) -> np.ndarray:
    scores = x @ coef.T + intercept
    if coef.shape[0] == 1:  # binary: one score for classes[1]
        return classes[(scores[:, 0] > 0).astype(int)]
    return classes[np.argmax(scores, axis=1)]


# --------------------------------------------------------------------------- DFR


def _tune(x, y, groups, classes, Cs, rng, max_iter, seed) -> tuple[pd.DataFrame, bool]:
    """Fit on a balanced random half, score worst-group accuracy on the other half, per C."""
    order = rng.permutation(len(y))
    held_out, train = order[: len(y) // 2], order[len(y) // 2:]
    train, _ = _balanced_with_classes(train, y, groups, classes, rng, "the tuning half of the fit set")
    rows, all_converged = [], True
    for C in Cs:
        model, converged = _fit(x[train], y[train], C, len(classes), max_iter, seed)
        all_converged &= converged
        pred = model.predict(x[held_out])
        rows.append({"C": C, "worst_group_acc": worst_group_accuracy(pred, y[held_out], groups[held_out]),
                     "mean_acc": float(np.mean(pred == y[held_out])), "converged": converged})
    return pd.DataFrame(rows), all_converged


def _select_c(tuning: pd.DataFrame) -> float:
    """The C with the highest held-out worst-group accuracy; ties go to the larger C (weaker L1),
    which is what the reference code's ``argmax`` over C = 1.0, 0.7, ... does."""
    best = tuning["worst_group_acc"].max()
    return float(tuning.loc[tuning["worst_group_acc"] == best, "C"].max())


def dfr_fit_predict(fit_x: Any, fit_y: Any, fit_groups: Any, eval_x: Any, *, Cs: Sequence[float] = DFR_CS,
                    seed: int = 0, max_iter: int = 1000, n_retrains: int = DFR_RETRAINS) -> DFRResult:
    """Deep Feature Reweighting on frozen embeddings (Kirichenko et al. 2022; Izmailov et al. 2022).

    1. Standardise the embeddings with the fit set's mean and std (``StandardScaler``).
    2. Split the fit set into two random halves; on one, take a group-balanced subsample (every
       group down-sampled to the smallest group's size); for each C in ``Cs`` fit an L1 logistic
       regression and score the worst-group accuracy on the other half (groups present there).
    3. Keep the best C (ties -> the larger C), refit it on ``n_retrains`` group-balanced
       subsamples of the *whole* fit set and average their weights (the reference code's 20;
       ``n_retrains=1`` is a single refit), and predict ``eval_x``.

    ``fit_y`` is the class label for DFR, or the spurious attribute for DFR-s (then make it part
    of ``fit_groups`` too, e.g. group = label x attribute). The fit set is the OOD validation
    split in the paper (FMoW, CivilComments), or for Camelyon17 a random half of train + test
    (see :func:`train_test_split_for_dfr`). Inputs may be numpy arrays or torch tensors."""
    x, x_eval = _as_matrix("fit_x", fit_x), _as_matrix("eval_x", eval_x)
    y, groups = _as_vector("fit_y", fit_y), _as_vector("fit_groups", fit_groups)
    _check_lengths(fit_x=x, fit_y=y, fit_groups=groups)
    if x_eval.shape[1] != x.shape[1]:
        raise ValueError(f"eval_x has {x_eval.shape[1]} features but fit_x has {x.shape[1]}")
    Cs = _check_cs(Cs)
    seed = check_int("seed", seed, minimum=0)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    n_retrains = check_int("n_retrains", n_retrains, minimum=1)
    classes = np.unique(y)
    if len(classes) < 2:
        raise ValueError(f"fit_y holds a single class ({classes.tolist()}); DFR needs at least two target classes")
    if len(y) < 4:
        raise ValueError(f"the fit set has {len(y)} examples; DFR needs at least 4 (two halves for tuning C)")

    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x)
    x, x_eval = scaler.transform(x), scaler.transform(x_eval)
    rng = np.random.default_rng(seed)
    tuning, converged = _tune(x, y, groups, classes, Cs, rng, max_iter, seed)
    C = _select_c(tuning)

    coefs, intercepts = [], []
    for _ in range(n_retrains):
        chosen, size = _balanced_with_classes(np.arange(len(y)), y, groups, classes, rng, "the fit set")
        model, ok = _fit(x[chosen], y[chosen], C, len(classes), max_iter, seed)
        converged &= ok
        coefs.append(model.coef_)
        intercepts.append(model.intercept_)
    predictions = _predict(np.mean(coefs, axis=0), np.mean(intercepts, axis=0), model.classes_, x_eval)
    best = float(tuning.loc[tuning["C"] == C, "worst_group_acc"].iloc[0])
    return DFRResult(predictions, C, best, tuning, bool(converged), int(size), n_retrains)


def train_test_split_for_dfr(n_train: int, n_test: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The authors' Camelyon17 DFR protocol ("cheating", after DARE, Rosenfeld et al. 2022).

    Camelyon17 has no OOD validation set on which the spurious correlation is broken, so the
    paper (Appendix F.2, "DFR implementations") fits DFR on a random half of the concatenation
    train + test and scores the test examples *not* in that half. This is the authors' protocol,
    not a proper OOD evaluation: the probe sees test-distribution examples (though never the
    ones it is scored on). Returns sorted index arrays ``(fit_index_train, fit_index_test,
    eval_index_test)``: the fit set is ``train[fit_index_train] + test[fit_index_test]``, the
    scored set ``test[eval_index_test]``; the last two are disjoint and cover the test set."""
    n_train = check_int("n_train", n_train, minimum=1)
    n_test = check_int("n_test", n_test, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    chosen = np.sort(np.random.default_rng(seed).permutation(n_train + n_test)[: (n_train + n_test) // 2])
    fit_train, fit_test = chosen[chosen < n_train], chosen[chosen >= n_train] - n_train
    eval_test = np.setdiff1d(np.arange(n_test), fit_test)
    if len(eval_test) == 0:
        raise ValueError(f"no test example is left to score (n_train={n_train}, n_test={n_test}, seed={seed}); "
                         "use a larger test set")
    return fit_train, fit_test, eval_test
