"""Which features the ColoredMNIST models use (Sec. 6 "Feature learning analysis", Fig. 4; Appendix
F.4, Fig. 5): ERM after 150, 300 and 450 epochs, Bonsai and FeAT after 2 rounds, on the same
test examples, shown with GradCAM and measured as the share of attribution on colour.

The paper's figure uses a ColoredMNIST-025 variant whose shortcut is a coloured patch in the
upper-left corner, read by a small CNN (``dataset="cmnist025-patch"``, ``model="cnn"``): the
digit is grey, so colour lives in the patch only, and "how much does the model look at colour"
becomes "how much of its attribution falls in the patch". Two measures:

* **IG share**: integrated gradients (zero baseline), summed over the three channels into one
  signed attribution per pixel (what the pixel contributes), then |.|, share inside the 5x5
  patch: exact to the pixel. (Summing |.| per channel instead would credit the grey digit with
  the contributions of channels that cancel, e.g. a red-minus-green detector.)
* **GradCAM share**: the share of the (ReLU'd, upsampled) GradCAM map inside the patch grown by
  2 pixels (GradCAM's 7x7 grid smears about a pixel through the last conv and one more through
  the upsampling).

On the standard two-channel ColoredMNIST with the MLP (``dataset="cmnist025"``) colour is which
channel holds the digit, not a place; there the share comes from
:func:`featlib.saliency.colour_shape_attribution`, which splits integrated gradients into a
luminance (shape) and a chrominance (colour) part.

Beside the attributions, a behavioural check needs no attribution method at all: the
**colour-swap flip rate**, the share of predictions that change when the two colours are
swapped (channels 0 and 1 exchanged: on the patch variant the grey digit is the same in every
channel, so only the patch changes colour; on the two-channel variant the digit moves to the
other channel). A model that reads only colour flips every prediction, one that ignores it
none.

All shares are computed for the model's predicted class on the first ``n_attribution`` images
of the OOD test environment (colour-flip probability 0.9), the same images for every model.
"""
from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..hparams import APPENDIX_F1
from .. import __version__
from ..store.keys import key as store_key
from ..store.files import CorruptFileError, cached, load_torch, cached_meta, save_torch
from ..data.colored_mnist import COLORED_MNIST, make_colored_mnist, patch_mask
from ..feature_learning import FEATURE_LEARNERS
from ..feature_learning.full_batch_loop import accuracy, worst_test_accuracy
from ..feature_learning.erm import erm_snapshots
from ..feature_learning.termination import DEFAULT_TERMINATION_THRESHOLD
from ..models import make_cmnist_model
from ..saliency import (
    colour_shape_attribution, dilate_mask, gradcam, image_gradcam_layer, integrated_gradients, region_share,
)
from ..validation import check_bool, check_choice, check_int, check_positive, check_sequence, check_writable
from .colored_mnist import schedule

#: How far GradCAM's coarse map is allowed to spill around the patch (pixels).
GRADCAM_MARGIN = 2


@dataclass(frozen=True)
class SaliencyProtocol:
    """The models of the ColoredMNIST saliency study; defaults are the paper's Fig. 4 / Fig. 5."""

    dataset: str = "cmnist025-patch"
    model: str | None = None  # None: "cnn" on the patch datasets, "mlp" on the others
    seed: int = 1
    n_train: int = 50000
    n_test: int = 10000
    hidden_dim: int = 256
    erm_epochs: tuple[int, ...] = (150, 300, 450)
    feat_rounds: int = 2
    bonsai: bool = True
    epoch_scale: float = 1.0  # multiplies every epoch count (ERM snapshots included)
    lr: float = APPENDIX_F1["lr"].value
    l2: float = APPENDIX_F1["l2"].value
    termination_threshold: float = DEFAULT_TERMINATION_THRESHOLD
    n_attribution: int = 1000
    ig_steps: int = 32

    def __post_init__(self) -> None:
        COLORED_MNIST.get(self.dataset)
        if self.model is not None:
            check_choice("model", self.model, ("mlp", "cnn"))
        check_int("seed", self.seed, minimum=0)
        check_int("n_train", self.n_train, minimum=2, maximum=50000)
        check_int("n_test", self.n_test, minimum=1, maximum=10000)
        check_int("hidden_dim", self.hidden_dim, minimum=1)
        object.__setattr__(self, "erm_epochs", tuple(check_sequence("erm_epochs", self.erm_epochs, unique=True)))
        for e in self.erm_epochs:
            check_int("erm_epochs", e, minimum=1)
        check_int("feat_rounds", self.feat_rounds, minimum=1)
        check_bool("bonsai", self.bonsai)
        check_positive("epoch_scale", self.epoch_scale)
        check_positive("lr", self.lr)
        check_positive("l2", self.l2, allow_zero=True)
        check_positive("termination_threshold", self.termination_threshold)
        check_int("n_attribution", self.n_attribution, minimum=1, maximum=self.n_test)
        check_int("ig_steps", self.ig_steps, minimum=2)

    @property
    def shortcut(self) -> str:
        return COLORED_MNIST.get(self.dataset).shortcut

    @property
    def architecture(self) -> str:
        return self.model or ("cnn" if self.shortcut == "patch" else "mlp")

    def scaled(self, epochs: int) -> int:
        return max(1, int(round(epochs * self.epoch_scale)))

    def model_names(self) -> list[str]:
        names = [f"ERM {self.scaled(e)} epochs" for e in self.erm_epochs]  # the epochs it trained
        if self.bonsai:
            names.append("Bonsai")
        return names + [f"FeAT {self.feat_rounds} rounds"]

    def key(self) -> str:
        fields = {k: v for k, v in asdict(self).items() if k not in ("n_attribution", "ig_steps")}
        # the models' names are in the cached history, so they are in the key too
        blob = json.dumps({**fields, "featlib": __version__, "names": self.model_names()}, sort_keys=True, default=list)
        return store_key(json.loads(blob))


class SaliencyStudy:
    """Trains (or loads from ``cache_dir``) the models of a :class:`SaliencyProtocol` and scores them."""

    def __init__(self, protocol: SaliencyProtocol, cache_dir: str | Path | None = None,
                 device: torch.device | None = None, progress: bool = False, mnist_source: str = "auto"):
        from ..device import get_device

        self.protocol = protocol
        self.device = device or get_device()
        self.progress = progress
        self.dir = None if cache_dir is None else check_writable("cache_dir", cache_dir) / f"{protocol.dataset}-{protocol.key()}"
        p = protocol
        self.data = make_colored_mnist(p.dataset, p.seed, n_train=p.n_train, n_test=p.n_test,
                                       source=mnist_source).to(self.device)
        self._models: dict[str, torch.nn.Module] | None = None
        self.history: pd.DataFrame | None = None

    # ------------------------------------------------------------------ training
    def _options(self, learner: str) -> dict:
        p = self.protocol
        return {**schedule(p.dataset, learner, p.epoch_scale), "model": p.architecture, "hidden_dim": p.hidden_dim,
                "lr": p.lr, "l2": p.l2, "progress": self.progress}

    def _train_erm(self) -> tuple[dict[str, torch.nn.Module], list[dict]]:
        """ERM's snapshots after each of ``erm_epochs`` (one run of the longest)."""
        p = self.protocol
        snapshots = erm_snapshots(self.data, p.seed, epochs=tuple(p.scaled(e) for e in p.erm_epochs),
                                  model=p.architecture, hidden_dim=p.hidden_dim, lr=p.lr, l2=p.l2,
                                  progress=self.progress)
        models, rows = {}, []
        for e, name in zip(p.erm_epochs, p.model_names()):
            learned = snapshots[p.scaled(e)]
            models[name] = learned.model
            rows.append({"model": name, "epochs": learned.epochs, "rounds_kept": 1})
        return models, rows

    def _train_bonsai(self) -> tuple[dict[str, torch.nn.Module], list[dict]]:
        learned = FEATURE_LEARNERS.get("bonsai")(self.data, self.protocol.seed, **self._options("bonsai"))
        return {"Bonsai": learned.model}, [{"model": "Bonsai", "epochs": learned.epochs,
                                            "rounds_kept": len(learned.rounds) - 1}]

    def _train_feat(self) -> tuple[dict[str, torch.nn.Module], list[dict]]:
        p = self.protocol
        options = self._options("feat") | {"max_rounds": p.feat_rounds, "termination_threshold": p.termination_threshold}
        learned = FEATURE_LEARNERS.get("feat")(self.data, p.seed, **options)
        name = f"FeAT {p.feat_rounds} rounds"
        return {name: learned.model}, [{"model": name, "epochs": learned.epochs,
                                        "rounds_kept": int(learned.rounds["accepted"].sum())}]

    def parts(self) -> dict[str, Callable[[], tuple[dict[str, torch.nn.Module], list[dict]]]]:
        """The study's training in resumable parts, in figure order: ERM's snapshots, Bonsai, FeAT.
        Each is trained from the seed alone, so a part trained again equals the part it replaces."""
        parts = {"erm": self._train_erm}
        if self.protocol.bonsai:
            parts["bonsai"] = self._train_bonsai
        return parts | {"feat": self._train_feat}

    def models(self) -> dict[str, torch.nn.Module]:
        """Every model of the study, by name, in figure order. With a ``cache_dir`` each part
        (:meth:`parts`) is kept as it finishes, so a study stopped in FeAT's rounds resumes there
        (at 50,000 images a seed is hours on a CPU)."""
        if self._models is not None:
            return self._models
        key, seed = self.protocol.key(), self.protocol.seed
        models, history = {}, []
        for part, train in self.parts().items():

            def load(path: Path, part=part):
                saved = load_torch(path, keys=("states", "history"), map_location=self.device,
                                   expect={"key": key, "seed": seed, "part": part})
                loaded = {}
                for name, state in saved["states"].items():
                    model = self._new_model()
                    try:
                        model.load_state_dict(state)
                    except (RuntimeError, TypeError, AttributeError) as err:
                        raise CorruptFileError(path, f"its model {name!r} does not load into the study's network "
                                                     f"({err})") from None
                    loaded[name] = model
                return loaded, list(saved["history"])

            def save(path: Path, trained, part=part) -> None:
                states = {k: copy.deepcopy(m.state_dict()) for k, m in trained[0].items()}
                save_torch(path, {"states": states, "history": trained[1]},
                           cached_meta(key, seed, part=part, device=self.device.type))

            path = None if self.dir is None else self.dir / f"{part}.pt"
            trained, rows = cached(path, load, train, save, what=f"cached saliency models ({part})")
            models.update(trained)
            history.extend(rows)
        self._models, self.history = models, pd.DataFrame(history)
        return self._models

    def _new_model(self) -> torch.nn.Module:
        p = self.protocol
        return make_cmnist_model(p.architecture, self.data.image_shape, p.hidden_dim, seed=0).to(self.device)

    # ------------------------------------------------------------------ scoring
    def examples(self, n: int | None = None) -> torch.Tensor:
        """The first ``n`` (default ``n_attribution``) images of the OOD test environment (e = 0.9)."""
        n = self.protocol.n_attribution if n is None else check_int("n", n, minimum=1, maximum=self.protocol.n_test)
        return self.data.test[0].x[:n]

    def gradcam_maps(self, model: torch.nn.Module, x: torch.Tensor, upsample: bool = True) -> np.ndarray | None:
        """GradCAM of the predicted class, upsampled to the image (or on the layer's coarse grid with
        ``upsample=False``); None for models without conv layers."""
        if not any(isinstance(m, torch.nn.Conv2d) for m in model.modules()):
            return None
        return gradcam(model, image_gradcam_layer(model), x, input_shape=self.data.image_shape, upsample=upsample)

    def display_maps(self, n: int) -> tuple[str, np.ndarray, dict[str, np.ndarray], pd.DataFrame]:
        """For the figures: the kind of map ("GradCAM", or "|IG|" for models without conv layers),
        the first ``n`` OOD test images (n, C, H, W) in [0, 1], each model's maps (n, H, W), and
        per example its label, colour and each model's prediction."""
        x = self.examples(n)
        env = self.data.test[0]
        maps, kind = {}, "GradCAM"
        labels = pd.DataFrame({"label": env.y[:n].int().cpu().numpy(), "colour": env.colour[:n].cpu().numpy()})
        for name, model in self.models().items():
            cam = self.gradcam_maps(model, x)
            if cam is None:
                kind = "|IG|"
                ig = integrated_gradients(model, x, n_steps=self.protocol.ig_steps)
                cam = np.abs(ig.reshape(n, *self.data.image_shape).sum(1))
            maps[name] = cam
            with torch.no_grad():
                labels[name] = (model(x) > 0).int().cpu().numpy()
        return kind, env.images(slice(0, n)).cpu().numpy(), maps, labels

    def coarse_gradcam_rows(self, n: int) -> pd.DataFrame:
        """What a result file keeps of the figures (the ``saliency-maps`` studies of
        :mod:`featlib.experiments.gap_studies`): on the first ``n`` OOD test images, each model's
        GradCAM map on its coarse grid (the explained layer's ``h x w``, 7 x 7 for the CNN on 28 x 28
        images, before :func:`featlib.saliency.upsample_maps` brings it to the image), one row per
        (model, image, grid cell), with the image's label and colour and the model's prediction.
        The images themselves are not kept: they are the data's, drawn again from the seed. Only
        for networks with a convolution (GradCAM explains one)."""
        x = self.examples(n)
        env = self.data.test[0]
        labels, colours = env.y[:n].int().cpu().numpy(), env.colour[:n].cpu().numpy()
        frames = []
        for name, model in self.models().items():
            cam = self.gradcam_maps(model, x, upsample=False)
            if cam is None:
                raise ValueError(f"the {self.protocol.architecture.upper()} of dataset {self.protocol.dataset!r} has "
                                 "no convolution for GradCAM; use the CNN on a patch dataset (cmnist025-patch)")
            with torch.no_grad():
                predictions = (model(x) > 0).int().cpu().numpy()
            image, row, col = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(cam.shape[1]),
                                                               np.arange(cam.shape[2]), indexing="ij"))
            frames.append(pd.DataFrame({"model": name, "image": image, "label": labels[image],
                                        "colour": colours[image], "prediction": predictions[image],
                                        "row": row, "col": col, "gradcam": cam.reshape(-1).astype(float)}))
        return pd.concat(frames, ignore_index=True)

    def colour_shares(self, model: torch.nn.Module, x: torch.Tensor) -> dict[str, np.ndarray]:
        """Per example, the share of attribution on colour by each available measure."""
        shape = self.data.image_shape
        out = {}
        if self.protocol.shortcut == "patch":
            mask = patch_mask(shape).cpu().numpy()
            ig = integrated_gradients(model, x, n_steps=self.protocol.ig_steps)
            per_pixel = np.abs(ig.reshape(len(ig), *shape).sum(1))
            out["colour_share_ig"] = region_share(per_pixel, mask)
            maps = self.gradcam_maps(model, x)
            if maps is not None:
                out["colour_share_gradcam"] = region_share(maps, dilate_mask(mask, GRADCAM_MARGIN))
        else:
            split = colour_shape_attribution(model, x, image_shape=shape, n_steps=self.protocol.ig_steps)
            out["colour_share_ig"] = split.colour_share
        return out

    @staticmethod
    @torch.no_grad()
    def colour_flip_rate(model: torch.nn.Module, x: torch.Tensor, image_shape) -> float:
        """Share of predictions that change when colour channels 0 and 1 are exchanged."""
        images = x.reshape(len(x), *image_shape)
        swapped = images[:, [1, 0, *range(2, image_shape[0])]].reshape(len(x), -1)
        return float(((model(x) > 0) != (model(swapped) > 0)).float().mean())

    def table(self, batch: int = 250) -> pd.DataFrame:
        """Per model: accuracies, and the mean (std) share of attribution on colour over the examples."""
        models = self.models()
        x = self.examples()
        rows = []
        for name, model in tqdm(models.items(), desc="attributions", disable=not self.progress, leave=False):
            shares: dict[str, list] = {}
            for start in range(0, len(x), batch):
                for k, v in self.colour_shares(model, x[start:start + batch]).items():
                    shares.setdefault(k, []).append(v)
            with torch.no_grad():
                row = {"model": name, "train_acc": accuracy(model(self.data.train_x), self.data.train_y),
                       "ood_acc": worst_test_accuracy(model, self.data.test)}
                for env in self.data.test:
                    row[f"test_acc_e{env.flip}"] = accuracy(model(env.x), env.y)
                row["colour_flip_rate"] = self.colour_flip_rate(model, x, self.data.image_shape)
            for k, parts in shares.items():
                values = np.concatenate(parts)
                row[k] = float(values.mean())
                row[f"{k}_std"] = float(values.std())
            rows.append(row)
        table = pd.DataFrame(rows)
        if self.history is not None:
            table = table.merge(self.history, on="model", how="left")
        return table
