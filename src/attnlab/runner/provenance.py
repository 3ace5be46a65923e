"""Where a run came from: the git commit of the code that ran, and whether it had local edits.

``record.json`` keeps this next to the command line, config, seed and versions, so a run can be traced back to
its code and replayed (``attnlab run --config record.json``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["git_state"]

_PACKAGE_FILE = Path(__file__).resolve().parents[1] / "__init__.py"


def _git(folder: Path, *args: str) -> str | None:
    """The stripped output of ``git -C folder args``, or None when git is missing or the command fails."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(source: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """The commit of the git checkout that tracks ``source``, and whether its tracked files have local edits.

    Parameters
    ----------
    source : path, optional
        A file whose checkout to describe; default attnlab's own ``__init__.py`` (the code that runs).

    Returns
    -------
    dict or None
        ``{"commit": <40 hex digits>, "dirty": bool}``; None when ``source`` is not a tracked file of a git
        checkout (an installed wheel, a copied tree, no git on PATH). A virtual environment inside a clone holds
        untracked files, so an installed attnlab is never credited with the clone's commit.

    Notes
    -----
    ``dirty`` counts edits to tracked files, staged or not, and untracked ``.py`` files in ``source``'s folder
    and below (a new module is code that may run); other untracked files (run outputs, scratch notes) do not
    make a checkout dirty, as in ``git describe --dirty``.
    """
    path = Path(source) if source is not None else _PACKAGE_FILE
    folder = path.parent
    if _git(folder, "ls-files", "--error-unmatch", "--", path.name) is None:
        return None
    commit = _git(folder, "rev-parse", "HEAD")
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    untracked = _git(folder, "ls-files", "--others", "--exclude-standard", "--", "*.py")
    if commit is None or status is None or untracked is None:
        return None
    return {"commit": commit, "dirty": bool(status or untracked)}
