"""Tiny fabricated WILDS datasets in the exact on-disk layout the real ``wilds`` loaders read.

For tests and CI without the real data (protocol.md section 5: data on disk follows the
``wilds`` layout). :func:`fabricate_wilds` writes ``<root>/<version_dir>/`` so that
``wilds.get_dataset(name, root_dir=root, download=False)`` (and
:func:`featlib.data.wilds_data.load_wilds`) load it with the real split structure. Each
fabricated dataset carries

* an *invariant* signal that predicts the label in every split, with label noise, and
* a *spurious* domain signal that is correlated with the label in the training domains only,

so that ERM, the OOD objectives and the feature learners of the paper can behave differently
on it. The numbers are small (a few dozen examples per split); the data say nothing about the
paper's results and are labelled as fabricated (``FABRICATED.json`` next to the RELEASE file).

Writing is atomic (a temporary sibling folder renamed into place once complete, so a
half-written folder is never taken for a dataset) and idempotent (an existing folder written
with the same name, seed and sizes is returned as is). The marker lists every file with its
SHA-256, so a fabricated folder that lost or changed a file (``metadata.csv`` deleted or cut
short) is detected and written again by the next :func:`fabricate_wilds` (``--fabricate``).
"""
from __future__ import annotations

import csv
import datetime
import hashlib
import json
import os
import shutil
import tempfile
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image

from ..store.atomic import atomic_write_text
from ..registry import Registry
from ..store.folders import replace_folder
from ..validation import check_int
from .wilds_data import WILDS_DATASETS

#: Bumped when a fabricator's output changes, so stale folders are not returned as current.
FORMAT_VERSION = 1
MARKER = "FABRICATED.json"


@dataclass(frozen=True)
class Fabricator:
    """Writes one fabricated dataset: ``write(folder, rng, sizes)``; ``sizes`` keyword defaults."""

    write: Callable[[Path, np.random.Generator, dict], None]
    defaults: dict
    minimums: dict


FABRICATORS: Registry[Fabricator] = Registry("fabricated dataset")


def _register(name: str, defaults: dict, minimums: dict):
    def decorator(write):
        FABRICATORS.register(name)(Fabricator(write, dict(defaults), dict(minimums)))
        return write

    return decorator


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------
def _balanced_labels(rng: np.random.Generator, n: int, n_classes: int = 2) -> np.ndarray:
    """``n`` labels as even over the classes as possible, in random order."""
    return rng.permutation(np.arange(n) % n_classes)


def _flip(rng: np.random.Generator, y: np.ndarray, p: float, n_classes: int = 2) -> np.ndarray:
    """``y`` with each entry replaced by a different random class with probability ``p``."""
    flip = rng.random(len(y)) < p
    other = (y + rng.integers(1, n_classes, len(y))) % n_classes
    return np.where(flip, other, y)


def _agree(rng: np.random.Generator, y: np.ndarray, p: float, n_values: int = 2) -> np.ndarray:
    """A spurious attribute equal to ``y % n_values`` with probability ``p``, else random."""
    random = rng.integers(0, n_values, len(y))
    return np.where(rng.random(len(y)) < p, y % n_values, random)


def _agree_binary(rng: np.random.Generator, y: np.ndarray, p: float) -> np.ndarray:
    """A binary attribute equal to the binary ``y`` on exactly ``round(p * n_c)`` of the
    ``n_c`` examples of each class (so p = 0.5 makes it exactly independent of ``y``)."""
    a = 1 - y
    for c in (0, 1):
        idx = rng.permutation(np.flatnonzero(y == c))
        a[idx[: int(round(p * len(idx)))]] = c
    return a


def _disk(img: np.ndarray, cy: float, cx: float, r: float, colour) -> None:
    """Paint a filled disk on an (H, W, 3) float image, in place."""
    h, w, _ = img.shape
    y0, y1 = max(int(cy - r), 0), min(int(cy + r) + 2, h)
    x0, x1 = max(int(cx - r), 0), min(int(cx + r) + 2, w)
    yy, xx = np.mgrid[y0:y1, x0:x1]
    mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    img[y0:y1, x0:x1][mask] = colour


def _save_png(img: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.clip(np.rint(img), 0, 255).astype(np.uint8), "RGB").save(path)


def _textured(rng: np.random.Generator, shape: tuple, base, noise: float = 6.0) -> np.ndarray:
    img = np.empty((*shape, 3))
    img[:] = base
    return img + rng.normal(0.0, noise, img.shape)


# --------------------------------------------------------------------------------------------
# Camelyon17
# --------------------------------------------------------------------------------------------
#: wilds' Camelyon17 numbering: hospital 1 is the OOD validation split, hospital 2 the test split.
CAMELYON_TRAIN_HOSPITALS = (0, 3, 4)
CAMELYON_VAL_HOSPITAL = 1
CAMELYON_TEST_HOSPITAL = 2
#: Each hospital's own H&E stain (the domain signal every hospital carries).
CAMELYON_STAIN = {0: (228, 180, 204), 1: (214, 170, 214), 2: (236, 194, 190),
                  3: (222, 176, 198), 4: (218, 186, 212)}
#: Stain tint added on top: hematoxylin-heavy (bluish) for a=1, eosin-heavy (pink) for a=0.
CAMELYON_TINT = {1: np.array([-26.0, -10.0, 26.0]), 0: np.array([22.0, -4.0, -20.0])}
#: P(tint a == label) per hospital: high in the training hospitals, chance in val / test.
CAMELYON_TINT_AGREEMENT = {0: 0.95, 3: 0.9, 4: 0.85, 1: 0.5, 2: 0.5}
#: Probability that the visible tissue contradicts the recorded label.
CAMELYON_LABEL_NOISE = 0.1
CAMELYON_SIZE = 96
#: Tumour / normal nuclei are drawn only inside this central window (WILDS' label is about the
#: central 32 x 32 region); the border carries only the stain, which the tests read.
CAMELYON_CENTRE = (24, 72)


def camelyon_patch(rng: np.random.Generator, hospital: int, tumour: int, tint: int) -> np.ndarray:
    """One 96 x 96 RGB patch: stain + tint everywhere, dense dark nuclei in the centre if tumour."""
    img = _textured(rng, (CAMELYON_SIZE, CAMELYON_SIZE),
                    np.asarray(CAMELYON_STAIN[hospital]) + CAMELYON_TINT[tint])
    pale = np.asarray(CAMELYON_STAIN[hospital]) * 0.82 + CAMELYON_TINT[tint]
    for _ in range(rng.integers(4, 9)):  # sparse pale lymphocytes anywhere, both classes
        _disk(img, *rng.uniform(3, CAMELYON_SIZE - 3, 2), rng.uniform(1.5, 2.5), pale)
    lo, hi = CAMELYON_CENTRE
    if tumour:
        n, radius, colour = rng.integers(14, 21), (3.0, 5.0), (86, 42, 124)
    else:
        n, radius, colour = rng.integers(2, 5), (1.5, 2.5), (150, 100, 170)
    for _ in range(n):
        r = rng.uniform(*radius)
        cy, cx = rng.uniform(lo + r, hi - r - 1, 2)
        _disk(img, cy, cx, r, np.asarray(colour) + rng.normal(0, 8, 3))
    return img


def _camelyon_rows(sizes: dict) -> list[tuple[int, int, int]]:
    """(hospital, csv split code, count) blocks: train (0) and id_val (1) in the training
    hospitals; the val / test hospitals with split 0 (the loader reassigns them by hospital)."""
    blocks = []
    for part, code in (("n_train", 0), ("n_id_val", 1)):
        per, extra = divmod(sizes[part], len(CAMELYON_TRAIN_HOSPITALS))
        for i, h in enumerate(CAMELYON_TRAIN_HOSPITALS):
            blocks.append((h, code, per + (i < extra)))
    blocks.append((CAMELYON_VAL_HOSPITAL, 0, sizes["n_val"]))
    blocks.append((CAMELYON_TEST_HOSPITAL, 0, sizes["n_test"]))
    return blocks


@_register("camelyon17", defaults={"n_train": 120, "n_id_val": 24, "n_val": 40, "n_test": 40},
           minimums={"n_train": 6, "n_id_val": 6, "n_val": 2, "n_test": 2})
def _write_camelyon17(folder: Path, rng: np.random.Generator, sizes: dict) -> None:
    """``metadata.csv`` (patient, node, x_coord, y_coord, tumor, slide, center, split) and
    ``patches/patient_<p>_node_<n>/patch_patient_<p>_node_<n>_x_<x>_y_<y>.png``."""
    rows, counter = [], {h: 0 for h in CAMELYON_STAIN}
    for hospital, code, n in _camelyon_rows(sizes):
        y = _balanced_labels(rng, n)
        tissue = _flip(rng, y, CAMELYON_LABEL_NOISE)
        tint = _agree_binary(rng, y, CAMELYON_TINT_AGREEMENT[hospital])
        for i in range(n):
            k = counter[hospital]
            counter[hospital] += 1
            patient, node = 2 * hospital + k % 2, (k // 2) % 5
            slide = 10 * hospital + 5 * (k % 2) + node
            x, yc = 96 * (k // 10), 96 * (k % 10)
            pid = f"{patient:03d}"
            path = (folder / "patches" / f"patient_{pid}_node_{node}"
                    / f"patch_patient_{pid}_node_{node}_x_{x}_y_{yc}.png")
            _save_png(camelyon_patch(rng, hospital, int(tissue[i]), int(tint[i])), path)
            rows.append({"patient": pid, "node": node, "x_coord": x, "y_coord": yc,
                         "tumor": int(y[i]), "slide": slide, "center": hospital, "split": code,
                         "stain_tint": int(tint[i])})
    pd.DataFrame(rows).to_csv(folder / "metadata.csv")


# --------------------------------------------------------------------------------------------
# CivilComments
# --------------------------------------------------------------------------------------------
CIVIL_IDENTITY_TERMS = {
    "male": ("men", "man"), "female": ("women", "woman"),
    "LGBTQ": ("gay", "lesbian", "transgender"), "christian": ("christian", "christians"),
    "muslim": ("muslim", "muslims"), "other_religions": ("jewish", "hindu", "buddhist"),
    "black": ("black",), "white": ("white",),
}
CIVIL_AUXILIARY = ("identity_any", "severe_toxicity", "obscene", "threat", "insult",
                   "identity_attack", "sexual_explicit")
CIVIL_TOXIC_WORDS = ("stupid", "idiot", "pathetic", "moron", "disgusting", "worthless", "loser",
                     "trash", "ignorant", "dumb")
CIVIL_CIVIL_WORDS = ("thoughtful", "interesting", "helpful", "reasonable", "insightful", "fair",
                     "kind", "thanks", "agree", "sensible")
CIVIL_FILLER = ("the", "article", "policy", "city", "council", "vote", "people", "comment",
                "budget", "election", "school", "tax", "plan", "week", "report", "about", "this")
CIVIL_LABEL_NOISE = 0.1


def _civil_train_counts(n: int) -> list[tuple[str | None, int, int]]:
    """(identity or None, label, count) for train: identity mentions over-represented among
    toxic comments (per identity twice as many toxic as non-toxic, few toxic comments without
    an identity), the spurious correlation of the real dataset."""
    k = len(CIVIL_IDENTITY_TERMS)
    toxic, civil = max(1, round(0.32 * n / k)), max(1, round(0.16 * n / k))
    rest = max(n - k * (toxic + civil), 2)
    plain_toxic = max(1, round(0.15 * rest))
    blocks = [(i, y, c) for i in CIVIL_IDENTITY_TERMS for y, c in ((1, toxic), (0, civil))]
    return blocks + [(None, 1, plain_toxic), (None, 0, rest - plain_toxic)]


def _civil_eval_counts(n: int) -> list[tuple[str | None, int, int]]:
    """(identity or None, label, count) for val / test: identity independent of toxicity, and
    every identity x label group present (the worst-group metric counts empty groups as 0)."""
    per = max(1, n // 30)
    rest = max(n - 2 * len(CIVIL_IDENTITY_TERMS) * per, 2)
    blocks = [(i, y, per) for i in CIVIL_IDENTITY_TERMS for y in (0, 1)]
    return blocks + [(None, 1, rest // 2), (None, 0, rest - rest // 2)]


def civil_comment(rng: np.random.Generator, toxic_text: int, identity: str | None) -> str:
    """Filler words + two toxic or two civil words (the invariant signal) + an identity term."""
    words = list(rng.choice(CIVIL_FILLER, size=rng.integers(4, 8)))
    words += list(rng.choice(CIVIL_TOXIC_WORDS if toxic_text else CIVIL_CIVIL_WORDS, 2, replace=False))
    if identity is not None:
        words.append(str(rng.choice(CIVIL_IDENTITY_TERMS[identity])))
    return " ".join(str(w) for w in rng.permutation(words))


def _civil_row(rng: np.random.Generator, split: str, identity: str | None, y: int) -> dict:
    toxic_text = int(_flip(rng, np.array([y]), CIVIL_LABEL_NOISE)[0])
    toxicity = rng.uniform(0.5, 1.0) if y else rng.uniform(0.0, 0.45)
    row = {"comment_text": civil_comment(rng, toxic_text, identity), "split": split,
           "toxicity": round(float(toxicity), 4)}
    for name in CIVIL_IDENTITY_TERMS:
        row[name] = float(rng.choice([0.6, 0.8, 1.0])) if name == identity else 0.0
    row.update({aux: 0.0 for aux in CIVIL_AUXILIARY})
    row["identity_any"] = 1.0 if identity is not None else 0.0
    row["insult"] = row["toxicity"] if y else 0.0
    row["identity_attack"] = row["toxicity"] if (y and identity is not None) else 0.0
    return row


@_register("civilcomments", defaults={"n_train": 150, "n_val": 60, "n_test": 60},
           minimums={"n_train": 24, "n_val": 18, "n_test": 18})
def _write_civilcomments(folder: Path, rng: np.random.Generator, sizes: dict) -> None:
    """``all_data_with_identities.csv``: comment_text, split, toxicity, 8 identity columns and
    the 7 auxiliary columns the loader reads."""
    rows = []
    for split, counts in (("train", _civil_train_counts(sizes["n_train"])),
                          ("val", _civil_eval_counts(sizes["n_val"])),
                          ("test", _civil_eval_counts(sizes["n_test"]))):
        block = [(identity, y) for identity, y, c in counts for _ in range(c)]
        for j in rng.permutation(len(block)):
            rows.append(_civil_row(rng, split, *block[j]))
    frame = pd.DataFrame(rows)
    frame.insert(0, "id", np.arange(len(frame)) + 1_000_000)
    frame.to_csv(folder / "all_data_with_identities.csv")


# --------------------------------------------------------------------------------------------
# FMoW
# --------------------------------------------------------------------------------------------
#: A few FMoW categories (indices into wilds' ``categories``: 62 classes in all).
FMOW_CATEGORIES = ("airport", "airport_hangar", "airport_terminal", "amusement_park")
#: Two countries per region, with the region names of wilds' ``country_code_mapping.csv``.
FMOW_COUNTRIES = {"Africa": ("NGA", "KEN"), "Americas": ("USA", "BRA"), "Asia": ("CHN", "IND"),
                  "Europe": ("FRA", "DEU"), "Oceania": ("AUS", "NZL")}
#: Ground colour of each region (the spurious domain signal).
FMOW_GROUND = {"Africa": (196, 160, 110), "Americas": (96, 140, 80), "Asia": (150, 150, 150),
               "Europe": (120, 150, 120), "Oceania": (200, 190, 150)}
#: P(region == the category's home region) in the training years; chance afterwards.
FMOW_REGION_AGREEMENT = 0.8
FMOW_LABEL_NOISE = 0.1
FMOW_SIZE = 224
#: (size keyword, csv split, first year, last year): wilds splits by split column x timestamp
#: (official scheme: OOD test from 2016, OOD val 2013-2015, the rest in-distribution).
FMOW_BLOCKS = (("n_train", "train", 2002, 2012), ("n_id_val", "val", 2002, 2012),
               ("n_id_test", "test", 2002, 2012), ("n_val", "val", 2013, 2015),
               ("n_test", "test", 2016, 2017))


def _blocky(rng: np.random.Generator, size: int, base, noise: float, block: int = 8) -> np.ndarray:
    """A smooth-ish field texture: coarse noise blown up by ``block`` (compresses well as PNG)."""
    coarse = rng.normal(0.0, noise, (size // block, size // block, 3))
    return np.asarray(base, dtype=float) + np.kron(coarse, np.ones((block, block, 1)))


def fmow_image(rng: np.random.Generator, category: int, region: str) -> np.ndarray:
    """224 x 224 RGB: the region's ground colour; a bright structure whose shape is the class."""
    img = _blocky(rng, FMOW_SIZE, FMOW_GROUND[region], 10.0)
    c, bright = FMOW_SIZE // 2 + rng.integers(-20, 21, 2), np.array([235.0, 235.0, 235.0])
    if category == 0:  # runway: one long bar
        img[c[0] - 8:c[0] + 8, 30:194] = bright
    elif category == 1:  # hangars: a row of squares
        for k in range(3):
            img[c[0] - 15:c[0] + 15, 40 + 55 * k:70 + 55 * k] = bright
    elif category == 2:  # terminal: a ring
        _disk(img, c[0], c[1], 45, bright)
        _disk(img, c[0], c[1], 30, FMOW_GROUND[region])
    else:  # amusement park: scattered discs
        for cy, cx in rng.uniform(40, 184, (7, 2)):
            _disk(img, cy, cx, 10, bright)
    return img


def _fmow_timestamp(rng: np.random.Generator, first: int, last: int) -> str:
    day = datetime.date(int(rng.integers(first, last + 1)), 1, 1) + datetime.timedelta(
        days=int(rng.integers(0, 365)))
    return f"{day.isoformat()}T{int(rng.integers(0, 24)):02d}:{int(rng.integers(0, 60)):02d}:00Z"


@_register("fmow", defaults={"n_train": 100, "n_id_val": 20, "n_id_test": 20, "n_val": 40,
                             "n_test": 40},
           minimums={"n_train": 4, "n_id_val": 1, "n_id_test": 1, "n_val": 1, "n_test": 1})
def _write_fmow(folder: Path, rng: np.random.Generator, sizes: dict) -> None:
    """``rgb_metadata.csv`` (split, category, country_code, timestamp, ...),
    ``country_code_mapping.csv`` (alpha-3, region) and ``images/rgb_img_<row>.png``; two
    sequestered (``seq``) rows without images, which the loader drops."""
    regions = list(FMOW_COUNTRIES)
    rows = []
    for key, split, first, last in FMOW_BLOCKS:
        y = _balanced_labels(rng, sizes[key], len(FMOW_CATEGORIES))
        shown = _flip(rng, y, FMOW_LABEL_NOISE, len(FMOW_CATEGORIES))
        agreement = FMOW_REGION_AGREEMENT if last < 2013 else 0.0  # ID years follow train
        region_idx = _agree(rng, y, agreement, len(regions))
        for i in range(len(y)):
            region = regions[region_idx[i]]
            row = {"split": split, "category": FMOW_CATEGORIES[y[i]],
                   "country_code": str(rng.choice(FMOW_COUNTRIES[region])),
                   "timestamp": _fmow_timestamp(rng, first, last)}
            row["img_filename"] = f"rgb_img_{len(rows)}.png"
            _save_png(fmow_image(rng, int(shown[i]), region), folder / "images" / row["img_filename"])
            rows.append(row)
        if key == "n_train":  # sequestered rows sit among the others in the real file
            for _ in range(2):
                rows.append({"split": "seq", "category": FMOW_CATEGORIES[0], "country_code": "USA",
                             "timestamp": _fmow_timestamp(rng, 2010, 2012),
                             "img_filename": f"rgb_img_{len(rows)}.png"})
    pd.DataFrame(rows).to_csv(folder / "rgb_metadata.csv", index=False)
    mapping = [{"name": code, "alpha-3": code, "region": region}
               for region, codes in FMOW_COUNTRIES.items() for code in codes]
    pd.DataFrame(mapping).to_csv(folder / "country_code_mapping.csv", index=False)


# --------------------------------------------------------------------------------------------
# iWildCam
# --------------------------------------------------------------------------------------------
IWILDCAM_N_SPECIES = 4
#: Camera-trap locations: training (also id_val / id_test), OOD val and OOD test ones.
IWILDCAM_LOCATIONS = {"train": (0, 1, 2, 3, 4, 5), "val": (6, 7), "test": (8, 9)}
#: P(species == the location's usual species) at training locations; chance elsewhere.
IWILDCAM_LOCATION_AGREEMENT = 0.85
IWILDCAM_LABEL_NOISE = 0.1
IWILDCAM_SHAPE = (96, 128)  # height, width: non-square like the camera frames


def iwildcam_image(rng: np.random.Generator, species: int, location: int) -> np.ndarray:
    """A 128 x 96 frame: the location's background (colour, horizon), a dark animal silhouette
    whose shape is the species."""
    loc_rng = np.random.default_rng(1000 + location)  # each location looks the same every time
    sky, ground = loc_rng.uniform(60, 220, 3), loc_rng.uniform(40, 180, 3)
    horizon = int(loc_rng.integers(25, 60))
    h, w = IWILDCAM_SHAPE
    img = np.empty((h, w, 3))
    img[:horizon], img[horizon:] = sky, ground
    img += rng.normal(0, 6, img.shape)
    cy, cx, dark = rng.integers(50, 75), rng.integers(30, 98), np.array([25.0, 22.0, 20.0])
    if species == 0:  # tall narrow body
        img[cy - 22:cy + 12, cx - 5:cx + 5] = dark
    elif species == 1:  # long low body
        img[cy - 6:cy + 6, cx - 24:cx + 24] = dark
    elif species == 2:  # round body
        _disk(img, cy, cx, 13, dark)
    else:  # body on four legs
        img[cy - 10:cy, cx - 16:cx + 16] = dark
        for dx in (-14, -6, 6, 14):
            img[cy:cy + 14, cx + dx:cx + dx + 3] = dark
    return img


@_register("iwildcam", defaults={"n_train": 120, "n_id_val": 24, "n_id_test": 24, "n_val": 32,
                                 "n_test": 32},
           minimums={"n_train": 6, "n_id_val": 1, "n_id_test": 1, "n_val": 2, "n_test": 2})
def _write_iwildcam(folder: Path, rng: np.random.Generator, sizes: dict) -> None:
    """``metadata.csv`` (split, filename, y, location_remapped, sequence_remapped, datetime,
    ...) and JPEG frames under ``train/`` (where wilds reads every split's images)."""
    rows = []
    for key, split, locations in (("n_train", "train", "train"), ("n_id_val", "id_val", "train"),
                                  ("n_id_test", "id_test", "train"), ("n_val", "val", "val"),
                                  ("n_test", "test", "test")):
        n, locs = sizes[key], IWILDCAM_LOCATIONS[locations]
        location = np.asarray(locs)[np.arange(n) % len(locs)]
        usual = location % IWILDCAM_N_SPECIES
        if locations == "train":
            y = _agree(rng, usual, IWILDCAM_LOCATION_AGREEMENT, IWILDCAM_N_SPECIES)
        else:
            y = _balanced_labels(rng, n, IWILDCAM_N_SPECIES)
        if split == "train":
            y[:IWILDCAM_N_SPECIES] = np.arange(IWILDCAM_N_SPECIES)  # every species occurs
        shown = _flip(rng, y, IWILDCAM_LABEL_NOISE, IWILDCAM_N_SPECIES)
        for i in range(n):
            filename = f"{len(rows):08d}.jpg"
            img = iwildcam_image(rng, int(shown[i]), int(location[i]))
            (folder / "train").mkdir(exist_ok=True)
            Image.fromarray(np.clip(np.rint(img), 0, 255).astype(np.uint8), "RGB").save(
                folder / "train" / filename, quality=90)
            stamp = datetime.datetime(2013, 1, 1) + datetime.timedelta(minutes=int(rng.integers(0, 10**6)))
            rows.append({"split": split, "location_remapped": int(location[i]),
                         "location": 100 + int(location[i]), "sequence_remapped": len(rows) // 2,
                         "y": int(y[i]), "filename": filename,
                         "datetime": stamp.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]})
    frame = pd.DataFrame(rows)
    frame["sequence_remapped"] = pd.factorize(frame["sequence_remapped"])[0]
    frame.to_csv(folder / "metadata.csv", index=False)


# --------------------------------------------------------------------------------------------
# RxRx1
# --------------------------------------------------------------------------------------------
RXRX1_N_SIRNAS = 4
RXRX1_EXPERIMENTS = {"train": ("HEPG2-01", "HEPG2-02", "HUVEC-01", "HUVEC-02", "RPE-01", "U2OS-01"),
                     "val": ("HEPG2-08", "HUVEC-17"), "test": ("HEPG2-09", "U2OS-05")}
#: P(siRNA == the experiment's over-represented siRNA) in training experiments; chance elsewhere.
RXRX1_EXPERIMENT_AGREEMENT = 0.7
RXRX1_LABEL_NOISE = 0.1
RXRX1_SIZE = 256


def rxrx1_image(rng: np.random.Generator, sirna: int, experiment: str) -> np.ndarray:
    """A 256 x 256 3-channel fluorescence image: the experiment's batch effect (per-channel gain
    and offset) on cells whose morphology (nucleus size, count) is the siRNA."""
    batch = np.random.default_rng(zlib.crc32(experiment.encode()))
    gain, offset = batch.uniform(0.6, 1.4, 3), batch.uniform(0, 40, 3)
    img = _blocky(rng, RXRX1_SIZE, 8.0, 3.0, block=4)
    n_cells, radius = (6, 9), (10.0, 14.0)
    if sirna == 1:
        radius = (16.0, 22.0)
    elif sirna == 2:
        n_cells = (14, 18)
    elif sirna == 3:
        n_cells, radius = (3, 5), (5.0, 7.0)
    for _ in range(rng.integers(*n_cells)):
        cy, cx = rng.uniform(24, RXRX1_SIZE - 24, 2)
        r = rng.uniform(*radius)
        _disk(img, cy, cx, r * 1.6, (20.0, 120.0, 40.0))   # cytoplasm (green channel)
        _disk(img, cy, cx, r, (40.0, 60.0, 200.0))          # nucleus (blue channel)
    return img * gain + offset


def _rxrx1_blocks(sizes: dict) -> list[tuple[str, str, int, int]]:
    """(experiment, dataset column, site, count) blocks: training experiments' site 1 is the
    train split and site 2 id_test; val / test experiments contribute both sites."""
    parts = [("n_train", [(e, "train", 1) for e in RXRX1_EXPERIMENTS["train"]]),
             ("n_id_test", [(e, "train", 2) for e in RXRX1_EXPERIMENTS["train"]])]
    parts += [(f"n_{d}", [(e, d, s) for e in RXRX1_EXPERIMENTS[d] for s in (1, 2)])
              for d in ("val", "test")]
    blocks = []
    for key, group in parts:
        per, extra = divmod(sizes[key], len(group))
        blocks += [(*b, per + (i < extra)) for i, b in enumerate(group)]
    return blocks


def _rxrx1_labels(rng: np.random.Generator, experiment: str, dataset: str, n: int) -> np.ndarray:
    if dataset != "train":
        return _balanced_labels(rng, n, RXRX1_N_SIRNAS)
    home = RXRX1_EXPERIMENTS["train"].index(experiment) % RXRX1_N_SIRNAS
    return _agree(rng, np.full(n, home), RXRX1_EXPERIMENT_AGREEMENT, RXRX1_N_SIRNAS)


@_register("rxrx1", defaults={"n_train": 72, "n_id_test": 24, "n_val": 32, "n_test": 32},
           minimums={"n_train": 4 * len(RXRX1_EXPERIMENTS["train"]), "n_id_test": 1, "n_val": 4,
                     "n_test": 4})
def _write_rxrx1(folder: Path, rng: np.random.Generator, sizes: dict) -> None:
    """``metadata.csv`` (cell_type, dataset, experiment, plate, well, site, sirna_id, ...) and
    ``images/<experiment>/Plate<plate>/<well>_s<site>.png``."""
    rows = []
    for b, (experiment, dataset, site, n) in enumerate(_rxrx1_blocks(sizes)):
        y = _rxrx1_labels(rng, experiment, dataset, n)
        if b == 0:
            y[:RXRX1_N_SIRNAS] = np.arange(RXRX1_N_SIRNAS)  # every siRNA occurs
        shown = _flip(rng, y, RXRX1_LABEL_NOISE, RXRX1_N_SIRNAS)
        for i in range(n):
            plate, well = 1 + i % 2, f"{'BCDEFG'[i // 2 % 6]}{2 + i // 12:02d}"
            _save_png(rxrx1_image(rng, int(shown[i]), experiment),
                      folder / "images" / experiment / f"Plate{plate}" / f"{well}_s{site}.png")
            rows.append({"site_id": f"{experiment}_{plate}_{well}_{site}",
                         "well_id": f"{experiment}_{plate}_{well}",
                         "cell_type": experiment.split("-")[0], "dataset": dataset,
                         "experiment": experiment, "plate": plate, "well": well, "site": site,
                         "well_type": "treatment", "sirna": f"s{int(y[i]):05d}",
                         "sirna_id": int(y[i])})
    pd.DataFrame(rows).to_csv(folder / "metadata.csv", index=False)


# --------------------------------------------------------------------------------------------
# Amazon
# --------------------------------------------------------------------------------------------
#: Star rating k+1 -> sentiment words (the invariant signal).
AMAZON_SENTIMENT = (("terrible", "awful", "broken"), ("poor", "disappointing", "flimsy"),
                    ("okay", "average", "decent"), ("good", "nice", "solid"),
                    ("excellent", "perfect", "amazing"))
#: Each reviewer's habitual sign-off (style word); training reviewers mostly give the rating of
#: their style word's index (the spurious, reviewer-specific signal).
AMAZON_STYLE = ("cheers", "regards", "anyway", "honestly", "basically")
AMAZON_FILLER = ("this", "product", "item", "arrived", "the", "price", "quality", "works", "box",
                 "bought", "it", "for", "my", "use", "daily")
AMAZON_USER_AGREEMENT = 0.7
AMAZON_LABEL_NOISE = 0.1
#: Split codes of ``splits/user.csv`` (AmazonDataset.initialize_split_dicts).
AMAZON_SPLITS = {"train": 0, "val": 1, "id_val": 2, "test": 3, "id_test": 4}


def amazon_review(rng: np.random.Generator, stars_shown: int, style: int) -> str:
    words = list(rng.choice(AMAZON_FILLER, size=rng.integers(4, 8)))
    words += list(rng.choice(AMAZON_SENTIMENT[stars_shown - 1], 2, replace=False))
    return " ".join(str(w) for w in rng.permutation(words)) + f" {AMAZON_STYLE[style]}"


def _amazon_blocks(sizes: dict) -> list[tuple[str, str, int, bool, int]]:
    """(reviewer, split, style, biased, count) blocks: training reviewers write the train,
    id_val and id_test reviews and mostly rate by their style; new reviewers (OOD val, test)
    have a style too but rate independently of it."""
    blocks = []
    for u in range(sizes["n_train_users"]):
        user, style = f"ATRAIN{u:04d}", u % len(AMAZON_STYLE)
        blocks += [(user, "train", style, True, sizes["n_per_user"]),
                   (user, "id_val", style, True, sizes["n_id_per_user"]),
                   (user, "id_test", style, True, sizes["n_id_per_user"])]
    for split in ("val", "test"):
        for u in range(sizes[f"n_{split}_users"]):
            blocks.append((f"A{split.upper()}{u:04d}", split, u % len(AMAZON_STYLE), False,
                           sizes["n_per_user_eval"]))
    return blocks


def _amazon_row(rng: np.random.Generator, user: str, stars: int, shown: int, style: int) -> dict:
    when = datetime.date(2012, 1, 1) + datetime.timedelta(days=int(rng.integers(0, 2000)))
    unix = datetime.datetime(when.year, when.month, when.day, tzinfo=datetime.timezone.utc)
    return {"reviewerID": user, "asin": f"B{int(rng.integers(0, 40)):09d}",
            "reviewTime": f"{when.month:02d} {when.day}, {when.year}",
            "unixReviewTime": int(unix.timestamp()), "reviewText": amazon_review(rng, shown, style),
            "summary": AMAZON_SENTIMENT[shown - 1][0], "verified": bool(rng.random() < 0.8),
            "category": "Home_and_Kitchen", "reviewYear": when.year, "overall": float(stars)}


@_register("amazon", defaults={"n_train_users": 10, "n_per_user": 12, "n_id_per_user": 2,
                               "n_val_users": 4, "n_test_users": 4, "n_per_user_eval": 8},
           minimums={"n_train_users": 1, "n_per_user": 5, "n_id_per_user": 1, "n_val_users": 1,
                     "n_test_users": 1, "n_per_user_eval": 1})
def _write_amazon(folder: Path, rng: np.random.Generator, sizes: dict) -> None:
    """``reviews.csv`` (QUOTE_NONNUMERIC, the columns and dtypes the loader reads) and
    ``splits/user.csv`` (one split code per review)."""
    rows, codes = [], []
    for user, split, style, biased, n in _amazon_blocks(sizes):
        if biased:
            stars = _agree(rng, np.full(n, style), AMAZON_USER_AGREEMENT, 5) + 1
            if split == "train":
                stars[:5] = np.arange(1, 6)  # every rating occurs
        else:
            stars = _balanced_labels(rng, n, 5) + 1
        shown = _flip(rng, stars - 1, AMAZON_LABEL_NOISE, 5) + 1
        for i in range(n):
            rows.append(_amazon_row(rng, user, int(stars[i]), int(shown[i]), style))
            codes.append(AMAZON_SPLITS[split])
    pd.DataFrame(rows).to_csv(folder / "reviews.csv", index=False, quoting=csv.QUOTE_NONNUMERIC)
    (folder / "splits").mkdir()
    pd.DataFrame({"split": codes}).to_csv(folder / "splits" / "user.csv", index=False)


# --------------------------------------------------------------------------------------------
# The entry point
# --------------------------------------------------------------------------------------------
def _check_sizes(name: str, fabricator: Fabricator, sizes: dict) -> dict:
    unknown = sorted(set(sizes) - set(fabricator.defaults))
    if unknown:
        raise ValueError(
            f"unknown size keyword(s) {', '.join(map(repr, unknown))} for {name!r}; valid: "
            f"{', '.join(map(repr, fabricator.defaults))}"
        )
    full = {**fabricator.defaults, **sizes}
    return {k: check_int(k, v, minimum=fabricator.minimums.get(k, 1)) for k, v in full.items()}


def _check_root(root: Any) -> Path:
    if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
        raise ValueError(f"root must be a directory path (str or pathlib.Path); got {root!r}")
    path = Path(os.fspath(root)).expanduser()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"root must be a directory; {path} is a file")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _read_marker(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None


def _file_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but the marker, by path relative to it."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MARKER}


def damage(folder: Path, files: dict | None) -> str | None:
    """What is wrong with a fabricated folder, judged by its marker's list of files; None if
    nothing is."""
    if not isinstance(files, dict):
        return "it was fabricated by an older featlib, without the list of its files"
    found = _file_digests(folder)
    missing = sorted(set(files) - set(found))
    if missing:
        return f"{len(missing)} of its files are missing ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
    changed = sorted(name for name, digest in files.items() if found[name] != digest)
    if changed:
        return f"{len(changed)} of its files were changed ({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})"
    return None


def _existing(target: Path, marker: dict) -> Path | None:
    """``target`` if it was fabricated with ``marker`` and is intact; None if it was fabricated
    with ``marker`` but is damaged (reported; the caller writes it again); FileExistsError for
    any other folder, which is never touched."""
    found = _read_marker(target)
    if isinstance(found, dict) and {k: v for k, v in found.items() if k != "files"} == marker:
        problem = damage(target, found.get("files"))
        if problem is None:
            return target
        warnings.warn(f"{target}: {problem}; fabricating it again", UserWarning, stacklevel=3)
        return None
    what = "a real (or foreign) dataset" if found is None else f"a fabricated dataset with {found}"
    raise FileExistsError(
        f"{target} already holds {what}, not one fabricated with {marker}; delete it or pick "
        "another root"
    )


def _write_release(folder: Path, version_dir: str, marker: dict) -> None:
    version = version_dir.rsplit("_v", 1)[1]
    # (the folder is the fabrication's temporary sibling, renamed into place once complete)
    atomic_write_text(folder / f"RELEASE_v{version}.txt",
                      f"Fabricated by featlib.data.wilds_fabricate (not the real {marker['name']} data).\n")
    record = {**marker, "files": _file_digests(folder)}
    atomic_write_text(folder / MARKER, json.dumps(record, indent=1, sort_keys=True) + "\n")


def fabricate_wilds(name: str, root: str | os.PathLike, *, seed: int = 0, **sizes: int) -> Path:
    """Write a tiny fabricated ``name`` dataset under ``<root>/<version_dir>`` and return it.

    ``name`` is a key of :data:`FABRICATORS`; ``sizes`` override the per-split example counts
    (see ``FABRICATORS.get(name).defaults``). Deterministic in ``seed``; atomic (written to a
    temporary sibling, then renamed); idempotent (an existing folder fabricated with the same
    name, seed and sizes is returned when its files are intact, and written again when one is
    missing or changed; any other existing folder raises FileExistsError).
    """
    fabricator = FABRICATORS.get(name)
    spec = WILDS_DATASETS.get(name)
    seed = check_int("seed", seed, minimum=0)
    sizes = _check_sizes(name, fabricator, sizes)
    root = _check_root(root)
    marker = {"name": name, "seed": seed, "sizes": sizes, "format": FORMAT_VERSION}
    target = root / spec.version_dir
    repair = False
    if target.exists():
        if _existing(target, marker) is not None:
            return target
        repair = True
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.version_dir}.", suffix=".partial", dir=root))
    try:
        fabricator.write(tmp, np.random.default_rng(seed), sizes)
        _write_release(tmp, spec.version_dir, marker)
        if repair:  # swap the fresh folder in for the damaged one
            replace_folder(tmp, target)
            return target
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished first
            if not target.exists():
                raise
            if _existing(target, marker) is None:
                replace_folder(tmp, target)
            return target
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
