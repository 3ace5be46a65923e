"""The sweep tasks attnlab ships; importing this package registers them with the runner.

- ``experiment`` (:class:`ExperimentTask`): one named experiment per run, so sweeps and ``attnlab reproduce`` share
  the runner;
- ``batched-train`` (:class:`BatchedTrain`): token-selection training runs, many per call of
  :func:`attnlab.training.batched.train`.

The runner (:mod:`attnlab.runner`) knows no task of its own: the command line (``attnlab sweep``), the report and a
Python caller import this package (or name a task ``"package.module:Class"``) to use them.
"""

from attnlab.runner import register_task
from attnlab.tasks.batched_train import DEFAULTS, BatchedTrain
from attnlab.tasks.experiment import ExperimentTask

register_task(ExperimentTask())
register_task(BatchedTrain())

__all__ = ["DEFAULTS", "BatchedTrain", "ExperimentTask"]
