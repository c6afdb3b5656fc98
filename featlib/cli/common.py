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


def describe_os_error(err: OSError, where=None) -> str:
    """One line for an :class:`OSError` met while a command works (a full disk, a folder taken
    away): what failed, where, and that the finished work stays (every command writes atomically
    and resumes), so the remedy is to free space or fix the folder and run the same command again."""
    if getattr(err, "remedy_included", False):  # e.g. MNIST missing: its own remedy, no disk's
        return str(err)
    what = err.strerror or str(err) or type(err).__name__
    path = err.filename or where or "a file"
    return (f"{path}: {what}; what was finished is kept: free space or fix the folder, "
            "then run the same command again")


def os_errors_in_one_line(main):
    """A command's ``main(argv) -> int`` whose :class:`OSError` (a full disk during a results
    commit or a piece's write, a folder removed meanwhile) is one line on stderr and exit status 2
    instead of a traceback. The commands write atomically, so what was finished stays whole. So is a
    commit that would overwrite a user's file (:class:`featlib.store.folders.NotOurs`), and one
    refused by the folder's lock (held by another run, lost while held, unavailable) or because
    another command's results took the folder meanwhile."""
    import functools

    from ..store.files import FolderBusy, LockLost, LockUnavailable
    from ..store.folders import KindChanged, NotOurs

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except (NotOurs, FolderBusy, LockLost, LockUnavailable, KindChanged) as err:
            # a user's file where the commit would write, a folder another run holds or took, a lock
            # file deleted while held, a file system without locks: nothing written, and said so
            print(f"error: {err}", file=sys.stderr)
            return 2
        except OSError as err:
            print(f"error: {describe_os_error(err)}", file=sys.stderr)
            return 2
    return wrapped


def holding(out, who: str, run) -> int:
    """``run()`` (a command's work on the result folder ``out``, returning its exit status) while
    this process holds the folder's lock (:func:`featlib.store.folders.folder_lock`); a folder that
    another run holds is one line and exit status 2."""
    from ..store.files import FolderBusy
    from ..store.folders import folder_lock

    try:
        with folder_lock(out, who):
            return run()
    except FolderBusy as err:  # another run adds to the folder now
        print(f"error: {err}", file=sys.stderr)
        return 2
