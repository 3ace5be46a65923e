"""Run a sweep: expand it, skip finished runs, execute the rest, keep the index current, show progress.

Stopping a sweep at any point (Ctrl-C, a crash, a killed worker) and running it again finishes it: finished
runs (those with a ``record.json``) are skipped, every other run is rerun from a clean directory. Sweeps may
share a store and run at the same time: each run is claimed before it runs (:mod:`attnlab.runner.claim`), so
a run is computed once, and a sweep that finds a run claimed by another process waits for it at the end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attnlab.callbacks import progress_bar
from attnlab.runner.claim import wait_for_claim
from attnlab.runner.executors import InProcessExecutor, PoolExecutor, RayExecutor
from attnlab.runner.results import INDEX_COLUMNS, ResultsStore
from attnlab.runner.spec import Job, SweepSpec, expand
from attnlab.runner.task import Outcome, Task, get_task, is_finished

__all__ = ["SweepResult", "run_sweep"]

# The index is rebuilt from disk at most this often during a sweep (and always at the end), and at most once per
# ten times the last rebuild took (a store of 10^4 runs takes a fraction of a second to scan): a rebuild per
# finished run would cost time quadratic in the sweep size. Run directories, not the index, decide resume.
_INDEX_EVERY_SECONDS = 1.0
_INDEX_MAX_SHARE = 0.1


@dataclass(frozen=True)
class SweepResult:
    """What :func:`run_sweep` returns.

    Attributes
    ----------
    root : pathlib.Path
        The sweep's output folder.
    index : pandas.DataFrame
        This sweep's rows of the index (one per run, in sweep order), as read from disk at the end.
    ran : int
        Runs executed by this call (runs finished before, or by another sweep, are not counted).
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
        Show a progress bar with ETA (:func:`attnlab.callbacks.progress_bar`: only when stderr is a terminal).

    Returns
    -------
    SweepResult

    Raises
    ------
    ValidationError
        For an unknown task or parameters the task refuses, before any run starts.
    """
    jobs = expand(spec) if isinstance(spec, SweepSpec) else list(spec)
    executor = executor if executor is not None else InProcessExecutor()
    tasks = {job.task: get_task(job.task) for job in jobs}
    for job in jobs:
        tasks[job.task].check(job.params)
    store = ResultsStore(out)
    labels = [tasks[job.task].label(job.params) for job in jobs]
    run_dirs = [store.add(job, label) for job, label in zip(jobs, labels)]
    todo = [i for i, run_dir in enumerate(run_dirs) if not is_finished(run_dir)]  # a hint: claims decide
    last_write = time.monotonic()
    store.write_index()
    interval = max(_INDEX_EVERY_SECONDS, (time.monotonic() - last_write) / _INDEX_MAX_SHARE)
    last_write = time.monotonic()
    ran = 0
    bar = progress_bar(total=len(todo), desc="sweep", unit="run", show=None if progress else False)
    bar.set_postfix(skipped=len(jobs) - len(todo), refresh=False)
    try:
        while todo:
            busy: list[int] = []
            for outcome_index, outcome in _run(executor, tasks, jobs, run_dirs, todo):
                if outcome.status == "busy":
                    busy.append(outcome_index)
                    continue
                ran += outcome.ran
                bar.update(1)
                if time.monotonic() - last_write > interval:
                    started = time.monotonic()
                    store.write_index()
                    last_write = time.monotonic()
                    interval = max(_INDEX_EVERY_SECONDS, (last_write - started) / _INDEX_MAX_SHARE)
            for i in busy:
                wait_for_claim(run_dirs[i])  # another sweep holds it: it finishes it, fails, or dies
            todo = sorted(busy)
    finally:
        bar.close()
        index = store.write_index()
    mine = index.set_index("key").loc[[job.key for job in jobs]].reset_index()[INDEX_COLUMNS]
    mine["index"] = [job.index for job in jobs]
    return SweepResult(root=store.root, index=mine, ran=ran)


def _run(
    executor: InProcessExecutor | PoolExecutor | RayExecutor,
    tasks: dict[str, Task],
    jobs: Sequence[Job],
    run_dirs: Sequence[Path],
    todo: Sequence[int],
) -> Iterator[tuple[int, Outcome]]:
    """``(job position, outcome)`` for the jobs at positions ``todo``, task by task."""
    for task_name, task in tasks.items():
        mine = [i for i in todo if jobs[i].task == task_name]
        by_key = {jobs[i].key: i for i in mine}
        for outcome in executor.map(task, [jobs[i] for i in mine], [run_dirs[i] for i in mine]):
            yield by_key[outcome.key], outcome
