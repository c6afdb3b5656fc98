"""Parameter profiles from inside a notebook: one call applies a named profile to this chapter.

A profile (``notebooks/profiles/<name>.yaml``: ``small`` for CI and CPUs, ``colab`` for one Colab
GPU session) maps each chapter notebook to the parameter values that override its defaults.
``python -m featbook.notebooks --profile NAME`` applies one from the command line; in a notebook,
Colab included, one line at the end of the parameters cell does it::

    from featbook import profiles; profiles.apply("small", globals())

The chapter is the one the notebook's first cell names (``FEATLIB_CHAPTER``). The profile files
ship inside the package (``book/featbook/profile_data`` is the ``notebooks/profiles`` folder), so this
works where featlib was installed from git without a checkout. :func:`as_python` writes a
chapter's values as Python lines to paste into the parameters cell instead.
"""
from __future__ import annotations

from pathlib import Path

import yaml

#: The profile files (a link to notebooks/profiles in the repository, a copy in an installed featlib).
PROFILE_DIR = Path(__file__).resolve().parent / "profile_data"
#: The variable the install cell sets to the chapter's number ("01" ... "09").
CHAPTER_VARIABLE = "FEATLIB_CHAPTER"


def names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load(name: str) -> dict[str, dict]:
    """The profile ``name``: notebook stem -> parameter values."""
    path = PROFILE_DIR / f"{name}.yaml"
    if not isinstance(name, str) or not path.is_file():
        raise ValueError(f"profile must be one of {names()}; got {name!r}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"profile {name!r} ({path}) must map notebook names to their parameters; fix the file")
    return data


def chapter_values(name: str, chapter: str) -> tuple[str, dict]:
    """The notebook stem of chapter ``chapter`` ("05" or "05_feat_on_wilds") in profile ``name``
    and its values (empty: the chapter runs its defaults under that profile)."""
    profile = load(name)
    stems = [stem for stem in profile if stem == chapter or stem.split("_", 1)[0] == str(chapter)]
    if len(stems) != 1:
        raise ValueError(f"chapter must be one of {sorted(s.split('_', 1)[0] for s in profile)}; got {chapter!r}")
    return stems[0], dict(profile[stems[0]])


def as_python(name: str, chapter: str) -> str:
    """Chapter ``chapter``'s values in profile ``name`` as lines of Python for the parameters cell."""
    _, values = chapter_values(name, chapter)
    return "\n".join(f"{key} = {value!r}" for key, value in values.items())


def notebook_namespace() -> dict:
    """The running IPython kernel's namespace (empty outside a kernel)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    return getattr(get_ipython(), "user_ns", None) or {}


def notebook_chapter(namespace: dict | None = None) -> str | None:
    """The chapter a notebook's first cell named (``FEATLIB_CHAPTER``), from ``namespace`` or the
    running IPython kernel's; ``None`` outside a chapter notebook."""
    if namespace is None:
        namespace = notebook_namespace()
    chapter = namespace.get(CHAPTER_VARIABLE)
    return chapter if isinstance(chapter, str) else None


def in_use(name: str, chapter: str, namespace: dict) -> bool:
    """Whether ``namespace`` already holds every value of chapter ``chapter`` in profile ``name``."""
    _, values = chapter_values(name, chapter)
    return all(k in namespace and namespace[k] == v for k, v in values.items())


def apply(name: str, namespace: dict, chapter: str | None = None) -> dict:
    """Set chapter ``chapter``'s values of profile ``name`` in ``namespace`` (a notebook's
    ``globals()``, after its parameters cell) and say which; the values set. ``chapter`` defaults
    to the one the notebook's first cell named. A value whose name is not a parameter of the
    notebook is refused before anything is set."""
    chapter = chapter or notebook_chapter(namespace)
    if chapter is None:
        raise ValueError(f"chapter is unknown: run the notebook's first cell (it sets {CHAPTER_VARIABLE}), or pass "
                         f"chapter=\"05\"")
    stem, values = chapter_values(name, chapter)
    unknown = sorted(set(values) - set(namespace))
    if unknown:
        raise ValueError(f"profile {name!r} sets {unknown}, which this notebook does not define: run the parameters "
                         f"cell first, then profiles.apply(\"{name}\", globals())")
    namespace.update(values)
    shown = "; ".join(f"{k} = {v!r}" for k, v in values.items()) or "nothing (this chapter runs its defaults)"
    print(f"The {name} profile of {stem}: {shown}")
    return values
