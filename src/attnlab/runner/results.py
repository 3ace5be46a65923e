"""The results store of sweeps: one directory per run, named by its config hash, and an index rebuilt from disk.

Layout under the store's root folder::

    index.parquet                     one row per run in the store: index, key, task, label, status, ...
    runs/<label>-<key>/job.json       what the run is (task, key, params, label), written when a sweep adds it
    runs/<label>-<key>/.lock          the run's claim (see attnlab.runner.claim)
    runs/<label>-<key>/record.json    written last by the task: its presence marks a finished run
    runs/<label>-<key>/outcome.json   "done" or "diverged" and the run's seconds, written after record.json
    runs/<label>-<key>/*.parquet      the run's tables (and figures, checkpoints, error.txt on failure)

The index is never trusted: it is rebuilt from the run directories (under a lock, so that concurrent sweeps on
one store write it in turn), and :func:`read_index` rebuilds it again. A status is one of ``done``,
``diverged`` (finished; the run stopped on its own), ``failed`` (``error.txt``; rerun by the next sweep),
``running`` (a live process holds the run's claim) and ``pending``.
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
from attnlab.runner.spec import Job
from attnlab.runner.store import write_json, write_parquet
from attnlab.runner.task import ERROR, JOB, OUTCOME, finished_status, is_finished

__all__ = ["INDEX_COLUMNS", "ResultsStore", "read_index"]

INDEX_COLUMNS = ["index", "key", "task", "label", "status", "seconds", "run_dir", "params", "error"]
INDEX = "index.parquet"
_INDEX_LOCK = ".index.lock"


def _label(text: str) -> str:
    # Keep directory names portable: letters, digits, '.', '-', '_'.
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in text) or "run"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


class ResultsStore:
    """Run directories and the index of the sweeps under ``root``.

    Parameters
    ----------
    root : path
        The store's output folder (created when missing).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = make_dir(root)
        self._final: dict[str, dict[str, Any]] = {}  # rows of finished runs, which never change: read once
        self._jobs: dict[str, dict[str, Any]] = {}  # job.json of each run directory, which never changes

    def run_dir(self, job: Job, label: str) -> Path:
        """``root/runs/<label>-<key>``: the same config always maps to the same directory."""
        return self.root / "runs" / f"{_label(label)}-{job.key}"

    def add(self, job: Job, label: str) -> Path:
        """Write the run's ``job.json`` unless it is there already; returns the run directory."""
        run_dir = self.run_dir(job, label)
        if not (run_dir / JOB).is_file():
            job_json = {"task": job.task, "key": job.key, "params": job.params, "label": label, "index": job.index}
            write_json(run_dir / JOB, job_json)
        return run_dir

    def status(self, job: Job, label: str) -> str:
        """The run's status as its directory shows it now (see the module docstring)."""
        return _status(self.run_dir(job, label))

    def scan(self) -> pd.DataFrame:
        """The index rebuilt from disk: one row per run directory with a ``job.json``, by (index, key)."""
        rows = []
        runs = self.root / "runs"
        for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
            row = self._final.get(run_dir.name) or self._row(run_dir)
            if row is None:
                continue
            if row["status"] in ("done", "diverged"):
                self._final[run_dir.name] = row
            rows.append(row)
        frame = pd.DataFrame(rows, columns=INDEX_COLUMNS)
        return frame.sort_values(["index", "key"], kind="stable").reset_index(drop=True)

    def _row(self, run_dir: Path) -> dict[str, Any] | None:
        job = self._jobs.get(run_dir.name) or _read_json(run_dir / JOB)
        if job is None or not {"task", "key", "params"} <= set(job):
            return None
        self._jobs[run_dir.name] = job
        status = _status(run_dir)
        outcome = _read_json(run_dir / OUTCOME) or {}
        error = ""
        if status == "failed":
            try:
                error = (run_dir / ERROR).read_text()
            except OSError:
                error = ""
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
        }

    def write_index(self) -> pd.DataFrame:
        """Rebuild the index from disk and write ``index.parquet`` atomically; returns the index.

        Holds a lock on the store while it scans and writes, so the last writer always writes the latest scan.
        """
        with locked(self.root / _INDEX_LOCK):
            frame = self.scan()
            write_parquet(self.root / INDEX, frame)
        return frame


def _status(run_dir: Path) -> str:
    if is_finished(run_dir):
        return finished_status(run_dir)
    if is_claimed(run_dir):
        return "running"
    return "failed" if (run_dir / ERROR).is_file() else "pending"


def read_index(root: str | os.PathLike[str]) -> pd.DataFrame:
    """The index of the results store in ``root``, rebuilt from its run directories.

    Parameters
    ----------
    root : path
        A sweep's output folder (``attnlab sweep --out``).

    Returns
    -------
    pandas.DataFrame
        Columns ``index, key, task, label, status, seconds, run_dir, params, error``; ``params`` is JSON text;
        ``status`` is ``done``, ``diverged``, ``failed``, ``running`` or ``pending``.

    Raises
    ------
    ValidationError
        If ``root`` holds no sweep (neither ``index.parquet`` nor ``runs/``).
    """
    root = Path(root)
    if not (root / INDEX).is_file() and not (root / "runs").is_dir():
        raise ValidationError(f"{str(root)!r} holds no {INDEX}; pass the --out folder of a sweep")
    return ResultsStore(root).scan()
