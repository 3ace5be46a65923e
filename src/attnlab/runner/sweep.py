"""Run a sweep: expand it, skip finished runs, execute the rest, keep the index current, show progress.

Stopping a sweep at any point (Ctrl-C, a crash, a killed worker) and running it again finishes it: finished
runs are reused when their files are intact and the code that computed them is the current code
(:mod:`attnlab.runner.manifest`, :mod:`attnlab.runner.fingerprint`); every other run is rerun from a clean
directory, and its manifest says why. Sweeps may
share a store and run at the same time: each run is claimed before it runs (:mod:`attnlab.runner.claim`), so
a run is computed once, and a sweep that finds a run claimed by another process waits for it at the end.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from attnlab._validation import ValidationError, check_bool
from attnlab.runner.claim import wait_for_claim
from attnlab.runner.executors import InProcessExecutor, PoolExecutor, RayExecutor
from attnlab.runner.manifest import reuse_problem
from attnlab.runner.results import INDEX, INDEX_COLUMNS, ResultsStore
from attnlab.runner.spec import Job, SweepSpec, expand
from attnlab.runner.task import Outcome, Reuse, Task, get_task, run_fingerprint
from attnlab.training.callbacks import progress_bar

__all__ = ["SweepResult", "check_out", "run_sweep"]

# The index is rebuilt from disk at most this often during a sweep (and always at the end), and at most once per
# ten times the last rebuild took (a store of 10^4 runs takes a fraction of a second to scan): a rebuild per
# finished run would cost time quadratic in the sweep size. Run directories, not the index, decide resume.
_INDEX_EVERY_SECONDS = 1.0
_INDEX_MAX_SHARE = 0.1
_BAD_RUNS_SHOWN = 50  # lines of a refusal; the count of the others follows
# The end of the refusal of an output folder of other files, by what writes into it.
_OUT_OWNERS = {
    "sweep": (
        "an attnlab sweep",
        "a sweep writes its runs, index and report only into an empty folder or a sweep's own",
    ),
    "reproduce": (
        "an attnlab report folder",
        "reproduce writes its report, runs and index only into an empty folder or one that an earlier reproduce wrote",
    ),
}


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
    recomputed : dict of str to str
        Why this call computed each run it ran, by key (``"new run"``, ``"the code changed since ..."``,
        ``"the stored run was damaged: ..."``; see :func:`attnlab.runner.manifest.reuse_problem`).
    """

    root: Path
    index: pd.DataFrame
    ran: int
    recomputed: dict[str, str] = field(default_factory=dict)

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
    fresh: bool = False,
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
        Show a progress bar with ETA (:func:`attnlab.training.callbacks.progress_bar`: only when stderr is a terminal).
    fresh : bool, default=False
        Compute every run again, even one stored intact by the current code. Runs that another process is
        computing are never wiped: they are waited for, and kept when they finish after this call started.

    Returns
    -------
    SweepResult

    Raises
    ------
    ValidationError
        For an unknown task or parameters the task refuses, or a ``spec``, ``out`` or ``executor`` of the wrong type
        (a path for ``spec``: load it with :func:`~attnlab.runner.spec.load_sweep`; a name for ``executor``: pass
        :func:`~attnlab.runner.executors.make_executor` of it), or a ``progress`` or ``fresh`` that is not a bool
        (``"no"`` is refused, not read as true), before anything is written or run.
    """
    progress = check_bool("progress", progress)
    fresh = check_bool("fresh", fresh)
    jobs = _jobs(spec)
    check_out(out)
    executor = _executor(executor)
    tasks = {job.task: get_task(job.task) for job in jobs}
    _check_every_run(tasks, jobs, spec.file if isinstance(spec, SweepSpec) else None)
    store = ResultsStore(out)
    labels = [tasks[job.task].label(job.params) for job in jobs]
    run_dirs = [store.add(job, label) for job, label in zip(jobs, labels)]
    # The fingerprints (code and input files) are taken here, once, and sent with the runs: a worker (a Ray node
    # that received a task by value) may not be able to read the task's source or its input files itself.
    digests: dict[str, str] = {}  # each input file is read once
    reuse = Reuse(
        codes={job.key: run_fingerprint(tasks[job.task], job.params, digests) for job in jobs},
        not_before=time.time() if fresh else None,
    )
    # Runs to hand to the executor: unfinished, stale or damaged ones (SHA-256 compared). Under its claim, execute
    # decides again, since another sweep may finish a run in the meantime.
    todo = [
        i
        for i, (job, run_dir) in enumerate(zip(jobs, run_dirs))
        if reuse_problem(run_dir, reuse.codes[job.key], not_before=reuse.not_before) is not None
    ]
    last_write = time.monotonic()
    store.write_index()
    interval = max(_INDEX_EVERY_SECONDS, (time.monotonic() - last_write) / _INDEX_MAX_SHARE)
    last_write = time.monotonic()
    ran = 0
    recomputed: dict[str, str] = {}
    bar = progress_bar(total=len(todo), desc="sweep", unit="run", show=None if progress else False)
    bar.set_postfix(skipped=len(jobs) - len(todo), refresh=False)
    try:
        while todo:
            busy: list[int] = []
            for outcome_index, outcome in _run(executor, tasks, jobs, run_dirs, todo, reuse):
                if outcome.status == "busy":
                    busy.append(outcome_index)
                    continue
                ran += outcome.ran
                if outcome.ran:
                    store.forget(run_dirs[outcome_index])  # its row, read before it ran, is stale
                if outcome.reason:
                    recomputed[outcome.key] = outcome.reason
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
    mine = index.drop_duplicates("key").set_index("key").reindex([job.key for job in jobs]).reset_index()
    mine = mine[INDEX_COLUMNS]
    mine["index"] = [job.index for job in jobs]
    return SweepResult(root=store.root, index=mine, ran=ran, recomputed=recomputed)


def _jobs(spec: object) -> list[Job]:
    """The jobs of ``spec`` (a SweepSpec expanded, or a sequence of Job), or a ValidationError naming ``spec``."""
    if isinstance(spec, SweepSpec):
        return expand(spec)
    if isinstance(spec, (str, bytes, os.PathLike)):
        raise ValidationError(
            f"spec == {spec!r} is a path; run_sweep takes a SweepSpec or a list of Job: pass load_sweep({spec!r}) "
            "(from attnlab.runner) to read a sweep file"
        )
    jobs = list(spec) if isinstance(spec, Iterable) and not isinstance(spec, Mapping) else None
    if jobs is None or not all(isinstance(job, Job) for job in jobs):
        raise ValidationError(
            f"spec must be a SweepSpec or a list of Job, got {type(spec).__name__}; build one with "
            "SweepSpec(task=..., base=..., grid=...) or read a sweep file with load_sweep(path)"
        )
    return jobs


def check_out(out: object, argument: str = "out", writer: str = "sweep") -> None:
    """Refuse an ``out`` that is not a path, or a folder that holds files but no sweep (no ``runs/`` nor index): a
    sweep's runs, index and report are not mixed into a folder of other files (hidden files aside).

    Parameters
    ----------
    out : path
        The output folder (it need not exist).
    argument : str, default="out"
        Its name in the messages (the command line's ``--out``).
    writer : {"sweep", "reproduce"}, default="sweep"
        What writes into it: a sweep, or ``attnlab reproduce`` (its report, runs and index), for the messages.

    Raises
    ------
    ValidationError
        When ``out`` is not a str or path, or is a folder of other files.
    """
    if not isinstance(out, (str, os.PathLike)):
        raise ValidationError(f"{argument} must be the path of the output folder (a str or pathlib.Path), got {out!r}")
    folder = Path(out)
    if not folder.is_dir():
        return  # missing (created later) or a file (refused where it is written, naming the path)
    try:
        held = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return  # unreadable: the first write says why
    if held and not {"runs", INDEX} & set(held):
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        what, how = _OUT_OWNERS[writer]
        raise ValidationError(
            f"{argument} {str(folder)!r} holds files that are not {what} ({shown}); {how} (one with runs/): choose an "
            "empty folder"
        )


def _executor(executor: object) -> InProcessExecutor | PoolExecutor | RayExecutor:
    """``executor``, the in-process executor for None, or a ValidationError naming ``executor`` and the fix."""
    if executor is None:
        return InProcessExecutor()
    if isinstance(executor, str):
        raise ValidationError(
            f"executor == {executor!r} is a name; pass an executor: make_executor({executor!r}) (from attnlab.runner)"
        )
    if not callable(getattr(executor, "map", None)):
        raise ValidationError(
            f"executor must be an InProcessExecutor, PoolExecutor or RayExecutor, got {type(executor).__name__}; "
            "make one with make_executor('inprocess' | 'pool' | 'ray') (from attnlab.runner)"
        )
    return executor  # type: ignore[return-value]


def _check_every_run(tasks: dict[str, Task], jobs: Sequence[Job], file: str | None = None) -> None:
    """Check every run's parameters before any run starts, and refuse them all at once: one line per bad run, each
    naming the run and its parameters, and the sweep's ``file`` when it was read from one (a sweep of one run built
    in code: the run's error alone)."""
    bad: list[tuple[Job, ValidationError]] = []
    for job in jobs:
        try:
            tasks[job.task].check(job.params)
        except ValidationError as err:
            bad.append((job, err))
    sweep = "the sweep" + (f" {file!r}" if file else "")
    if len(jobs) == 1 and bad:  # the sweep's only run: one line, its error first, then the file's run
        job, err = bad[0]
        if file:
            err.args = (f"{err} (run {job.index} of {sweep}, its only run: {_shown(job.params)})",)  # its type kept
        raise err
    lines = [f"run {job.index} {_shown(job.params)}: {err}" for job, err in bad]
    if len(lines) > _BAD_RUNS_SHOWN:
        lines = lines[:_BAD_RUNS_SHOWN] + [f"... and {len(lines) - _BAD_RUNS_SHOWN} more"]
    if bad:
        raise ValidationError(
            f"{len(bad)} of {len(jobs)} runs of {sweep} have bad parameters; nothing ran:\n  " + "\n  ".join(lines)
        )


def _shown(params: dict[str, object]) -> str:
    """A run's parameters in a refusal: JSON, keys sorted."""
    return json.dumps(params, sort_keys=True, default=str)


def _run(
    executor: InProcessExecutor | PoolExecutor | RayExecutor,
    tasks: dict[str, Task],
    jobs: Sequence[Job],
    run_dirs: Sequence[Path],
    todo: Sequence[int],
    reuse: Reuse,
) -> Iterator[tuple[int, Outcome]]:
    """``(job position, outcome)`` for the jobs at positions ``todo``, task by task."""
    for task_name, task in tasks.items():
        mine = [i for i in todo if jobs[i].task == task_name]
        by_key = {jobs[i].key: i for i in mine}
        for outcome in executor.map(task, [jobs[i] for i in mine], [run_dirs[i] for i in mine], reuse):
            yield by_key[outcome.key], outcome
