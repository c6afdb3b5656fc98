"""Chapter 06's study: the ColoredMNIST models and their colour measures, and WILDS explanations."""
import numpy as np
import pytest
import torch

from featlib.data.wilds_fabricate import fabricate_wilds
from featlib.experiments.saliency_cmnist import SaliencyProtocol, SaliencyStudy
from featlib.experiments.labels import LEARNER_LABELS
from featlib.experiments.saliency_wilds import explain_wilds, pick_examples
from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol
from featbook.saliency_views import wilds_overlay_figure


class ReadsColourOnly(torch.nn.Module):
    """Logit = red mass - green mass of the whole image (the patch, or the digit's channel)."""

    def __init__(self, image_shape):
        super().__init__()
        self.image_shape = image_shape
        self.scale = torch.nn.Parameter(torch.tensor(5.0))

    def forward(self, x):
        img = x.reshape(len(x), *self.image_shape)
        return self.scale * (img[:, 0] - img[:, 1]).flatten(1).sum(1)


class ReadsShapeOnly(ReadsColourOnly):
    def forward(self, x):
        img = x.reshape(len(x), *self.image_shape)
        return self.scale * (img[:, :2].sum(1)[:, 8:20, 8:20].flatten(1).mean(1) - 0.3)


@pytest.fixture(scope="module")
def patch_study(tmp_path_factory):
    protocol = SaliencyProtocol(n_train=400, n_test=200, hidden_dim=16, erm_epochs=(4, 8), feat_rounds=2,
                                epoch_scale=1.0, n_attribution=40, ig_steps=8)
    # tiny Table 6 schedules for Bonsai and FeAT: 150 epochs x 0.02 = 3
    protocol = SaliencyProtocol(**{**protocol.__dict__, "epoch_scale": 0.02, "erm_epochs": (200, 400)})
    return SaliencyStudy(protocol, cache_dir=tmp_path_factory.mktemp("saliency"), device=torch.device("cpu"))


def test_protocol_picks_the_cnn_for_the_patch_data_and_checks_its_parameters():
    assert SaliencyProtocol().architecture == "cnn"
    assert SaliencyProtocol(dataset="cmnist025").architecture == "mlp"
    # a model is named by the epochs it trained: at epoch_scale 0.2, ERM's 150 epochs are 30
    assert SaliencyProtocol(epoch_scale=0.2).model_names()[:3] == ["ERM 30 epochs", "ERM 60 epochs", "ERM 90 epochs"]
    assert SaliencyProtocol().model_names() == ["ERM 150 epochs", "ERM 300 epochs", "ERM 450 epochs", "Bonsai",
                                                 "FeAT 2 rounds"]
    for kwargs, message in [({"dataset": "mnist"}, "dataset must be one of"), ({"model": "vit"}, "model must be one of"),
                            ({"erm_epochs": (150, -1)}, "erm_epochs must be an integer in [1, inf]; got -1"),
                            ({"n_attribution": 20000}, "n_attribution must be an integer in [1, 10000]")]:
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            SaliencyProtocol(**kwargs)


def test_the_study_trains_every_model_scores_it_and_reloads_it_from_the_cache(patch_study):
    models = patch_study.models()
    assert list(models) == ["ERM 4 epochs", "ERM 8 epochs", "Bonsai", "FeAT 2 rounds"]  # 200 and 400 x 0.02
    table = patch_study.table()
    assert table["model"].tolist() == list(models)
    for column in ("colour_share_ig", "colour_share_gradcam", "colour_flip_rate", "ood_acc", "train_acc"):
        assert table[column].between(0, 1).all(), column
    assert table["epochs"].tolist()[:2] == [4, 8]
    kind, images, maps, predictions = patch_study.display_maps(3)
    assert kind == "GradCAM" and images.shape == (3, 3, 28, 28)
    assert all(m.shape == (3, 28, 28) for m in maps.values())
    assert set(predictions.columns) == {"label", "colour", *models}
    again = SaliencyStudy(patch_study.protocol, cache_dir=patch_study.dir.parent, device=torch.device("cpu"))
    for name, model in again.models().items():
        for a, b in zip(model.parameters(), models[name].parameters()):
            assert torch.equal(a, b)


def test_a_lost_part_is_the_only_one_trained_again_and_equals_the_one_it_replaces(patch_study, monkeypatch):
    """The study keeps ERM's snapshots, Bonsai and FeAT as separate parts: a run stopped in FeAT's
    rounds (hours at 50,000 images on a CPU) keeps the models it finished."""
    models = patch_study.models()
    assert sorted(p.name for p in patch_study.dir.glob("*.pt")) == ["bonsai.pt", "erm.pt", "feat.pt"]
    (patch_study.dir / "bonsai.pt").unlink()
    again = SaliencyStudy(patch_study.protocol, cache_dir=patch_study.dir.parent, device=torch.device("cpu"))
    trained = []
    for part in ("erm", "bonsai", "feat"):
        original = getattr(again, f"_train_{part}")
        monkeypatch.setattr(again, f"_train_{part}", lambda original=original, part=part: (trained.append(part),
                                                                                          original())[1])
    reloaded = again.models()
    assert trained == ["bonsai"] and list(reloaded) == list(models)
    assert again.history["model"].tolist() == list(models)
    for name, model in reloaded.items():
        for a, b in zip(model.parameters(), models[name].parameters()):
            assert torch.equal(a, b), name
    # a part made for another seed is refused and trained again, never read as this seed's
    other = SaliencyProtocol(**{**patch_study.protocol.__dict__, "seed": 2})
    moved = SaliencyStudy(other, cache_dir=patch_study.dir.parent, device=torch.device("cpu"))
    moved.dir.mkdir(parents=True, exist_ok=True)
    (moved.dir / "feat.pt").write_bytes((patch_study.dir / "feat.pt").read_bytes())
    with pytest.warns(UserWarning, match="feat.pt"):
        moved.parts = lambda: {"feat": moved._train_feat}
        moved.models()


@pytest.mark.parametrize("dataset", ["cmnist025-patch", "cmnist025"])
def test_colour_measures_separate_a_colour_reader_from_a_shape_reader(patch_study, dataset):
    study = patch_study if dataset.endswith("patch") else SaliencyStudy(
        SaliencyProtocol(dataset=dataset, n_train=100, n_test=200, n_attribution=40, ig_steps=16),
        device=torch.device("cpu"))
    shape = study.data.image_shape
    x = study.examples()
    colour_model, shape_model = ReadsColourOnly(shape), ReadsShapeOnly(shape)
    assert study.colour_flip_rate(colour_model, x, shape) == 1.0
    assert study.colour_flip_rate(shape_model, x, shape) == 0.0
    colour, plain = study.colour_shares(colour_model, x), study.colour_shares(shape_model, x)
    assert colour["colour_share_ig"].mean() > 0.95
    assert plain["colour_share_ig"].mean() < 0.05


def test_wilds_explanations_for_an_image_dataset(tmp_path):
    root = tmp_path / "wilds"
    fabricate_wilds("camelyon17", root)
    protocol = WildsProtocol(dataset="camelyon17", learners=("erm", "ifeat"), seeds=(0,), backbone="small_cnn",
                             pretrained=False, epoch_scale=0.0005, batch_size=8, resolution=32, ood_epochs=1, dfr=False)
    experiment = WildsExperiment(protocol, root, tmp_path / "cache", device=torch.device("cpu"))
    result = explain_wilds(experiment, ("erm", "ifeat"), n_examples=3)
    assert result.modality == "image" and result.images.shape == (3, 3, 32, 32)
    assert result.images.min() >= 0 and result.images.max() <= 1
    assert {m: v.shape for m, v in result.maps.items()} == {"erm": (3, 32, 32), "ifeat": (3, 32, 32)}
    assert result.table.columns.tolist() == ["example", "label", LEARNER_LABELS["erm"], LEARNER_LABELS["ifeat"]]
    assert len(wilds_overlay_figure(result).axes) == 3 * 3 + 1  # + the colour bar
    with pytest.raises(ValueError, match="learners must be one of"):
        explain_wilds(experiment, ("erm", "rfc"))
    with pytest.raises(ValueError, match="split must be one of"):
        explain_wilds(experiment, ("erm",), split="train_ood")


def test_pick_examples_is_seeded_and_sorted():
    a = pick_examples(100, 5, seed=3)
    assert np.array_equal(a, pick_examples(100, 5, seed=3)) and np.all(np.diff(a) > 0)
    assert len(pick_examples(3, 10, seed=0)) == 3


def test_text_explanations_show_as_one_captioned_figure_of_coloured_tokens():
    import pandas as pd

    from featbook.saliency_views import highlighted_example, token_figures
    from featlib.experiments.saliency_wilds import WildsSaliency

    erm, ifeat = LEARNER_LABELS["erm"], LEARNER_LABELS["ifeat"]
    table = pd.DataFrame({"example": [3, 7], "label": [0, 1], erm: [0, 0], ifeat: [1, 1]})
    result = WildsSaliency("civilcomments", "text", "test", ["erm", "ifeat"], table, tokens=[["good", "##ly"], ["bad"]],
                           scores={"erm": [np.array([1.0, -1.0]), np.array([0.5])],
                                   "ifeat": [np.array([0.0, 2.0]), np.array([-0.5])]})
    one = highlighted_example(result, 1).html
    assert one.count("token-attributions") == 2 and f"{ifeat}: 1" in one and "bad" in one and "good" not in one
    shown = token_figures(result, "CivilComments <test>").html
    assert shown.count("token-attributions") == 4 and "token-scale" in shown and "CivilComments &lt;test&gt;" in shown
    # in a notebook cell whose figure options give the caption: no figure (and no caption) of its own
    block = token_figures(result, title="CivilComments (fabricated data), this run").html
    assert "<figure" not in block and "<figcaption" not in block and block.count("token-attributions") == 4
    assert "CivilComments (fabricated data), this run" in block


def test_chapter_06_names_its_own_run_and_its_size_in_captions_and_titles():
    import matplotlib.pyplot as plt
    import pandas as pd

    from featbook import saliency_views as views
    from featlib.experiments.saliency_cmnist import SaliencyProtocol
    from featlib.experiments.wilds_experiment import WildsProtocol

    size = views.run_size(SaliencyProtocol(n_train=1000, epoch_scale=0.1))
    assert size == "1,000 training images, a tenth of the paper's epochs"
    frame = pd.DataFrame({"model": ["ERM 45 epochs", "FeAT 2 rounds"], "epochs": [45, 30], "rounds_kept": [1, 2],
                          "train_acc": [0.8, 0.7], "ood_acc": [0.2, 0.3], "colour_flip_rate": [0.99, 0.95],
                          "colour_share_ig": [0.2, 0.1], "colour_share_ig_std": [0.01, 0.02]})
    assert views.measures_table(frame, size).caption.startswith("This run (1,000 training images, a tenth of the paper's epochs)")
    assert views.history_table(frame[["model", "epochs"]], size).caption == (
        "The models of this run (1,000 training images, a tenth of the paper's epochs)")
    figure = views.shares_figure(frame, title=f"This run: {size}")
    assert figure.get_suptitle() == "This run: 1,000 training images, a tenth of the paper's epochs"
    label = views.wilds_run_label("Camelyon17 (fabricated data)", "Small CNN (4 conv layers, 64 features), random "
                                  "initialisation", WildsProtocol("camelyon17", seeds=(3,), epoch_scale=0.00001))
    assert label.startswith("Camelyon17 (fabricated data), this run (Small CNN, 1.0\u00a0×\u00a010⁻⁵ times Table 12's "
                            "feature-learning steps")
    assert label.endswith("seed 3)") and "e-05" not in label
    plt.close(figure)
    grid = views.overlay_figure(np.zeros((2, 3, 8, 8)), {"ERM": np.ones((2, 8, 8))},
                                pd.DataFrame({"label": [0, 1], "ERM": [0, 1]}), title=label + ", " + label)
    assert "\n" in grid.get_suptitle() and grid.get_size_inches()[0] <= 6.5  # wrapped: never wider than the column


def test_the_triples_of_both_models_sit_on_the_same_rows_at_the_same_size_with_the_bar_inside_the_figure():
    """Fig. 6.x sets ERM's triples beside FeAT's: the colour bar has a column of its own, so it takes
    no room from FeAT's cells (it once shrank and shifted them), and its label is not cut off."""
    import matplotlib
    import matplotlib.pyplot as plt
    import pandas as pd
    from featbook.saliency_views import triples_figure

    matplotlib.use("Agg")
    rng, n = np.random.default_rng(0), 3
    maps = {"ERM 450 epochs": rng.random((n, 28, 28)), "FeAT 2 rounds": rng.random((n, 28, 28))}
    predictions = pd.DataFrame({"label": [1, 0, 1], "ERM 450 epochs": [0, 1, 0], "FeAT 2 rounds": [1, 0, 1]})
    figure = triples_figure(rng.random((n, 3, 28, 28)), maps, predictions, list(maps), n, title="This run")
    figure.canvas.draw()
    boxes = [[a.get_window_extent() for a in block.axes] for block in figure.subfigs[:2]]
    assert all(len(b) == 3 * n for b in boxes)
    for left, right in zip(*boxes):
        assert (left.width, left.height, left.y0) == pytest.approx((right.width, right.height, right.y0), abs=0.5)
    bar = figure.subfigs[2].axes[0]
    label = bar.yaxis.label.get_window_extent()
    canvas = figure.bbox
    assert label.x1 <= canvas.x1 and label.y0 >= canvas.y0 and label.y1 <= canvas.y1
    assert bar.get_window_extent().x0 > max(b.x1 for b in boxes[1])
    plt.close(figure)
