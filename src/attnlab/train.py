"""The training loop: any ``torch.optim.Optimizer`` on a token-selection model, metrics every k steps, NaN guard.

Spec: implicit-bias-ngd §4 (the algorithms are optimizers; this loop only feeds them gradients and records).

Gradients come from :meth:`TokenSelectionModel.gradients` (cancellation-free, log-scaled). An optimizer whose class
sets ``scale_invariant = True`` (uncapped normalised GD, normalised mirror descent) receives the mantissas, i.e.
the gradient divided by a positive per-run constant: its update is unchanged, and it stays exact after the
non-selected softmax probabilities underflow. Every other optimizer receives the plain gradient.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from attnlab._validation import check_in, check_scalar
from attnlab.losses import LOSSES
from attnlab.metrics import Metric

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
        The trained model (the last good parameters if the run diverged).
    status : str
        ``"completed"`` or ``"diverged"``.
    message : str
        Why the run stopped early, if it did.
    """

    frame: pd.DataFrame
    model: Any
    status: str = "completed"
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _as_runs(value: torch.Tensor) -> list[float]:
    return value.detach().reshape(-1).tolist()


def _finite_state(model: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


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
) -> Trajectory:
    """Run ``steps`` optimizer steps on ``model`` and record metrics every ``record_every`` steps.

    Parameters
    ----------
    model : TokenSelectionModel
        :class:`~attnlab.models.Combined`, :class:`~attnlab.models.Factored` or :class:`~attnlab.models.Diagonal`
        (parameters may carry a runs axis; an optimizer with a global gradient norm then couples the runs -- use
        :func:`attnlab.batched.train` for independent batched runs).
    optimizer : torch.optim.Optimizer
        Built on ``model.parameters()``; ``step`` is always given a closure (Polyak-type rules need the loss).
    data : TokenSelectionData
    loss : {"exp", "logistic"}, default="exp"
    steps : int, default=1000
    record_every : int, default=1
        Steps 0, k, 2k, ... and the last step are recorded.
    metrics : sequence of Metric
        E.g. ``[attnlab.metrics.alignment(sol.W), attnlab.metrics.opt_softmax()]``.
    progress : bool, optional
        Progress bar; default: only when attached to a terminal.

    Returns
    -------
    Trajectory

    Notes
    -----
    If the loss or a parameter becomes NaN/inf, the loop restores the last finite parameters, warns with the
    step number and returns with ``status == "diverged"`` -- nothing already recorded is lost.

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
    params = dict(model.named_parameters())
    scale_invariant = bool(getattr(optimizer, "scale_invariant", False))
    latest: dict[str, torch.Tensor] = {}

    def closure() -> torch.Tensor:
        grads, log_risk = model.gradients(data, loss)
        log_norm_sq = None
        for name, g in grads.items():
            runs = g.log_scale.dim()
            dims = tuple(range(runs, g.mantissa.dim()))
            sq = g.mantissa.pow(2).sum(dim=dims) if dims else g.mantissa.pow(2)
            log_norm_sq = sq if log_norm_sq is None else log_norm_sq + sq
            params[name].grad = g.mantissa.clone() if scale_invariant else g.value()
        scale = next(iter(grads.values())).log_scale
        latest["log_risk"] = log_risk
        latest["grad_norm"] = torch.sqrt(log_norm_sq) * torch.exp(scale)
        return log_risk.exp().sum()

    records: list[dict[str, Any]] = []

    def record(step: int) -> None:
        with torch.no_grad():
            closure()  # fresh loss and gradient norm at the current point
            columns = {
                "loss": latest["log_risk"].exp(),
                "log_loss": latest["log_risk"],
                "grad_norm": latest["grad_norm"],
                "norm": torch.linalg.matrix_norm(model.W, "fro"),
            }
            for metric in metrics:
                columns[metric.name] = metric(model, data)
            values = {k: _as_runs(torch.as_tensor(v)) for k, v in columns.items()}
        for run in range(len(values["loss"])):
            records.append({"run": run, "step": step, **{k: v[run] for k, v in values.items()}})

    from tqdm.auto import tqdm

    status, message = "completed", ""
    last_good = copy.deepcopy(model.state_dict())
    record(0)
    for step in tqdm(range(1, steps + 1), desc="train", disable=(None if progress is None else not progress), leave=False):
        optimizer.zero_grad(set_to_none=True)
        value = optimizer.step(closure)
        if not (_finite_state(model) and (value is None or math.isfinite(float(value)))):
            model.load_state_dict(last_good)
            status = "diverged"
            message = (
                f"non-finite loss or parameters at step {step}; parameters restored to step {step - 1}. "
                "Lower the learning rate or add a step cap."
            )
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            break
        last_good = copy.deepcopy(model.state_dict())
        if step % record_every == 0 or step == steps:
            record(step)
    optimizer.zero_grad(set_to_none=True)
    return Trajectory(frame=pd.DataFrame.from_records(records), model=model, status=status, message=message)
