"""Chapter 06's saliency study as a full-size study (featlib.experiments.gap_studies: ``saliency``
and the smaller ``saliency-20k/-10k/-5k`` that size it): one row per model of the paper's Fig. 4,
the seed and size on every row, the same numbers as the chapter's own study with the same
protocol, and each size a study of its own key."""
import functools

import torch

from featlib.experiments.gap_studies import STUDIES, saliency, study_key
from featlib.experiments.saliency_cmnist import SaliencyProtocol, SaliencyStudy

TINY = dict(n_train=200, n_test=100, n_attribution=8, epoch_scale=0.01)


def test_one_row_per_model_with_its_seed_size_and_colour_shares(tmp_path):
    rows = saliency(2, torch.device("cpu"), cache_dir=tmp_path / "cmnist", **TINY)
    protocol = SaliencyProtocol(seed=2, **TINY)
    assert list(rows["model"]) == protocol.model_names()
    assert set(rows["seed"]) == {2} and set(rows["n_train"]) == {200} and set(rows["dataset"]) == {"cmnist025-patch"}
    shares = ["colour_share_ig", "colour_share_gradcam"]  # the patch variant: both measures
    assert rows[shares].apply(lambda c: c.between(0, 1)).all().all()
    assert rows["ood_acc"].between(0, 1).all() and rows["colour_flip_rate"].between(0, 1).all()
    # the chapter's study, same protocol, same models from the cache the study wrote
    chapter = SaliencyStudy(protocol, cache_dir=tmp_path / "saliency", device=torch.device("cpu")).table()
    assert chapter["ood_acc"].tolist() == rows["ood_acc"].tolist()


def test_each_size_is_a_study_of_its_own():
    sizes = {name: STUDIES.get(name) for name in ("saliency", "saliency-20k", "saliency-10k", "saliency-5k")}
    assert [isinstance(f, functools.partial) and f.keywords["n_train"] for f in list(sizes.values())[1:]] == [
        20000, 10000, 5000]
    assert len({study_key(name) for name in sizes}) == 4
