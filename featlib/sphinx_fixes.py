"""A Sphinx extension that ``featlib.book`` stages with the book (standalone: no featlib imports).

Sphinx 7.4 lists twice an inline script that an extension adds once the builder has started: once
as ``filename=None`` (added to the builder) and once as ``filename=''`` (from the registry). For
sphinx-thebe's ``const THEBE_JS_URL = ...`` the second copy throws "Identifier 'THEBE_JS_URL'
has already been declared" in the browser. This keeps the first copy of each script on every page.
"""
from __future__ import annotations


def script_key(script) -> tuple:
    """What makes two page scripts the same: file (``None`` is ``''``), priority and attributes."""
    attributes = getattr(script, "attributes", {}) or {}
    return (getattr(script, "filename", script) or "", getattr(script, "priority", None),
            tuple(sorted((k, str(v)) for k, v in attributes.items())))


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique  # in place: the builder restores its own list after each page


def setup(app):
    # After the handlers that add page scripts (Sphinx's MathJax one has the default 500).
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
