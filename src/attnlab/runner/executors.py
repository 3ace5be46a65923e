"""Executors: run a task over jobs in this process (batched), in a local process pool, or on a Ray cluster.

Every executor calls the same :func:`~attnlab.runner.task.execute` on each job (or
:func:`~attnlab.runner.task.execute_batch` on a group), so results are the same whichever runs them; they
differ only in where the work happens. A pool or Ray worker runs its job under the caller's warning filters and
hands the warnings that passed them back with the outcome; the caller shows them (its display, at the file and line
that raised them), as it does a job's warnings in process. ``map`` yields one :class:`Outcome` per job as jobs finish; its
``reuse`` (what a stored run must match: :class:`~attnlab.runner.task.Reuse`) goes to each call unchanged.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import multiprocessing
import os
import socket
import threading
import warnings
from collections.abc import Iterator, Sequence
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.runner.spec import Job
from attnlab.runner.task import Outcome, Reuse, Task, execute, execute_batch, gave_up

__all__ = ["EXECUTORS", "InProcessExecutor", "PoolExecutor", "RayExecutor", "make_executor"]

EXECUTORS = ("inprocess", "pool", "ray")
RAY_HINT = "pip install -e '.[ray]' in your attnlab clone"


def _of(reuse: Reuse | None, key: str) -> Reuse | None:
    """The part of ``reuse`` that one run sent to a worker needs (not the fingerprints of the whole sweep)."""
    return reuse.of(key) if reuse is not None else None


class InProcessExecutor:
    """Run jobs in this process; jobs whose task gives them one ``batch_key`` run as one batched call.

    Parameters
    ----------
    batch_size : int, default=256
        Most runs in one batched call (bounds memory; progress advances once per batch).
    """

    def __init__(self, batch_size: int = 256) -> None:
        self.batch_size = check_scalar("batch_size", batch_size, kind=int, low=1)

    def map(
        self, task: Task, jobs: Sequence[Job], run_dirs: Sequence[Path], reuse: Reuse | None = None
    ) -> Iterator[Outcome]:
        """Run the jobs here, in order of their first appearance; jobs with one ``batch_key`` go in batches.

        Parameters
        ----------
        task : Task
            The task that runs every job.
        jobs : sequence of Job
            The jobs, with their keys and parameters.
        run_dirs : sequence of pathlib.Path
            Each job's directory, in the order of ``jobs``.
        reuse : Reuse, optional
            What a stored run must match to be reused (default: the code fingerprint taken where the job runs).

        Yields
        ------
        Outcome
            One per job; a batch's outcomes come together when the batch ends.
        """
        groups: dict[Any, list[int]] = {}
        for i, job in enumerate(jobs):
            key = task.batch_key(job.params)
            groups.setdefault(("single", i) if key is None else ("batch", key), []).append(i)
        for (kind, _), members in groups.items():
            if kind == "single":
                (i,) = members
                yield execute(task, jobs[i].key, jobs[i].params, run_dirs[i], reuse)
                continue
            for start in range(0, len(members), self.batch_size):
                chunk = members[start : start + self.batch_size]
                yield from execute_batch(
                    task,
                    [jobs[i].key for i in chunk],
                    [jobs[i].params for i in chunk],
                    [run_dirs[i] for i in chunk],
                    reuse,
                )


#: A warning class by where it is defined, ``(module, qualified name)``: classes cross between the caller and its
#: workers by name, since one the other process cannot import (a script's own, one made inside a function) would
#: break the unpickling of the job or of its result.
_ClassName = tuple[str, str]

#: A warning raised in a worker, as the caller shows it: its class, message, file and line.
_Caught = tuple[_ClassName, str, str, int]


def _class_name(cls: type) -> _ClassName:
    return cls.__module__, cls.__qualname__


def _class_of(name: _ClassName) -> type[Warning] | None:
    """The warning class called ``name`` in this process, or None where it cannot be imported by that name."""
    module, qualname = name
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 - not importable here (a script's __main__, a class made inside a function)
        return None
    return found if isinstance(found, type) and issubclass(found, Warning) else None


def _portable_filters() -> list[tuple[Any, ...]]:
    """The caller's warning filters, each with its class by name (:data:`_ClassName`), for a worker to apply."""
    return [
        (action, message, _class_name(category), module, line)
        for action, message, category, module, line in warnings.filters
    ]


def _execute_relaying(filters: list[tuple[Any, ...]], *arguments: Any) -> tuple[Outcome, list[_Caught]]:
    """:func:`execute` in a worker process under the caller's warning ``filters`` (:func:`_portable_filters`; one
    whose class cannot be imported here is left out), with the warnings that passed them, for the caller to show.

    So a job's warnings act as they do when it runs in the caller's process: one the caller turns into an error
    fails its job, one it ignores is dropped, the others are shown by the caller (its display: the command line's
    one-line form), instead of printing in Python's form beside the caller's progress or, under Ray
    (``log_to_driver=False``), not at all.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        for action, message, name, module, line in filters:  # the caller's, in its order
            if (category := _class_of(name)) is not None:
                warnings.filters.append((action, message, category, module, line))
        outcome = execute(*arguments)
    return outcome, [(_class_name(w.category), str(w.message), w.filename, w.lineno) for w in caught]


def _relayed(result: tuple[Outcome, list[_Caught]]) -> Outcome:
    """The job's outcome, after showing here each warning that passed the caller's filters in its worker (under its
    own class where it can be imported here, else :class:`UserWarning`, at the file and line that raised it)."""
    outcome, caught = result
    for name, message, filename, lineno in caught:
        warnings.showwarning(message, _class_of(name) or UserWarning, filename, lineno)  # filtered in the worker
    return outcome


def _exit_with_parent() -> None:
    """End this pool worker as soon as the sweep process dies, however it dies (``kill -9`` included).

    The worker's parent is the fork server, which outlives the sweep while workers live; but multiprocessing
    gives each worker a sentinel of the process that asked for it, which turns ready when that process exits.
    Without this watch, the orphans of a killed sweep go on running jobs nobody waits for.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()
        os._exit(1)  # orphaned: the run it held is unfinished, its claim is released, the next sweep reruns it

    threading.Thread(target=watch, name="attnlab-parent-watchdog", daemon=True).start()


#: What the fork server imports once, for every worker it forks: torch and the runner, and the libraries that the
#: experiments import lazily and that cost seconds each in a cold process (measured, loaded 2-core machine: torch's
#: ``_dynamo``, which the first ``torch.optim`` optimizer imports, 6 s; cvxpy 3.6 s; scipy.stats 2.6 s; pyplot 1.8 s).
#: Imported per worker instead, they cost each worker's CPU and the first experiment's own seconds that needs them.
#: A module that fails to import here is skipped by the fork server (the worker imports it when needed).
_FORKSERVER_PRELOAD = ["torch", "torch._dynamo", "attnlab.runner.task", "cvxpy", "scipy.stats", "matplotlib.pyplot"]


def _init_worker(threads: int) -> None:
    # Pool workers share the cores: ``threads`` for torch and for every BLAS/OpenMP pool (numpy's and scipy's
    # OpenBLAS too, which read no torch setting). Without it each worker's OpenBLAS took every core: oversubscribed,
    # and its results (an SLSQP path's rounding in mirror-descent.regpath) depended on the machine's core count and
    # on OMP_NUM_THREADS.
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(threads)  # held for the worker's life
    _exit_with_parent()


def _stop(pool: cf.ProcessPoolExecutor) -> None:
    """End the pool's workers now: ``shutdown`` alone would let each finish its current job (tens of seconds)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.terminate()
    for process in processes:
        process.join()  # dead before the caller rebuilds the index: no claim is still held
    pool.shutdown(wait=False, cancel_futures=True)


class PoolExecutor:
    """Run jobs one at a time in a pool of local worker processes (forked from a fork server, safe with torch).

    A worker that dies (killed, out of memory) breaks the pool, and every job not finished in it then fails with
    it, guilty or not. Those jobs are retried each in a pool of its own (at most ``workers`` at a time), so a job
    that kills its worker again breaks only its own pool; a job is reported failed after ``retries`` such tries. The workers end with the sweep:
    on Ctrl-C (or any exception in the caller) they are terminated at once, and a worker whose parent was killed
    (``kill -9``) ends itself within a fraction of a second.

    The fork server starts when the executor is made: its imports (several seconds of one core) then run beside
    the caller's own (loading the experiments, the report) instead of before the first job.

    Parameters
    ----------
    workers : int, optional
        Number of processes; default the number of CPU cores.
    retries : int, default=2
        Fresh pools to try after a worker dies.
    """

    def __init__(self, workers: int | None = None, retries: int = 2) -> None:
        self.workers = check_scalar("workers", workers if workers is not None else os.cpu_count() or 1, kind=int, low=1)
        self.retries = check_scalar("retries", retries, kind=int, low=0)
        self._context = multiprocessing.get_context("forkserver")
        # The fork server imports torch and the runner once; each worker forks from it, clean of threads.
        self._context.set_forkserver_preload(_FORKSERVER_PRELOAD)
        forkserver.ensure_running()  # returns at once; the server imports while the caller goes on

    def map(
        self, task: Task, jobs: Sequence[Job], run_dirs: Sequence[Path], reuse: Reuse | None = None
    ) -> Iterator[Outcome]:
        """Run the jobs in the pool, one job per worker at a time; a job that kills its worker is retried.

        Parameters
        ----------
        task : Task
            The task that runs every job.
        jobs : sequence of Job
            The jobs, with their keys and parameters.
        run_dirs : sequence of pathlib.Path
            Each job's directory, in the order of ``jobs``.
        reuse : Reuse, optional
            What a stored run must match to be reused (default: the code fingerprint taken where the job runs).

        Yields
        ------
        Outcome
            One per job, as jobs finish (not in the order of ``jobs``); a job whose worker died more than
            ``retries`` times is ``"failed"``.
        """
        todo = list(range(len(jobs)))
        threads = max(1, (os.cpu_count() or 1) // self.workers)
        for attempt in range(self.retries + 1):
            broken: list[int] = []
            run = self._shared if attempt == 0 else self._isolated  # a retry cannot break an innocent job again
            calls = [(i, (task, jobs[i].key, jobs[i].params, run_dirs[i], _of(reuse, jobs[i].key))) for i in todo]
            for i, outcome in run(calls, threads):
                if outcome is None:
                    broken.append(i)
                else:
                    yield outcome
            if not broken:
                return
            todo = sorted(broken)
        why = (
            f"its worker died in each of {self.retries} tries in a pool of its own (after a worker of the shared pool "
            "died)"
            if self.retries
            else "a worker of the pool died before this job finished (retries=0: not retried alone)"
        )
        for i in todo:
            yield gave_up(jobs[i].key, run_dirs[i], why)

    def _pool(self, workers: int, threads: int) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(workers, mp_context=self._context, initializer=_init_worker, initargs=(threads,))

    def _shared(self, calls: list[tuple[int, tuple[Any, ...]]], threads: int) -> Iterator[tuple[int, Outcome | None]]:
        """The jobs (``(i, arguments of execute)``) in one pool of ``workers`` processes: ``(i, outcome)``, None for
        a broken pool's jobs."""
        pool = self._pool(self.workers, threads)
        with pool:
            filters = _portable_filters()
            futures = {pool.submit(_execute_relaying, filters, *arguments): i for i, arguments in calls}
            try:
                for future in cf.as_completed(futures):
                    yield futures[future], _result(future)
            except BaseException:
                _stop(pool)
                raise

    def _isolated(self, calls: list[tuple[int, tuple[Any, ...]]], threads: int) -> Iterator[tuple[int, Outcome | None]]:
        """The jobs (``(i, arguments of execute)``) each in a pool of one process, ``workers`` pools at a time: a job
        that kills its worker breaks only its own pool. ``(i, outcome)``, None for a job whose pool broke."""
        waiting, running, starting = list(calls), {}, []
        try:
            while waiting or running:
                while waiting and len(running) < self.workers:
                    i, arguments = waiting.pop(0)
                    starting.append(self._pool(1, threads))  # held, so Ctrl-C during submit stops its worker
                    future = starting[-1].submit(_execute_relaying, _portable_filters(), *arguments)
                    running[future] = (i, starting.pop())
                done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    i, pool = running.pop(future)
                    pool.shutdown(wait=True)
                    yield i, _result(future)
        except BaseException:
            for pool in [*starting, *(pool for _, pool in running.values())]:
                _stop(pool)  # dead before the caller rebuilds the index: no claim is still held
            raise


def _result(future: cf.Future) -> Outcome | None:
    """A finished job's outcome (its warnings raised here), or None when its pool broke (a worker died) before it
    finished."""
    try:
        return _relayed(future.result())
    except cf.process.BrokenProcessPool:
        return None


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValidationError(f"--executor ray needs Ray, which is not installed; run: {RAY_HINT}") from None
    return ray


def _check_reachable(address: str, timeout: float) -> None:
    """Refuse a cluster address that does not answer a TCP connection within ``timeout`` seconds.

    ``ray.init`` retries an unreachable address for over ten minutes inside calls that delay SIGTERM, so the
    address is tried here first. ``"auto"`` (a cluster of this machine, found by Ray) is left to Ray.
    """
    if address == "auto":
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ValidationError(
            f"--address must be host:port, ray://host:port or auto, got {address!r}; e.g. 127.0.0.1:6379"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as err:
        reason = "timed out" if isinstance(err, TimeoutError) else (err.strerror or type(err).__name__)
        raise ValidationError(
            f"cannot reach a Ray cluster at {address!r} ({reason} after at most {timeout:g} s); check the address "
            "and that `ray start --head` runs there, or drop --address to start a local cluster"
        ) from None


def _connect(ray: Any, address: str, timeout: float) -> None:
    """``ray.init(address)``, given up after ``timeout`` seconds with a clear error.

    Ray retries a cluster that accepts TCP connections but does not answer as one (a proxy, a wrong port) for
    up to minutes, inside C++ calls that hold back signals; run in a daemon thread, the wait stays bounded and
    SIGTERM / Ctrl-C act at once. A connection given up on is abandoned with its thread.
    """
    outcome: dict[str, BaseException | None] = {}

    def connect() -> None:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
            outcome["error"] = None
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = err

    thread = threading.Thread(target=connect, name="attnlab-ray-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    if "error" not in outcome:
        raise ValidationError(
            f"the Ray cluster at {address!r} accepted a connection but did not answer within {timeout:g} s; check "
            "the address (the GCS port of `ray start --head`, 6379 by default), or drop --address to start a local "
            "cluster"
        )
    if outcome["error"] is not None:
        raise ValidationError(f"cannot connect to the Ray cluster at {address!r}: {outcome['error']}") from None


class RayExecutor:
    """Run jobs as Ray tasks, one job each, on a running cluster or on a local one started here.

    A task whose worker dies (killed, node lost) is retried by Ray up to ``retries`` times; since
    :func:`~attnlab.runner.task.execute` skips finished runs and rewrites unfinished ones from scratch, a retry
    neither loses nor duplicates a result. Exceptions raised by the job itself are not retried (they are
    recorded as failed runs).

    Parameters
    ----------
    address : str, optional
        Cluster address (``"127.0.0.1:6379"``, ``"ray://host:10001"`` or ``"auto"``); ``None`` starts a local
        cluster for the sweep and stops it afterwards. A cluster that is already connected is used as it is.
    retries : int, default=3
        Ray's ``max_retries`` per task.
    num_cpus : float, default=1
        CPUs reserved by each task.
    connect_timeout : float, default=30
        Seconds to wait for ``address`` to accept a connection, and again for Ray to connect, before giving up
        with a clear error.

    Raises
    ------
    ValidationError
        If ``address`` is neither None nor a str, or Ray is not installed (the message says
        ``pip install -e '.[ray]'``); when the sweep starts, if ``address`` does not answer within
        ``connect_timeout`` seconds.
    """

    def __init__(
        self, address: str | None = None, retries: int = 3, num_cpus: float = 1, connect_timeout: float = 30.0
    ) -> None:
        if address is not None and not isinstance(address, str):
            raise ValidationError(
                f"address == {address!r} (of type {type(address).__name__}) is not a str; pass the cluster address "
                "as a str ('127.0.0.1:6379', 'ray://host:10001' or 'auto'), or None to start a local cluster"
            )
        _import_ray()
        self.address = address
        self.retries = check_scalar("retries", retries, kind=int, low=0)
        self.num_cpus = check_scalar("num_cpus", num_cpus, low=0, low_inclusive=False)
        self.connect_timeout = check_scalar("connect_timeout", connect_timeout, low=0, low_inclusive=False)

    def map(
        self, task: Task, jobs: Sequence[Job], run_dirs: Sequence[Path], reuse: Reuse | None = None
    ) -> Iterator[Outcome]:
        """Run each job as one Ray task; a local cluster started here is stopped when the jobs are done.

        Parameters
        ----------
        task : Task
            The task that runs every job.
        jobs : sequence of Job
            The jobs, with their keys and parameters.
        run_dirs : sequence of pathlib.Path
            Each job's directory, in the order of ``jobs``.
        reuse : Reuse, optional
            What a stored run must match to be reused (default: the code fingerprint taken where the job runs).

        Yields
        ------
        Outcome
            One per job, as jobs finish (not in the order of ``jobs``); a job Ray gave up on is ``"failed"``.

        Raises
        ------
        ValidationError
            If Ray is not installed, or ``address`` cannot be reached or connected to within ``connect_timeout``.
        """
        ray = _import_ray()
        started_here = not ray.is_initialized()
        if started_here and self.address is None:
            ray.init(include_dashboard=False, log_to_driver=False)
        elif started_here:
            _check_reachable(self.address, self.connect_timeout)
            _connect(ray, self.address, self.connect_timeout)
        try:
            remote = ray.remote(max_retries=self.retries, retry_exceptions=False, num_cpus=self.num_cpus)(
                _execute_relaying
            )
            task_ref, filters = ray.put(task), _portable_filters()
            pending = {
                remote.remote(filters, task_ref, job.key, job.params, str(run_dir), _of(reuse, job.key)): i
                for i, (job, run_dir) in enumerate(zip(jobs, run_dirs))
            }
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(ready[0])
                try:
                    yield _relayed(ray.get(ready[0]))
                except (
                    ray.exceptions.WorkerCrashedError,
                    ray.exceptions.RayTaskError,
                    ray.exceptions.NodeDiedError,
                ) as err:
                    yield gave_up(
                        jobs[i].key, run_dirs[i], f"Ray gave up on this job after {self.retries} retries: {err}"
                    )
        finally:
            if started_here:
                ray.shutdown()


# The setting of make_executor that each executor alone takes, with its command-line option.
_SETTINGS = {
    "workers": ("pool", "--workers"),
    "address": ("ray", "--address"),
    "batch_size": ("inprocess", "--batch-size"),
}


def make_executor(
    name: str, *, workers: int | None = None, address: str | None = None, batch_size: int | None = None
) -> InProcessExecutor | PoolExecutor | RayExecutor:
    """The executor called ``name`` (``"inprocess"``, ``"pool"`` or ``"ray"``).

    Parameters
    ----------
    name : {"inprocess", "pool", "ray"}
    workers : int, optional
        Pool size (``"pool"`` only); default the CPU cores.
    address : str, optional
        Ray cluster address (``"ray"`` only); ``None`` starts a local cluster.
    batch_size : int, optional
        Most runs per batched call (``"inprocess"`` only); default 256.

    Returns
    -------
    InProcessExecutor, PoolExecutor or RayExecutor
        With its other settings at their defaults.

    Raises
    ------
    ValidationError
        If ``name`` is unknown, a setting is of the wrong type (``address`` not a str) or out of range, or given to
        an executor that does not take it (it would do nothing: ``workers`` with ``"inprocess"``), or ``"ray"`` is
        asked for without Ray installed.
    """
    check_in("executor", name, EXECUTORS)
    given = {"workers": workers, "address": address, "batch_size": batch_size}
    for setting, value in given.items():
        owner, option = _SETTINGS[setting]
        if value is not None and name != owner:
            raise ValidationError(
                f"{setting} == {value!r} ({option}) applies to the {owner!r} executor only and would do nothing with "
                f"executor {name!r}; drop it, or choose executor {owner!r} (--executor {owner})"
            )
    if name == "pool":
        return PoolExecutor(workers)
    if name == "ray":
        return RayExecutor(address)
    return InProcessExecutor(256 if batch_size is None else batch_size)
