"""WILDS backbones (Sec. 6, Appendix F.2): shapes, seeding, offline fallback, the bundled MiniLM."""
import time
import warnings

import pytest
import torch

from featlib.models import BACKBONES, Backbone, WeightsUnavailable, WildsModel, linear_head, make_backbone
from featlib.models import wilds_backbones

IMAGE_FEATURES = {"densenet121": 1024, "resnet50": 2048, "resnet18": 512, "small_cnn": 64}
TEXT_FEATURES = {"distilbert": 768, "minilm": 384}


def flat_weights(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.state_dict().values() if p.is_floating_point()])


def text_batch(backbone: Backbone, texts) -> torch.Tensor:
    return torch.stack([backbone.text_transform(t) for t in texts])


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network (the probe always fails) and an empty torch hub cache."""
    monkeypatch.delenv("FEATLIB_OFFLINE", raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    monkeypatch.setattr(wilds_backbones, "_PROBES", {})
    monkeypatch.setattr(wilds_backbones, "_probe", lambda url, timeout: f"cannot reach {url} (test: offline)")


def test_registry_lists_the_paper_and_the_light_backbones():
    assert set(BACKBONES.names()) == set(IMAGE_FEATURES) | set(TEXT_FEATURES)


@pytest.mark.parametrize("name", sorted(IMAGE_FEATURES))
def test_image_backbones_build_and_give_n_features(name):
    backbone = make_backbone(name, pretrained=False, seed=0)
    assert backbone.n_features == IMAGE_FEATURES[name] and not backbone.pretrained
    assert backbone.text_transform is None and "random initialisation" in backbone.description
    backbone.featurizer.eval()
    with torch.no_grad():
        out = backbone.featurizer(torch.randn(1, 3, 64, 64))
    assert out.shape == (1, backbone.n_features) and out.dtype == torch.float32


@pytest.mark.parametrize("size", [16, 33])
def test_small_cnn_takes_any_image_size_from_16(size):
    backbone = make_backbone("small_cnn", pretrained=False)
    assert backbone.featurizer(torch.randn(3, 3, size, size + 5)).shape == (3, 64)


@pytest.mark.parametrize("name", sorted(TEXT_FEATURES))
def test_text_backbones_build_and_give_n_features(name):
    backbone = make_backbone(name, pretrained=False, seed=0, max_token_length=16)
    x = text_batch(backbone, ["A short comment.", "Another, somewhat longer comment " * 5])
    assert x.shape == (2, 16, 2) and x.dtype == torch.long
    backbone.featurizer.eval()
    with torch.no_grad():
        out = backbone.featurizer(x)
    assert out.shape == (2, TEXT_FEATURES[name]) == (2, backbone.n_features)


@pytest.mark.parametrize("name", ["small_cnn", "resnet18", "minilm", "distilbert"])
def test_random_initialisation_is_a_function_of_the_seed(name):
    first = flat_weights(make_backbone(name, pretrained=False, seed=3).featurizer)
    again = flat_weights(make_backbone(name, pretrained=False, seed=3).featurizer)
    other = flat_weights(make_backbone(name, pretrained=False, seed=4).featurizer)
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_building_a_backbone_leaves_the_global_rng_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    make_backbone("small_cnn", pretrained=False, seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_auto_falls_back_offline_quickly_with_one_warning(offline):
    start = time.perf_counter()
    with pytest.warns(UserWarning, match="Falling back to random weights") as record:
        backbone = make_backbone("resnet18", pretrained="auto", seed=1)
    assert time.perf_counter() - start < 30
    assert len(record) == 1 and not backbone.pretrained
    assert "random initialisation" in backbone.description and "could not be fetched offline" in backbone.description
    assert torch.equal(flat_weights(backbone.featurizer),
                       flat_weights(make_backbone("resnet18", pretrained=False, seed=1).featurizer))


def test_pretrained_true_offline_raises_a_clear_error(offline):
    with pytest.raises(WeightsUnavailable, match="could not be fetched.*pretrained=False"):
        make_backbone("resnet18", pretrained=True)
    with pytest.raises(WeightsUnavailable, match="no pretrained weights"):
        make_backbone("small_cnn", pretrained=True)


def test_distilbert_auto_offline_uses_the_minilm_vocabulary(offline, monkeypatch):
    import transformers

    online_calls = []

    def from_pretrained(name, local_files_only=False, **kwargs):
        if local_files_only:
            raise OSError(f"{name} is not cached")
        online_calls.append(name)
        raise AssertionError("no download may be attempted when the hub is unreachable")

    monkeypatch.setattr(transformers.DistilBertModel, "from_pretrained", from_pretrained)
    start = time.perf_counter()
    with pytest.warns(UserWarning, match="Falling back"):
        backbone = make_backbone("distilbert", pretrained="auto", max_token_length=12)
    assert time.perf_counter() - start < 30 and not online_calls
    assert not backbone.pretrained and "bert-base-uncased vocabulary" in backbone.description
    assert backbone.featurizer.encoder.config.vocab_size == backbone.text_transform.tokenizer.vocab_size == 30522
    minilm = make_backbone("minilm", max_token_length=12)
    text = "The Quick brown fox, naively JUMPING over café tables!"
    assert torch.equal(backbone.text_transform(text), minilm.text_transform(text))


@pytest.mark.parametrize("url", ["https://10.255.255.1:9/", "https://127.0.0.1:9/", "https://no-such-host.invalid/"])
def test_network_probe_gives_up_within_its_timeout(url):
    start = time.perf_counter()
    reason = wilds_backbones._probe(url, timeout=0.5)  # blackholed, refused, unresolvable
    assert reason is not None and time.perf_counter() - start < 3


def test_featlib_offline_skips_the_probe(monkeypatch):
    monkeypatch.setenv("FEATLIB_OFFLINE", "1")
    assert wilds_backbones.unreachable_reason("https://download.pytorch.org/x") == "FEATLIB_OFFLINE=1"


def test_minilm_loads_the_bundled_pretrained_weights_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backbone = make_backbone("minilm", max_token_length=32)
    assert backbone.pretrained and "pretrained weights" in backbone.description
    x = text_batch(backbone, ["A man is playing a guitar.", "Someone plays the guitar.",
                              "The stock market fell sharply today."])
    backbone.featurizer.eval()
    with torch.no_grad():
        e = torch.nn.functional.normalize(backbone.featurizer(x), dim=1)
    paraphrase, unrelated = (e[0] @ e[1]).item(), (e[0] @ e[2]).item()
    assert paraphrase > 0.6 and paraphrase > unrelated + 0.3


def test_text_transform_follows_the_wilds_format():
    backbone = make_backbone("minilm", max_token_length=10)
    x = backbone.text_transform("hello world")
    assert x.shape == (10, 2) and x.dtype == torch.long
    assert x[:, 0].tolist()[:4] == [101, 7592, 2088, 102] and x[:, 1].tolist() == [1] * 4 + [0] * 6
    long = backbone.text_transform("word " * 50)
    assert long.shape == (10, 2) and long[-1, 0].item() == 102 and long[:, 1].all()
    with pytest.raises(ValueError, match="string"):
        backbone.text_transform(["not", "a", "string"])
    with pytest.raises(ValueError, match=r"\(n, length, 2\)"):
        backbone.featurizer(x[:, 0].unsqueeze(0))


@pytest.mark.parametrize("name", ["small_cnn", "minilm"])
def test_wilds_model_is_head_after_featurizer(name):
    backbone = make_backbone(name, pretrained=False, max_token_length=8)
    model = WildsModel(backbone, n_classes=3, seed=5).eval()
    x = text_batch(backbone, ["one", "two words"]) if backbone.text_transform else torch.randn(2, 3, 20, 20)
    with torch.no_grad():
        logits = model(x)
        assert logits.shape == (2, 3)
        assert torch.allclose(logits, model.classifier(model.featurizer(x)))
    assert model.classifier.in_features == backbone.n_features and model.classifier.out_features == 3


def test_linear_head_is_seeded():
    a, b, c = linear_head(16, 2, seed=1), linear_head(16, 2, seed=1), linear_head(16, 2, seed=2)
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    assert not torch.equal(a.weight, c.weight)
    assert a.weight.abs().max() <= 1 / 16 ** 0.5  # PyTorch's default Linear bound


def test_bad_arguments_are_rejected_with_the_valid_values():
    with pytest.raises(ValueError, match="'densenet121'.*'small_cnn'"):
        make_backbone("vit")
    with pytest.raises(ValueError, match="pretrained"):
        make_backbone("small_cnn", pretrained="yes")
    with pytest.raises(ValueError, match="max_token_length"):
        make_backbone("minilm", max_token_length=1000)
    with pytest.raises(ValueError, match="seed"):
        make_backbone("small_cnn", seed=-1)
    backbone = make_backbone("small_cnn", pretrained=False)
    with pytest.raises(ValueError, match="n_classes"):
        WildsModel(backbone, n_classes=1)
    with pytest.raises(ValueError, match="Backbone"):
        WildsModel(backbone.featurizer, n_classes=2)


def test_no_warning_when_nothing_is_missing():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        make_backbone("minilm", pretrained="auto")
        make_backbone("small_cnn", pretrained="auto")
