"""The training wing of attnlab: one loop, one result, the token-selection engine and every front door.

Spec: implicit-bias-ngd §4, mirror-descent-lp §4, kq-nuclear-norm §3.

Every training path is a problem run by the one loop, :func:`run_loop` (:mod:`attnlab.training.loop`, where the one
divergence policy is stated), and returns one :class:`TrainingResult`. The token-selection engine (:func:`fit`,
:mod:`attnlab.training.engine`) has three front doors: :func:`train` (a model and a ``torch.optim`` optimizer),
:func:`attnlab.training.batched.train` (arrays and a rule name) and :func:`attnlab.training.flow.gradient_flow`. The
other families' loops are problems of the same loop: Algorithm 1 of in-context regression
(:func:`attnlab.training.regression.fit`), NTK gradient descent and kernel regression
(:mod:`attnlab.training.ntk`), projected mirror descent (:mod:`attnlab.training.projected`) and, one layer up, the
real-model classifier (:func:`attnlab.nets.fit_classifier`). The rules are chains of :mod:`attnlab.optim.transforms`,
named by the optimizer registry (:mod:`attnlab.optim`); recording and callbacks (:mod:`attnlab.training.callbacks`)
are the same for every front door, and every metric is one :class:`attnlab.metrics.Metric` of the state.
"""

import importlib
from typing import Any

from attnlab.training.callbacks import tidy_frame
from attnlab.training.engine import fit, kernel_applies
from attnlab.training.loop import LoopProblem, run_loop
from attnlab.training.model import train
from attnlab.training.recording import Recorder
from attnlab.training.result import COMPLETED, DIVERGED, STATUSES, STOPPED, TrainingResult
from attnlab.training.spaces import Gradient, KernelSpace, ParamSpace, Problem

__all__ = [
    "COMPLETED",
    "DIVERGED",
    "STATUSES",
    "STOPPED",
    "Gradient",
    "KernelSpace",
    "LoopProblem",
    "ParamSpace",
    "Problem",
    "Recorder",
    "TrainingResult",
    "fit",
    "kernel_applies",
    "run_loop",
    "tidy_frame",
    "train",
]

# the front doors of the other families load on first use (``attnlab.training.regression.fit``): their packages
# (regression, ntk) stay unloaded for a token-selection run
_LAZY = ("batched", "callbacks", "flow", "ntk", "projected", "regression")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(f"attnlab.training.{name}")
    raise AttributeError(f"module 'attnlab.training' has no attribute {name!r}")
