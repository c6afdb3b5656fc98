"""Feature learning alone, at full data size: the per-round data behind Table 7 and the stop rounds.

    python -m featlib.cli.run_rounds --out results/cmnist-rounds \\
        [--datasets cmnist025 cmnist01] [--learners ifeat feat] [--seeds 1 2 3 4 5] \\
        [--cache-dir _cache/cmnist] [--termination-rule paper] [--termination-threshold 1.30] [--head-combination sum]

For every dataset, feature learner and seed this trains the learner with the protocol's defaults
(Table 6's epochs, 50,000 training images, the paper's termination rule) and writes
``rounds-<dataset>.csv`` (one row per round: training, retention (both ways) and OOD accuracy,
whether the round was kept, set sizes) and ``provenance.json`` (command, commit, device, wall
time, the protocols). No OOD stage runs, so this fits a CPU: a full-batch step of the MLP on
50,000 images takes about 0.3 s on two cores, a seed's iFeAT rounds a few minutes. Learned
features are cached in ``--cache-dir`` under the same keys as :mod:`.run_cmnist` uses, so a
killed run resumes with the finished (learner, seed) pairs, and a later full protocol reuses
them.

Results accumulate: when ``--out`` already holds rounds from this command (checked against its
manifest), the new jobs are added to them, and the rows of every (dataset, learner, seed) that
this run does not compute are kept as they are. The protocols must agree on every field that
changes the learned features (seeds and learners aside); ``provenance.json`` then lists each
run that contributed (``runs``: command, commit, device, wall time and the jobs it computed) and
``jobs``, every (dataset, learner, seed) the folder holds. So seeds can be added one sitting at
a time, and a job that was killed loses only itself. A run holds ``--out`` from the read of the
earlier rounds to its commit (:func:`featlib.store.folders.folder_lock`): a second run into the
same folder is refused in one line (exit 2), never dropping the first one's jobs.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ..data.mnist import SOURCES
from ..feature_learning.feat_rounds import DEFAULT_HEAD_COMBINATION, HEAD_COMBINATIONS
from ..feature_learning.termination import DEFAULT_TERMINATION, DEFAULT_TERMINATION_THRESHOLD, TERMINATION_RULES
from ..store.files import CacheWriteError, CorruptFileError
from .common import OneLineParser, holding, os_errors_in_one_line
from ..device import get_device
from ..store.provenance import command_line, git_commit, provenance
from ..store.folders import ResultFolder, check_out
from ..validation import check_sequence, check_writable
from ..experiments.colored_mnist import CMNISTProtocol, ColoredMNISTExperiment, protocol_datasets
from ..feature_learning import FEATURE_LEARNERS

from ..experiments.results import ROUNDS_KIND as KIND, load_rounds


def parse_args(argv):
    parser = OneLineParser(prog="python -m featlib.cli.run_rounds",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--datasets", nargs="+", default=protocol_datasets(), choices=protocol_datasets())
    parser.add_argument("--learners", "--inits", nargs="+", default=stopping_learners(),
                        choices=FEATURE_LEARNERS.table_order(),
                        help="registered feature learners; default: those FeAT's termination check stops (Table 7)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--max-rounds", type=int, default=CMNISTProtocol.max_rounds)
    parser.add_argument("--n-train", type=int, default=CMNISTProtocol.n_train,
                        help="training images (default: all 50,000, the paper's)")
    parser.add_argument("--epoch-scale", type=float, default=CMNISTProtocol.epoch_scale,
                        help="multiplies Table 6's epochs (default 1: the paper's)")
    parser.add_argument("--hidden-dim", type=int, default=CMNISTProtocol.hidden_dim)
    parser.add_argument("--termination-rule", default=DEFAULT_TERMINATION, choices=TERMINATION_RULES.names())
    parser.add_argument("--termination-threshold", type=float, default=DEFAULT_TERMINATION_THRESHOLD,
                        help="training + retention accuracy under which a round is discarded (default 1.30, Appendix F.1)")
    parser.add_argument("--head-combination", default=DEFAULT_HEAD_COMBINATION, choices=HEAD_COMBINATIONS.names())
    parser.add_argument("--cache-dir", default="_cache/cmnist", type=Path)
    parser.add_argument("--mnist-source", default="auto", choices=SOURCES)
    return parser.parse_args(argv)


@os_errors_in_one_line
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:  # every check before any work; --out is replaced as a whole at the end, keeping earlier jobs
        for name in ("datasets", "learners", "seeds"):
            check_sequence(f"--{name}", getattr(args, name), unique=True)
        protocols = [CMNISTProtocol(dataset=d, seeds=tuple(args.seeds), learners=tuple(args.learners),
                                    max_rounds=args.max_rounds, termination_rule=args.termination_rule,
                                    termination_threshold=args.termination_threshold,
                                    head_combination=args.head_combination, n_train=args.n_train,
                                    epoch_scale=args.epoch_scale, hidden_dim=args.hidden_dim)
                     for d in args.datasets]
        get_device()  # an unusable FEATLIB_DEVICE stops here
        check_out("--out", args.out, KIND, protect={"--cache-dir": args.cache_dir})
        check_writable("--cache-dir", args.cache_dir)
    except (ValueError, CorruptFileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return holding(args.out, "this run", lambda: _locked(args, argv, protocols))  # held from the read to the commit


def _locked(args, argv, protocols: list[CMNISTProtocol]) -> int:
    """The jobs into ``--out``, whose lock this run holds: the earlier rounds read and checked,
    the features learned, the folder committed with the earlier jobs' rows."""
    try:
        earlier = load_rounds(args.out) if (args.out / "provenance.json").exists() else None
        if earlier is not None:
            check_same_protocols(earlier["provenance"], [protocol_record(p) for p in protocols], args.out)
    except (ValueError, CorruptFileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    commit = git_commit()  # now: the checkout may move while the run goes on
    timings = {}
    jobs = [(p, i, s) for i in args.learners for p in protocols for s in p.seeds]  # learner by learner
    experiments = {p.dataset: ColoredMNISTExperiment(p, cache_dir=args.cache_dir, mnist_source=args.mnist_source,
                                                     progress=False) for p in protocols}
    bar = tqdm(jobs, desc="feature learning")
    try:
        for protocol, learner, seed in bar:
            bar.set_postfix_str(f"{protocol.dataset} {learner} seed {seed}")
            t0 = time.perf_counter()
            experiments[protocol.dataset].features(learner, seed)
            timings[f"{protocol.dataset}/{learner}/seed{seed}"] = time.perf_counter() - t0
    except CacheWriteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    new = pd.concat([experiments[p.dataset].rounds(i) for p in protocols for i in p.learners], ignore_index=True)
    this_run = provenance(
        command_line("featlib.cli.run_rounds", argv), start, commit=commit,
        wall_time_s_per_run=timings, jobs=[[p.dataset, i, s] for p, i, s in jobs],
        note="feature learning only (no OOD stage); wall time includes features loaded from --cache-dir, if any",
    )
    rows, runs = new, [this_run]
    if earlier is not None:
        old = earlier["rounds"]
        done = set(zip(new["dataset"], new["learner"], new["seed"]))
        keep = [key not in done for key in zip(old["dataset"], old["learner"], old["seed"])]
        rows = pd.concat([old[keep], new], ignore_index=True)
        runs = runs_of(earlier["provenance"]) + runs
    order = {"dataset": ranks(protocol_datasets(), rows["dataset"]),
             "learner": ranks(FEATURE_LEARNERS.table_order(), rows["learner"])}
    rows = rows.sort_values(["dataset", "learner", "seed", "round"],
                            key=lambda col: col.map(order[col.name]) if col.name in order else col, kind="stable")
    all_jobs = sorted({(d, i, int(s)) for d, i, s in zip(rows["dataset"], rows["learner"], rows["seed"])},
                      key=lambda j: (order["dataset"][j[0]], order["learner"][j[1]], j[2]))
    datasets = list(order["dataset"])
    folder = ResultFolder(args.out, kind=KIND)
    for dataset in datasets:
        folder.add_csv(f"rounds-{dataset}.csv", rows[rows["dataset"] == dataset].reset_index(drop=True))
    record = dict(this_run)
    record.update(
        datasets=datasets, learners=list(order["learner"]),
        seeds=sorted({j[2] for j in all_jobs}), jobs=[list(j) for j in all_jobs],
        protocols=[protocol_record(p) | {"seeds": sorted({j[2] for j in all_jobs if j[0] == p.dataset}),
                                         "learners": [i for i in order["learner"] if any(j[:2] == (p.dataset, i) for j in all_jobs)]}
                   for p in protocols] + [q for q in (earlier["provenance"].get("protocols", []) if earlier else [])
                                          if q["dataset"] not in args.datasets],
        runs=runs,
    )
    record.pop("wall_time_s_per_run", None)
    folder.commit(record)
    print(json.dumps({k: record[k] for k in ("commit", "device", "wall_time_s")}, indent=2))
    return 0



def stopping_learners() -> list[str]:
    """The registered learners that FeAT's termination check stops (they take ``termination_rule``:
    iFeAT and FeAT), whose rounds Table 7 shows."""
    return [n for n in FEATURE_LEARNERS.table_order() if "termination_rule" in FEATURE_LEARNERS.get(n).protocol_fields]


def ranks(known: list[str], present) -> dict[str, int]:
    """Each name in ``present`` by its place: the registry's order (``known``), then names not
    registered in this process (a folder's rows of a learner or dataset of one's own) as they come."""
    present = list(dict.fromkeys(present))
    ordered = [n for n in known if n in present] + [n for n in present if n not in known]
    return {n: k for k, n in enumerate(ordered)}


#: Fields of a protocol record that may differ between the runs of one rounds folder.
_PER_RUN = ("seeds", "learners")
#: Values a field had before it was recorded (older runs lack it): the default they ran with.
_RECORD_DEFAULTS = {"head_combination": "average"}


def protocol_record(protocol: CMNISTProtocol) -> dict:
    """The protocol's fields that change learned features (what a rounds folder records)."""
    return {k: v for k, v in asdict(protocol).items() if k in CMNISTProtocol.FEATURE_FIELDS + _PER_RUN}


def check_same_protocols(record: dict, new: list[dict], out: Path) -> None:
    """Refuse to add runs whose protocol differs from the folder's (seeds and learners aside)."""
    recorded = {q["dataset"]: q for q in record.get("protocols", [])}
    for q in new:
        old = recorded.get(q["dataset"])
        if old is None:
            continue
        for field in set(q) | set(old):
            if field in _PER_RUN:
                continue
            a, b = old.get(field, _RECORD_DEFAULTS.get(field)), q.get(field, _RECORD_DEFAULTS.get(field))
            if a != b:
                raise ValueError(f"--out {out} holds {q['dataset']} rounds made with {field}={a!r}, not {b!r}: "
                                 "give another --out for this protocol")


def runs_of(record: dict) -> list[dict]:
    """The runs that made a rounds folder: its ``runs`` list, or (a folder made by one run before
    runs accumulated) the record itself, with the jobs it computed."""
    if "runs" in record:
        return list(record["runs"])
    run = {k: v for k, v in record.items() if k not in ("files", "protocols", "datasets", "learners", "seeds")}
    run["jobs"] = [[d, i, s] for d in record.get("datasets", []) for i in record.get("learners", [])
                   for s in record.get("seeds", [])]
    return [run]


if __name__ == "__main__":
    raise SystemExit(main())
