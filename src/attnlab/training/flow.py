"""Gradient flow of a token-selection model: the normalised-GD path, small-step GD, and fixed-step RK4.

Spec: kq-nuclear-norm §3 (gradient flow (1) on ``(K, Q)``; discretisations (a) GD, (b) normalised GD -- the
default, same path at unit speed -- and (c) RK4), §3.1 (integrated weights ``phi(t)``, closed form Lemma A.1),
§4 (KKT multipliers ``lambda(t) = phi(t) / ln mu(t)``), §8 (keep ``phi`` as tracked state).

The flow moves every trainable parameter of a :class:`attnlab.models.TokenSelectionModel` (``Factored`` ``(K, Q)``,
``Diagonal`` ``(xi_k, xi_q)``, or ``Combined`` ``W``) along ``-grad L``. It is a front door to the training engine
(:func:`attnlab.training.engine.fit`, rules of :mod:`attnlab.training.integrators`): log-scaled, cancellation-free gradients,
so the normalised path stays exact after the softmax saturates. Parameters may carry a leading runs axis ``R``;
each run is normalised by its own joint gradient norm, so runs are independent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from attnlab._validation import (
    ValidationError,
    check_bool,
    check_in,
    check_runs,
    check_scalar,
    check_token_data,
    model_as_float64,
)
from attnlab.losses import LOSSES
from attnlab.metrics import Metric, as_metrics
from attnlab.metrics.protocol import refuse_taken
from attnlab.models.functional import attention_logits, logit_derivatives, score_gaps, token_scores
from attnlab.training.callbacks import Record
from attnlab.training.engine import fit
from attnlab.training.integrators import METHODS, flow_rule
from attnlab.training.model import module_problem
from attnlab.training.recording import Recorder
from attnlab.training.result import TrainingResult

__all__ = [
    "METHODS",
    "closed_form_beta",
    "constraint_vectors",
    "gradient_flow",
    "kkt_multipliers",
    "logit_weights",
]


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
        ``"exp"``: ``l(z) = e^{-z}`` of the margin ``z = y f``; ``"logistic"``: ``log(1 + e^{-z})``.

    Returns
    -------
    log_abs, sign : torch.Tensor, shape ([R,] n, T)

    Notes
    -----
    ``dL/ds_il = (l'_i / n) sigma_il c_il`` with ``c_il = sum_tau sigma_i tau (gamma_il - gamma_i tau)``, so
    ``grad_W L = sum_il (dL/ds_il) x_il z_i^T`` -- the same weights as in
    :func:`attnlab.models.functional.loss_gradients` (both come from
    :func:`attnlab.models.logit_derivatives.logit_derivatives`). Under Assumption 2 the weight is positive on every
    non-selected token (raising a wrong token's logit raises the loss), hence ``phi >= 0`` there.
    """
    logits = attention_logits(X, W, Z).movedim(-1, 0).contiguous()  # token-first, as logit_derivatives takes them
    derivatives = logit_derivatives(logits, score_gaps(token_scores(X, y, v)), loss)
    return derivatives.log_abs.movedim(0, -1), derivatives.sign.movedim(
        0, -1
    )  # spec kq §3.1: dL/ds = -(|l'|/n) sigma c


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

    Returns
    -------
    torch.Tensor, shape ([R,] d)
        The diagonal weights ``beta(t)`` of the closed form.
    """
    B_phi = torch.einsum("...ntd,...nt->...d", B, phi)
    return omega0**2 * torch.sinh(B_phi)  # spec kq §3.1 Lemma A.1


def kkt_multipliers(phi: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """``lambda_il(t) = phi_il(t) / ln mu(t)``, shape ``([R,] n, T)``; ``nan`` where ``mu <= 1``.

    Spec: kq-nuclear-norm §4 (multiplier estimate of the proof of Theorem 4.1).

    Parameters
    ----------
    phi : torch.Tensor, shape ([R,] n, T)
        Integrated weights from :func:`gradient_flow` with ``track_phi=True``.
    mu : torch.Tensor, shape ([R,])
        Attention margin ``mu(W_t)`` (:func:`attnlab.metrics.attention_margin`).

    Returns
    -------
    torch.Tensor, shape ([R,] n, T)
        The multiplier estimates ``lambda_il(t)``; ``nan`` for the runs whose margin is at most 1.
    """
    log_mu = torch.where(mu > 1, torch.log(mu.clamp(min=1.0)), torch.nan)
    return phi / log_mu[..., None, None]  # spec kq §4: lambda = phi / ln mu


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
    callbacks: Iterable[Any] = (),
    metrics: Sequence[Metric] | Mapping[str, Any] = (),
) -> TrainingResult:
    """Follow the gradient flow ``d theta/dt = -grad L(theta)`` of ``model`` on ``data``.

    Spec: kq-nuclear-norm §3 (flow (1), discretisations (a)-(c)), §3.1 (``phi``), §8 (tracked state).

    Parameters
    ----------
    model : TokenSelectionModel
        ``Factored`` (flow on ``(K, Q)``), ``Diagonal`` (on ``(xi_k, xi_q)``), ``Combined``, or any subclass with a
        ``parametrization``; parameters may carry a runs axis ``R``. It is moved in place; parameters with
        ``requires_grad=False`` stay fixed (the flow of the others). A float32 model is converted to float64.
    data : TokenSelectionData or StackedData
        ``X`` ([R,] n, T, d), ``Z``, ``y``, ``v`` (the head is needed unless the model trains its own).
    step : float
        ``"ngd"``: arc length ``eta`` of each step (joint Frobenius norm over all parameters, per run);
        ``"ngd-relative"``: ``eta`` of the arc length ``eta (1 + ||theta||)``; ``"gd"`` and ``"rk4"``: the time step
        ``dt``.
    steps : int
        Number of steps.
    method : {"ngd", "ngd-relative", "gd", "rk4"}, default="ngd"
        ``"ngd"``: normalised GD, the flow's path at unit speed (the default for directional limits, §3);
        ``"ngd-relative"``: the same path with steps of arc length ``eta (1 + ||theta||)`` (ours; ``||theta||`` the
        joint norm of all the parameters, per run), so ``ln ||theta||`` grows by up to ``eta`` a step and a slow
        directional limit can be followed to margins far beyond a fixed arc length's (``ln mu`` in the hundreds);
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
    callbacks : iterable of Callback or callable
        See :mod:`attnlab.training.callbacks`.
    metrics : sequence of Metric, or mapping of str to callable
        Extra columns: functions of the state (:class:`attnlab.metrics.Metric`: ``"W"``, the model's tensors, the
        data, ``"rule_state"``).

    Returns
    -------
    TrainingResult
        ``model`` (moved to the end of the path), ``frame`` (one row per recorded (run, step): ``run, step, loss,
        log_loss, grad_norm, norm, log_time, time``; ``norm`` is ``||W||_F``, ``time`` is ``exp(log_time)``, ``inf``
        past 1e308 on very long NGD paths), ``status`` and ``last_step`` per run, and in ``extra`` (also read as
        attributes): ``phi`` (shape ([R,] n, T): the integrated weights at the end with ``track_phi=True``, else
        None), ``log_time`` (shape ([R,]): the flow time covered, ``log t``; for ``"ngd"`` each step of length
        ``eta`` takes ``eta / ||grad L||``) and ``path``: snapshots at the recorded steps, stacked along a leading
        axis ``S``: ``"step"`` (S,), ``"log_time"`` (S, [R]), ``"log_loss"`` (S, [R]; NaN after a run diverged),
        ``"W"`` (S, [R,] d, d), one entry per parameter name (e.g. ``"K"``, ``"Q"`` or ``"xi_k"``, ``"xi_q"``) and
        ``"phi"`` (S, [R,] n, T) when tracked.

    Raises
    ------
    ValidationError
        On an unknown ``method`` or ``loss``, ``step <= 0``, negative ``steps`` or ``record_every < 1``.

    Notes
    -----
    A front door to :func:`attnlab.training.engine.fit` with the rules of :mod:`attnlab.training.integrators`; a run
    whose loss turns non-finite stops alone at its last finite state (the one divergence policy). With ``g = grad L(theta)`` and
    ``w_il = dL/ds_il`` (:func:`logit_weights`):

    - ngd: ``theta <- theta - eta g / ||g||``, ``phi <- phi + 2 eta w / ||g||``, ``t <- t + eta / ||g||``;
    - ngd-relative: the same with ``eta (1 + ||theta||)`` in place of ``eta``;
    - gd: ``theta <- theta - dt g``, ``phi <- phi + 2 dt w``, ``t <- t + dt``;
    - rk4: the classical scheme on the joint state ``(theta, phi)``.

    For ``"ngd"`` and ``"ngd-relative"`` the ratios ``g / ||g||`` and ``w / ||g||`` are formed from log-scaled
    mantissas, so they stay exact long after ``g`` underflows. With the diagonal model and initialisation (5), ``phi`` gives the closed
    form ``beta = omega_0^2 sinh(B phi)`` (:func:`closed_form_beta`) exactly for the flow, to ``O(dt^4)`` with
    RK4 and ``O(step)`` on the NGD and GD paths.

    Examples
    --------
    >>> from attnlab.data import scores_equal
    >>> from attnlab.models import Diagonal
    >>> data = scores_equal(n=2, T=3, d=4, seed=0)
    >>> flow = gradient_flow(Diagonal(4, omega=0.5), data, step=0.01, steps=10, method="rk4", track_phi=True)
    >>> tuple(flow.phi.shape)
    (2, 3)
    """
    check_in("method", method, METHODS)
    check_in("loss", loss, LOSSES)
    check_scalar("step", step, low=0.0, low_inclusive=False)
    steps = check_scalar("steps", steps, kind=int, low=0)
    if record_every is not None:
        record_every = check_scalar("record_every", record_every, kind=int, low=1)
    track_phi = check_bool("track_phi", track_phi)
    if progress is not None:
        progress = check_bool("progress", progress)
    check_token_data("data", data)
    if getattr(model, "parametrization", None) is None or not callable(getattr(model, "tensors", None)):
        raise ValidationError(
            f"model must be a TokenSelectionModel (Combined, Factored or Diagonal), got {type(model).__name__}"
        )
    model_as_float64(model)
    names = {id(p): n for n, p in model.named_parameters()}
    tensors = dict(model.tensors())
    if model.train_head:
        tensors["v"] = model.v
    frozen = {k for k, t in tensors.items() if id(t) not in names or not t.requires_grad}
    if len(frozen) == len(tensors):
        raise ValidationError(
            "model has no trainable parameters (all have requires_grad=False); nothing flows. Set requires_grad=True "
            "on the parameters that should move"
        )
    R = check_runs(model, data, broadcast=False)
    batched = model.W.dim() == 3
    runs = (lambda t: t.detach().clone()) if batched else (lambda t: t.detach().unsqueeze(0).clone())
    clock: dict[str, list[torch.Tensor]] = {}

    def snapshot(record: Record) -> None:
        state = record.state["rule_state"][0]  # a copy, this step's (the loop copies the state for callbacks)
        for key, value in state.items():
            clock.setdefault(key, []).append(value)

    metrics = as_metrics(metrics)
    refuse_taken(metrics, _CLOCK)
    rule = flow_rule(method, step, track_phi, R, tuple(data.X.shape[-3:-1]))
    result = fit(
        module_problem(model, data, R, loss),
        model.parametrization,
        {k: runs(t) for k, t in tensors.items()},
        steps,
        rule,
        record_every=record_every,
        recorder=Recorder(metrics={**_CLOCK, **metrics}, keep_iterates=True),
        callbacks=[snapshot, *callbacks],
        progress=progress,
        desc=f"flow ({method})",
        trainable={k: torch.zeros((), dtype=torch.bool) for k in frozen},
    )
    with torch.no_grad():
        for k, t in tensors.items():
            t.copy_(result.params[k] if batched else result.params[k][0])
    final = {k: v if batched else v[0] for k, v in result.rule_state[0].items()}
    path = _path(result, clock, {names.get(id(t), k): k for k, t in tensors.items()}, R, batched)
    result.model, result.extra = model, {"phi": final.get("phi"), "log_time": final["log_time"], "path": path}
    return result


def _path(
    result: TrainingResult, clock: dict[str, list[torch.Tensor]], names: dict[str, str], R: int, batched: bool
) -> dict[str, torch.Tensor]:
    """The snapshots at the recorded steps (see :func:`gradient_flow`'s Returns), each tensor under the name of
    its module parameter (``names``: parameter name -> tensor name)."""
    iterates = result.iterates
    squeeze = (lambda t: t) if batched else (lambda t: t[:, 0])  # no runs axis in, none out
    log_loss = result.frame.pivot(index="step", columns="run", values="log_loss").reindex(
        index=iterates["step"].tolist(), columns=range(R)
    )  # NaN after a run diverged
    path = {
        "step": iterates["step"],
        "log_loss": squeeze(torch.tensor(log_loss.to_numpy())),
        "W": squeeze(iterates["W"]),
    }
    path["log_time"] = squeeze(torch.stack(clock["log_time"]))
    for name, k in names.items():
        path[name] = squeeze(iterates[k])
    if "phi" in clock:
        path["phi"] = squeeze(torch.stack(clock["phi"]))
    return path


# the flow's clock, log t and t, read off the integrator's state at each record (columns of the frame)
_CLOCK = {
    "log_time": lambda state: state["rule_state"][0]["log_time"],
    "time": lambda state: state["rule_state"][0]["log_time"].exp(),
}
