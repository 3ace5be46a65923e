"""Gradient flow of a token-selection model: the normalised-GD path, small-step GD, and fixed-step RK4.

Spec: kq-nuclear-norm §3 (gradient flow (1) on ``(K, Q)``; discretisations (a) GD, (b) normalised GD -- the
default, same path at unit speed -- and (c) RK4), §3.1 (integrated weights ``phi(t)``, closed form Lemma A.1),
§4 (KKT multipliers ``lambda(t) = phi(t) / ln mu(t)``), §8 (keep ``phi`` as tracked state).

The flow moves every trainable parameter of a :class:`attnlab.models.TokenSelectionModel` (``Factored`` ``(K, Q)``,
``Diagonal`` ``(xi_k, xi_q)``, or ``Combined`` ``W``) along ``-grad L``. Gradients come from
:meth:`TokenSelectionModel.gradients` (log-scaled, cancellation-free), so the normalised path stays exact after
the softmax saturates. Parameters may carry a leading runs axis ``R``; each run is normalised by its own joint
gradient norm, so runs are independent.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.losses import LOSSES
from attnlab.models.functional import attention_logits, logit_derivatives, score_gaps, token_scores

__all__ = [
    "METHODS",
    "Flow",
    "closed_form_beta",
    "constraint_vectors",
    "gradient_flow",
    "kkt_multipliers",
    "logit_weights",
]

METHODS = ("ngd", "gd", "rk4")

State = dict[str, torch.Tensor]


class Flow(NamedTuple):
    """What :func:`gradient_flow` returns.

    Attributes
    ----------
    model : TokenSelectionModel
        The model, its parameters moved to the end of the path.
    phi : torch.Tensor, shape ([R,] n, T), float64, or None
        Integrated weights ``phi(t)`` at the end (``track_phi=True``), zero on no token by construction.
    log_time : torch.Tensor, shape ([R,]), float64
        ``log t``: flow time covered (for ``"ngd"`` each step of length ``eta`` takes ``eta / ||grad L||``).
    path : dict of str to torch.Tensor
        Snapshots at the recorded steps, stacked along a leading axis ``S``: ``"step"`` (S,), ``"log_time"``
        (S, [R]), ``"log_loss"`` (S, [R]), ``"W"`` (S, [R,] d, d), one entry per parameter name (e.g. ``"K"``,
        ``"Q"`` or ``"xi_k"``, ``"xi_q"``) and ``"phi"`` (S, [R,] n, T) when tracked.
    """

    model: Any
    phi: torch.Tensor | None
    log_time: torch.Tensor
    path: dict[str, torch.Tensor]

    def frame(self) -> pd.DataFrame:
        """Tidy table, one row per recorded (run, step): ``run, step, time, log_time, loss, log_loss, norm``.

        ``norm`` is ``||W||_F``; ``time`` is ``exp(log_time)`` (``inf`` past 1e308 on very long NGD paths).
        """
        log_time = self.path["log_time"]
        S = log_time.shape[0]
        columns = {
            "log_time": log_time,
            "time": log_time.exp(),
            "log_loss": self.path["log_loss"],
            "loss": self.path["log_loss"].exp(),
            "norm": torch.linalg.matrix_norm(self.path["W"], "fro"),
        }
        flat = {k: v.reshape(S, -1) for k, v in columns.items()}
        R = flat["log_time"].shape[1]
        steps = self.path["step"][:, None].expand(S, R)
        runs = torch.arange(R)[None, :].expand(S, R)
        table = {"run": runs.reshape(-1).numpy(), "step": steps.reshape(-1).numpy()}
        table.update({k: v.reshape(-1).numpy() for k, v in flat.items()})
        return pd.DataFrame(table)


def constraint_vectors(X: torch.Tensor, Z: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``B_{il} = z_i * (x_{i,sel_i} - x_{il})`` for every token (zero at ``l = sel_i``).

    Spec: kq-nuclear-norm §1 (constraint vectors of the diagonal program).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d)
    select : torch.Tensor, shape ([R,] n), int64

    Returns
    -------
    torch.Tensor, shape ([R,] n, T, d)
    """
    idx = select[..., None, None].expand(select.shape + (1, X.shape[-1]))
    x_sel = torch.gather(X, -2, idx)  # ([R,] n, 1, d)
    return Z[..., None, :] * (x_sel - X)  # spec kq §1: B_il = z_i ⊙ (x_opt - x_il)


def logit_weights(
    X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor, W: torch.Tensor, loss: str = "exp"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``log |dL/ds_il|`` and its sign: the derivative of the risk in each logit, in the log domain.

    Spec: kq-nuclear-norm §3.1 (integrand of ``phi``: ``dL/ds_il = -(1/n) e^{-gamma_i^T sigma(g_i)}
    (Sigma(g_i) gamma_i)_l`` for the exponential loss, so ``phi' = 2 dL/ds``), implicit-bias-ngd §3.1
    (cancellation-free ``c_il``).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d)
    y : torch.Tensor, shape ([R,] n)
    v : torch.Tensor, shape ([R,] d)
    W : torch.Tensor, shape ([R,] d, d)
    loss : {"exp", "logistic"}

    Returns
    -------
    log_abs, sign : torch.Tensor, shape ([R,] n, T)

    Notes
    -----
    ``dL/ds_il = (l'_i / n) sigma_il c_il`` with ``c_il = sum_tau sigma_i tau (gamma_il - gamma_i tau)``, so
    ``grad_W L = sum_il (dL/ds_il) x_il z_i^T`` -- the same weights as in
    :func:`attnlab.models.functional.loss_gradients` (both come from
    :func:`attnlab.models.functional.logit_derivatives`). Under Assumption 2 the weight is positive on every
    non-selected token (raising a wrong token's logit raises the loss), hence ``phi >= 0`` there.
    """
    derivatives = logit_derivatives(attention_logits(X, W, Z), score_gaps(token_scores(X, y, v)), loss)
    return derivatives.log_abs, derivatives.sign  # spec kq §3.1: dL/ds = -(|l'|/n) sigma c


def closed_form_beta(omega0: torch.Tensor, B: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """``beta(t) = omega_0^2 * sinh(B phi(t))`` (Lemma A.1), shape ``([R,] d)``.

    Spec: kq-nuclear-norm §3.1 (closed form, initialisation (5)).

    Parameters
    ----------
    omega0 : torch.Tensor, shape ([R,] d)
        Initialisation vector: ``xi_k(0)^2 + xi_q(0)^2 = 2 omega0^2`` and ``xi_k(0) * xi_q(0) = 0``.
    B : torch.Tensor, shape ([R,] n, T, d)
        :func:`constraint_vectors`.
    phi : torch.Tensor, shape ([R,] n, T)
        Integrated weights from :func:`gradient_flow` with ``track_phi=True``.
    """
    B_phi = torch.einsum("...ntd,...nt->...d", B, phi)
    return omega0**2 * torch.sinh(B_phi)  # spec kq §3.1 Lemma A.1


def kkt_multipliers(phi: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """``lambda_il(t) = phi_il(t) / ln mu(t)``, shape ``([R,] n, T)``; ``nan`` where ``mu <= 1``.

    Spec: kq-nuclear-norm §4 (multiplier estimate of the proof of Theorem 4.1).

    Parameters
    ----------
    phi : torch.Tensor, shape ([R,] n, T)
    mu : torch.Tensor, shape ([R,])
        Attention margin ``mu(W_t)`` (:func:`attnlab.metrics.attention_margin`).
    """
    log_mu = torch.where(mu > 1, torch.log(mu.clamp(min=1.0)), torch.nan)
    return phi / log_mu[..., None, None]  # spec kq §4: lambda = phi / ln mu


def _runs_sq(tensor: torch.Tensor, runs: int) -> torch.Tensor:
    """Sum of squares over every axis after the first ``runs`` ones, shape ``tensor.shape[:runs]``."""
    dims = tuple(range(runs, tensor.dim()))
    return tensor.pow(2).sum(dim=dims) if dims else tensor.pow(2)


def _expand(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Reshape a per-run ``value`` ([R,]) to broadcast against ``like`` ([R,] ...)."""
    return value.reshape(value.shape + (1,) * (like.dim() - value.dim()))


def gradient_flow(
    model: Any,
    data: Any,
    *,
    step: float,
    steps: int,
    method: str = "ngd",
    record_every: int | None = None,
    track_phi: bool = False,
    loss: str = "exp",
    progress: bool | None = None,
) -> Flow:
    """Follow the gradient flow ``d theta/dt = -grad L(theta)`` of ``model`` on ``data``.

    Spec: kq-nuclear-norm §3 (flow (1), discretisations (a)-(c)), §3.1 (``phi``), §8 (tracked state).

    Parameters
    ----------
    model : TokenSelectionModel
        ``Factored`` (flow on ``(K, Q)``), ``Diagonal`` (on ``(xi_k, xi_q)``) or ``Combined``; parameters may carry
        a runs axis ``R``. It is moved in place.
    data : TokenSelectionData or StackedData
        ``X`` ([R,] n, T, d), ``Z``, ``y``, ``v`` (the head is needed unless the model trains its own).
    step : float
        ``"ngd"``: arc length ``eta`` of each step (joint Frobenius norm over all parameters, per run);
        ``"gd"`` and ``"rk4"``: the time step ``dt``.
    steps : int
        Number of steps.
    method : {"ngd", "gd", "rk4"}, default="ngd"
        ``"ngd"``: normalised GD, the flow's path at unit speed (the default for directional limits, §3);
        ``"gd"``: explicit Euler ``theta <- theta - dt grad L``; ``"rk4"``: classical fourth-order Runge-Kutta in
        time (short horizons, identity checks).
    record_every : int, optional
        Record steps ``0, k, 2k, ...`` and the last; default only the first and last.
    track_phi : bool, default=False
        Integrate ``phi_il(t) = 2 int_0^t dL/ds_il dtau`` alongside the parameters (same scheme, same steps).
    loss : {"exp", "logistic"}, default="exp"
        The papers' theory uses ``"exp"``.
    progress : bool, optional
        Progress bar; default only on a terminal.

    Returns
    -------
    Flow

    Raises
    ------
    ValidationError
        On an unknown ``method`` or ``loss``, ``step <= 0``, negative ``steps`` or ``record_every < 1``.

    Notes
    -----
    With ``g = grad L(theta)`` (all trainable parameters) and ``w_il = dL/ds_il`` (:func:`logit_weights`):

    - ngd: ``theta <- theta - eta g / ||g||``, ``phi <- phi + 2 eta w / ||g||``, ``t <- t + eta / ||g||``;
    - gd: ``theta <- theta - dt g``, ``phi <- phi + 2 dt w``, ``t <- t + dt``;
    - rk4: the classical scheme on the joint state ``(theta, phi)``.

    For ``"ngd"`` the ratios ``g / ||g||`` and ``w / ||g||`` are formed from log-scaled mantissas, so they stay
    exact long after ``g`` underflows. With the diagonal model and initialisation (5), ``phi`` gives the closed
    form ``beta = omega_0^2 sinh(B phi)`` (:func:`closed_form_beta`) exactly for the flow, to ``O(dt^4)`` with
    RK4 and ``O(step)`` on the NGD and GD paths.

    Examples
    --------
    >>> from attnlab.data import scores_equal
    >>> from attnlab.models import Diagonal
    >>> data = scores_equal(n=2, L=3, d=4, seed=0)
    >>> flow = gradient_flow(Diagonal(4, omega=0.5), data, step=0.01, steps=10, method="rk4", track_phi=True)
    >>> tuple(flow.phi.shape)
    (2, 3)
    """
    check_in("method", method, METHODS)
    check_in("loss", loss, LOSSES)
    check_scalar("step", step, low=0.0, low_inclusive=False)
    check_scalar("steps", steps, kind=int, low=0)
    if record_every is not None:
        check_scalar("record_every", record_every, kind=int, low=1)
    if not callable(getattr(model, "gradients", None)):
        raise ValidationError(
            f"model must be a TokenSelectionModel (Combined, Factored or Diagonal), got {type(model).__name__}"
        )
    params = dict(model.named_parameters())
    if not params:
        raise ValidationError("model has no trainable parameters; nothing flows")

    def velocity(state: State) -> tuple[State, torch.Tensor]:
        """Log-scaled ``-grad L`` (and ``2 dL/ds`` for phi): mantissas and one log scale per run."""
        with torch.no_grad():
            for name, value in state.items():
                if name in params:
                    params[name].copy_(value)
            grads, _ = model.gradients(data, loss)
            scale = next(iter(grads.values())).log_scale
            out = {name: -g.mantissa for name, g in grads.items()}  # spec kq §3 (1): theta' = -grad L
            if track_phi:
                log_w, sign = logit_weights(data.X, data.Z, data.y, model.head(data.v), model.W, loss)
                exponent = log_w - _expand(scale, log_w)
                out["phi"] = 2.0 * sign * torch.exp(exponent)  # spec kq §3.1: phi' = -(2/n) e^{..} (Sigma gamma)_l
        return out, scale

    def rates(state: State) -> tuple[State, torch.Tensor]:
        """The time derivative (gd, rk4) or the unit-speed direction (ngd), and ``log dt`` per unit ``step``."""
        mant, scale = velocity(state)
        runs = scale.dim()
        norm = torch.sqrt(sum(_runs_sq(m, runs) for name, m in mant.items() if name in params))
        if method == "ngd":
            safe = torch.where(norm > 0, norm, torch.ones_like(norm))
            direction = {k: torch.where(_expand(norm, m) > 0, m / _expand(safe, m), 0.0) for k, m in mant.items()}
            return direction, -torch.log(norm) - scale  # spec kq §3 (b): dt = eta / ||grad L||
        return {k: m * torch.exp(_expand(scale, m)) for k, m in mant.items()}, torch.zeros_like(scale)

    def advance(state: State) -> tuple[State, torch.Tensor]:
        if method != "rk4":
            rate, log_dt = rates(state)
            return {k: state[k] + step * rate[k] for k in state}, log_dt
        k1, log_dt = rates(state)  # rk4: classical tableau (1/2, 1/2, 1; weights 1/6, 1/3, 1/3, 1/6)
        k2, _ = rates({k: state[k] + 0.5 * step * k1[k] for k in state})
        k3, _ = rates({k: state[k] + 0.5 * step * k2[k] for k in state})
        k4, _ = rates({k: state[k] + step * k3[k] for k in state})
        new = {k: state[k] + step / 6.0 * (k1[k] + 2 * k2[k] + 2 * k3[k] + k4[k]) for k in state}
        return new, log_dt

    with torch.no_grad():
        state: State = {name: p.detach().clone() for name, p in params.items()}
        runs_shape = model.gradients(data, loss)[1].shape
        if track_phi:
            state["phi"] = torch.zeros(runs_shape + tuple(data.X.shape[-3:-1]), dtype=torch.float64)
        log_time = torch.full(runs_shape, -math.inf, dtype=torch.float64)
        records: dict[str, list[torch.Tensor]] = {}

        def record(k: int) -> None:
            for name, value in state.items():
                if name in params:
                    params[name].copy_(value)
            _, log_risk = model.gradients(data, loss)
            snapshot = {"step": torch.tensor(k), "log_time": log_time, "log_loss": log_risk, "W": model.W.detach()}
            snapshot.update(state)
            for name, value in snapshot.items():
                records.setdefault(name, []).append(value.clone())

        from tqdm.auto import tqdm

        record(0)
        disable = None if progress is None else not progress
        for k in tqdm(range(1, steps + 1), desc=f"flow ({method})", disable=disable, leave=False):
            state, log_dt = advance(state)
            log_time = torch.logaddexp(log_time, math.log(step) + log_dt)
            if (record_every is not None and k % record_every == 0) or k == steps:
                record(k)
        for name, value in state.items():
            if name in params:
                params[name].copy_(value)
    path = {name: torch.stack(values) for name, values in records.items()}
    return Flow(model=model, phi=state.get("phi"), log_time=log_time, path=path)

