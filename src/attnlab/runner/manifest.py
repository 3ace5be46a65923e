"""The manifest of a finished run: every file it wrote, with size and SHA-256, the code that computed it, and when.

The runner writes ``manifest.json`` last, once the task has written its outputs and ``outcome.json``; a run
directory is finished exactly when its manifest is there and every file it lists is intact. A store damaged
after the fact (a truncated ``trajectory.parquet``, a deleted ``W.npy``, a ``record.json`` overwritten with
garbage) is therefore seen as damaged, never served as a result, and the next sweep computes the run again.
"""

from __future__ import annotations

import datetime as _dt
import json
import stat
import time
from pathlib import Path
from typing import Any

from attnlab.runner.claim import LOCK
from attnlab.runner.fingerprint import MISSING, file_sha256, is_unreadable
from attnlab.runner.provenance import git_state
from attnlab.runner.store import write_json

__all__ = ["MANIFEST", "damage", "read_manifest", "reuse_problem", "reused_from", "write_manifest"]

MANIFEST = "manifest.json"
_NOT_OUTPUTS = (LOCK, "job.json", MANIFEST, "error.txt")  # the store's own files and a failed attempt's traceback


def _outputs(run_dir: Path) -> list[Path]:
    # temp files of an interrupted atomic write start with a dot; none is an output
    return sorted(
        p for p in run_dir.rglob("*") if p.is_file() and p.name not in _NOT_OUTPUTS and not p.name.startswith(".")
    )


def write_manifest(run_dir: str | Path, code: dict[str, Any], reason: str) -> dict[str, Any]:
    """List the outputs of the finished run in ``run_dir`` in ``manifest.json``, written last (atomically).

    Parameters
    ----------
    run_dir : path
        The run directory, its outputs written.
    code : dict
        The fingerprint of the run (:func:`attnlab.runner.task.run_fingerprint`): the code that computed it and
        the digests of its input files.
    reason : str
        Why the run was computed (``"new run"``, ``"the code changed since ..."``, ``"the stored run was
        damaged: ..."``), shown by the report and ``attnlab sweep``.

    Returns
    -------
    dict
        The manifest: ``files`` (relative path to ``{"size", "sha256"}``), ``code``, ``reason``, ``finished``
        (UTC, ISO 8601), ``finished_unix`` and ``git`` (commit and dirty flag, or None outside a checkout).
    """
    run_dir = Path(run_dir)
    files = {
        str(p.relative_to(run_dir)): {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in _outputs(run_dir)
    }
    now = time.time()
    manifest = {
        "files": files,
        "code": code,
        "reason": reason,
        "finished": _dt.datetime.fromtimestamp(now, _dt.timezone.utc).isoformat(timespec="seconds"),
        "finished_unix": now,
        "git": git_state(),
    }
    write_json(run_dir / MANIFEST, manifest)
    return manifest


def read_manifest(run_dir: str | Path) -> dict[str, Any] | None:
    """The manifest of ``run_dir``, or None when it is missing or unreadable (an unfinished or damaged run)."""
    try:
        manifest = json.loads((Path(run_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None
    return manifest


def damage(run_dir: str | Path, manifest: dict[str, Any], *, deep: bool = True) -> str | None:
    """What is wrong with the files of a finished run, or None when each file its manifest lists is intact.

    Parameters
    ----------
    run_dir : path
    manifest : dict
        From :func:`read_manifest`.
    deep : bool, default=True
        Compare SHA-256 digests; ``False`` compares sizes only (cheap enough for every scan of a large store).

    Returns
    -------
    str or None
        One phrase per damaged file, e.g. ``"W.npy is missing; trajectory.parquet has 812 bytes, not 4096"``.
    """
    run_dir = Path(run_dir)
    problems = [_file_damage(run_dir / name, name, entry, deep) for name, entry in sorted(manifest["files"].items())]
    return "; ".join(p for p in problems if p is not None) or None


def _file_damage(path: Path, name: str, entry: Any, deep: bool) -> str | None:
    """What is wrong with one file a manifest lists, or None. A file deleted while it is checked (a rerun of the
    run, by another sweep, empties the run directory) is missing: the run is damaged, which is the truth."""
    if not isinstance(entry, dict):
        return f"{name} is missing"
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return f"{name} is missing"
        if info.st_size != entry.get("size"):
            return f"{name} has {info.st_size} bytes, not {entry.get('size')}"
        if deep and file_sha256(path) != entry.get("sha256"):
            return f"{name} changed after the run (its SHA-256 differs)"
    except (FileNotFoundError, NotADirectoryError):
        return f"{name} is missing"
    return None


def _when(manifest: dict[str, Any]) -> str:
    git = manifest.get("git") or {}
    commit = f", commit {git['commit'][:10]}{' (dirty)' if git.get('dirty') else ''}" if git.get("commit") else ""
    return f"{manifest.get('finished', '?')}{commit}"


def _code_change(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Which parts of the code fingerprint differ: the packages whose source changed, the versions that moved."""
    old_source, old_versions = stored.get("source") or {}, stored.get("versions") or {}
    changed = [f"the source of {p}" for p, h in current["source"].items() if old_source.get(p) != h]
    changed += [
        f"{n} {old_versions.get(n, '?')} -> {v}" for n, v in current["versions"].items() if old_versions.get(n) != v
    ]
    return changed


def _input_change(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Which input files of the fingerprint differ: missing now, or with other contents (or none recorded)."""
    old, new = stored.get("inputs") or {}, current.get("inputs") or {}
    changed = [f"{f} is missing" for f, h in new.items() if str(h).startswith(MISSING)]
    changed += [f"the contents of {f}" for f, h in new.items() if not str(h).startswith(MISSING) and old.get(f) != h]
    return changed


def _stale(manifest: dict[str, Any], code: dict[str, Any]) -> str:
    """Why a finished run whose fingerprint differs from ``code`` is computed again, in words."""
    unreadable = sorted(p for p, h in code["source"].items() if is_unreadable(h))
    if unreadable:
        return (
            f"the source of {', '.join(unreadable)} cannot be read (an interactive session or a notebook), so its "
            "runs are never reused; define the task in a file to reuse them"
        )
    stored = manifest.get("code") if isinstance(manifest.get("code"), dict) else {}
    code_parts, input_parts = _code_change(stored, code), _input_change(stored, code)
    subject = "the input files" if input_parts and not code_parts else "the code"
    if input_parts and code_parts:
        subject = "the code and the input files"
    return f"{subject} changed since the run of {_when(manifest)}: {', '.join(code_parts + input_parts) or 'the code'}"


def reuse_problem(
    run_dir: str | Path, code: dict[str, Any], *, not_before: float | None = None, deep: bool = True
) -> str | None:
    """Why the run stored in ``run_dir`` cannot be reused as the result of ``code``, or None when it can.

    A stored run is reused only when it finished (its manifest is there), its files are intact, it was computed
    by the same code and library versions from input files of the same contents, and (for ``--fresh``) it
    finished at or after ``not_before``.

    Parameters
    ----------
    run_dir : path
    code : dict
        The current fingerprint of the run (:func:`~attnlab.runner.task.run_fingerprint`: the code's
        :func:`~attnlab.runner.fingerprint.code_fingerprint` and its input files' digests).
    not_before : float, optional
        Unix time; a run finished earlier is not reused (``--fresh``: only runs of this sweep count).
    deep : bool, default=True
        Verify file digests (see :func:`damage`).

    Returns
    -------
    str or None
        The reason to compute the run, in words: ``"new run"``, ``"the last attempt did not finish"``,
        ``"the stored run was damaged: ..."``, ``"the code changed since the run of <time, commit>: ..."`` (or ``"the input files changed ..."``),
        ``"the source of __main__ cannot be read ..."`` (never reused, see :mod:`attnlab.runner.fingerprint`) or
        ``"--fresh: the run of <time, commit> is not reused"``.
    """
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if manifest is None:
        if (run_dir / MANIFEST).exists():
            return "the stored run was damaged: manifest.json is unreadable"
        leftovers = [p for p in run_dir.iterdir() if p.name not in _NOT_OUTPUTS] if run_dir.is_dir() else []
        return "the last attempt did not finish" if leftovers or (run_dir / "error.txt").exists() else "new run"
    broken = damage(run_dir, manifest, deep=deep)
    if broken is not None:
        return f"the stored run was damaged: {broken}"
    if manifest.get("code") != code:
        return _stale(manifest, code)
    if not_before is not None and float(manifest.get("finished_unix", 0.0)) < not_before:
        return f"--fresh: the run of {_when(manifest)} is not reused"
    return None


def reused_from(manifest: dict[str, Any]) -> str:
    """``"<finished time>, commit <hash>"`` of a stored run, for "reused from ..." lines."""
    return _when(manifest)
