"""Temporary folders for the CPU tests' runs (tests/*/check_*.py): removed
at exit when every check passed, kept, with their reports and logs, when one
failed (a test's `failed` tells which)."""
import atexit
import shutil
import tempfile

_made = []
_failed = [lambda: True]


def scratch(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    _made.append(d)
    return d


def keep_if(failed):
    """`failed()` is asked at exit: the folders stay when it is true."""
    _failed[0] = failed


@atexit.register
def _tidy():
    if not _failed[0]():
        for d in _made:
            shutil.rmtree(d, ignore_errors=True)
