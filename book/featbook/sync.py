"""Write each chapter's notebook (``notebooks/NN_name.ipynb``) from its MyST source (``NN_name.md``).

The ``.md`` is the chapter: edit it, then run

    python -m featbook.sync           # write every .ipynb that differs from its source
    python -m featbook.sync --check   # write nothing; exit 1 naming each .ipynb out of sync
                                      # or without its .md source

The ``.ipynb`` is what Colab, papermill and sweeps open (:func:`featbook.chapters.colab_notebook`):
its first code cell is the chapter's install cell (``install_cell_source`` of
``featbook.install_cell``, from the ``repository`` setting of ``_config.yml``) and its markdown has
no MyST roles. A notebook is only written when its text changes, and never without its source;
an ``.ipynb`` with no ``.md`` beside it is reported, not deleted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from featbook.chapters import colab_notebook, sources, write_text
from featlib.store.atomic import atomic_write_text
from featbook.install_cell import install_cell_source
from featbook.notebooks import NOTEBOOK_DIR


def expected(source: Path) -> str:
    """The text the chapter's ``.ipynb`` must hold."""
    return write_text(colab_notebook(source, install_cell_source(source.stem[:2])))


def out_of_sync(directory: Path = NOTEBOOK_DIR) -> tuple[list[Path], list[Path]]:
    """(notebooks whose text differs from what their source makes, notebooks with no source)."""
    stale = [s.with_suffix(".ipynb") for s in sources(directory)
             if not s.with_suffix(".ipynb").exists() or s.with_suffix(".ipynb").read_text(encoding="utf-8") != expected(s)]
    have = {s.stem for s in sources(directory)}
    orphans = [p for p in sorted(directory.glob("[0-9][0-9]_*.ipynb")) if p.stem not in have]
    return stale, orphans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a notebook is out of sync")
    parser.add_argument("--dir", type=Path, default=NOTEBOOK_DIR, help="the chapters' folder (default: notebooks/)")
    args = parser.parse_args(argv)
    if not args.dir.is_dir() or not sources(args.dir):
        print(f"error: --dir {args.dir} holds no chapter sources (NN_name.md); pass the notebooks folder",
              file=sys.stderr)
        return 2
    try:
        stale, orphans = out_of_sync(args.dir)
    except ValueError as err:  # a role with no plain form, an unknown citation key or chapter
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path in orphans:
        print(f"warning: {path.name} has no source {path.stem}.md (left as it is)", file=sys.stderr)
    if args.check:
        for path in stale:
            print(f"out of sync: {path.name} (run python -m featbook.sync)")
        return 1 if stale or orphans else 0
    for path in stale:
        try:
            atomic_write_text(path, expected(path.with_suffix(".md")))  # a full disk leaves the old notebook whole
        except OSError as err:
            print(f"error: {err.filename or path}: {err.strerror or err}; {path.name} is kept as it was: free space, "
                  "then run again", file=sys.stderr)
            return 2
        print(f"wrote {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
