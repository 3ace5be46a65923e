"""Full-batch gradient descent on the first layer, ``a`` fixed (Algorithm C), with optional early stopping.

Spec: softmax-ntk-diffusion §3.3 (Definition 3.5), §8 (Algorithm C and its practical step).

One loop serves every :class:`~attnlab.ntk.network.TwoLayerNet` (softmax, ReLU, exp): it needs only the
network's output and Jacobian factors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.callbacks import COMPLETED, DIVERGED, STOPPED, Record, TrainingResult, callback_list, tidy_frame
from attnlab.ntk import network
from attnlab.ntk.network import TwoLayerNet
from attnlab.ntk.tangent_kernel import lambda_max
from attnlab.ntk.unit_ball import to_unit_ball

__all__ = ["GDResult", "gradient_descent", "practical_step", "stability_limit"]

RecordHook = Callable[[int, torch.Tensor], dict[str, float]]


def stability_limit(net: TwoLayerNet, X: torch.Tensor) -> float:
    """``2 / (s lambda_max(H))``: the largest step for which the linearized dynamics do not diverge.

    Spec: §4.1 (``F(t+1) - F(t) ~ -lr s H (F - Y)``), §8 step 3. ``s = net.kernel_scale``.

    Parameters
    ----------
    net : TwoLayerNet
        The network at the weights of interest (at initialization, ``H = H*``).
    X : torch.Tensor, shape (n, d_in)
        Training inputs.

    Returns
    -------
    float
        The step bound, > 0.
    """
    return 2.0 / (net.kernel_scale * lambda_max(net, X))  # spec §4.1: |1 - lr s lambda_max| < 1


def practical_step(net: TwoLayerNet, X: torch.Tensor, c: float = 0.5) -> float:
    """The practical step ``lr = c / (s lambda_max(H*))``, ``0 < c <= 1`` (spec §8, Algorithm C step 3).

    Parameters
    ----------
    net : TwoLayerNet
        At initialization, so that ``H = H*``.
    X : torch.Tensor, shape (n, d_in)
    c : float, default=0.5

    Returns
    -------
    float
    """
    check_scalar("c", c, low=0.0, high=1.0, low_inclusive=False)
    return c * stability_limit(net, X) / 2  # spec §8: eta = c / (m lambda_max(H*))


@dataclass
class GDResult(TrainingResult):
    """What :func:`gradient_descent` returns; the network's ``W`` holds the final (or best) weights.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per recorded step: ``run`` (0: one run), ``step``, ``sq_error`` (``||F - Y||_F^2``), ``weight_movement``
        (``max_r ||w_r - w_r(0)||``), ``val_error`` (mean squared error per held-out point, when validating),
        and the hook's columns.
    W0 : torch.Tensor, shape (d_in, m)
        Weights at the start.
    lr : float
        The step size used.
    steps : int
        Steps taken.
    best_step : int
        Step whose weights the network holds (the last one without validation).
    input_scale : float
        Divisor applied to ``X`` to put it in the unit ball (1.0 if none).
    status : list of str
        One word (one run): ``"completed"``, ``"stopped"`` (``stop`` or a callback ended it early) or
        ``"diverged"``: the loss turned non-finite after ``steps`` steps; the network holds the last weights whose
        loss was finite (or the best held-out ones before them): the one divergence policy of
        :mod:`attnlab.callbacks`.
    """

    frame: pd.DataFrame
    W0: torch.Tensor
    lr: float
    steps: int
    best_step: int
    input_scale: float
    status: list[str] = field(default_factory=lambda: [COMPLETED])


def gradient_descent(
    net: TwoLayerNet,
    X: torch.Tensor,
    Y: torch.Tensor,
    *,
    lr: float,
    steps: int,
    record_every: int = 1,
    tol: float = 0.0,
    record: RecordHook | None = None,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    patience: int | None = None,
    stop: Callable[[dict[str, float]], bool] | None = None,
    callbacks: Sequence[Any] | None = None,
    progress: bool | None = False,
    desc: str = "ntk gd",
) -> GDResult:
    """Train ``net.W`` by ``W <- W - lr * dL/dW`` on ``L = 0.5 ||F(X) - Y||_F^2``; ``a`` stays fixed.

    Spec: softmax-ntk-diffusion §3.3 (Definition 3.5), Algorithm C.

    Parameters
    ----------
    net : TwoLayerNet
        Trained in place.
    X : torch.Tensor, shape (n, d_in)
        Rows outside the unit ball trigger a warning and a rescaling of all rows (Assumption 6.1).
    Y : torch.Tensor, shape (n, d_out)
    lr : float
        Step size, ``0 < lr < 2 / (s lambda_max(H*))``; see :func:`practical_step`.
    steps : int
        Maximum number of steps.
    record_every : int, default=1
        Record a row every this many steps (step 0 and the last step are always recorded).
    tol : float, default=0.0
        Stop once ``||F - Y||_F^2 <= tol``.
    record : callable, optional
        ``record(step, W) -> dict`` of extra columns, called at each recorded step with the current weights.
    validation : (X_val, Y_val), optional
        Held-out set, shapes (n_val, d_in), (n_val, d_out); its error is recorded and the weights of the step
        with the lowest held-out error are restored at the end (early stopping).
    patience : int, optional
        With ``validation``: stop after this many records without a new best held-out error.
    stop : callable, optional
        ``stop(row) -> bool`` on each recorded row (after the hook's columns are added); True ends the run.
    callbacks : sequence of attnlab.callbacks.Callback or callable, optional
        Called at each recorded step with a :class:`~attnlab.callbacks.Record` (``rows``: the row, ``run`` 0;
        ``state``: ``{"W": ...}``); one returning True ends the run (status ``"stopped"``).
    progress : bool or None, default=False
        A progress bar over the steps: True always, None only on a terminal.
    desc : str, default="ntk gd"
        Label of the progress bar.

    Returns
    -------
    GDResult

    Raises
    ------
    ValidationError
        Bad shapes, ``lr`` past the stability limit, ``patience`` without ``validation``, or a loss that is not
        finite at the initial weights.
    """
    sizes = {"k": net.d_in, "L": net.d_out}
    X = check_tensor("X", X, "nk", sizes)
    Y = check_tensor("Y", Y, "nL", sizes)
    check_scalar("steps", steps, kind=int, low=0)
    check_scalar("record_every", record_every, kind=int, low=1)
    check_scalar("tol", tol, low=0.0)
    X, scale = to_unit_ball(X, "X")
    if patience is not None:
        check_scalar("patience", patience, kind=int, low=1)
        if validation is None:
            raise ValidationError("patience is set but validation is None; pass validation=(X_val, Y_val)")
    if validation is not None:
        X_val = check_tensor("validation[0]", validation[0], "vk", sizes) / scale
        Y_val = check_tensor("validation[1]", validation[1], "vL", sizes)
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    limit = stability_limit(net, X)
    if lr >= limit:
        raise ValidationError(
            f"lr == {lr:.6g}, must be < 2 / (s lambda_max(H*)) = {limit:.6g}: past this stability limit the "
            f"linearized dynamics diverge (softmax-ntk-diffusion theory page §8); pass lr=practical_step(net, X), here {limit / 4:.6g}"
        )

    a = net.a.detach()
    W = net.W.detach().clone()
    W0 = W.clone()
    rows: list[dict[str, float]] = []
    best = (math.inf, 0, W.clone())
    since_best = 0
    step = 0
    status = COMPLETED
    calls = callback_list(callbacks, progress, desc)
    calls.start(steps)
    # every (n, m) and (d_in, m) tensor of a step lives in a buffer reused by every step: at n m in the millions,
    # fresh allocations (page faults) cost several times the arithmetic
    logits, work = X.new_empty(X.shape[0], W.shape[1]), X.new_empty(X.shape[0], W.shape[1])
    grad = torch.empty_like(W)
    previous = torch.empty_like(W)  # the iterate before W, from the first step on (two buffers take turns)
    for step in range(steps + 1):
        F, phi, b = net.output_and_factors(torch.mm(X, W, out=logits), overwrite=True)
        R = F - Y
        sq_error = float(R.pow(2).sum())  # spec §3.1: 2 L = ||F - Y||_F^2
        if not math.isfinite(sq_error):  # the one divergence policy: stop, keep the last finite weights
            if step == 0:
                raise ValidationError("the loss is not finite at the initial weights; check X, Y and the network")
            W, step, status = previous, step - 1, DIVERGED
            break
        last = step == steps or sq_error <= tol
        if step % record_every == 0 or last:
            row = {"step": step, "sq_error": sq_error, "weight_movement": float((W - W0).norm(dim=0).max())}
            if validation is not None:
                val_error = float((net.output_from_logits(X_val @ W) - Y_val).pow(2).sum(dim=1).mean())
                row["val_error"] = val_error
                if val_error < best[0]:
                    best, since_best = (val_error, step, W.clone()), 0
                else:
                    since_best += 1
                    last = last or (patience is not None and since_best >= patience)
            if record is not None:
                row.update(record(step, W))
            rows.append(row)
            recorded = Record(step, steps, tidy_frame({k: [v] for k, v in row.items()}, run=0), {"W": W})
            asked = (stop is not None and stop(row)) | calls.record(recorded)
            status = STOPPED if asked and not last else status
            last = last or asked
        calls.step(step)
        if last:
            break
        delta = network.weight_gradient(X, R, phi, b, a, out=grad, work=work)  # spec §3.2, looked up per call
        # spec §3.3: W(t+1) = W(t) - eta Delta W(t), into the spare buffer; the old W stays as the last finite state
        previous, W = W, torch.add(W, delta, alpha=-lr, out=previous)
    best_step = step
    if validation is not None:
        best_step, W = best[1], best[2]
    with torch.no_grad():
        net.W.copy_(W)
    calls.end()
    frame = tidy_frame({k: [row[k] for row in rows] for k in rows[0]}, run=0) if rows else pd.DataFrame()
    return GDResult(frame, W0, float(lr), step, best_step, scale, [status])
