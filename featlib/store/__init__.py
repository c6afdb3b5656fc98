"""The store: every result featlib writes or reads, checked, in a few formats with one home.

* :mod:`.pieces` -- Table 2's unit of work, the *piece* (one dataset, learner, objective and seed:
  a CSV and its record), in the cache (keyed by protocol) and in results folders, copied from
  one to the other when committed; one writer per folder.
* :mod:`.folders` -- result folders written as a whole with their provenance and manifest
  (``run_cmnist``, ``run_rounds``, ``run_wilds``, ``gap_studies``, ``featlib.cli.cost``), and read
  back checked.
* :mod:`.files` -- the cache's other verified files (learned features, studies, WILDS pieces,
  cost records, checkpoints), computed once per key under a lock.
* :mod:`.keys` -- the one key scheme (SHA-256); :mod:`.legacy` -- every name an older featlib wrote;
  :mod:`.atomic`, :mod:`.paths`, :mod:`.csv_io`, :mod:`.provenance` -- the writing, the paths,
  the CSV dialect and the records they share.

No other module of featlib reads or writes a result file (``tests/test_store_only.py``).
"""
