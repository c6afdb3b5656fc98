import sys, os; sys.path.insert(0, os.path.dirname(__file__))
from nbgen import WILDS_COLAB, code, md, write

cells = [
md(r"""
# Which features do ERM, Bonsai and FeAT use?

*Sec. 6 ("Feature learning analysis"), Fig. 4; Appendix F.4, Figs. 5-12 and Table 13.*

The theory of {doc}`01_erm_feature_learning` says that ERM learns both the invariant and the
spurious feature, and learns the spurious one faster when it correlates more strongly with the
label. The paper then looks inside trained networks. On ColoredMNIST-025 the colour agrees with
the label 85% of the time and the digit's shape only 75%. Its GradCAM figures show ERM leaning
on the colour, "and even forget[ting] certain features with longer training epochs", while FeAT
"effectively captures the meaningful features for all samples".

Saliency maps are easy to over-read, so this chapter measures as well as shows. For each
model, on the same test images:

* the **share of attribution on colour**: how much of the attribution mass falls on the colour
  rather than the digit's shape, averaged over the test images;
* the **colour-swap flip rate**: how many predictions change when the two colours are swapped.
  This is a behavioural check that needs no attribution method;
* the OOD accuracy (the test environment where the colour correlation is reversed).

The paper's ColoredMNIST figure uses a variant of the data in which the colour is a patch in the
upper-left corner and the digit is grey, read by a small CNN (`dataset="cmnist025-patch"`).
Colour then lives in one place, and "how much does the model look at colour" becomes "how much
of its attribution falls in the patch". The attributions are Captum's {cite:p}`kokhlikyan2020captum`
GradCAM {cite:p}`selvaraju2017gradcam` and integrated gradients {cite:p}`sundararajan2017axiomatic`.
"""),
code(WILDS_COLAB),
md(r"""
## Parameters

The defaults are the paper's: ColoredMNIST-025 with the patch shortcut, all 50,000 training
images, ERM snapshots after 150, 300 and 450 full-batch epochs of one run, Bonsai with Table 6's
schedule, and FeAT with 2 rounds of 150 epochs. Then two WILDS datasets (the pair of Table 14),
with chapter 05's protocol and cache, so models that chapter 05 trained are reused.
`wilds_datasets` takes any of the six; `wilds_overrides` sets protocol fields per dataset, for
example `{"civilcomments": {"backbone": "minilm"}}`. `dataset="cmnist025"` runs the
standard two-channel ColoredMNIST with the MLP instead. At full scale one full-batch step of
the CNN holds about 9 GB of tensors (measured on a CPU), so use a GPU with 16 GB, or lower
`n_train`. The `colab` profile keeps the paper's ColoredMNIST study (all 50,000 images, every
epoch count) and leaves out the WILDS part, which reuses chapter 05's models: run chapter 05
first and set `wilds_datasets` to its dataset to explain them.
"""),
code(r"""
dataset = "cmnist025-patch"
model = None                 # None: "cnn" for the patch datasets, "mlp" otherwise
seed = 1
n_train = 50000
n_test = 10000
hidden_dim = 256
erm_epochs = [150, 300, 450]
feat_rounds = 2
epoch_scale = 1.0            # multiplies every epoch count
n_attribution = 1000         # OOD test images whose attributions are averaged
n_show = 6                   # images in the figures
wilds_datasets = ["camelyon17", "civilcomments"]
wilds_methods = ["erm", "bonsai", "ifeat"]   # "ifeat" is the paper's FeAT (Sec. 5); "feat" is Algorithm 1 with every set kept
wilds_root = "data/wilds"
wilds_download = True
wilds_fabricate = False
wilds_overrides: dict = {}   # dataset -> WildsProtocol fields (backbone, scale, seeds, ...)
wilds_examples = 4
cache_dir = "_cache/saliency"
wilds_cache_dir = "_cache/wilds"
progress = True
cache_on_drive = False       # Colab: keep the caches in Google Drive (survives a recycled runtime)
""", tags=["parameters"]),
code(r"""
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from featlib.data.wilds_data import require_local
from featlib.device import describe_device
from featlib.experiments.saliency_cmnist import SaliencyProtocol, SaliencyStudy
from featlib.experiments.saliency_wilds import explain_wilds, plot_wilds_saliency
from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol, protocols_for
from featlib.results import record
from featlib.saliency import plot_gradcam_triples, plot_overlay_grid
from featlib.validation import check_bool, check_int, check_sequence, check_writable

protocol = SaliencyProtocol(dataset=dataset, model=model, seed=seed, n_train=n_train, n_test=n_test,
                            hidden_dim=hidden_dim, erm_epochs=tuple(erm_epochs), feat_rounds=feat_rounds,
                            epoch_scale=epoch_scale, n_attribution=n_attribution)
check_int("n_show", n_show, minimum=1, maximum=n_test)
check_int("wilds_examples", wilds_examples, minimum=1)
check_bool("progress", progress)
check_writable("cache_dir", cache_dir)
check_writable("wilds_cache_dir", wilds_cache_dir)
wilds_protocols = protocols_for(wilds_datasets, wilds_methods, wilds_overrides)  # a misspelt dataset key is refused
if not check_bool("wilds_fabricate", wilds_fabricate) and not check_bool("wilds_download", wilds_download):
    for name in wilds_protocols:
        require_local(name, wilds_root)
""", tags=["validate"]),
code(r"""
from featlib import estimate, prose, runtime, style
from featlib.experiments import saliency_views as views
from featlib.experiments.labels import DATASET_LABELS
from featlib.run_scale import saliency_scale

style.use()
preflight = estimate.saliency(protocol)
for wp in wilds_protocols.values():
    preflight = preflight + estimate.wilds(wp, download=wilds_download and not wilds_fabricate)
runtime.preflight(preflight, profile_hint="the small profile (--profile small)",
                  cache_dirs=[cache_dir, wilds_cache_dir], drive=cache_on_drive)
cache_dir = runtime.cache_location(cache_dir, cache_on_drive)
wilds_cache_dir = runtime.cache_location(wilds_cache_dir, cache_on_drive)
"""),
md(r"""
## ColoredMNIST: training the models

One ERM run, with copies kept after 150, 300 and 450 epochs; Bonsai; and FeAT with 2 rounds.
All use the same data and the same architecture. The trained models are cached under
`cache_dir`, so a rerun only recomputes the attributions.
"""),
code(r"""
study = SaliencyStudy(protocol, cache_dir=cache_dir, progress=progress)
models = study.models()
scale_text = (f"{dataset}, {protocol.architecture.upper()}, {n_train} training images, epochs x {epoch_scale:g}; "
              f"device: {describe_device(study.device)}")
record("scale", scale_text)
record("full_scale", epoch_scale == 1.0 and n_train == 50000)
run = saliency_scale(protocol, scale_text)
print(f"This run: {run.summary}.")
views.history_table(study.history)
"""),
md(r"""
## What the models look at

The paper's triple for each image: the image, the map in grey, and the map over the image. On
the left is ERM after the longest training, on the right FeAT. The images are the first ones of
the OOD test environment, where the colour agrees with the label only 10% of the time.
"""),
code(r"""
kind, images, maps, predictions = study.display_maps(n_show)
names = list(models)
pair = [names[len(erm_epochs) - 1], names[-1]]
views.triples_figure(images, maps, predictions, pair, n_show)
record("map_kind", kind)
plt.show()
""", caption="The paper's triple (image, map in grey, map over the image) for ERM after its longest training (left) and FeAT (right), on the same OOD test images; row labels give the label and the model's prediction. Colour scale: each map scaled to [0, 1], most salient in red.", name="fig-saliency-triples"),
md(r"""
Every model on the same images, ERM at each snapshot, Bonsai and FeAT. Each cell's title is
the model's prediction; the row label is the true label.
"""),
code(r"""
views.overlay_figure(images, maps, predictions)
""", caption="Each model's map over the same OOD test images (columns: ERM snapshots, Bonsai, FeAT); each cell's title is the model's prediction. Colour scale: each map scaled to [0, 1], most salient in red.", name="fig-saliency-all"),
md(r"""
## Measured over the test images

Per model: the accuracies, the colour-swap flip rate, and the mean (and standard deviation)
share of attribution on colour over the first `n_attribution` OOD test images. On the patch
variant, colour means the patch. The integrated-gradients share counts the pixels inside the
5x5 patch; the GradCAM share counts the patch grown by 2 pixels, because GradCAM's coarse 7x7
grid spills over its edge. On the two-channel variant the integrated gradients are split into
a shape part and a colour part. The patch is 25 of 784 pixels (3%), so even a model that reads
only the patch keeps some attribution on the digit: compare the models with each other, not
with 100%.
"""),
code(r"""
table = study.table()
shown = ["model", "epochs", "rounds_kept", "train_acc", "ood_acc", "colour_flip_rate", "colour_share_ig"]
shown += [c for c in ("colour_share_gradcam",) if c in table]
record("colour_share_ig", {r.model: round(r.colour_share_ig, 3) for r in table.itertuples()})
record("colour_flip_rate", {r.model: round(r.colour_flip_rate, 3) for r in table.itertuples()})
record("ood_acc", {r.model: round(r.ood_acc, 3) for r in table.itertuples()})
erm_rows = table[table["model"].str.startswith("ERM")]
record("erm_share_trend", "fell" if erm_rows["colour_share_ig"].iloc[-1] < erm_rows["colour_share_ig"].iloc[0] else "rose")
feat_row, erm_last = table.iloc[-1], erm_rows.iloc[-1]
prose.say("feat_vs_erm_share", f"{prose.percent(feat_row.colour_share_ig)} against {prose.percent(erm_last.colour_share_ig)}")
prose.say("feat_vs_erm_flip", f"{prose.percent(feat_row.colour_flip_rate)} against {prose.percent(erm_last.colour_flip_rate)}")
views.measures_table(table)
"""),
md(r"""
On these images FeAT's share of attribution on colour was {glue:text}`feat_vs_erm_share` for
ERM after its longest training, and a colour swap flipped {glue:text}`feat_vs_erm_flip` of the
predictions (FeAT against ERM):
"""),
code(r"""
views.shares_figure(table)
plt.show()
""", caption="Per model, over the same OOD test images: the mean share of attribution on colour with its standard deviation (top), the share of predictions that a colour swap flips (bottom left), and the OOD accuracy (bottom right).", name="fig-saliency-shares"),
md(r"""
## WILDS: saliency of the learned features

For each dataset in `wilds_datasets`, chapter 05's protocol gives the ERM, Bonsai and FeAT
models (cached in `wilds_cache_dir`, trained here if missing). A few test examples are explained
for each of them. Image datasets get GradCAM of the predicted class on the backbone's last
convolutional block. Text datasets get integrated gradients on the word embeddings, shown as
coloured tokens: green tokens speak for the predicted class and red ones against it. The table
under each dataset lists each example's label and each model's prediction, as the paper's
Table 13 does.
"""),
code(r"""
explained = {}
for name, wp in wilds_protocols.items():
    if wilds_fabricate:
        from featlib.data.wilds_fabricate import fabricate_wilds
        fabricate_wilds(name, wilds_root)
    experiment = WildsExperiment(wp, wilds_root, wilds_cache_dir, download=wilds_download, progress=progress)
    explained[name] = explain_wilds(experiment, wilds_methods, n_examples=wilds_examples)
    display(Markdown(f"**{wp.spec.title}.** {'Fabricated data (CPU build). ' if wilds_fabricate else ''}"
                     f"Backbone: {experiment.backbone_description}."))
    result = explained[name]
    display(views.prediction_table(result, f"{wp.spec.title}: label and each model's prediction"))
    if result.modality == "text":
        display(views.token_figures(result, f"{wp.spec.title}: integrated gradients of each model's predicted class on "
                                            "the word embeddings, one line per model; green tokens speak for the "
                                            "prediction, red ones against it."))
record("wilds_explained", {n: len(r.table) for n, r in explained.items()})
record("wilds_agreement", {n: {m: float((r.table[m] == r.table["label"]).mean()) for m in r.table.columns[2:]}
                           for n, r in explained.items()})
images = {n: r for n, r in explained.items() if r.modality == "image"}
"""),
md(r"""
For the image datasets, GradCAM of each model's predicted class, over the same test images:
"""),
code(r"""
for name, result in images.items():
    figure = plot_wilds_saliency(result)
    figure.suptitle(DATASET_LABELS.get(result.dataset, result.dataset))
    display(figure)
""", caption="WILDS image datasets: each model's GradCAM of its predicted class over the same test examples (rows; the row label is the true label, each cell's title the model's prediction). Colour scale: each map scaled to [0, 1], most salient in red.", name="fig-wilds-saliency"),
md(r"""
## What we see
"""),
code(r"""
text = (f"In this run ({run.summary}), the maps are {kind} maps. On the test images, FeAT's share of attribution on "
        f"colour was {prose.percent(feat_row.colour_share_ig)}, against {prose.percent(erm_last.colour_share_ig)} for ERM "
        f"after its longest training, and a colour swap flipped {prose.percent(feat_row.colour_flip_rate)} of FeAT's "
        f"predictions against {prose.percent(erm_last.colour_flip_rate)} of ERM's.")
if run.kind == "small":
    text += (" At this size (a fraction of the images and epochs) the models are not the paper's: these numbers show "
             "that every piece runs and measures what it says it measures, not which model looks where. The colab "
             "profile or the default parameters train the paper's models.")
else:
    text += (" These models are trained on the paper's data for the paper's epochs, so the comparison is the "
             "paper's: ERM reading the patch, FeAT keeping the digit.")
display(Markdown(text))
""", tags=["remove-input"]),
md(r"""
Read the three measures together ({numref}`fig-saliency-shares`). The flip rate is the most
direct: a model that predicts from colour changes its answer when the colour is swapped. The OOD
accuracy says the same thing from the other side, because the OOD environment reverses the
colour's correlation with the label. The attribution shares depend on the method (GradCAM is
coarse, integrated gradients depend on their baseline, here a black image, against which the
digit's pixels always matter). Where they disagree with the flip rate, trust the flip rate; this
is why the chapter reports several measures rather than one saliency map.

At the paper's scale the paper reports that ERM looks at the shortcut patch and, with longer
training, at little else, while FeAT keeps looking at the digit
({numref}`fig-saliency-triples`, {numref}`fig-saliency-all`). On WILDS the maps come from the
models chapter 05 trained; on the fabricated data of the CPU build they test the pipeline (the
layers, the token attributions of a real text encoder, the predictions table), not the real
datasets.
"""),
]
write(os.path.join(os.path.dirname(__file__), "..", "notebooks", "06_which_features_are_learned.ipynb"), cells)
