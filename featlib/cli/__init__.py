"""The command-line entry points: each parses its options, checks them before any work (one
line naming the value and the remedy, exit 2), runs what :mod:`featlib.experiments` (the studies)
or :mod:`featlib.cost` define, and writes a result folder with provenance.

* ``python -m featlib.cli.run_cmnist`` -- Table 2's protocol on ColoredMNIST (a result folder, or
  accumulating pieces with ``--pieces``);
* ``python -m featlib.cli.merge_pieces`` -- pieces made elsewhere into a pieces folder;
* ``python -m featlib.cli.compare_paths`` -- Table 2 per OOD path and precision, compared cell by cell;
* ``python -m featlib.cli.run_rounds`` -- feature learning alone, Table 7's rounds;
* ``python -m featlib.cli.gap_studies`` -- the diagnostic studies of chapter 04;
* ``python -m featlib.cli.run_wilds`` -- the WILDS protocol (Table 3);
* ``python -m featlib.cli.cost`` -- the cost benchmark (Table 14, chapter 07).

Results are read back by :mod:`featlib.experiments.results` and :mod:`featlib.cost.results`,
never by these modules.
"""
