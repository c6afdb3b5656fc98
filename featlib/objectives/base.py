"""What every OOD objective shares: per-environment risks, a penalty and how they combine.

An objective maps per-environment logits and targets to

    loss = sum_e R_e + lambda * penalty,

(Eq. 2 for ERM, Eq. 4-5 for IRMv1). With ``rescale=True`` and ``lambda > 1`` the loss is divided
by ``lambda`` (the convention of the IRMv1 reference code that the ColoredMNIST protocol
follows): for gradient descent this is the same objective with the step size divided by lambda.

**Many runs at once.** Every tensor may carry leading *run* dimensions ``B``: logits of
environment e have shape ``(*B, n_e)``, targets ``(n_e,)`` (shared by the runs) or
``(*B, n_e)``, and ``penalty_weight`` is a float or a ``(*B,)`` tensor. Risks then have shape
``(E, *B)`` and the loss and penalty ``(*B,)``: run r's loss depends only on run r's logits, so
``loss.sum().backward()`` gives every run its own gradient. Without run dimensions everything
is a scalar, as in chapters 1-2.

Some penalties need more than the logits: the classifier's input features (IB-IRM, Fishr) or
the trainable parameters (IGA). They are passed as ``features=`` (per environment,
``(*B, n_e, H)``) and ``params=`` (tensors whose leading dimensions are ``B``).

**Closed forms.** :meth:`Objective.penalty` is the reference: IRMv1's derivative in
the dummy scale and IGA's per-environment gradients come from ``torch.autograd.grad`` with
``create_graph=True``, so training differentiates twice. ``closed_form=True`` asks for
:meth:`Objective.closed_form_penalty` instead: the same penalty written as a first-order
expression of the logits (and features) where one is exact
(:mod:`featlib.objectives.closed_form`), so one ordinary backward pass gives its gradient and the
whole step can be compiled. :meth:`Objective.has_closed_form` says where one exists;
elsewhere the autograd penalty is used.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..validation import check_choice, check_positive

RiskFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
PenaltyWeight = float | torch.Tensor


def logistic_risk(logits: torch.Tensor, targets01: torch.Tensor) -> torch.Tensor:
    """Mean logistic loss ``l(y f) = log(1 + exp(-y f))``, y = 2 * targets01 - 1 (Eq. 2), over the
    last dimension: ``(*B, n)`` logits give ``(*B,)`` risks."""
    targets = targets01.to(logits.dtype).expand_as(logits)
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none").mean(-1)


logistic_risk.logit_dims = 1  # trailing dims of one environment's logits that are not run dims: (n,)


def per_sample_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``(*B, n, C)`` logits and ``(n,)`` or ``(*B, n)`` class indices -> ``(*B, n)`` losses."""
    targets = targets.expand(logits.shape[:-1])
    flat = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="none")
    return flat.reshape(logits.shape[:-1])


def cross_entropy_risk(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean multi-class cross-entropy over the examples: ``(*B, n, C)`` logits give ``(*B,)``
    risks. The risk of the WILDS experiments (Appendix F.2), where models have C >= 2 outputs."""
    return per_sample_cross_entropy(logits, targets).mean(-1)


cross_entropy_risk.logit_dims = 2  # (n, C)


def promote(values: torch.Tensor, like: torch.Tensor | None = None) -> torch.Tensor:
    """``values`` in ``like``'s floating dtype (float32 when None) if they are in a narrower one
    (bfloat16 activations of a mixed-precision step); unchanged otherwise (no copy)."""
    target = torch.float32 if like is None else like.dtype
    if values.is_floating_point() and torch.finfo(values.dtype).bits < torch.finfo(target).bits:
        return values.to(target)
    return values


def weighted_feature_means(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(*B, H) ``mean_i weights_i * values_i`` for weights ``(*B, n)`` and values ``(*B', n, H)``
    whose batch shape B' is B or B with trailing run dimensions of size 1 (features shared by
    the runs of a group, as :class:`~featlib.models.stacked.StackedHeads` gives them).

    Computed as a batched matrix product, so shared features are never copied per run."""
    batch, shared = weights.shape[:-1], values.shape[:-2]
    n, h = values.shape[-2:]
    keep = len(shared)
    while keep > 0 and shared[keep - 1] == 1 and (keep > len(batch) or batch[keep - 1] != 1):
        keep -= 1
    if tuple(shared[:keep]) != tuple(batch[:keep]) or any(s != 1 for s in shared[keep:]):
        raise ValueError(
            f"features must have shape (*B, n_e, H) or broadcast over trailing run dimensions; "
            f"got {tuple(values.shape)} for logits {tuple(weights.shape)}"
        )
    groups = math.prod(batch[:keep])
    lhs = weights.reshape(groups, -1, n)
    rhs = values.reshape(groups, n, h)
    return torch.bmm(lhs, rhs).reshape(*batch, h) / n


@dataclass
class EnvInputs:
    """What a penalty may look at, one list entry per training environment."""

    logits: Sequence[torch.Tensor]  # (*B, n_e)
    targets: Sequence[torch.Tensor]  # (n_e,) or (*B, n_e), values in {0, 1}
    risks: torch.Tensor  # (E, *B), with the graph
    features: Sequence[torch.Tensor] | None = None  # (*B, n_e, H): the classifier's input
    params: Sequence[torch.Tensor] | None = None  # trainable tensors with leading dims B
    #: True when ``params`` are exactly a linear head ``(w, b)`` whose inputs are ``features`` and
    #: the features are constants (a frozen featurizer): head-gradient closed forms are then exact.
    head_only: bool = False
    #: ``env_risk(e, tensors)``: environment e's risk (*B,) on its own rows, as a function of
    #: the trained tensors (``params``' order), for penalties that differentiate it themselves
    #: (IGA's first-order form, :func:`~.iga.hvp_alignment`); None where the caller has none.
    env_risk: Callable | None = None

    @property
    def batch_shape(self) -> torch.Size:
        return self.risks.shape[1:]

    def require(self, what: str, who: str):
        value = getattr(self, what)
        if value is None:
            raise ValueError(f"the {who} penalty needs {what}=...; pass it to the objective call")
        return value


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor  # (*B,) to minimise (sum it over runs before backward)
    risks: torch.Tensor  # (E, *B) per-environment risks R_e, detached
    penalty: torch.Tensor  # (*B,) penalty (0 for ERM), detached


def check_penalty_weight(value: PenaltyWeight) -> PenaltyWeight:
    """A float >= 0 or a tensor of finite values >= 0 (a tensor is read back to the host)."""
    if isinstance(value, torch.Tensor):
        if not (torch.isfinite(value).all() and (value >= 0).all()):
            raise ValueError(f"penalty_weight must be finite numbers >= 0; got {value.tolist()!r}")
        return value
    return check_positive("penalty_weight", value, allow_zero=True)


class Objective:
    """Base class: subclasses implement :meth:`penalty`; ERM returns zero.

    ``env_reduction`` ("sum" or "mean") says how penalties made of one term per environment
    combine them: the paper writes sums; the ColoredMNIST reference code averages IRMv1's.
    ``risk_reduction`` does the same for the risks (Eq. 2 sums them; the WILDS implementations
    of Koh et al. and Shi et al. ("Fish"), which the paper's WILDS runs follow, average them
    over the domains of the minibatch).
    """

    name = "base"
    #: False for objectives without a penalty (ERM): ``penalty_weight`` is then ignored.
    has_penalty = True
    #: True when :meth:`penalty` is already a first-order expression of logits, features and
    #: parameters (no ``autograd.grad`` inside), so it is its own closed form.
    first_order = True
    #: True for objectives that keep state between calls (GroupDRO's weights).
    stateful = False

    def __init__(
        self, risk_fn: RiskFn = logistic_risk, rescale: bool = True, env_reduction: str = "sum",
        risk_reduction: str = "sum",
    ):
        self.risk_fn = risk_fn
        self.rescale = rescale
        self.env_reduction = check_choice("env_reduction", env_reduction, ("sum", "mean"))
        self.risk_reduction = check_choice("risk_reduction", risk_reduction, ("sum", "mean"))

    def reduce_envs(self, per_env: torch.Tensor) -> torch.Tensor:
        """(E, *B) -> (*B,) with this objective's ``env_reduction``."""
        return per_env.sum(0) if self.env_reduction == "sum" else per_env.mean(0)

    def risks(self, env_logits: Sequence[torch.Tensor], env_targets: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.stack([self.risk_fn(lg, t) for lg, t in zip(env_logits, env_targets)])

    def total_risk(self, risks: torch.Tensor, env_ids: Sequence[int] | None = None) -> torch.Tensor:
        """How the risks enter the loss: their sum over environments (Eq. 2), or their mean.

        ``env_ids`` names the environments of ``risks`` among all of the dataset's (minibatches
        of WILDS hold a few domains each); only stateful objectives (GroupDRO) use it."""
        return risks.sum(0) if self.risk_reduction == "sum" else risks.mean(0)

    def penalty(self, inputs: EnvInputs) -> torch.Tensor:
        raise NotImplementedError

    def has_closed_form(self, head_only: bool = False) -> bool:
        """Whether :meth:`closed_form_penalty` is a first-order expression (no double backward)
        for this risk function, when ``head_only`` (see :class:`EnvInputs`) holds or not."""
        return self.first_order

    def has_first_order_form(self, head_only: bool = False, functional: bool = False) -> bool:
        """Whether ``closed_form=True`` computes the penalty's gradient without a double
        backward: a closed form (:meth:`has_closed_form`), or, where the caller passes
        ``env_risk=`` (``functional``), a form built on it (IGA's Hessian-vector product)."""
        return self.has_closed_form(head_only)

    def closed_form_penalty(self, inputs: EnvInputs) -> torch.Tensor:
        """The penalty as a first-order expression where one is exact (its value equals
        :meth:`penalty`'s, and so does its gradient, by one backward pass); :meth:`penalty`
        itself where :meth:`has_closed_form` is False. Default: :meth:`penalty`, for objectives
        whose penalty is first-order already."""
        return self.penalty(inputs)

    def unscaled_term(self, inputs: EnvInputs, penalty_weight: torch.Tensor) -> torch.Tensor | None:
        """A term added to the loss with its own weight, not multiplied by ``penalty_weight``
        (but divided by it with the rest of the loss when ``rescale``), e.g. IB-IRM's bottleneck
        term with separate weighting; None (the default) for none."""
        return None

    def reset(self) -> None:
        """Forget any state kept between steps (GroupDRO's weights); stateless by default."""

    def __call__(
        self,
        env_logits: Sequence[torch.Tensor],
        env_targets: Sequence[torch.Tensor],
        penalty_weight: PenaltyWeight = 0.0,
        *,
        features: Sequence[torch.Tensor] | None = None,
        params: Sequence[torch.Tensor] | None = None,
        env_ids: Sequence[int] | None = None,
        closed_form: bool = False,
        head_only: bool = False,
        env_risk: Callable | None = None,
        check: bool = True,
    ) -> ObjectiveOutput:
        """``closed_form``: use :meth:`closed_form_penalty`; ``head_only`` and ``env_risk``: see
        :class:`EnvInputs`;
        ``check=False`` skips the check of ``penalty_weight`` (it reads the tensor back to the
        host, which a compiled or asynchronous training step must avoid; check once instead)."""
        if check:
            penalty_weight = check_penalty_weight(penalty_weight)
        if len(env_logits) != len(env_targets) or not env_logits:
            raise ValueError(
                "env_logits and env_targets must be non-empty lists of the same length "
                f"(one entry per environment); got {len(env_logits)} and {len(env_targets)}"
            )
        risks = self.risks(env_logits, env_targets)
        inputs = EnvInputs(env_logits, env_targets, risks, features, params, head_only, env_risk)
        if env_ids is not None and len(env_ids) != len(env_logits):
            raise ValueError(f"env_ids must name one environment per entry of env_logits; got {len(env_ids)} ids "
                             f"for {len(env_logits)} environments")
        total = self.total_risk(risks, env_ids)
        if self.has_penalty:
            penalty = self.closed_form_penalty(inputs) if closed_form else self.penalty(inputs)
            weight = torch.as_tensor(penalty_weight, dtype=total.dtype, device=total.device)
            loss = total + weight * penalty
            extra = self.unscaled_term(inputs, weight)
            if extra is not None:
                loss = loss + extra
            if self.rescale:
                loss = loss / torch.clamp(weight, min=1.0)
        else:
            penalty = torch.zeros_like(total)
            loss = total
        return ObjectiveOutput(loss=loss, risks=risks.detach(), penalty=penalty.detach())
