"""featbook.committed's fetch against pooch, case by case, on local servers (no internet).

Why featbook.committed fetches the committed results by hand rather than through pooch (the data
fetcher of the scientific Python stack) is measured here, not argued: each case featbook.committed
handles is run with both, on the same copy of ``results/`` and its ``manifest.json``:

* the ordinary cases against ``python -m http.server`` serving that copy in GitHub's raw layout
  (``/<owner>/<name>/<branch>/results/...``): every file of a folder checked against its SHA-256,
  a second fetch that downloads nothing, a damaged local copy fetched again, a file that differs
  from the manifest upstream, a file withdrawn from the manifest, a fetch folder holding the
  user's own files, a manifest entry that climbs out of the folder (``../``), and a server that is
  gone after a complete fetch;
* the network's failures against a small server of this script: a body longer than listed (with
  and without a Content-Length), a server that drips one byte every 0.2 s, a connection cut
  mid-file (once, or every time) or reset once, a listed file the server does not have (404);
* a ``file://`` git repository (the tests' and a local mirror's source).

pooch is given what it can use: a registry of ``sha256:`` hashes made from the manifest (pooch
reads no manifest of this form), ``retry_if_failed=2`` (featbook tries 3 times; ``--pooch-retries``
changes it, pooch's own default is 0), its default 30 s timeout. Its side runs in another interpreter (``--pooch-python``: a throwaway venv with
pooch, so the project's venv stays as requirements.txt makes it), through this same file
(``--worker``), which imports nothing but pooch and the standard library there.

    python3 -m venv /tmp/pooch-venv && /tmp/pooch-venv/bin/pip install pooch==1.9.0
    PYTHONPATH=.:book .venv/bin/python benchmarks/committed_vs_pooch.py --pooch-python /tmp/pooch-venv/bin/python

It prints one table row per case (what featbook.committed did, what pooch did) and writes nothing
outside a temporary folder. About a minute on 2 cores; the drip case waits --drip-wall seconds
for pooch (default 20).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OWNER, NAME, BRANCH = "owner", "book", "main"
RAW = "https://raw.githubusercontent.com"
BIG = "results/cmnist-table2"  # the ordinary cases: ~500 files
SMALL = "results/bench"  # the network's failures: 4 files
EXTRA = 32 << 20  # bytes a server sends beyond the listed size


# -- the pooch side (runs in the pooch venv; stdlib and pooch only) -------------------------------
def pooch_worker(args) -> int:
    import logging

    import pooch

    downloads = []

    class Count(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if message.startswith(("Downloading", "Updating", "Failed to download")):
                downloads.append(message.split(" ")[0])

    logger = pooch.get_logger()
    logger.addHandler(Count())
    logger.setLevel(logging.INFO)
    logger.propagate = False
    files = json.loads(Path(args.manifest).read_text())["files"]
    prefix = args.sub.rstrip("/") + "/"
    registry = {path[len(prefix):]: f"sha256:{entry['sha256']}" for path, entry in files.items() if path.startswith(prefix)}
    fetcher = pooch.create(path=args.dest, base_url=args.base.rstrip("/") + "/" + prefix, registry=registry,
                           retry_if_failed=args.retries)
    started = time.monotonic()
    outcome = {"ok": True, "error": ""}
    try:
        for name in registry:
            fetcher.fetch(name)
    except Exception as err:  # noqa: BLE001 (the outcome is the measurement)
        outcome = {"ok": False, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"}
    outcome.update(seconds=round(time.monotonic() - started, 2), downloads=downloads.count("Downloading")
                   + downloads.count("Updating"), retries=downloads.count("Failed"))
    print(json.dumps(outcome))
    return 0


# -- the servers --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_server(root: Path):
    """``python -m http.server`` serving ``root``, as a subprocess; (base URL, process)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return f"http://127.0.0.1:{port}", process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("python -m http.server did not start")


class Adversary:
    """A server of ``root`` whose first path segment is a mode: ``plain``, ``oversize`` (the file,
    then EXTRA bytes, Content-Length true), ``undeclared`` (the same, no Content-Length),
    ``drip`` (one byte every 0.2 s), ``cut`` (each file's first request: half of it, then the
    connection closed), ``cut-always`` (every request so), ``reset`` (each file's first request: closed before an answer). The
    manifest is always served plainly. Counts the bytes it sent per mode."""

    def __init__(self, root: Path):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.root, self.sent, self.seen = root, {}, set()
        adversary = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_GET(self):
                mode, _, rest = self.path.lstrip("/").partition("/")
                path = adversary.root / rest
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                if rest.endswith("manifest.json"):
                    mode = "plain"
                first = (mode, rest) not in adversary.seen
                adversary.seen.add((mode, rest))
                if mode == "reset" and first:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
                    self.close_connection = True
                    return
                self.send_response(200)
                body = data + b"x" * EXTRA if mode in ("oversize", "undeclared") else data
                if mode != "undeclared":
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if (mode == "cut" and first) or mode == "cut-always":
                        self.wfile.write(body[:len(body) // 2])
                        adversary.count(mode, len(body) // 2)
                        return
                    step = 1 if mode == "drip" else 1 << 16
                    for i in range(0, len(body), step):
                        self.wfile.write(body[i:i + step])
                        adversary.count(mode, len(body[i:i + step]))
                        if mode == "drip":
                            self.wfile.flush()
                            time.sleep(0.2)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.lock = threading.Lock()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def count(self, mode: str, n: int) -> None:
        with self.lock:
            self.sent[mode] = self.sent.get(mode, 0) + n

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- the two sides, one case at a time -------------------------------------------------------------
def featbook_fetch(base: str, sub: str, dest: Path, *, deadline: float | None = None, repo_url: str | None = None):
    """featbook.committed.fetch of ``sub`` from the server at ``base`` (GitHub's raw URLs mapped to
    it; the real bounded reader), or from a ``file://`` repository: (ok, what, seconds, downloaded)."""
    from featbook import committed
    from featbook.repository import Repository

    def local(url: str, limit: int | None = None) -> bytes:
        return committed._get(url.replace(RAW, base, 1), limit=limit)

    repo = Repository(repo_url or f"https://github.com/{OWNER}/{NAME}", BRANCH)
    kept = committed.DEADLINE_S
    committed.DEADLINE_S = deadline or kept
    started = time.monotonic()
    try:
        files, downloaded = committed.fetch(sub, repo, dest, get=local)
        return True, f"{len(files)} files, {downloaded} downloaded", round(time.monotonic() - started, 2), downloaded
    except Exception as err:  # noqa: BLE001 (the outcome is the measurement)
        return False, f"{type(err).__name__}: {str(err)[:160]}", round(time.monotonic() - started, 2), None
    finally:
        committed.DEADLINE_S = kept


def pooch_fetch(python: str, base: str, sub: str, dest: Path, manifest: Path, *, wall: float = 120,
                retries: int = 2):
    """The worker in the pooch venv: (ok, what, seconds, downloads) or a timeout."""
    started = time.monotonic()
    try:
        done = subprocess.run([python, __file__, "--worker", "--base", base, "--sub", sub, "--dest", str(dest),
                               "--manifest", str(manifest), "--retries", str(retries)],
                              capture_output=True, text=True, timeout=wall,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # pooch's venv alone
    except subprocess.TimeoutExpired:
        return False, f"still downloading when stopped after {wall:g} s", round(time.monotonic() - started, 2), None
    if done.returncode != 0 or not done.stdout.strip():
        return False, f"worker failed: {done.stderr.strip().splitlines()[-1:]}", 0.0, None
    out = json.loads(done.stdout.strip().splitlines()[-1])
    what = (f"{out['downloads']} downloaded" if out["ok"] else out["error"]) + (
        f" ({out['retries']} failed attempts retried)" if out["retries"] else "")
    return out["ok"], what, out["seconds"], out["downloads"]


def put(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` atomically (featlib.store.atomic), as the project writes every file."""
    from featlib.store.atomic import atomic_write

    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def copy_tree(source: Path, target: Path) -> None:
    """Every file under ``source`` (hidden ones too) to the same place under ``target``, each by :func:`put`."""
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        put(target / path.relative_to(source), path.read_bytes())


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def same_files(dest: Path, upstream: Path, sub: str) -> bool:
    listed = json.loads((upstream / "results" / "manifest.json").read_text())["files"]
    prefix = sub + "/"
    return all((dest / p[len(prefix):]).is_file() and sha(dest / p[len(prefix):]) == e["sha256"]
               for p, e in listed.items() if p.startswith(prefix))


def driver(args) -> int:
    from featbook import committed

    rows = []

    def pooch(*where, **options):
        return pooch_fetch(args.pooch_python, *where, retries=args.pooch_retries, **options)

    def row(case: str, fb, po, note: str = "") -> None:
        rows.append((case, f"{'ok' if fb[0] else 'refused/failed'}: {fb[1]} ({fb[2]} s)",
                     f"{'ok' if po[0] else 'refused/failed'}: {po[1]} ({po[2]} s)", note))
        print(f"[{case}] featbook: {rows[-1][1]} | pooch: {rows[-1][2]} {note}", flush=True)

    with tempfile.TemporaryDirectory(prefix="committed-vs-pooch-") as tmp:
        tmp = Path(tmp)
        served = tmp / "served"
        upstream = served / OWNER / NAME / BRANCH  # GitHub's raw layout
        copy_tree(REPO / "results", upstream / "results")
        manifest = upstream / "results" / "manifest.json"
        base, server = http_server(served)
        raw_base = f"{base}/{OWNER}/{NAME}/{BRANCH}"
        try:
            # 1. every listed file of a folder, checked against its SHA-256; then again; then a damaged copy
            n = sum(1 for p in json.loads(manifest.read_text())["files"] if p.startswith(BIG + "/"))
            fb_dest, po_dest = tmp / "fb" / "a" / "b" / "c", tmp / "po" / "a" / "b" / "c"
            fb, po = featbook_fetch(base, BIG, fb_dest), pooch(raw_base, BIG, po_dest, manifest)
            row(f"{n} listed files of {BIG}, SHA-256 checked", fb, po,
                f"identical: featbook {same_files(fb_dest, upstream, BIG)}, pooch {same_files(po_dest, upstream, BIG)}")
            fb, po = featbook_fetch(base, BIG, fb_dest), pooch(raw_base, BIG, po_dest, manifest)
            row("the same fetch again (nothing changed)", fb, po)
            victim = sorted(p for p in fb_dest.rglob("*.csv"))[0].relative_to(fb_dest)
            for dest in (fb_dest, po_dest):
                put(dest / victim, (dest / victim).read_bytes()[:10])
            fb, po = featbook_fetch(base, BIG, fb_dest), pooch(raw_base, BIG, po_dest, manifest)
            row("a local copy damaged (cut to 10 bytes)", fb, po,
                f"repaired: featbook {same_files(fb_dest, upstream, BIG)}, pooch {same_files(po_dest, upstream, BIG)}")

            # 2. withdrawn from the manifest upstream: is the stale local copy removed?
            gone = upstream / BIG / victim
            kept_bytes = gone.read_bytes()
            gone.unlink()
            committed.write_manifest(upstream / "results")
            fb, po = featbook_fetch(base, BIG, fb_dest), pooch(raw_base, BIG, po_dest, manifest)
            row("a file withdrawn from the manifest upstream", fb, po,
                f"stale copy still there: featbook {(fb_dest / victim).exists()}, pooch {(po_dest / victim).exists()}")
            put(gone, kept_bytes)
            committed.write_manifest(upstream / "results")

            # 3. a file changed upstream, the manifest not: refused?
            small = upstream / SMALL
            target = sorted(p for p in small.rglob("*.csv"))[0]
            original = target.read_bytes()
            put(target, original.replace(b",", b";", 1))
            fb_small, po_small = tmp / "fb-small", tmp / "po-small"
            fb, po = featbook_fetch(base, SMALL, fb_small), pooch(raw_base, SMALL, po_small, manifest)
            changed = target.relative_to(small)
            row("a file differs from its manifest entry upstream", fb, po,
                f"the differing file on disk: featbook {(fb_small / changed).exists()}, pooch {(po_small / changed).exists()}")
            put(target, original)

            # 4. the fetch folder holds the user's own files
            for side in ("fb-mine", "po-mine"):
                put(tmp / side / "notes.txt", b"my notes")
            fb = featbook_fetch(base, SMALL, tmp / "fb-mine")
            po = pooch(raw_base, SMALL, tmp / "po-mine", manifest)
            row("the fetch folder holds the user's own file", fb, po,
                f"notes kept: featbook {(tmp / 'fb-mine' / 'notes.txt').exists()}, pooch {(tmp / 'po-mine' / 'notes.txt').exists()}; "
                f"results written beside them: featbook {len(list((tmp / 'fb-mine').rglob('*.csv')))} csv, "
                f"pooch {len(list((tmp / 'po-mine').rglob('*.csv')))} csv")

            # 5. a manifest entry that climbs out of the fetch folder
            crafted = json.loads(manifest.read_text())
            entry = crafted["files"][f"{SMALL}/h200/README.md"]
            crafted["files"][f"{SMALL}/../../escaped.md"] = entry  # its URL is <branch>/escaped.md
            put(upstream / "escaped.md", (upstream / SMALL / "h200" / "README.md").read_bytes())
            saved = manifest.read_bytes()
            put(manifest, json.dumps(crafted).encode())
            fb_deep, po_deep = tmp / "fb-deep" / "x" / "y", tmp / "po-deep" / "x" / "y"  # ../../ is <side>-deep
            fb = featbook_fetch(base, SMALL, fb_deep)
            po = pooch(raw_base, SMALL, po_deep, manifest)
            row("a manifest entry results/bench/../../escaped.md", fb, po,
                f"written outside the fetch folder: featbook {(tmp / 'fb-deep' / 'escaped.md').exists()}, "
                f"pooch {(tmp / 'po-deep' / 'escaped.md').exists()}")
            put(manifest, saved)

            # 6. the server gone after a complete fetch (Colab offline)
            server.terminate()
            server.wait()
            fb_loc = None
            os.environ["FEATLIB_REPOSITORY"] = f"https://github.com/{OWNER}/{NAME}@{BRANCH}"
            cwd = Path.cwd()
            (tmp / "colab").mkdir()
            os.chdir(tmp / "colab")  # no ../results here: a runtime without a checkout
            try:  # locate() falls back on a verified earlier fetch; fetch() alone reports the failure
                copy_tree(fb_dest, tmp / "colab" / "_cache" / "committed" / BIG)
                started = time.monotonic()
                fb_loc = committed.locate(f"../{BIG}", get=lambda url, limit=None: committed._get(
                    url.replace(RAW, base, 1), limit=limit))
                fb = (bool(fb_loc), "locate(): " + fb_loc.note.split(" (")[0][:90], round(time.monotonic() - started, 2), 0)
            finally:
                os.chdir(cwd)
            po = pooch(raw_base, BIG, po_dest, manifest)
            row("the server gone, after a complete fetch", fb, po,
                "pooch needs no network for files already there with the hash its registry gives; the registry "
                "(the manifest) must then be kept locally")
        finally:
            if server.poll() is None:
                server.terminate()
                server.wait()

        # 7. the network's failures, on the adversary
        adversary = Adversary(served)
        try:
            for mode, case in (("oversize", f"a body {EXTRA >> 20} MiB longer than listed, Content-Length true"),
                               ("undeclared", f"a body {EXTRA >> 20} MiB longer than listed, no Content-Length"),
                               ("cut", "the connection cut mid-file, once per file"),
                               ("cut-always", "the connection cut mid-file, every time"),
                               ("reset", "the connection reset before an answer, once per file")):
                mode_base = f"{adversary.base}/{mode}"
                fb = featbook_fetch(mode_base, SMALL, tmp / f"fb-{mode}")
                time.sleep(1.0)  # the server's threads count a write after the client has it
                sent_fb = adversary.sent.get(mode, 0)
                adversary.seen.clear()
                po = pooch(f"{mode_base}/{OWNER}/{NAME}/{BRANCH}", SMALL, tmp / f"po-{mode}", manifest)
                time.sleep(1.0)
                sent_po = adversary.sent.get(mode, 0) - sent_fb
                row(case, fb, po, f"bytes the server sent: featbook {sent_fb:,}, pooch {sent_po:,}")
            # a drip: one byte every 0.2 s of a 2,328-byte file (about 8 minutes)
            mode_base = f"{adversary.base}/drip"
            fb = featbook_fetch(mode_base, SMALL, tmp / "fb-drip", deadline=args.drip_deadline)
            po = pooch(f"{mode_base}/{OWNER}/{NAME}/{BRANCH}", SMALL, tmp / "po-drip", manifest,
                             wall=args.drip_wall)
            row("a server that drips one byte every 0.2 s", fb, po,
                f"featbook's deadline set to {args.drip_deadline:g} s for this run (default "
                f"{committed.DEADLINE_S:g} s); pooch's timeout (30 s) bounds each wait, not the download")
            # a listed file the server does not have
            gone = upstream / SMALL / "h200" / "README.md"
            data = gone.read_bytes()
            gone.unlink()
            mode_base = f"{adversary.base}/plain"
            fb = featbook_fetch(mode_base, SMALL, tmp / "fb-404")
            po = pooch(f"{mode_base}/{OWNER}/{NAME}/{BRANCH}", SMALL, tmp / "po-404", manifest)
            row("a listed file the server does not have (404)", fb, po)
            put(gone, data)
        finally:
            adversary.close()

        # 8. a file:// git repository
        git_repo = tmp / "repo.git"
        work = tmp / "work"
        copy_tree(upstream, work)
        env = {**os.environ, "GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x", "GIT_COMMITTER_NAME": "m",
               "GIT_COMMITTER_EMAIL": "m@x"}
        for command in (["git", "init", "-q", "-b", BRANCH, str(work)], ["git", "-C", str(work), "add", "results"],
                        ["git", "-C", str(work), "commit", "-q", "-m", "results"],
                        ["git", "clone", "-q", "--bare", str(work), str(git_repo)]):
            subprocess.run(command, check=True, env=env, capture_output=True)
        fb = featbook_fetch("", SMALL, tmp / "fb-git", repo_url=f"file://{git_repo}")
        po = pooch(f"file://{git_repo}", SMALL, tmp / "po-git", manifest)
        row("a file:// git repository", fb, po)

    print("\n| case | featbook.committed | pooch 1.9.0 | measured |\n| --- | --- | --- | --- |")
    for case, fb, po, note in rows:
        print(f"| {case} | {fb} | {po} | {note} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:  # the worker runs where featlib is not installed (the pooch venv)
        from featlib.cli.common import OneLineParser as Parser
    except ImportError:
        Parser = argparse.ArgumentParser
    parser = Parser(prog="benchmarks/committed_vs_pooch.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pooch-python", help="a Python with pooch installed (a throwaway venv)")
    parser.add_argument("--drip-deadline", type=float, default=5.0,
                        help="featbook's DEADLINE_S for the drip case (default 5 s; the module's is 120 s)")
    parser.add_argument("--drip-wall", type=float, default=20.0, help="seconds pooch gets in the drip case")
    parser.add_argument("--pooch-retries", type=int, default=2,
                        help="pooch's retry_if_failed (default 2: featbook tries 3 times; pooch's own default is 0)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for name in ("--base", "--sub", "--dest", "--manifest"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--retries", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return pooch_worker(args)
    if not args.pooch_python or not Path(args.pooch_python).is_file():
        print(f"error: --pooch-python {args.pooch_python}: give the python of a venv with pooch "
              "(python3 -m venv /tmp/pooch-venv && /tmp/pooch-venv/bin/pip install pooch==1.9.0)", file=sys.stderr)
        return 2
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
