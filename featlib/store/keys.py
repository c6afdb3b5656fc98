"""The one way a result is keyed: a short SHA-256 of its canonical JSON description.

Every cached or committed result names what made it by a key computed here, from a mapping of
the fields it depends on (featlib's version among them, where the caller adds it): the
ColoredMNIST protocol's features, OOD-stage units and oracle
(:meth:`featlib.experiments.colored_mnist.CMNISTProtocol.key`), the WILDS protocol's
(:class:`featlib.experiments.wilds_experiment.WildsProtocol`), the gap studies', the saliency
study's and the cost benchmark's. File contents are checked with SHA-256 too (cached files'
headers in :mod:`featlib.store.files`, Table 2's pieces' records through :func:`digest` in
:mod:`featlib.store.pieces`, result folders' manifests in :mod:`featlib.store.folders`), so one hash
function serves both.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

#: Hexadecimal digits of a key: 64 bits, no collision among the results of any study here.
KEY_LENGTH = 16


def key(payload: Any, length: int = KEY_LENGTH) -> str:
    """The first ``length`` hex digits of the SHA-256 of ``payload`` as canonical JSON (keys
    sorted, tuples as lists, anything else as its ``str``)."""
    text = json.dumps(payload, sort_keys=True, default=lambda v: list(v) if isinstance(v, (tuple, set)) else str(v))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def digest(data: bytes) -> str:
    """The SHA-256 of ``data``, whole: what a record says of a file's bytes."""
    return hashlib.sha256(data).hexdigest()
