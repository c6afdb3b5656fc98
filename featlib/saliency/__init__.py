"""Saliency maps of the feature-learning analysis (Sec. 6, Fig. 4; Appendix F.4, Figs. 5-12, Table 15).

Thin wrappers over Captum (the paper's tool): GradCAM, integrated gradients and gradient
saliency for image models (:mod:`.attribution`), a colour / shape split of two-channel
ColoredMNIST attributions (:mod:`.colour`), region shares that turn "looks at the patch" into a
number (:mod:`.regions`), the layers to explain (:mod:`.layers`) and token attributions of text
models (:mod:`.text`). Everything returns numpy arrays or small dataclasses of them; the book
draws them (the paper's figures: :mod:`featbook.saliency_views`).
"""
from .attribution import gradcam, integrated_gradients, normalise_maps, saliency_map, upsample_maps
from .colour import ColourShapeAttribution, colour_shape_attribution, colour_share
from .layers import GRADCAM_LAYERS, image_gradcam_layer, last_conv2d, text_embedding_layer
from .regions import absolute_region_share, dilate_mask, region_share
from .scores import ClassScores, class_scores
from .text import TEXT_INPUTS, decode_tokens, split_text_batch, token_attributions

__all__ = [
    "ClassScores", "ColourShapeAttribution", "GRADCAM_LAYERS", "TEXT_INPUTS",
    "absolute_region_share", "class_scores", "colour_shape_attribution", "colour_share", "decode_tokens",
    "dilate_mask", "gradcam", "image_gradcam_layer", "integrated_gradients", "last_conv2d",
    "normalise_maps", "region_share", "saliency_map",
    "split_text_batch", "text_embedding_layer", "token_attributions", "upsample_maps",
]
