"""The six WILDS datasets of the paper's Table 3, loaded through the real ``wilds`` package.

Protocol.md section 5 and Appendix F.2: the datasets, metrics, backbones and optimisation
settings are those of the paper's Tables 8-11 (Table 11 is the general hyperparameter table,
``tab:hyper_wilds_appdx``) and the feature-learning steps, rounds and retain penalties those of
Table 12 (``tab:wilds_step_appdx``). One :class:`WildsSpec` per dataset holds one column of
those tables; :data:`WILDS_DATASETS` registers them in Table 3's column order.

:func:`load_wilds` reads a dataset that is already on disk in the ``wilds`` layout
(``<root>/<name>_v<version>/RELEASE_v<version>.txt`` plus the dataset's files; see
:mod:`featlib.data.wilds_fabricate` for tiny stand-ins with the same layout) with
``wilds.get_dataset(name, root_dir=root, download=download)`` and returns a :class:`WildsData`:
the dataset, its splits (``train``, ``val`` = the OOD validation split, ``test`` and the
in-distribution ``id_val`` / ``id_test`` where the dataset has them), a grouper over the
training domains and the official metric (``dataset.eval``).

Things the ``wilds`` source fixes that the paper's text does not say:

* Camelyon17's hospitals are 0-indexed in ``wilds`` and the OOD splits are *not* the last two:
  ``VAL_CENTER = 1`` (OOD validation) and ``TEST_CENTER = 2`` (test); the training hospitals
  are 0, 3 and 4 (the paper's "first three hospitals" use the Camelyon17 challenge numbering).
* Metric keys of ``dataset.eval``: ``acc_avg`` (Camelyon17, RxRx1), ``acc_wg`` (CivilComments:
  worst of the 16 identity x label groups whose identity is present), ``acc_worst_region``
  (FMoW: worst region, the "Other" region ignored), ``F1-macro_all`` (iWildCam) and
  ``10th_percentile_acc`` (Amazon: 10th percentile of per-user accuracies).
* Latest versions (the folder names): ``amazon_v2.1``, ``camelyon17_v1.0``,
  ``civilcomments_v1.0``, ``fmow_v1.1``, ``iwildcam_v2.0``, ``rxrx1_v1.0``.
* Grouped metrics (``wilds.common.utils.avg_over_groups``) import ``torch_scatter``, a package
  that needs a compile step where no prebuilt wheel fits; featlib computes them in plain torch
  instead (:mod:`featlib.data.wilds_groups`), so ``torch_scatter`` is never needed.
"""
from __future__ import annotations

import importlib
import os
import sys
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..hparams import WILDS, values
from ..registry import Registry
from ..validation import check_bool, check_choice, check_int, check_positive

MODALITIES = ("image", "text")
BACKBONES = ("densenet121", "resnet50", "distilbert")
OPTIMIZERS = ("adam", "sgd")
SCHEDULERS = (None, "cosine_warmup")
#: How DFR / DFR-s is fitted on each dataset (Appendix F.2, "DFR implementations").
DFR_PROTOCOLS = ("ood_val", "train_test", "val_test", "none")
#: The split names of WILDS, in the order :class:`WildsData` lists them.
SPLIT_ORDER = ("train", "val", "test", "id_val", "id_test")

#: WILDS' default image normalisation (``examples/transforms.py``): ImageNet statistics.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# The dataset class behind each name (what wilds.get_dataset builds for the latest version).
_DATASET_CLASSES = {
    "camelyon17": ("wilds.datasets.camelyon17_dataset", "Camelyon17Dataset"),
    "civilcomments": ("wilds.datasets.civilcomments_dataset", "CivilCommentsDataset"),
    "fmow": ("wilds.datasets.fmow_dataset", "FMoWDataset"),
    "iwildcam": ("wilds.datasets.iwildcam_dataset", "IWildCamDataset"),
    "amazon": ("wilds.datasets.amazon_dataset", "AmazonDataset"),
    "rxrx1": ("wilds.datasets.rxrx1_dataset", "RxRx1Dataset"),
}


@dataclass(frozen=True)
class WildsSpec:
    """One column of the paper's Tables 8-12 for a WILDS dataset (protocol.md section 5); the
    values of Tables 11 and 12 come from :data:`featlib.hparams.WILDS`.

    Table 11 (general hyperparameters): ``n_seeds``, ``lr``, ``weight_decay``, ``scheduler``,
    ``batch_size``, ``backbone``, ``optimizer``, ``domains_per_batch``, ``groupby_fields``,
    ``epochs``. Table 12 (feature learning): ``fl_steps`` (overall steps), ``fl_rounds``,
    ``retain_penalty`` (FeAT), and ``erm_steps`` (the text under Table 12: ERM trains for the
    overall steps, RxRx1 for 15,000). Table 8: ``metric`` / ``metric_label``. Appendix F.2's
    DFR paragraph: ``dfr_protocol``. WILDS configs: ``resolution`` and ``max_token_length``.
    """

    name: str
    title: str
    version_dir: str
    modality: str
    backbone: str
    metric: str
    metric_label: str
    groupby_fields: tuple
    lr: float
    weight_decay: float
    optimizer: str
    scheduler: str | None
    batch_size: int
    domains_per_batch: int
    epochs: int
    n_seeds: int
    fl_steps: int
    fl_rounds: int
    retain_penalty: float
    erm_steps: int
    dfr_protocol: str
    spurious_field: str | None
    resolution: tuple | None
    max_token_length: int | None

    def __post_init__(self) -> None:
        check_choice("modality", self.modality, MODALITIES)
        check_choice("backbone", self.backbone, BACKBONES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("scheduler", self.scheduler, SCHEDULERS)
        check_choice("dfr_protocol", self.dfr_protocol, DFR_PROTOCOLS)
        check_positive("lr", self.lr)
        check_positive("weight_decay", self.weight_decay, allow_zero=True)
        check_positive("retain_penalty", self.retain_penalty)
        for name in ("batch_size", "domains_per_batch", "epochs", "n_seeds", "fl_steps",
                     "fl_rounds", "erm_steps"):
            check_int(name, getattr(self, name), minimum=1)
        if not self.groupby_fields or not isinstance(self.groupby_fields, tuple):
            raise ValueError(f"groupby_fields must be a non-empty tuple; got {self.groupby_fields!r}")

    @property
    def steps_per_round(self) -> int:
        """FeAT / Bonsai steps per round: overall steps // rounds (Table 12, see the note there)."""
        return self.fl_steps // self.fl_rounds


WILDS_DATASETS: Registry[WildsSpec] = Registry("dataset")


def _register(spec: WildsSpec) -> WildsSpec:
    return WILDS_DATASETS.register(spec.name)(spec)


# Tables 11 and 12's values come from featlib.hparams.WILDS (the one home of the paper's
# hyper-parameters, with the Table 12 note on steps per round); the rest of each spec is what the
# dataset is. Table 3's column order: Camelyon17, CivilComments, FMoW, iWildCam, Amazon, RxRx1.
_register(WildsSpec(
    name="camelyon17", title="Camelyon17", version_dir="camelyon17_v1.0", modality="image",
    backbone="densenet121", metric="acc_avg", metric_label="Avg. acc. (%)", groupby_fields=("hospital",),
    # No proper OOD validation set: DFR is fitted on a random split of train + test ("cheat").
    dfr_protocol="train_test", spurious_field="hospital", resolution=(96, 96), max_token_length=None,
    **values(WILDS["camelyon17"]),
))
_register(WildsSpec(
    name="civilcomments", title="CivilComments", version_dir="civilcomments_v1.0", modality="text",
    backbone="distilbert", metric="acc_wg", metric_label="Worst acc. (%)",
    # Demographics x toxicity; the WILDS default training groups are ("black", "y").
    groupby_fields=("black", "y"),
    dfr_protocol="ood_val", spurious_field="black", resolution=None, max_token_length=300,
    **values(WILDS["civilcomments"]),
))
_register(WildsSpec(
    name="fmow", title="FMoW", version_dir="fmow_v1.1", modality="image",
    backbone="densenet121", metric="acc_worst_region", metric_label="Worst acc. (%)", groupby_fields=("year", "region"),
    dfr_protocol="ood_val", spurious_field="region", resolution=(224, 224), max_token_length=None,
    **values(WILDS["fmow"]),
))
_register(WildsSpec(
    name="iwildcam", title="iWildCam", version_dir="iwildcam_v2.0", modality="image",
    backbone="resnet50", metric="F1-macro_all", metric_label="Macro F1", groupby_fields=("location",),
    # The authors' own SGD logistic regression on OOD val + test ("cheat").
    dfr_protocol="val_test", spurious_field="location", resolution=(448, 448), max_token_length=None,
    **values(WILDS["iwildcam"]),
))
_register(WildsSpec(
    name="amazon", title="Amazon", version_dir="amazon_v2.1", modality="text",
    backbone="distilbert", metric="10th_percentile_acc", metric_label="10-th per. acc. (%)",
    # Table 11 says "Countries" (a slip); WILDS and Table 8 group Amazon by reviewer.
    groupby_fields=("user",),
    dfr_protocol="val_test", spurious_field=None, resolution=None, max_token_length=512,
    **values(WILDS["amazon"]),
))
_register(WildsSpec(
    name="rxrx1", title="RxRx1", version_dir="rxrx1_v1.0", modality="image",
    backbone="resnet50", metric="acc_avg", metric_label="Avg. acc. (%)", groupby_fields=("experiment",),
    # DFR did not converge on RxRx1 in the paper (no DFR entries in Table 3).
    dfr_protocol="none", spurious_field=None, resolution=None, max_token_length=None,
    **values(WILDS["rxrx1"]),
))


class WildsDatasetNotFoundError(FileNotFoundError):
    """A WILDS dataset is not on disk under the given root (and download=False)."""


class WildsDataError(ValueError):
    """A WILDS dataset folder is there but incomplete or damaged (a file missing, a metadata
    table cut short); the message names the folder and says how to repair it."""


# --------------------------------------------------------------------------------------------
# The wilds package
# --------------------------------------------------------------------------------------------
@contextmanager
def _without_update_check():
    """Import wilds without its online version check.

    ``wilds/version.py`` starts a thread that asks PyPI (through the ``outdated`` package,
    which also checks itself) whether wilds is up to date; offline it warns or, behind a
    firewall, can keep the interpreter from exiting. Hiding ``outdated`` while wilds is first
    imported makes wilds skip the check (its ``ImportError`` branch).
    """
    hide = "outdated" not in sys.modules and "wilds" not in sys.modules
    if hide:
        sys.modules["outdated"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        yield
    finally:
        if hide and sys.modules.get("outdated", 0) is None:
            del sys.modules["outdated"]


def import_wilds():
    """The ``wilds`` module, imported without the online update check, its grouped metrics
    computed in plain torch (:func:`featlib.data.wilds_groups.use_torch_group_average`)."""
    try:
        with _without_update_check():
            import wilds
    except ImportError as err:
        raise ImportError(
            f"the WILDS datasets need the wilds package ({err}). In Colab, the first cell of chapters 05-07 installs "
            "it (featlib[wilds]): run that cell, then this one again. For local use, `pip install \"featlib[wilds]\"` "
            "(in a checkout of the book, `pip install -e \".[wilds]\"`)"
        ) from None
    from .wilds_groups import use_torch_group_average

    use_torch_group_average()
    return wilds


def dataset_class(name: str) -> type:
    """The ``wilds`` dataset class of ``name`` (a key of :data:`WILDS_DATASETS`)."""
    WILDS_DATASETS.get(name)
    import_wilds()
    module, cls = _DATASET_CLASSES[name]
    return getattr(importlib.import_module(module), cls)


def latest_version(name: str) -> str:
    """The newest version in the dataset class's ``_versions_dict`` (what wilds loads)."""
    versions = dataset_class(name)._versions_dict
    return max(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


def download_size_gb(name: str) -> float:
    """Approximate compressed download size in GB, from the wilds source."""
    versions = dataset_class(name)._versions_dict
    return versions[latest_version(name)]["compressed_size"] / 1e9


# --------------------------------------------------------------------------------------------
# Transforms (WILDS' examples/transforms.py is not part of the pip package)
# --------------------------------------------------------------------------------------------
class _ToRGB:
    """PIL image to RGB (a no-op for the RGB images of the WILDS image datasets)."""

    def __call__(self, image):
        return image if image.mode == "RGB" else image.convert("RGB")

    def __repr__(self) -> str:
        return "ToRGB()"


class PerImageStandardize:
    """RxRx1's WILDS transform: standardise each channel of each image by its own mean / std.

    A channel with zero standard deviation is divided by 1, as in WILDS.
    """

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=(1, 2))
        std = x.std(dim=(1, 2))
        std[std == 0.0] = 1.0
        return (x - mean[:, None, None]) / std[:, None, None]

    def __repr__(self) -> str:
        return "PerImageStandardize()"


def _check_resolution(resolution: Any) -> tuple[int, int] | None:
    if resolution is None:
        return None
    if isinstance(resolution, (int, np.integer)) and not isinstance(resolution, bool):
        resolution = (resolution, resolution)
    if (not isinstance(resolution, (tuple, list)) or len(resolution) != 2
            or not all(isinstance(r, (int, np.integer)) and not isinstance(r, bool) and r > 0
                       for r in resolution)):
        raise ValueError(
            f"resolution must be None, a positive int or a (height, width) pair of positive ints; "
            f"got {resolution!r}"
        )
    return int(resolution[0]), int(resolution[1])


def image_transform(spec: WildsSpec | str, resolution: Any = None) -> Callable:
    """The WILDS evaluation transform of an image dataset (no augmentation).

    ``image_base`` (Camelyon17, FMoW, iWildCam): resize to the target resolution (the spec's, or
    ``resolution`` when given, e.g. 32 for small CPU runs), ``ToTensor`` and ImageNet
    normalisation. RxRx1: ``ToTensor`` then per-image, per-channel standardisation at the
    native 256 x 256 (resized first only when ``resolution`` is given).
    """
    from torchvision import transforms

    spec = WILDS_DATASETS.get(spec) if isinstance(spec, str) else spec
    if spec.modality != "image":
        raise ValueError(f"image_transform needs an image dataset; {spec.name!r} is {spec.modality}")
    target = _check_resolution(resolution) or spec.resolution
    steps: list = [_ToRGB()]
    if target is not None:
        steps.append(transforms.Resize(tuple(target)))
    steps.append(transforms.ToTensor())
    if spec.name == "rxrx1":
        steps.append(PerImageStandardize())
    else:
        steps.append(transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD))
    return transforms.Compose(steps)


# --------------------------------------------------------------------------------------------
# Loaded data
# --------------------------------------------------------------------------------------------
@dataclass
class WildsData:
    """A loaded WILDS dataset: splits, training-domain grouper and the official metric."""

    spec: WildsSpec
    dataset: Any  # wilds.datasets.wilds_dataset.WILDSDataset
    grouper: Any  # wilds.common.grouper.CombinatorialGrouper over spec.groupby_fields
    splits: dict = field(default_factory=dict)  # split name -> WILDSSubset (transform applied)
    n_classes: int = 0

    def _indices(self, split: str) -> torch.Tensor:
        check_choice("split", split, self.splits)
        return torch.as_tensor(np.asarray(self.splits[split].indices), dtype=torch.long)

    def labels(self, split: str) -> torch.Tensor:
        """The label of every example of ``split``, in subset order (int64)."""
        y = torch.as_tensor(self.dataset.y_array)
        return y[self._indices(split)].long()

    def metadata(self, split: str) -> torch.Tensor:
        """The ``metadata_array`` rows of ``split`` (columns: ``dataset.metadata_fields``)."""
        return self.dataset.metadata_array[self._indices(split)]

    def groups(self, split: str) -> torch.Tensor:
        """Training-domain index of every example (``grouper.metadata_to_group``)."""
        return self.grouper.metadata_to_group(self.metadata(split)).long()

    def attribute(self, split: str, field_name: str) -> torch.Tensor:
        """One metadata column by name, e.g. the spurious attribute that DFR-s predicts."""
        fields = list(self.dataset.metadata_fields)
        check_choice("field", field_name, fields)
        return self.metadata(split)[:, fields.index(field_name)].long()

    def evaluate(self, split: str, y_pred: Any) -> tuple[dict, str]:
        """The official WILDS evaluation ``dataset.eval(y_pred, y_true, metadata)`` on ``split``.

        ``y_pred`` holds one predicted label per example of the split, in subset order (a 2-D
        array of logits / scores is reduced by argmax over its last axis).
        """
        y_true = self.labels(split)
        pred = torch.as_tensor(np.asarray(y_pred) if not torch.is_tensor(y_pred) else y_pred)
        if pred.dim() == 2:
            pred = pred.argmax(dim=-1)
        if pred.dim() != 1 or len(pred) != len(y_true):
            raise ValueError(
                f"y_pred must hold one prediction per example of split {split!r} "
                f"({len(y_true)} examples); got shape {tuple(pred.shape)}"
            )
        import_wilds()  # grouped metrics in plain torch
        return self.dataset.eval(pred.long().cpu(), y_true, self.metadata(split))

    def score(self, split: str, y_pred: Any) -> float:
        """The metric of the paper's Table 3 (``spec.metric``) on ``split``."""
        return float(self.evaluate(split, y_pred)[0][self.spec.metric])


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------
def _check_root(root: Any) -> Path:
    if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
        raise ValueError(f"root must be a directory path (str or pathlib.Path); got {root!r}")
    path = Path(os.fspath(root)).expanduser()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"root must be a directory holding the WILDS datasets; {path} is a file")
    return path


#: How to ask for a download, wherever a dataset is loaded from.
DOWNLOAD_HINT = ("in a notebook (Colab too) put `download = True` (chapter 05) or `wilds_download = True` (chapter 06) "
                 "in the parameters cell and run it again; download=True in Python; --download for run_wilds and "
                 "python -m featlib.cli.cost")


def _not_found(spec: WildsSpec, root: Path) -> WildsDatasetNotFoundError:
    data_dir = root / spec.version_dir
    version = spec.version_dir.rsplit("_v", 1)[1]
    return WildsDatasetNotFoundError(
        f"the {spec.title} dataset was not found: {data_dir} does not exist or lacks "
        f"RELEASE_v{version}.txt. Download it ({DOWNLOAD_HINT}; about "
        f"{download_size_gb(spec.name):.2f} GB compressed), or run "
        f"`python -c \"import wilds; wilds.get_dataset('{spec.name}', root_dir='{root}', "
        f"download=True)\"`"
    )


def _damaged(spec: WildsSpec, root: Path, what: str) -> WildsDataError:
    data_dir = root / spec.version_dir
    if (data_dir / "FABRICATED.json").is_file():
        fix = (f"it was fabricated by featlib: rewrite it with --fabricate (run_wilds, chapter 05's fabricate=True) "
               f"or featlib.data.wilds_fabricate.fabricate_wilds({spec.name!r}, {str(root)!r})")
    else:
        fix = f"delete {data_dir} and download the dataset again ({DOWNLOAD_HINT})"
    return WildsDataError(f"the {spec.title} dataset in {data_dir} is incomplete or damaged: {what}; {fix}")


def _exists_locally(spec: WildsSpec, root: Path) -> bool:
    """wilds' own test (``dataset_exists_locally``): the folder and its RELEASE file."""
    version = spec.version_dir.rsplit("_v", 1)[1]
    return (root / spec.version_dir / f"RELEASE_v{version}.txt").is_file()


def require_local(name: str, root: str | os.PathLike) -> Path:
    """The dataset's folder under ``root``; :class:`WildsDatasetNotFoundError` (naming the folder
    searched and how to download it) when it is not there. Cheap: call it before building models."""
    spec = WILDS_DATASETS.get(name)
    root = _check_root(root)
    if not _exists_locally(spec, root):
        raise _not_found(spec, root)
    return root / spec.version_dir


def _subsample(indices: np.ndarray, max_examples: int | None, seed: int, split: str) -> np.ndarray:
    """A seeded, sorted random subset of at most ``max_examples`` indices (per split)."""
    if max_examples is None or len(indices) <= max_examples:
        return indices
    rng = np.random.default_rng([seed, zlib.crc32(split.encode())])
    return np.sort(rng.choice(indices, size=max_examples, replace=False))


#: The most memory (MiB) that one split's decoded examples may take to be kept after their first
#: read (:class:`RememberingSubset`); a larger split is decoded on every read, as WILDS does.
KEEP_DECODED_MIB = 256.0


class RememberingSubset:
    """A ``WILDSSubset`` (its attributes are the subset's) that keeps each example after its first
    read (image, label, metadata) when the whole split's decoded images take at most
    ``budget_mib`` (judged on the first example read): training reads every example once per
    epoch, and decoding the image files is most of a small run's time. Only for a deterministic
    transform (featlib's own :func:`image_transform`: no augmentation), so a kept example is the one
    a new read would give; the items are shared, so a caller must not change them in place (a
    ``DataLoader`` copies them into its batch)."""

    def __init__(self, subset: Any, budget_mib: float = KEEP_DECODED_MIB):
        self.subset = subset
        self.budget_bytes = budget_mib * 2**20
        self.kept: dict | None = {}  # None: the split is too large to keep

    def __len__(self) -> int:
        return len(self.subset)

    def __getitem__(self, i):
        if self.kept is None:
            return self.subset[i]
        item = self.kept.get(i)
        if item is None:
            item = self.subset[i]
            if not self.kept:
                x = item[0]
                size = x.numel() * x.element_size() * len(self) if torch.is_tensor(x) else float("inf")
                if size > self.budget_bytes:
                    self.kept = None
                    return item
            self.kept[i] = item
        return item

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("subset", "budget_bytes", "kept"):
            raise AttributeError(name)  # not set yet (unpickling): never recurse
        return getattr(self.subset, name)


def _make_splits(dataset: Any, transform: Callable | None, max_examples: int | None,
                 seed: int, remember: bool = False) -> dict:
    from wilds.datasets.wilds_dataset import WILDSSubset

    splits = {}
    for split in SPLIT_ORDER:
        if split not in dataset.split_dict:
            continue
        full = dataset.get_subset(split, transform=transform)
        idx = _subsample(np.asarray(full.indices), max_examples, seed, split)
        subset = WILDSSubset(dataset, idx, transform)
        splits[split] = RememberingSubset(subset) if remember else subset
    return splits


def load_wilds(
    name: str,
    root: str | os.PathLike,
    *,
    download: bool = False,
    transform: Callable | None = None,
    resolution: Any = None,
    max_examples: int | None = None,
    seed: int = 0,
) -> WildsData:
    """Load a WILDS dataset of Table 3 from ``root`` with the real ``wilds`` loader.

    ``name`` is a key of :data:`WILDS_DATASETS`; ``root`` is the directory that holds
    ``<name>_v<version>/`` (wilds' ``root_dir``). With ``download=False`` a missing dataset
    raises :class:`WildsDatasetNotFoundError` naming the folder searched. ``transform`` applies
    to every split; when None, image datasets get :func:`image_transform` (at ``resolution``
    if given) and text datasets none (raw strings, the text backbone tokenises).
    ``max_examples`` caps every split by a seeded (``seed``), deterministic random subsample.
    With featlib's transform, a split small enough keeps its decoded examples in memory after
    their first read (:class:`RememberingSubset`).
    """
    spec = WILDS_DATASETS.get(name)
    download = check_bool("download", download)
    root = _check_root(root)
    if max_examples is not None:
        max_examples = check_int("max_examples", max_examples, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    if transform is not None and not callable(transform):
        raise ValueError(f"transform must be callable or None; got {transform!r}")
    resolution = _check_resolution(resolution)
    if not download and not _exists_locally(spec, root):
        raise _not_found(spec, root)
    wilds = import_wilds()
    remember = transform is None and spec.modality == "image"  # featlib's own transform: deterministic
    if remember:
        transform = image_transform(spec, resolution)
    from wilds.common.grouper import CombinatorialGrouper

    try:
        dataset = wilds.get_dataset(dataset=name, root_dir=str(root), download=download)
        grouper = CombinatorialGrouper(dataset=dataset, groupby_fields=list(spec.groupby_fields))
        splits = _make_splits(dataset, transform, max_examples, seed, remember)
    except FileNotFoundError as err:
        if not _exists_locally(spec, root):
            raise _not_found(spec, root) from err
        raise _damaged(spec, root, f"{err.filename or err} is missing") from None
    except ImportError:
        raise
    except Exception as err:  # noqa: BLE001  (pandas, numpy and wilds raise many types on damaged tables)
        raise _damaged(spec, root, f"wilds cannot read it ({type(err).__name__}: {err})") from None
    empty = [split for split, subset in splits.items() if len(subset) == 0]
    if empty:
        raise _damaged(spec, root, f"the split(s) {', '.join(map(repr, empty))} hold no examples (is its metadata "
                                   "table cut short?)")
    return WildsData(spec=spec, dataset=dataset, grouper=grouper, splits=splits, n_classes=int(dataset.n_classes))
