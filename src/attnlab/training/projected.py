"""Projected normalised l_p mirror descent on the ball ``||W||_p <= R``, a problem of the one loop: a solver of
l_p-constrained problems.

Spec: mirror-descent-lp §4 (normalised l_p-AttGD step), §3 (psi, its Bregman divergence), §8.1 (the constrained
ERM of the regularisation path, which :func:`attnlab.svm.constrained_erm` solves by SLSQP). The guard of the run is
its iterate: not finite, the one divergence policy (:mod:`attnlab.training.loop`) keeps the step before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import torch

from attnlab._validation import ValidationError, check_bool, check_scalar, check_tensor
from attnlab.metrics import entrywise_norm, metric_columns
from attnlab.optim.mirror_descent import P_MIN, _mirror_descent
from attnlab.training.loop import LoopProblem, run_loop
from attnlab.training.result import TrainingResult

__all__ = ["projected_mirror_descent"]

_TRUE = torch.ones(1, dtype=torch.bool)  # the guard's answer for the one run


def projected_mirror_descent(
    grad: Callable[[torch.Tensor], torch.Tensor],
    W0: torch.Tensor,
    *,
    p: float,
    radius: float,
    steps: int,
    step_scale: float = 1.0,
    record_every: int | None = None,
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
    callbacks: Iterable[Any] = (),
    progress: bool | None = False,
) -> TrainingResult:
    """Minimise a convex function on ``{||W||_p <= radius}`` by projected normalised l_p mirror descent.

    Spec: mirror-descent-lp §4, §3. Each step is the normalised mirror step of
    :func:`~attnlab.optim.mirror_descent.mirror_descent` with ``eta_k = c radius^(p-1) / sqrt(k + 1)``
    (``||grad psi(W)||_q = radius^(p-1)`` on the sphere, so at ``c = 1`` the first step may cross the ball),
    followed by the Bregman projection of ``psi = ||.||_p^p / p`` onto the ball, a radial rescaling (its KKT
    condition is ``(1 + lambda) grad psi(W) = grad psi(Y)``).

    Parameters
    ----------
    grad : callable
        ``grad(W)`` returns the gradient at ``W``, shape of ``W``, or any positive multiple of it (the step is
        normalised by its dual norm), such as a gradient's mantissa.
    W0 : torch.Tensor, shape (d, d_q)
        Start (converted to float64): a matrix, whose entrywise ``||.||_p`` the ball bounds.
    p : float
        Exponent ``p >= 1.001`` of the potential and of the ball (:data:`attnlab.optim.mirror_descent.P_MIN`: nearer
        1 the mirror map's power ``1 / (p - 1)`` overflows).
    radius : float
        Radius ``R > 0`` of the ball.
    steps : int
        Steps, ``>= 1``.
    step_scale : float, default=1.0
        ``c > 0``. On a non-convex function (the attention risk) a ``c`` below 1 keeps the first steps in the
        start's basin; at 1 they may land on a plateau of another one.
    record_every : int, optional
        Rows every this many steps (default: the first and the last).
    metrics : mapping of str to callable, optional
        Extra columns: ``metric(state)`` of the state ``{"W": W, "step": int}`` (:class:`attnlab.metrics.Metric`).
    callbacks : iterable of Callback or callable
        See :mod:`attnlab.training.callbacks`.
    progress : bool or None, default=False
        A progress bar over the steps: True always, None only on a terminal.

    Returns
    -------
    TrainingResult
        ``params["W"]`` (also ``result.W``): the last iterate, inside the ball, shape of ``W0``, float64 (the last
        finite one when ``status`` is ``["diverged"]``); ``frame``: ``run`` 0, ``step`` and ``norm`` ``||W||_p``.

    Raises
    ------
    ValidationError
        When ``grad`` is not callable or returns another shape than ``W``'s, ``W0`` is not a finite matrix,
        ``p < 1.001``, ``radius <= 0``, ``steps < 1``, ``step_scale <= 0``, ``record_every`` is not an integer >= 1, or
        ``progress`` is not a bool or None.
    """
    if not callable(grad):
        raise ValidationError(f"grad must be a callable W -> gradient at W, got {type(grad).__name__}")
    W = check_tensor("W0", W0, "dq")
    check_scalar("p", p, low=P_MIN)  # the mirror map's power 1/(p-1) overflows nearer 1 (P_MIN)
    check_scalar("radius", radius, low=0.0, low_inclusive=False)
    check_scalar("steps", steps, kind=int, low=1)
    check_scalar("step_scale", step_scale, low=0.0, low_inclusive=False)
    if record_every is not None:
        record_every = check_scalar("record_every", record_every, kind=int, low=1)
    if progress is not None:
        progress = check_bool("progress", progress)
    problem = _ProjectedMD(grad, W, p, radius, step_scale, dict(metrics or {}))
    result = run_loop(problem, steps, record_every=record_every, callbacks=callbacks, progress=progress, desc="md")
    result.params = {"W": problem.W}
    return result


class _ProjectedMD(LoopProblem):
    """Projected normalised mirror descent as a problem of the one loop (one run)."""

    runs = 1

    def __init__(
        self,
        grad: Callable[[torch.Tensor], torch.Tensor],
        W: torch.Tensor,
        p: float,
        radius: float,
        step_scale: float,
        metrics: dict,
    ) -> None:
        self.grad, self.W, self.previous, self.p, self.radius, self.metrics = grad, W, W, p, radius, metrics
        self.step_scale = step_scale

    def gradient(self, step: int, records: bool) -> torch.Tensor:
        g = self.grad(self.W)
        if not isinstance(g, torch.Tensor) or g.shape != self.W.shape:
            shape = tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__
            raise ValidationError(f"grad(W) returned {shape}, not a tensor of W's shape {tuple(self.W.shape)}")
        return g

    def guard(self, gradient: torch.Tensor) -> torch.Tensor | None:
        return None if bool(torch.isfinite(self.W).all()) else _TRUE

    def record(self, step: int, gradient: torch.Tensor, active: torch.Tensor) -> dict[str, list]:
        row = {"run": 0, "step": step, "norm": float(entrywise_norm(self.W, self.p))}
        row.update(metric_columns(self.metrics, {"W": self.W, "step": step}, row))
        return {k: [v] for k, v in row.items()}

    def apply(self, step: int, gradient: torch.Tensor, active: torch.Tensor) -> None:
        lr = self.step_scale * self.radius ** (self.p - 1.0) / np.sqrt(step + 1.0)  # md §4: eta_k
        W = _mirror_descent([self.W], [gradient], lr=lr, p=self.p, normalized=True)[0]  # md §4: normalised l_p step
        self.previous, self.W = self.W, W * torch.clamp(self.radius / entrywise_norm(W, self.p), max=1.0)  # md §3

    def keep(self, runs: torch.Tensor) -> None:
        if bool(runs.any()):
            self.W = self.previous
