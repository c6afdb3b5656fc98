"""Parameter sweeps over a notebook: every combination executed (papermill), recorded, tabulated.

A sweep is the Cartesian product of the ``-p`` value lists, each combination laid over the
profile's parameters for that notebook (``-p`` values win). Every combination is checked with
:func:`featbook.notebook_params.check_parameters` before anything runs, so a typo in a name or a
value of the wrong type stops the sweep at once (exit status 2) instead of hours later.

Local runs, one subprocess per combination (``--workers`` at a time, default one per GPU, else
one per CPU core; each worker slot gets one GPU through ``CUDA_VISIBLE_DEVICES``, or, without
GPUs, ``FEATLIB_DEVICE=cpu``; and ``os.cpu_count() // workers`` OpenMP/MKL threads)::

    python -m featbook.sweep 04_feat_on_colored_mnist -p seeds '[1]' '[2]' '[3]' -p ood_steps 150 300
    python -m featbook.sweep 01 -p d 50 100 -p steps 300 --profile small --workers 2

On a Ray cluster, one task per combination (``auto``: the cluster this machine belongs to;
``ray://head:10001``: Ray Client; ``local``: start a private instance on this machine)::

    python -m featbook.sweep 05_feat_on_wilds -p seeds '[0]' '[1]' '[2]' --profile full \\
        --ray ray://head:10001 --gpus-per-task 1 --cpus-per-task 8

From Python::

    from featbook.sweep import run_sweep, collect
    table = run_sweep("01", {"d": [50, 100], "steps": [300]}, workers=2)
    table = collect("_build/sweeps/01_erm_feature_learning")   # later, from what is on disk

Values are YAML scalars, one per token: ``1`` is an int, ``0.5`` and ``1e-3`` floats,
``true``/``false`` booleans, ``[1,2]`` a list, anything else a string (``yes``/``no``/``on``/``off``
stay strings). Quote lists for the shell.

Layout of the output folder (``--out``, default ``_build/sweeps/<notebook stem>``)::

    runs/<id>.ipynb       the executed notebook (kept with its traceback when a run fails)
    records/<id>.json     one record per combination: id, notebook, parameters, status ("ok" or
                          "failed"), error ("ename: evalue" for failures), wall_time_s, records
                          (the notebook's recorded values, featbook.record), finished_utc, device,
                          plus swept (the swept parameter names), host, profile (its name) and
                          parameter_set (a hash of the profile's parameters for the notebook)
    records.jsonl         every record under records/, one JSON object a line; rewritten
                          (atomically) after every finished run
    results.csv           one row per run of this sweep's notebook, profile and parameter set: id,
                          the swept parameters, the recorded scalars (dicts flattened one level
                          into ``name.key`` columns, lists as JSON strings), status, wall_time_s,
                          error; written at the end (see :func:`collect`, which refuses to mix
                          the records of different notebooks, profiles or parameter sets)

``--out`` is checked before anything runs (:func:`check_sweep_out`): absent, empty or a sweep's
own folder; never the working directory, a checkout, or a folder holding other files (a
``results.csv`` or ``records.jsonl`` of one's own is never overwritten).

``<id>`` is a readable slug of the swept values plus a hash of the notebook stem and the full
parameter dict (profile + overrides), e.g. ``seed=1,steps=300-1a2b3c4d``: the same combination
always gets the same id, and a changed profile gives new ids rather than stale matches. The id
does not cover the notebook's code: after editing a notebook, sweep into a fresh ``--out``.

Resume: records/ is the source of truth. A combination whose record says "ok" is skipped
("skipping N finished"); failed or missing ones run again, so rerunning the same command after a
crash, a kill or a failure finishes the sweep, with each combination recorded exactly once
(records.jsonl and results.csv are rebuilt from records/). Records are written atomically, so
a kill never leaves half a record. A worker whose driver dies exits within a second, and so
does its Jupyter kernel. One driver at a time works in a folder: a second one on the same
``--out`` stops at once (exit status 2). The workers of a sweep may share a cache folder
(chapter 04's ``cache_dir``): each cached piece is computed by one process while the others wait
for it (:mod:`featlib.store.files`).

Ray: the driver sends each task the notebook's JSON text and its parameters, so workers need
not share the driver's filesystem (they do need the project's environment: featlib, papermill,
ipykernel). A task executes the notebook in a temporary directory, which is also its working
directory: the notebooks folder is not there, so relative paths in parameters (such as
chapter 05's ``data_root``) resolve inside that temporary directory (fabricated data is made
afresh; real data sets need an absolute path that exists on the workers). The task returns the
executed notebook and the record; the driver writes runs/ and records/, so resuming works as in
local runs. Tasks are not retried by Ray: rerun the command to retry failures.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import queue
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from featlib.store.atomic import atomic_write
from featbook.notebooks import REPO_ROOT, list_notebooks, load_profile
from featbook.record import _plain
from featlib.validation import check_positive, check_writable

SWEEP_ROOT = REPO_ROOT / "_build" / "sweeps"
#: What a sweep writes into its ``--out`` (and the driver's lock): nothing else may be there.
SWEEP_ENTRIES = ("runs", "records", "records.jsonl", "results.csv", ".records.jsonl.lock")
#: The files a sweep rewrites: only ever in a folder that its own records show to be a sweep's.
_REWRITTEN = ("records.jsonl", "results.csv")
#: The line a ``--run-one`` worker prints its record on (the last line of its stdout).
_MARKER = "@@featlib-sweep-record@@ "
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


# --------------------------------------------------------------------------- inputs

def resolve_notebook(notebook: str | Path) -> Path:
    """A notebook path, or a chapter's stem or unique stem prefix (``01``, ``04_feat``)."""
    path = Path(notebook)
    if path.is_file():
        return path.resolve()
    chapters = list_notebooks()
    stems = [p.stem for p in chapters]
    name = str(notebook)
    if path.suffix == ".ipynb" or os.sep in name:
        raise ValueError(f"notebook {name!r} does not exist; chapters: {', '.join(stems)}")
    exact = [p for p in chapters if p.stem == name]
    matches = exact or [p for p in chapters if p.stem.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ValueError(f"notebook {name!r} is ambiguous: it matches {', '.join(p.stem for p in matches)}")
    raise ValueError(f"unknown notebook {name!r}; chapters: {', '.join(stems)} (or a path to a .ipynb file)")


def parse_value(token: str) -> Any:
    """One ``-p`` value: YAML (``1``, ``0.5``, ``true``, ``[1,2]``), with ``1e-3`` a float and
    ``yes``/``no``/``on``/``off`` (YAML 1.1 booleans) and dates left as strings."""
    stripped = token.strip()
    if re.fullmatch(r"[-+]?\d+", stripped):
        return int(stripped)
    if _NUMBER.fullmatch(stripped):  # YAML 1.1 reads 1e-3 as a string
        return float(stripped)
    try:
        value = yaml.safe_load(token)
    except yaml.YAMLError:
        return token
    if isinstance(value, bool) and stripped.lower() not in ("true", "false"):
        return token
    try:
        json.dumps(value)
    except (TypeError, ValueError):  # dates, timestamps: keep the text
        return token
    return token if value is None and not stripped else value


def parse_grid(pairs: list[list[str]]) -> dict[str, list]:
    """``[["seed", "1", "2"], ["lr", "0.1"]]`` (the ``-p`` arguments) -> ``{"seed": [1, 2], "lr": [0.1]}``."""
    grid: dict[str, list] = {}
    for pair in pairs:
        name, tokens = pair[0], pair[1:]
        if not tokens:
            raise ValueError(f"-p {name} needs at least one value: -p {name} V1 [V2 ...]")
        if name in grid:
            raise ValueError(f"-p {name} is given twice; list all its values after one -p")
        grid[name] = [parse_value(t) for t in tokens]
    return grid


def _check_grid(grid: dict[str, list]) -> dict[str, list]:
    checked = {}
    for name, values in grid.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"parameter names must be Python identifiers; got {name!r}")
        if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
            raise ValueError(f"grid[{name!r}] must be a list of values; got {values!r}")
        try:
            values = [_plain(v) for v in values]
        except TypeError as err:
            raise ValueError(f"grid[{name!r}]: {err}") from None
        if not values:
            raise ValueError(f"parameter {name} has no values to sweep over")
        checked[name] = values
    return checked


def _canonical(params: dict) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def _slug_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9.+-]", "_", text)).strip("_") or "_"


def run_id(stem: str, parameters: dict, swept: dict) -> str:
    """``name=value,...-<hash8>``: readable from the swept values, unique by the full parameters."""
    digest = hashlib.sha256(f"{stem}\n{_canonical(parameters)}".encode()).hexdigest()[:8]
    slug = ",".join(f"{name}={_slug_value(value)}" for name, value in swept.items())[:96]
    return f"{slug}-{digest}" if slug else digest


def parameter_set(stem: str, base: dict) -> str:
    """A short hash of a notebook's profile parameters: records with the same one were swept over
    the same base."""
    return hashlib.sha256(f"{stem}\n{_canonical(base)}".encode()).hexdigest()[:8]


def _group(record: dict) -> tuple:
    """What records must share to be tabulated together: notebook, profile, parameter set."""
    return record.get("notebook"), record.get("profile"), record.get("parameter_set")


def _describe_group(group: tuple) -> str:
    notebook, profile, pset = group
    return f"{notebook} with profile {profile or '(unrecorded)'} (parameter set {pset or 'unrecorded'})"


def _check_parameters(notebook: Path, params: dict) -> None:
    from featbook.notebook_params import check_parameters

    check_parameters(notebook, params)


# --------------------------------------------------------------------------- one run (in a worker)

def _utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _describe_device() -> str:
    """The device the notebook ran on, as its kernel saw it (same environment as this process)."""
    override = os.environ.get("FEATLIB_DEVICE", "")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if override and not override.startswith("cuda"):
        return override
    try:
        from featlib.device import describe_device, get_device

        device = describe_device(get_device())
    except Exception as err:  # a broken CUDA setup must not lose the record
        device = f"unknown ({type(err).__name__})"
    return f"{device} [CUDA_VISIBLE_DEVICES={visible}]" if visible is not None and "cuda" in device else device


def execute_run(notebook: Path, output: Path, parameters: dict, cwd: Path) -> dict:
    """Execute one combination and describe the outcome (never raises for a failing notebook)."""
    from featbook.notebooks import execute_notebook
    from featbook.record import read_records

    start = time.perf_counter()
    status, error = "ok", None
    try:
        execute_notebook(Path(notebook), Path(output), parameters=parameters, cwd=Path(cwd))
    except Exception as err:
        status = "failed"
        ename, evalue = getattr(err, "ename", None), getattr(err, "evalue", None)
        error = f"{ename}: {evalue}" if ename else f"{type(err).__name__}: {err}"
    wall = time.perf_counter() - start
    try:
        records = read_records(output) if Path(output).exists() else {}
    except Exception as err:  # an unreadable notebook is itself a failure
        records = {}
        if status == "ok":
            status, error = "failed", f"{type(err).__name__} reading the records: {err}"
    return {
        "status": status, "error": error, "wall_time_s": round(wall, 3), "records": records,
        "finished_utc": _utc_now(), "device": _describe_device(), "host": socket.gethostname(),
    }


def _exit_with_parent(driver: int | None) -> None:
    """Exit when the driver dies (a SIGKILLed driver cannot stop us); the kernel follows us."""
    parent = driver or os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(137)

    threading.Thread(target=watch, daemon=True).start()


def _run_one(spec_json: str) -> int:
    """``--run-one``: execute one combination in this process; print its record as the last line."""
    spec = json.loads(spec_json)
    _exit_with_parent(spec.get("driver"))
    result = execute_run(Path(spec["notebook"]), Path(spec["output"]), spec["parameters"], Path(spec["cwd"]))
    sys.stdout.write("\n" + _MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


@contextmanager
def _environ(changes: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _ray_task(notebook_text: str, parameters: dict, gpus: float, cpus: float) -> tuple[dict, str | None]:
    """One Ray task: execute the notebook (sent as text) in a temporary directory, which is also
    its working directory; return the record and the executed notebook's text."""
    env = {"OMP_NUM_THREADS": str(max(1, int(cpus))), "MKL_NUM_THREADS": str(max(1, int(cpus)))}
    if not gpus:  # Ray leaves CUDA_VISIBLE_DEVICES alone for num_gpus=0: keep off the GPUs
        env.update(FEATLIB_DEVICE="cpu", CUDA_VISIBLE_DEVICES="")
    with tempfile.TemporaryDirectory(prefix="featlib-sweep-") as tmp, _environ(env):
        tmp = Path(tmp)
        source, output = tmp / "notebook.ipynb", tmp / "executed.ipynb"
        source.write_text(notebook_text)
        result = execute_run(source, output, parameters, tmp)
        return result, output.read_text() if output.exists() else None


# --------------------------------------------------------------------------- records and tables

def _is_sweep_record(path: Path) -> bool:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("id") == path.stem and {"notebook", "status"} <= record.keys()


def check_sweep_out(value) -> Path:
    """``--out`` of a sweep, checked before anything runs (ValueError, one line naming the value and
    the remedy): absent, empty, or a sweep's own folder (nothing but :data:`SWEEP_ENTRIES`, and where
    it holds ``records.jsonl`` or ``results.csv``, which a sweep rewrites, a ``records/`` folder with
    at least one sweep record); never the working directory or a folder holding it, a git checkout,
    featlib's own checkout, or a folder of other files (:func:`featlib.store.folders.check_out`'s
    guards)."""
    from featlib.store.folders import check_out

    path = check_out("--out", value, "featbook.sweep", keep=SWEEP_ENTRIES)
    target = path.resolve()
    if target.is_dir() and any((target / name).exists() for name in _REWRITTEN):
        records = target / "records"
        if not (records.is_dir() and any(_is_sweep_record(r) for r in records.glob("*.json"))):
            found = ", ".join(name for name in _REWRITTEN if (target / name).exists())
            raise ValueError(f"--out {value} holds {found} but no sweep records (records/<id>.json), so they are not "
                             "a sweep's, and a sweep rewrites them: move them out, or name a new or empty folder")
    return path


def _load_records(out: Path) -> dict[str, dict]:
    records = {}
    for path in sorted((out / "records").glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError) as err:  # treated as missing, so the combination runs again
            print(f"warning: {path} is unreadable ({type(err).__name__}: {err}); its combination runs again",
                  file=sys.stderr)
            continue
        if isinstance(record, dict) and record.get("id") == path.stem:
            records[path.stem] = record
        else:
            print(f"warning: {path} is not the record of {path.stem}; its combination runs again", file=sys.stderr)
    return records


def _natural(value: Any) -> tuple:
    if isinstance(value, bool):
        return (1, int(value), "")
    if isinstance(value, (int, float)):
        return (0, value if not (isinstance(value, float) and math.isnan(value)) else math.inf, "")
    return (2, 0, value if isinstance(value, str) else _canonical(value))


def _swept_names(records: list[dict]) -> list[str]:
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record.get("swept", [])))
    return list(names)


def _ordered(records: list[dict]) -> list[dict]:
    """Sorted by notebook, then by the swept parameters' values (numbers numerically), then id."""
    swept = _swept_names(records)
    return sorted(records, key=lambda r: (
        r.get("notebook", ""), tuple(_natural(r.get("parameters", {}).get(n)) for n in swept), r["id"],
    ))


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def _table(records: list[dict]):
    import pandas as pd

    records = _ordered(records)
    swept = _swept_names(records)
    reserved = {"id", "status", "wall_time_s", "error", *swept}
    rows, recorded = [], {}
    for record in records:
        values = {}
        for name, value in (record.get("records") or {}).items():
            items = {f"{name}.{k}": v for k, v in value.items()} if isinstance(value, dict) else {name: value}
            for column, v in items.items():
                column = f"records.{column}" if column in reserved else column
                values[column] = _cell(v)
                recorded.setdefault(column, None)
        params = record.get("parameters", {})
        rows.append({
            "id": record["id"], **{n: _cell(params.get(n)) for n in swept}, **values,
            "status": record.get("status"), "wall_time_s": record.get("wall_time_s"), "error": record.get("error"),
        })
    columns = ["id", *swept, *recorded, "status", "wall_time_s", "error"]
    return pd.DataFrame(rows, columns=columns)


def collect(out_dir: str | Path, profile: str | None = None):
    """The results table (a pandas DataFrame) rebuilt from ``out_dir/records``: one row per run.
    Runs of different notebooks, profiles or parameter sets are not mixed in one table: pass
    ``profile`` to pick one profile's runs; ValueError (naming the groups) when they still mix."""
    out = Path(out_dir)
    if not (out / "records").is_dir():
        raise ValueError(f"{out} holds no sweep records (no records/ folder)")
    records = list(_load_records(out).values())
    if profile is not None:
        records = [r for r in records if r.get("profile") == profile]
        if not records:
            raise ValueError(f"{out} holds no records of profile {profile!r}")
    groups = sorted({_group(r) for r in records}, key=str)
    if len(groups) > 1:
        raise ValueError(f"{out} mixes the runs of {len(groups)} sweeps: " + "; ".join(map(_describe_group, groups))
                         + (". Pass profile= to pick one" if profile is None else "")
                         + ", or sweep each into its own --out")
    return _table(records)


class _Recorder:
    """Writes each finished run (driver side) and keeps records.jsonl current."""

    def __init__(self, out: Path, records: dict[str, dict], bar, skipped: int):
        self.out, self.records, self.bar = out, records, bar
        self.ok, self.failed = skipped, 0
        bar.set_postfix(ok=self.ok, failed=self.failed)

    def write_jsonl(self) -> None:
        lines = "".join(json.dumps(r) + "\n" for r in _ordered(list(self.records.values())))
        atomic_write(self.out / "records.jsonl", lambda tmp: tmp.write_text(lines))

    def finish(self, combo: dict, result: dict, notebook_text: str | None = None) -> None:
        if notebook_text is not None:
            atomic_write(self.out / "runs" / f"{combo['id']}.ipynb", lambda tmp: tmp.write_text(notebook_text))
        record = {
            "id": combo["id"], "notebook": combo["stem"], "parameters": combo["parameters"],
            "status": result.get("status", "failed"), "error": result.get("error"),
            "wall_time_s": result.get("wall_time_s"), "records": result.get("records", {}),
            "finished_utc": result.get("finished_utc") or _utc_now(), "device": result.get("device"),
            "swept": list(combo["swept"]), "host": result.get("host"),
            "profile": combo.get("profile"), "parameter_set": combo.get("parameter_set"),
        }
        text = json.dumps(record, indent=1) + "\n"
        atomic_write(self.out / "records" / f"{combo['id']}.json", lambda tmp: tmp.write_text(text))
        self.records[combo["id"]] = record
        self.write_jsonl()
        if record["status"] == "ok":
            self.ok += 1
        else:
            self.failed += 1
        self.bar.set_postfix(ok=self.ok, failed=self.failed, refresh=False)
        self.bar.update(1)


# --------------------------------------------------------------------------- executors

def _visible_gpus() -> list[str]:
    """The CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries (empty: none)."""
    try:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        count = 0
    if not count:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [v.strip() for v in visible.split(",") if v.strip()][:count]
    return [str(i) for i in range(count)]


def default_workers() -> int:
    """Local workers: one per CUDA GPU if there are any, else one per CPU core."""
    return len(_visible_gpus()) or max(1, os.cpu_count() or 1)


def _worker_env(slot: int, workers: int, gpus: list[str]) -> dict[str, str]:
    """The environment of worker slot ``slot`` (its kernel inherits it): one GPU, or the CPU,
    and an equal share of the CPU threads either way."""
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
        if env.get("FEATLIB_DEVICE", "").startswith("cuda"):
            env["FEATLIB_DEVICE"] = "cuda"  # the slot's GPU is the only one it sees
    else:
        env["FEATLIB_DEVICE"] = "cpu"
    return env


def _run_local(notebook: Path, out: Path, todo: list[dict], workers: int,
               finish: Callable[[dict, dict], None]) -> None:
    workers = max(1, min(workers, len(todo)))
    gpus = _visible_gpus()
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(workers):
        slots.put(slot)
    running: set[subprocess.Popen] = set()
    stop = threading.Event()

    def job(combo: dict) -> dict:
        if stop.is_set():
            return {"status": "failed", "error": "sweep interrupted"}
        spec = json.dumps({
            "notebook": str(notebook), "output": str(out / "runs" / f"{combo['id']}.ipynb"),
            "parameters": combo["parameters"], "cwd": str(notebook.parent), "driver": os.getpid(),
        })
        slot = slots.get()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "featbook.sweep", "--run-one", spec], env=_worker_env(slot, workers, gpus),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            running.add(proc)
            if stop.is_set():
                proc.terminate()
            stdout, stderr = proc.communicate()
            running.discard(proc)
        finally:
            slots.put(slot)
        for line in reversed(stdout.splitlines()):
            if line.startswith(_MARKER):
                return json.loads(line[len(_MARKER):])
        why = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with status {proc.returncode}"
        tail = [line for line in stderr.strip().splitlines() if line.strip()][-1:]
        return {"status": "failed", "error": f"WorkerError: the worker {why}" + (f": {tail[0]}" if tail else "")}

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweep-slot")
    try:
        futures = {pool.submit(job, combo): combo for combo in todo}
        for future in as_completed(futures):
            finish(futures[future], future.result())
    except BaseException:
        stop.set()
        for proc in list(running):
            proc.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_ray(notebook: Path, todo: list[dict], address: str, workers: int | None, gpus_per_task: float | None,
             cpus_per_task: float, finish: Callable[[dict, dict, str | None], None]) -> None:
    import ray

    started = False
    if not ray.is_initialized():
        options = dict(include_dashboard=False, log_to_driver=False)
        if address == "local":
            ray.init(num_cpus=workers, **options)
        else:
            ray.init(address=address, **options)
        started = True
    refs: dict = {}
    try:
        if gpus_per_task is None:
            gpus_per_task = 1 if ray.cluster_resources().get("GPU", 0) > 0 else 0
        from featbook import sweep  # by reference, also when this file runs as __main__

        task = ray.remote(sweep._ray_task).options(num_gpus=gpus_per_task, num_cpus=cpus_per_task, max_retries=0)
        text = ray.put(notebook.read_text())
        refs = {task.remote(text, combo["parameters"], gpus_per_task, cpus_per_task): combo for combo in todo}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    result, executed = ray.get(ref)
                except Exception as err:  # the task died (worker crash, node lost)
                    result, executed = {"status": "failed", "error": f"{type(err).__name__}: {err}".strip()}, None
                finish(refs.pop(ref), result, executed)
    except BaseException:
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
        raise
    finally:
        if started:
            ray.shutdown()


# --------------------------------------------------------------------------- the sweep

def _plan(notebook: str | Path, grid: dict[str, list], profile: str | None) -> tuple[Path, list[dict]]:
    path = resolve_notebook(notebook)
    grid = _check_grid(grid)
    base = load_profile(profile).get(path.stem, {})
    combos, seen = [], set()
    for values in itertools.product(*grid.values()):
        swept = dict(zip(grid, values))
        parameters = {**base, **swept}
        cid = run_id(path.stem, parameters, swept)
        if cid not in seen:
            seen.add(cid)
            combos.append({"id": cid, "stem": path.stem, "parameters": parameters, "swept": list(swept),
                           "profile": profile or "full", "parameter_set": parameter_set(path.stem, base)})
    errors: dict[str, None] = {}
    for combo in combos:
        try:
            _check_parameters(path, combo["parameters"])
        except ValueError as err:
            errors[str(err)] = None
        except Exception as err:  # a notebook's own validate cell may raise other errors (a missing folder)
            errors[f"{type(err).__name__}: {err}"] = None
    if errors:
        raise ValueError(f"invalid parameters for {path.stem} (nothing was run):\n  " + "\n  ".join(errors))
    return path, combos


def _sweep(notebook, grid, *, profile="small", out=None, workers=None, ray_address=None, gpus_per_task=None,
           cpus_per_task=1, progress=True):
    path, combos = _plan(notebook, grid, profile)
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a whole number >= 1; got {workers!r}")
    check_positive("cpus_per_task", cpus_per_task)  # NaN too
    if gpus_per_task is not None:
        check_positive("gpus_per_task", gpus_per_task, allow_zero=True)
    out = Path(out).absolute() if out is not None else SWEEP_ROOT / path.stem
    check_writable("out", out)
    check_sweep_out(out)
    from featlib.store.files import PieceLock  # here, not at the top: --run-one workers need no pandas

    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "records").mkdir(parents=True, exist_ok=True)
    driver = PieceLock(out / "records.jsonl")  # one driver per folder: records/ is its bookkeeping
    if not driver.acquire(blocking=False):
        raise ValueError(f"another sweep is running in {out}; wait for it to finish or choose another --out")
    try:
        return _sweep_locked(path, combos, out, workers, ray_address, gpus_per_task, cpus_per_task, progress)
    finally:
        driver.release()


def _sweep_locked(path, combos, out, workers, ray_address, gpus_per_task, cpus_per_task, progress):
    records = _load_records(out)
    todo = [c for c in combos if records.get(c["id"], {}).get("status") != "ok"]
    skipped = len(combos) - len(todo)
    if skipped and progress:
        print(f"skipping {skipped} finished", flush=True)

    from tqdm.auto import tqdm

    bar = tqdm(total=len(combos), initial=skipped, desc=path.stem, unit="run", disable=not progress, file=sys.stderr)
    recorder = _Recorder(out, records, bar, skipped)
    recorder.write_jsonl()
    try:
        if todo and ray_address:
            _run_ray(path, todo, ray_address, workers, gpus_per_task, cpus_per_task, recorder.finish)
        elif todo:
            _run_local(path, out, todo, workers or default_workers(), recorder.finish)
    finally:
        bar.close()
    from featlib.store.csv_io import write_csv

    group = _group({"notebook": path.stem, "profile": combos[0]["profile"], "parameter_set": combos[0]["parameter_set"]})
    table = _table([r for r in records.values() if _group(r) == group])  # other sweeps' records stay, apart
    write_csv(out / "results.csv", table)
    return table, [records[c["id"]] for c in combos if c["id"] in records], out


def run_sweep(notebook: str | Path, grid: dict[str, list], *, profile: str | None = "small",
              out: str | Path | None = None, workers: int | None = None, ray_address: str | None = None,
              gpus_per_task: float | None = None, cpus_per_task: float = 1, progress: bool = True):
    """Execute ``notebook`` for every combination of ``grid`` over ``profile``; return the results table.

    notebook: a path or a chapter stem/prefix. grid: ``{name: [values]}``, its Cartesian product is
    swept. out: default ``_build/sweeps/<stem>``. workers: local subprocesses (default: one per
    GPU, else one per CPU core); with ``ray_address="local"``, the CPUs of the Ray instance
    started. ray_address: ``"auto"``, ``"ray://host:10001"`` or ``"local"`` to run one Ray task
    per combination (an already initialised Ray is used as it is, and left running).
    gpus_per_task: default 1 if the Ray cluster has GPUs, else 0. Raises ValueError, before
    anything runs, for an unknown notebook or profile, an empty value list, or parameters that
    ``featbook.notebook_params.check_parameters`` rejects. Failed runs do not raise: see the
    table's ``status`` and ``error`` columns. The table (pandas) covers every record in ``out``,
    which is also written to ``out/results.csv``.
    """
    table, _, _ = _sweep(notebook, grid, profile=profile, out=out, workers=workers, ray_address=ray_address,
                         gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task, progress=progress)
    return table


# --------------------------------------------------------------------------- command line

USAGE = ("python -m featbook.sweep NOTEBOOK -p NAME V1 [V2 ...] [-p NAME2 ...] [--profile small|full] [--out DIR]\n"
         "       [--workers N] [--ray ADDRESS] [--gpus-per-task G] [--cpus-per-task C]")


EPILOG = """examples:
  python -m featbook.sweep 01 -p d 50 100 -p steps 300 600 --workers 2
  python -m featbook.sweep 04_feat_on_colored_mnist -p seeds '[1]' '[2]' --ray auto --gpus-per-task 1

output (--out): runs/<id>.ipynb, records/<id>.json, records.jsonl, results.csv.
Rerunning the same command skips the combinations already recorded as ok and retries the rest.
exit status: 0 all runs ok, 1 some run failed, 2 bad input (nothing was run).
More in the module docstring: python -m pydoc featbook.sweep
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m featbook.sweep", usage=USAGE, description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    parser.add_argument("notebook", nargs="?", metavar="NOTEBOOK",
                        help="a .ipynb path, or a chapter's name or unique prefix (01, 04_feat_on_colored_mnist)")
    parser.add_argument("-p", "--param", dest="params", action="append", nargs="+", default=[], metavar=("NAME", "VALUE"),
                        help="a parameter and one or more values to sweep (YAML: 1, 0.5, true, cmnist025, '[1,2]'); repeat "
                             "-p for more parameters: the sweep is the Cartesian product")
    parser.add_argument("--profile", default="small", metavar="NAME", help="base parameters: full (the notebook's own) or a file in "
                                                           "notebooks/profiles (default: small)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="output folder (default: _build/sweeps/<notebook stem>)")
    parser.add_argument("--workers", type=int, metavar="N", help="local parallel runs (default: one per GPU, else one per CPU "
                                                    "core); with --ray local: the CPUs of the Ray instance")
    parser.add_argument("--ray", metavar="ADDRESS", help="run on Ray: auto, ray://host:10001, or local (start one here)")
    parser.add_argument("--gpus-per-task", type=float, metavar="G", help="Ray: GPUs per run (default: 1 if the cluster has GPUs, else 0)")
    parser.add_argument("--cpus-per-task", type=float, default=1, metavar="C", help="Ray: CPUs per run (default: 1)")
    parser.add_argument("--run-one", metavar="SPEC", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.run_one is not None:
        return _run_one(args.run_one)
    if not args.notebook:
        parser.error("NOTEBOOK is required")
    try:
        grid = parse_grid(args.params)
        _, records, out = _sweep(
            args.notebook, grid, profile=args.profile, out=args.out, workers=args.workers, ray_address=args.ray,
            gpus_per_task=args.gpus_per_task, cpus_per_task=args.cpus_per_task,
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk or a folder taken away: what was recorded stays, a rerun resumes
        print(f"error: could not write the sweep's files ({err.strerror or err}: {err.filename or args.out}); "
              "free space or fix the folder, then rerun the same command: finished runs are kept", file=sys.stderr)
        return 2
    failed = [r for r in records if r["status"] != "ok"]
    print(f"{len(records) - len(failed)} ok, {len(failed)} failed; results in {out / 'results.csv'}")
    for record in failed:
        print(f"  failed {record['id']}: {record['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
