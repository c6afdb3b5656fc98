"""Run ERM, Bonsai, FeAT and iFeAT under a :class:`StepRecorder`, round by round (Appendix F.3).

Two cases, registered in :data:`COST_CASES`:

* ``"cmnist"``: the ColoredMNIST learners of chapter 04 (full batch: the batch is the whole
  training set, ``n_train`` images), the MLP of Appendix F.1;
* ``"wilds"``: the WILDS learners of chapter 05 on one dataset and backbone at a fixed
  minibatch size (fabricated data offline, the real data where it is on disk).

Every learner runs the library's own learner (so the measured steps are the ones the book
trains with), ``steps`` steps per round, ``rounds`` rounds for Bonsai (plus its synthesis
round), FeAT and iFeAT, with the termination check switched off (the "never" rule) so that round k
is reached whatever the data. Methods are interleaved within each repeat (ERM, Bonsai, FeAT,
iFeAT, then again), so slow drifts of the machine hit all learners alike.

A finished (case, repeat, learner) measurement is written to ``out/records`` at once; a rerun
with the same settings skips it, so an interrupted benchmark resumes without losing work.
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from ..store.keys import key as store_key
from ..store.files import cached, expect_keys, cached_meta, read_verified_csv, write_verified_csv
from ..device import describe_device, get_device
from ..training.profiling import recording
from ..registry import Registry
from ..validation import check_bool, check_choice, check_fits_in_memory, check_int, check_sequence, check_writable
from .recorder import StepRecorder

#: The termination rule used while benchmarking: no round is discarded, so FeAT and iFeAT run
#: every requested round (featlib.feature_learning.termination).
NO_TERMINATION = "never"


#: Backbones as the prose names them (a page shows "small CNN", not the registry key "small_cnn").
BACKBONE_NAMES = {"densenet121": "DenseNet-121", "resnet50": "ResNet-50", "small_cnn": "small CNN",
                  "distilbert": "DistilBERT", "minilm": "MiniLM"}


@dataclass(frozen=True)
class CostSettings:
    """How much to measure: rounds per learner, steps per round, warm-up and repeats."""

    #: Registered feature learners (:data:`featlib.feature_learning.FEATURE_LEARNERS`); default: every
    #: one, in the tables' order.
    learners: tuple[str, ...] = field(default_factory=lambda: tuple(_registered()))
    rounds: int = 4
    steps: int = 20
    warmup: int = 3
    repeats: int = 3
    memory: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "learners", tuple(check_sequence("learners", self.learners)))
        for m in self.learners:
            check_choice("learners", m, _registered())
        if "erm" not in self.learners:
            raise ValueError(f"learners must include 'erm' (the ratios are to ERM); got {list(self.learners)}")
        check_int("rounds", self.rounds, minimum=1)
        check_int("warmup", self.warmup, minimum=0)
        check_bool("memory", self.memory)
        check_int("steps", self.steps, minimum=self.warmup + (2 if self.memory else 1))
        check_int("repeats", self.repeats, minimum=1)

    def recorder(self) -> StepRecorder:
        return StepRecorder(self.warmup, self.memory)


class CostCase:
    """One benchmark case: how to build the data once and run one learner's learner."""

    name: str
    batch_size: int

    def describe(self) -> str: ...
    def prepare(self, device: torch.device) -> None: ...
    def run(self, learner: str, settings: CostSettings, device: torch.device, scratch: Path) -> None: ...
    def schedule(self, learner: str) -> list[int]:
        """The steps per round a run of ``learner`` trains by the paper's schedule (Bonsai: its
        rounds, then the synthesis; FeAT and iFeAT on ColoredMNIST: the rounds Table 7 keeps and
        the one the termination check trains and rolls back)."""
        ...


COST_CASES: Registry[Callable[..., CostCase]] = Registry("benchmark")


@COST_CASES.register("cmnist")
@dataclass
class CMNISTCost(CostCase):
    """ColoredMNIST learners, full batch (Table 6's schedule for the time estimate)."""

    dataset: str = "cmnist025"
    n_train: int = 50000
    n_test: int = 1000
    hidden_dim: int = 256
    seed: int = 1
    name: str = "cmnist"

    def __post_init__(self) -> None:
        from ..experiments.colored_mnist import check_protocol_dataset

        check_protocol_dataset(self.dataset)
        check_int("n_train", self.n_train, minimum=2, maximum=50000)
        check_int("n_test", self.n_test, minimum=1, maximum=10000)
        check_int("hidden_dim", self.hidden_dim, minimum=1)
        check_fits_in_memory(f"the full-batch step (n_train={self.n_train}, hidden_dim={self.hidden_dim})",
                             2 * self.n_train * self.hidden_dim * 4)  # the two hidden activations, float32
        self._data = None

    @property
    def batch_size(self) -> int:
        return self.n_train

    def describe(self) -> str:
        return (f"ColoredMNIST ({self.dataset}), MLP H={self.hidden_dim}, full batch of {self.n_train} images")

    def prepare(self, device: torch.device) -> None:
        from ..data import make_colored_mnist

        if self._data is None:
            self._data = make_colored_mnist(self.dataset, self.seed, n_train=self.n_train, n_test=self.n_test).to(device)

    def run(self, learner: str, settings: CostSettings, device: torch.device, scratch: Path) -> None:
        from ..feature_learning import FEATURE_LEARNERS

        registered = FEATURE_LEARNERS.get(learner)
        options = {"hidden_dim": self.hidden_dim, **_measured_lengths(registered, settings)}
        registered(self._data, self.seed, **options)

    def schedule(self, learner: str) -> list[int]:
        from ..experiments.colored_mnist import schedule
        from ..experiments.paper_values import FEAT_STOP_ROUND
        from ..feature_learning import FEATURE_LEARNERS
        from ..hparams import APPENDIX_F1

        # a learner of rounds of one length: the rounds kept (Table 7) plus the one the termination
        # check trains and then rolls back (Algorithm 1 checks a round after training it), what a
        # run of the protocol trains; on a dataset the paper did not stop FeAT on, every round
        rounds = FEAT_STOP_ROUND[self.dataset] + 1 if self.dataset in FEAT_STOP_ROUND else APPENDIX_F1["max_rounds"].value
        return [length for _, length in FEATURE_LEARNERS.get(learner).stages(schedule(self.dataset, learner), rounds)]


@COST_CASES.register("wilds")
@dataclass
class WildsCost(CostCase):
    """WILDS learners at a fixed minibatch size on one dataset and backbone (Table 12's schedule
    for the time estimate)."""

    dataset: str = "camelyon17"
    root: str = "_cache/wilds-fabricated"
    fabricate: bool = True
    download: bool = False
    backbone: str = "densenet121"
    pretrained: bool | str = False
    resolution: int | None = 96
    batch_size: int = 32
    max_token_length: int | None = None
    seed: int = 0
    name: str = "wilds"

    def __post_init__(self) -> None:
        from ..experiments.wilds_experiment import WildsProtocol

        check_bool("fabricate", self.fabricate)
        check_bool("download", self.download)
        check_int("batch_size", self.batch_size, minimum=1)
        self.protocol = WildsProtocol(
            dataset=self.dataset, learners=("erm",), backbone=self.backbone, pretrained=self.pretrained,
            batch_size=self.batch_size, resolution=self.resolution, max_token_length=self.max_token_length,
            dfr=False)
        if not self.fabricate and not self.download:
            from ..data.wilds_data import require_local

            require_local(self.dataset, self.root)  # missing real data: stop before measuring anything
        self._experiment = None

    def describe(self) -> str:
        side = f" at {self.resolution}px" if self.resolution and self.protocol.spec.modality == "image" else ""
        return f"WILDS {self.dataset}, {BACKBONE_NAMES.get(self.backbone, self.backbone)}{side}, batch {self.batch_size}"

    def prepare(self, device: torch.device) -> None:
        from ..data.wilds_fabricate import fabricate_wilds
        from ..experiments.wilds_experiment import WildsExperiment

        if self._experiment is None:
            if self.fabricate:
                fabricate_wilds(self.dataset, self.root)
            self._experiment = WildsExperiment(self.protocol, self.root, cache_dir=tempfile.gettempdir(),
                                               download=self.download, device=device)
            self._experiment.data  # noqa: B018  (loads the data and one backbone, outside the clock)

    @property
    def backbone_description(self) -> str:
        return self._experiment.backbone_description if self._experiment else ""

    def run(self, learner: str, settings: CostSettings, device: torch.device, scratch: Path) -> None:
        from ..feature_learning import FEATURE_LEARNERS
        from ..feature_learning.minibatch_loop import MinibatchLoop
        from ..training.minibatch import Checkpoint

        config = dataclasses.replace(
            self.protocol.train_config(), steps_per_round=settings.steps, rounds=settings.rounds,
            erm_steps=settings.steps, termination_rule=NO_TERMINATION, checkpoint_every=10**9)
        loop = MinibatchLoop(data=self._experiment.data, new_model=self._experiment.new_model, config=config,
                             seed=self.seed, checkpoint=Checkpoint(scratch / f"{learner}.pt", every=10**9), device=device)
        FEATURE_LEARNERS.get(learner).on(loop, **config.learner_options(learner))

    def schedule(self, learner: str) -> list[int]:
        from ..feature_learning import FEATURE_LEARNERS

        spec = self.protocol.spec
        per_round = max(1, spec.fl_steps // spec.fl_rounds)
        registered = FEATURE_LEARNERS.get(learner)
        lengths = registered.run_lengths(per_round, spec.fl_rounds, single=spec.erm_steps)
        return [length for _, length in registered.stages(lengths, spec.fl_rounds)]


def _round_labels(stages: list[str]) -> list[str]:
    """Round labels in order of appearance: "1", "2", ... and "synthesis" for Bonsai's last."""
    labels, k = [], 0
    for stage in stages:
        if "synthesis" in stage.lower():
            labels.append("synthesis")
        else:
            k += 1
            labels.append(str(k))
    return labels


def measure(case: CostCase, learner: str, settings: CostSettings, device: torch.device) -> pd.DataFrame:
    """One run of ``learner``: a row per round with the median step time and the peak memory."""
    recorder = settings.recorder()
    with tempfile.TemporaryDirectory() as scratch, recording(recorder):
        start = time.perf_counter()
        case.run(learner, settings, device, Path(scratch))
        wall = time.perf_counter() - start
    stages = list(recorder.stages.values())
    return pd.DataFrame([
        {"learner": learner, "round": label, "stage": m.stage, "steps": m.steps, "timed_steps": len(m.seconds),
         "step_s": m.median_seconds, "peak_bytes": m.peak_bytes, "run_wall_s": wall}
        for label, m in zip(_round_labels([m.stage for m in stages]), stages)
    ])


def _settings_key(case: CostCase, settings: CostSettings, device: torch.device) -> str:
    fields = {f.name: getattr(case, f.name) for f in dataclasses.fields(case)}
    payload = {"case": fields, "settings": dataclasses.asdict(settings), "device": describe_device(device)}
    return store_key(json.loads(json.dumps(payload, default=str)))


def run_cost_benchmark(cases: list[CostCase], settings: CostSettings, *, device: torch.device | None = None,
                       out: str | Path | None = None, progress: bool = True) -> pd.DataFrame:
    """Measure every learner of ``settings`` on every case, ``repeats`` times (learners interleaved).

    Returns one row per (case, repeat, learner, round). With ``out``, each finished measurement
    is kept in ``out/records/`` and reused by a rerun with the same settings and device."""
    device = device or get_device()
    records = None if out is None else check_writable("out", out) / "records"
    jobs = [(case, r, m) for case in cases for r in range(settings.repeats) for m in settings.learners]
    frames = []
    bar = tqdm(jobs, desc="cost benchmark", disable=not progress)
    for case, repeat, learner in bar:
        bar.set_postfix_str(f"{case.name} repeat {repeat + 1} {learner}")
        path = None if records is None else records / f"{case.name}-{_settings_key(case, settings, device)}-r{repeat}-{learner}.csv"

        def measured(case=case, repeat=repeat, learner=learner) -> pd.DataFrame:
            case.prepare(device)
            frame = measure(case, learner, settings, device)
            frame.insert(0, "repeat", repeat)
            frame.insert(0, "benchmark", case.name)
            return frame

        key = _settings_key(case, settings, device)
        meta = cached_meta(key, None, repeat=repeat, learner=learner, device=device.type)
        frames.append(cached(path, _record_reader(case.name, repeat, learner, settings, expect=meta), measured,
                             lambda path, frame, meta=meta: write_verified_csv(path, frame, meta), what="cost record"))
    return pd.concat(frames, ignore_index=True)


def _registered() -> list[str]:
    from ..feature_learning import FEATURE_LEARNERS

    return FEATURE_LEARNERS.table_order()


def _measured_lengths(registered, settings: CostSettings) -> dict:
    """The options of a measured run of the learner ``registered``: ``settings.rounds`` rounds of
    ``settings.steps`` steps each (a learner of one stage: one of ``settings.steps``), none
    discarded by a termination check."""
    options = registered.run_lengths(settings.steps, settings.rounds)
    if "termination_rule" in registered.protocol_fields:
        options["termination_rule"] = NO_TERMINATION
    return options


def expected_rounds(learner: str, settings: CostSettings) -> list[str]:
    """The round labels a measurement of ``learner`` holds, from the schedule it was registered
    with: ERM one, FeAT and iFeAT ``rounds``, Bonsai ``rounds`` and its synthesis."""
    from ..feature_learning import FEATURE_LEARNERS

    registered = FEATURE_LEARNERS.get(learner)
    return [label for label, _ in registered.stages(_measured_lengths(registered, settings), settings.rounds)]


def _record_reader(benchmark: str, repeat: int, learner: str, settings: CostSettings, expect: dict | None = None):
    """Reads a kept measurement back, checking that it holds every round of it once and (``expect``)
    that its record names the settings, repeat and learner it is read for (a record measured with
    other settings and copied under this name is reported and measured again)."""
    check = expect_keys(["benchmark", "repeat", "learner", "round"],
                        [(benchmark, repeat, learner, r) for r in expected_rounds(learner, settings)], allow_nan=True)
    wanted = None if expect is None else {k: expect[k] for k in ("key", "repeat", "learner", "device")}
    return lambda path: read_verified_csv(path, check, dtype={"round": str}, expect=wanted)
