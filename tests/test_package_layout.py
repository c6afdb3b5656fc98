"""Two packages, one direction: featlib is the science and imports nothing of the book's machinery
(Jupyter, papermill, MyST, Sphinx, BeautifulSoup, featbook); featbook (book/featbook) builds the
book on top of it. featlib's top level stays small: the rest lives in subpackages."""
import ast
import subprocess
import sys
from pathlib import Path

import featlib

FEATLIB = Path(featlib.__file__).resolve().parent
BOOK_SIDE = ("jupyter", "jupyter_core", "jupyter_client", "nbclient", "nbformat", "papermill", "myst_nb",
             "myst_parser", "sphinx", "jupyter_book", "bs4", "featbook")


def test_importing_all_of_featlib_loads_nothing_of_the_book():
    code = f"""
import importlib, pkgutil, sys
import featlib
for m in pkgutil.walk_packages(featlib.__path__, "featlib."):
    importlib.import_module(m.name)
loaded = sorted({{k.split('.')[0] for k in sys.modules}} & set({BOOK_SIDE!r}))
print(",".join(loaded))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"importing featlib loaded {done.stdout.strip()}"


def test_no_featlib_module_imports_the_book_side():
    arrows = []
    for path in sorted(FEATLIB.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            arrows += [(path.relative_to(FEATLIB.parent), n) for n in names if n.split(".")[0] in BOOK_SIDE]
    assert not arrows, f"featlib imports the book side: {arrows}"


def test_featlib_top_level_holds_few_modules():
    modules = sorted(p.stem for p in FEATLIB.glob("*.py") if p.stem != "__init__")
    assert len(modules) <= 8, f"featlib's top level has {len(modules)} modules: {modules}; put them in a subpackage"


def test_featbook_lives_in_book_and_imports_featlib():
    import featbook

    assert Path(featbook.__file__).resolve().parent == FEATLIB.parent / "book" / "featbook"
    assert not (FEATLIB.parent / "tools").exists()
