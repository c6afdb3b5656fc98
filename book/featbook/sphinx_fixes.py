"""A Sphinx extension that ``featbook.build`` stages with the book (standalone: no featlib imports).

Sphinx 7.4 lists twice an inline script that an extension adds once the builder has started: once
as ``filename=None`` (added to the builder) and once as ``filename=''`` (from the registry). For
sphinx-thebe's ``const THEBE_JS_URL = ...`` the second copy throws "Identifier 'THEBE_JS_URL'
has already been declared" in the browser. This keeps the first copy of each script on every page.

It also registers the bibliography's style, ``featbook`` (``bibtex_default_style`` in
``_config.yml``): pybtex's ``unsrt`` entries, sorted by author and year, each labelled as the text
cites it ("Chen et al., 2023b"), so that the citations and the bibliography use one author-year
style (sphinxcontrib-bibtex's own styles label entries "[CHZ+23]").
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


def author_year_label(entry) -> str:
    """"Chen et al., 2023b", "Gulrajani and Lopez-Paz, 2021", "Hu, 2020": an entry as the text cites it."""
    import re

    names = [re.sub(r"[{}\\']", "", " ".join(p.last_names)) for p in entry.persons.get("author", [])]
    if not names:
        authors = entry.fields.get("title", "Anonymous")
    elif len(names) == 1:
        authors = names[0]
    elif len(names) == 2:
        authors = f"{names[0]} and {names[1]}"
    else:
        authors = f"{names[0]} et al."
    return f"{authors}, {entry.fields.get('year', '')}"


def register_bibliography_style() -> None:
    """Register the ``featbook`` pybtex style (author-year labels); once per process."""
    from pybtex.plugin import find_plugin, register_plugin
    from pybtex.style.formatting.unsrt import Style as Unsrt
    from pybtex.style.labels import BaseLabelStyle

    try:
        find_plugin("pybtex.style.formatting", "featbook")
        return
    except Exception:  # noqa: BLE001  (pybtex raises PluginNotFound)
        pass

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            for entry in sorted_entries:
                yield author_year_label(entry)

    class FeatBook(Unsrt):
        default_label_style = "featbook_author_year"
        default_sorting_style = "author_year_title"

    register_plugin("pybtex.style.labels", "featbook_author_year", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "featbook", FeatBook)


def setup(app):
    register_bibliography_style()
    # After the handlers that add page scripts (Sphinx's MathJax one has the default 500).
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
