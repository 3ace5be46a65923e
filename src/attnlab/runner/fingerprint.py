"""What computed a run: a hash of the source code that ran it and the versions of the libraries it leans on.

A finished run is reused only when its fingerprint equals the current one, so an edit to any function an
experiment calls (in attnlab, or in the package that defines a task or experiment of your own) makes the next
sweep or ``attnlab reproduce`` compute the run again instead of serving the old result.

A task or experiment defined in the script that runs the sweep (module ``__main__``) is fingerprinted by that
script's source; one defined in a namespace package (no ``__init__.py``) by every ``.py`` file of each of its
folders. A task defined where there is no source file to read (``__main__`` of an interactive session, a notebook
or ``python -c``) cannot be fingerprinted: its runs are computed every time and never reused (their fingerprint
holds a random :data:`UNREADABLE` value that no later run matches). Define such a task in a file to reuse its runs.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import sys
import uuid
import warnings
from collections.abc import Iterable, MutableMapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnlab import _sources

if TYPE_CHECKING:
    from attnlab.runner.task import Task

__all__ = [
    "DEPENDENCIES",
    "MISSING",
    "UNREADABLE",
    "code_fingerprint",
    "dependency_versions",
    "input_digests",
    "is_unreadable",
    "run_fingerprint",
    "source_hash",
]

#: The libraries whose version can change a result (attnlab's own version is recorded too).
DEPENDENCIES = ("torch", "numpy", "scipy", "cvxpy")

#: What :func:`source_hash` returns for a module without source on disk; :func:`code_fingerprint` appends a random
#: suffix to it, so that a run computed by such code is never reused.
UNREADABLE = "unreadable"

#: The digest :func:`input_digests` gives a missing input file, followed by a random suffix (never reused).
MISSING = "missing"

_MAIN = "__main__"
_MAIN_ALIASES = ("__main__", "__mp_main__")  # a spawned worker imports the parent's script as __mp_main__


@functools.cache
def source_hash(package: str = "attnlab") -> str:
    """SHA-256 of every ``.py`` file of the installed ``package`` (relative paths and contents, in sorted order).

    Computed once per process: the code a process runs is the code it imported when it started. A namespace
    package (no ``__init__.py``) hashes the files of every folder of its ``__path__``; ``"__main__"`` hashes the
    script that runs.

    Parameters
    ----------
    package : str, default="attnlab"
        An importable top-level package or module, or ``"__main__"``.

    Returns
    -------
    str
        64 hex digits, or :data:`UNREADABLE` when the module has no source on disk (``__main__`` of an interactive
        session or a notebook).
    """
    files = _source_files(importlib.import_module(package))
    if files is None:
        return UNREADABLE
    _AT_HASH[package] = _stats(files)  # before reading: an edit made while hashing shows as a change later
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


#: ``{package: {path: (st_mtime_ns, st_size)}}`` of the files :func:`source_hash` read, when it read them.
_AT_HASH: dict[str, dict[str, tuple[int, int]]] = {}


def _stats(files: list[tuple[str, Path]]) -> dict[str, tuple[int, int]]:
    """``{path: (st_mtime_ns, st_size)}`` of ``files`` (a file gone reads ``(-1, -1)``)."""
    found = {}
    for _, path in files:
        try:
            stat = path.stat()
            found[str(path)] = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            found[str(path)] = (-1, -1)
    return found


def _edited_since_hashed(package: str) -> list[str]:
    """The source files of ``package`` added, removed or modified since this process hashed it (attnlab: since it
    was imported, :func:`attnlab._sources.changed_since_import`)."""
    if package == "attnlab":
        return _sources.changed_since_import()
    before = _AT_HASH.get(package)
    files = _source_files(importlib.import_module(package))
    if before is None or files is None:
        return []
    now = _stats(files)
    return sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))


def _source_files(module: Any) -> list[tuple[str, Path]] | None:
    """``(relative name, path)`` of each source file of ``module``, in sorted order, or None when it has none on
    disk. A package's names start with its folder's name (``pkg/sub/mod.py``), a module's is its file's name."""
    file = getattr(module, "__file__", None)
    if file is not None:
        origin = Path(file).resolve()
        if not origin.is_file():  # "<stdin>", a zip archive's member
            return None
        root = origin.parent if origin.name == "__init__.py" else origin
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        return [(str(p.relative_to(root.parent)), p) for p in files]
    folders = getattr(module, "__path__", None)
    if folders is None:  # __main__ of an interactive session or a notebook, a module built in memory
        return None
    found = []  # a namespace package: its portions may lie in several folders
    for folder in sorted({Path(f).resolve() for f in folders}):
        found += [(str(p.relative_to(folder.parent)), p) for p in sorted(folder.rglob("*.py"))]
    return sorted(found)


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
    """The top-level packages of ``modules``, leaving out attnlab (hashed always) and the standard library.

    ``__main__`` (the running script) is kept; when it runs as ``python -m package.module``, its package too."""
    tops = {_MAIN if m in _MAIN_ALIASES else m.split(".")[0] for m in modules if m}
    if _MAIN in tops:
        spec = getattr(sys.modules.get(_MAIN), "__spec__", None)
        if spec is not None and spec.name:
            tops.add(spec.name.split(".")[0])
    return sorted(t for t in tops if t != "attnlab" and (t == _MAIN or t not in sys.stdlib_module_names))


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
        exactly when their fingerprints are equal. A module without source on disk (``__main__`` of an interactive
        session or a notebook) gets ``"unreadable:<random hex>"``, unique to this call: no other run's fingerprint
        equals it, so its runs are computed every time and never reused. So does attnlab itself, with a
        ``RuntimeWarning``, once a source file of it changed since this process imported it
        (:func:`attnlab._sources.changed_since_import`), and another package once a file of it changed since this
        process first hashed it: the hash would not be that of the code in memory, nor of the code a pool worker
        imports from disk.
    """
    packages = ["attnlab", *_top_packages(modules)]
    source = {p: _unique_if_unreadable(source_hash(p)) for p in packages}
    for package in packages:
        edited = _edited_since_hashed(package)
        if edited:  # the hash is of the files as they were, not of the code that a worker would import now
            source[package] = _unique_if_unreadable(UNREADABLE)
            shown = ", ".join(edited[:3]) + (f" and {len(edited) - 3} more" if len(edited) > 3 else "")
            warnings.warn(
                f"{package}'s source changed since this process {'imported' if package == 'attnlab' else 'hashed'} "
                f"it ({shown}): the code in memory may not be the code on disk, so runs computed now are never "
                "reused; restart the Python process (the notebook's kernel) to reuse runs again",
                RuntimeWarning,
                stacklevel=2,
            )
    return {"source": source, "versions": dict(dependency_versions())}


def _unique_if_unreadable(digest: str) -> str:
    return f"{UNREADABLE}:{uuid.uuid4().hex}" if digest == UNREADABLE else digest


def is_unreadable(digest: object) -> bool:
    """Whether a source hash of a fingerprint stands for code without source on disk (never reused).

    Parameters
    ----------
    digest : object
        A value of a fingerprint's ``"source"`` mapping.

    Returns
    -------
    bool
    """
    return isinstance(digest, str) and digest.startswith(UNREADABLE)


def input_digests(
    paths: Iterable[str | os.PathLike[str]], known: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """SHA-256 of the contents of each input file of a run, by path, for its fingerprint.

    Parameters
    ----------
    paths : iterable of path
        The files the run reads (:meth:`attnlab.runner.task.Task.inputs`).
    known : mutable mapping of str to str, optional
        Digests already taken, by path; filled with the new ones, so that a sweep reads each file once.

    Returns
    -------
    dict of str to str
        ``{path: sha256}``; a missing file (or one that cannot be read) gets ``"missing:<random hex>"``, which no
        stored run matches: the run is computed, and the task reports the missing file.
    """
    known = {} if known is None else known
    found = {}
    for path in paths:
        name = str(path)
        if name not in known:
            try:
                known[name] = file_sha256(Path(path))
            except OSError:  # missing, a folder, unreadable: the run cannot be known to match, and its task says why
                known[name] = f"{MISSING}:{uuid.uuid4().hex}"
        found[name] = known[name]
    return found


def run_fingerprint(
    task: Task, params: dict[str, Any], known: MutableMapping[str, str] | None = None
) -> dict[str, Any]:
    """The fingerprint of one run: what must equal a stored run's for it to be reused.

    Parameters
    ----------
    task : attnlab.runner.task.Task
        The task that computes the run.
    params : dict of str to Any
        The run's parameters.
    known : mutable mapping of str to str, optional
        Digests of input files already read, by path (shared by the runs of a sweep: each file is read once).

    Returns
    -------
    dict
        :func:`code_fingerprint` of :meth:`~attnlab.runner.task.Task.modules`, and, when the task names
        input files (:meth:`~attnlab.runner.task.Task.inputs`), ``"inputs"``: the SHA-256 of each one's contents, by path
        (:func:`input_digests`).
    """
    code = code_fingerprint(task.modules(params))
    files = task.inputs(params)
    if files:
        code["inputs"] = input_digests(files, known)
    return code


def file_sha256(path: Path) -> str:
    """SHA-256 of the contents of the file ``path``, read in 1 MiB chunks (an input of a run, or an output that its
    manifest lists); raises ``OSError`` when it cannot be read."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
