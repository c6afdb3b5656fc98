"""Protocol presets: the paper's text, the FeAT authors' run_exp.py, the Bonsai authors' ERM-NF sweep."""
import pytest

from featlib.experiments.cmnist_presets import PROTOCOL_PRESETS, preset_of
from featlib.experiments.colored_mnist import make_protocol
from featlib.experiments.colored_mnist import CMNISTProtocol


def test_the_default_protocol_is_the_featlib_preset():
    assert preset_of(CMNISTProtocol()) == "featlib"
    assert make_protocol() == CMNISTProtocol()


def test_reference_preset_sets_the_reference_codes_choices():
    p = make_protocol("reference", dataset="cmnist01", seeds=(1, 2))
    assert preset_of(p) == "reference" and p.dataset == "cmnist01" and p.seeds == (1, 2)
    erm, fishr, clove, irm = (p.ood_config(o) for o in ("erm", "fishr", "clove", "irmv1"))
    assert (erm.steps, erm.objective_kwargs) == (501, {"risk_reduction": "mean"})
    assert (fishr.l2_scope, clove.l2_scope, irm.l2_scope) == ("featurizer", "none", "all")
    assert irm.steps == 501 and irm.warmup_penalty_weight == 1.0


def test_rfc_preset_is_the_bonsai_authors_sweep():
    p = make_protocol("rfc-erm-nf")
    assert (p.hidden_dim, p.lr, p.l2, p.ood_steps) == (390, 5e-4, 0.0011, 1001)
    assert p.penalty_weights == (1e3, 5e3, 1e4, 5e4, 1e5) and p.pretrain_epochs == (0, 50, 100, 150, 200, 250)
    assert preset_of(p) == "rfc-erm-nf"


def test_a_changed_field_is_custom_and_presets_change_the_ood_key_only():
    assert preset_of(make_protocol("reference", ood_steps=1000)) == "custom"
    base, ref = CMNISTProtocol(), make_protocol("reference")
    assert base.key(CMNISTProtocol.FEATURE_FIELDS) == ref.key(CMNISTProtocol.FEATURE_FIELDS)
    assert base.key(CMNISTProtocol.OOD_FIELDS) != ref.key(CMNISTProtocol.OOD_FIELDS)


def test_bad_names_and_options_are_refused():
    with pytest.raises(ValueError, match="preset must be one of 'featlib', 'reference', 'rfc-erm-nf'; got 'rfc'"):
        make_protocol("rfc")
    with pytest.raises(ValueError, match="objective must be one of"):
        CMNISTProtocol(objective_options={"irm": {}})
    with pytest.raises(ValueError, match="l2_scope must be one of"):
        CMNISTProtocol(objective_options={"fishr": {"l2_scope": "head"}})
    with pytest.raises(ValueError, match="objective_options\\['vrex'\\] holds an option vrex does not take"):
        CMNISTProtocol(objective_options={"vrex": {"ib_weight": 1.0}})
    with pytest.raises(ValueError, match="warmup_penalty_weight must be a finite number >= 0"):
        CMNISTProtocol(warmup_penalty_weight=-1.0)
    assert list(PROTOCOL_PRESETS) == ["featlib", "reference", "rfc-erm-nf"]


def test_a_preset_runs_end_to_end_and_its_options_reach_the_ood_stage(monkeypatch):
    """The reference preset at a tiny size, each objective's OODStageConfig as train_stack sees it."""
    import featlib.experiments.colored_mnist as cm
    from featlib.experiments.colored_mnist import ColoredMNISTExperiment

    seen = {}
    real = cm.train_stack

    def spy(runs, envs, config, *args, **kwargs):
        seen.setdefault(config.objective, set()).add((config.steps, config.l2_scope, config.warmup_penalty_weight,
                                                      tuple(sorted(config.objective_kwargs.items()))))
        return real(runs, envs, config, *args, **kwargs)

    monkeypatch.setattr(cm, "train_stack", spy)
    options = {"erm": {"risk_reduction": "mean", "steps": 4}, "fishr": {"l2_scope": "featurizer"},
               "clove": {"l2_scope": "none"}}
    p = make_protocol("reference", seeds=(1,), learners=("erm-nf", "erm"), objectives=("erm", "fishr", "clove"),
                      penalty_weights=(10.0,), pretrain_epochs=(0, 2), ood_steps=6, nf_ood_steps=7, hidden_dim=8,
                      n_train=200, n_test=100, epoch_scale=0.02, objective_options=options)
    rows = ColoredMNISTExperiment(p, progress=False).run()
    assert len(rows) == 2 * (1 + 2 + 2)
    assert rows["worst_test_acc"].between(0, 1).all()
    # ERM-NF trains nf_ood_steps (7), the frozen-feature columns ood_steps (6); an objective's own steps win
    assert seen == {"erm": {(4, "all", 1.0, (("risk_reduction", "mean"),))},
                    "fishr": {(6, "featurizer", 1.0, ()), (7, "featurizer", 1.0, ())},
                    "clove": {(6, "none", 1.0, ()), (7, "none", 1.0, ())}}


def test_run_cmnist_takes_the_preset_precision_and_path(tmp_path):
    from featlib.cli.run_cmnist import parse_args, prepare

    args = parse_args(["--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--datasets", "cmnist01",
                       "--seeds", "1", "2", "--preset", "reference", "--precision", "bf16", "--ood-path", "plain"])
    (protocol,) = prepare(args)
    assert preset_of(protocol) == "reference" and protocol.seeds == (1, 2)
    assert (protocol.precision, protocol.ood_path) == ("bf16", "plain")
    (default,) = prepare(parse_args(["--out", str(tmp_path / "o2"), "--cache-dir", str(tmp_path / "c2"),
                                     "--datasets", "cmnist025"]))
    assert preset_of(default) == "featlib" and (default.precision, default.ood_path) == ("fp32", "fast")
