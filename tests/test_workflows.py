"""The GitHub Actions workflows (.github/workflows) run only what this suite runs, and are linted.

Four workflows: ``book.yml`` (``make book``, then GitHub Pages), ``tests.yml`` (``bash .ci/run``:
``make test``), ``colab.yml`` (the Colab tier of tests/test_colab.py, weekly, with an issue when a
chapter fails) and ``links.yml`` (``make book``, then ``featbook.linkcheck --external`` on the
built pages, weekly, with an issue when a link to another site is broken). Each ``run:`` step is
one command of :data:`RUNS`, and a test below follows that command to what the suite runs, so a
workflow cannot drift from what is tested: renaming a Makefile target, changing what it runs, or
putting a command no test runs into a workflow fails here.

The book's builds (book.yml, links.yml) restore two caches, checked here from the parsed YAML:
pip's downloads (setup-python's ``cache: pip`` on requirements.txt, the file ``make book``
installs) and the executed chapters (actions/cache on featbook.executed's ``CACHE_DIR``), under a
key whose ``hashFiles`` patterns cover every file a chapter's own key reads (featlib's and
featbook's sources, the chapters and profiles, results/) and the pinned packages, with a
restore-keys prefix so that a changed input still restores the older copies.

The lint, offline (actionlint is not on PyPI as a wheel): each file parses as YAML, validates
against the GitHub workflow schema that check-jsonschema vendors, and zizmor reports nothing.
zizmor runs with the ``pedantic`` persona (every security finding and code smell, at every severity
and confidence; ``auditor`` adds only findings its authors call false-positive prone), ``--offline``
(its online audits need a GitHub token and the network) and ``--no-config``; the only findings
waived are the inline ``# zizmor: ignore[...]`` comments of :data:`WAIVED`, each with its reason
beside it in the workflow. Both tools are pinned in requirements.txt. No network, no GPU: seconds.
"""
from __future__ import annotations

import ast
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO / ".github" / "workflows"
BIN = Path(sys.executable).parent

COLAB_COMMAND = "PYTHONPATH=$PWD:$PWD/book python -m pytest -m colab -s tests/test_colab.py"
LINKS_REPORT = "links-report.json"
LINKS_COMMAND = f".venv/bin/python -m featbook.linkcheck --external --report {LINKS_REPORT} _build/html"
#: Every ``run:`` step of every workflow, in order: nothing else may run there.
RUNS = {
    "book.yml": ["make book"],
    "tests.yml": ["bash .ci/run"],
    "colab.yml": [COLAB_COMMAND],
    "links.yml": ["make book", LINKS_COMMAND],
}
#: The zizmor findings waived by an inline comment (workflow, audit), each explained in the file:
#: tests.yml follows the python:3.11-bookworm tag for its security releases; colab.yml follows
#: Colab's image as Colab updates it, which is what it is there to catch.
WAIVED = {("tests.yml", "unpinned-images"), ("colab.yml", "unpinned-images")}
COLAB_IMAGE = "us-docker.pkg.dev/colab-images/public/runtime"  # research.google.com/colaboratory/local-runtimes.html
CHAPTER_TEST = "test_chapter_runs_in_a_fresh_colab_runtime"


def load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in data:  # YAML 1.1 reads the key `on` as true
        data["on"] = data.pop(True)
    return data


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def uses(workflow: dict, action: str) -> list[dict]:
    return [s for s in steps(workflow) if s.get("uses", "").split("@")[0] == action]


def make_dry_run(target: str) -> list[str]:
    """What ``make <target>`` runs, as make itself reads the Makefile (``-n -B``: print every
    command, run none)."""
    make = shutil.which("make")
    assert make, "make is not installed: the README's commands need it"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHON", "VENV")}
    done = subprocess.run([make, "-n", "-B", target], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"make {target}: {done.stderr.strip()}"
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def tool(name: str) -> str:
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    assert path, f"{name} is not installed: pip install -r requirements.txt"
    return str(path)


# --- the files -------------------------------------------------------------------------------

def test_the_workflows_are_those_of_RUNS_with_a_header_naming_this_test():
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == sorted(RUNS)
    for name in RUNS:
        header = []
        for line in (WORKFLOWS / name).read_text().splitlines():
            if not line.startswith("#"):
                break
            header.append(line)
        assert len(header) >= 3 and "tests/test_workflows.py" in " ".join(header), f"{name}: no header comment"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_workflow_parses_and_has_jobs_and_triggers(name):
    workflow = load(name)
    assert workflow["name"] and workflow["on"] and workflow["jobs"], name
    assert "permissions" in workflow, f"{name}: the token's permissions must be set (least privilege)"
    for job_name, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{name}: job {job_name} has no timeout-minutes"


def test_the_workflows_validate_against_githubs_schema():
    files = [str(WORKFLOWS / name) for name in sorted(RUNS)]
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           *files], capture_output=True, text=True, timeout=120)
    assert "No module named" not in done.stderr, "check-jsonschema is not installed: pip install -r requirements.txt"
    assert done.returncode == 0, done.stdout + done.stderr


def zizmor(*extra: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")}
    done = subprocess.run([tool("zizmor"), "--offline", "--no-config", "--persona", "pedantic", "--format", "json",
                           *extra, str(WORKFLOWS)], capture_output=True, text=True, env=env, timeout=120)
    findings = json.loads(done.stdout or "null")
    assert isinstance(findings, list), done.stderr
    return findings


def describe(finding: dict) -> tuple[str, str]:
    location = finding["locations"][0]["symbolic"]["key"]["Local"]["verbatim_path"]
    return Path(location).name, finding["ident"]


def test_zizmor_reports_nothing_and_only_the_listed_findings_are_waived():
    found = zizmor()
    assert found == [], "zizmor (pedantic):\n" + "\n".join(
        f"{describe(f)}: {f['desc']} ({f['determinations']['severity']})" for f in found)
    waived = {describe(f) for f in zizmor("--no-ignores")}
    assert waived == WAIVED, f"waived by an inline comment: {sorted(waived)}; expected {sorted(WAIVED)}"


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it():
    pins = {}
    for name in RUNS:
        for line in (WORKFLOWS / name).read_text().splitlines():
            found = re.match(r"\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if found:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}", found[1]), f"{name}: {found[1]}"
                assert re.fullmatch(r"\s*#\s*v\d+(\.\d+)*", found[2]), f"{name}: {found[1]} without its # vX.Y.Z"
                pins.setdefault(found[1].split("@")[0], set()).add((found[1].split("@")[1], found[2].strip()))
    # one commit per action across the workflows (an update changes every use of it)
    assert {action: len(p) for action, p in pins.items() if len(p) > 1} == {}, pins


# --- what runs: each command of RUNS, followed to what the suite runs ------------------------

def test_every_run_step_is_one_command_the_suite_runs():
    for name, expected in RUNS.items():
        workflow = load(name)
        assert [s["run"].strip() for s in steps(workflow) if "run" in s] == expected, name
        assert "defaults" not in workflow and all("defaults" not in j for j in workflow["jobs"].values()), name
        for step in steps(workflow):
            assert "shell" not in step and not step.get("uses", "").startswith("docker://"), f"{name}: {step}"
    # each command has its test below
    followed = {"make book": test_make_book_is_the_build_whose_pieces_the_suite_runs,
                "bash .ci/run": test_ci_run_is_make_test_the_whole_suite_with_ci_true,
                COLAB_COMMAND: test_the_colab_command_is_the_documented_tier_and_selects_every_chapter_unskipped,
                LINKS_COMMAND: test_links_checks_the_built_books_external_links_and_opens_an_issue_on_failure}
    assert set(followed) == {c for commands in RUNS.values() for c in commands}


def test_make_book_is_the_build_whose_pieces_the_suite_runs(monkeypatch):
    import featbook.build as book
    from featbook.notebooks import load_profile

    workflow = load("book.yml")
    # Python 3.11 as the README's commands need (3.10+), set up before `make book` uses python3
    order = [s.get("uses", s.get("run", "")).split("@")[0] for s in workflow["jobs"]["build"]["steps"]]
    assert order.index("actions/setup-python") < order.index("make book") < order.index("actions/upload-pages-artifact")
    setup = uses(workflow, "actions/setup-python")[0]["with"]["python-version"]
    assert setup == "3.11"
    lines = make_dry_run("book")
    assert lines[0] == "test -x .venv/bin/python || python3 -m venv .venv"  # the python3 set up above
    assert ".venv/bin/python -m pip install --quiet -r requirements.txt" in lines
    assert lines[-1] == ".venv/bin/python -m featbook.build --profile small"
    argv = shlex.split(lines[-1])
    assert argv[1:3] == ["-m", "featbook.build"]
    load_profile("small")  # a profile the notebooks have

    # The build that command runs: execute every chapter (small), stage, render, check the pages.
    # (the fakes take any further arguments: only the profile and the folders are checked)
    calls = []
    for piece, kept in (("execute_all", 2), ("stage", 2), ("check_pages", 1)):
        monkeypatch.setattr(book, piece, lambda *args, _piece=piece, _kept=kept, **kw: calls.append((_piece, *args[:_kept])))
    monkeypatch.setattr(book.subprocess, "run", lambda cmd, *args, **kw: calls.append(("jupyter-book", cmd[1:3])))
    assert book.main(argv[3:]) == 0
    built = REPO / "_build"
    assert calls == [("execute_all", "small", built / "executed"), ("stage", built / "executed", built / "stage"),
                     ("jupyter-book", ["build", str(built / "stage")]), ("check_pages", built / "html")]
    # ... and the folder it writes is the one the workflow uploads
    upload = uses(workflow, "actions/upload-pages-artifact")[0]["with"]["path"]
    assert REPO / upload == built / "html"

    # The suite runs the same pieces with the same profile: conftest's `executed` and `built_book`
    # fixtures (execute_all("small"), stage, render), which tests of the whole suite use.
    tree = ast.parse((REPO / "tests" / "conftest.py").read_text())
    fixtures = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}

    def called(function):
        return {(c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", None)):
                [a.value for a in c.args if isinstance(a, ast.Constant)] for c in ast.walk(function) if isinstance(c, ast.Call)}

    assert called(fixtures["executed"]).get("execute_all") == ["small"]
    assert {"stage", "render"} <= set(called(fixtures["built_book"]))
    users = [f.name for path in (REPO / "tests").glob("test_*.py") for f in ast.walk(ast.parse(path.read_text()))
             if isinstance(f, ast.FunctionDef) and f.name.startswith("test_") and "built_book" in [a.arg for a in f.args.args]]
    assert users, "no test renders the book (built_book)"


def test_book_deploys_with_the_pages_actions_from_the_default_branch():
    workflow = load("book.yml")
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert workflow["on"]["push"]["branches"] == [config["repository"]["branch"]] and "workflow_dispatch" in workflow["on"]
    assert workflow["concurrency"]["group"] == "pages" and workflow["permissions"] == {}
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/configure-pages", "actions/deploy-pages"]
    assert workflow["jobs"]["build"]["permissions"] == {"contents": "read"}  # the build gets no Pages token
    for name in RUNS:  # no job keeps the token in .git/config
        assert all(s["with"]["persist-credentials"] is False for s in uses(load(name), "actions/checkout")), name


def test_ci_run_is_make_test_the_whole_suite_with_ci_true():
    script = (REPO / ".ci" / "run").read_text()
    commands = [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert commands[-1] == "make test"
    assert 'export CI="${CI:-true}"' in script
    lines = make_dry_run("test")
    argv = shlex.split(lines[-1])
    assert argv[:3] == [".venv/bin/python", "-m", "pytest"]
    # the whole suite: no marker, keyword, deselection or path narrows it (this file included)
    assert all(a.startswith("--durations") for a in argv[3:]), argv
    pytest_ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert pytest_ini["testpaths"] == ["tests"] and "-m" not in shlex.split(pytest_ini.get("addopts", ""))
    assert Path(__file__).parent == REPO / "tests"

    workflow = load("tests.yml")
    assert {"push", "pull_request"} <= set(workflow["on"])
    job = workflow["jobs"]["test"]
    assert job["timeout-minutes"] == 90 and job["env"]["CI"] == "true"
    # .ci/run calls apt-get without sudo and installs Debian's chromium: root in a Debian image,
    # with the Python book.yml sets up
    image = job["container"] if isinstance(job["container"], str) else job["container"]["image"]
    assert "apt-get install" in script and "sudo" not in script
    assert re.fullmatch(r"python:3\.11(\.\d+)?-bookworm", image), image
    assert "--user" not in str(job["container"])
    assert image.split(":")[1].startswith(uses(load("book.yml"), "actions/setup-python")[0]["with"]["python-version"])


def test_the_colab_command_is_the_documented_tier_and_selects_every_chapter_unskipped(tmp_path):
    from featbook.notebooks import list_notebooks

    workflow = load("colab.yml")
    assert "schedule" in workflow["on"] and workflow["on"]["schedule"][0]["cron"] and "workflow_dispatch" in workflow["on"]
    job = workflow["jobs"]["chapters"]
    assert job["container"] == COLAB_IMAGE and job["permissions"] == {"contents": "read"}
    step = next(s for s in job["steps"] if "run" in s)

    tokens = shlex.split(step["run"])
    assignments = dict(t.split("=", 1) for t in tokens if re.match(r"[A-Z_]+=", t))
    command = tokens[len(assignments):]
    assert set(assignments) == {"PYTHONPATH"}
    # the command tests/test_colab.py documents for its Colab tier
    documented = ast.get_docstring(ast.parse((REPO / "tests" / "test_colab.py").read_text()))
    assert " ".join(command) in documented
    assert command[:3] == ["python", "-m", "pytest"]
    # PYTHONPATH makes importable every package root of pyproject.toml (featlib, featbook)
    roots = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["where"]
    entries = [Path(e.replace("$PWD", str(REPO))).resolve() for e in assignments["PYTHONPATH"].split(":")]
    assert {(REPO / r).resolve() for r in roots} <= set(entries)

    # Collect with those arguments: every chapter, none skipped (conftest skips the tier unless asked).
    probe = tmp_path / "workflow_probe.py"
    probe.write_text("import json, os\n\ndef pytest_collection_finish(session):\n"
                     "    items = [[i.nodeid, i.get_closest_marker('skip') is not None] for i in session.items]\n"
                     "    with open(os.environ['WORKFLOW_PROBE_OUT'], 'w') as f:\n        json.dump(items, f)\n")
    out = tmp_path / "collected.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "FEATLIB_COLAB")}
    env.update(PYTHONPATH=os.pathsep.join([*map(str, entries), str(tmp_path)]), WORKFLOW_PROBE_OUT=str(out))
    done = subprocess.run([sys.executable, *command[1:], "--collect-only", "-q", "-p", "workflow_probe",
                           "-p", "no:cacheprovider"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = dict(json.loads(out.read_text()))
    chapters = {f"tests/test_colab.py::{CHAPTER_TEST}[{nb.name[:2]}]" for nb in list_notebooks()}
    assert len(chapters) == len(list_notebooks()) >= 8 and chapters <= set(collected), sorted(collected)
    assert not any(collected.values()), [k for k, skipped in collected.items() if skipped]
    assert all(k.startswith("tests/test_colab.py::") for k in collected)  # the Colab tier only

    # The report step reads the JUnit file this step writes, and the chapter test's ids.
    assert step["env"] == {"PYTEST_ADDOPTS": "--junitxml=colab-junit.xml"}
    script = next(s for s in job["steps"] if s.get("id") == "results")["with"]["script"]
    assert 'readFileSync("colab-junit.xml"' in script and f"^{CHAPTER_TEST}\\[(\\d\\d)\\]$" in script
    report = workflow["jobs"]["report"]
    assert report["needs"] == "chapters" and report["permissions"] == {"issues": "write"}
    assert "needs.chapters.outputs.failing" in report["steps"][0]["env"]["FAILING"]
    assert workflow["permissions"] == {}


# --- the caches of the book's builds (book.yml, links.yml) -----------------------------------

EXECUTED_PREFIX = "executed-${{ runner.os }}-py${{ steps.python.outputs.python-version }}-"


def cache_problems(workflow: dict, job: str) -> list[str]:
    """How ``job`` of ``workflow`` fails to restore pip's cache and the executed chapters under a
    key that changes with everything a chapter's own key reads (empty: it does both)."""
    from featbook import executed

    problems = []
    steps_ = workflow["jobs"][job]["steps"]
    names = [s.get("uses", s.get("run", "")).split("@")[0] for s in steps_]
    if "make book" not in names:
        return [f"{job} does not run make book"]
    build = names.index("make book")
    setup = [s for s in steps_[:build] if s.get("uses", "").split("@")[0] == "actions/setup-python"]
    pip = setup[0].get("with", {}) if setup else {}
    if pip.get("cache") != "pip":
        problems.append("setup-python does not cache pip's downloads (cache: pip)")
    # the file make book installs from is the file the pip cache is keyed on
    dependency = [p for p in re.split(r"[\s,]+", str(pip.get("cache-dependency-path", ""))) if p]
    installs = [shlex.split(line)[shlex.split(line).index("-r") + 1] for line in make_dry_run("book")
                if " -r " in f" {line} "]
    if not installs or set(installs) != set(dependency):
        problems.append(f"the pip cache is keyed on {dependency}, make book installs {installs}")
    if not setup or setup[0].get("id") != "python":
        problems.append("setup-python has no id python (the key names its Python version)")

    kept = [s for s in steps_[:build] if s.get("uses", "").split("@")[0] == "actions/cache"
            and REPO / str(s.get("with", {}).get("path", "")) == executed.CACHE_DIR]
    if len(kept) != 1:
        return problems + [f"no actions/cache of {executed.CACHE_DIR.relative_to(REPO)} before make book"]
    key, restore = kept[0]["with"]["key"], kept[0]["with"].get("restore-keys", "")
    if not key.startswith(EXECUTED_PREFIX):
        problems.append(f"the key does not start with {EXECUTED_PREFIX} (the OS and the Python version)")
    hashed = re.findall(r"hashFiles\(([^)]*)\)", key)
    patterns = [p for args in hashed for p in re.findall(r"'([^']+)'", args)]
    covered = {Path(p) for pattern in patterns for p in glob.glob(pattern, root_dir=REPO, recursive=True)}
    # what featbook.executed.chapter_key reads from the tree: featlib's and featbook's sources
    # (code_digest), results/ (results_digest), the chapters and their profiles, the pinned packages
    needed = {"featlib and featbook sources": [p for root in executed.CODE_DIRS for p in Path(root).rglob("*.py")
                                               if "__pycache__" not in p.parts],
              "results/": [p for p in executed.RESULTS_MANIFEST.parent.rglob("*") if p.is_file()
                           and not any(part.startswith(".") for part in p.relative_to(REPO).parts)],
              "the chapters and profiles": [*(REPO / "notebooks").glob("*.md"), *(REPO / "notebooks" / "profiles").glob("*")],
              "the pinned packages": [REPO / "requirements.txt"]}
    for what, files in needed.items():
        missing = [f.relative_to(REPO).as_posix() for f in files if f.relative_to(REPO) not in covered]
        if not files or missing:
            problems.append(f"the key does not hash {what}: {missing[:3] or 'no such files'}")
    if [line.strip() for line in restore.splitlines() if line.strip()] != [EXECUTED_PREFIX]:
        problems.append(f"restore-keys is not the key's prefix {EXECUTED_PREFIX} (a changed input would restore nothing)")
    return problems


def test_book_restores_the_pip_cache_and_the_executed_chapters_under_a_key_of_their_inputs():
    assert cache_problems(load("book.yml"), "build") == []


@pytest.mark.parametrize("break_it, complaint", [
    (lambda w: w["jobs"]["build"]["steps"][1]["with"].pop("cache"), "does not cache pip"),
    (lambda w: w["jobs"]["build"]["steps"][2]["with"].update(
        key=w["jobs"]["build"]["steps"][2]["with"]["key"].replace("'book/featbook/**/*.py', ", "")),
     "does not hash featlib and featbook sources: ['book/featbook/"),
    (lambda w: w["jobs"]["build"]["steps"][2]["with"].update(
        key=w["jobs"]["build"]["steps"][2]["with"]["key"].replace(", 'results/**'", "")), "does not hash results/"),
    (lambda w: w["jobs"]["build"]["steps"][2]["with"].pop("restore-keys"), "restore-keys"),
    (lambda w: w["jobs"]["build"]["steps"][2]["with"].update(path="_build/executed"), "no actions/cache of"),
    (lambda w: w["jobs"]["build"]["steps"].insert(1, w["jobs"]["build"]["steps"].pop(3)), "no actions/cache of"),
])
def test_the_cache_check_fails_on_a_cache_that_would_serve_stale_chapters(break_it, complaint):
    workflow = load("book.yml")
    assert [s.get("uses", s.get("run", "")).split("@")[0] for s in workflow["jobs"]["build"]["steps"][:4]] == [
        "actions/checkout", "actions/setup-python", "actions/cache", "make book"]
    break_it(workflow)
    problems = cache_problems(workflow, "build")
    assert any(complaint in p for p in problems), problems


# --- links.yml: the weekly external link check -------------------------------------------------

def test_links_checks_the_built_books_external_links_and_opens_an_issue_on_failure(tmp_path, monkeypatch):
    from featbook import linkcheck

    workflow = load("links.yml")
    assert "schedule" in workflow["on"] and workflow["on"]["schedule"][0]["cron"] and "workflow_dispatch" in workflow["on"]
    assert workflow["permissions"] == {}
    job = workflow["jobs"]["links"]
    assert job["permissions"] == {"contents": "read"}
    # built as book.yml builds it, with the same caches
    assert cache_problems(workflow, "links") == []
    book = load("book.yml")["jobs"]["build"]["steps"]
    for action in ("actions/setup-python", "actions/cache"):
        mine = [s for s in job["steps"] if s.get("uses", "").split("@")[0] == action]
        assert [s["with"] for s in mine] == [s["with"] for s in book if s.get("uses", "").split("@")[0] == action]
    runs = [s["run"].strip() for s in job["steps"] if "run" in s]
    assert runs == ["make book", LINKS_COMMAND]

    # the check reads what make book writes (book.yml uploads the same folder)
    argv = shlex.split(LINKS_COMMAND)
    assert argv[:3] == [".venv/bin/python", "-m", "featbook.linkcheck"] and "--external" in argv
    assert REPO / argv[-1] == REPO / uses(load("book.yml"), "actions/upload-pages-artifact")[0]["with"]["path"]
    assert make_dry_run("book")[-1].startswith(".venv/bin/python -m featbook.build")
    # run with these arguments on a fabricated build with one broken link: exit 1 (the step fails)
    # and the report file holds what the report step reads
    html = tmp_path / argv[-1]
    (html / "book").mkdir(parents=True)
    (html / "book" / "intro.html").write_text('<a href="https://example.org/gone">x</a>')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(linkcheck, "check_url", lambda url, timeout: (404, "404 Not Found"))
    assert linkcheck.main(argv[3:]) == 1
    report = json.loads((tmp_path / LINKS_REPORT).read_text())
    assert report["broken"] == [{"url": "https://example.org/gone", "status": 404, "reason": "404 Not Found",
                                 "pages": ["book/intro.html"]}]
    results = next(s for s in job["steps"] if s.get("id") == "results")
    assert results["if"] == "always()" and results["uses"].split("@")[0] == "actions/github-script"
    script = results["with"]["script"]
    assert f'readFileSync("{LINKS_REPORT}"' in script
    assert all(f"b.{field}" in script for field in ("url", "reason", "pages")) and "report.broken" in script
    assert job["outputs"]["broken"] == "${{ steps.results.outputs.broken }}"

    # an issue when the job fails (a broken link, or a failed build), opened once then updated
    report_job = workflow["jobs"]["report"]
    assert report_job["needs"] == "links" and report_job["permissions"] == {"issues": "write"}
    assert "!cancelled()" in report_job["if"] and "needs.links.result != 'success'" in report_job["if"]
    step = report_job["steps"][0]
    assert step["uses"].split("@")[0] == "actions/github-script"
    assert step["env"]["BROKEN"] == "${{ needs.links.outputs.broken }}"
    for call in ("github.rest.issues.create(", "github.rest.issues.update(", "github.rest.issues.createComment("):
        assert call in step["with"]["script"], call

    # and the check itself is tested against a local server (tests/test_linkcheck.py)
    tree = ast.parse((REPO / "tests" / "test_linkcheck.py").read_text())
    external_tests = [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_external")
                      and any(isinstance(c, ast.Constant) and c.value == "--external" for c in ast.walk(f))]
    assert len(external_tests) >= 3, external_tests
