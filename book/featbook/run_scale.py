"""What a run can show: the paper's protocol, a reduced one on the full data, or a small check.

A chapter's "What we see" may only claim what its numbers can carry. Three sizes:

* ``"paper"``: the paper's protocol (its seeds, configurations, data and steps);
* ``"reduced"``: the full data and model at the paper's step counts, with fewer seeds or
  configurations (the ``colab`` profile): the paper's qualitative result should show, with
  wider error bars;
* ``"small"``: fewer images, narrower models, fewer steps (the ``small`` profile of CI and the
  CPU book build): a check that the pipeline runs end to end. Accuracies of such a run sit
  close to chance on the worst environment, and differences between methods of a few points
  are noise; a chapter built from one does not rank methods.

:func:`cmnist_scale`, :func:`saliency_scale`, :func:`wilds_scale` and :func:`cost_scale` classify
a chapter's run from its parameters.
"""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("paper", "reduced", "small")

#: How each size reads in a sentence.
KIND_TEXT = {
    "paper": "the paper's full protocol",
    "reduced": "the full data at the paper's step counts, with fewer seeds and configurations",
    "small": "a small check of the pipeline (fewer images, narrower models, fewer steps)",
}


@dataclass(frozen=True)
class RunScale:
    kind: str
    description: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}; got {self.kind!r}")

    @property
    def summary(self) -> str:
        """"a small check of the pipeline (...): 2 seeds, 2,000 training images, ..."."""
        return f"{KIND_TEXT[self.kind]}: {self.description}"

    @property
    def can_compare_methods(self) -> bool:
        """Whether differences between methods of a few points mean anything in this run."""
        return self.kind != "small"


def describe_cmnist(protocol) -> str:
    """"2 seeds, 2,000 training images, 8 objectives, 2 x 3 configurations, 150 OOD steps, ..."."""
    from featbook import prose

    return (f"{prose.count(len(protocol.seeds), 'seed')}, {prose.integer(protocol.n_train)} training images, "
            f"{prose.count(len(protocol.objectives), 'objective')}, {len(protocol.penalty_weights)} penalty "
            f"weight{'s' if len(protocol.penalty_weights) != 1 else ''} x {len(protocol.pretrain_epochs)} pre-training "
            f"length{'s' if len(protocol.pretrain_epochs) != 1 else ''}, {prose.integer(protocol.ood_steps)} OOD "
            f"steps, hidden width {protocol.hidden_dim}, feature-learning epochs x {prose.number(protocol.epoch_scale, 1)}")


def cmnist_scale(protocols, description: str | None = None) -> RunScale:
    """ColoredMNIST (chapters 03, 04): paper when every protocol has the paper's fields (the
    objectives and learners aside), reduced when data, width, steps and epochs are the
    paper's, small otherwise. ``description`` defaults to :func:`describe_cmnist` of the first.
    A protocol of a named preset (:mod:`.experiments.cmnist_presets`) is judged against that preset."""
    from featlib.experiments.cmnist_presets import DEFAULT_PRESET, preset_of
    from featlib.experiments.colored_mnist import make_protocol

    def reference(p):
        preset = preset_of(p)
        return make_protocol(DEFAULT_PRESET if preset == "custom" else preset, dataset=p.dataset,
                             objectives=p.objectives, learners=p.learners)

    protocols = list(protocols)
    description = description or describe_cmnist(protocols[0])
    if all(p == reference(p) for p in protocols):
        return RunScale("paper", description)
    full_size = all(p.n_train == reference(p).n_train and p.hidden_dim == reference(p).hidden_dim
                    and p.ood_steps == reference(p).ood_steps and p.epoch_scale == reference(p).epoch_scale
                    for p in protocols)
    return RunScale("reduced" if full_size else "small", description)


def saliency_scale(protocol, description: str) -> RunScale:
    """Chapter 06's ColoredMNIST models: the paper's data and epochs, or a small check."""
    from featlib.experiments.saliency_cmnist import SaliencyProtocol

    default = SaliencyProtocol(dataset=protocol.dataset, model=protocol.model)
    if protocol == default:
        return RunScale("paper", description)
    full = protocol.n_train == default.n_train and protocol.epoch_scale == default.epoch_scale
    return RunScale("reduced" if full else "small", description)


def wilds_scale(full_scale: bool, fabricated: bool, description: str) -> RunScale:
    """WILDS (chapter 05): the paper's protocol, real data at a reduced size, or fabricated data."""
    if full_scale:
        return RunScale("paper", description)
    return RunScale("small" if fabricated else "reduced", description)


def cost_scale(paper_sizes: bool, description: str) -> RunScale:
    """Chapter 07: step costs at the paper's sizes (full batch of 50,000 images, DenseNet-121 on
    32 images) or at smaller ones."""
    return RunScale("paper" if paper_sizes else "small", description)
