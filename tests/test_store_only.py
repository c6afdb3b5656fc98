"""The store is the only code of featlib that writes or reads a result file (the store issue).

Results (pieces, result folders, cached files, checkpoints) are written and read by
``featlib/store/`` alone, which checks every byte it reads. Every other module of featlib and of
the book's machinery that touches a file is listed here with what it touches, and none of those
files is a result: a new file operation elsewhere fails this test until it moves into the store or
is added here with its reason.
"""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: What reads or writes a file in Python.
FILE_IO = re.compile(r"\bopen\(|\.write_text\(|\.read_text\(|\.to_csv\(|\bread_csv\(|json\.dump\(|torch\.save\("
                     r"|torch\.load\(|\.write_bytes\(|\.read_bytes\(|np\.save\(|np\.load\(")
#: Modules outside the store that touch files, and why none of those files is a result.
NOT_RESULTS = {
    "featlib/data/mnist.py": "MNIST itself (the pip package's pickle, torchvision's files)",
    "featlib/data/wilds_fabricate.py": "fabricated WILDS data in the package's on-disk layout",
    "featlib/models/wilds_backbones.py": "the offline MiniLM's vocabulary",
    "featlib/experiments/objective_files.py": "the user's objective file (Python source, hashed and run)",
    "book/featbook/sync.py": "the chapters' sources and notebooks",
    "book/featbook/chapters.py": "the chapters' sources and notebooks",
    "book/featbook/notebooks.py": "the parameter profiles and the executed notebooks",
    "book/featbook/notebook_params.py": "a chapter notebook's parameters cell",
    "book/featbook/profiles.py": "the parameter profiles",
    "book/featbook/build.py": "the book's source, staged for Sphinx",
    "book/featbook/executed.py": "executed chapter notebooks kept by key (featbook.executed)",
    "book/featbook/record.py": "the values a chapter records in its own notebook",
    "book/featbook/leaks.py": "the rendered HTML pages",
    "book/featbook/linkcheck.py": "the rendered HTML pages (and --external's --report, written atomically)",
    "book/featbook/repository.py": "the book's _config.yml",
    "book/featbook/committed.py": "the Colab fetch: bytes checked against results/manifest.json before they are "
                                  "kept, then read by the store's loaders",
    "book/featbook/sweep.py": "a sweep's executed notebooks and its records (featbook.sweep's own folder)",
}


def test_no_module_but_the_stores_reads_or_writes_a_result_file():
    found = {}
    for root in ("featlib", "book/featbook"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith("featlib/store/"):
                continue
            lines = [n for n, line in enumerate(path.read_text().splitlines(), 1)
                     if FILE_IO.search(line) and not line.lstrip().startswith("#")]
            if lines:
                found[rel] = lines
    unexplained = {f: lines for f, lines in found.items() if f not in NOT_RESULTS}
    assert not unexplained, ("file I/O outside featlib/store, not listed with its reason (lines): "
                             f"{unexplained}; move it into the store, or list it here")
    assert set(NOT_RESULTS) <= set(found), f"listed but no longer touching files: {set(NOT_RESULTS) - set(found)}"


def test_the_scan_sees_file_io():
    assert FILE_IO.search('frame.to_csv(path)') and FILE_IO.search('x = Path(p).read_text()')
    assert not FILE_IO.search('atomic_write_text(path, text)')
