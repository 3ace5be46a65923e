"""What a sweep runs: a task turns one job's parameters into files in its run directory.

A task is a picklable object (a module-level class), so that a process pool or a Ray worker can receive it.
Its contract:

- ``run(params, run_dir)`` writes the run's outputs atomically and ``record.json`` **last**; the runner then
  writes ``outcome.json`` and the manifest (:mod:`attnlab.runner.manifest`). A run directory whose manifest is
  there, whose files are intact and whose code fingerprint (:mod:`attnlab.runner.fingerprint`) is the current
  one holds a finished run that is reused; anything else is rerun from scratch, and the manifest of the new run
  says why. A summary ``{"status": "diverged", ...}`` marks a run that stopped on its own (finished, not failed);
- ``modules(params)`` names the modules, besides attnlab's, whose code computes the run (default: the task's
  own module), so that an edit to them makes a stored run stale;
- ``inputs(params)`` names the files the run reads (default: none; ``batched-train``: its data file and head), so
  that a change of their contents makes a stored run stale (a missing one: the run is computed, and fails);
- ``batch_key(params)`` returns a hashable key when runs with equal keys can go through one batched tensor
  program (``run_batch``), or ``None``; the in-process executor groups runs by it;
- ``check(params)`` refuses bad parameters before anything runs;
- ``expand(params)`` (optional) lists the runs one parameter set stands for (``batched-train``: one per data file
  of a folder); :func:`~attnlab.runner.spec.expand` calls it for registered and built-in tasks;
- ``canonical(params)`` (optional) spells parameters the way the task reads them (``lr: 1`` as ``1.0``), so that a
  sweep refuses two spellings of one run instead of running it twice (the run's key keeps the spelling written).
"""

from __future__ import annotations

import importlib
import json
import shutil
import time
import traceback
from collections.abc import Hashable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab._validation import ValidationError
from attnlab.runner.claim import LOCK, claim
from attnlab.runner.fingerprint import run_fingerprint
from attnlab.runner.manifest import MANIFEST, damage, read_manifest, reuse_problem, write_manifest
from attnlab.runner.store import atomic_write

__all__ = [
    "Outcome",
    "Reuse",
    "Task",
    "execute",
    "execute_batch",
    "finished_status",
    "gave_up",
    "get_task",
    "is_finished",
    "known_task",
    "register_task",
    "run_fingerprint",
]

RECORD = "record.json"
ERROR = "error.txt"
OUTCOME = "outcome.json"  # {"status": "done" | "diverged", "seconds": float}, written by the runner after RECORD
JOB = "job.json"  # {"task", "key", "params", "label", "index"}: what the run is, written by the results store
FINISHED = ("done", "diverged")
_KEEP = (LOCK, JOB)


class Task:
    """Base class of sweep tasks; subclasses set ``name`` and implement :meth:`run`."""

    name: str = ""

    def check(self, params: dict[str, Any]) -> None:
        """Refuse parameters that cannot run, before anything runs; the default accepts everything.

        Parameters
        ----------
        params : dict of str to Any
            One job's parameters, as the sweep expanded them (JSON-compatible values).

        Raises
        ------
        ValidationError
            When ``params`` cannot run; the message names the parameter, the constraint and the fix.
        """
        del params

    def expand(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The runs that one expanded parameter set stands for; default ``[params]``.

        Parameters
        ----------
        params : dict of str to Any
            One point of the sweep (base, list entry and grid point), before repeats.

        Returns
        -------
        list of dict of str to Any
            JSON-compatible parameter sets, in run order.
        """
        return [params]

    def canonical(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` as the task reads them, so that two spellings of one run compare equal; default ``params``.

        Only compared (:func:`~attnlab.runner.spec.expand` refuses two runs of one sweep that it makes equal): the run
        keeps the parameters written, and its key. A value that the task would refuse is left as it is (for
        :meth:`check` to name).

        Parameters
        ----------
        params : dict of str to Any
            One job's parameters, as the sweep expanded them (JSON-compatible values).

        Returns
        -------
        dict of str to Any
            The same keys, each value in the one spelling the task gives it (``1`` and ``1.0`` as ``1.0`` for a
            float parameter).
        """
        return params

    def label(self, params: dict[str, Any]) -> str:
        """A readable prefix of the run directory name (the task name by default).

        Parameters
        ----------
        params : dict of str to Any
            One job's parameters, as the sweep expanded them (JSON-compatible values).

        Returns
        -------
        str
            Any text: the results store keeps its letters, digits, ``.``, ``-`` and ``_`` and writes ``_`` for the
            rest.
        """
        del params
        return self.name

    def run(self, params: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        """Run one job, write its outputs into ``run_dir`` (``record.json`` last) and return a summary.

        Parameters
        ----------
        params : dict of str to Any
            One job's parameters, as the sweep expanded them (JSON-compatible values).
        run_dir : pathlib.Path
            The job's own directory, existing and emptied of any earlier run's outputs.

        Returns
        -------
        dict of str to Any
            A JSON-compatible summary (e.g. checks passed); ``{"status": "diverged", ...}`` marks a run that
            stopped on its own.
        """
        raise NotImplementedError

    def modules(self, params: dict[str, Any]) -> list[str]:
        """The modules whose code computes a run besides attnlab's; default the task's own module.

        An edit to any of them makes a stored run stale (:mod:`attnlab.runner.fingerprint`).

        Parameters
        ----------
        params : dict of str to Any
            One job's parameters, as the sweep expanded them (JSON-compatible values).

        Returns
        -------
        list of str
            Dotted module names, importable where the run executes.
        """
        del params
        return [type(self).__module__]

    def inputs(self, params: dict[str, Any]) -> list[Path]:
        """The files a run reads besides its parameters (data files); default none.

        A run's parameters name a file by its path only: the SHA-256 of each file's contents is part of the run's
        fingerprint (:func:`run_fingerprint`), so a stored run is not reused once a file it read has changed. A
        missing file makes the run computed again (the task then reports the file as it runs).

        Parameters
        ----------
        params : dict of str to Any
            One job's parameters, as the sweep expanded them (JSON-compatible values).

        Returns
        -------
        list of pathlib.Path
            The input files; they need not exist.
        """
        del params
        return []

    def batch_key(self, params: dict[str, Any]) -> Hashable | None:
        """A key shared by runs that one batched call can run together, or ``None`` (run alone).

        Parameters
        ----------
        params : dict of str to Any
            One job's parameters, as the sweep expanded them (JSON-compatible values).

        Returns
        -------
        hashable or None
            Runs with equal keys go to one :meth:`run_batch` call of the in-process executor.
        """
        del params
        return None

    def run_batch(self, params: Sequence[dict[str, Any]], run_dirs: Sequence[Path]) -> list[dict[str, Any]]:
        """Run jobs with one ``batch_key`` as one batch; only called when :meth:`batch_key` is not ``None``.

        Parameters
        ----------
        params : sequence of dict of str to Any
            The jobs' parameters, all with the same :meth:`batch_key`.
        run_dirs : sequence of pathlib.Path
            Each job's own directory, in the order of ``params``; each gets its outputs, ``record.json`` last.

        Returns
        -------
        list of dict of str to Any
            One summary per job, in the order of ``params`` (as :meth:`run` returns).
        """
        raise NotImplementedError


_TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    """Make ``task`` available to sweep files as ``task: <task.name>`` (a later task of that name replaces it).

    Parameters
    ----------
    task : Task
        An instance with a non-empty ``name``.

    Returns
    -------
    Task
        ``task`` itself, so that the call can decorate an instance's creation.

    Raises
    ------
    ValueError
        When ``task.name`` is empty.
    """
    if not task.name:
        raise ValueError(f"{type(task).__name__} has no name; set the class attribute name")
    _TASKS[task.name] = task
    return task


def known_task(name: str) -> Task | None:
    """The task called ``name`` when it is registered (attnlab's own register when :mod:`attnlab.tasks` is
    imported), else None (nothing is imported by path).

    Parameters
    ----------
    name : str

    Returns
    -------
    Task or None
    """
    return _TASKS.get(name)


def get_task(name: str) -> Task:
    """The task called ``name``: a registered name, or ``"package.module:Class"`` for a task of your own.

    An import path names a :class:`Task` subclass (instantiated without arguments) or a ``Task`` instance;
    the module must be importable by the workers too (installed, or on ``PYTHONPATH``).

    Parameters
    ----------
    name : str
        A registered task name (attnlab's own, ``"experiment"`` and ``"batched-train"``, register when
        :mod:`attnlab.tasks` is imported) or an import path ``"package.module:Class"``.

    Returns
    -------
    Task

    Raises
    ------
    ValidationError
        When ``name`` is not a str, is not registered, or is an import path that cannot be imported or names no task.
    """
    if not isinstance(name, str):
        raise ValidationError(
            f"task == {name!r} (of type {type(name).__name__}) is not a task name; pass a str: a registered name "
            "such as 'batched-train' or an import path 'package.module:Class'"
        )
    if name in _TASKS:
        return _TASKS[name]
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise ValidationError(
                f"task == {name!r} could not be imported ({err}); check the module:attribute path"
            ) from None
        task = obj() if isinstance(obj, type) and issubclass(obj, Task) else obj
        if not isinstance(task, Task):
            raise ValidationError(
                f"task == {name!r} is a {type(obj).__name__}, not an attnlab.runner.Task subclass or instance"
            )
        return task
    known = ", ".join(sorted(_TASKS)) or "none"
    raise ValidationError(
        f"task == {name!r} is not a registered task; registered tasks: {known}. Give 'package.module:Class', or "
        "register it first (import attnlab.tasks registers attnlab's own: experiment and batched-train)"
    )


@dataclass(frozen=True)
class Reuse:
    """What a stored run must match to be reused instead of computed.

    Attributes
    ----------
    codes : dict of str to dict
        The fingerprint (:func:`run_fingerprint`: the code's, and the input files') of each run, by job key, as the
        sweep's own process computed it; a run missing here is fingerprinted where it executes.
    not_before : float, optional
        Unix time: a run finished earlier is computed again (``--fresh``); runs finished since are kept.
    """

    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_before: float | None = None

    def code(self, task: Task, key: str, params: dict[str, Any]) -> dict[str, Any]:
        """The fingerprint of run ``key`` (:func:`run_fingerprint`, taken here when the sweep sent none)."""
        return self.codes.get(key) or run_fingerprint(task, params)

    def of(self, key: str) -> Reuse:
        """What run ``key`` must match, alone: what a worker process receives with the run."""
        return Reuse({key: self.codes[key]} if key in self.codes else {}, self.not_before)


@dataclass(frozen=True)
class Outcome:
    """How one job ended.

    Attributes
    ----------
    key : str
        The job's key.
    status : {"done", "diverged", "failed", "busy"}
        ``"diverged"``: finished, but the task's summary says the run diverged (its files hold the last finite
        state); ``"busy"``: another process holds the run's claim, so it was left alone.
    seconds : float
        Wall time of the job (a batch's time is shared equally by its runs).
    error : str
        The traceback when ``status == "failed"``, else ``""``.
    summary : dict
        What the task returned (for example checks passed); ``{"skipped": True}`` for a run not run by this call.
    reason : str
        Why this call computed the run (:func:`~attnlab.runner.manifest.reuse_problem`); ``""`` when it did not.
    """

    key: str
    status: str
    seconds: float
    error: str = ""
    summary: dict[str, Any] | None = None
    reason: str = ""

    @property
    def ran(self) -> bool:
        """Whether this call ran the job (it was neither finished before nor claimed elsewhere)."""
        return self.status != "busy" and not (self.summary or {}).get("skipped", False)


def is_finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a finished run: its manifest, written last, is there and lists intact files.

    Files are compared by size here (cheap for every scan of a store); the sweep compares their SHA-256 digests
    before it reuses a run.

    Parameters
    ----------
    run_dir : pathlib.Path
        A run directory (it need not exist).

    Returns
    -------
    bool
    """
    manifest = read_manifest(run_dir)
    return manifest is not None and damage(run_dir, manifest, deep=False) is None


def finished_status(run_dir: Path) -> str:
    """``"done"`` or ``"diverged"`` for a finished run, as its ``outcome.json`` says (``"done"`` without one)."""
    try:
        status = json.loads((Path(run_dir) / OUTCOME).read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return "done"  # outcome.json is listed by the manifest, so a finished run has one
    return status if status in FINISHED else "done"


def _fresh(run_dir: Path) -> None:
    # A run directory to compute may hold a killed run's partial outputs, temp files, or a stale or damaged run:
    # start it clean, manifest first, but keep the claim (held by the caller) and the job description.
    (run_dir / MANIFEST).unlink(missing_ok=True)
    for entry in run_dir.iterdir():
        if entry.name in _KEEP:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _failed(key: str, run_dir: Path, seconds: float, text: str | None = None) -> Outcome:
    text = traceback.format_exc() if text is None else text
    atomic_write(run_dir / ERROR, lambda p: p.write_text(text))
    return Outcome(key=key, status="failed", seconds=seconds, error=text)


def gave_up(key: str, run_dir: Path, text: str) -> Outcome:
    """The ``"failed"`` outcome of a job its executor gave up on (its worker died each time), written to its run
    directory's ``error.txt`` so that the store lists the run as failed with ``text``, not as pending.

    Written under the run's claim, and only when the run is not finished: a run another process holds or has
    finished since is left as it is.

    Parameters
    ----------
    key : str
        The job's key.
    run_dir : pathlib.Path
        The job's directory.
    text : str
        Why the executor gave up.

    Returns
    -------
    Outcome
        ``"failed"`` with ``text`` as its error.
    """
    run_dir = Path(run_dir)
    with claim(run_dir) as mine:
        if mine and not is_finished(run_dir):
            return _failed(key, run_dir, 0.0, text)
    return Outcome(key=key, status="failed", seconds=0.0, error=text)


def _succeeded(
    task: Task, key: str, run_dir: Path, seconds: float, summary: Any, code: dict[str, Any], reason: str
) -> Outcome:
    if not (run_dir / RECORD).is_file():
        return _failed(
            key,
            run_dir,
            seconds,
            f"task {task.name!r} returned without writing {RECORD} into {run_dir}; "
            f"a task must write {RECORD} last (see attnlab.runner.task)\n",
        )
    status = "diverged" if isinstance(summary, dict) and summary.get("status") == "diverged" else "done"
    text = json.dumps({"status": status, "seconds": seconds})
    atomic_write(run_dir / OUTCOME, lambda p: p.write_text(text + "\n"))
    write_manifest(run_dir, code, reason)  # last: from here on the run is finished
    return Outcome(key=key, status=status, seconds=seconds, summary=summary, reason=reason)


def _left_alone(
    task: Task, key: str, params: dict[str, Any], run_dir: Path, mine: bool, reuse: Reuse | None
) -> tuple[Outcome | None, dict[str, Any], str]:
    """``(outcome, code, reason)``: the outcome of a run this call must not run (claimed elsewhere, or finished
    by the current code and intact), else ``None`` with the code fingerprint and the reason to compute it."""
    if not mine:
        return Outcome(key=key, status="busy", seconds=0.0, summary={"skipped": True}), {}, ""
    reuse = reuse or Reuse()
    code = reuse.code(task, key, params)
    reason = reuse_problem(run_dir, code, not_before=reuse.not_before)
    if reason is None:
        return Outcome(key=key, status=finished_status(run_dir), seconds=0.0, summary={"skipped": True}), code, ""
    return None, code, reason


def execute(task: Task, key: str, params: dict[str, Any], run_dir: Path, reuse: Reuse | None = None) -> Outcome:
    """Claim the run, and run it unless it is finished; an exception becomes a ``"failed"`` outcome and ``error.txt``.

    What is left to do is decided under the claim: a run finished by anyone (another sweep included), intact
    and computed by the current code, is returned as it is, never wiped, and a run another process holds is
    reported ``"busy"`` and left alone. A stale or damaged run is computed again, and its outcome and manifest
    say why. Idempotent: a retried or repeated call on a finished run returns its status without running it.

    Parameters
    ----------
    task : Task
        The task that runs the job.
    key : str
        The job's key (its identity in the results store).
    params : dict of str to Any
        The job's parameters.
    run_dir : pathlib.Path
        The job's directory; created by the claim if missing.
    reuse : Reuse, optional
        What a stored run must match (default: the code fingerprint taken here; no ``--fresh``).

    Returns
    -------
    Outcome
        ``"done"`` or ``"diverged"`` (computed now, or reused with ``summary == {"skipped": True}``), ``"failed"``
        (with the traceback) or ``"busy"``.
    """
    run_dir = Path(run_dir)
    with claim(run_dir) as mine:
        skipped, code, reason = _left_alone(task, key, params, run_dir, mine, reuse)
        if skipped is not None:
            return skipped
        _fresh(run_dir)
        start = time.perf_counter()
        try:
            summary = task.run(params, run_dir)
        except Exception:  # noqa: BLE001 - one failing run must not stop the sweep; the traceback is kept
            return _failed(key, run_dir, time.perf_counter() - start)
        return _succeeded(task, key, run_dir, time.perf_counter() - start, summary, code, reason)


def execute_batch(
    task: Task,
    keys: Sequence[str],
    params: Sequence[dict[str, Any]],
    run_dirs: Sequence[Path],
    reuse: Reuse | None = None,
) -> list[Outcome]:
    """Claim the runs of one ``batch_key`` and run the unfinished ones as one batch.

    Runs finished or claimed elsewhere are left alone (as in :func:`execute`, whose ``reuse`` this takes);
    if the batch raises, every run it held is marked failed.

    Parameters
    ----------
    task : Task
        The task; its :meth:`Task.run_batch` runs the unfinished jobs.
    keys : sequence of str
        The jobs' keys.
    params : sequence of dict of str to Any
        The jobs' parameters, one per key, all with one :meth:`Task.batch_key`.
    run_dirs : sequence of pathlib.Path
        The jobs' directories, one per key.
    reuse : Reuse, optional
        What a stored run must match (default: the code fingerprints taken here; no ``--fresh``).

    Returns
    -------
    list of Outcome
        One per key, in the order of ``keys``; a computed run's ``seconds`` is its share of the batch's time.
    """
    run_dirs = [Path(r) for r in run_dirs]
    outcomes: dict[int, Outcome] = {}
    codes: dict[int, tuple[dict[str, Any], str]] = {}
    with ExitStack() as claims:
        for i, (key, run_dir) in enumerate(zip(keys, run_dirs)):
            mine = claims.enter_context(claim(run_dir))
            skipped, code, reason = _left_alone(task, key, params[i], run_dir, mine, reuse)
            if skipped is not None:
                outcomes[i] = skipped
            else:
                codes[i] = (code, reason)
        todo = [i for i in range(len(keys)) if i not in outcomes]
        for i in todo:
            _fresh(run_dirs[i])
        start = time.perf_counter()
        try:
            summaries = task.run_batch([params[i] for i in todo], [run_dirs[i] for i in todo]) if todo else []
            if len(summaries) != len(todo):
                raise RuntimeError(
                    f"task {task.name!r} returned {len(summaries)} summaries for a batch of {len(todo)} runs"
                )
        except Exception:  # noqa: BLE001 - recorded per run, the sweep goes on
            seconds = (time.perf_counter() - start) / max(len(todo), 1)
            text = traceback.format_exc()
            outcomes.update({i: _failed(keys[i], run_dirs[i], seconds, text) for i in todo})
        else:
            seconds = (time.perf_counter() - start) / max(len(todo), 1)
            outcomes.update(
                {i: _succeeded(task, keys[i], run_dirs[i], seconds, s, *codes[i]) for i, s in zip(todo, summaries)}
            )
    return [outcomes[i] for i in range(len(keys))]
