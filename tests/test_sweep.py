"""Parameter sweeps (featbook.sweep): local subprocess workers, resume after a kill, failures, Ray.

The sweeps run a tiny notebook written here (parameters x, name, sleep); its parameters go
through the real featbook.notebook_params.check_parameters, as do the book's chapters in the
bad-input tests.
"""
import json
import os
import signal
import subprocess
import sys
import time

import nbformat
import pandas as pd
import pytest

from featbook import sweep
from featbook.notebooks import REPO_ROOT

def write_tiny_notebook(directory):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('x = 1\nname = "a"\nsleep = 0.0')
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import time\ntime.sleep(sleep)\n"
        'from featbook.record import record\nrecord("y", x * 2)\nrecord("stats", {"x": x, "name": name})'
    )
    nb.cells = [params, body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = directory / "tiny.ipynb"
    nbformat.write(nb, str(path))
    return path


GRID = {"x": [1, 2], "name": ["a", "b"]}


@pytest.fixture(scope="module")
def local_2x2(tmp_path_factory):
    """The 2x2 sweep, run once with 2 local workers (shared by the local and the Ray test)."""
    tmp = tmp_path_factory.mktemp("local")
    notebook = write_tiny_notebook(tmp)
    start = time.perf_counter()
    table = sweep.run_sweep(notebook, GRID, out=tmp / "out", workers=2, progress=False)
    print(f"local 2x2 sweep, 2 workers: {time.perf_counter() - start:.1f} s")
    return notebook, tmp / "out", table


def test_local_2x2_sweep_records_every_combination(local_2x2):
    _, out, table = local_2x2
    assert len(list((out / "runs").glob("*.ipynb"))) == 4
    records = sorted((out / "records").glob("*.json"))
    assert len(records) == 4
    record = json.loads(records[0].read_text())
    assert {"id", "notebook", "parameters", "status", "error", "wall_time_s", "records", "finished_utc",
            "device"} <= set(record)
    assert record["notebook"] == "tiny" and record["device"] == "cpu"
    assert len((out / "records.jsonl").read_text().splitlines()) == 4

    csv = pd.read_csv(out / "results.csv")
    assert list(csv.columns[:6]) == ["id", "x", "name", "y", "stats.x", "stats.name"]
    assert {"status", "wall_time_s"} <= set(csv.columns)
    assert sorted(zip(csv.x, csv.name)) == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]
    assert (csv.y == 2 * csv.x).all() and (csv["stats.x"] == csv.x).all() and (csv["stats.name"] == csv.name).all()
    assert (csv.status == "ok").all()
    pd.testing.assert_frame_equal(sweep.collect(out), table)
    assert list(table.id) == list(csv.id)
    assert all(i.startswith(f"x={x},name={n}-") for i, x, n in zip(table.id, table.x, table.name))


def test_ray_sweep_gives_the_same_table(local_2x2, tmp_path):
    pytest.importorskip("ray")
    notebook, _, local = local_2x2
    start = time.perf_counter()
    table = sweep.run_sweep(notebook, GRID, out=tmp_path, ray_address="local", workers=2, progress=False)
    print(f"Ray sweep of 4 runs, including ray.init(num_cpus=2) and shutdown: {time.perf_counter() - start:.1f} s")
    import ray

    assert not ray.is_initialized()  # shut down: this sweep started it
    columns = [c for c in local.columns if c != "wall_time_s"]
    pd.testing.assert_frame_equal(table[columns], local[columns])
    assert len(list((tmp_path / "runs").glob("*.ipynb"))) == 4
    record = json.loads(next((tmp_path / "records").glob("*.json")).read_text())
    assert record["device"] == "cpu" and record["status"] == "ok"


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path, capsys):
    notebook = write_tiny_notebook(tmp_path)
    out = tmp_path / "out"
    # time.sleep(-1.0) raises in the notebook: a type-correct value that fails at run time
    status = sweep.main([str(notebook), "-p", "sleep", "0.0", "-1.0", "-p", "x", "3", "--out", str(out), "--workers", "2"])
    assert status == 1
    table = pd.read_csv(out / "results.csv")
    assert sorted(table.status) == ["failed", "ok"]
    failed = table[table.status == "failed"].iloc[0]
    assert failed.sleep == -1.0 and failed.error.startswith("ValueError: sleep length must be non-negative")
    assert table[table.status == "ok"].y.tolist() == [6]
    record = json.loads((out / "records" / f"{failed.id}.json").read_text())
    assert record["status"] == "failed" and "ValueError" in record["error"]
    executed = json.loads((out / "runs" / f"{failed.id}.ipynb").read_text())
    assert any(o.get("output_type") == "error" for c in executed["cells"] for o in c.get("outputs", []))
    assert "1 ok, 1 failed" in capsys.readouterr().out


def _records_by_id(out):
    return {p.stem: json.loads(p.read_text()) for p in (out / "records").glob("*.json")}


def test_a_killed_sweep_resumes_without_rerunning_finished_runs(tmp_path):
    notebook = write_tiny_notebook(tmp_path)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "featbook.sweep", str(notebook), "-p", "x", "1", "2", "3", "4", "-p", "sleep", "1.0",
               "--out", str(out), "--workers", "1"]
    first = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list((out / "records").glob("*.json")) and time.monotonic() < deadline:
        assert first.poll() is None, first.communicate()
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    before = _records_by_id(out)
    assert 1 <= len(before) < 4 and all(r["status"] == "ok" for r in before.values())
    mtimes = {i: (out / "records" / f"{i}.json").stat().st_mtime_ns for i in before}
    run_mtimes = {i: (out / "runs" / f"{i}.ipynb").stat().st_mtime_ns for i in before}

    second = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert f"skipping {len(before)} finished" in second.stdout
    after = _records_by_id(out)
    assert len(after) == 4 and all(r["status"] == "ok" for r in after.values())
    for i, record in before.items():  # not executed again
        assert after[i]["finished_utc"] == record["finished_utc"]
        assert (out / "records" / f"{i}.json").stat().st_mtime_ns == mtimes[i]
        assert (out / "runs" / f"{i}.ipynb").stat().st_mtime_ns == run_mtimes[i]
    lines = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == sorted(after)
    table = pd.read_csv(out / "results.csv")
    assert sorted(table.id) == sorted(after) and sorted(table.x) == [1, 2, 3, 4]
    assert (table.y == 2 * table.x).all()


def test_values_are_parsed_as_yaml():
    assert [sweep.parse_value(t) for t in ["1", "0.5", "1e-3", "cmnist025", "true", "[1,2]", "yes", "-2"]] == [
        1, 0.5, 0.001, "cmnist025", True, [1, 2], "yes", -2]
    assert sweep.parse_grid([["x", "1", "2"], ["name", "a"]]) == {"x": [1, 2], "name": ["a"]}


def test_ids_are_stable_readable_and_cover_the_full_parameters():
    a = sweep.run_id("01", {"d": 50, "seed": 1}, {"seed": 1})
    assert a == sweep.run_id("01", {"seed": 1, "d": 50}, {"seed": 1}) and a.startswith("seed=1-")
    assert a != sweep.run_id("01", {"d": 60, "seed": 1}, {"seed": 1})
    assert a != sweep.run_id("02", {"d": 50, "seed": 1}, {"seed": 1})


def test_unknown_notebook_lists_the_chapters(tmp_path, capsys):
    assert sweep.main(["no_such_chapter", "-p", "x", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown notebook 'no_such_chapter'" in err and "01_erm_feature_learning" in err
    assert sweep.resolve_notebook("01").stem == "01_erm_feature_learning"
    with pytest.raises(ValueError, match="ambiguous"):
        sweep.resolve_notebook("0")


def test_a_parameter_without_values_is_rejected(tmp_path, capsys):
    assert sweep.main(["01", "-p", "seed", "--out", str(tmp_path)]) == 2
    assert "-p seed needs at least one value" in capsys.readouterr().err
    with pytest.raises(ValueError, match="seed has no values"):
        sweep.run_sweep("01", {"seed": []}, out=tmp_path)
    assert not (tmp_path / "runs").exists()


def test_bad_parameters_are_rejected_before_anything_runs(tmp_path, capsys):
    notebook = write_tiny_notebook(tmp_path)
    out = tmp_path / "out"
    assert sweep.main([str(notebook), "-p", "x", "1", "-p", "nmae", "b", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter 'nmae'" in err and "sleep" in err  # and the names it takes
    assert sweep.main([str(notebook), "-p", "x", "1", "two", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "x must be an integer" in err and "got 'two'" in err and "nothing was run" in err
    assert not out.exists()
    with pytest.raises(ValueError, match="x must be an integer"):
        sweep.run_sweep(notebook, {"x": [1, "two"]}, out=out)
    assert not out.exists()


def test_bad_parameters_of_a_chapter_are_rejected_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert sweep.main(["01", "-p", "no_such_parameter", "1", "--out", str(out)]) == 2
    assert "no_such_parameter" in capsys.readouterr().err
    assert sweep.main(["01", "-p", "steps", "300", "many", "--out", str(out)]) == 2
    assert "steps must be an integer" in capsys.readouterr().err
    assert sweep.main(["01", "-p", "n_per_env", "-5", "--out", str(out)]) == 2  # out of range: a validate cell
    assert "n_per_env" in capsys.readouterr().err
    assert not out.exists()


def test_worker_environment_pins_one_gpu_per_slot_or_splits_the_cpus(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    cpu = sweep._worker_env(0, 4, [])
    assert cpu["FEATLIB_DEVICE"] == "cpu" and cpu["OMP_NUM_THREADS"] == "2" and cpu["MKL_NUM_THREADS"] == "2"
    monkeypatch.setenv("FEATLIB_DEVICE", "cuda:1")
    assert [sweep._worker_env(s, 3, ["2", "5"])["CUDA_VISIBLE_DEVICES"] for s in range(3)] == ["2", "5", "2"]
    gpu = sweep._worker_env(1, 3, ["2", "5"])
    assert gpu["FEATLIB_DEVICE"] == "cuda" and gpu["OMP_NUM_THREADS"] == "2"


def _failing_kernel_start(times, message="Kernel didn't respond in 60 seconds"):
    """papermill.execute_notebook whose first ``times`` kernels never answer (the port race of
    kernels started at once), as papermill leaves it: the output written, no cell executed."""
    import papermill as pm

    real, calls = pm.execute_notebook, []

    def execute(input_path, output_path, **kwargs):
        calls.append(output_path)
        if len(calls) <= times:
            nb = nbformat.read(input_path, as_version=4)
            nb.metadata["papermill"] = {}
            nbformat.write(nb, output_path)
            raise RuntimeError(message)
        return real(input_path, output_path, **kwargs)

    return execute, calls


def test_a_kernel_that_never_started_is_started_again_and_its_run_succeeds(tmp_path, monkeypatch, capsys):
    import papermill as pm

    from featbook import notebooks

    monkeypatch.setattr(notebooks, "random", type("NoWait", (), {"uniform": staticmethod(lambda a, b: 0.0)}))
    execute, calls = _failing_kernel_start(times=1)
    monkeypatch.setattr(pm, "execute_notebook", execute)
    notebook = write_tiny_notebook(tmp_path)
    record = sweep.execute_run(notebook, tmp_path / "run.ipynb", {"x": 4}, cwd=tmp_path)
    assert len(calls) == 2
    assert record["status"] == "ok" and record["records"]["y"] == 8
    assert "the kernel did not start" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_a_kernel_that_never_starts_fails_the_run_after_three_tries(tmp_path, monkeypatch):
    import papermill as pm

    from featbook import notebooks

    monkeypatch.setattr(notebooks, "random", type("NoWait", (), {"uniform": staticmethod(lambda a, b: 0.0)}))
    execute, calls = _failing_kernel_start(times=5, message="Kernel died before replying to kernel_info")
    monkeypatch.setattr(pm, "execute_notebook", execute)
    record = sweep.execute_run(write_tiny_notebook(tmp_path), tmp_path / "run.ipynb", {}, cwd=tmp_path)
    assert len(calls) == notebooks.KERNEL_START_ATTEMPTS == 3
    assert record["status"] == "failed" and record["error"].startswith("RuntimeError: Kernel died before")
    assert (tmp_path / "run.ipynb").exists()  # what papermill wrote stays for the reader


def test_only_a_kernel_that_ran_no_cell_is_started_again(tmp_path):
    from featbook.notebooks import kernel_never_started

    fresh = write_tiny_notebook(tmp_path)
    started = tmp_path / "started.ipynb"
    nb = nbformat.read(fresh, as_version=4)
    nb.cells[0].execution_count = 1
    nbformat.write(nb, started)
    late = RuntimeError("Kernel didn't respond in 60 seconds")
    assert kernel_never_started(late, fresh) and kernel_never_started(late, tmp_path / "not-written.ipynb")
    assert not kernel_never_started(late, started)  # a cell ran: the failure is the notebook's
    assert not kernel_never_started(ValueError("sleep length must be non-negative"), fresh)
    assert not kernel_never_started(RuntimeError("CUDA out of memory"), fresh)
