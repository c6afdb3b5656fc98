"""WILDS loading (featlib.data.wilds_data) on fabricated datasets read by the real wilds loaders.

Protocol.md section 5; the specs are the paper's Tables 8-12 (Appendix F.2).
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from featlib.data.wilds_data import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    WILDS_DATASETS,
    WildsDatasetNotFoundError,
    image_transform,
    latest_version,
    load_wilds,
)
from featlib.data.wilds_fabricate import FABRICATORS, MARKER, Fabricator, fabricate_wilds

TABLE3_ORDER = ["camelyon17", "civilcomments", "fmow", "iwildcam", "amazon", "rxrx1"]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """One folder with the two main fabricated datasets at their default sizes."""
    path = tmp_path_factory.mktemp("wilds")
    fabricate_wilds("camelyon17", path)
    fabricate_wilds("civilcomments", path)
    return path


@pytest.fixture(scope="module")
def camelyon(root):
    return load_wilds("camelyon17", root)


@pytest.fixture(scope="module")
def civil(root):
    return load_wilds("civilcomments", root)


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------- specs
def test_registry_lists_table3_datasets_in_column_order():
    assert WILDS_DATASETS.names() == TABLE3_ORDER
    assert set(FABRICATORS.names()) == set(TABLE3_ORDER)


def test_specs_match_tables_10_and_12():
    cam = WILDS_DATASETS.get("camelyon17")
    assert (cam.lr, cam.optimizer, cam.batch_size, cam.domains_per_batch) == (1e-4, "sgd", 32, 3)
    assert (cam.fl_steps, cam.fl_rounds, cam.retain_penalty, cam.erm_steps) == (10_000, 2, 1e-2, 10_000)
    assert (cam.n_seeds, cam.epochs, cam.steps_per_round, cam.backbone) == (10, 10, 5_000, "densenet121")
    civ = WILDS_DATASETS.get("civilcomments")
    assert (civ.lr, civ.weight_decay, civ.batch_size, civ.optimizer) == (1e-5, 0.01, 16, "adam")
    assert (civ.fl_steps, civ.fl_rounds, civ.steps_per_round, civ.max_token_length) == (50_445, 3, 16_815, 300)
    fmow = WILDS_DATASETS.get("fmow")
    assert (fmow.groupby_fields, fmow.fl_steps, fmow.retain_penalty) == (("year", "region"), 9_600, 1.0)
    iwc = WILDS_DATASETS.get("iwildcam")
    assert (iwc.backbone, iwc.domains_per_batch, iwc.steps_per_round, iwc.retain_penalty) == (
        "resnet50", 10, 24_000, 0.5)
    amz = WILDS_DATASETS.get("amazon")
    assert (amz.lr, amz.batch_size, amz.fl_rounds, amz.retain_penalty, amz.steps_per_round) == (
        2e-6, 64, 3, 2.0, 10_333)
    rx = WILDS_DATASETS.get("rxrx1")
    assert (rx.erm_steps, rx.fl_steps, rx.fl_rounds, rx.steps_per_round) == (15_000, 20_000, 10, 2_000)
    assert (rx.lr, rx.weight_decay, rx.scheduler, rx.batch_size, rx.dfr_protocol) == (
        1e-3, 1e-5, "cosine_warmup", 72, "none")
    assert {n: WILDS_DATASETS.get(n).metric for n in TABLE3_ORDER} == {
        "camelyon17": "acc_avg", "civilcomments": "acc_wg", "fmow": "acc_worst_region",
        "iwildcam": "F1-macro_all", "amazon": "10th_percentile_acc", "rxrx1": "acc_avg"}
    assert cam.dfr_protocol == "train_test" and civ.dfr_protocol == fmow.dfr_protocol == "ood_val"


@pytest.mark.parametrize("name", TABLE3_ORDER)
def test_version_dir_is_the_latest_wilds_version(name):
    assert WILDS_DATASETS.get(name).version_dir == f"{name}_v{latest_version(name)}"


_SMALL = {
    "camelyon17": {"n_train": 12, "n_id_val": 6, "n_val": 4, "n_test": 4},
    "civilcomments": {"n_train": 40, "n_val": 20, "n_test": 20},
    "fmow": {"n_train": 12, "n_id_val": 4, "n_id_test": 4, "n_val": 8, "n_test": 8},
    "iwildcam": {"n_train": 12, "n_id_val": 4, "n_id_test": 4, "n_val": 4, "n_test": 4},
    "amazon": {"n_train_users": 3, "n_per_user": 5, "n_val_users": 2, "n_test_users": 2},
    "rxrx1": {"n_train": 24, "n_id_test": 6, "n_val": 8, "n_test": 8},
}


@pytest.mark.parametrize("name", TABLE3_ORDER)
def test_every_fabricated_dataset_loads_with_spec_fields_and_metric(name, tmp_path):
    spec = WILDS_DATASETS.get(name)
    folder = fabricate_wilds(name, tmp_path, **_SMALL[name])
    assert folder == tmp_path / spec.version_dir
    data = load_wilds(name, tmp_path, resolution=16)
    fields = data.dataset.metadata_fields
    assert set(spec.groupby_fields) <= set(fields)
    assert spec.spurious_field is None or spec.spurious_field in fields
    assert {"train", "val", "test"} <= set(data.splits)
    for split in data.splits:
        assert len(data.labels(split)) == len(data.splits[split]) > 0
    if name != "civilcomments":  # domain shift: OOD domains are not training domains
        train_groups = set(data.groups("train").tolist())
        assert not train_groups & set(data.groups("test").tolist())
        assert not train_groups & set(data.groups("val").tolist())
    results, _ = data.evaluate("test", data.labels("test"))
    assert spec.metric in results
    assert data.score("test", data.labels("test")) == pytest.approx(1.0)
    x = data.splits["train"][0][0]
    assert isinstance(x, str) if spec.modality == "text" else x.shape == (3, 16, 16)


# ---------------------------------------------------------------------------------- Camelyon17
def test_camelyon17_split_structure(camelyon):
    hospitals = {s: set(camelyon.attribute(s, "hospital").tolist()) for s in camelyon.splits}
    # wilds' 0-indexed numbering: OOD validation hospital 1, test hospital 2.
    assert hospitals == {"train": {0, 3, 4}, "id_val": {0, 3, 4}, "val": {1}, "test": {2}}
    assert {s: len(camelyon.splits[s]) for s in camelyon.splits} == {
        "train": 120, "val": 40, "test": 40, "id_val": 24}
    for split in camelyon.splits:
        assert set(camelyon.labels(split).tolist()) == {0, 1}
        assert torch.equal(camelyon.groups(split), camelyon.attribute(split, "hospital"))
    assert camelyon.grouper.n_groups == 5 and camelyon.n_classes == 2


def test_camelyon17_default_transform_is_wilds_image_base(camelyon):
    x, y, meta = camelyon.splits["val"][3]
    assert x.shape == (3, 96, 96) and x.dtype == torch.float32
    raw = camelyon.dataset.get_input(int(camelyon.splits["val"].indices[3]))
    expected = (torch.from_numpy(np.asarray(raw, dtype=np.float32) / 255).permute(2, 0, 1)
                - torch.tensor(IMAGENET_MEAN)[:, None, None]) / torch.tensor(IMAGENET_STD)[:, None, None]
    assert torch.allclose(x, expected, atol=1e-5)
    assert int(y) == int(camelyon.labels("val")[3]) and int(meta[0]) == 1
    assert image_transform("camelyon17", 32)(raw).shape == (3, 32, 32)


def test_camelyon17_official_metric(camelyon):
    y = camelyon.labels("test")
    assert camelyon.score("test", y) == 1.0
    assert camelyon.score("test", 1 - y) == 0.0
    half = y.clone()
    half[: len(y) // 2] = 1 - half[: len(y) // 2]
    assert camelyon.score("test", half) == pytest.approx(0.5)
    logits = torch.nn.functional.one_hot(y, 2).float()
    assert camelyon.score("test", logits) == 1.0
    results, text = camelyon.evaluate("test", y)
    assert "acc_wg" in results and "Average acc" in text


def _patch_statistics(data, split):
    """(border B - R tint, centre darkness) of every raw patch of the split."""
    tint, dark = [], []
    for idx in data.splits[split].indices:
        img = np.asarray(data.dataset.get_input(int(idx)), dtype=float)
        corners = np.concatenate([img[:20, :20], img[:20, -20:], img[-20:, :20], img[-20:, -20:]])
        tint.append(corners[..., 2].mean() - corners[..., 0].mean())
        dark.append(-img[24:72, 24:72].mean())
    return np.array(tint), np.array(dark)


def test_camelyon17_tint_is_spurious_and_nuclei_invariant(camelyon):
    corr = {}
    for split in ("train", "test"):
        tint, dark = _patch_statistics(camelyon, split)
        y = camelyon.labels(split).numpy()
        corr[split] = (np.corrcoef(tint, y)[0, 1], np.corrcoef(dark, y)[0, 1])
    assert corr["train"][0] > 0.6  # tint tracks the label in the training hospitals
    assert abs(corr["test"][0]) < 0.35  # ... but not in the test hospital
    assert corr["train"][1] > 0.6 and corr["test"][1] > 0.6  # nuclei density tracks it everywhere


# ---------------------------------------------------------------------------------- CivilComments
def test_civilcomments_splits_groups_and_text(civil):
    assert {s: len(civil.splits[s]) for s in civil.splits} == {"train": 150, "val": 60, "test": 60}
    for split in civil.splits:
        y = civil.labels(split)
        assert set(y.tolist()) == {0, 1}
        assert torch.equal(civil.groups(split), civil.attribute(split, "black") + 2 * y)
    text, y, _ = civil.splits["train"][0]
    assert isinstance(text, str) and int(y) in (0, 1)
    assert civil.n_classes == 2 and civil.grouper.n_groups == 4


def test_civilcomments_identity_toxicity_association(civil):
    identities = ["male", "female", "LGBTQ", "christian", "muslim", "other_religions", "black", "white"]
    gaps = {}
    for split in ("train", "val", "test"):
        y = civil.labels(split).bool()
        mention = torch.stack([civil.attribute(split, f) for f in identities]).any(0)
        gaps[split] = mention[y].float().mean().item() - mention[~y].float().mean().item()
        if split != "train":  # every identity x label group is present for the worst-group metric
            for f in identities:
                a = civil.attribute(split, f).bool()
                assert (a & y).any() and (a & ~y).any()
    assert gaps["train"] > 0.3
    assert abs(gaps["val"]) < 0.15 and abs(gaps["test"]) < 0.15


def test_civilcomments_metric_punishes_the_identity_shortcut(civil):
    y = civil.labels("test")
    assert civil.score("test", y) == 1.0
    toxic_words = {"stupid", "idiot", "pathetic", "moron", "disgusting", "worthless", "loser",
                   "trash", "ignorant", "dumb"}
    texts = [civil.splits["test"][i][0] for i in range(len(y))]
    content = torch.tensor([int(bool(toxic_words & set(t.split()))) for t in texts])
    assert (content == y).float().mean() > 0.8  # invariant signal, with label noise
    shortcut = civil.attribute("test", "identity_any")
    results, _ = civil.evaluate("test", shortcut)
    assert results["acc_wg"] == 0.0  # "toxic iff an identity is mentioned" fails a whole group
    assert civil.score("test", shortcut) == results["acc_wg"]


# ---------------------------------------------------------------------------------- fabrication
def test_fabrication_is_deterministic_in_the_seed(tmp_path):
    sizes = {"n_train": 12, "n_id_val": 6, "n_val": 4, "n_test": 4}
    a = fabricate_wilds("camelyon17", tmp_path / "a", seed=3, **sizes)
    b = fabricate_wilds("camelyon17", tmp_path / "b", seed=3, **sizes)
    c = fabricate_wilds("camelyon17", tmp_path / "c", seed=4, **sizes)
    assert _tree_digest(a) == _tree_digest(b) != _tree_digest(c)
    d = fabricate_wilds("civilcomments", tmp_path / "a", seed=3)
    e = fabricate_wilds("civilcomments", tmp_path / "b", seed=3)
    assert _tree_digest(d) == _tree_digest(e)


def test_fabrication_is_idempotent_and_refuses_other_contents(tmp_path, root):
    folder = root / "camelyon17_v1.0"
    stamp = (folder / "metadata.csv").stat().st_mtime_ns
    assert fabricate_wilds("camelyon17", root) == folder
    assert (folder / "metadata.csv").stat().st_mtime_ns == stamp
    with pytest.raises(FileExistsError, match="seed"):
        fabricate_wilds("camelyon17", root, seed=1)
    (tmp_path / "civilcomments_v1.0").mkdir()  # e.g. a real download, no marker
    with pytest.raises(FileExistsError, match="real"):
        fabricate_wilds("civilcomments", tmp_path)
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_failed_fabrication_leaves_nothing_behind(tmp_path, monkeypatch):
    def write(folder, rng, sizes):
        (folder / "metadata.csv").write_text("half")
        raise RuntimeError("disk full")

    monkeypatch.setitem(FABRICATORS._items, "camelyon17", Fabricator(write, {"n": 1}, {}))
    with pytest.raises(RuntimeError, match="disk full"):
        fabricate_wilds("camelyon17", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_fabricated_folder_is_marked(root):
    assert (root / "camelyon17_v1.0" / "RELEASE_v1.0.txt").is_file()
    assert (root / "civilcomments_v1.0" / MARKER).is_file()


# ---------------------------------------------------------------------------------- bad input
def test_unknown_names_list_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="camelyon17.*civilcomments"):
        load_wilds("waterbirds", tmp_path)
    with pytest.raises(ValueError, match="camelyon17"):
        fabricate_wilds("waterbirds", tmp_path)
    with pytest.raises(ValueError, match="n_train"):
        fabricate_wilds("camelyon17", tmp_path, n_examples=3)
    with pytest.raises(ValueError, match="n_val"):
        fabricate_wilds("camelyon17", tmp_path, n_val=0)


def test_missing_dataset_names_the_path_and_download(tmp_path):
    with pytest.raises(WildsDatasetNotFoundError) as err:
        load_wilds("camelyon17", tmp_path)
    message = str(err.value)
    assert str(tmp_path / "camelyon17_v1.0") in message and "download=True" in message
    assert "GB" in message and isinstance(err.value, FileNotFoundError)
    with pytest.raises(WildsDatasetNotFoundError, match="does not exist"):
        load_wilds("civilcomments", tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_root_must_be_a_directory(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(NotADirectoryError, match="root"):
        load_wilds("camelyon17", a_file)
    with pytest.raises(NotADirectoryError, match="root"):
        fabricate_wilds("camelyon17", a_file)
    with pytest.raises(ValueError, match="root"):
        load_wilds("camelyon17", None)


def test_max_examples_caps_splits_deterministically(root):
    a = load_wilds("camelyon17", root, max_examples=10)
    b = load_wilds("camelyon17", root, max_examples=10)
    c = load_wilds("camelyon17", root, max_examples=10, seed=1)
    assert {s: len(a.splits[s]) for s in a.splits} == {"train": 10, "val": 10, "test": 10, "id_val": 10}
    for split in a.splits:
        assert np.array_equal(a.splits[split].indices, b.splits[split].indices)
        assert np.all(np.diff(a.splits[split].indices) > 0)
    assert not np.array_equal(a.splits["train"].indices, c.splits["train"].indices)
    assert len(load_wilds("camelyon17", root, max_examples=1000).splits["train"]) == 120
    with pytest.raises(ValueError, match="max_examples"):
        load_wilds("camelyon17", root, max_examples=0)


def test_bad_arguments_to_data_methods(camelyon):
    with pytest.raises(ValueError, match="split"):
        camelyon.labels("validation")
    with pytest.raises(ValueError, match="field.*hospital"):
        camelyon.attribute("train", "center")
    with pytest.raises(ValueError, match="y_pred"):
        camelyon.evaluate("test", torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="image"):
        image_transform("civilcomments")
    with pytest.raises(ValueError, match="resolution"):
        image_transform("camelyon17", (32, -1))


def test_official_metrics_need_no_torch_scatter(camelyon, monkeypatch):
    """Grouped metrics run in plain torch (featlib.data.wilds_groups): with torch_scatter made
    unimportable, dataset.eval still scores, and each slide's accuracy (Camelyon17's eval groups by
    slide) is the plain mean over that slide's examples."""
    monkeypatch.setitem(sys.modules, "torch_scatter", None)
    y = camelyon.labels("test")
    pred = y.clone()
    pred[::3] = 1 - pred[::3]
    metrics, _ = camelyon.evaluate("test", pred)
    assert metrics["acc_avg"] == pytest.approx((pred == y).float().mean().item())
    slides = camelyon.attribute("test", "slide")
    for s in slides.unique().tolist():
        members = slides == s
        assert metrics[f"acc_slide:{s}"] == pytest.approx((pred[members] == y[members]).float().mean().item())


def test_rxrx1_transform_standardises_each_channel():
    from PIL import Image

    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8))
    x = image_transform("rxrx1")(image)
    assert x.shape == (3, 40, 40)
    assert torch.allclose(x.mean(dim=(1, 2)), torch.zeros(3), atol=1e-5)
    assert torch.allclose(x.std(dim=(1, 2)), torch.ones(3), atol=1e-4)


def test_wilds_import_skips_the_online_update_check():
    code = ("import sys, threading; from featlib.data.wilds_data import import_wilds; "
            "import_wilds(); print('outdated' in sys.modules, threading.active_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "1"] and "Outdated" not in out.stderr


def test_a_small_split_keeps_its_decoded_images_and_gives_what_a_fresh_read_gives(root):
    """featlib's transform is deterministic, so a small split keeps each example after its first
    read (decoding is most of a small run's time): the kept item equals a fresh read by WILDS, a
    split over the budget keeps nothing, a user's own transform is never kept, and the subset
    pickles (DataLoader workers started by spawn)."""
    import pickle

    from featlib.data import wilds_data

    data = load_wilds("camelyon17", root, resolution=16)
    subset = data.splits["train"]
    assert isinstance(subset, wilds_data.RememberingSubset)
    first = subset[3]
    raw = subset.subset[3]
    assert torch.equal(first[0], raw[0]) and int(first[1]) == int(raw[1]) and torch.equal(first[2], raw[2])
    assert subset[3] is first and len(subset.kept) == 1  # the second read is the kept one
    assert np.array_equal(subset.indices, subset.subset.indices)  # the subset's attributes read through
    again = pickle.loads(pickle.dumps(subset))
    assert torch.equal(again[3][0], first[0])

    tight = wilds_data.RememberingSubset(data.splits["val"].subset, budget_mib=0.001)
    assert torch.equal(tight[0][0], data.splits["val"].subset[0][0]) and tight.kept is None
    own = load_wilds("camelyon17", root, transform=image_transform("camelyon17", 16))
    assert not isinstance(own.splits["train"], wilds_data.RememberingSubset)
