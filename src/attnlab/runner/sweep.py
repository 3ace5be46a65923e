"""Run a sweep: expand it, skip finished runs, execute the rest, keep the index current, show progress.

Stopping a sweep at any point (Ctrl-C, a crash, a killed worker) and running it again finishes it: finished
runs (those with a ``record.json``) are skipped, every other run is rerun from a clean directory.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attnlab.runner.executors import InProcessExecutor, PoolExecutor, RayExecutor
from attnlab.runner.results import ResultsStore
from attnlab.runner.spec import Job, SweepSpec, expand
from attnlab.runner.task import Outcome, get_task

__all__ = ["SweepResult", "run_sweep"]

# The index is rewritten at most this often during a sweep (and always at the end): a whole-table rewrite
# per finished run would cost time quadratic in the sweep size. Run directories, not the index, decide resume.
_INDEX_EVERY_SECONDS = 1.0


@dataclass(frozen=True)
class SweepResult:
    """What :func:`run_sweep` returns.

    Attributes
    ----------
    root : pathlib.Path
        The sweep's output folder.
    index : pandas.DataFrame
        The index as written to ``index.parquet`` (one row per run).
    ran : int
        Runs executed by this call (finished runs that were skipped are not counted).
    """

    root: Path
    index: pd.DataFrame
    ran: int

    @property
    def failed(self) -> pd.DataFrame:
        """Rows of runs that failed."""
        return self.index[self.index["status"] == "failed"]


def run_sweep(
    spec: SweepSpec | Sequence[Job],
    out: str | os.PathLike[str],
    executor: InProcessExecutor | PoolExecutor | RayExecutor | None = None,
    *,
    progress: bool = True,
) -> SweepResult:
    """Run every unfinished run of a sweep and write the results store under ``out``.

    Parameters
    ----------
    spec : SweepSpec or list of Job
        The sweep (its task must be registered, see :func:`~attnlab.runner.task.register_task`).
    out : path
        Output folder: ``index.parquet`` and ``runs/<label>-<key>/``.
    executor : executor, optional
        Where runs execute; default :class:`InProcessExecutor` (batched where the task allows).
    progress : bool, default=True
        Show a progress bar with ETA (tqdm; off when stderr is not a terminal).

    Returns
    -------
    SweepResult

    Raises
    ------
    ValidationError
        For an unknown task or parameters the task refuses, before any run starts.
    """
    from tqdm.auto import tqdm

    jobs = expand(spec) if isinstance(spec, SweepSpec) else list(spec)
    executor = executor if executor is not None else InProcessExecutor()
    tasks = {job.task: get_task(job.task) for job in jobs}
    for job in jobs:
        tasks[job.task].check(job.params)
    store = ResultsStore(out)
    labels = [tasks[job.task].label(job.params) for job in jobs]
    statuses = {job.key: store.status(job, label) for job, label in zip(jobs, labels)}
    outcomes: dict[str, Outcome] = {}
    todo = [i for i, job in enumerate(jobs) if statuses[job.key] != "done"]
    store.write_index(store.index_frame(jobs, labels, statuses, outcomes))
    last_write = time.monotonic()
    bar = tqdm(total=len(todo), desc="sweep", unit="run", disable=None if progress else True, dynamic_ncols=True)
    bar.set_postfix(skipped=len(jobs) - len(todo), refresh=False)
    try:
        for task_name, task in tasks.items():
            mine = [i for i in todo if jobs[i].task == task_name]
            run_dirs = [store.run_dir(jobs[i], labels[i]) for i in mine]
            for outcome in executor.map(task, [jobs[i] for i in mine], run_dirs):
                outcomes[outcome.key] = outcome
                bar.update(1)
                if time.monotonic() - last_write > _INDEX_EVERY_SECONDS:
                    store.write_index(store.index_frame(jobs, labels, statuses, outcomes))
                    last_write = time.monotonic()
    finally:
        bar.close()
        index = store.index_frame(jobs, labels, statuses, outcomes)
        store.write_index(index)
    return SweepResult(root=store.root, index=index, ran=len(outcomes))
