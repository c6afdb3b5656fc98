"""Saliency maps of the feature-learning analysis (Sec. 6, Fig. 4; Appendix F.4, Figs. 5-12).

Hand-built models whose answer is known make the paper's reading of the figures testable at
small scale: a model that reads the colour has its attribution on the colour, one that reads
the corner patch has its GradCAM mass in the corner, one that reads a single token has its
token attribution there.
"""

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch import nn

from featlib.models import ColoredMNISTMLP, WildsModel, make_backbone
from featlib.saliency import (
    GRADCAM_LAYERS, ClassScores, absolute_region_share, class_scores, colour_shape_attribution, decode_tokens,
    dilate_mask, gradcam, image_gradcam_layer, integrated_gradients, region_share, saliency_map, split_text_batch,
    text_embedding_layer, token_attributions,
)
from featbook.saliency_views import (
    NEGATIVE_RGB, POSITIVE_RGB, HighlightedText, highlight_tokens, plot_gradcam_triples, render_token_attributions,
)

SIDE = 14  # standard two-channel ColoredMNIST: (2, 14, 14), flattened to 392
PATCH_SIDE, PATCH = 28, 5  # the patch variant: (3, 28, 28) with a 5x5 colour patch in the upper-left corner


# --------------------------------------------------------------------------- synthetic data


def digit_like(rng: np.random.Generator, n: int, side: int, box: tuple[int, int]) -> np.ndarray:
    """(n, side, side) random pen strokes (a 2x2 brush on a random walk) inside rows/cols box[0]..box[1]."""
    images = np.zeros((n, side, side))
    low, high = box
    for image in images:
        row, col = rng.integers(low, high - 1, size=2)
        for _ in range(3 * (high - low)):
            image[row:row + 2, col:col + 2] = 1.0
            row = int(np.clip(row + rng.integers(-1, 2), low, high - 2))
            col = int(np.clip(col + rng.integers(-1, 2), low, high - 2))
    return images * rng.uniform(0.6, 1.0, size=(n, 1, 1))


def two_channel_batch(n: int = 12, seed: int = 0) -> torch.Tensor:
    """Flat (n, 392) ColoredMNIST-like inputs: a digit-like stroke in channel 0 (red) or 1 (green)."""
    rng = np.random.default_rng(seed)
    digits = digit_like(rng, n, SIDE, (2, SIDE - 2))
    images = np.zeros((n, 2, SIDE, SIDE))
    images[np.arange(n), rng.integers(0, 2, size=n)] = digits
    return torch.tensor(images.reshape(n, -1), dtype=torch.float32)


def patch_batch(n: int = 6, seed: int = 0) -> tuple[torch.Tensor, np.ndarray]:
    """Flat (n, 3*28*28) images: a grey digit-like stroke in the centre and a red or green 5x5
    patch in the upper-left corner; and the patch mask (28, 28)."""
    rng = np.random.default_rng(seed)
    digits = digit_like(rng, n, PATCH_SIDE, (8, 22))
    images = np.repeat(digits[:, None], 3, axis=1)
    images[np.arange(n), rng.integers(0, 2, size=n), :PATCH, :PATCH] = 1.0
    mask = np.zeros((PATCH_SIDE, PATCH_SIDE), dtype=bool)
    mask[:PATCH, :PATCH] = True
    return torch.tensor(images.reshape(n, -1), dtype=torch.float32), mask


# --------------------------------------------------------------------------- hand-built models


class FlatCNN(nn.Module):
    """A CNN on flat (n, 3*28*28) inputs, as the ColoredMNIST CNN reads them, with a ``gradcam_layer``.

    conv1 (3x3 box filter) detects "red" relu(R - G), "green" relu(G - R) and "grey" relu(B)
    (the patch has no blue; the grey digit has), then ReLU, 2x max-pool to 14x14, an identity
    1x1 conv (the GradCAM layer), ReLU, global average pooling and a linear readout."""

    def __init__(self, readout: list[float]):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 3, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(3, 3, 1, bias=False)
        self.head = nn.Linear(3, 1, bias=False)
        with torch.no_grad():
            box = torch.full((3, 3), 1 / 9)
            self.conv1.weight.zero_()
            self.conv1.weight[0, 0], self.conv1.weight[0, 1] = box, -box  # red
            self.conv1.weight[1, 1], self.conv1.weight[1, 0] = box, -box  # green
            self.conv1.weight[2, 2] = box  # grey (blue channel)
            self.conv2.weight.copy_(torch.eye(3)[:, :, None, None])
            self.head.weight.copy_(torch.tensor([readout]))
        self.features = nn.Sequential(self.conv1, nn.ReLU(), nn.MaxPool2d(2), self.conv2, nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.gradcam_layer = self.conv2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x.reshape(-1, 3, PATCH_SIDE, PATCH_SIDE))).squeeze(-1)


def patch_reader() -> FlatCNN:
    """Reads only the colour patch: logit = 10 (mean red - mean green)."""
    return FlatCNN([10.0, -10.0, 0.0])


def centre_reader() -> FlatCNN:
    """Reads only the grey digit in the centre: logit = 10 mean grey (always > 0: class 1)."""
    return FlatCNN([0.0, 0.0, 10.0])


def colour_only_mlp() -> nn.Module:
    """A ReLU MLP built by hand that reads only the colour: relu(k) - relu(-k) = k, k = sum(x0) - sum(x1)."""
    first, second = nn.Linear(2 * SIDE * SIDE, 2), nn.Linear(2, 1)
    with torch.no_grad():
        half = SIDE * SIDE
        first.weight.zero_(), first.bias.zero_(), second.bias.zero_()
        first.weight[0, :half], first.weight[0, half:] = 1.0, -1.0
        first.weight[1, :half], first.weight[1, half:] = -1.0, 1.0
        second.weight.copy_(torch.tensor([[0.2, -0.2]]))
    return nn.Sequential(first, nn.ReLU(), second)  # (n, 1) logits: class_scores accepts them


def shape_only_mlp(seed: int = 0) -> nn.Module:
    """A ReLU MLP that reads only the shape: every hidden unit sees x0 + x1 through the same weights."""
    generator = torch.Generator().manual_seed(seed)
    first, second = nn.Linear(2 * SIDE * SIDE, 8), nn.Linear(8, 1)
    with torch.no_grad():
        u = torch.randn(8, SIDE * SIDE, generator=generator) * 0.2
        first.weight.copy_(torch.cat([u, u], dim=1))
        first.bias.copy_(torch.randn(8, generator=generator) * 0.1)
        second.weight.copy_(torch.randn(1, 8, generator=generator))
    return nn.Sequential(first, nn.ReLU(), second, nn.Flatten(0))  # (n,) logits


class TokenModel(nn.Module):
    """Embedding, masked mean pooling, linear: only token id ``KEY`` moves the class-1 logit."""

    KEY = 7

    def __init__(self, vocab: int = 20, dim: int = 4):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.embedding = nn.Embedding(vocab, dim, padding_idx=0)
        self.head = nn.Linear(dim, 2, bias=False)
        with torch.no_grad():
            weight = torch.randn(vocab, dim, generator=generator)
            weight[:, 0] = 0.0
            weight[self.KEY, 0] = 5.0
            weight[0] = 0.0
            self.embedding.weight.copy_(weight)
            self.head.weight.copy_(torch.tensor([[-1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != 0).unsqueeze(-1).float()
        pooled = (self.embedding(ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled)


def no_grads(model: nn.Module) -> bool:
    return all(p.grad is None for p in model.parameters())


def scores_of(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return class_scores(model).eval()(x)


# --------------------------------------------------------------------------- class scores, shapes, modes


def test_class_scores_turn_a_binary_logit_into_two_scores_whose_difference_is_the_logit():
    model = ColoredMNISTMLP(hidden_dim=8).eval()
    x = two_channel_batch(5)
    scores = class_scores(model)
    out = scores(x)
    assert isinstance(scores, ClassScores) and class_scores(scores) is scores
    assert out.shape == (5, 2)
    torch.testing.assert_close(out[:, 1] - out[:, 0], model(x))
    wide = nn.Linear(392, 4)
    torch.testing.assert_close(class_scores(wide)(x), wide(x))


def test_every_function_returns_the_documented_shapes_and_leaves_mode_and_grads_alone():
    mlp = ColoredMNISTMLP(hidden_dim=16)
    cnn = patch_reader()
    mlp.train(), cnn.train()
    cnn.features[1].eval()  # a submodule in another mode must come back as it was
    x2, (x3, _) = two_channel_batch(4), patch_batch(3)
    assert integrated_gradients(mlp, x2, n_steps=8).shape == (4, 392)
    assert saliency_map(mlp, x2).shape == (4, 392)
    result = colour_shape_attribution(mlp, x2, n_steps=8)
    assert result.shape_map.shape == result.colour_map.shape == (4, SIDE, SIDE)
    assert result.colour_share.shape == result.delta.shape == result.target.shape == (4,)
    assert gradcam(cnn, image_gradcam_layer(cnn), x3, input_shape=(3, PATCH_SIDE, PATCH_SIDE)).shape == (3, 28, 28)
    assert integrated_gradients(cnn, x3, target=1, n_steps=8).shape == (3, 3 * 28 * 28)
    images = x3.reshape(3, 3, 28, 28)
    small = WildsModel(make_backbone("small_cnn", pretrained=False), n_classes=3)
    small.train()
    maps = gradcam(small, image_gradcam_layer(small), images, target=[0, 1, 2])
    assert maps.shape == (3, 28, 28) and maps.dtype == np.float32 and (maps >= 0).all()
    assert saliency_map(small, images).shape == (3, 3, 28, 28)
    assert mlp.training and cnn.training and small.training and not cnn.features[1].training
    assert no_grads(mlp) and no_grads(cnn) and no_grads(small)
    assert not x2.requires_grad and not x3.requires_grad


def test_bad_arguments_fail_with_the_parameter_name():
    cnn, (x, _) = patch_reader(), patch_batch(2)
    with pytest.raises(ValueError, match="input_shape"):
        gradcam(cnn, cnn.gradcam_layer, x)
    with pytest.raises(ValueError, match="input_shape"):
        gradcam(cnn, cnn.gradcam_layer, x, input_shape=(3, 14, 14))
    with pytest.raises(ValueError, match="layer must be a submodule"):
        gradcam(cnn, nn.Conv2d(3, 3, 1), x, input_shape=(3, 28, 28))
    with pytest.raises(ValueError, match=r"target must be a class index in \[0, 1\]"):
        integrated_gradients(cnn, x, target=2)
    with pytest.raises(ValueError, match="n_steps"):
        integrated_gradients(cnn, x, n_steps=0)
    with pytest.raises(ValueError, match="image_shape"):
        colour_shape_attribution(ColoredMNISTMLP(), two_channel_batch(2), image_shape=(3, 14, 14))
    with pytest.raises(ValueError, match="non-negative"):
        region_share(-np.ones((1, 4, 4)), np.ones((4, 4), dtype=bool))
    with pytest.raises(ValueError, match="mask"):
        region_share(np.ones((1, 4, 4)), np.ones((3, 3), dtype=bool))


# --------------------------------------------------------------------------- colour versus shape


def test_a_model_that_reads_only_the_colour_has_its_attribution_on_the_colour():
    result = colour_shape_attribution(colour_only_mlp(), two_channel_batch(), n_steps=16)
    assert (result.colour_share > 0.95).all()


def test_a_model_that_reads_only_the_shape_has_its_attribution_on_the_shape():
    result = colour_shape_attribution(shape_only_mlp(), two_channel_batch(), n_steps=16)
    assert (result.colour_share < 0.05).all()


@pytest.mark.parametrize("make", [shape_only_mlp, colour_only_mlp, lambda: ColoredMNISTMLP(hidden_dim=32, seed=1)])
def test_colour_and_shape_attributions_add_up_to_the_change_of_the_class_score(make):
    model, x = make(), two_channel_batch()
    result = colour_shape_attribution(model, x, n_steps=64)
    change = scores_of(model, x) - scores_of(model, torch.zeros_like(x))
    explained = change[torch.arange(len(x)), torch.as_tensor(result.target)].numpy()
    total = result.shape_map.sum((1, 2)) + result.colour_map.sum((1, 2))
    np.testing.assert_allclose(total, explained, atol=2e-3 + 0.02 * np.abs(explained).max())
    np.testing.assert_allclose(result.delta, total - explained, atol=1e-4)


def test_integrated_gradients_are_complete():
    model, x = ColoredMNISTMLP(hidden_dim=32, seed=2), two_channel_batch()
    baseline = torch.full((392,), 0.1)
    attributions = integrated_gradients(model, x, target=1, baseline=baseline, n_steps=64)
    change = (scores_of(model, x) - scores_of(model, baseline.expand_as(x)))[:, 1].numpy()
    np.testing.assert_allclose(attributions.sum(1), change, atol=2e-3 + 0.02 * np.abs(change).max())


# --------------------------------------------------------------------------- GradCAM on the patch variant


# GradCAM is coarse: the map lives on the 14x14 grid after the 2x max-pool and reaches one pixel past
# the patch through the 3x3 convolution, then bilinear upsampling spreads it one more pixel. The patch
# share is therefore measured on the 5x5 patch mask grown by PATCH_MARGIN = 2 pixels (a 7x7 corner, 6%
# of the image); the plain 5x5 mask is checked with a lower bar.
PATCH_MARGIN = 2


def test_a_cnn_that_reads_the_patch_puts_its_gradcam_mass_on_the_patch():
    x, mask = patch_batch()
    model = patch_reader()
    maps = gradcam(model, image_gradcam_layer(model), x, input_shape=(3, 28, 28))
    assert (maps.sum((1, 2)) > 0).all()
    assert (region_share(maps, dilate_mask(mask, PATCH_MARGIN)) > 0.8).all()
    assert (region_share(maps, mask) > 0.5).all()


def test_a_cnn_that_reads_the_centre_puts_little_gradcam_mass_on_the_patch():
    x, mask = patch_batch()
    model = centre_reader()
    maps = gradcam(model, image_gradcam_layer(model), x, input_shape=(3, 28, 28))
    assert (maps.sum((1, 2)) > 0).all()
    assert (region_share(maps, dilate_mask(mask, PATCH_MARGIN)) < 0.2).all()
    integrated = integrated_gradients(model, x, n_steps=16).reshape(len(x), 3, 28, 28)
    assert (absolute_region_share(integrated, dilate_mask(mask, PATCH_MARGIN)) < 0.2).all()


def test_coarse_gradcam_maps_upsample_to_the_figures_maps():
    """gradcam(upsample=False) is the layer's grid (7x7 after two poolings of 28x28 here);
    upsample_maps of it is exactly gradcam's own map, so a result file of coarse maps draws the
    same figure. A constant grid upsamples to the same constant (bilinear interpolation's closed
    form); bad shapes are refused in one line."""
    from featlib.saliency import upsample_maps

    x, _ = patch_batch()
    model = patch_reader()
    fine = gradcam(model, image_gradcam_layer(model), x, input_shape=(3, 28, 28))
    coarse = gradcam(model, image_gradcam_layer(model), x, input_shape=(3, 28, 28), upsample=False)
    assert fine.shape == (len(x), 28, 28) and coarse.shape[0] == len(x) and coarse.shape[1:] != (28, 28)
    np.testing.assert_array_equal(upsample_maps(coarse, (28, 28)), fine)
    np.testing.assert_allclose(upsample_maps(np.full((2, 7, 7), 0.25), (28, 28)), np.full((2, 28, 28), 0.25))
    with pytest.raises(ValueError, match=r"^maps must be finite with shape \(n, h, w\); got shape \(7, 7\)$"):
        upsample_maps(np.ones((7, 7)), (28, 28))


def test_region_share_is_nan_free_and_dilation_grows_the_mask():
    mask = np.zeros((6, 6), dtype=bool)
    mask[0, 0] = True
    maps = np.zeros((2, 6, 6))
    maps[1, 0, 0], maps[1, 5, 5] = 3.0, 1.0
    np.testing.assert_allclose(region_share(maps, mask), [0.0, 0.75])
    assert dilate_mask(mask, 2).sum() == 9 and dilate_mask(mask, 0).sum() == 1
    np.testing.assert_allclose(absolute_region_share(-maps[:, None].repeat(2, 1), mask), [0.0, 0.75])


def test_gradcam_layers_of_the_wilds_backbones():
    assert set(GRADCAM_LAYERS.names()) == {"densenet121", "resnet18", "resnet50", "small_cnn"}
    resnet = WildsModel(make_backbone("resnet18", pretrained=False), n_classes=2)
    assert image_gradcam_layer(resnet) is resnet.featurizer.layer4
    densenet = WildsModel(make_backbone("densenet121", pretrained=False), n_classes=2)
    assert image_gradcam_layer(densenet) is densenet.featurizer[0].norm5
    small = WildsModel(make_backbone("small_cnn", pretrained=False), n_classes=2)
    assert image_gradcam_layer(small) is [m for m in small.modules() if isinstance(m, nn.Conv2d)][-1]
    assert image_gradcam_layer(patch_reader()).kernel_size == (1, 1)
    with pytest.raises(ValueError, match="no nn.Conv2d"):
        image_gradcam_layer(ColoredMNISTMLP())
    with pytest.raises(ValueError, match="backbone must be one of"):
        image_gradcam_layer(small, kind="vit")


# --------------------------------------------------------------------------- tokens


def test_the_one_token_that_carries_the_weight_gets_the_attribution():
    model = TokenModel()
    ids = torch.tensor([[3, TokenModel.KEY, 5, 9, 0, 0], [TokenModel.KEY, 2, 4, 0, 0, 0]])
    scores = token_attributions(model, ids, target=1, embedding_layer=model.embedding)
    assert [len(s) for s in scores] == [4, 3]
    for row, attribution in zip(ids, scores):
        key = (row[row != 0] == TokenModel.KEY).numpy()
        assert attribution[key][0] > 0
        assert np.abs(attribution[key]).sum() > 0.9 * np.abs(attribution).sum()
    against = token_attributions(model, ids, target=0)  # the embedding is found on its own
    assert all(a[(row[row != 0] == TokenModel.KEY).numpy()][0] < 0 for a, row in zip(against, ids))
    class IdsAndMask(TokenModel):
        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return super().forward(ids * mask)

    both = token_attributions(IdsAndMask(), ids, target=1, input_format="ids_and_mask")
    assert all(np.allclose(a, b) for a, b in zip(both, scores))
    with pytest.raises(ValueError, match="input_format must be one of"):
        token_attributions(model, ids, input_format="tokens")
    assert no_grads(model)


def test_token_attributions_of_the_offline_minilm_model(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backbone = make_backbone("minilm", pretrained=True, max_token_length=16)
    model = WildsModel(backbone, n_classes=2, seed=0)
    x = torch.stack([backbone.text_transform(t) for t in ["What a great movie!", "Awful, boring and far too long."]])
    ids, mask = split_text_batch(x)
    assert text_embedding_layer(model) is model.featurizer.encoder.get_input_embeddings()
    with pytest.raises(ValueError, match="text model"):
        image_gradcam_layer(model)
    scores = token_attributions(model, ids, attention_mask=mask, n_steps=32)
    assert [len(s) for s in scores] == mask.sum(1).tolist()
    assert all(np.isfinite(s).all() for s in scores)
    tokens = decode_tokens(backbone.text_transform.tokenizer, ids[0], mask[0])
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and len(tokens) == len(scores[0])
    with torch.no_grad():
        full = class_scores(model).eval()(x)
        blank = class_scores(model).eval()(torch.stack([torch.zeros_like(ids), mask], dim=2))
    target = full.argmax(1)
    change = (full - blank)[torch.arange(2), target].numpy()
    total = np.array([s.sum() for s in scores])
    np.testing.assert_allclose(total, change, atol=0.02 + 0.1 * np.abs(change).max())
    assert no_grads(model)


# --------------------------------------------------------------------------- drawing


def test_gradcam_triples_draw_three_axes_per_example_without_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    x, _ = patch_batch(3)
    images = x.reshape(3, 3, 28, 28).numpy()
    maps = np.random.default_rng(0).random((3, 28, 28))
    figure = plot_gradcam_triples(images, maps, row_labels=["a", "b", "c"], col_title="ERM")
    FigureCanvasAgg(figure).draw()
    assert len(figure.axes) == 9 + 1 and figure.axes[1].get_title().startswith("ERM")  # + the colour bar
    assert "saliency" in figure.axes[-1].get_ylabel()
    two_channel = two_channel_batch(2).reshape(2, 2, SIDE, SIDE).numpy()
    shared = Figure()
    grid = shared.subplots(2, 6)
    plot_gradcam_triples(two_channel, np.zeros((2, SIDE, SIDE)), axes=grid[:, :3], col_title="ERM")
    plot_gradcam_triples(two_channel, np.ones((2, SIDE, SIDE)), axes=grid[:, 3:], col_title="FeAT")
    FigureCanvasAgg(shared).draw()
    assert len(shared.axes) == 12 and plt.get_fignums() == before
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        plot_gradcam_triples(images * 3, maps)


def test_token_html_escapes_text_and_colours_by_sign():
    tokens = ["[CLS]", "<b>bad</b>", "great", "##ly", "&"]
    html = render_token_attributions(tokens, np.array([0.0, -2.0, 1.0, 0.5, 0.0]), label="toxic", prediction="<ok>")
    assert "&lt;b&gt;bad&lt;/b&gt;" in html and "<b>bad</b>" not in html and "&amp;" in html
    assert "&lt;ok&gt;" in html and "toxic" in html
    assert "great</span><span" in html and "##" not in html  # WordPiece joined without a space
    red, green = "rgba({}, {}, {}, ".format(*NEGATIVE_RGB), "rgba({}, {}, {}, ".format(*POSITIVE_RGB)
    assert f"{red}1.000)" in html  # the strongest (negative) token is fully red
    assert f"{green}0.500)" in html and f"{green}0.250)" in html
    block = highlight_tokens(tokens, np.zeros(5))
    assert isinstance(block, HighlightedText) and block._repr_html_() == block.html
    assert "rgba" in (block + block).html and HighlightedText.join([block, block]).html.count("token-attributions") == 2
    with pytest.raises(ValueError, match="scores"):
        render_token_attributions(tokens, np.zeros(3))
