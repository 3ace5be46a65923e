"""The one training engine of token-selection attention: R runs on a runs axis, any parametrisation, any rule.

Spec: implicit-bias-ngd §4, mirror-descent-lp §4, kq-nuclear-norm §3.

:func:`attnlab.train` (a model and a ``torch.optim`` optimizer), :func:`attnlab.batched.train` (arrays and a rule
name) and :func:`attnlab.flow.gradient_flow` are front doors to :func:`fit`. A single run is a batch of one and
takes the same fast paths. The rules are chains of :mod:`attnlab.optim.transforms`, named by the one optimizer
grammar of :mod:`attnlab.optim.spec` (``OPTIMIZERS``, ``OPTIONS``, ``named_rule`` are its names); recording, callbacks
(:mod:`attnlab.callbacks`) and the divergence policy are the same for every front door.
"""

from attnlab.callbacks import COMPLETED, DIVERGED, STOPPED, tidy_frame
from attnlab.engine.loop import EngineResult, fit, kernel_applies
from attnlab.engine.recording import Metric, Recorder
from attnlab.engine.spaces import Gradient, KernelSpace, ParamSpace, Problem
from attnlab.optim.spec import DEFAULT_LR, OPTIONS, named_rule
from attnlab.optim.spec import RULES as OPTIMIZERS

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
    "fit",
    "kernel_applies",
    "named_rule",
    "tidy_frame",
]
