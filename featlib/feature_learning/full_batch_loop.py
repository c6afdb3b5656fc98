"""The full-batch loop of the ColoredMNIST experiments (Sec. 6, Appendix F.1).

Every step is one epoch: the loss over the whole training set (or over a resampled one, Bonsai's
synthesis round), plus ``l2 * sum ||theta||^2`` over the trained parameters, one Adam step. The
network is a ``model`` of :data:`featlib.models.CMNIST_MODELS` (the MLP of Table 2 or the small
CNN of the GradCAM figures) with one logit and the logistic loss; a round's OOD score is the
paper's OOD accuracy, the worst accuracy over the test environments (``ood_acc``). Runs are short
enough not to checkpoint: :meth:`FullBatchLoop.resume` finds nothing, and the experiments cache
the finished result instead (:meth:`featlib.experiments.colored_mnist.ColoredMNISTExperiment.features`).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ..hparams import APPENDIX_F1
from ..models.cmnist_models import CMNIST_MODELS, make_cmnist_model
from ..models.mlp import fresh_head
from ..training.ood_stage import accuracy as batched_accuracy
from ..training.ood_stage import per_run_squared_norm
from ..training.profiling import training_step
from ..validation import check_int, check_positive
from .base import Learned, check_trained


def per_sample_bce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, y, reduction="none")


def squared_norm(params: Sequence[torch.Tensor]) -> torch.Tensor:
    return per_run_squared_norm(params, ())


def fit(
    params: Sequence[torch.nn.Parameter],
    loss_fn: Callable[[], torch.Tensor],
    epochs: int,
    lr: float,
    l2: float,
    desc: str,
    progress: bool = False,
    on_epoch: Callable[[int], None] | None = None,
) -> None:
    """``epochs`` full-batch Adam steps on ``loss_fn() + l2 * sum ||theta||^2``; ``on_epoch(e)``
    is called after step ``e`` (1-based), e.g. to keep snapshots of a longer run. Each step runs
    inside :func:`featlib.training.profiling.training_step`, labelled ``desc``, for the cost benchmark.
    ``lr`` and ``l2`` are checked before the first step (a NaN L2 weight trained on silently)."""
    check_positive("lr", lr)
    check_positive("l2", l2, allow_zero=True)
    params = list(params)
    optimizer = torch.optim.Adam(params, lr=lr)
    device = params[0].device if params else torch.device("cpu")
    # the first step whose loss was not finite, kept on the device: no synchronisation per step
    first_bad = torch.tensor(-1, device=device)
    for epoch in tqdm(range(epochs), desc=desc, disable=not progress, leave=False):
        with training_step(desc, device):
            loss = loss_fn() + l2 * squared_norm(params)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss.detach()), epoch + 1, first_bad)
        if on_epoch is not None:
            on_epoch(epoch + 1)
    bad = int(first_bad)
    check_trained(desc, params, bad if bad >= 0 else None)


@torch.no_grad()
def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return batched_accuracy(logits, y).item()


@torch.no_grad()
def worst_test_accuracy(model: Callable[[torch.Tensor], torch.Tensor], tests) -> float:
    """The paper's OOD accuracy: the worst accuracy over the test environments."""
    return min(accuracy(model(env.x), env.y) for env in tests)


class FullBatchLoop:
    """:class:`.base.Loop` over a ColoredMNIST dataset ``data`` (train_x, train_y, test envs)."""

    length_unit = "epochs"

    def __init__(self, data, seed: int, *, model: str = "mlp", hidden_dim: int = APPENDIX_F1["hidden_dim"].value,
                 lr: float = APPENDIX_F1["lr"].value, l2: float = APPENDIX_F1["l2"].value, progress: bool = False):
        CMNIST_MODELS.get(model)
        self.data, self.seed, self.model = data, seed, model
        self.hidden_dim = check_int("hidden_dim", hidden_dim, minimum=1)
        self.lr = check_positive("lr", lr)
        self.l2 = check_positive("l2", l2, allow_zero=True)
        self.progress = progress
        self.on_step: Callable[[int], None] | None = None  # called after each step (erm_snapshots)

    @property
    def labels(self) -> torch.Tensor:
        return self.data.train_y

    @property
    def device(self) -> torch.device:
        return self.data.train_x.device

    def new_network(self, seed: int) -> nn.Module:
        return make_cmnist_model(self.model, self.data.image_shape, self.hidden_dim, seed=seed).to(self.device)

    def new_head(self, seed: int, like: nn.Linear, copies: int = 1) -> nn.Module:
        return fresh_head(like.in_features, seed=seed, outputs=copies * like.out_features).to(self.device)

    def per_sample_loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return per_sample_bce(logits.squeeze(-1), y)

    def train(self, stage: str, networks: dict[str, nn.Module], loss_fn, steps: int, *, save=None,
              resample=None) -> None:
        x, y, index = self.data.train_x, self.data.train_y, None
        if resample is not None:
            index = torch.as_tensor(resample, device=x.device)
            x, y = x[index], y[index]
        params = [p for net in networks.values() for p in net.parameters() if p.requires_grad]
        fit(params, lambda: loss_fn(x, y, index), steps, self.lr, self.l2, stage, self.progress,
            on_epoch=self.on_step)

    @torch.no_grad()
    def train_features(self, featurizer: nn.Module) -> torch.Tensor:
        return featurizer(self.data.train_x)

    @torch.no_grad()
    def predict(self, head: nn.Module, features: torch.Tensor) -> torch.Tensor:
        return (head(features).squeeze(-1) > 0).to(self.labels.dtype)

    @torch.no_grad()
    def score(self, featurizer: nn.Module, heads: dict[str, nn.Module]) -> dict:
        """``ood_acc<key>``: the worst test environment's accuracy of each head."""
        feats = [featurizer(env.x) for env in self.data.test]
        return {f"ood_acc{key}": min(accuracy(head(f).squeeze(-1), env.y) for f, env in zip(feats, self.data.test))
                for key, head in heads.items()}

    def resume(self, learner: str) -> dict:
        return {}

    def save(self, state: dict) -> None:
        pass

    def finished(self, learner: str, state: dict) -> Learned | None:
        return None

    def finish(self, learner: str, model: nn.Module, rows: list[dict], steps: int) -> Learned:
        return Learned(learner, model, pd.DataFrame(rows), steps)
