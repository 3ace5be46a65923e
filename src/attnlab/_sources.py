"""attnlab's source files as this process found them when it imported attnlab: their sizes and modification times.

The code a process runs is the code it imported; a run is reused only when the fingerprint of that code is the
current one (:mod:`attnlab.runner.fingerprint`). The fingerprint hashes the files on disk the first time it is asked
for, so an edit made after ``import attnlab`` (a notebook that edits a module and keeps its kernel) would key runs
computed by the old code in memory with the new code's hash. :data:`AT_IMPORT`, taken here when attnlab is
imported (under a millisecond: a stat per file), lets the fingerprint see such an edit and refuse to key runs by it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["AT_IMPORT", "ROOT", "changed_since_import", "stats"]

ROOT = Path(__file__).resolve().parent


def stats(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """``{path: (st_mtime_ns, st_size)}`` of every ``.py`` file under ``root`` (``__pycache__`` left out)."""
    found: dict[str, tuple[int, int]] = {}

    def walk(folder: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        walk(entry.path)
                elif entry.name.endswith(".py"):
                    stat = entry.stat()
                    found[entry.path] = (stat.st_mtime_ns, stat.st_size)

    walk(str(root))
    return found


AT_IMPORT = stats()


def changed_since_import() -> list[str]:
    """The source files added, removed or modified since attnlab was imported, relative to the package's folder.

    Returns
    -------
    list of str
        Sorted paths (``"runner/task.py"``); empty when the code on disk is the code this process imported.
    """
    now = stats()
    changed = {p for p in now.keys() | AT_IMPORT.keys() if now.get(p) != AT_IMPORT.get(p)}
    return sorted(os.path.relpath(p, ROOT) for p in changed)
