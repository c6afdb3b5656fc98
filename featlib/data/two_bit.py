"""The two-bit data model of Definition 3.1 and its test distribution (Appendix D.1).

Each example is ``x = [x1, x2]`` with two patches in R^d and a label ``y`` in {-1, +1}:

* ``x1 = y * Rad(alpha) * v1 + y * Rad(beta_e) * v2``  (feature patch), and
* ``x2 = xi ~ N(0, sigma_p^2 (I_d - v1 v1^T - v2 v2^T))``  (noise patch),

where ``Rad(delta)`` is -1 with probability ``delta`` and +1 otherwise, ``v1 = e_1`` is the
invariant feature (``alpha`` is shared by all environments) and ``v2 = e_2`` the spurious one
(``beta_e`` varies with the environment). The test distribution of Appendix D.1 keeps the
invariant feature noiseless and reverses the spurious correlation:
``x1 = y * v1 + y * Rad(1 - beta_e) * v2``, in equal shares over the training ``beta_e``.

Patches are stored as ``x[:, 0]`` (feature patch) and ``x[:, 1]`` (noise patch), the layout that
:class:`featlib.models.TwoLayerCNN` (Eq. 1) convolves over.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..validation import check_fits_in_memory, check_int, check_positive, check_probability, check_sequence

#: Coordinates of the invariant (v1) and spurious (v2) feature directions.
INVARIANT_COORD = 0
SPURIOUS_COORD = 1


@dataclass
class TwoBitData:
    """A sample of the two-bit model.

    ``x``: (n, 2, d) float32, patches [x1, x2]; ``y``: (n,) float32 in {-1, +1};
    ``env``: (n,) int64 environment index; ``invariant_sign`` and ``spurious_sign``: (n,) the
    Rademacher draws ``Rad(alpha)`` and ``Rad(beta_e)`` (so ``y * sign`` is the coordinate).
    """

    x: torch.Tensor
    y: torch.Tensor
    env: torch.Tensor
    invariant_sign: torch.Tensor
    spurious_sign: torch.Tensor
    num_envs: int

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def dim(self) -> int:
        return int(self.x.shape[-1])

    def to(self, device: torch.device | str) -> "TwoBitData":
        return TwoBitData(
            self.x.to(device), self.y.to(device), self.env.to(device),
            self.invariant_sign.to(device), self.spurious_sign.to(device), self.num_envs,
        )

    def env_indices(self) -> list[torch.Tensor]:
        """Index tensors of the examples of each environment, in environment order."""
        return [torch.nonzero(self.env == e, as_tuple=True)[0] for e in range(self.num_envs)]

    def targets01(self) -> torch.Tensor:
        """Labels mapped to {0, 1}: ``log(1 + exp(-y f)) == BCEWithLogits(f, (y + 1) / 2)``."""
        return (self.y + 1) / 2


def _rademacher(rng: np.random.Generator, prob_minus_one: float | np.ndarray, n: int) -> np.ndarray:
    return np.where(rng.random(n) < prob_minus_one, -1.0, 1.0)


@dataclass(frozen=True)
class TwoBitSpec:
    """Parameters of Definition 3.1: ``alpha``, one ``beta_e`` per training environment,
    ``n_per_env`` examples per environment, patch dimension ``d`` and noise scale ``sigma_p``.

    Defaults are the paper's simulation (Fig. 2, Appendix D.1): environments
    {(0.25, 0.1), (0.25, 0.2)}, n_1 = n_2 = 2500, sigma_p = 0.01. The paper does not give d;
    100 is our choice (see chapter 01).
    """

    alpha: float = 0.25
    betas: tuple[float, ...] = (0.1, 0.2)
    n_per_env: int = 2500
    d: int = 100
    sigma_p: float = 0.01

    def __post_init__(self) -> None:
        check_probability("alpha", self.alpha)
        check_sequence("betas", self.betas, min_length=1)
        for i, beta in enumerate(self.betas):
            check_probability(f"betas[{i}]", beta)
        check_int("n_per_env", self.n_per_env, minimum=1)
        check_int("d", self.d, minimum=3)
        check_positive("sigma_p", self.sigma_p, allow_zero=True)
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        check_fits_in_memory(f"a training sample of n_per_env={self.n_per_env} examples in each of "
                             f"{self.num_envs} environments with d={self.d}", self.sample_bytes(), device="cpu")

    def sample_bytes(self) -> int:
        """Memory that drawing the training sample takes at least: the (n, 2, d) float64 array it
        is assembled in and its float32 copy."""
        return self.n_per_env * self.num_envs * 2 * self.d * (8 + 4)

    @property
    def num_envs(self) -> int:
        return len(self.betas)

    def _noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        # N(0, sigma_p^2 (I - v1 v1^T - v2 v2^T)): zero on v1 and v2, isotropic elsewhere.
        xi = rng.normal(0.0, self.sigma_p, size=(n, self.d))
        xi[:, INVARIANT_COORD] = 0.0
        xi[:, SPURIOUS_COORD] = 0.0
        return xi

    def _assemble(self, y, inv_sign, spu_sign, env, xi) -> TwoBitData:
        n = y.shape[0]
        x = np.zeros((n, 2, self.d))
        x[:, 0, INVARIANT_COORD] = y * inv_sign
        x[:, 0, SPURIOUS_COORD] = y * spu_sign
        x[:, 1] = xi
        as32 = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
        return TwoBitData(
            x=as32(x), y=as32(y), env=torch.as_tensor(env, dtype=torch.int64),
            invariant_sign=as32(inv_sign), spurious_sign=as32(spu_sign), num_envs=self.num_envs,
        )

    def sample_train(self, seed: int = 0) -> TwoBitData:
        """``n_per_env`` i.i.d. examples from each training environment (Definition 3.1)."""
        check_int("seed", seed, minimum=0)
        rng = np.random.default_rng([seed, 0])
        n = self.n_per_env * self.num_envs
        env = np.repeat(np.arange(self.num_envs), self.n_per_env)
        beta = np.asarray(self.betas)[env]
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        inv_sign = _rademacher(rng, self.alpha, n)
        spu_sign = _rademacher(rng, beta, n)
        return self._assemble(y, inv_sign, spu_sign, env, self._noise(rng, n))

    def sample_test(self, n: int | None = None, seed: int = 0) -> TwoBitData:
        """The OOD test distribution of Appendix D.1: ``x1 = y v1 + y Rad(1 - beta_e) v2``.

        ``n`` examples (default: as many as the training set) split equally over the training
        ``beta_e``; ``env`` records which ``beta_e`` each example used.
        """
        n = self.n_per_env * self.num_envs if n is None else check_int("n", n, minimum=1)
        check_int("seed", seed, minimum=0)
        rng = np.random.default_rng([seed, 1])
        env = np.arange(n) * self.num_envs // n
        beta = np.asarray(self.betas)[env]
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        inv_sign = np.ones(n)
        spu_sign = _rademacher(rng, 1.0 - beta, n)
        return self._assemble(y, inv_sign, spu_sign, env, self._noise(rng, n))


def erm_population_logit_weights(alpha: float, betas: tuple[float, ...]) -> tuple[float, float]:
    """Closed-form limit of ERM on the pooled training population (proof of Prop. 4.3).

    With equally many examples per environment, given y the two coordinates are independent
    Rademacher draws with flip rates ``alpha`` and ``mean(betas)``, so the Bayes logit is
    linear and logistic ERM converges (n -> inf, noise -> 0) to
    ``u1 = log((1 - alpha) / alpha)`` on v1 and ``u2 = log((1 - b) / b)``, ``b = mean(betas)``,
    on v2. These equal the paper's ``gamma_1 = 1/2 log(G_m G_b)`` and
    ``gamma_2 = 1/2 log(G_m / G_b)``. ``u`` is the weight of the *logit* on each coordinate;
    the chapter's feature-learning coefficient (mean over j, r of <w_jr, j v>) is ``u / 2``.
    """
    check_probability("alpha", alpha)
    for i, b in enumerate(betas):
        check_probability(f"betas[{i}]", b)
    beta_bar = float(np.mean(betas))
    return math.log((1 - alpha) / alpha), math.log((1 - beta_bar) / beta_bar)


def sample_logit_weights(data: TwoBitData, tol: float = 1e-12, max_iter: int = 100) -> tuple[float, float]:
    """Where ERM converges on *this* sample: the logistic regression of the labels on the feature
    patch's two coordinates (v1, v2), no intercept, fitted exactly (Newton's method in float64).

    :func:`erm_population_logit_weights` is the limit n -> inf; a finite sample has its own, since
    its four (invariant sign, spurious sign) cells are not in the population's proportions. With
    psi(x) = x and a noise patch too weak to matter, gradient descent on the ERM loss ends there
    (chapter 01 compares the two); the feature-learning coefficients are half these weights."""
    x = data.x[:, 0, [INVARIANT_COORD, SPURIOUS_COORD]].double().cpu().numpy()
    y = data.y.double().cpu().numpy()
    w = np.zeros(2)
    for _ in range(max_iter):
        margin = y * (x @ w)
        p = 0.5 * (1 - np.tanh(margin / 2))  # sigmoid(-margin), stable for large margins
        grad = -(x * (y * p)[:, None]).mean(axis=0)
        hess = (x * (p * (1 - p))[:, None]).T @ x / len(y)
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            raise ValueError("the logistic regression on the sample's two feature coordinates has no finite "
                             "solution: they separate its labels (or are collinear)") from None
        w -= step
        if np.abs(step).max() < tol:
            return float(w[0]), float(w[1])
    raise ValueError(f"the logistic regression on the sample's two feature coordinates did not converge in "
                     f"{max_iter} Newton steps (a sample that nearly separates its labels)")
