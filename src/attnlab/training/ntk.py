"""NTK gradient descent (Algorithm C) and kernel regression (Algorithm D) as problems of the one loop.

Spec: softmax-ntk-diffusion §3.3 (Definition 3.5), §6.1 (Definition F.1), §8 (Algorithms C, D, E and the
practical step).

One problem serves every :class:`~attnlab.ntk.network.TwoLayerNet` (softmax, ReLU, exp): it needs only the
network's output and Jacobian factors. The guard of a run is its squared error (Algorithm C) or its kernel
residual (Algorithm D): not finite, the one divergence policy (:mod:`attnlab.training.loop`) keeps the step before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from attnlab._numerics import max_column_norm
from attnlab._validation import ValidationError, check_in, check_scalar, check_tensor
from attnlab.metrics import metric_columns
from attnlab.ntk import network
from attnlab.ntk.forward_process import ForwardProcess
from attnlab.ntk.kernel_regression import check_regression, unvec, vec
from attnlab.ntk.network import TwoLayerNet, check_net
from attnlab.ntk.score_data import INPUT_MAPS, DenoisingSet, check_denoising_set, fit_input_map
from attnlab.ntk.score_model import ScoreModel
from attnlab.ntk.tangent_kernel import practical_step, stability_limit
from attnlab.ntk.unit_ball import to_unit_ball
from attnlab.training.loop import LoopProblem, run_loop
from attnlab.training.result import TrainingResult

__all__ = ["gradient_descent", "kernel_regression_path", "train_score_model"]

_TRUE = torch.ones(1, dtype=torch.bool)  # the guard's answer for the one run of a network


def gradient_descent(
    net: TwoLayerNet,
    X: torch.Tensor,
    Y: torch.Tensor,
    *,
    lr: float,
    steps: int,
    record_every: int = 1,
    tol: float = 0.0,
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
    validation: tuple[torch.Tensor, torch.Tensor] | None = None,
    patience: int | None = None,
    stop: Callable[[dict[str, float]], bool] | None = None,
    callbacks: Iterable[Any] | None = None,
    progress: bool | None = False,
    desc: str = "ntk gd",
) -> TrainingResult:
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
        Step size, ``0 < lr < 2 / (s lambda_max(H*))``; see :func:`~attnlab.ntk.practical_step`.
    steps : int
        Maximum number of steps.
    record_every : int, default=1
        Record a row every this many steps (step 0 and the last step are always recorded).
    tol : float, default=0.0
        Stop once ``||F - Y||_F^2 <= tol``.
    metrics : mapping of str to callable, optional
        Extra columns: ``metric(state)`` of the state ``{"W": (d_in, m), "step": int, "net": net}`` at each recorded
        step (:class:`attnlab.metrics.Metric`; one returning a mapping fills one column per key).
    validation : (X_val, Y_val), optional
        Held-out set, shapes (n_val, d_in), (n_val, d_out); its error is recorded and the weights of the step
        with the lowest held-out error are restored at the end (early stopping).
    patience : int, optional
        With ``validation``: stop after this many records without a new best held-out error.
    stop : callable, optional
        ``stop(row) -> bool`` on each recorded row (after the metrics' columns are added); True ends the run.
    callbacks : sequence of attnlab.training.callbacks.Callback or callable, optional
        Called at each recorded step with a :class:`~attnlab.training.callbacks.Record` (``rows``: the row, ``run``
        0; ``state``: ``{"W": ...}``); one returning True ends the run (status ``"stopped"``).
    progress : bool or None, default=False
        A progress bar over the steps: True always, None only on a terminal.
    desc : str, default="ntk gd"
        Label of the progress bar.

    Returns
    -------
    TrainingResult
        ``frame`` (one row per recorded step: ``run`` 0, ``step``, ``sq_error`` ``||F - Y||_F^2``,
        ``weight_movement`` ``max_r ||w_r - w_r(0)||``, ``val_error`` (mean squared error per held-out point, when
        validating) and the metrics' columns), ``status`` (``"completed"``; ``"stopped"`` by ``stop`` or a
        callback; ``"diverged"``: the loss turned non-finite and the network holds the last weights whose loss was
        finite, or the best held-out ones before them), ``last_step``, ``model`` (``net``, holding the final or
        best weights, also ``params["W"]``) and in ``extra`` (also read as attributes): ``W0`` (the start),
        ``lr``, ``steps`` (steps taken), ``best_step`` (the step whose weights the network holds) and
        ``input_scale`` (the divisor that put ``X`` in the unit ball, 1.0 if none).

    Raises
    ------
    ValidationError
        ``net`` not a float64 :class:`~attnlab.ntk.TwoLayerNet`, bad shapes (``X`` needs a row), ``lr`` past the
        stability limit (none exists when every row of ``X`` is zero), ``patience`` without ``validation``, or a
        loss that is not finite at the initial weights.
    """
    sizes = {"k": check_net("net", net).d_in, "L": net.d_out}
    X = check_tensor("X", X, "nk", sizes, min_size={"n": 1})
    Y = check_tensor("Y", Y, "nL", sizes)
    check_scalar("steps", steps, kind=int, low=0)
    check_scalar("record_every", record_every, kind=int, low=1)
    check_scalar("tol", tol, low=0.0)
    X, scale = to_unit_ball(X, "X")
    held_out = None
    if patience is not None:
        check_scalar("patience", patience, kind=int, low=1)
        if validation is None:
            raise ValidationError("patience is set but validation is None; pass validation=(X_val, Y_val)")
    if validation is not None:
        held_out = (
            check_tensor("validation[0]", validation[0], "vk", sizes) / scale,
            check_tensor("validation[1]", validation[1], "vL", sizes),
        )
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    limit = stability_limit(net, X)
    if lr >= limit:
        raise ValidationError(
            f"lr == {lr:.6g}, must be < 2 / (s lambda_max(H*)) = {limit:.6g}: past this stability limit the "
            f"linearized dynamics diverge (softmax-ntk-diffusion theory page §8); pass lr=practical_step(net, X), here {limit / 4:.6g}"
        )
    problem = _AlgorithmC(net, X, Y, lr, tol, dict(metrics or {}), held_out, patience)
    if stop is not None:
        callbacks = [
            lambda record: stop({k: v for k, v in record.first_row().items() if k != "run"}),
            *(callbacks or ()),
        ]
    result = run_loop(
        problem, steps, record_every=record_every, callbacks=callbacks or (), progress=progress, desc=desc
    )
    best_step, W = result.last_step[0], problem.W
    if held_out is not None:
        best_step, W = problem.best[1], problem.best[2]
    with torch.no_grad():
        net.W.copy_(W)
    result.model, result.params = net, {"W": net.W.detach()}
    result.extra = {"W0": problem.W0, "lr": float(lr), "steps": result.last_step[0], "best_step": best_step}
    result.extra["input_scale"] = scale
    return result


class _AlgorithmC(LoopProblem):
    """Full-batch GD on a network's first layer as a problem of the one loop (one run)."""

    runs = 1

    def __init__(
        self,
        net: TwoLayerNet,
        X: torch.Tensor,
        Y: torch.Tensor,
        lr: float,
        tol: float,
        metrics: dict[str, Any],
        held_out: tuple[torch.Tensor, torch.Tensor] | None,
        patience: int | None,
    ) -> None:
        self.net, self.X, self.Y, self.lr, self.tol, self.metrics = net, X, Y, lr, tol, metrics
        self.held_out, self.patience = held_out, patience
        self.a = net.a.detach()
        self.W = net.W.detach().clone()
        self.W0 = self.W.clone()
        self.best, self.since_best = (math.inf, 0, self.W.clone()), 0
        # every (n, m) and (d_in, m) tensor of a step lives in a buffer reused by every step: at n m in the millions,
        # fresh allocations (page faults) cost several times the arithmetic
        self.logits, self.work = X.new_empty(X.shape[0], self.W.shape[1]), X.new_empty(X.shape[0], self.W.shape[1])
        self.grad = torch.empty_like(self.W)
        self.previous = torch.empty_like(self.W)  # the iterate before W, from the first step on (two take turns)
        self.moved, self.squares = torch.empty_like(self.W), torch.empty_like(self.W)  # W - W0 at a record, its squares
        self.sq_error = math.nan

    def gradient(self, step: int, records: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        F, phi, b = self.net.output_and_factors(torch.mm(self.X, self.W, out=self.logits), overwrite=True)
        R = F - self.Y
        self.sq_error = float(R.pow(2).sum())  # spec §3.1: 2 L = ||F - Y||_F^2
        return R, phi, b

    def guard(self, gradient: Any) -> torch.Tensor | None:
        return None if math.isfinite(self.sq_error) else _TRUE

    def done(self, gradient: Any) -> bool:
        """The error is within ``tol``, or the held-out error has not improved for ``patience`` records."""
        return self.sq_error <= self.tol or (self.patience is not None and self.since_best >= self.patience)

    def record(self, step: int, gradient: Any, active: torch.Tensor) -> dict[str, list]:
        W = self.W
        row = {
            "run": 0,
            "step": step,
            "sq_error": self.sq_error,
            # spec §5 Lemma 5.3: max_r ||w_r(t) - w_r(0)||
            "weight_movement": max_column_norm(torch.sub(W, self.W0, out=self.moved), work=self.squares),
        }
        if self.held_out is not None:
            X_val, Y_val = self.held_out
            row["val_error"] = float((self.net.output_from_logits(X_val @ W) - Y_val).pow(2).sum(dim=1).mean())
            if row["val_error"] < self.best[0]:
                self.best, self.since_best = (row["val_error"], step, W.clone()), 0
            else:
                self.since_best += 1
        row.update(metric_columns(self.metrics, {"W": W, "step": step, "net": self.net}, row))
        return {k: [v] for k, v in row.items()}

    def state(self) -> dict[str, torch.Tensor]:
        """The current weights, for callbacks."""
        return {"W": self.W}

    def apply(self, step: int, gradient: Any, active: torch.Tensor) -> None:
        R, phi, b = gradient
        delta = network.weight_gradient(self.X, R, phi, b, self.a, out=self.grad, work=self.work)  # looked up per call
        # spec §3.3: W(t+1) = W(t) - eta Delta W(t), into the spare buffer; the old W stays for keep
        self.previous, self.W = self.W, torch.add(self.W, delta, alpha=-self.lr, out=self.previous)

    def keep(self, runs: torch.Tensor) -> None:
        if bool(runs.any()):
            self.W = self.previous


def kernel_regression_path(
    H: torch.Tensor,
    K_test: torch.Tensor,
    Y: torch.Tensor,
    *,
    lr: float,
    scale: float,
    steps: Sequence[int],
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
    callbacks: Iterable[Any] = (),
    progress: bool | None = False,
) -> TrainingResult:
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
    metrics : mapping of str to callable, optional
        Extra columns: ``metric(state)`` of the state ``{"gamma": (n L,), "step": int}`` at the reported steps.
    callbacks : iterable of Callback or callable
        See :mod:`attnlab.training.callbacks`.
    progress : bool or None, default=False
        A progress bar over the steps: True always, None only on a terminal.

    Returns
    -------
    TrainingResult
        ``iterates``: ``"step"`` (len(steps),) and ``"F"`` (len(steps), p, L), the predictions at the given steps;
        ``frame``: ``run`` 0, ``step`` and ``sq_residual`` ``||s H* gamma - vec Y||^2`` at the recorded steps;
        ``params["gamma"]`` (n L,), the final coefficients; ``status`` (``"diverged"`` when the residual or its
        squared norm turned non-finite: the predictions then stop at the last finite coefficients).

    Raises
    ------
    ValidationError
        On bad shapes (``H`` must be ``(n L, n L)``, ``K_test`` ``(p L, n L)``, ``Y`` at least one row), a
        non-symmetric ``H``, a non-positive ``lr`` or ``scale``, or ``steps`` not a sequence of increasing
        non-negative integers.
    """
    H, K_test, Y = check_regression(H, K_test, Y)
    L = Y.shape[1]
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("scale", scale, low=0.0, low_inclusive=False)
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable) or isinstance(steps, torch.Tensor):
        raise ValidationError(
            f"steps must be a sequence of step counts, got {steps!r}; pass e.g. steps=[0, 10, 100] "
            "(or [steps] for one step)"
        )
    steps = [check_scalar("steps", s, kind=int, low=0) for s in steps]
    if not steps or any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValidationError(f"steps must be increasing non-negative integers, got {steps}")
    problem = _AlgorithmD(H, K_test, vec(Y), L, lr, scale, dict(metrics or {}))
    result = run_loop(
        problem, steps[-1], record_at=set(steps), callbacks=callbacks, progress=progress, desc="ntk kernel"
    )
    kept = [i for i, s in enumerate(problem.recorded) if s in set(steps)]  # a diverged run stops short of some
    F = [problem.predictions[i] for i in kept]
    result.iterates = {
        "step": torch.tensor([problem.recorded[i] for i in kept], dtype=torch.int64),
        "F": torch.stack(F) if F else K_test.new_empty(0, K_test.shape[0] // L, L),
    }
    result.params = {"gamma": problem.gamma}
    return result


class _AlgorithmD(LoopProblem):
    """Gradient descent on the NTK regression coefficients as a problem of the one loop (one run)."""

    runs = 1

    def __init__(
        self, H: torch.Tensor, K_test: torch.Tensor, y: torch.Tensor, L: int, lr: float, scale: float, metrics: dict
    ) -> None:
        self.H, self.K_test, self.y, self.L, self.lr, self.scale = H, K_test, y, L, lr, scale
        self.metrics = metrics
        self.gamma = torch.zeros_like(y)
        self.previous = self.gamma
        self.recorded: list[int] = []
        self.predictions: list[torch.Tensor] = []

    def gradient(self, step: int, records: bool) -> torch.Tensor:
        return self.scale * (self.H @ self.gamma) - self.y  # the residual s H* gamma - vec Y

    def guard(self, residual: torch.Tensor) -> torch.Tensor | None:
        # the recorded ||residual||^2 too: entries near 1e155 square past float64 while each is finite
        return None if bool(torch.isfinite(residual.pow(2).sum())) else _TRUE

    def record(self, step: int, residual: torch.Tensor, active: torch.Tensor) -> dict[str, list]:
        self.recorded.append(step)
        self.predictions.append(unvec(self.scale * (self.K_test @ self.gamma), self.L))  # spec §6.1: F_ker = m K gamma
        row = {"run": 0, "step": step, "sq_residual": float(residual.pow(2).sum())}
        row.update(metric_columns(self.metrics, {"gamma": self.gamma, "step": step}, row))
        return {k: [v] for k, v in row.items()}

    def apply(self, step: int, residual: torch.Tensor, active: torch.Tensor) -> None:
        self.previous, self.gamma = self.gamma, self.gamma - self.lr * residual  # spec §8 Alg. D

    def keep(self, runs: torch.Tensor) -> None:
        if bool(runs.any()):
            self.gamma = self.previous


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
) -> tuple[ScoreModel, TrainingResult]:
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
    result : TrainingResult
        What :func:`gradient_descent` returns.

    Raises
    ------
    ValidationError
        When ``net`` is not a float64 :class:`~attnlab.ntk.TwoLayerNet`, ``train`` or ``held_out`` not a
        :class:`~attnlab.ntk.DenoisingSet`, ``process`` not a :class:`~attnlab.ntk.ForwardProcess`, an input-map
        argument is out of range (:func:`~attnlab.ntk.fit_input_map`), or as :func:`gradient_descent`.
    """
    check_net("net", net)
    check_denoising_set("train", train)
    check_denoising_set("held_out", held_out)
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
