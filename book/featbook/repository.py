"""The book's repository: one setting, ``repository`` in ``_config.yml``, read by everything.

Three things need to know where the book lives: the install cell of every notebook
(``pip install git+<url>@<branch>`` in Colab), the launch buttons of the rendered pages (Jupyter
Book reads ``repository.url`` itself) and the fetching of committed results in Colab
(:mod:`featbook.committed`). They all read ``repository.url`` and ``repository.branch`` of
``_config.yml``:

* ``featbook.install_cell`` writes them into each notebook's install cell (re-run
  ``python -m featbook.sync`` after changing the setting);
* the install cell, in Colab, sets ``FEATLIB_REPOSITORY`` (``<url>@<branch>``) to that value
  unless the runtime already has it (so a fork can point a notebook elsewhere without editing
  it), installs featlib from it, and :func:`repository` reads it first, since a Colab runtime has
  the notebook but not the repository's ``_config.yml``;
* in a checkout, :func:`repository` reads ``_config.yml`` next to the package.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: Environment variable that the Colab install cell sets to ``<url>@<branch>``.
ENV = "FEATLIB_REPOSITORY"
CONFIG = Path(__file__).resolve().parents[2] / "_config.yml"  # book/featbook/repository.py


@dataclass(frozen=True)
class Repository:
    url: str
    branch: str = "main"

    @property
    def github(self) -> tuple[str, str] | None:
        """``(owner, name)`` for a GitHub URL (``https://github.com/o/r``, or the SSH forms
        ``git@github.com:o/r.git`` and ``ssh://git@github.com/o/r``), else ``None``."""
        match = (re.fullmatch(r"https?://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?", self.url)
                 or re.fullmatch(r"(?:ssh://)?git@github\.com[:/]([^/]+)/([^/]+?)(?:\.git)?/?", self.url))
        return (match.group(1), match.group(2)) if match else None

    def raw_url(self, path: str) -> str:
        """The URL of a file of the repository at ``branch`` (GitHub's raw files)."""
        owner_name = self.github
        if owner_name is None:
            raise ValueError(f"only GitHub repositories serve raw files by URL; got {self.url}")
        return f"https://raw.githubusercontent.com/{owner_name[0]}/{owner_name[1]}/{self.branch}/{path}"


def from_config(path: str | Path = CONFIG) -> Repository:
    """``repository.url`` and ``repository.branch`` of a Jupyter Book ``_config.yml``."""
    import yaml

    config = yaml.safe_load(Path(path).read_text()) or {}
    section = config.get("repository") or {}
    if not section.get("url"):
        raise ValueError(f"{path} has no repository.url")
    return Repository(str(section["url"]).rstrip("/"), str(section.get("branch") or "main"))


def parse(value: str) -> Repository:
    """``<url>`` or ``<url>@<branch>`` -> :class:`Repository` (branch ``main`` when none is given).

    The last ``@`` separates a branch only when it follows the start of the repository's path (a
    ``/`` after the scheme's ``://``, or the ``:`` of the SSH form ``git@github.com:owner/repo``);
    an ``@`` before it is the user of the URL (``git@github.com:owner/repo.git``,
    ``ssh://git@host/owner/repo``, ``https://user:token@host/...``). A branch name never holds ``:``."""
    value = value.strip()
    scheme, sep, rest = value.partition("://")
    if not sep:
        rest = value
    head, at, branch = rest.rpartition("@")
    path_begun = "/" in head if sep else ("/" in head or ":" in head)
    if at and path_begun and branch and ":" not in branch:
        url = value[: len(value) - len(branch) - 1]
    else:
        url, branch = value, ""
    return Repository(url.rstrip("/"), branch or "main")


def repository() -> Repository | None:
    """The book's repository: ``FEATLIB_REPOSITORY`` if set, else ``_config.yml`` of the checkout
    featlib runs from, else ``None`` (featlib installed without its repository, outside Colab)."""
    if os.environ.get(ENV):
        return parse(os.environ[ENV])
    if CONFIG.exists():
        return from_config(CONFIG)
    return None
