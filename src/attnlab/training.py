"""Train a token-selection model with a ``torch.optim`` optimizer: the front door of the engine for modules.

Spec: implicit-bias-ngd §4 (the algorithms are optimizers; this front door hands them to the engine and records).

An attnlab optimizer (:class:`~attnlab.optim.NormalizedGD`, :class:`~attnlab.optim.PolyakStep`,
:class:`~attnlab.optim.MirrorDescent`, :class:`~attnlab.optim.JointAdaptive`,
:class:`~attnlab.optim.PreconditionedGD`) is a chain of :mod:`attnlab.optim.transforms`; :func:`train` asks it for
that rule and runs it in :func:`attnlab.engine.fit` on log-scaled gradients, exactly as
:func:`attnlab.batched.train` runs the rule of the same name (one code path, exact after the softmax saturates).
Any other ``torch.optim.Optimizer`` (SGD, Adam, ...) runs through its own ``step`` and receives true gradients.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.engine import DIVERGED, Problem, Recorder, fit
from attnlab.losses import LOSSES
from attnlab.metrics import Metric
from attnlab.models.heads import Head
from attnlab.optim._base import FunctionalOptimizer

__all__ = ["Trajectory", "train"]


@dataclass
class Trajectory:
    """What :func:`train` returns.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per recorded (run, step): ``run``, ``step``, ``loss``, ``log_loss``, ``grad_norm``, ``norm`` and
        one column per metric.
    model : torch.nn.Module
        The trained model (a diverged run's last parameters with a finite loss).
    status : str
        ``"completed"``, ``"diverged"`` (some run diverged) or ``"stopped"`` (a callback asked to stop).
    message : str
        Why a run stopped early, if one did.
    extra : dict
        ``"status"`` and ``"last_step"`` per run.
    """

    frame: pd.DataFrame
    model: Any
    status: str = "completed"
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def train(
    model: Any,
    optimizer: torch.optim.Optimizer,
    data: Any,
    loss: str = "exp",
    steps: int = 1000,
    record_every: int = 1,
    metrics: Sequence[Metric] = (),
    *,
    progress: bool | None = None,
    callbacks: Iterable[Any] = (),
) -> Trajectory:
    """Run ``steps`` optimizer steps on ``model`` and record metrics every ``record_every`` steps.

    Parameters
    ----------
    model : TokenSelectionModel
        :class:`~attnlab.models.Combined`, :class:`~attnlab.models.Factored` or :class:`~attnlab.models.Diagonal`
        (or a subclass with a ``parametrization``). Parameters may carry a leading runs axis ``R``: the runs are
        then independent (norms and step sizes per run, divergence per run).
    optimizer : torch.optim.Optimizer
        Built on ``model.parameters()``. attnlab's optimizers run through the engine; others through their ``step``
        with a closure.
    data : TokenSelectionData or StackedData
    loss : {"exp", "logistic"}, default="exp"
    steps : int, default=1000
    record_every : int, default=1
        Steps 0, k, 2k, ... and the last step are recorded.
    metrics : sequence of Metric
        E.g. ``[attnlab.metrics.alignment(sol.W), attnlab.metrics.opt_softmax()]``.
    progress : bool, optional
        Progress bar; default only when stderr is a terminal.
    callbacks : iterable of Callback or callable
        See :mod:`attnlab.callbacks` (early stopping, logging, trackers).

    Returns
    -------
    Trajectory

    Notes
    -----
    If a run's loss becomes non-finite, that run is put back to its last parameters with a finite loss, stops, and
    is reported (a warning names the step); the other runs and everything already recorded are kept.

    Examples
    --------
    >>> import attnlab as al
    >>> data = al.data.TokenSelectionData(torch.randn(4, 3, 2), y=[1, -1, 1, -1], v=[1.0, 0.0])
    >>> model = al.models.Combined(2)
    >>> traj = al.train(model, torch.optim.SGD(model.parameters(), lr=0.1), data, steps=5)
    >>> len(traj.frame)
    6
    """
    check_in("loss", loss, LOSSES)
    check_scalar("steps", steps, kind=int, low=0)
    check_scalar("record_every", record_every, kind=int, low=1)
    parametrization = getattr(model, "parametrization", None)
    if parametrization is None or not callable(getattr(model, "tensors", None)):
        raise ValidationError(
            f"model must be a TokenSelectionModel with a parametrization (Combined, Factored or Diagonal), got "
            f"{type(model).__name__}"
        )
    tensors = dict(model.tensors())
    if model.train_head:
        tensors["v"] = model.v
    W = model.W
    batched = W.dim() == 3  # the model carries a runs axis
    if W.shape[-1] != data.X.shape[-1]:
        raise ValidationError(
            f"model has d = {W.shape[-1]} but the data's tokens have d = {data.X.shape[-1]}; build the model with "
            f"d={data.X.shape[-1]}"
        )
    R = W.shape[0] if batched else (data.X.shape[0] if data.X.dim() == 4 else 1)
    problem = _problem(model, data, R, loss)
    as_runs = (lambda t: t) if batched else (lambda t: t.detach().unsqueeze(0).expand((R,) + tuple(t.shape)).clone())
    module_params = [tensors[k] for k in tensors]

    recorder = Recorder(metrics={m.name: _module_metric(m, model, data) for m in metrics})

    def sync(current: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for k, t in tensors.items():
                if k in current and current[k] is not t:
                    t.copy_(current[k] if batched else current[k][0])

    if isinstance(optimizer, FunctionalOptimizer):
        rule = optimizer.rule(module_params)
        state = _state(optimizer.load_rule_state(rule, module_params), as_runs)
        result = fit(
            problem,
            parametrization,
            {k: as_runs(t).clone() for k, t in tensors.items()},
            steps,
            rule,
            rule_state=state,
            record_every=record_every,
            recorder=recorder,
            callbacks=callbacks,
            progress=progress,
            sync=sync if metrics else None,
        )
        sync(result.params)
        optimizer.save_rule_state(rule, module_params, _state(result.rule_state, lambda t: t if batched else t[0]))
    else:
        if not batched and R > 1:
            raise ValidationError(
                f"data has a runs axis of {R} runs but the model has none; build the model with a runs axis (W0 of "
                f"shape ({R}, d, d)) to train one model per data set"
            )
        views = {k: t.data if batched else t.data.unsqueeze(0) for k, t in tensors.items()}
        result = fit(
            problem,
            parametrization,
            views,
            steps,
            optimizer=optimizer,
            optimizer_params=tensors,
            record_every=record_every,
            recorder=recorder,
            callbacks=callbacks,
            progress=progress,
        )
    status, message = "completed", ""
    if result.diverged:
        status = DIVERGED
        message = (
            "; ".join(
                f"run {r}: non-finite loss at step {result.last_step[r] + 1}; parameters kept at step {result.last_step[r]}"
                for r in result.diverged
            )
            + ". Lower the learning rate or add a step cap."
        )
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    elif "stopped" in result.status:
        status = "stopped"
    return Trajectory(
        frame=result.frame,
        model=model,
        status=status,
        message=message,
        extra={"status": result.status, "last_step": result.last_step},
    )


def _problem(model: Any, data: Any, R: int, loss: str) -> Problem:
    """The data on a runs axis of R (shared data sets are stride-0 views, so one kernel serves every run)."""

    device = model.W.device  # the data follows the model (CPU, or CUDA when the model is there)

    def runs(t: torch.Tensor, axes: int) -> torch.Tensor:
        t = t.to(device)
        return t if t.dim() == axes + 1 else t.expand((R,) + tuple(t.shape))

    head = None if model.train_head else model.head(data.v)
    v = head if head is None or isinstance(head, Head) else runs(head, 1)
    return Problem(runs(data.X, 3), runs(data.Z, 2), runs(data.y, 1), v, loss)


def _state(state: list[Any], convert: Any) -> list[Any]:
    """A rule state with every tensor passed through ``convert`` (adding or dropping the runs axis)."""
    return [
        {k: [convert(x) if isinstance(x, torch.Tensor) else x for x in values] for k, values in s.items()}
        if isinstance(s, dict)
        else s
        for s in state
    ]


def _module_metric(metric: Metric, model: Any, data: Any):
    """An engine metric from a module metric: the engine copies the current parameters into ``model`` first."""
    return lambda state: metric(model, data)
