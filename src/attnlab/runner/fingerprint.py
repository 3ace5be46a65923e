"""What computed a run: a hash of the source code that ran it and the versions of the libraries it leans on.

A finished run is reused only when its fingerprint equals the current one, so an edit to any function an
experiment calls (in attnlab, or in the package that defines a task or experiment of your own) makes the next
sweep or ``attnlab reproduce`` compute the run again instead of serving the old result.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["DEPENDENCIES", "code_fingerprint", "dependency_versions", "source_hash"]

#: The libraries whose version can change a result (attnlab's own version is recorded too).
DEPENDENCIES = ("torch", "numpy", "scipy", "cvxpy")


@functools.cache
def source_hash(package: str = "attnlab") -> str:
    """SHA-256 of every ``.py`` file of the installed ``package`` (relative paths and contents, in sorted order).

    Computed once per process: the code a process runs is the code it imported when it started.

    Parameters
    ----------
    package : str, default="attnlab"
        An importable top-level package or module.

    Returns
    -------
    str
        64 hex digits.
    """
    module = importlib.import_module(package)
    if module.__file__ is None:  # a namespace package: no source of its own to hash
        return hashlib.sha256(package.encode()).hexdigest()
    origin = Path(module.__file__).resolve()
    root = origin.parent if origin.name == "__init__.py" else origin
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root.parent)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@functools.cache
def dependency_versions() -> dict[str, str]:
    """Versions of attnlab and of :data:`DEPENDENCIES` as installed (read from their metadata: no import, so a
    pool worker that never imports cvxpy does not pay for it)."""
    import attnlab

    found = {"attnlab": attnlab.__version__}
    for name in DEPENDENCIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _top_packages(modules: Iterable[str]) -> list[str]:
    """The top-level packages of ``modules``, leaving out attnlab (hashed always) and the standard library."""
    tops = {m.split(".")[0] for m in modules if m and m != "__main__"}
    return sorted(t for t in tops if t != "attnlab" and t not in sys.stdlib_module_names)


def code_fingerprint(modules: Iterable[str] = ()) -> dict[str, Any]:
    """The fingerprint of the code that computes a run: attnlab's :func:`source_hash`, that of the top-level
    package of each module in ``modules`` (a task or experiment defined outside attnlab), and
    :func:`dependency_versions`.

    Parameters
    ----------
    modules : iterable of str
        Dotted names of modules whose code the run calls besides attnlab's (``type(task).__module__``, the
        module of an experiment's ``run``); attnlab's own modules and the standard library's are ignored.

    Returns
    -------
    dict
        ``{"source": {package: sha256}, "versions": {name: version}}``; two runs are computed by the same code
        exactly when their fingerprints are equal.
    """
    packages = ["attnlab", *_top_packages(modules)]
    return {"source": {p: source_hash(p) for p in packages}, "versions": dict(dependency_versions())}
