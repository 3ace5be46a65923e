"""What a sweep runs: a task turns one job's parameters into files in its run directory.

A task is a picklable object (a module-level class), so that a process pool or a Ray worker can receive it.
Its contract:

- ``run(params, run_dir)`` writes the run's outputs atomically and ``record.json`` **last**: a run directory
  with a ``record.json`` is a finished run, anything else is unfinished and is rerun from scratch;
- ``batch_key(params)`` returns a hashable key when runs with equal keys can go through one batched tensor
  program (``run_batch``), or ``None``; the in-process executor groups runs by it;
- ``check(params)`` refuses bad parameters before anything runs.
"""

from __future__ import annotations

import importlib
import shutil
import time
import traceback
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab._validation import ValidationError
from attnlab.runner.store import atomic_write

__all__ = ["Outcome", "Task", "execute", "execute_batch", "get_task", "is_finished", "register_task"]

RECORD = "record.json"
ERROR = "error.txt"


class Task:
    """Base class of sweep tasks; subclasses set ``name`` and implement :meth:`run`."""

    name: str = ""

    def check(self, params: dict[str, Any]) -> None:
        """Raise ``ValidationError`` when ``params`` cannot run; the default accepts everything."""
        del params

    def label(self, params: dict[str, Any]) -> str:
        """A readable prefix of the run directory name (the task name by default)."""
        del params
        return self.name

    def run(self, params: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        """Run one job, write its outputs into ``run_dir`` (``record.json`` last) and return a summary."""
        raise NotImplementedError

    def batch_key(self, params: dict[str, Any]) -> Hashable | None:
        """A key shared by runs that one batched call can run together, or ``None`` (run alone)."""
        del params
        return None

    def run_batch(self, params: Sequence[dict[str, Any]], run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
        """Run jobs with one ``batch_key`` as one batch; only called when :meth:`batch_key` is not ``None``."""
        raise NotImplementedError


_TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    """Make ``task`` available to sweep files as ``task: <task.name>``; returns it."""
    if not task.name:
        raise ValueError(f"{type(task).__name__} has no name; set the class attribute name")
    _TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The task called ``name``: a registered name, or ``"package.module:Class"`` for a task of your own.

    An import path names a :class:`Task` subclass (instantiated without arguments) or a ``Task`` instance;
    the module must be importable by the workers too (installed, or on ``PYTHONPATH``).
    """
    if name in _TASKS:
        return _TASKS[name]
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise ValidationError(f"task == {name!r} could not be imported ({err}); check the module:attribute path") from None
        task = obj() if isinstance(obj, type) and issubclass(obj, Task) else obj
        if not isinstance(task, Task):
            raise ValidationError(f"task == {name!r} is a {type(obj).__name__}, not an attnlab.runner.Task subclass or instance")
        return task
    known = ", ".join(sorted(_TASKS)) or "none"
    raise ValidationError(
        f"task == {name!r} is not a registered task; registered tasks: {known} (or give 'package.module:Class')"
    )


@dataclass(frozen=True)
class Outcome:
    """How one job ended.

    Attributes
    ----------
    key : str
        The job's key.
    status : {"done", "failed"}
    seconds : float
        Wall time of the job (a batch's time is shared equally by its runs).
    error : str
        The traceback when ``status == "failed"``, else ``""``.
    summary : dict
        What the task returned (for example checks passed).
    """

    key: str
    status: str
    seconds: float
    error: str = ""
    summary: dict[str, Any] | None = None


def is_finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a finished run (its ``record.json``, written last, exists)."""
    return (Path(run_dir) / RECORD).is_file()


def _fresh(run_dir: Path) -> None:
    # An unfinished run directory may hold a killed run's partial outputs or temp files: start it clean.
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)


def _failed(key: str, run_dir: Path, seconds: float) -> Outcome:
    text = traceback.format_exc()
    atomic_write(run_dir / ERROR, lambda p: p.write_text(text))
    return Outcome(key=key, status="failed", seconds=seconds, error=text)


def execute(task: Task, key: str, params: dict[str, Any], run_dir: Path) -> Outcome:
    """Run one job unless it is finished; an exception becomes a ``"failed"`` outcome and ``error.txt``.

    Idempotent: a retried or repeated call on a finished run returns ``"done"`` without running it again.
    """
    run_dir = Path(run_dir)
    if is_finished(run_dir):
        return Outcome(key=key, status="done", seconds=0.0, summary={"skipped": True})
    _fresh(run_dir)
    start = time.perf_counter()
    try:
        summary = task.run(params, run_dir)
    except Exception:  # noqa: BLE001 - one failing run must not stop the sweep; the traceback is kept
        return _failed(key, run_dir, time.perf_counter() - start)
    return Outcome(key=key, status="done", seconds=time.perf_counter() - start, summary=summary)


def execute_batch(
    task: Task, keys: Sequence[str], params: Sequence[dict[str, Any]], run_dirs: Sequence[Path]
) -> list[Outcome]:
    """Run jobs that share a ``batch_key`` as one batch; if the batch raises, every run is marked failed."""
    for run_dir in run_dirs:
        _fresh(Path(run_dir))
    start = time.perf_counter()
    try:
        summaries = task.run_batch(list(params), [Path(r) for r in run_dirs])
    except Exception:  # noqa: BLE001 - recorded per run, the sweep goes on
        seconds = (time.perf_counter() - start) / len(keys)
        return [_failed(k, Path(r), seconds) for k, r in zip(keys, run_dirs)]
    seconds = (time.perf_counter() - start) / len(keys)
    return [Outcome(key=k, status="done", seconds=seconds, summary=s) for k, s in zip(keys, summaries)]
