"""Chapter 06 states its verdict in its own words (featbook.saliency_views.evidence_lead,
evidence_verdict, maps_reading, wilds_check_note), read from the studies' numbers: each branch
on fabricated studies, and the caption of Fig. 6.1 against the committed study it draws."""
import re

import numpy as np
import pandas as pd

from featbook import evidence, leaks, saliency_views as views
from featbook.notebooks import NOTEBOOK_DIR

MODELS = ["ERM 150 epochs", "ERM 300 epochs", "ERM 450 epochs", "Bonsai", "FeAT 2 rounds"]


def study(flips: dict, n_train: int = 2000, cnn: bool = True, seeds=(1, 2, 3)) -> dict:
    """A fabricated study: model -> flip rate per seed (one number: the same in every seed)."""
    rows = []
    for seed in seeds:
        for model in MODELS:
            flip = flips[model][seed - 1] if isinstance(flips[model], (list, tuple)) else flips[model]
            row = {"seed": seed, "model": model, "colour_flip_rate": flip, "colour_share_ig": 0.3,
                   "ood_acc": 0.5, "n_train": n_train, "dataset": "cmnist025-patch" if cnn else "cmnist025"}
            if cnn:
                row["colour_share_gradcam"] = 0.1
            rows.append(row)
    return {"frame": pd.DataFrame(rows), "maps": None, "provenance": {}}


def flips(erm_first, erm_last, feat):
    return {"ERM 150 epochs": erm_first, "ERM 300 epochs": erm_first, "ERM 450 epochs": erm_last,
            "Bonsai": 0.6, "FeAT 2 rounds": feat}


def test_the_lead_names_each_studys_form_size_and_seeds():
    lead = views.evidence_lead({"mlp": study(flips(0.99, 0.92, 0.2), 50000, cnn=False),
                                "cnn": study(flips(0.78, 0.77, 0.5))})
    assert lead == ("Two studies, each over 3\xa0seeds: Table 2's MLP on the two-channel images at 50,000 training "
                    "images (the paper's size) and the paper's CNN on the colour-patch images at 2,000 training "
                    "images (1/25 of the paper's).")
    assert views.evidence_lead({}) == ""


def test_the_verdict_says_forgetting_is_not_shown_when_the_flip_rate_falls_and_counts_feats_seeds():
    forgetting, feat = views.evidence_verdict({"mlp": study(flips(0.99, 0.92, 0.2), 50000, cnn=False),
                                               "cnn": study(flips(0.78, 0.77, 0.5))})
    assert forgetting.startswith("Neither study shows ERM forgetting the digit with longer training: from 150 "
                                 "epochs to 450 epochs of ERM, the colour-swap flip rate goes from 99.0% to 92.0% "
                                 "(the MLP at 50,000 images) and 78.0% to 77.0% (the CNN at 2,000 images)")
    assert feat == ("FeAT leans on colour less than ERM after its longest training: a colour swap flips fewer of its "
                    "predictions in 3 of 3 seeds of the MLP at 50,000 images and in 3 of 3 seeds of the CNN at "
                    "2,000 images.")
    for text in (forgetting, feat):
        assert not leaks.scan_text(text) and "committed" not in text


def test_the_verdict_says_forgetting_is_shown_only_where_the_flip_rate_rises_beyond_the_spread():
    rising = study(flips(0.5, 0.9, 0.2))
    forgetting, _ = views.evidence_verdict({"cnn": rising})
    assert forgetting.startswith("The study shows ERM leaning on colour more with longer training")
    both, _ = views.evidence_verdict({"a": rising, "b": study(flips(0.4, 0.8, 0.2), 50000, cnn=False)})
    assert both.startswith("Both studies show ERM leaning on colour more")
    mixed, _ = views.evidence_verdict({"a": rising, "b": study(flips(0.9, 0.8, 0.2), 50000, cnn=False)})
    assert mixed.startswith("Only some of the studies show")
    one, _ = views.evidence_verdict({"cnn": study(flips(0.9, 0.8, 0.2))})
    assert one.startswith("The study does not show ERM forgetting")


def test_the_verdict_counts_the_seeds_where_feat_does_not_lean_on_colour_less():
    _, feat = views.evidence_verdict({"cnn": study(flips(0.8, 0.8, [0.5, 0.9, 0.5]))})
    assert feat.startswith("FeAT leans on colour less than ERM after its longest training only in some seeds")
    assert "in 2 of 3 seeds of the CNN at 2,000 images" in feat


def test_without_a_study_the_page_says_it_gives_no_verdict():
    forgetting, feat = views.evidence_verdict({})
    assert "gives no verdict" in forgetting and feat == ""


def test_the_reading_of_the_maps_counts_where_each_map_peaks():
    mask = np.zeros((4, 4), bool)
    mask[0, 0] = True
    on, off = np.zeros((4, 4)), np.zeros((4, 4))
    on[0, 0], off[3, 3] = 1.0, 1.0
    maps = {"ERM": np.stack([on, on, off]), "FeAT": np.stack([off, off, off])}
    assert views.peak_on_region(maps["ERM"], mask).tolist() == [True, True, False]
    assert not views.peak_on_region(np.zeros((1, 4, 4)), mask).any()  # an empty map peaks nowhere
    predictions = pd.DataFrame({"label": [0, 1, 0], "ERM": [1, 0, 0], "FeAT": [0, 1, 0]})
    text = views.maps_reading(maps, predictions, ["ERM", "FeAT"], [0, 1, 2], mask)
    assert text.startswith("The brightest point of the map lies on the colour patch rather than on the digit in 2 "
                           "of 3 images for ERM and in 0 of 3 for FeAT: the map of ERM sits on the patch more often "
                           "than that of FeAT.")
    assert text.endswith("the two models disagree on 2 of them.")
    same = views.maps_reading({"ERM": maps["FeAT"], "FeAT": maps["FeAT"]}, predictions, ["ERM", "FeAT"], [0, 1], mask)
    assert "do not differ here in where their maps peak" in same


def test_the_wilds_part_on_fabricated_data_says_it_shows_no_result():
    class Result:
        table = pd.DataFrame({"label": [0, 1, 0]})

    note = views.wilds_check_note({"camelyon17": Result(), "civilcomments": Result()})
    assert "no WILDS data" in note and "3\xa0examples each" in note and "shows no maps" in note
    assert "Camelyon17 and CivilComments" in note and not leaks.scan_text(note)


def test_sizes_are_said_as_shares_of_the_papers_length():
    assert views.share_of_papers(1.0) == "all the paper's epochs"
    assert views.share_of_papers(0.1) == "a tenth of the paper's epochs"
    assert views.share_of_papers(0.3) == "0.3 times the paper's epochs"
    assert views.share_of_papers(0.01, "feature-learning steps", "Table 12's") == (
        "a hundredth of Table 12's feature-learning steps")


def test_the_fold_under_a_table_says_how_the_results_were_made_without_a_count():
    prov = {"command": "x", "runs": [{"command": "a", "commit": "1" * 40}, {"command": "b", "commit": "2" * 40}]}
    block = evidence.made_by("line", prov)
    assert "<summary>How these results were made</summary>" in block
    assert "The 2 commands" in evidence.command_block(prov)  # the command block's own summary counts its commands


def test_the_caption_of_fig_6_1_gives_the_size_of_the_study_it_draws(repo_root):
    from featbook import committed

    studies = views.committed_studies(committed.locate(str(repo_root / "results" / "saliency")))
    with_maps = [f for f in studies.values() if f["maps"] is not None]
    source = (NOTEBOOK_DIR / "06_which_features_are_learned.md").read_text()
    caption = re.search(r"caption: 'GradCAM maps at ([\d,]+) training images \(1/(\d+) of the paper''s\)", source)
    assert caption, "Fig. 6.1's caption starts with its size"
    assert with_maps, "the caption names a committed study with maps"
    title = views.maps_title(with_maps[0], int(with_maps[0]["maps"]["frame"]["seed"].min()))
    assert title.startswith(f"{caption.group(1)} training images, seed 1")
    assert int(caption.group(1).replace(",", "")) * int(caption.group(2)) == views.PAPER_N_TRAIN
