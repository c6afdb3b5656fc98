"""Benchmark: the book's build from cold, then after a prose-only edit, then after a code edit, in one run.

A fresh copy of the checkout's committed tree (``git clone`` into a temporary folder: no
``_build``, no chapter caches, so the cold build is a fresh clone's with the virtual environment
already there) is built three times with this interpreter, the copy's own ``featlib`` and
``featbook`` first on the path:

1. **cold**: every chapter executed (the small profile), the book rendered;
2. **prose edit**: a sentence added to a markdown cell of one chapter; no chapter should be
   executed (:mod:`featbook.executed`), and Sphinx re-reads the pages that changed;
3. **code edit**: a comment added to a code cell of the same chapter; that chapter alone is
   executed again.

It prints the wall time of each build and which chapters each one executed; no target is
asserted here (the issue's targets: a cold build within 5 minutes and a prose-edit rebuild within
20 s on an idle 2-core machine). Nothing outside the temporary copy is written; the copy is removed
at the end unless ``--keep``.

    .venv/bin/python benchmarks/book_build.py [--chapter 06_which_features_are_learned] [--keep]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from featlib.store.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]


def build(copy: Path, label: str) -> tuple[float, dict[str, float]]:
    """One ``python -m featbook.build`` in ``copy``: wall seconds, and the chapters it executed with
    each one's seconds (as the build prints them: kernel start to end)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(copy / "book")])}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "featbook.build", "--profile", "small"], cwd=copy, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"the {label} build failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    executed = re.findall(r"^executed (\S+)\.ipynb with profile \S+ in ([0-9.]+) s", done.stdout, flags=re.M)
    return seconds, {name: float(s) for name, s in executed}


def edit(chapter: Path, kind: str) -> None:
    """A prose edit (a sentence after the chapter's title) or a code edit (a comment in the first
    code cell after the parameters cell) of the MyST source ``chapter``."""
    text = chapter.read_text()
    if kind == "prose":
        title = re.search(r"^# .+$", text, flags=re.M)
        text = text[:title.end()] + "\n\nA sentence added by the build benchmark.\n" + text[title.end():]
    else:
        cells = [m.end() for m in re.finditer(r"^```\{code-cell\}\n", text, flags=re.M)]
        after = cells[1] if len(cells) > 1 else cells[0]
        header = re.match(r"(:[^\n]*\n|---\n.*?---\n)*", text[after:], flags=re.S).end()
        at = after + header
        text = text[:at] + "# a comment added by the build benchmark\n" + text[at:]
    atomic_write_text(chapter, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", default="06_which_features_are_learned",
                        help="the chapter edited for the second and third builds (a notebooks/NN_name stem)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args(argv)
    source = ROOT / "notebooks" / f"{args.chapter}.md"
    if not source.is_file():
        print(f"error: --chapter {args.chapter}: no notebooks/{args.chapter}.md; name a chapter's stem", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="featbook-build-"))
    copy = folder / "book"
    try:
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(copy)], check=True)
        commit = subprocess.run(["git", "-C", str(copy), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        print(f"building commit {commit} in {copy} with {sys.executable} ({os.cpu_count()} CPUs)", flush=True)
        rows = []
        rows.append(("cold", *build(copy, "cold")))
        edit(copy / "notebooks" / f"{args.chapter}.md", "prose")
        subprocess.run([sys.executable, "-m", "featbook.sync"], cwd=copy, capture_output=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(copy / "book")])})
        rows.append((f"prose edit of {args.chapter}", *build(copy, "prose-edit")))
        edit(copy / "notebooks" / f"{args.chapter}.md", "code")
        rows.append((f"code edit of {args.chapter}", *build(copy, "code-edit")))
        width = max(len(r[0]) for r in rows)
        for label, seconds, executed in rows:
            ran = ", ".join(executed) if executed else "none"
            print(f"{label:<{width}}  {seconds:7.1f} s  executed: {ran}")
        print(f"prose-edit rebuild / cold build: {rows[1][1] / rows[0][1]:.3f}")
        cold_seconds, cold_chapters = rows[0][1], rows[0][2]
        print("the cold build, where the time went:")
        for name, seconds in sorted(cold_chapters.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<{width}}  {seconds:7.1f} s  ({seconds / cold_seconds:.0%})")
        rest = cold_seconds - sum(cold_chapters.values())
        print(f"  {'staging, rendering, checking':<{width}}  {rest:7.1f} s  ({rest / cold_seconds:.0%})")
    finally:
        if args.keep:
            print(f"kept {copy}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
