"""Before a long run: what it will cost, on which device, and where its cache survives.

Every chapter calls :func:`preflight` after its parameters are checked and before anything
long starts. It prints

* the device this runtime has, and the run's estimated time on a Colab T4 GPU and on a 2-core
  CPU (:mod:`featbook.estimate`; estimates, not measurements, and it says so);
* the run's estimated peak GPU memory and the stage that sets it (:func:`memory_text`, from
  featlib's memory model), compared with this runtime's GPU (its CUDA device's total memory) or,
  without one, with a Colab T4's 15 GB; when it does not fit, one warning line with the remedy:
  a profile, and what to shrink for that stage (fewer configurations or seeds in a stack, a
  smaller batch, ...);
* on a machine without a GPU, when the run is long: a warning, and how to get a GPU in Colab
  (Runtime > Change runtime type > T4 GPU) or which profile fits a CPU, said the way a notebook
  user applies it: in a chapter notebook (its first cell names the chapter), the one line that
  applies the profile (``from featbook import profiles; profiles.apply("small", globals())``,
  :func:`featbook.profiles.apply`) and its values as Python to paste into the parameters cell;
  elsewhere the ``--profile`` option of ``python -m featbook.notebooks``, and that same line for a
  notebook;
* in Colab: that ``/content`` is wiped when the runtime is recycled, and that the chapter's
  ``cache_on_drive`` parameter keeps the caches in Google Drive instead.

:func:`cache_location` moves a cache folder to Google Drive when asked (Colab only).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path, PurePosixPath

from featbook import prose
from featbook.estimate import Estimate

#: Runs longer than this on a CPU get the warning.
CPU_WARNING_S = 15 * 60
#: Where ``cache_on_drive`` puts caches (Google Drive mounted by Colab at /content/drive).
DRIVE_MOUNT = "/content/drive"
DRIVE_ROOT = DRIVE_MOUNT + "/MyDrive/feat-book"

GPU_HOWTO = ("In Colab, choose Runtime > Change runtime type > T4 GPU (or a faster GPU), save, and run the "
             "notebook again from the top.")


def in_colab() -> bool:
    return "google.colab" in sys.modules


def has_gpu() -> bool:
    from featlib.device import get_device

    return get_device().type == "cuda"


def preflight(estimate: Estimate, *, profile_hint: str = "the small profile", cache_dirs: list | None = None,
              drive: bool = False) -> None:
    """Print what the reader should know before the run starts (:func:`preflight_text`)."""
    print(preflight_text(estimate, profile_hint=profile_hint, cache_dirs=cache_dirs, drive=drive))


def preflight_text(estimate: Estimate, *, profile_hint: str = "the small profile", cache_dirs: list | None = None,
                   drive: bool = False) -> str:
    """The device, the estimated time, a warning on a CPU when the run is long (with how to get
    a GPU in Colab), and in Colab where the caches survive."""
    from featlib.device import describe_device

    lines = [f"Device: {describe_device()}.",
             f"Estimated time of this run: {estimate.describe()}."]
    gpu = has_gpu()
    memory = memory_text(estimate, *gpu_capacity(), profile=memory_profile())
    if memory:
        lines.append(memory)
    if not gpu and estimate.cpu_s > CPU_WARNING_S:
        lines.append(f"WARNING: this runtime has no GPU, and on a CPU this run needs about "
                     f"{prose.minutes(estimate.cpu_s)}. {GPU_HOWTO} {profile_advice(profile_hint)}")
    elif not gpu and in_colab():
        lines.append(f"This runtime has no GPU; this run is short enough for a CPU. {GPU_HOWTO}")
    if in_colab() and cache_dirs and not drive:
        lines.append("Caches are kept under /content, which Colab deletes when the runtime is recycled; set "
                     "cache_on_drive = True in the parameters cell to keep them in Google Drive "
                     f"({DRIVE_ROOT}), so that a stopped run resumes in a later session.")
    return "\n".join(lines)


def gpu_capacity() -> tuple[int, str | None]:
    """(bytes, name) of the GPU a run's peak is compared with: this runtime's CUDA device (its total
    memory and name), or with no GPU a Colab T4 (:data:`featlib.training.memory.T4_BYTES`, name None)."""
    from featlib.device import get_device
    from featlib.training.memory import T4_BYTES
    from featlib.validation import memory_bytes

    if has_gpu():
        import torch

        device = get_device()
        return memory_bytes(device), torch.cuda.get_device_name(device)
    return T4_BYTES, None


def memory_profile(chapter: str | None = None) -> str:
    """The profile that shrinks a run to a T4: ``colab``, or ``small`` for a notebook that already
    runs the colab profile's values."""
    from featbook import profiles

    namespace = profiles.notebook_namespace()
    chapter = chapter or profiles.notebook_chapter(namespace)
    if chapter is not None and profiles.in_use("colab", chapter, namespace):
        return "small"
    return "colab"


def _objective(key: str) -> str:
    from featlib.experiments.labels import OBJECTIVE_LABELS

    return OBJECTIVE_LABELS.get(key, key)


def stage_words(peak) -> str:
    """What a :class:`~featlib.training.memory.StagePeak` is, in a few words with its sizes."""
    from featlib.cost.benchmark import BACKBONE_NAMES
    from featlib.experiments.labels import LEARNER_LABELS

    z = peak.sizes
    if peak.stage == "ERM-NF stack":
        return (f"the ERM-NF stack of {_objective(z['objective'])}: {prose.count(z['configurations'], 'configuration')} "
                f"trained at once on {prose.integer(z['n_train'])} images, hidden width {z['hidden_dim']}")
    if peak.stage == "frozen-feature stack":
        return (f"the frozen-feature stack of {_objective(z['objective'])}: {prose.count(z['groups'], 'featurizer')} "
                f"(learners x seeds) x {prose.count(z['configurations'], 'configuration')} on "
                f"{prose.integer(z['n_train'])} images")
    if peak.stage == "feature learning":
        network = "CNN" if z["model"] == "cnn" else f"MLP of width {z['hidden_dim']}"
        return (f"feature learning: {LEARNER_LABELS.get(z['learner'], z['learner'])}, the {network} on "
                f"{prose.integer(z['n_train'])} images at once")
    backbone = BACKBONE_NAMES.get(z.get("backbone"), z.get("backbone"))
    unit = f"{z['tokens']} tokens" if "tokens" in z else f"{z.get('side')} px"
    if peak.stage == "backbone step":
        return f"a training step of the {backbone} on {prose.count(z['batch_size'], 'example')} of {unit}"
    if peak.stage == "embedding pass":
        return f"embedding batches of {prose.integer(z['batch_size'])} examples of {unit} with the {backbone}"
    if peak.stage == "WILDS OOD stage":
        return f"the OOD stage, with the {backbone} embeddings of all {prose.integer(z['examples'])} examples on the GPU"
    return f"the two-bit model on {prose.integer(z['n'])} examples of dimension {z['d']}"


def stage_remedy(peak) -> str:
    """What to shrink so that the stage ``peak`` needs less memory, as an imperative clause."""
    z = peak.sizes
    if peak.stage == "ERM-NF stack":
        out = "train fewer configurations per stack (fewer penalty_weights or pretrain_epochs)"
        return out + (", or leave IGA, the dearest objective, out of objectives" if z["objective"] == "iga" else "")
    if peak.stage == "frozen-feature stack":
        return ("train fewer seeds or learners (each objective trains every learner and seed in one stack), or fewer "
                "penalty_weights or pretrain_epochs")
    if peak.stage == "feature learning":
        return "use fewer training images (n_train) or a narrower network (hidden_dim)"
    if peak.stage == "backbone step":
        return "use a smaller batch_size, or a smaller " + ("max_token_length" if "tokens" in z else "resolution")
    if peak.stage == "embedding pass":
        return "use a smaller " + ("max_token_length" if "tokens" in z else "resolution")
    if peak.stage == "WILDS OOD stage":
        return "cap the examples per split (max_examples)"
    return "use fewer examples (n_per_env) or a smaller d"


def memory_text(estimate: Estimate, capacity: int, gpu_name: str | None = None, profile: str = "colab") -> str | None:
    """One line on the run's estimated peak GPU memory (:attr:`Estimate.peak`, with what a GPU holds
    beside the tensors): the stage that sets it and whether it fits ``capacity`` bytes, those of the
    GPU ``gpu_name`` or, when None (no GPU here), of a Colab T4. When it does not fit, the line is
    a warning with the remedy: ``profile``, and what to shrink for that stage. None when the
    estimate has no stages."""
    from featlib.validation import format_bytes

    peak = estimate.peak
    if peak is None:
        return None
    needed = format_bytes(peak.gpu_bytes)
    where = (f"the {format_bytes(capacity)} of this runtime's GPU ({gpu_name})" if gpu_name
             else f"a Colab T4's {format_bytes(capacity)}")
    if peak.gpu_bytes <= capacity:
        return (f"Estimated peak GPU memory of this run: about {needed}{'' if gpu_name else ' on a GPU'} "
                f"({stage_words(peak)}), within {where}.")
    start = ("this run needs about {} of GPU memory at its peak" if gpu_name
             else "on a GPU this run would need about {} of memory at its peak").format(needed)
    return (f"WARNING: {start} ({stage_words(peak)}), more than {where}: apply the {profile} profile "
            f"(`{apply_line(profile)}` at the end of the parameters cell), or {stage_remedy(peak)}.")


def profile_advice(profile_hint: str = "the small profile", chapter: str | None = None) -> str:
    """How to run the profile ``profile_hint`` names ("the small profile ..."): in a chapter
    notebook (``chapter``, else the one its first cell named) the line that applies it and its
    values as Python for the parameters cell (or, when the notebook already has them, says so);
    elsewhere the command-line option, and the line for a notebook."""
    from featbook import profiles

    match = re.search(r"the (\w+) profile", profile_hint)
    name = match.group(1) if match else "small"
    namespace = profiles.notebook_namespace()
    chapter = chapter or profiles.notebook_chapter(namespace)
    line = apply_line(name)
    if chapter is None:
        return (f"On a CPU, the {name} profile is the size that fits: python -m featbook.notebooks --profile {name} "
                f"runs the chapters with it; in a chapter notebook (Colab included), add the line `{line}` at the end "
                "of its parameters cell.")
    if profiles.in_use(name, chapter, namespace):
        return f"This run already has the {name} profile's values, the smallest this chapter offers."
    values = profiles.as_python(name, chapter)
    return (f"On a CPU, the {name} profile is the size that fits: add the line\n"
            f"    {line}\n"
            "at the end of the parameters cell and run the notebook again"
            + (", or paste its values there:\n" + "\n".join(f"    {value}" for value in values.splitlines())
               if values else "."))


def apply_line(name: str) -> str:
    """The one line that applies profile ``name`` in a notebook (at the end of its parameters cell)."""
    return f'from featbook import profiles; profiles.apply("{name}", globals())'


def drive_path(path: str) -> Path:
    """Where :func:`cache_location` keeps ``path`` in Google Drive: the same relative path under
    :data:`DRIVE_ROOT` (``_cache/wilds`` and ``data/wilds`` stay apart; ``..`` parts dropped), an
    absolute path by its last component."""
    posix = PurePosixPath(Path(path).as_posix())
    if posix.is_absolute():
        return Path(DRIVE_ROOT) / posix.name
    return Path(DRIVE_ROOT, *[part for part in posix.parts if part not in ("..", ".")])


def cache_location(path: str | None, on_drive: bool) -> str | None:
    """``path`` itself, or with ``on_drive`` in Colab the same folder under :data:`DRIVE_ROOT`
    in Google Drive (mounted here if needed; :func:`drive_path`). Outside Colab ``on_drive``
    changes nothing. Two chapters that name the same folder share it there, so chapter 06 finds
    the models (and the data) that chapter 05 left."""
    if path is None or not on_drive:
        return path
    if not in_colab():
        print("cache_on_drive only applies in Colab; keeping the cache at", path)
        return path
    from google.colab import drive  # noqa: F401 (Colab only)

    if not Path(DRIVE_MOUNT, "MyDrive").exists():
        drive.mount(DRIVE_MOUNT)
    moved = drive_path(path)
    moved.mkdir(parents=True, exist_ok=True)
    print(f"cache: {moved} (Google Drive)")
    return str(moved)
