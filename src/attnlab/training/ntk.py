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

from attnlab._validation import ValidationError, check_in, check_scalar, check_tensor
from attnlab.ntk.forward_process import ForwardProcess
from attnlab.ntk.kernel_regression import unvec, vec
from attnlab.ntk.network import TwoLayerNet, weight_gradient
from attnlab.ntk.score_data import INPUT_MAPS, DenoisingSet, fit_input_map
from attnlab.ntk.score_model import ScoreModel
from attnlab.ntk.tangent_kernel import practical_step, stability_limit
from attnlab.ntk.unit_ball import to_unit_ball
from attnlab.training.callbacks import COMPLETED, DIVERGED, STOPPED, Record, TrainingResult, callback_list, tidy_frame

__all__ = ["GDResult", "gradient_descent", "kernel_regression_path", "train_score_model"]

RecordHook = Callable[[int, torch.Tensor], dict[str, float]]


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
        :mod:`attnlab.training.callbacks`.
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
    callbacks : sequence of attnlab.training.callbacks.Callback or callable, optional
        Called at each recorded step with a :class:`~attnlab.training.callbacks.Record` (``rows``: the row, ``run`` 0;
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
        delta = weight_gradient(X, R, phi, b, a, out=grad, work=work)
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


def kernel_regression_path(
    H: torch.Tensor,
    K_test: torch.Tensor,
    Y: torch.Tensor,
    *,
    lr: float,
    scale: float,
    steps: Sequence[int],
) -> torch.Tensor:
    """Predictions ``F_ker(gamma(t), X_test) = s K(X_test, X) gamma(t)`` at the given steps, ``gamma(0) = 0``.

    Spec: §6.1, Algorithm D: ``gamma <- gamma - lr (s H* gamma - vec Y)``; on the training inputs this is the
    linearized network ``F(t+1) = F(t) - lr s H* (F(t) - Y)`` with the same ``lr``.

    Parameters
    ----------
    H : torch.Tensor, shape (n * L, n * L)
        ``H*``, the Gram at initialization.
    K_test : torch.Tensor, shape (p * L, n * L)
        ``K(X_test, X)`` at initialization (``cross_kernel``).
    Y : torch.Tensor, shape (n, L)
    lr : float
        The step of the network's GD.
    scale : float
        ``s = net.kernel_scale`` (``m`` for softmax).
    steps : sequence of int
        Increasing steps at which to report.

    Returns
    -------
    torch.Tensor, shape (len(steps), p, L)
    """
    H = check_tensor("H", H, "NM")
    Y = check_tensor("Y", Y, "nL")
    n, L = Y.shape
    K_test = check_tensor("K_test", K_test, "PN", {"N": n * L})
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("scale", scale, low=0.0, low_inclusive=False)
    y = vec(Y)
    gamma = torch.zeros_like(y)
    out = []
    done = 0
    for target in steps:
        for _ in range(target - done):
            gamma = gamma - lr * (scale * (H @ gamma) - y)  # spec §8 Alg. D
        done = target
        out.append(unvec(scale * (K_test @ gamma), L))  # spec §6.1: F_ker = m K(x, X) gamma
    return torch.stack(out)


def train_score_model(
    net: TwoLayerNet,
    train: DenoisingSet,
    held_out: DenoisingSet,
    process: ForwardProcess,
    T: float,
    *,
    c: float = 0.5,
    steps: int = 10_000,
    record_every: int = 10,
    patience: int = 20,
    skip: bool = True,
    input_map: str = "spec",
    T0: float | None = None,
    decay: float = 0.9,
) -> tuple[ScoreModel, GDResult]:
    """Fit the denoiser by GD on the squared loss to the noisy labels ``x_0`` (Algorithm E), early-stopped on the
    held-out denoising loss.

    Spec: softmax-ntk-diffusion §7.4 (with ``lambda(t) = h^2 / alpha^2`` the DSM loss is this squared loss),
    §8 Algorithm E.

    Parameters
    ----------
    net : TwoLayerNet
        At initialization; ``d_in = d + 1``, ``d_out = d``. Trained in place.
    train, held_out : DenoisingSet
        Training and held-out triples (spec §7.5).
    process : ForwardProcess
    T : float
        Final diffusion time (sets the input map).
    c : float, default=0.5
        Step ``lr = c / (m lambda_max(H*))``.
    steps, record_every, patience : int
        Maximum steps; held-out loss checked every ``record_every`` steps; stop after ``patience`` checks
        without improvement.
    skip : bool, default=True
        Learn the residual over the linear (Gaussian) denoiser (ours; ``False`` is spec §7.4 as written).
    input_map : {"spec", "scaled", "sphere"}, default="spec"
        The network input ``u(t, x)``; see :class:`~attnlab.ntk.score_data.InputMap` (``"spec"`` is spec §7.5).
    T0 : float, optional
        Smallest diffusion time; required by ``input_map="sphere"``.
    decay : float, default=0.9
        ``input_map="sphere"``: the input radius falls from 1 at ``T0`` to ``1 - decay`` at ``T``.

    Returns
    -------
    model : ScoreModel
        Holds the weights of the best held-out step.
    result : GDResult
    """
    check_in("input_map", input_map, INPUT_MAPS)
    inputs = fit_input_map(train, process, T, skip, input_map, T0, decay)
    U = inputs(train.t, train.x_t)  # (n, d + 1), in the unit ball by construction (rho, or the sphere's r <= 1)
    U_val = inputs(held_out.t, held_out.x_t)
    labels = train.x0 - inputs.skip_gain(train.t)[:, None] * train.x_t  # residual labels (= x0 without skip)
    val_labels = held_out.x0 - inputs.skip_gain(held_out.t)[:, None] * held_out.x_t
    result = gradient_descent(
        net,
        U,
        labels,
        lr=practical_step(net, U, c),
        steps=steps,
        record_every=record_every,
        validation=(U_val, val_labels),
        patience=patience,
    )
    return ScoreModel(net, process, inputs), result
