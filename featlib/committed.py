"""Committed full-scale results, in a checkout or fetched from the repository (Colab).

Chapters read the results committed under ``results/`` (``../results/cmnist`` and so on,
relative to ``notebooks/``). In a checkout they are on disk. A notebook opened in Colab has no
checkout: there, when the ``results`` folder is absent, :func:`locate` fetches the files of the
requested folder from the book's repository (:func:`featlib.repository.repository`, the same
setting the install cell uses) into a local folder and returns it, saying so. It lists the
repository's files once through GitHub's API and downloads each file of the folder from
GitHub's raw file server.

In a checkout that has a ``results`` folder nothing is fetched: a missing sub-folder means
that nothing is committed there, and :func:`locate` returns ``None``.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .repository import Repository, repository

#: Where fetched results go (relative to the working directory), unless told otherwise.
FETCH_DIR = Path("_cache/committed")
TIMEOUT_S = 30


@dataclass
class Located:
    """Where a chapter's committed results are: ``path`` (``None``: there are none) and a
    sentence for the reader saying where they came from."""

    path: Path | None
    note: str
    fetched: bool = False

    def __bool__(self) -> bool:
        return self.path is not None


def _get(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "featlib"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 (https URLs we build)
        return response.read()


def results_subpath(path: str | Path) -> str:
    """``"../results/cmnist"`` -> ``"results/cmnist"``: the folder's path in the repository."""
    parts = Path(path).as_posix().split("/")
    if "results" not in parts:
        raise ValueError(f"committed results live under results/; got {path}")
    return "/".join(parts[parts.index("results"):])


def fetch(sub: str, repo: Repository, dest: Path, get=_get) -> list[str]:
    """Download every file under ``sub`` (e.g. ``results/cmnist``) of ``repo`` into ``dest``
    (keeping the layout below ``sub``); the repository paths fetched."""
    listing = json.loads(get(repo.tree_url()))
    files = [item["path"] for item in listing.get("tree", [])
             if item.get("type") == "blob" and item["path"].startswith(sub.rstrip("/") + "/")]
    for path in files:
        target = dest / path[len(sub.rstrip("/")) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(get(repo.raw_url(path)))
    return files


def locate(path: str | Path | None, fetch_dir: str | Path = FETCH_DIR, get=_get) -> Located:
    """The committed results folder ``path`` (e.g. ``"../results/cmnist"``): on disk in a
    checkout; fetched from the repository when the ``results`` folder itself is absent."""
    if not path:
        return Located(None, "No committed results were asked for (the parameter is None).")
    path = Path(path)
    sub = results_subpath(path)
    root = Path(*path.parts[:path.parts.index("results") + 1])
    if root.is_dir():  # a checkout: what is committed is here
        if path.exists() and any(path.iterdir()):
            return Located(path, f"Read from the repository's `{sub}`.")
        return Located(None, f"Nothing is committed in the repository's `{sub}` yet.")
    repo = repository()
    if repo is None or repo.github is None:
        return Located(None, f"This runtime has no `{root}` folder and no GitHub repository is set "
                             "(FEATLIB_REPOSITORY), so the committed results could not be fetched.")
    dest = Path(fetch_dir) / sub
    if dest.exists() and any(dest.rglob("*")):
        return Located(dest, f"Fetched earlier from `{sub}` of {repo.url} (branch {repo.branch}) into `{dest}`.",
                       fetched=True)
    try:
        files = fetch(sub, repo, dest, get=get)
    except (urllib.error.URLError, OSError, ValueError) as err:
        return Located(None, f"This runtime has no `{root}` folder, and fetching `{sub}` from {repo.url} "
                             f"failed ({err}); only this run's results are shown.")
    if not files:
        return Located(None, f"Nothing is committed in `{sub}` of {repo.url} (branch {repo.branch}) yet.")
    return Located(dest, f"This runtime has no checkout of the repository, so the {len(files)} committed files of "
                         f"`{sub}` were fetched from {repo.url} (branch {repo.branch}) into `{dest}`.", fetched=True)
