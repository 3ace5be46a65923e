"""Executors, results store, resume and progress: the machinery that runs experiments, knowing nothing of papers.

A sweep (:mod:`~attnlab.runner.spec`) expands into jobs; a task (:mod:`~attnlab.runner.task`) runs one job
into its run directory; an executor (:mod:`~attnlab.runner.executors`) runs tasks in this process (batched),
in a process pool or on Ray; :func:`run_sweep` skips finished runs and keeps ``index.parquet`` current.
"""

from attnlab.checkpoint import Checkpoint
from attnlab.runner.executors import EXECUTORS, InProcessExecutor, PoolExecutor, RayExecutor, make_executor
from attnlab.runner.read import IncompleteSweepWarning, flatten_params, read_sweep
from attnlab.runner.results import ResultsStore, read_index
from attnlab.runner.spec import Job, SweepSpec, derive_seed, expand, load_sweep
from attnlab.runner.store import atomic_write, config_hash, save_figure, write_csv, write_json, write_parquet
from attnlab.runner.sweep import SweepResult, run_sweep
from attnlab.runner.task import Outcome, Task, execute, execute_batch, get_task, is_finished, register_task

__all__ = [
    "EXECUTORS",
    "Checkpoint",
    "InProcessExecutor",
    "IncompleteSweepWarning",
    "Job",
    "Outcome",
    "PoolExecutor",
    "RayExecutor",
    "ResultsStore",
    "SweepResult",
    "SweepSpec",
    "Task",
    "atomic_write",
    "config_hash",
    "derive_seed",
    "execute",
    "execute_batch",
    "expand",
    "flatten_params",
    "get_task",
    "is_finished",
    "load_sweep",
    "make_executor",
    "read_index",
    "read_sweep",
    "register_task",
    "run_sweep",
    "save_figure",
    "write_csv",
    "write_json",
    "write_parquet",
]
