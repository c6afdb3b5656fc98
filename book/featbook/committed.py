"""Committed full-scale results, in a checkout or fetched from the repository (Colab).

Chapters read the results committed under ``results/`` (``../results/cmnist`` and so on,
relative to ``notebooks/``). In a checkout they are on disk. A notebook opened in Colab has no
checkout: there, when the ``results`` folder is absent, :func:`locate` fetches the files of the
requested folder from the book's repository (:func:`featbook.repository.repository`, the same
setting the install cell uses) into a local folder and returns it, saying so.

What is fetched is listed by the results folder's own manifest, ``results/manifest.json``
(:data:`MANIFEST`: the size and SHA-256 of every committed file under ``results/``, written by
``python -m featbook.committed``; a test keeps it equal to the files), never by GitHub's API, which
rate-limits the shared addresses of Colab. Every file is checked against its entry before it is
used: a file fetched earlier is kept only if it still matches, and one that an interrupted fetch
left short or damaged is fetched again. Files come from GitHub's raw file server, or, for a
``file://`` repository (tests, a local mirror), from git itself. A download that the network cuts
(a connection reset or cut mid-file, a timeout) is tried again a few times after a short pause
(:data:`NETWORK_ATTEMPTS`, :data:`BACKOFF_S`); if it still fails, :func:`locate` returns a failed
:class:`Located` whose note says what to do in Colab, never a traceback. The result folders written by
:class:`featlib.store.folders.ResultFolder` also list their files in their ``provenance.json``,
which their loaders check.

In a checkout that has a ``results`` folder nothing is fetched: a missing sub-folder means
that nothing is committed there, and :func:`locate` returns ``None``.

Chapters read a located folder through :func:`load`: a fetched file that its loader finds damaged
(:class:`~featlib.store.files.CorruptFileError`) is dropped and reported with what to do in Colab (run
the cell again, which fetches it again), rather than with the loader's command-line remedy; and
:func:`featbook.evidence.missing` says why nothing is shown: the fetch failed, or nothing is committed.
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from featbook.repository import Repository, repository
from featlib.store.atomic import atomic_write_text
from featlib.store.paths import inside

#: Where fetched results go (relative to the working directory), unless told otherwise.
FETCH_DIR = Path("_cache/committed")
#: Seconds one wait for the server may take, and one file's download in all.
TIMEOUT_S = 30
DEADLINE_S = 120
#: Bytes read from the network at a time; the manifest's largest size (no entry bounds it).
CHUNK = 1 << 16
MANIFEST_LIMIT = 16 << 20
#: The manifest of the committed results: its path in the repository.
MANIFEST = "results/manifest.json"
#: A fetched folder's copy of its manifest entries (what it was checked against).
LOCAL_MANIFEST = ".manifest.json"
#: The file a fetch writes into a folder it makes: the folder is featbook's download cache, so a file
#: that the manifest no longer lists (withdrawn upstream) is removed from it, never from any other folder.
FETCH_MARKER = ".fetched-by-featbook"
#: Downloads of one file before a mismatch with the manifest is reported.
ATTEMPTS = 2
#: Tries of one download that the network cuts (reset, cut mid-file, timed out) before it is reported,
#: and the pauses between them (seconds).
NETWORK_ATTEMPTS = 3
BACKOFF_S = (1.0, 3.0)
RETRY_ADVICE = ("In Colab, check that the runtime is connected to the internet and run this cell again; "
                "until then the chapter shows this run's results only.")
#: What a Colab reader does about a fetched file that does not load (instead of a loader's command line).
REFETCH_ADVICE = ("In Colab, run this cell again: it fetches that file again from the repository, checked against "
                  f"`{MANIFEST}`; until then the chapter shows this run's results only.")


@dataclass
class Located:
    """Where a chapter's committed results are: ``path`` (``None``: there are none, or they
    could not be fetched: ``failed``) and a sentence for the reader saying where they came from."""

    path: Path | None
    note: str
    fetched: bool = False
    failed: bool = False

    def __bool__(self) -> bool:
        return self.path is not None


class FetchError(OSError):
    """A committed file could not be fetched intact."""


def _get(url: str, limit: int | None = None) -> bytes:
    """The body at ``url``, read in pieces as they arrive: at most ``limit`` bytes (a server that
    sends more, or declares more, is refused at once: :class:`FetchError`), and for at most
    :data:`DEADLINE_S` seconds in all (:data:`TIMEOUT_S` bounds each wait, not a server that drips)."""
    request = urllib.request.Request(url, headers={"User-Agent": "featlib"})
    deadline = time.monotonic() + DEADLINE_S
    chunks, size = [], 0
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 (https URLs we build)
        declared = response.headers.get("Content-Length", "")
        if limit is not None and declared.isdigit() and int(declared) > limit:
            raise FetchError(f"{url} declares {int(declared):,} bytes where {MANIFEST} lists {limit:,}")
        while True:
            if time.monotonic() > deadline:
                raise FetchError(f"{url} took over {DEADLINE_S} s to arrive ({size:,} bytes so far); given up")
            chunk = response.read1(CHUNK if limit is None else min(CHUNK, limit + 1 - size))
            if not chunk:
                if declared.isdigit() and size < int(declared):  # cut mid-file: a network failure, tried again
                    raise http.client.IncompleteRead(b"".join(chunks), int(declared) - size)
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:
                raise FetchError(f"{url} sends more than the {limit:,} bytes {MANIFEST} lists; not read further")


def _takes_limit(function) -> bool:
    """Whether ``function`` (a reader, or a test's stand-in for one) takes ``limit``."""
    import inspect

    try:
        return "limit" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _bounded(read, path: str, limit: int):
    """``read(path)`` for a reader that may stop at ``limit`` bytes (:func:`reader`'s); a body
    longer than ``limit`` is :class:`FetchError` (not tried again: the file is not the listed one)."""
    data = read(path, limit=limit) if _takes_limit(read) else read(path)
    if len(data) > limit:
        raise FetchError(f"{path} arrived as more than the {limit:,} bytes {MANIFEST} lists")
    return data


def _transient(err: BaseException) -> bool:
    """Whether ``err`` is the network failing (worth another try): a connection reset, refused or
    cut mid-file (``http.client.IncompleteRead``), a timeout, a server error; not a missing file."""
    if isinstance(err, urllib.error.HTTPError):
        return err.code in (408, 429) or err.code >= 500
    return isinstance(err, (http.client.HTTPException, ConnectionError, TimeoutError, urllib.error.URLError))


def _read_retrying(read, path: str) -> bytes:
    """``read(path)``, tried again after a short pause (:data:`BACKOFF_S`) when the network cuts it,
    :data:`NETWORK_ATTEMPTS` times in all; then :class:`FetchError` saying so."""
    for attempt in range(NETWORK_ATTEMPTS):
        try:
            return read(path)
        except Exception as err:  # noqa: BLE001 (only the network's failures are retried)
            if not _transient(err):
                raise
            if attempt == NETWORK_ATTEMPTS - 1:
                raise FetchError(f"the connection failed {NETWORK_ATTEMPTS} times while fetching {path} "
                                 f"(last: {type(err).__name__}: {err})") from err
            time.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
    raise AssertionError("unreachable")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def matches(data: bytes, entry: dict) -> bool:
    """Whether ``data`` is the file a manifest ``entry`` (``bytes``, ``sha256``) describes."""
    return len(data) == entry.get("bytes") and _digest(data) == entry.get("sha256")


def reader(repo: Repository, get=_get):
    """A function ``path -> bytes`` reading a file of ``repo`` at its branch: GitHub's raw files
    (through ``get``) or, for a ``file://`` URL, ``git show``."""
    if repo.github is not None:
        bounded = _takes_limit(get)

        def read(path: str, limit: int | None = None) -> bytes:
            return get(repo.raw_url(path), limit=limit) if bounded else get(repo.raw_url(path))
        return read
    if repo.url.startswith("file://"):
        git_dir = repo.url[len("file://"):]

        def read(path: str, limit: int | None = None) -> bytes:
            done = subprocess.run(["git", "--git-dir", git_dir, "show", f"{repo.branch}:{path}"], capture_output=True)
            if done.returncode != 0:
                raise FetchError(f"git could not read {path} of {repo.url} ({done.stderr.decode().strip()})")
            return done.stdout
        return read
    raise ValueError(f"committed results are fetched from GitHub or a file:// git repository; got {repo.url}")


def results_subpath(path: str | Path) -> str:
    """``"../results/cmnist"`` -> ``"results/cmnist"``: the folder's path in the repository."""
    parts = Path(path).as_posix().split("/")
    if "results" not in parts:
        raise ValueError(f"committed results live under results/; got {path}")
    return "/".join(parts[parts.index("results"):])


# -- the manifest ---------------------------------------------------------------------------------
def build_manifest(results_dir: str | Path) -> dict:
    """The manifest of a ``results`` folder: size and SHA-256 of every file below it (paths as
    the repository names them, ``results/...``), the manifest itself excepted."""
    results_dir = Path(results_dir)
    files = {}
    for path in sorted(p for p in results_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(results_dir).as_posix()
        if rel == Path(MANIFEST).name or any(part.startswith(".") for part in Path(rel).parts):
            continue
        data = path.read_bytes()
        files[f"results/{rel}"] = {"bytes": len(data), "sha256": _digest(data)}
    return {"files": files}


def manifest_differences(results_dir: str | Path) -> list[str]:
    """How ``results_dir/manifest.json`` differs from the files (empty: it lists them exactly)."""
    path = Path(results_dir) / Path(MANIFEST).name
    if not path.exists():
        return [f"{path} does not exist"]
    if not is_manifest(path.read_bytes()):
        raise ValueError(f"{path} is not a manifest of committed results (JSON with a 'files' mapping of results/ paths "
                         "to bytes and sha256): restore it from git, or write it with python -m featbook.committed")
    written = json.loads(path.read_text()).get("files", {})
    actual = build_manifest(results_dir)["files"]
    return ([f"{p} is not listed" for p in sorted(set(actual) - set(written))]
            + [f"{p} is listed but absent" for p in sorted(set(written) - set(actual))]
            + [f"{p} changed" for p in sorted(set(actual) & set(written)) if actual[p] != written[p]])


def is_manifest(data: bytes) -> bool:
    """Whether ``data`` is a manifest this module writes: JSON ``{"files": {"results/...": {"bytes",
    "sha256"}}}`` and nothing else."""
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return False
    files = record.get("files") if isinstance(record, dict) else None
    return (isinstance(record, dict) and set(record) == {"files"} and isinstance(files, dict)
            and all(isinstance(k, str) and k.startswith("results/") and isinstance(v, dict)
                    and set(v) == {"bytes", "sha256"} for k, v in files.items()))


def write_manifest(results_dir: str | Path) -> Path:
    """Write ``results_dir/manifest.json`` atomically (a full disk leaves the old one whole)."""
    from featlib.store.atomic import atomic_write_text

    path = Path(results_dir) / Path(MANIFEST).name
    return atomic_write_text(path, json.dumps(build_manifest(results_dir), indent=1, sort_keys=True) + "\n")


# -- fetching ------------------------------------------------------------------------------------
def _fetch_file(read, path: str, entry: dict, target: Path) -> None:
    """Fetch ``path`` into ``target`` (atomically: a failed write leaves no partial file) once it
    matches ``entry``; retried, then :class:`FetchError`."""
    limit = entry.get("bytes") if isinstance(entry.get("bytes"), int) and entry.get("bytes") >= 0 else 0
    for _ in range(ATTEMPTS):
        data = _read_retrying(lambda p: _bounded(read, p, limit), path)
        if matches(data, entry):
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
            try:
                partial.write_bytes(data)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
            return
    raise FetchError(f"{path} arrived as {len(data)} bytes that do not match results/manifest.json "
                     f"({entry.get('bytes')} bytes) after {ATTEMPTS} attempts")


def _verified(dest: Path) -> bool:
    """Whether ``dest`` holds a complete earlier fetch: every file of its saved manifest, intact."""
    saved = dest / LOCAL_MANIFEST
    try:
        entries = json.loads(saved.read_text())
    except (OSError, ValueError):
        return False
    try:
        targets = {rel: inside(dest, rel, what="a fetched file") for rel in entries}
    except (ValueError, TypeError, AttributeError):
        return False
    return bool(entries) and all(targets[rel].is_file() and matches(targets[rel].read_bytes(), entry)
                                 for rel, entry in entries.items())


class ManifestRefused(FetchError):
    """The repository's manifest names a file outside the folder it is fetched into."""


def _own_cache(dest: Path, listed: set[str]) -> None:
    """Make ``dest`` the fetch's own folder holding the ``listed`` files (paths below ``dest``) and
    nothing else of the committed results: the files an earlier fetch wrote that the manifest no
    longer lists are removed (with the folders they leave empty), so what is read is what is
    committed now. Only a folder the fetch made (:data:`FETCH_MARKER`) is pruned so; in another
    folder only the files an earlier fetch listed are, and a file no fetch wrote is refused
    (:class:`FetchError`), never deleted."""
    bookkeeping = {FETCH_MARKER, LOCAL_MANIFEST}
    if not dest.is_dir() or not any(dest.iterdir()):
        dest.mkdir(parents=True, exist_ok=True)
        atomic_write_text(dest / FETCH_MARKER, "featbook's download cache of committed results (featbook.committed."
                                               "fetch): files the repository's manifest does not list are removed from it\n")
        return
    stale = []
    for folder, dirs, names in os.walk(dest):  # links are not followed: a link itself is an entry
        here = Path(folder).relative_to(dest)
        for name in names + [d for d in dirs if (Path(folder) / d).is_symlink()]:
            rel = (here / name).as_posix()
            if rel not in bookkeeping and rel not in listed:
                stale.append(rel)
    if not (dest / FETCH_MARKER).is_file():  # not made by a fetch (or by an older featbook's)
        try:
            earlier = set(json.loads((dest / LOCAL_MANIFEST).read_text()))
        except (OSError, ValueError, TypeError):
            earlier = set()
        foreign = [rel for rel in stale if rel not in earlier and ".partial-" not in rel]
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise FetchError(f"{dest} holds files that no fetch wrote and that {MANIFEST} does not list ({shown}); "
                             "the committed results are fetched only into a folder of their own: move them out, or "
                             "give another fetch folder")
    for rel in stale:
        (dest / rel).unlink()
    for folder, dirs, names in sorted(os.walk(dest), key=lambda entry: -len(Path(entry[0]).parts)):
        if Path(folder) != dest and not os.listdir(folder):
            os.rmdir(folder)
    (dest / FETCH_MARKER).touch()


def fetch(sub: str, repo: Repository, dest: Path, get=_get) -> tuple[list[str], int]:
    """Bring every committed file under ``sub`` (e.g. ``results/cmnist``) of ``repo`` into ``dest``
    (keeping the layout below ``sub``), each checked against the manifest, and remove from ``dest``
    what the manifest no longer lists (:func:`_own_cache`: the fetched copy is the committed folder);
    the repository paths listed, and how many had to be downloaded (the others were already there,
    intact)."""
    read = reader(repo, get)
    try:
        manifest = json.loads(_read_retrying(lambda p: _bounded(read, p, MANIFEST_LIMIT), MANIFEST))
    except ValueError as err:
        raise FetchError(f"{MANIFEST} of {repo.url} is not valid JSON ({err})") from None
    prefix = sub.rstrip("/") + "/"
    files = manifest.get("files", {}) if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise FetchError(f"{MANIFEST} of {repo.url} lists no files (no 'files' mapping)")
    entries = {path: entry for path, entry in files.items() if isinstance(path, str) and path.startswith(prefix)}
    # every target below dest, checked before anything is written: a crafted manifest entry
    # (results/x/../../../etc, an absolute remainder) is refused, not written outside
    targets = {}
    for path, entry in entries.items():
        if not isinstance(entry, dict):
            raise FetchError(f"{MANIFEST} of {repo.url}: the entry of {path} is malformed")
        try:
            targets[path] = inside(dest, path[len(prefix):], what=f"{MANIFEST} entry")
        except ValueError as err:
            raise ManifestRefused(f"{err} ({repo.url})") from None
    if entries or dest.exists():
        _own_cache(dest, {path[len(prefix):] for path in entries})
    downloaded = 0
    for path, entry in entries.items():
        target = targets[path]
        if target.is_file() and matches(target.read_bytes(), entry):
            continue
        _fetch_file(read, path, entry, target)
        downloaded += 1
    if entries:
        atomic_write_text(dest / LOCAL_MANIFEST, json.dumps({p[len(prefix):]: e for p, e in entries.items()}, indent=1))
    elif dest.is_dir():  # everything withdrawn: no earlier fetch to fall back on either
        (dest / LOCAL_MANIFEST).unlink(missing_ok=True)
    return sorted(entries), downloaded


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
    if repo is None:
        return Located(None, f"This runtime has no `{root}` folder and no repository is set, so the committed results "
                             "could not be fetched. In Colab, run the notebook's first cell (it sets FEATLIB_REPOSITORY), "
                             "or run `%env FEATLIB_REPOSITORY=https://github.com/<owner>/<name>@<branch>` and this cell "
                             "again.", failed=True)
    dest = Path(fetch_dir) / sub
    source = f"{repo.url} (branch {repo.branch})"
    try:
        files, downloaded = fetch(sub, repo, dest, get=get)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:
        now = (f"the repository's manifest was refused now: {err}" if isinstance(err, ManifestRefused)
               else f"the repository could not be reached now: {err}")
        if _verified(dest):
            return Located(dest, f"Fetched earlier from `{sub}` of {source} into `{dest}` and checked against its "
                                 f"manifest ({now}).", fetched=True)
        failed = "was refused" if isinstance(err, ManifestRefused) else "failed"
        return Located(None, f"This runtime has no `{root}` folder, and fetching `{sub}` from {source} {failed} "
                             f"({err}). "
                             f"{RETRY_ADVICE}", failed=True)
    if not files:
        return Located(None, f"Nothing is committed in `{sub}` of {source} yet.")
    how = (f"{downloaded} of them fetched now, the others fetched earlier" if 0 < downloaded < len(files)
           else "fetched earlier" if downloaded == 0 else "fetched")
    return Located(dest, f"This runtime has no checkout of the repository, so the {len(files)} committed files of "
                         f"`{sub}` come from {source}: {how} into `{dest}`, each checked against the "
                         f"repository's `{MANIFEST}`.", fetched=True)


def load(located: Located, loader, *args, **kwargs):
    """``loader(located.path, *args, **kwargs)`` (a checking loader of committed results), or None
    when nothing is located. When a *fetched* file does not load
    (:class:`~featlib.store.files.CorruptFileError`), the file is removed (so that the next
    :func:`locate` fetches it again), ``located`` becomes a failed one whose note says what to do in
    Colab (:data:`REFETCH_ADVICE`), and the result is None. In a checkout the error is raised as it is:
    its remedy (rerun the command, restore the folder from git) is the one that applies there. A
    folder whose pieces mix two protocols (:class:`~featlib.store.pieces.MixedProtocols`), fetched or
    not, is no evidence either: ``located`` becomes a failed one saying so, and the result is None."""
    from featlib.store.files import CorruptFileError
    from featlib.store.pieces import MixedProtocols

    if not located:
        return None
    try:
        return loader(located.path, *args, **kwargs)
    except MixedProtocols as err:
        where = located.path
        located.path, located.failed = None, True
        fetched = (" (fetched as the repository holds them); until it is fixed there" if located.fetched
                   else "; until then")
        located.note = (f"The committed results in `{where}` are not shown: {err}{fetched}, the chapter shows this "
                        "run's results only.")
        return None
    except CorruptFileError as err:
        if not located.fetched:
            raise
        where = Path(located.path)
        damaged = Path(err.path)
        try:
            damaged.resolve().relative_to(where.resolve())
            damaged.unlink(missing_ok=True)
        except (ValueError, OSError):
            pass
        (where / LOCAL_MANIFEST).unlink(missing_ok=True)  # no longer an intact earlier fetch
        located.path, located.failed = None, True
        located.note = (f"The committed results fetched into `{where}` did not load: `{damaged.name}`: {err.reason}. "
                        f"{REFETCH_ADVICE}")
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or --check) results/manifest.json, the list of committed "
                                                 "results that Colab fetches.")
    parser.add_argument("results", nargs="?", type=Path, default=Path(__file__).resolve().parents[2] / "results")
    parser.add_argument("--check", action="store_true", help="only report how the manifest differs from the files")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"error: results folder {args.results} does not exist; pass the repository's results/ folder",
              file=sys.stderr)
        return 2
    path = args.results / Path(MANIFEST).name
    if path.is_symlink() or (path.exists() and not (path.is_file() and is_manifest(path.read_bytes()))):
        what = "differs from" if args.check else "would be overwritten, but is not"
        print(f"error: {path} {what} a manifest of committed results (JSON with a 'files' mapping of results/ paths "
              "to bytes and sha256); it is kept: pass the repository's results/ folder, or move that file out",
              file=sys.stderr)
        return 2
    if args.check:
        differences = manifest_differences(args.results)
        for line in differences:
            print(line)
        return 1 if differences else 0
    try:
        print(f"wrote {write_manifest(args.results)}")
    except OSError as err:
        print(f"error: {err.filename or path}: {err.strerror or err}; the previous manifest is kept whole: free space, "
              "then run again", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
