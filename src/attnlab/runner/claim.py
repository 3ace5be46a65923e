"""Exclusive claims on run directories: one advisory lock per run, released by the OS when its holder dies.

Two sweeps on one results store (or a retried Ray task beside a slow original) must never run the same run at
once, and a finished run must never be wiped. Before it touches a run directory, a worker takes the run's lock
(``flock`` on ``<run dir>/.lock``, non-blocking; ``msvcrt.locking`` on Windows): holding it, it decides whether
the run is still to do, then runs it. The kernel drops the lock when the process exits however it exits
(``kill -9`` included), so a killed sweep leaves no stale claim behind.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["LOCK", "claim", "is_claimed", "locked", "wait_for_claim"]

LOCK = ".lock"
_WINDOWS_POLL_SECONDS = 0.1  # msvcrt has no blocking lock without a time limit: a wait polls

if sys.platform == "win32":
    import msvcrt

    def _try_lock(fd: int, shared: bool) -> bool:
        del shared  # Windows byte-range locks are exclusive only
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _wait_lock(fd: int, shared: bool) -> None:
        while not _try_lock(fd, shared):
            time.sleep(_WINDOWS_POLL_SECONDS)

else:
    import fcntl

    def _try_lock(fd: int, shared: bool) -> bool:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _wait_lock(fd: int, shared: bool) -> None:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)  # Ctrl-C interrupts it (PEP 475)


def _open(path: Path, create: bool) -> int | None:
    # Read-write: Windows locks need write access. The umask decides the mode, as for any file written here.
    try:
        return os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o666)
    except FileNotFoundError:
        return None
    except PermissionError:
        if create:
            raise
        return os.open(path, os.O_RDONLY)  # someone else's store, read only: flock works on it all the same


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
    fd = _open(run_dir / LOCK, create=True)
    assert fd is not None  # created above
    try:
        yield _try_lock(fd, shared=False)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def is_claimed(run_dir: str | os.PathLike[str]) -> bool:
    """Whether a live process holds the claim on ``run_dir`` (never creates the lock file)."""
    fd = _open(Path(run_dir) / LOCK, create=False)
    if fd is None:
        return False
    try:
        return not _try_lock(fd, shared=True)
    finally:
        os.close(fd)


def wait_for_claim(run_dir: str | os.PathLike[str]) -> None:
    """Block until no process holds the claim on ``run_dir`` (its holder finished, failed or died)."""
    fd = _open(Path(run_dir) / LOCK, create=False)
    if fd is None:
        return
    try:
        _wait_lock(fd, shared=True)
    finally:
        os.close(fd)


@contextmanager
def locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created when missing) for the ``with`` block, waiting for it."""
    fd = _open(Path(path), create=True)
    assert fd is not None  # created above
    try:
        _wait_lock(fd, shared=False)
        yield
    finally:
        os.close(fd)
