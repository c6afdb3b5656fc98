"""Every name and format an older featlib wrote, read under today's: the one module to delete
when no result or cache of featlib 0.4 or earlier is left.

Committed results are never rewritten; they are read with these maps applied (a test reads every
committed folder through them). The maps, old name -> today's:

* :data:`RECORD_ALIASES` -- the feature learner was ``init`` (ColoredMNIST pieces and their rows)
  and ``method`` (WILDS and cost rows);
* :data:`ROW_ALIASES` -- a feature learner's history rows called FeAT's combined head
  ``*_average_head`` before it could be the sum;
* :data:`ROUND_COLUMN_ALIASES` -- per-round records: ``threshold`` for FeAT's
  ``termination_threshold``, and the two above;
* :data:`CMNIST_RECORD_ALIASES` and :data:`WILDS_RECORD_ALIASES` -- protocol fields of the
  provenance records of ``run_cmnist`` and ``run_wilds`` folders (``termination``, ``inits``,
  ``methods``, ``scale``);
* :data:`COST_RECORD_ALIASES` -- the cost benchmark's settings (``methods``);
* :data:`STATE_ALIASES` -- the entries of a FeAT checkpoint (``learner`` held its rounds' state).

Formats: the verified CSV and torch files of the cache (:mod:`.files`) and the pieces
(:mod:`.pieces`) are read by their own modules; a cached file of an older format is refused by
its checks and recomputed, never trusted.
"""
from __future__ import annotations

RECORD_ALIASES = {"init": "learner", "method": "learner"}
ROW_ALIASES = {f"{score}_average_head": f"{score}_combined_head" for score in ("ood_acc", "val_metric", "test_metric")}
ROUND_COLUMN_ALIASES = {"threshold": "termination_threshold", **RECORD_ALIASES, **ROW_ALIASES}
CMNIST_RECORD_ALIASES = {"termination": "termination_threshold", "inits": "learners"}
WILDS_RECORD_ALIASES = {"termination": "termination_rule", "methods": "learners", "scale": "epoch_scale"}
COST_RECORD_ALIASES = {"methods": "learners"}
STATE_ALIASES = {"learner": "feat_rounds"}


def renamed(record: dict, aliases: dict) -> dict:
    """``record`` with its old field names replaced by today's."""
    return {aliases.get(k, k): v for k, v in record.items()}
