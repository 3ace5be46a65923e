"""Exclusive claims on run directories: one advisory lock per run, released by the OS when its holder dies.

Two sweeps on one results store (or a retried Ray task beside a slow original) must never run the same run at
once, and a finished run must never be wiped. Before it touches a run directory, a worker takes the run's lock
(``flock`` on ``<run dir>/.lock``, non-blocking): holding it, it decides whether the run is still to do, then
runs it. The kernel drops the lock when the process exits however it exits (``kill -9`` included), so a killed
sweep leaves no stale claim behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["LOCK", "claim", "is_claimed", "wait_for_claim"]

LOCK = ".lock"


@contextmanager
def claim(run_dir: str | os.PathLike[str]) -> Iterator[bool]:
    """Hold the exclusive claim on ``run_dir`` for the ``with`` block; yields whether it was obtained.

    The directory is created when missing. ``False`` means another process (or another claim in this one)
    holds the run: leave it alone.

    Examples
    --------
    >>> import tempfile
    >>> run_dir = tempfile.mkdtemp()
    >>> with claim(run_dir) as mine, claim(run_dir) as again:
    ...     (mine, again)
    (True, False)
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o666)  # the umask decides the mode, as for any file
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def is_claimed(run_dir: str | os.PathLike[str]) -> bool:
    """Whether a live process holds the claim on ``run_dir`` (never creates the lock file)."""
    try:
        fd = os.open(Path(run_dir) / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def wait_for_claim(run_dir: str | os.PathLike[str]) -> None:
    """Block until no process holds the claim on ``run_dir`` (its holder finished, failed or died)."""
    try:
        fd = os.open(Path(run_dir) / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # Ctrl-C interrupts the wait (PEP 475 re-raises KeyboardInterrupt)
    finally:
        os.close(fd)
