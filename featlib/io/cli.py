"""The command-line parser of featlib's commands: a bad argument is one line and exit status 2.

argparse prints its usage text before an error; the commands' rule is one line naming the value
and the remedy, so :class:`OneLineParser` prints only ``error: <message> (see --help)``.
"""
from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors are one line on stderr and exit status 2."""

    def error(self, message: str):  # noqa: D102  (argparse's hook)
        print(f"error: {self.prog}: {message} (see --help)", file=sys.stderr)
        sys.exit(2)
