"""The results store of sweeps: one directory per run, named by its config hash, and an index rebuilt from disk.

Layout under the store's root folder::

    index.parquet                     one row per run in the store: index, key, task, label, status, ...
    runs/<label>-<key>/job.json       what the run is (task, key, params, label), written when a sweep adds it
    runs/<label>-<key>/.lock          the run's claim (see attnlab.runner.claim)
    runs/<label>-<key>/record.json    written last by the task
    runs/<label>-<key>/outcome.json   "done" or "diverged" and the run's seconds, written after record.json
    runs/<label>-<key>/manifest.json  written last by the runner: every file's size and SHA-256, the code
                                      fingerprint, when and why the run was computed (attnlab.runner.manifest)
    runs/<label>-<key>/*.parquet      the run's tables (and figures, checkpoints, error.txt on failure)

The index is never trusted: it is rebuilt from the run directories (under a lock, so that concurrent sweeps on
one store write it in turn), and :func:`read_index` rebuilds it again. A status is one of ``done``,
``diverged`` (finished; the run stopped on its own), ``damaged`` (finished, but a file its manifest lists is
missing or has changed size, or the manifest or ``job.json`` is unreadable; rerun by the next sweep),
``failed`` (``error.txt``; rerun by the next sweep), ``running`` (a live process holds the run's claim) and
``pending``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab._io import make_dir
from attnlab._validation import ValidationError
from attnlab.runner.claim import is_claimed, locked
from attnlab.runner.manifest import MANIFEST, damage, read_manifest
from attnlab.runner.spec import Job
from attnlab.runner.store import read_json_object, write_json, write_parquet
from attnlab.runner.task import ERROR, JOB, OUTCOME, finished_status

__all__ = ["INDEX_COLUMNS", "ResultsStore", "read_index"]

INDEX_COLUMNS = [
    "index",
    "key",
    "task",
    "label",
    "status",
    "seconds",
    "run_dir",
    "params",
    "error",
    "finished",
    "commit",
    "reason",
]
INDEX = "index.parquet"
_INDEX_LOCK = ".index.lock"


def _label(text: str) -> str:
    # Keep directory names portable: letters, digits, '.', '-', '_'.
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in text) or "run"


class ResultsStore:
    """Run directories and the index of the sweeps under ``root``.

    Parameters
    ----------
    root : path
        The store's output folder (created when missing).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = make_dir(root)
        # rows of finished runs, each with its manifest's stamp: read again only when the run was computed again
        self._final: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
        self._jobs: dict[str, dict[str, Any]] = {}  # job.json of each run directory, which never changes

    def run_dir(self, job: Job, label: str) -> Path:
        """``root/runs/<label>-<key>``: the same config always maps to the same directory.

        Parameters
        ----------
        job : Job
            The run; its key names the directory.
        label : str
            A readable prefix (:meth:`Task.label`); characters other than letters, digits, ``.``, ``-`` and ``_``
            become ``_``.

        Returns
        -------
        pathlib.Path
            The run directory (not created here).
        """
        return self.root / "runs" / f"{_label(label)}-{job.key}"

    def add(self, job: Job, label: str) -> Path:
        """Write the run's ``job.json`` unless an intact one is there already; returns the run directory.

        A ``job.json`` that is unreadable or describes another run (damaged by hand or by a disk fault) is
        rewritten: the directory's name holds the run's key, so the job it belongs to is known.

        Parameters
        ----------
        job : Job
            The run; its key names the directory.
        label : str
            A readable prefix (:meth:`Task.label`); characters other than letters, digits, ``.``, ``-`` and ``_``
            become ``_``.

        Returns
        -------
        pathlib.Path
            The run directory, created when missing.
        """
        run_dir = self.run_dir(job, label)
        stored = read_json_object(run_dir / JOB)
        if stored is None or stored.get("key") != job.key or stored.get("task") != job.task:
            job_json = {"task": job.task, "key": job.key, "params": job.params, "label": label, "index": job.index}
            write_json(run_dir / JOB, job_json)
            self._jobs.pop(run_dir.name, None)
            self._final.pop(run_dir.name, None)
        return run_dir

    def forget(self, run_dir: Path) -> None:
        """Drop the row of ``run_dir`` read while it was finished: the next scan reads it from disk (a run that was
        computed again since).

        Parameters
        ----------
        run_dir : pathlib.Path
            A run directory of this store.
        """
        self._final.pop(Path(run_dir).name, None)

    def status(self, job: Job, label: str) -> tuple[str, str]:
        """The run's status as its directory shows it now (see the module docstring), and what went wrong, if anything.

        Parameters
        ----------
        job : Job
            The run; its key names the directory.
        label : str
            A readable prefix (:meth:`Task.label`); characters other than letters, digits, ``.``, ``-`` and ``_``
            become ``_``.

        Returns
        -------
        status : {"done", "diverged", "damaged", "failed", "running", "pending"}
        error : str
            What went wrong for ``"failed"`` (the traceback) and ``"damaged"``; ``""`` otherwise.
        """
        return _status(self.run_dir(job, label))

    def scan(self) -> pd.DataFrame:
        """The index rebuilt from disk: one row per run directory, by (index, key).

        A directory whose ``job.json`` is unreadable is listed as ``damaged`` (its key read from its name), so
        that no run drops out of the index unnoticed.

        Returns
        -------
        pandas.DataFrame
            Columns :data:`INDEX_COLUMNS`, one row per run directory, sorted by (index, key); empty when the store
            holds no run.
        """
        rows = []
        runs = self.root / "runs"
        for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
            if not run_dir.is_dir():
                continue
            stamp = _stamp(run_dir / MANIFEST)
            cached = self._final.get(run_dir.name)
            row = cached[1] if cached is not None and stamp is not None and cached[0] == stamp else self._row(run_dir)
            if stamp is not None and row["status"] in ("done", "diverged"):
                self._final[run_dir.name] = (stamp, row)
            rows.append(row)
        frame = pd.DataFrame(rows, columns=INDEX_COLUMNS)
        return frame.sort_values(["index", "key"], kind="stable").reset_index(drop=True)

    def _row(self, run_dir: Path) -> dict[str, Any]:
        job = self._jobs.get(run_dir.name) or read_json_object(run_dir / JOB)
        if job is None or not {"task", "key", "params"} <= set(job):
            label, _, key = run_dir.name.rpartition("-")
            return {
                **_EMPTY_ROW,
                "key": key,
                "label": label,
                "status": "damaged",
                "run_dir": str(run_dir.relative_to(self.root)),
                "error": f"{JOB} is missing or unreadable; the next sweep that holds this run rewrites it",
            }
        self._jobs[run_dir.name] = job
        status, error = _status(run_dir)
        outcome = read_json_object(run_dir / OUTCOME) or {}
        manifest = read_manifest(run_dir) or {}
        return {
            "index": int(job.get("index", 0)),
            "key": job["key"],
            "task": job["task"],
            "label": job.get("label", job["task"]),
            "status": status,
            "seconds": float(outcome.get("seconds", float("nan"))),
            "run_dir": str(run_dir.relative_to(self.root)),
            "params": json.dumps(job["params"], sort_keys=True),
            "error": error,
            "finished": str(manifest.get("finished", "")),
            "commit": str((manifest.get("git") or {}).get("commit", "")),
            "reason": str(manifest.get("reason", "")),
        }

    def write_index(self) -> pd.DataFrame:
        """Rebuild the index from disk and write ``index.parquet`` atomically; returns the index.

        Holds a lock on the store while it scans and writes, so the last writer always writes the latest scan.

        Returns
        -------
        pandas.DataFrame
            The index written, as :meth:`scan` returns it.
        """
        with locked(self.root / _INDEX_LOCK):
            frame = self.scan()
            write_parquet(self.root / INDEX, frame)
        return frame


_EMPTY_ROW: dict[str, Any] = {
    "index": -1,
    "task": "",
    "seconds": float("nan"),
    "params": "{}",
    "finished": "",
    "commit": "",
    "reason": "",
}


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """``(inode, mtime in ns, size)`` of ``path``, or ``None`` when it is missing: a run computed again writes a new
    manifest (a new file, renamed into place), so a finished run's row read under one stamp holds while it lasts."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _status(run_dir: Path) -> tuple[str, str]:
    """The run's status and, for ``failed`` and ``damaged``, what went wrong."""
    manifest = read_manifest(run_dir)
    broken = damage(run_dir, manifest, deep=False) if manifest is not None else None
    if manifest is not None and broken is None:
        return finished_status(run_dir), ""
    if is_claimed(run_dir):
        return "running", ""
    if broken is not None:
        return "damaged", broken
    if (run_dir / MANIFEST).exists():
        return "damaged", f"{MANIFEST} is unreadable"
    if (run_dir / ERROR).is_file():
        try:
            return "failed", (run_dir / ERROR).read_text()
        except OSError:
            return "failed", ""
    return "pending", ""


def read_index(root: str | os.PathLike[str]) -> pd.DataFrame:
    """The index of the results store in ``root``, rebuilt from its run directories.

    Parameters
    ----------
    root : path
        A sweep's output folder (``attnlab sweep --out``).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`INDEX_COLUMNS`: ``index, key, task, label, status, seconds, run_dir, params, error,
        finished, commit, reason``; ``params`` is JSON text; ``status`` is ``done``, ``diverged``, ``damaged``,
        ``failed``, ``running`` or ``pending``; ``error`` holds the traceback of a failed run and what is wrong
        with a damaged one; ``finished`` (UTC), ``commit`` and ``reason`` (why it was computed) come from the
        manifest of a finished run.

    Raises
    ------
    ValidationError
        If ``root`` holds no sweep (neither ``index.parquet`` nor ``runs/``).
    """
    root = Path(root)
    if not (root / INDEX).is_file() and not (root / "runs").is_dir():
        raise ValidationError(f"{str(root)!r} holds no {INDEX}; pass the --out folder of a sweep")
    return ResultsStore(root).scan()
