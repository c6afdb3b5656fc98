"""Committed full-scale evidence as a chapter shows it: one provenance line, the command folded.

An empirical chapter leads with the results committed under ``results/`` (made at the paper's
size, on some device, by a recorded command) and only then runs its own, smaller version. Each
committed folder holds a ``provenance.json`` (command, commit, device, wall time, seeds...). The
page states it in one short line, :func:`provenance_line`, and folds the command into a
collapsed block, :func:`command_block`; :func:`show` displays both. Where nothing full-scale is
shown, :func:`missing` says why, once, plainly: the committed results could not be fetched (in
Colab: what to do), or nothing is committed (:func:`nothing_committed`).

The run of the build comes after, as "run it yourself": :func:`run_it_yourself` is the one
sentence that introduces it, and it claims nothing a small run cannot carry (no ranking).
"""
from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from featbook import prose


def provenance_line(what: str, prov: Mapping[str, Any], size: str | None = None) -> str:
    """"<what>: <size>, <n> seeds, on <device> (<wall time>)." in one line of the narrative.

    ``size`` is the data size in words ("50,000 training images"); seeds, device and wall time come
    from the provenance record ``prov`` (each left out when it does not record it). The commit
    stays out of the narrative: :func:`command_block` names it beside the folded command."""
    parts = [size] if size else []
    seeds = prov.get("seeds")
    if seeds:
        datasets = prov.get("datasets") or []
        per = " per dataset" if len(datasets) > 1 else ""
        parts.append(prose.count(len(seeds), "seed") + per)
    if prov.get("device"):
        threads = f" ({prose.count(int(prov['threads']), 'thread')})" if prov.get("threads") and prov["device"] == "cpu" else ""
        parts.append(f"on {'a CPU' if prov['device'] == 'cpu' else prov['device']}{threads}")
    runs = prov.get("runs") if isinstance(prov.get("runs"), list) and len(prov.get("runs")) > 1 else None
    if runs:  # a folder several runs added to (run_rounds): their number and summed wall time
        seconds = sum(float(r["wall_time_s"]) for r in runs if r.get("wall_time_s") is not None)
        line = f"{what}: {', '.join(parts)}" if parts else what
        # a run that took under a second wrote the folder from the cache of an earlier, stopped run
        cached = sum(r.get("wall_time_s") is not None and float(r["wall_time_s"]) < 1.0 for r in runs)
        note = (f"; {cached} of {len(runs)} runs wrote the folder from the cache of an earlier run, so this is not "
                "what training took: the folder's README gives that") if cached else ""
        return line + f" ({prose.count(len(runs), 'run')}, {prose.minutes(seconds)} of wall time in all{note})."
    line = f"{what}: {', '.join(parts)}" if parts else what
    if prov.get("wall_time_s") is not None:
        line += f"{', ' if parts else ': '}{prose.minutes(float(prov['wall_time_s']))} of wall time"
        per_run = prov.get("wall_time_s_per_run")
        # a run that took under a second was read from the cache of an earlier run, not trained
        cached = sum(float(v) < 1.0 for v in per_run.values()) if isinstance(per_run, Mapping) else 0
        if cached and cached == len(per_run):
            line += (" (every run was read from the cache of an earlier run, so this is the time of writing the "
                     "folder, not of training)")
        elif cached:
            line += (f" ({cached} of {len(per_run)} runs were read from the cache of an earlier run, so this is not "
                     "what training them all took)")
        elif float(prov["wall_time_s"]) < 1.0 and "cache" in str(prov.get("note", "")):
            line += (" (its pieces were read from the cache of an earlier run, so this is the time of writing the "
                     "folder, not of training; the folder's README gives that)")
    return line + "."


def command_block(prov: Mapping[str, Any], summary: str = "The command that made them") -> str:
    """HTML: the recorded command (machine folders cut, :func:`featbook.prose.command`) in a
    collapsed ``<details>`` block, shown as a shell command under a line naming the commit(s); a
    folder several runs added to shows each run's command, one per line, and its summary says how
    many. The commits stay inside the fold: the line a reader sees in the narrative has no hashes."""
    runs = prov.get("runs") if isinstance(prov.get("runs"), list) and len(prov.get("runs")) > 1 else None
    commands = [str(r.get("command", "")) for r in runs] if runs else [str(prov.get("command", ""))]
    command = "\n".join(html.escape(prose.command(c)) for c in commands)
    commits = sorted({str(r.get("commit", ""))[:12] for r in runs if r.get("commit")}) if runs else (
        [str(prov["commit"])[:12]] if prov.get("commit") else [])
    if runs:
        # the count is of commands (runs of the command line), not of the seeds or runs of the study;
        # a fold titled otherwise ("How these results were made") stays one plain line, no count
        if summary.startswith("The command "):
            summary = f"The {len(runs)} commands " + summary[len("The command "):]
    at = (f"<p>At commit{'s' if len(commits) > 1 else ''} {html.escape(prose.listing(commits))} of this repository:</p>"
          if commits else "")
    moved = sorted({m for c in commands if (m := moved_entry_point(c))})
    note = "".join(f"<p>Recorded as run then: <code>{html.escape(old)}</code> is <code>{html.escape(new)}</code> today "
                   f"(<code>python -m {html.escape(new)} --help</code> lists its options; some were renamed since).</p>"
                   for old, new in moved)
    return (f'<details class="feat-provenance"><summary>{html.escape(summary)}</summary>{at}'
            f'<div class="highlight-bash notranslate"><div class="highlight"><pre>{command}</pre></div></div>'
            f'{note}</details>')


def moved_entry_point(command: str) -> tuple[str, str] | None:
    """``(recorded module, today's)`` when a recorded ``python -m featlib....`` command names a
    module that is not a command-line entry point today and ``featlib.cli`` has one of the same
    name (``featlib.experiments.run_rounds`` -> ``featlib.cli.run_rounds``); else ``None``."""
    import importlib.util

    parts = command.split()
    if "-m" not in parts or parts.index("-m") + 1 >= len(parts):
        return None
    module = parts[parts.index("-m") + 1]
    if not module.startswith("featlib.") or module.startswith("featlib.cli."):
        return None
    today = "featlib.cli." + module.rsplit(".", 1)[-1]
    try:
        found = importlib.util.find_spec(today) is not None
    except ModuleNotFoundError:
        found = False
    return (module, today) if found else None


def nothing_committed(what: str, command: str) -> str:
    """The one plain sentence of a chapter whose full-scale results are not committed yet."""
    return (f"No full-scale {what} is committed yet: `{command}` makes it, and this section shows it "
            "once it is under `results/`.")


def _failed(located) -> Any:
    """The first of ``located`` (one :class:`featbook.committed.Located` or several) whose fetch or
    load failed, else None."""
    many = located if isinstance(located, (list, tuple)) else [located]
    return next((one for one in many if getattr(one, "failed", False)), None)


def missing(located, what: str, command: str) -> str:
    """Why a chapter shows no full-scale ``what``: when the committed results could not be fetched
    (or a fetched file did not load), that, with what to do in Colab (the located note); otherwise
    :func:`nothing_committed`. ``located`` is what :func:`featbook.committed.locate` returned, or a
    list of them when the section reads several folders (the first failed one is reported)."""
    failed = _failed(located)
    if failed is not None:
        return f"The committed full-scale {what} cannot be shown here. {failed.note}"
    return nothing_committed(what, command)


def run_it_yourself(run) -> str:
    """The sentence that introduces a chapter's own run: its size, and what a run that size can
    and cannot show. ``run``: a :class:`featbook.run_scale.RunScale`, or its summary (a small run)."""
    run_summary = run if isinstance(run, str) else run.summary
    if not isinstance(run, str) and run.can_compare_methods:
        return (f"**This page's own run: {run_summary}.** At this size the methods' differences can be read "
                "against its seeds' spread; its numbers are this run's, beside the committed evidence above "
                "rather than in place of it.")
    return (f"**This page's own run, at reduced size: {run_summary}.** It shows every step of the method "
            "running and what each table looks like, not the paper's result: at this size it ranks "
            "nothing. The parameters cell sets the size; its full-scale values are the ones behind the "
            "evidence above.")


def show_all(*objects) -> None:
    """Display each of ``objects`` under a cell, skipping None and "": a string as HTML when it
    starts with a tag (a collapsed provenance line), else as Markdown; anything else as it is."""
    from IPython.display import HTML, Markdown, display

    for obj in objects:
        if obj is None or obj == "":
            continue
        if isinstance(obj, str):
            obj = HTML(obj) if obj.startswith("<") else Markdown(obj)
        display(obj)


def show_missing(located, what: str, command: str) -> None:
    """Display :func:`missing`: why the committed ``what`` is not shown, and the command that makes it."""
    show_all(missing(located, what, command))


def show_run_it_yourself(run) -> None:
    """Display :func:`run_it_yourself`: this page's own run, its size and what it can show."""
    show_all(run_it_yourself(run))


def show(what: str, prov: Mapping[str, Any], size: str | None = None) -> None:
    """Display :func:`provenance_line` as Markdown and :func:`command_block` as HTML."""
    from IPython.display import HTML, Markdown, display

    display(Markdown(provenance_line(what, prov, size)))
    display(HTML(command_block(prov)))


def made_by(line: str, prov: Mapping[str, Any] | None = None,
            summary: str = "How these results were made") -> str:
    """HTML: the one collapsed line under a committed figure or table. Its summary is all the
    reading text shows; inside are the provenance ``line`` (:func:`provenance_line`, or any sentence
    of the same kind, with `code` in backticks) and, given ``prov``, the recorded command and commit
    (:func:`command_block`). Device, wall time, caches and commits stay inside the fold."""
    import re

    body = "<p>" + re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(line, quote=False)) + "</p>"
    if prov is None:
        return f'<details class="feat-provenance"><summary>{html.escape(summary)}</summary>{body}</details>'
    return command_block(prov, summary).replace("</summary>", "</summary>" + body, 1)


def show_made_by(what: str, prov: Mapping[str, Any], size: str | None = None,
                 summary: str = "How these results were made") -> None:
    """Display :func:`made_by` of :func:`provenance_line` (the folded form of :func:`show`)."""
    from IPython.display import HTML, display

    display(HTML(made_by(provenance_line(what, prov, size), prov, summary)))


def termination_summary(stops, max_rounds: int, learner: str = "ifeat", label: str | None = None) -> str:
    """How the rounds of ``learner`` ended, from :func:`featlib.experiments.cmnist_analysis.stop_rounds`'s
    frame (one row per dataset and seed, ``discarded_round`` NaN when no round was discarded):
    how many runs the 130% check stopped, and how many ran to the cap of ``max_rounds``.
    ``label``: what the text calls the learner (default: its label, "FeAT (iFeAT)" for iFeAT)."""
    from featlib.experiments.labels import label as label_of

    label = label or label_of("learner", learner)
    rows = stops[stops["learner"] == learner]
    if rows.empty:
        return f"No rounds of {label} are recorded."
    by_rule = int(rows["discarded_round"].notna().sum())
    at_cap = int((rows["discarded_round"].isna() & (rows["rounds_kept"] >= max_rounds)).sum())
    text = (f"The 130% check discarded a round, and the featurizer rolled back, in {by_rule} of "
            f"{prose.count(len(rows), 'seed-dataset run')} of {label}")
    if at_cap:
        text += f"; {at_cap} ran to the cap of {prose.count(max_rounds, 'round')}"
    return text + "."
