"""Penalties written as first-order expressions, so that no double backward is needed.

IRMv1's penalty is the square of ``d R_e(s f) / d s`` at ``s = 1`` (Eq. 4-5). The reference
(:func:`featlib.objectives.irm.scale_gradients`) asks autograd for that derivative with
``create_graph=True`` and training then differentiates it again. For the risks used here the
derivative has a closed form in the logits z (Appendix D.1 writes the logistic one as
``C_IRMv1^e = (1/n_e) sum_i l'(y_i yhat_i) y_i yhat_i``):

* logistic loss ``l(z, y) = softplus(z) - y z`` (BCE with logits, y in {0, 1}):
  ``d/ds l(s z, y) = (sigmoid(s z) - y) z``, so ``C_e = mean_i (sigmoid(z_i) - y_i) z_i``;
* multi-class cross-entropy ``l(z, y) = logsumexp(z) - z_y``:
  ``C_e = mean_i (sum_c softmax(z_i)_c z_ic - z_{i y_i})``.

Both are ordinary functions of the logits: one backward pass gives their exact gradient.

IGA (Koyama & Yamaguchi, 2020) needs each environment's gradient of the risk with respect to
*all* trained parameters. When those are exactly a linear head ``(w, b)`` on constant features h
(a frozen featurizer), the logistic risk's gradient is
``g_e = mean_i (sigmoid(z_i) - y_i) [h_i, 1]``, first-order in the logits: the penalty
``sum_e ||g_e - mean_e g_e||^2`` is then exact without autograd. With a trained featurizer
(ERM-NF) the gradient runs through the whole network and IGA keeps the autograd penalty.
Fishr's penalty (the head's per-sample gradient moments) and IB-IRM's variance term are
first-order already (:mod:`.fishr`, :mod:`.ib_irm`).
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..registry import Registry
from .base import promote, weighted_feature_means

ScaleDerivative = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: ``d R(s z) / d s`` at ``s = 1`` in closed form, by the name of the risk function.
SCALE_DERIVATIVES: Registry[ScaleDerivative] = Registry("risk function with a closed-form scale derivative")


@SCALE_DERIVATIVES.register("logistic_risk")
def logistic_scale_derivative(logits: torch.Tensor, targets01: torch.Tensor) -> torch.Tensor:
    """(*B,) ``mean_i (sigmoid(z_i) - y_i) z_i`` for logits ``(*B, n)`` and targets in {0, 1}."""
    return ((torch.sigmoid(logits) - targets01.to(logits.dtype)) * logits).mean(-1)


@SCALE_DERIVATIVES.register("cross_entropy_risk")
def cross_entropy_scale_derivative(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(*B,) ``mean_i (sum_c softmax(z_i)_c z_ic - z_{i y_i})`` for logits ``(*B, n, C)`` and
    class indices ``(n,)`` or ``(*B, n)`` (computed in float32 at least, as the risk is)."""
    z = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    expected = (torch.softmax(z, dim=-1) * z).sum(-1)
    picked = z.gather(-1, targets.expand(z.shape[:-1]).unsqueeze(-1)).squeeze(-1)
    return (expected - picked).mean(-1)


def has_scale_derivative(risk_fn) -> bool:
    return getattr(risk_fn, "__name__", None) in SCALE_DERIVATIVES


def scale_derivatives(risk_fn, env_logits, env_targets) -> torch.Tensor:
    """(E, *B) ``d R_e(s f) / d s`` at ``s = 1`` in closed form: what
    :func:`featlib.objectives.irm.scale_gradients` computes by autograd."""
    derivative = SCALE_DERIVATIVES.get(getattr(risk_fn, "__name__", repr(risk_fn)))
    return torch.stack([derivative(z, y) for z, y in zip(env_logits, env_targets)])


def head_risk_gradients(env_logits, env_targets, env_features) -> torch.Tensor:
    """(E, *B, H + 1) the gradient of each environment's logistic risk with respect to a linear
    head ``(w, b)`` on constant features: ``mean_i (sigmoid(z_i) - y_i) [h_i, 1]``."""
    grads = []
    for z, y, h in zip(env_logits, env_targets, env_features):
        if h.requires_grad:
            raise ValueError("head_only=True needs constant features (a frozen featurizer); got features that "
                             "require grad: pass head_only=False when the featurizer is trained")
        residual = torch.sigmoid(z) - y.to(z.dtype)
        h = promote(h, z)
        grads.append(torch.cat([weighted_feature_means(residual, h), residual.mean(-1, keepdim=True)], dim=-1))
    return torch.stack(grads)
