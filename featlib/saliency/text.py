"""Token attributions of text models: the green/red saliency maps of Figs. 6-8 (CivilComments, Amazon).

The paper colours each token green when it "contributed most to the target class" and red
when it contributed to the other classes. Here that is Captum's
``LayerIntegratedGradients`` on the word-embedding layer: the embedding of every token is
moved from the baseline (the ``[PAD]`` embedding; position embeddings and the attention mask
are kept) to its real value, the target-class score's gradient is integrated along the way,
and the result is summed over the embedding dimension. One signed number per token:
positive = evidence for the target class, negative = evidence against it; per example they
sum to ``score(text) - score(all-pad text)`` (completeness, up to quadrature error).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from captum.attr import LayerIntegratedGradients
from torch import nn

from ..registry import Registry
from ..validation import check_int
from .layers import text_embedding_layer
from .scores import class_scores, evaluating, model_device_dtype, resolve_targets

__all__ = ["TEXT_INPUTS", "decode_tokens", "split_text_batch", "token_attributions"]

TextForward = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
TEXT_INPUTS: Registry[TextForward] = Registry("input_format")


@TEXT_INPUTS.register("wilds")
def _wilds_input(model: nn.Module, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """WILDS text models read ids and mask stacked into one (n, L, 2) tensor (``TextTransform``)."""
    return model(torch.stack((input_ids, mask), dim=2))


@TEXT_INPUTS.register("ids")
def _ids_input(model: nn.Module, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Models that read the (n, L) token ids alone (padding handled inside, e.g. ``padding_idx``)."""
    return model(input_ids)


@TEXT_INPUTS.register("ids_and_mask")
def _ids_and_mask_input(model: nn.Module, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Models called as ``model(input_ids, attention_mask)``."""
    return model(input_ids, mask)


def _auto_format(model: nn.Module) -> str:
    """"wilds" for a model whose featurizer wraps a Hugging Face encoder (``TextFeaturizer``), else "ids"."""
    featurizer = getattr(model, "featurizer", None)
    return "wilds" if hasattr(getattr(featurizer, "encoder", None), "get_input_embeddings") else "ids"


class _TextScores(nn.Module):
    """``(input_ids, mask) -> (n, C)`` class scores of ``model`` fed in ``input_format``."""

    def __init__(self, model: nn.Module, input_format: str):
        super().__init__()
        self.scores = class_scores(model)
        self.feed = TEXT_INPUTS.get(input_format)

    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.feed(self.scores, input_ids, mask)


def _as_ids(name: str, value: Any, device: torch.device) -> torch.Tensor:
    tensor = torch.as_tensor(value.detach().cpu() if isinstance(value, torch.Tensor) else np.asarray(value))
    if tensor.dim() != 2 or tensor.shape[0] < 1 or tensor.is_floating_point() or tensor.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer array of shape (n, length); got "
                         f"{tensor.dtype} of shape {tuple(tensor.shape)}")
    return tensor.long().to(device)


def split_text_batch(x: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A WILDS text batch ``(n, L, 2)`` (``TextTransform`` output, stacked) -> ``(input_ids, attention_mask)``."""
    tensor = torch.as_tensor(x.detach().cpu() if isinstance(x, torch.Tensor) else np.asarray(x))
    if tensor.dim() != 3 or tensor.shape[-1] != 2:
        raise ValueError(f"x must be a WILDS text batch of shape (n, length, 2); got shape {tuple(tensor.shape)}")
    return tensor[..., 0].long(), tensor[..., 1].long()


def token_attributions(model: nn.Module, input_ids: Any, target: Any = None, *,
                       embedding_layer: nn.Module | None = None, attention_mask: Any = None, pad_id: int = 0,
                       n_steps: int = 32, input_format: str = "auto",
                       internal_batch_size: int | None = None) -> list[np.ndarray]:
    """Signed attribution of every non-pad token to the target-class score (Figs. 6-8).

    ``input_ids`` (n, L) integer ids, right-padded with ``pad_id``; ``attention_mask`` (n, L)
    of 0/1 (default: ``input_ids != pad_id``). ``embedding_layer``: the word-embedding module
    (default: :func:`~featlib.saliency.layers.text_embedding_layer`). ``input_format`` says how
    the model is fed (a :data:`TEXT_INPUTS` name: "wilds" packs ids and mask as ``(n, L, 2)``,
    "ids" passes the ids alone, "ids_and_mask" passes both; "auto" picks "wilds" for a WILDS
    text model and "ids" otherwise). The baseline replaces every token, special tokens
    included, by ``pad_id``; the attention mask stays that of the input.

    Returns one array per example of length ``attention_mask[i].sum()`` (the positions where
    the mask is 1, in order), aligned with ``decode_tokens(tokenizer, input_ids[i], attention_mask[i])``."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    device, _ = model_device_dtype(model)
    ids = _as_ids("input_ids", input_ids, device)
    pad_id = check_int("pad_id", pad_id, minimum=0)
    mask = (ids != pad_id).long() if attention_mask is None else _as_ids("attention_mask", attention_mask, device)
    if mask.shape != ids.shape or not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(f"attention_mask must be 0/1 of the shape of input_ids {tuple(ids.shape)}")
    n_steps = check_int("n_steps", n_steps, minimum=1)
    if internal_batch_size is not None:
        internal_batch_size = check_int("internal_batch_size", internal_batch_size, minimum=1)
    fmt = _auto_format(model) if input_format == "auto" else input_format
    scores = _TextScores(model, fmt)  # an unknown input_format fails here with the valid names
    layer = text_embedding_layer(model) if embedding_layer is None else embedding_layer
    if not isinstance(layer, nn.Module) or not any(module is layer for module in model.modules()):
        raise ValueError("embedding_layer must be a submodule of model (e.g. text_embedding_layer(model)); "
                         f"got {type(layer).__name__}")
    with evaluating(model):
        targets = resolve_targets(scores, (ids,), target, (mask,))
        attributions = LayerIntegratedGradients(scores, layer).attribute(
            ids, baselines=torch.full_like(ids, pad_id), target=targets, additional_forward_args=(mask,),
            n_steps=n_steps, internal_batch_size=internal_batch_size)
    per_token = attributions.detach().sum(-1).float().cpu().numpy()
    keep = mask.bool().cpu().numpy()
    return [per_token[i][keep[i]] for i in range(len(per_token))]


def decode_tokens(tokenizer: Any, ids: Any, attention_mask: Any = None) -> list[str]:
    """The tokenizer's token strings for one example's ids ``(L,)``, e.g. ``["[CLS]", "great", "##ly"]``.

    With ``attention_mask`` only the positions where it is 1 are kept, matching
    :func:`token_attributions`."""
    ids = np.asarray(ids.detach().cpu() if isinstance(ids, torch.Tensor) else ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be one example's integer token ids of shape (length,); got {ids.dtype} "
                         f"of shape {ids.shape}")
    if attention_mask is not None:
        mask = np.asarray(attention_mask.detach().cpu() if isinstance(attention_mask, torch.Tensor) else attention_mask)
        if mask.shape != ids.shape:
            raise ValueError(f"attention_mask must have the shape of ids {ids.shape}; got {mask.shape}")
        ids = ids[mask.astype(bool)]
    if not callable(getattr(tokenizer, "convert_ids_to_tokens", None)):
        raise ValueError("tokenizer must have convert_ids_to_tokens (a Hugging Face tokenizer); "
                         f"got {type(tokenizer).__name__}")
    return list(tokenizer.convert_ids_to_tokens([int(i) for i in ids]))
