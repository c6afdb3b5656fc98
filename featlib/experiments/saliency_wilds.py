"""Saliency of the WILDS feature learners (Appendix F.4, Figs. 6-12, Table 13).

For one dataset of chapter 05's protocol, the same test examples are explained for each
learner's learned model (ERM, Bonsai, FeAT as iFeAT by default): GradCAM of the predicted class on the
image backbones (Camelyon17, FMoW, iWildCam, RxRx1) and integrated gradients on the word
embeddings for the text backbones (CivilComments, Amazon), with the example's label and each
model's prediction, as Table 13 lists them. The models come from
:class:`~featlib.experiments.wilds_experiment.WildsExperiment`, so a protocol that chapter 05
has run is not trained again. :func:`explain_wilds` returns the data; chapter 06 draws them
(:mod:`featbook.saliency_views`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ..saliency import decode_tokens, gradcam, image_gradcam_layer, normalise_maps, token_attributions
from ..feature_learning import FEATURE_LEARNERS
from ..hparams import PAPER_LEARNERS
from ..validation import check_choice, check_int, check_sequence
from .labels import LEARNER_LABELS
from .wilds_experiment import WildsExperiment


@dataclass
class WildsSaliency:
    """Explained examples of one WILDS dataset.

    ``table``: one row per example (index in the split, label, each learner's prediction);
    images: ``images`` (n, 3, H, W) in [0, 1] for display and ``maps[learner]`` (n, H, W);
    text: ``tokens[i]`` and ``scores[learner][i]`` (one signed score per token)."""

    dataset: str
    modality: str
    split: str
    learners: list[str]
    table: pd.DataFrame
    images: np.ndarray | None = None
    maps: dict[str, np.ndarray] = field(default_factory=dict)
    tokens: list[list[str]] = field(default_factory=list)
    scores: dict[str, list[np.ndarray]] = field(default_factory=dict)


def display_images(x: torch.Tensor) -> np.ndarray:
    """Normalised network inputs -> (n, 3, H, W) in [0, 1], stretched per image for display."""
    x = x.detach().float().cpu().numpy()
    lo = x.min(axis=(1, 2, 3), keepdims=True)
    hi = x.max(axis=(1, 2, 3), keepdims=True)
    return (x - lo) / np.where(hi > lo, hi - lo, 1.0)


def pick_examples(n_split: int, n: int, seed: int) -> np.ndarray:
    """``n`` example indices of a split, drawn without replacement with ``seed`` (sorted)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_split, size=min(n, n_split), replace=False))


def explain_wilds(experiment: WildsExperiment, learners=PAPER_LEARNERS, *, seed: int | None = None,
                  n_examples: int = 4, split: str = "test", example_seed: int = 0, n_steps: int = 32) -> WildsSaliency:
    """Learn (or load) each learner's model for ``seed`` and explain ``n_examples`` of ``split``."""
    check_sequence("learners", list(learners))
    for m in learners:
        check_choice("learners", m, FEATURE_LEARNERS.table_order())
    check_int("n_examples", n_examples, minimum=1)
    data = experiment.data
    if split not in data.splits:
        raise ValueError(f"split must be one of {', '.join(repr(s) for s in data.splits)}; got {split!r}")
    seed = experiment.protocol.seed_list[0] if seed is None else check_int("seed", seed, minimum=0)
    subset = data.splits[split]
    index = pick_examples(len(subset), n_examples, example_seed)
    items = [subset[int(i)] for i in index]
    x = torch.stack([item[0] for item in items])
    y = torch.as_tensor([int(item[1]) for item in items])
    modality = experiment.protocol.spec.modality
    table = pd.DataFrame({"example": index, "label": y.numpy()})
    result = WildsSaliency(experiment.protocol.dataset, modality, split, list(learners), table)
    if modality == "image":
        result.images = display_images(x)
    else:
        ids, mask = x[..., 0], x[..., 1]
        tokenizer = experiment.text_transform.tokenizer
        result.tokens = [decode_tokens(tokenizer, ids[i], mask[i]) for i in range(len(ids))]
    for learner in learners:
        model = experiment.learn(learner, seed).model.to(experiment.device).eval()
        with torch.no_grad():
            predicted = model(x.to(experiment.device)).argmax(-1).cpu()
        table[LEARNER_LABELS[learner]] = predicted.numpy()
        if modality == "image":
            result.maps[learner] = normalise_maps(gradcam(model, image_gradcam_layer(model), x, target=predicted))
        else:
            result.scores[learner] = token_attributions(model, x[..., 0], target=predicted, attention_mask=x[..., 1],
                                                       n_steps=n_steps)
    return result
