"""The training wing of attnlab: one loop, one result, the token-selection engine and every front door.

Spec: implicit-bias-ngd §4, mirror-descent-lp §4, kq-nuclear-norm §3.

:func:`train` (a model and a ``torch.optim`` optimizer), :func:`attnlab.training.batched.train` (arrays and a rule
name) and :func:`attnlab.training.flow.gradient_flow` are front doors to :func:`fit`. A single run is a batch of one and
takes the same fast paths. The rules are chains of :mod:`attnlab.optim.transforms`, named by the one optimizer
grammar of :mod:`attnlab.optim.spec` (``OPTIMIZERS``, ``OPTIONS``, ``named_rule`` are its names); recording, callbacks
(:mod:`attnlab.training.callbacks`) and the divergence policy are the same for every front door.
"""

from attnlab.optim.spec import DEFAULT_LR, OPTIONS, named_rule
from attnlab.optim.spec import RULES as OPTIMIZERS
from attnlab.training.callbacks import COMPLETED, DIVERGED, STOPPED, TrainingResult, tidy_frame
from attnlab.training.engine import EngineResult, fit, kernel_applies
from attnlab.training.model import Trajectory, train
from attnlab.training.recording import Metric, Recorder
from attnlab.training.spaces import Gradient, KernelSpace, ParamSpace, Problem

__all__ = [
    "COMPLETED",
    "DEFAULT_LR",
    "DIVERGED",
    "OPTIMIZERS",
    "OPTIONS",
    "STOPPED",
    "EngineResult",
    "Gradient",
    "KernelSpace",
    "Metric",
    "ParamSpace",
    "Problem",
    "Recorder",
    "TrainingResult",
    "Trajectory",
    "fit",
    "kernel_applies",
    "named_rule",
    "tidy_frame",
    "train",
]
