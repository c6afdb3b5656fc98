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


FEATBOOK = FEATLIB.parent / "book" / "featbook"
#: The most lines a featbook module may hold: past it a module does more than one job (a chapter's
#: views, the book's build, a sweep) and is split, as the ColoredMNIST views were into one module per
#: chapter (featbook.ch03_views, ch04_views, ch09_views) and a shared one (featbook.cmnist_shared).
MAX_FEATBOOK_LINES = 800


def test_no_featbook_module_is_longer_than_800_lines():
    long = {p.name: n for p in sorted(FEATBOOK.glob("*.py")) if (n := len(p.read_text().splitlines())) > MAX_FEATBOOK_LINES}
    assert not long, f"featbook modules over {MAX_FEATBOOK_LINES} lines: {long}; split each by its jobs"


def _module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (rooted at ``root``) by its dotted name; a package by its own name."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports anywhere in it (at its top or inside a
    function: a circle closed by an import inside a function is a circle all the same)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per dot beyond the first
                parts = name.split(".")[:len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # featlib.experiments.cmnist_analysis.FAR_Z -> the module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_featlib_and_featbook_import_no_circle():
    """No module of featlib or featbook imports, through any chain of imports, a module that imports
    it back (the ColoredMNIST views and the claims page did, until the numbers moved to featlib)."""
    modules = {**_module_names(FEATLIB, "featlib"), **_module_names(FEATBOOK, "featbook")}
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    # Tarjan's strongly connected components: a component of more than one module is a circle
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"
