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
`n_train`.
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
wilds_methods = ["erm", "bonsai", "feat"]
wilds_root = "data/wilds"
wilds_download = True
wilds_fabricate = False
wilds_overrides: dict = {}   # dataset -> WildsProtocol fields (backbone, scale, seeds, ...)
wilds_examples = 4
cache_dir = "_cache/saliency"
wilds_cache_dir = "_cache/wilds"
progress = True
""", tags=["parameters"]),
code(r"""
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from featlib.data.wilds_data import require_local
from featlib.device import describe_device
from featlib.experiments.saliency_cmnist import SaliencyProtocol, SaliencyStudy
from featlib.experiments.saliency_wilds import explain_wilds, plot_wilds_saliency
from featlib.experiments.wilds_experiment import WildsExperiment, WildsProtocol
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
if not isinstance(wilds_overrides, dict):
    raise ValueError(f"wilds_overrides must be a dict of dataset -> protocol fields; got {wilds_overrides!r}")
wilds_protocols = {name: WildsProtocol(dataset=name, methods=tuple(wilds_methods), **wilds_overrides.get(name, {}))
                   for name in check_sequence("wilds_datasets", wilds_datasets, min_length=0, unique=True)}
if not check_bool("wilds_fabricate", wilds_fabricate) and not check_bool("wilds_download", wilds_download):
    for name in wilds_protocols:
        require_local(name, wilds_root)
""", tags=["validate"]),
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
print(scale_text)
study.history
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
figure = plt.figure(figsize=(10, 1.7 * n_show + 0.6), layout="constrained")
blocks = figure.subfigures(1, 2)
for block, name in zip(blocks, pair):
    axes = block.subplots(n_show, 3, squeeze=False)
    rows = [f"y={y} pred={p}" for y, p in zip(predictions["label"], predictions[name])]
    plot_gradcam_triples(images, maps[name], row_labels=rows, col_title=name, axes=axes)
record("map_kind", kind)
plt.show()
""", caption="The paper's triple (image, map in grey, map over the image) for ERM after its longest training (left) and FeAT (right), on the same OOD test images; row labels give the label and the model's prediction.", name="fig-saliency-triples"),
md(r"""
Every model on the same images, ERM at each snapshot, Bonsai and FeAT. Each cell's title is
the model's prediction; the row label is the true label.
"""),
code(r"""
titles = {name: [f"pred {p}" for p in predictions[name]] for name in names}
plot_overlay_grid(images, maps, cell_titles=titles, row_labels=[f"label {y}" for y in predictions["label"]])
""", caption="Each model's map over the same OOD test images (columns: ERM snapshots, Bonsai, FeAT).", name="fig-saliency-all"),
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
record("feat_vs_erm_share", f"{feat_row.colour_share_ig:.3f} against {erm_last.colour_share_ig:.3f}")
record("feat_vs_erm_flip", f"{feat_row.colour_flip_rate:.3f} against {erm_last.colour_flip_rate:.3f}")
table[shown].round(3)
"""),
code(r"""
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
measures = [("colour_share_ig", "share of IG on colour")]
if "colour_share_gradcam" in table:
    measures.append(("colour_share_gradcam", "share of GradCAM on colour"))
width = 0.8 / len(measures)
for i, (column, label) in enumerate(measures):
    axes[0].bar([j + i * width for j in range(len(table))], table[column], width, yerr=table[f"{column}_std"],
                label=label, capsize=3)
axes[0].set_xticks([j + width * (len(measures) - 1) / 2 for j in range(len(table))], table["model"], rotation=30, ha="right")
axes[0].set_ylabel("share of attribution on colour")
axes[0].legend(fontsize=8)
axes[1].bar(table["model"], table["colour_flip_rate"], color="tab:red")
axes[1].set_ylabel("predictions flipped by a colour swap")
axes[2].bar(table["model"], table["ood_acc"], color="tab:green")
axes[2].set_ylabel("OOD test accuracy (e = 0.9)")
for ax in axes[1:]:
    ax.tick_params(axis="x", rotation=30)
    for t in ax.get_xticklabels():
        t.set_ha("right")
fig.tight_layout()
plt.show()
""", caption="Per model, over the same OOD test images: the mean share of attribution on colour with its standard deviation (left), the share of predictions that a colour swap flips (middle), and the OOD accuracy (right).", name="fig-saliency-shares"),
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
    display(Markdown(f"### {wp.spec.title}\n\n{'Fabricated data (CPU build). ' if wilds_fabricate else ''}"
                     f"Backbone: {experiment.backbone_description}."))
    result = explained[name]
    display(result.table)
    if result.modality == "image":
        display(plot_wilds_saliency(result))
    else:
        for i in range(len(result.table)):
            display(result.highlighted(i))
record("wilds_explained", {n: len(r.table) for n, r in explained.items()})
record("wilds_agreement", {n: {m: float((r.table[m] == r.table["label"]).mean()) for m in r.table.columns[2:]}
                           for n, r in explained.items()})
"""),
md(r"""
## What we see

In this run ({glue:text}`scale`), the maps are {glue:text}`map_kind` maps
({numref}`fig-saliency-triples`, {numref}`fig-saliency-all`). On the test images, FeAT's share
of attribution on colour was {glue:text}`feat_vs_erm_share` for ERM after its longest training,
and its colour-swap flip rate {glue:text}`feat_vs_erm_flip` ({numref}`fig-saliency-shares`). As
ERM trained longer, its share on colour {glue:text}`erm_share_trend`.

Read the three measures together. The flip rate is the most direct: a model that predicts from
colour changes its answer when the colour is swapped. The OOD accuracy says the same thing from
the other side, because the OOD environment reverses the colour's correlation with the label.
The attribution shares depend on the method (GradCAM is coarse, integrated gradients depend on
their baseline, here a black image, against which the digit's pixels always matter). Where they
disagree with the flip rate, trust the flip rate; this is why the chapter reports several
measures rather than one saliency map.

At the paper's scale (Colab with a GPU and the default parameters), the paper reports that ERM
looks at the shortcut patch and, with longer training, at little else, while FeAT keeps
looking at the digit. In the small CPU build the models are trained for a fifth of the epochs
on 1,000 images, and the numbers above only show that every piece runs and measures what it
says it measures.

On WILDS the maps come from the models chapter 05 trained. On the fabricated data of the CPU
build they test the pipeline: the layers, the token attributions of a real text encoder, and
the predictions table. They are not evidence about the real datasets.
"""),
]
write(os.path.join(os.path.dirname(__file__), "..", "notebooks", "06_which_features_are_learned.ipynb"), cells)
