"""Which layer to explain: GradCAM's convolutional layer and a text model's word embeddings.

GradCAM (Figs. 4-5, 9-12) is taken at the last convolutional stage of an image backbone,
where the feature maps are most semantic but still spatial; token attributions (Figs. 6-8)
are taken at the word-embedding layer of a text backbone. The image choice is a
:class:`~featlib.registry.Registry` keyed by the WILDS backbone name
(``WildsModel.backbone_name``, see :mod:`featlib.models.wilds_backbones`); models found by
duck typing, so this module imports no model code.
"""
from __future__ import annotations

from collections.abc import Callable

from torch import nn

from ..registry import Registry

__all__ = ["GRADCAM_LAYERS", "TEXT_BACKBONES", "image_gradcam_layer", "text_embedding_layer"]

GradCamLayerFinder = Callable[[nn.Module], nn.Module]
GRADCAM_LAYERS: Registry[GradCamLayerFinder] = Registry("backbone")
TEXT_BACKBONES = ("distilbert", "minilm")


def last_conv2d(model: nn.Module) -> nn.Module:
    """The last ``nn.Conv2d`` in ``model.modules()`` order (registration order, i.e. forward order for
    ``nn.Sequential`` stacks); a clear error if there is none."""
    convs = [module for module in model.modules() if isinstance(module, nn.Conv2d)]
    if not convs:
        raise ValueError(f"{type(model).__name__} has no nn.Conv2d layer, so it has no GradCAM layer; "
                         "pass the layer to gradcam() yourself or use integrated_gradients/saliency_map")
    return convs[-1]


def _first_named(model: nn.Module, names: tuple[str, ...]) -> nn.Module:
    """The last submodule called ``names[0]`` (by the last part of its qualified name), else
    ``names[1]``, ...; the last ``nn.Conv2d`` if none of them exists."""
    for wanted in names:
        found = [module for name, module in model.named_modules() if name.rsplit(".", 1)[-1] == wanted]
        if found:
            return found[-1]
    return last_conv2d(model)


@GRADCAM_LAYERS.register("densenet121")
def _densenet_layer(model: nn.Module) -> nn.Module:
    """DenseNet-121: ``features.norm5``, the batch norm closing the last dense block (7x7 at 224 px)."""
    return _first_named(model, ("norm5", "denseblock4"))


@GRADCAM_LAYERS.register("resnet50")
@GRADCAM_LAYERS.register("resnet18")
def _resnet_layer(model: nn.Module) -> nn.Module:
    """ResNets: ``layer4``, the last residual stage (stride 32), as in the GradCAM paper."""
    return _first_named(model, ("layer4",))


@GRADCAM_LAYERS.register("small_cnn")
def _small_cnn_layer(model: nn.Module) -> nn.Module:
    """SmallCNN: its last ``nn.Conv2d`` (full resolution / 4)."""
    return last_conv2d(model)


def _is_text_model(model: nn.Module) -> bool:
    featurizer = getattr(model, "featurizer", None)
    return getattr(model, "backbone_name", None) in TEXT_BACKBONES or hasattr(featurizer, "encoder") and hasattr(
        featurizer.encoder, "get_input_embeddings")


def image_gradcam_layer(model: nn.Module, kind: str | None = None) -> nn.Module:
    """The layer GradCAM explains for an image ``model``.

    In order: the model's own ``gradcam_layer`` attribute (the ColoredMNIST CNN names its last
    conv); else the :data:`GRADCAM_LAYERS` entry for ``kind`` (default: the model's
    ``backbone_name``, as a :class:`~featlib.models.WildsModel` records it); else, for any
    other module, its last ``nn.Conv2d``. Text backbones have no spatial layer: an error
    points to :func:`~featlib.saliency.text.token_attributions`."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    own = getattr(model, "gradcam_layer", None)
    if isinstance(own, nn.Module):
        return own
    kind = getattr(model, "backbone_name", None) if kind is None else kind
    if kind in TEXT_BACKBONES or (kind is None and _is_text_model(model)):
        raise ValueError(f"the {kind or 'text'} backbone is a text model and has no GradCAM layer; "
                         "use token_attributions() for its saliency maps (Figs. 6-8)")
    if kind is None:
        return last_conv2d(model)
    return GRADCAM_LAYERS.get(kind)(model)


def text_embedding_layer(model: nn.Module) -> nn.Module:
    """The word-embedding module of a text model, where token attributions are taken (Figs. 6-8).

    For a WILDS text model (``distilbert``, ``minilm``) the featurizer wraps a Hugging Face
    encoder, whose ``get_input_embeddings()`` is the token embedding (not the position or
    token-type embeddings). Any other module with ``get_input_embeddings`` or with exactly one
    ``nn.Embedding`` works too."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    featurizer = getattr(model, "featurizer", None)
    for candidate in (getattr(featurizer, "encoder", None), featurizer, model):
        getter = getattr(candidate, "get_input_embeddings", None)
        if callable(getter):
            layer = getter()
            if isinstance(layer, nn.Module):
                return layer
    embeddings = [module for module in model.modules() if isinstance(module, nn.Embedding)]
    if len(embeddings) == 1:
        return embeddings[0]
    kind = getattr(model, "backbone_name", type(model).__name__)
    raise ValueError(f"cannot find the word-embedding layer of {kind} ({len(embeddings)} nn.Embedding modules and "
                     "no get_input_embeddings()); pass embedding_layer= explicitly. Image models have none: "
                     "use gradcam() with image_gradcam_layer(model)")
