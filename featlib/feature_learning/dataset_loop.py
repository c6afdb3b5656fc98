"""Feature learning on one's own data: the learners of Sec. 5 on any dataset with environment labels.

ERM, Bonsai, FeAT and iFeAT are written once against a training loop (:class:`.base.Loop`); this
module is the loop for a user's data, as the book's page "FeAT on your own data" uses it:

    learned = learn_features(train, "ifeat", network, tests={"shifted": test},
                             steps_per_round=300, max_rounds=4)

``train`` is any map-style :class:`torch.utils.data.Dataset` whose items are ``(x, y, env)``: an
input tensor, a class label (an integer) and the environment (an integer); ``network(seed)``
makes a freshly initialised model with a ``featurizer`` and a linear ``classifier`` (one output
per class, or one output for two classes and the logistic loss). The data are read once into
tensors and trained on full batch, as the paper's ColoredMNIST protocol trains (Appendix F.1:
Adam, an L2 term ``l2 * sum ||theta||^2``), or on random minibatches of ``batch_size``. A round's
score is each test set's accuracy (``acc_<name>``) and the worst of them (``ood_acc``), the
paper's OOD accuracy. The environments themselves are not used by the learners (FeAT finds its
groups from its own rounds); they are kept for the OOD objectives trained on the features later.
"""
from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from ..hparams import APPENDIX_F1
from ..models.mlp import fresh_head
from ..validation import check_int, check_positive
from .base import Learned
from .full_batch_loop import fit
from .learners import FEATURE_LEARNERS


def as_tensors(dataset: Dataset, name: str = "dataset") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, y, env)`` of every item of ``dataset``, stacked: inputs as float32, labels and
    environments as int64. One line naming the problem when an item is not ``(x, y, env)``."""
    xs, ys, envs = [], [], []
    for i in range(len(dataset)):
        item = dataset[i]
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise ValueError(f"{name}[{i}] is a {type(item).__name__}, not (x, y, env): make the dataset's items "
                             "(input, class label, environment)")
        x, y, env = item
        xs.append(torch.as_tensor(x, dtype=torch.float32))
        ys.append(int(y))
        envs.append(int(env))
    if not xs:
        raise ValueError(f"{name} is empty: give a dataset with examples")
    return torch.stack(xs), torch.tensor(ys), torch.tensor(envs)


class DatasetLoop:
    """:class:`.base.Loop` over a user's dataset (see the module docstring); steps, not epochs."""

    length_unit = "steps"

    def __init__(self, train: Dataset, network: Callable[[int], nn.Module], seed: int, *,
                 tests: dict[str, Dataset] | None = None, lr: float = APPENDIX_F1["lr"].value,
                 l2: float = APPENDIX_F1["l2"].value, batch_size: int | None = None,
                 device: torch.device | str = "cpu", progress: bool = False):
        self.seed = check_int("seed", seed, minimum=0)
        self.lr = check_positive("lr", lr)
        self.l2 = check_positive("l2", l2, allow_zero=True)
        self.batch_size = None if batch_size is None else check_int("batch_size", batch_size, minimum=1)
        self.device, self.progress, self.network = torch.device(device), progress, network
        x, y, env = as_tensors(train, "train")
        self.x, self.y, self.env = x.to(self.device), y.to(self.device), env.to(self.device)
        self.tests = {name: tuple(t.to(self.device) for t in as_tensors(data, f"tests[{name!r}]"))
                      for name, data in (tests or {}).items()}
        probe = network(seed)
        for part in ("featurizer", "classifier"):
            if not isinstance(getattr(probe, part, None), nn.Module):
                raise ValueError(f"network(seed) must return a model with a `{part}` module (the featurizer phi and "
                                 "the linear classifier w of f = w o phi); it has none")
        if not isinstance(probe.classifier, nn.Linear):
            raise ValueError("network(seed).classifier must be one nn.Linear (FeAT trains a new linear head per round)")
        self.outputs = probe.classifier.out_features
        classes = int(self.y.max()) + 1
        if (self.outputs == 1 and classes > 2) or (self.outputs > 1 and self.outputs < classes):
            raise ValueError(f"the classifier has {self.outputs} output(s) for {classes} classes: give it one output per "
                             "class (or one output for two classes)")
        self._generator = torch.Generator().manual_seed(seed)

    @property
    def labels(self) -> torch.Tensor:
        return self.y

    def new_network(self, seed: int) -> nn.Module:
        return self.network(seed).to(self.device)

    def new_head(self, seed: int, like: nn.Linear, copies: int = 1) -> nn.Module:
        return fresh_head(like.in_features, seed=seed, outputs=copies * like.out_features).to(self.device)

    def per_sample_loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if logits.shape[-1] == 1:
            return F.binary_cross_entropy_with_logits(logits.squeeze(-1), y.to(logits.dtype), reduction="none")
        flat = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        return flat.reshape(logits.shape[:-1])

    def train(self, stage: str, networks: dict[str, nn.Module], loss_fn, steps: int, *, save=None,
              resample=None) -> None:
        pool = None if resample is None else torch.as_tensor(resample, device=self.device)
        params = [p for net in networks.values() for p in net.parameters() if p.requires_grad]

        def batch_loss():
            index = pool
            if self.batch_size is not None:
                n = len(self.y) if pool is None else len(pool)
                pick = torch.randint(n, (min(self.batch_size, n),), generator=self._generator).to(self.device)
                index = pick if pool is None else pool[pick]
            if index is None:
                return loss_fn(self.x, self.y, None)
            return loss_fn(self.x[index], self.y[index], index)

        fit(params, batch_loss, steps, self.lr, self.l2, stage, self.progress)

    @torch.no_grad()
    def train_features(self, featurizer: nn.Module) -> torch.Tensor:
        return featurizer(self.x)

    @torch.no_grad()
    def predict(self, head: nn.Module, features: torch.Tensor) -> torch.Tensor:
        logits = head(features)
        return (logits.squeeze(-1) > 0).long() if logits.shape[-1] == 1 else logits.argmax(-1)

    @torch.no_grad()
    def score(self, featurizer: nn.Module, heads: dict[str, nn.Module]) -> dict:
        """Per head (suffixed by its key): each test set's accuracy and the worst of them (``ood_acc``)."""
        if not self.tests:
            return {}
        out = {}
        for key, head in heads.items():
            accs = {name: (self.predict(head, featurizer(x)) == y).float().mean().item()
                    for name, (x, y, _) in self.tests.items()}
            out.update({f"acc_{name}{key}": a for name, a in accs.items()})
            out[f"ood_acc{key}"] = min(accs.values())
        return out

    def resume(self, learner: str) -> dict:
        return {}

    def save(self, state: dict) -> None:
        pass

    def finished(self, learner: str, state: dict) -> Learned | None:
        return None

    def finish(self, learner: str, model: nn.Module, rows: list[dict], steps: int) -> Learned:
        return Learned(learner, model, pd.DataFrame(rows), steps)


def learn_features(train: Dataset, learner: str, network: Callable[[int], nn.Module], *, seed: int = 0,
                   tests: dict[str, Dataset] | None = None, lr: float = APPENDIX_F1["lr"].value,
                   l2: float = APPENDIX_F1["l2"].value, batch_size: int | None = None,
                   device: torch.device | str = "cpu", progress: bool = False, **options) -> Learned:
    """Run the feature learner ``learner`` (a name of :data:`.learners.FEATURE_LEARNERS`) on ``train`` (items
    ``(x, y, env)``) with the network ``network(seed)``; ``options`` are the learner's, in steps
    (ERM: ``steps``; FeAT and iFeAT: ``steps_per_round``, ``max_rounds``, ``retain_weight``,
    ``termination_threshold``...; Bonsai: ``round_steps``, ``synthesis_steps``). Returns
    :class:`.base.Learned`: the trained network (``featurizer`` and the final ``classifier``) and
    one history row per round."""
    loop = DatasetLoop(train, network, seed, tests=tests, lr=lr, l2=l2, batch_size=batch_size, device=device,
                       progress=progress)
    torch.manual_seed(seed)
    return FEATURE_LEARNERS.get(learner).on(loop, **options)
