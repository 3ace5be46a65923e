"""The results store of a sweep: one directory per run, named by its config hash, and an index of runs.

Layout under the sweep's root folder::

    index.parquet                     one row per run of the sweep: index, key, task, label, status, ...
    runs/<label>-<key>/record.json    written last by the task: its presence marks a finished run
    runs/<label>-<key>/*.parquet      the run's tables (and figures, checkpoints, error.txt on failure)

The status of a run is read from its directory, never trusted from the index, so an index left behind by a
killed sweep cannot make an unfinished run look finished.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from attnlab._validation import ValidationError
from attnlab.runner.spec import Job
from attnlab.runner.store import write_parquet
from attnlab.runner.task import ERROR, Outcome, is_finished

__all__ = ["INDEX_COLUMNS", "ResultsStore", "read_index"]

INDEX_COLUMNS = ["index", "key", "task", "label", "status", "seconds", "run_dir", "params", "error"]
INDEX = "index.parquet"


def _label(text: str) -> str:
    # Keep directory names portable: letters, digits, '.', '-', '_'.
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in text) or "run"


class ResultsStore:
    """Run directories and the index of one sweep under ``root``.

    Parameters
    ----------
    root : path
        The sweep's output folder (created when missing).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def run_dir(self, job: Job, label: str) -> Path:
        """``root/runs/<label>-<key>``: the same config always maps to the same directory."""
        return self.root / "runs" / f"{_label(label)}-{job.key}"

    def status(self, job: Job, label: str) -> str:
        """``"done"`` (``record.json`` exists), ``"failed"`` (``error.txt`` exists) or ``"pending"``."""
        run_dir = self.run_dir(job, label)
        if is_finished(run_dir):
            return "done"
        return "failed" if (run_dir / ERROR).is_file() else "pending"

    def index_frame(
        self, jobs: Sequence[Job], labels: Sequence[str], statuses: dict[str, str], outcomes: dict[str, Outcome]
    ) -> pd.DataFrame:
        """The index table: one row per job; status from ``outcomes`` where known, else from ``statuses``."""
        rows = []
        for job, label in zip(jobs, labels):
            outcome = outcomes.get(job.key)
            run_dir = self.run_dir(job, label)
            rows.append(
                {
                    "index": job.index,
                    "key": job.key,
                    "task": job.task,
                    "label": label,
                    "status": outcome.status if outcome else statuses[job.key],
                    "seconds": float(outcome.seconds) if outcome else float("nan"),
                    "run_dir": str(run_dir.relative_to(self.root)),
                    "params": json.dumps(job.params, sort_keys=True),
                    "error": outcome.error if outcome else "",
                }
            )
        return pd.DataFrame(rows, columns=INDEX_COLUMNS)

    def write_index(self, frame: pd.DataFrame) -> Path:
        """Write ``index.parquet`` atomically."""
        return write_parquet(self.root / INDEX, frame)


def read_index(root: str | os.PathLike[str]) -> pd.DataFrame:
    """The index of the sweep in ``root``, with each run's status re-read from its directory.

    Parameters
    ----------
    root : path
        A sweep's output folder (``attnlab sweep --out``).

    Returns
    -------
    pandas.DataFrame
        Columns ``index, key, task, label, status, seconds, run_dir, params, error``; ``params`` is JSON text.

    Raises
    ------
    ValidationError
        If ``root`` has no ``index.parquet``.
    """
    root = Path(root)
    path = root / INDEX
    if not path.is_file():
        raise ValidationError(f"{str(root)!r} holds no {INDEX}; pass the --out folder of a sweep")
    frame = pd.read_parquet(path)
    finished = [is_finished(root / d) for d in frame["run_dir"]]
    frame["status"] = ["done" if f else ("pending" if s == "done" else s) for f, s in zip(finished, frame["status"])]
    return frame
