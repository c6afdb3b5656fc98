"""Named presets of the ColoredMNIST protocol: the paper's text, and the reference code where it differs.

Appendix F.1 gives the model (it says "4-Layer MLP" with 256 hidden units; the network it runs,
the reference code's, is Linear-ReLU-Linear-ReLU-Linear: two hidden layers and a linear head), the optimiser (Adam, lr 1e-3,
weight decay 1e-3), the penalty weights {1e1, ..., 1e5} and the ERM pre-training lengths
{0, 50, ..., 250}, and says that the objectives are the Bonsai authors' implementations
(Zhang et al., 2022, TjuJianyu/RFC). It does not give the number of OOD-stage steps, how ERM's
risk is averaged, or what happens during pre-training. The code the paper points to settles some
of that, and disagrees with the text elsewhere. A preset is a named set of
:class:`~featlib.experiments.colored_mnist.CMNISTProtocol` fields (this module sits below the
protocol and does not import it; :func:`~featlib.experiments.colored_mnist.make_protocol` builds
one from a preset):

* ``"featlib"`` (the default): Appendix F.1's values, 2,500 OOD steps for every objective on frozen
  features (measured: ``hparams.APPENDIX_F1['ood_steps']``) and 1,000 for ERM-NF, the
  penalty at weight 0 during pre-training, Eq. (2)'s summed risks for ERM as for the penalised
  objectives, and the L2 term on every trained tensor.
* ``"reference"``: the FeAT authors' ``run_exp.py`` (built on the Bonsai authors' ``train.py``)
  where it differs: ERM as ``erm_train`` (the pooled mean of the losses, 501 steps: the IRM
  paper's ERM baseline), the penalty at weight 1 during pre-training (``anneal_val``), Fishr's L2
  on the featurizer only (none on a frozen head), CLOvE's L2 nowhere (computed, never added).
* ``"rfc-erm-nf"``: the Bonsai authors' ERM-NF sweep
  (``scripts/coloredmnist/coloredmnist_anneal.sh``, ColoredMNIST-025): the reference code's
  objectives with hidden width 390, lr 5e-4, L2 0.0011, 1,001 steps in all with the penalty
  switched on at the pre-training length, and penalty weights {1e3, 5e3, 1e4, 5e4, 1e5}. It is
  meant for the ERM-NF column; with it, every feature learner uses those widths and rates too.

The values of both presets live with the paper's in :mod:`featlib.hparams` (``REFERENCE_CODE``,
``RFC_ERM_NF``), each with the file it comes from. :func:`~featlib.experiments.colored_mnist.make_protocol` builds a protocol from a preset and fields that override it;
:func:`preset_of` names the preset a protocol follows (or ``"custom"``), which the chapters print
beside their tables.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from ..hparams import REFERENCE_CODE, RFC_ERM_NF, values
from ..registry import Registry

#: Fields a preset may set: how runs are trained, not which runs (dataset, seeds, sizes...).
PRESET_FIELDS = ("hidden_dim", "lr", "l2", "ood_steps", "nf_ood_steps", "penalty_weights", "pretrain_epochs",
                 "warmup_penalty_weight", "objective_options")


@dataclass(frozen=True)
class ProtocolPreset:
    """A named set of protocol fields, with where it comes from."""

    name: str
    description: str
    source: str
    values: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.values) - set(PRESET_FIELDS)
        if unknown:
            raise ValueError(f"a preset sets only {', '.join(PRESET_FIELDS)}; {self.name!r} sets {sorted(unknown)}")

    def resolved(self, protocol_type: type) -> dict:
        """Every field of :data:`PRESET_FIELDS`: the preset's value, else the default of
        ``protocol_type`` (:class:`~featlib.experiments.colored_mnist.CMNISTProtocol`)."""
        defaults = {f.name: (f.default if f.default_factory is MISSING else f.default_factory())
                    for f in fields(protocol_type) if f.name in PRESET_FIELDS}
        return defaults | self.values


#: The reference code's per-objective choices (FeAT / Bonsai authors' ColoredMNIST ``train.py``).
REFERENCE_OBJECTIVE_OPTIONS = REFERENCE_CODE["objective_options"].value

PROTOCOL_PRESETS: Registry[ProtocolPreset] = Registry("preset")
PROTOCOL_PRESETS.register("featlib")(ProtocolPreset(
    "featlib", "Appendix F.1's values but CLOvE's penalty weights on ColoredMNIST-01, 1 to 100 (the Bonsai authors' "
               "script; measured); 2,500 OOD steps on frozen features, 1,000 for ERM-NF (measured); penalty off during "
               "pre-training; "
               "Eq. (2)'s summed risks; L2 on every trained tensor",
    "the paper (Appendix F.1) and our choices where it is silent"))
PROTOCOL_PRESETS.register("reference")(ProtocolPreset(
    "reference", "the FeAT authors' run_exp.py: 501 OOD steps, ERM as the pooled mean (501 steps), penalty weight 1 "
                 "during pre-training, Fishr's L2 on the featurizer only, CLOvE without L2",
    "LFhase/FeAT ColoredMNIST/run_exp.py and train.py (= TjuJianyu/RFC coloredmnist/train.py)",
    values(REFERENCE_CODE)))
PROTOCOL_PRESETS.register("rfc-erm-nf")(ProtocolPreset(
    "rfc-erm-nf", "the Bonsai authors' ERM-NF sweep: width 390, lr 5 × 10⁻⁴, L2 0.0011, 1,001 steps, penalty "
                  "weight 1 during pre-training, penalty weights 10³, 5 × 10³, 10⁴, 5 × 10⁴ and 10⁵",
    "TjuJianyu/RFC scripts/coloredmnist/coloredmnist_anneal.sh",
    values(RFC_ERM_NF)))

DEFAULT_PRESET = "featlib"

#: Sizes of the protocol (``--size`` of the ColoredMNIST commands): fields over a preset's, which
#: change how much is run, not how a run is trained.
#:
#: * ``"full"``: the paper's (Appendix F.1): 50,000 training images, width 256, the preset's OOD steps.
#: * ``"reduced"``: 2,000 training images, 1,000 test images and width 64; the paper's objectives,
#:   configurations (5 penalty weights x 6 pre-training lengths), OOD steps and Table 6's epochs.
#:   The size at which a 2-core CPU carries the whole protocol, the ERM-NF column included: an
#:   ERM-NF stack of 30 runs took 20-150 s there (IGA the slowest), so 3 seeds of both datasets
#:   are about an hour. There the OOD stage's paths and precisions are compared at table level
#:   (:mod:`featlib.experiments.path_comparison`). At 5,000 images and width 256 an ERM-NF stack
#:   is estimated at about 20 minutes (``featbook.estimate``): about 19 hours per 3 seeds.
#: * ``"small"``: chapter 04's small profile (notebooks/profiles/small.yaml): 2,000 training
#:   images, width 64, 150 OOD steps (ERM-NF's too), 2 x 3 configurations; minutes on a CPU.
SIZES = {
    "full": {},
    "reduced": {"n_train": 2000, "n_test": 1000, "n_val": 1000, "hidden_dim": 64},
    "small": {"n_train": 2000, "n_test": 1000, "n_val": 1000, "hidden_dim": 64, "ood_steps": 150, "nf_ood_steps": 150,
              "epoch_scale": 0.3,
              "penalty_weights": (1e2, 1e4), "pretrain_epochs": (0, 50, 100), "max_rounds": 4},
}


def preset_of(protocol) -> str:
    """The name of the preset whose every field ``protocol`` (a
    :class:`~featlib.experiments.colored_mnist.CMNISTProtocol`) has, or ``"custom"``."""
    for name in PROTOCOL_PRESETS:
        if all(_same(getattr(protocol, f), v) for f, v in PROTOCOL_PRESETS.get(name).resolved(type(protocol)).items()):
            return name
    return "custom"


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b
