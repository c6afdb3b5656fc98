"""Build the Jupyter Book (1.x) from notebooks executed with a parameter profile.

The book's source is the repository root (``_config.yml``, ``_toc.yml``, ``book/``,
``notebooks/``). Each chapter is a MyST markdown notebook (``notebooks/NN_name.md``); the build
makes the book's notebook of each from its source (MyST roles intact, no Colab install cell:
:func:`featbook.notebooks.execute_all`), executes it through papermill (the ``small`` profile on
CPU by default) and stages a copy of the book's source in ``_build/stage`` with those executed
notebooks in place (the committed ``.ipynb`` are what Colab opens, not what the book renders), then renders ``_build/html`` with warnings as errors.
A failing notebook fails the build, and so does a page that shows leaked code
(:func:`check_pages`).

MathJax is served with the book: the ``es5`` build of the ``mathjax`` Python package
(``django-static-mathjax``) is copied into the staged source and ``mathjax_path`` points to it,
so equations render offline. Without that package the pages load MathJax from a CDN.
The staged ``_config.yml`` also loads ``book/featbook/sphinx_fixes.py`` as a local Sphinx extension and
``book/featbook.css`` as the page stylesheet and ``book/featbook.js`` as its script.

    python -m featbook.build [--profile small|full] [--executed DIR]
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from featbook.notebooks import REPO_ROOT, execute_all, list_notebooks

BOOK_SOURCES = ("_config.yml", "_toc.yml", "book")

#: MathJax's combined component that the pages load (TeX and MathML input, CommonHTML output).
MATHJAX_ENTRY = "tex-mml-chtml.js"
#: Static folder of the staged book holding MathJax; Sphinx copies its content into ``_static``.
#: Not ``_static`` itself: Jupyter Book would add every ``.js`` found there to every page.
MATHJAX_STATIC = "_mathjax"
#: The staged local Sphinx extension (a copy of ``book/featbook/sphinx_fixes.py``) and its folder.
SPHINX_EXT, SPHINX_EXT_DIR = "featlib_sphinx_fixes", "_ext"
#: The page stylesheet (``book/featbook.css``: nothing wider than the column, equations scroll in
#: their own box, code wraps) and the static folder it is staged in. Not ``_static``: with a
#: ``_static`` folder Jupyter Book adds every .js of every static folder (MathJax's too) to every page.
PAGE_CSS, PAGE_CSS_DIR = "featbook.css", "_featbook"
#: The page script (``book/featbook.js``: a tap on a figure opens it alone at full size), staged beside it.
PAGE_JS = "featbook.js"


def mathjax_es5() -> Path | None:
    """MathJax's ``es5`` folder from the installed ``mathjax`` package, or ``None`` if absent."""
    spec = importlib.util.find_spec("mathjax")
    for location in (spec.submodule_search_locations or []) if spec else []:
        es5 = Path(location) / "static" / "mathjax" / "es5"
        if (es5 / MATHJAX_ENTRY).is_file():
            return es5
    return None


def _other_combined_components(directory: str, names: list[str]) -> set[str]:
    """``copytree`` filter: the top-level combined components that the pages never load."""
    if Path(directory).name != "es5":
        return set()
    return {n for n in names if n.endswith(".js") and n.startswith(("tex-", "mml-")) and n != MATHJAX_ENTRY}


def vendor_mathjax(stage_dir: Path, sphinx_config: dict, es5: Path | None = None) -> bool:
    """Serve MathJax from the staged book's static files; return whether it could.

    Copies ``es5`` (less the combined components the pages never load) to
    ``_mathjax/mathjax`` and points ``mathjax_path`` (relative to ``_static``) at it in
    ``sphinx_config``. Without the ``mathjax`` package nothing changes: the pages load MathJax
    from a CDN (printed notice).
    """
    es5 = es5 or mathjax_es5()
    if es5 is None:
        print("notice: the mathjax package (pip install --no-deps django-static-mathjax) is not installed; "
              "the book's pages will load MathJax from a CDN", flush=True)
        return False
    static = stage_dir / MATHJAX_STATIC
    if static.exists():
        shutil.rmtree(static)
    shutil.copytree(es5, static / "mathjax", ignore=_other_combined_components)
    sphinx_config["html_static_path"] = [*sphinx_config.get("html_static_path", []), MATHJAX_STATIC]
    sphinx_config["mathjax_path"] = f"mathjax/{MATHJAX_ENTRY}"
    return True


def configure_stage(stage_dir: Path) -> None:
    """Adapt the staged ``_config.yml``: MathJax served locally, ``book/featbook/sphinx_fixes.py``
    (one copy of each page script) as a local Sphinx extension, and the page stylesheet."""
    config_path = stage_dir / "_config.yml"
    config = yaml.safe_load(config_path.read_text())
    sphinx = config.setdefault("sphinx", {})
    sphinx_config = sphinx.setdefault("config", {})
    ext_dir = stage_dir / SPHINX_EXT_DIR
    ext_dir.mkdir(exist_ok=True)
    shutil.copy2(Path(__file__).with_name("sphinx_fixes.py"), ext_dir / f"{SPHINX_EXT}.py")
    sphinx["local_extensions"] = {**(sphinx.get("local_extensions") or {}), SPHINX_EXT: SPHINX_EXT_DIR}
    vendor_mathjax(stage_dir, sphinx_config)
    css_dir = stage_dir / PAGE_CSS_DIR
    css_dir.mkdir(exist_ok=True)
    shutil.copy2(stage_dir / "book" / PAGE_CSS, css_dir / PAGE_CSS)
    shutil.copy2(stage_dir / "book" / PAGE_JS, css_dir / PAGE_JS)
    sphinx_config["html_static_path"] = [*sphinx_config.get("html_static_path", []), PAGE_CSS_DIR]
    sphinx_config["html_css_files"] = [*sphinx_config.get("html_css_files", []), PAGE_CSS]
    sphinx_config["html_js_files"] = [*sphinx_config.get("html_js_files", []), PAGE_JS]
    config["exclude_patterns"] = [*config.get("exclude_patterns", []), MATHJAX_STATIC, SPHINX_EXT_DIR, PAGE_CSS_DIR]
    from featlib.store.atomic import atomic_write_text

    atomic_write_text(config_path, "# Staged by featbook.build from the repository's _config.yml.\n"
                      + yaml.safe_dump(config, sort_keys=False, allow_unicode=True))


def stage(executed_dir: Path, stage_dir: Path) -> None:
    """The book source in ``stage_dir``, with the executed notebooks in place. It is made beside
    and then synced in (:func:`sync_tree`): a file whose bytes did not change keeps its time, so
    Sphinx re-reads only the pages that changed."""
    fresh = stage_dir.with_name(stage_dir.name + ".new")
    if fresh.exists():
        shutil.rmtree(fresh)
    fresh.mkdir(parents=True)
    for name in BOOK_SOURCES:
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, fresh / name)
    (fresh / "notebooks").mkdir()
    for nb in list_notebooks():
        executed = executed_dir / nb.name
        if not executed.exists():
            raise FileNotFoundError(f"{executed} is missing: execute the notebooks first (python -m featbook.notebooks)")
        shutil.copy2(executed, fresh / "notebooks" / nb.name)
        _label_injected_cell(fresh / "notebooks" / nb.name)
    from featbook.claims import write as write_claims

    write_claims(fresh, REPO_ROOT / "results", executed_dir)  # the introduction's table, from the committed results
    configure_stage(fresh)
    sync_tree(fresh, stage_dir)
    shutil.rmtree(fresh)


def _label_injected_cell(path: Path) -> None:
    """The staged chapter ``path`` with the cell papermill injected labelled for the reader
    (:func:`featbook.executed.label_injected`); a chapter run with its defaults has none."""
    import nbformat

    from featbook.chapters import write_text
    from featbook.executed import label_injected
    from featlib.store.atomic import atomic_write_text

    nb = nbformat.read(str(path), as_version=4)
    if label_injected(nb):
        atomic_write_text(path, write_text(nb))


def sync_tree(source: Path, target: Path) -> int:
    """Make ``target`` hold exactly the files of ``source``: a file is copied only where it is new
    or its bytes differ (an unchanged one keeps its modification time), and files and folders that
    ``source`` lacks are removed (``target`` is the build's own staging folder). Returns the files
    copied."""
    target.mkdir(parents=True, exist_ok=True)
    wanted = {p.relative_to(source) for p in source.rglob("*")}
    for path in sorted(target.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.relative_to(target) not in wanted or path.is_dir() != (source / path.relative_to(target)).is_dir():
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    copied = 0
    for rel in sorted(wanted, key=lambda p: len(p.parts)):
        src, dst = source / rel, target / rel
        if src.is_dir():
            dst.mkdir(exist_ok=True)
        elif not dst.exists() or dst.read_bytes() != src.read_bytes():
            from featlib.store.atomic import atomic_write

            atomic_write(dst, lambda tmp, src=src: shutil.copy2(src, tmp))
            copied += 1
    return copied


def render(stage_dir: Path, out_root: Path) -> Path:
    """Run ``jupyter-book build`` on the staged source and move the figures' pictures out of the
    pages (:func:`externalize_pictures`); return the HTML directory."""
    out_root.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(stage_dir), "--path-output", str(out_root),
           "-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    html = out_root / "_build" / "html"
    externalize_pictures(html)
    return html


#: An image a notebook sent inside its HTML (:mod:`featbook.phone`'s pictures): a PNG as a data URI.
_DATA_PNG = re.compile(r'data:image/png;base64,([A-Za-z0-9+/=]+)')


def externalize_pictures(html: Path) -> int:
    """Move the images that the pages carry inside their HTML (each figure's ``<picture>``: as
    drawn and its phone drawing, :mod:`featbook.phone`) into ``_images/`` as files named by their
    content, and point the pages at them, as Sphinx does with a notebook's PNG outputs: the pages
    stay small, a reader's browser fetches only the drawing it shows, and a tap opens a file.
    Returns the number of image files written."""
    import base64
    import hashlib

    from featlib.store.atomic import atomic_write, atomic_write_text

    images = html / "_images"
    written = 0
    for page in sorted(html.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        if "data:image/png;base64," not in text:
            continue
        up = "../" * (len(page.relative_to(html).parts) - 1)

        def to_file(match: re.Match) -> str:
            nonlocal written
            data = base64.b64decode(match.group(1))
            name = f"feat-{hashlib.sha256(data).hexdigest()[:16]}.png"
            if not (images / name).exists():
                images.mkdir(exist_ok=True)
                atomic_write(images / name, lambda tmp: tmp.write_bytes(data))
                written += 1
            return f"{up}_images/{name}"

        atomic_write_text(page, _DATA_PNG.sub(to_file, text))
    return written


class LeakedCodeError(ValueError):
    """The rendered pages show code where a reader expects prose (see :mod:`featbook.leaks`)."""


def check_pages(html: Path) -> None:
    """Fail the build when a chapter or book page shows leaked code: a dict repr, ``{...}``
    outside mathematics, an absolute path, a long float tail (:func:`featbook.leaks.scan_book`)."""
    from featbook.leaks import report, scan_book

    found = scan_book(html)
    if found:
        raise LeakedCodeError("the rendered pages show code to the reader (featbook.leaks):\n" + report(found))


def build(profile: str | None = "small", executed_dir: Path | None = None, out_root: Path = REPO_ROOT,
          fresh: bool = False) -> Path:
    """Execute (unless ``executed_dir`` is given; a chapter whose outputs are kept under the same
    key is not executed again unless ``fresh``, :mod:`featbook.executed`), stage and render (Sphinx
    re-reads the pages whose staged files changed), then check the pages for leaked code
    (:func:`check_pages`); return the HTML directory."""
    start = time.perf_counter()
    if executed_dir is None:
        executed_dir = out_root / "_build" / "executed"
        execute_all(profile, executed_dir, fresh=fresh)
    stage_dir = out_root / "_build" / "stage"
    stage(executed_dir, stage_dir)
    html = render(stage_dir, out_root)
    check_pages(html)
    print(f"book built in {time.perf_counter() - start:.1f} s: {html / 'index.html'}")
    return html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="small", help="parameter profile for the notebooks (small or full)")
    parser.add_argument("--executed", type=Path, default=None, help="use notebooks already executed in DIR")
    parser.add_argument("--fresh", action="store_true",
                        help="execute every chapter, even those whose outputs are kept (featbook.executed)")
    args = parser.parse_args(argv)
    try:
        build(args.profile, args.executed, fresh=args.fresh)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as err:
        print(f"error: jupyter-book failed with exit code {err.returncode}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
