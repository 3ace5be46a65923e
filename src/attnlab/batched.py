"""Many independent token-selection runs as one batched tensor program.

Spec: implicit-bias-ngd §4 (A1 GD, A2 NGD with cap, A3 Polyak, A4 momentum), mirror-descent-lp §4 (l_p mirror
descent, plain and dual-norm normalised), kq-nuclear-norm §3 (the same rules on (K, Q) and on the diagonal).

A sweep over seeds, initialisations, step sizes or data sets is a leading runs axis ``R`` on every array; step
sizes and normalisations are computed per run, so runs never interact. Gradients are the log-scaled, cancellation-
free ones of :func:`attnlab.models.functional.loss_gradients`: normalised rules use the mantissa (exact after the
softmax saturates), the others the plain value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar, check_tensor
from attnlab.losses import LOSSES, log_mean_loss
from attnlab.metrics import attention_margin, cosine, directional_bregman, selected_probability
from attnlab.models.functional import (
    attention_logits,
    logit_derivatives,
    logit_kernel,
    loss_gradients,
    outer_sum,
    score_gaps,
    token_scores,
)
from attnlab.optim import mirror_descent, normalized_step_size, polyak_step_size

__all__ = ["BatchedRun", "train", "PARAMETRIZATIONS", "OPTIMIZERS"]

PARAMETRIZATIONS = ("W", "KQ", "diag")
OPTIMIZERS = ("gd", "ngd", "polyak", "md")
_OPTIONS = {
    "gd": {"momentum"},
    "ngd": {"max_step", "momentum", "momentum_variant"},
    "polyak": {"max_step", "optimal_loss", "c"},
    "md": {"p", "normalized"},
}
_COMMON = {"K0", "Q0", "xi_k0", "xi_q0", "record_every", "W_ref", "select", "bregman_p", "progress"}


class BatchedRun(NamedTuple):
    """Result of :func:`train`.

    Attributes
    ----------
    W : torch.Tensor, shape (R, d, d)
        Final combined matrices.
    frame : pandas.DataFrame or None
        Tidy metrics (``run, step, loss, grad_norm, norm`` and, when asked, ``alignment``, ``opt_softmax``,
        ``margin``, ``bregman``) when ``record_every`` was given.
    params : dict of str to torch.Tensor
        Final parameters of the parametrisation (``W``; ``K, Q``; ``xi_k, xi_q``).
    """

    W: torch.Tensor
    frame: pd.DataFrame | None
    params: dict[str, torch.Tensor]


def _runs_tensor(name: str, value: Any, axes: str, R: int | None, sizes: dict[str, int]) -> torch.Tensor:
    """A tensor with axes ``axes`` or ``"R" + axes``; broadcast to R runs if given without the runs axis."""
    t = check_tensor(name, value)
    if t.dim() == len(axes):
        check_tensor(name, t, axes, sizes)
        return t if R is None else t.expand((R,) + tuple(t.shape))
    if t.dim() == len(axes) + 1:
        sizes_r = dict(sizes, R=R) if R is not None else dict(sizes)
        check_tensor(name, t, "R" + axes, sizes_r)
        sizes.update({k: v for k, v in sizes_r.items() if k != "R"})
        return t
    raise ValidationError(f"{name} has shape {tuple(t.shape)}, expected ({', '.join(axes)}) or (R, {', '.join(axes)})")


def _combine(param: str, params: dict[str, torch.Tensor]) -> torch.Tensor:
    if param == "W":
        return params["W"]
    if param == "KQ":
        return params["K"] @ params["Q"].transpose(-1, -2)  # spec kq §1: W = K Q^T
    return torch.diag_embed(params["xi_k"] * params["xi_q"])  # spec kq §3.1: W = Diag(xi_k * xi_q)


def _chain(param: str, params: dict[str, torch.Tensor], gW: torch.Tensor) -> dict[str, torch.Tensor]:
    if param == "W":
        return {"W": gW}
    if param == "KQ":
        return {"K": gW @ params["Q"], "Q": gW.transpose(-1, -2) @ params["K"]}  # spec kq §2
    g = torch.diagonal(gW, dim1=-2, dim2=-1)  # spec kq §3.1
    return {"xi_k": g * params["xi_q"], "xi_q": g * params["xi_k"]}


def _per_run_sq(t: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(t.flatten(1), dim=1).square()  # one pass over t (pow then sum takes two)


def _expand(coef: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return coef.reshape((-1,) + (1,) * (like.dim() - 1))


def train(
    X: Any,
    Z: Any,
    y: Any,
    v: Any,
    W0: Any = None,
    param: str = "W",
    optimizer: str = "ngd",
    lr: float | Any = 0.1,
    loss: str = "exp",
    steps: int = 1000,
    **options: Any,
) -> BatchedRun:
    """Train R independent runs of token-selection attention at once.

    Parameters
    ----------
    X : array-like, shape ([R,] n, T, d)
    Z : array-like, shape ([R,] n, d)
    y : array-like, shape ([R,] n)
    v : array-like, shape ([R,] d)
        Fixed head.
    W0 : array-like, shape ([R,] d, d), optional
        Initial combined matrix for ``param="W"`` (default zeros); ignored for the other parametrisations.
    param : {"W", "KQ", "diag"}
        Combined matrix; separate key and query ``K0, Q0`` of shape ``([R,] d, d_e)`` (options, required);
        diagonal ``xi_k0, xi_q0`` of shape ``([R,] d)`` (options, required).
    optimizer : {"gd", "ngd", "polyak", "md"}
        Spec implicit-bias-ngd A1 (``momentum``), A2/A4 (``max_step``, ``momentum``, ``momentum_variant`` in
        {"heavy_ball", "normalized_buffer"}), A3 (``max_step``, ``optimal_loss`` default ``L*``, ``c``);
        mirror-descent-lp §4 (``p`` > 1, ``normalized`` default True). The NGD and normalised-MD step is
        normalised per run, jointly over the parameters of the parametrisation (K and Q together).
    lr : float or array-like of shape (R,)
        Step size, per run if an array.
    loss : {"exp", "logistic"}
    steps : int
    **options
        Optimizer options above, initial parameters, and recording: ``record_every`` (int), ``W_ref``
        (``([R,] d, d)``, adds ``alignment`` and, with ``bregman_p``, ``bregman``), ``select`` (``([R,] n)``
        token indices, adds ``opt_softmax`` and ``margin``; default the optimal tokens), ``progress`` (bool).

    Returns
    -------
    BatchedRun

    Raises
    ------
    ValidationError
        On bad shapes, an unknown option (the message lists the valid ones), ``lr <= 0``, ``p <= 1``, a cap
        ``<= 0``, momentum outside [0, 1), or a run whose iterate became non-finite (the message names the run
        and step; a batched run cannot drop one run silently).
    """
    check_in("param", param, PARAMETRIZATIONS)
    check_in("optimizer", optimizer, OPTIMIZERS)
    check_in("loss", loss, LOSSES)
    check_scalar("steps", steps, kind=int, low=0)
    allowed = _OPTIONS[optimizer] | _COMMON
    unknown = set(options) - allowed
    if unknown:
        raise ValidationError(f"unknown option(s) {sorted(unknown)} for optimizer {optimizer!r}; valid: {sorted(allowed)}")

    sizes: dict[str, int] = {}
    R = _infer_runs(W0, options, param)
    Xr = _runs_tensor("X", X, "ntd", R, sizes)
    R = Xr.shape[0] if R is None and Xr.dim() == 4 else R
    if R is None:
        R = 1
        Xr = Xr.expand((1,) + tuple(Xr.shape))
    Zr = _runs_tensor("Z", Z, "nd", R, sizes)
    yr = _runs_tensor("y", y, "n", R, sizes)
    vr = _runs_tensor("v", v, "d", R, sizes)
    d = sizes["d"]
    params = _initial_params(param, W0, options, R, d)

    lr_t = check_tensor("lr", lr)
    lr_t = lr_t.expand(R).clone() if lr_t.dim() == 0 else check_tensor("lr", lr_t, "R", {"R": R})
    if bool((lr_t <= 0).any()):
        raise ValidationError(f"lr must be > 0 for every run, got min {float(lr_t.min()):g}")
    update = _make_update(optimizer, options, Xr, yr, vr, loss, lr_t)

    record_every = options.get("record_every")
    select = options.get("select")
    select_t = None
    if record_every is not None:
        check_scalar("record_every", record_every, kind=int, low=1)
        if select is None:
            select_t = token_scores(Xr, yr, vr).argmax(dim=-1)
        else:
            select_t = torch.as_tensor(select, dtype=torch.int64)
            select_t = select_t.expand(R, sizes["n"]) if select_t.dim() == 1 else select_t
    W_ref = options.get("W_ref")
    W_ref_t = None if W_ref is None else _runs_tensor("W_ref", W_ref, "de", R, {"d": d, "e": d})

    gaps = score_gaps(token_scores(Xr, yr, vr))  # fixed data: the W-independent part of every gradient, once
    n, T = sizes["n"], sizes["t"]
    if param == "W" and optimizer != "md" and n * T * T <= d * d:
        space: _Space = _KernelSpace(Xr, Zr, params["W"], gaps, loss)
    else:
        space = _ParamSpace(param, params, Xr, Zr, yr, vr, gaps, loss)
    records: list[pd.DataFrame] = []
    from tqdm.auto import tqdm

    progress = options.get("progress")
    for step in tqdm(range(steps + 1), desc=f"batched {optimizer}", disable=None if progress else True, leave=False):
        grads, log_scale, log_norm, log_risk = space.gradient()
        if record_every is not None and (step % record_every == 0 or step == steps):
            W = space.W()
            records.append(_record(step, W, log_risk, log_norm, Xr, Zr, select_t, W_ref_t, options.get("bregman_p")))
        if step == steps:
            break
        update(space, grads, log_scale, log_norm, log_risk)
        if not bool(torch.isfinite(sum(t.flatten(1).sum(dim=1) for t in space.state().values())).all()):
            bad = _non_finite_runs(space.state())
            if bool(bad.any()):
                runs = bad.nonzero().flatten().tolist()[:10]
                raise ValidationError(
                    f"runs {runs} became non-finite at step {step + 1} with optimizer {optimizer!r}; "
                    "lower lr or set max_step"
                )
    frame = pd.concat(records, ignore_index=True) if records else None
    return BatchedRun(W=space.W(), frame=frame, params=space.params())


class _Space:
    """Where the parameters of R runs live, how their gradients and norms are computed, and how they move.

    Every update rule of :func:`train` except mirror descent moves the parameters by ``-coef * direction`` with a
    per-run ``coef`` and a direction that is a gradient mantissa or a momentum buffer, so a space only needs
    :meth:`step`; mirror descent (primal parameters only) replaces them through :meth:`assign`.
    """

    def gradient(self) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mantissas, log_scale, log ||grad||, log L)`` at the current parameters."""
        raise NotImplementedError

    def norm(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-run Frobenius norm, in ``W``'s parameter space, of tensors laid out like the gradients."""
        raise NotImplementedError

    def step(self, coef: torch.Tensor, directions: dict[str, torch.Tensor]) -> None:
        """``theta <- theta - coef * direction`` per run, in place."""
        raise NotImplementedError

    def state(self) -> dict[str, torch.Tensor]:
        """The tensors the finiteness guard watches, each with the runs axis first."""
        raise NotImplementedError

    def W(self) -> torch.Tensor:  # noqa: N802 (the spec's symbol)
        raise NotImplementedError

    def params(self) -> dict[str, torch.Tensor]:
        return {"W": self.W()}


class _ParamSpace(_Space):
    """The parameters themselves (``W``; ``K, Q``; ``xi_k, xi_q``), one ``loss_gradients`` per step."""

    def __init__(self, param, params, X, Z, y, v, gaps, loss) -> None:
        self.param, self.theta, self.gaps, self.loss = param, params, gaps, loss
        self.data = (X, Z, y, v)
        self.buffer: torch.Tensor | None = None  # each gradient is used up within its step: reuse its memory

    def gradient(self):
        W = _combine(self.param, self.theta)
        gW, _, log_risk = loss_gradients(*self.data, W, self.loss, gaps=self.gaps, out=self.buffer)
        self.buffer = gW.mantissa
        grads = _chain(self.param, self.theta, gW.mantissa)
        return grads, gW.log_scale, torch.log(self.norm(grads)) + gW.log_scale, log_risk

    def norm(self, tensors):
        return torch.sqrt(sum(_per_run_sq(t) for t in tensors.values()))

    def step(self, coef, directions):
        for k, p in self.theta.items():  # in place, in one pass: train owns the parameters (cloned from the inputs)
            p.addcmul_(_expand(-coef, p), directions[k])

    def assign(self, new: dict[str, torch.Tensor]) -> None:
        self.theta = new

    def state(self):
        return self.theta

    def W(self):  # noqa: N802
        return _combine(self.param, self.theta)

    def params(self):
        return self.theta


class _KernelSpace(_Space):
    """``W = W_0 + sum_it omega_it x_it z_i^T``, trained through the ``nT`` coefficients ``omega`` of each run.

    Spec: implicit-bias-ngd §2-3.1. Gradient rules keep ``W - W_0`` in the span of the ``x_it z_i^T``, since every
    gradient is ``outer_sum(X, Z, dL/ds)``. With the logit kernel ``K`` (:func:`logit_kernel`), a step
    ``omega <- omega - c u`` moves the logits by ``-c K u`` and ``||outer_sum(X, Z, u)||_F^2 = u^T K u``, so a step
    costs one ``(nT) x (nT)`` product per run instead of the two ``d x d`` contractions on ``W`` (chosen when
    ``n T^2 <= d^2``); ``W`` is formed only when recorded and at the end. Same iterates as on ``W`` itself, up to
    rounding (the logits are updated, not recomputed from ``W``).
    """

    def __init__(self, X, Z, W0, gaps, loss) -> None:
        R, n, T = X.shape[0], X.shape[-3], X.shape[-2]
        shared = X.stride(0) == 0 and Z.stride(0) == 0  # one data set for every run: one kernel for all
        self.kernel = logit_kernel(X[0], Z[0]) if shared else logit_kernel(X, Z)  # ([R,] nT, nT), symmetric
        self.X, self.Z, self.W0, self.gaps, self.loss = X, Z, W0, gaps, loss
        self.logits = attention_logits(X, W0, Z).reshape(R, n * T)  # spec ngd §2: s = x^T W_0 z, then moved by K
        self.omega = torch.zeros(R, n * T, dtype=W0.dtype)
        self.moved: tuple[torch.Tensor, torch.Tensor] | None = None  # (u, K u) of the last gradient

    def _apply_kernel(self, u: torch.Tensor) -> torch.Tensor:
        """``K u`` per run, shape (R, nT): ``u^T K`` as one (1, nT) x (nT, nT) row product per run (K is symmetric;
        the row form is ~3x faster than the column one in MKL), or one GEMM when the runs share K."""
        if self.kernel.dim() == 2:
            return u @ self.kernel
        return torch.bmm(u[:, None, :], self.kernel)[:, 0]

    def gradient(self):
        R = self.omega.shape[0]
        shape = self.gaps.gamma.shape[-2:]
        derivatives = logit_derivatives(self.logits.view((R,) + shape), self.gaps, self.loss)
        weights = derivatives.scaled()  # spec ngd §3.1: dL/ds = mantissa e^{log_scale}
        u = weights.mantissa.reshape(R, -1)
        Ku = self._apply_kernel(u)
        self.moved = (u, Ku)
        sq = (u * Ku).sum(dim=-1).clamp_(min=0.0)  # ||grad||_F^2 = u^T K u (>= 0 up to rounding)
        return {"omega": u}, weights.log_scale, 0.5 * torch.log(sq) + weights.log_scale, derivatives.log_risk

    def norm(self, tensors):
        u = tensors["omega"]
        return torch.sqrt((u * self._apply_kernel(u)).sum(dim=-1).clamp_(min=0.0))

    def step(self, coef, directions):
        u = directions["omega"]
        Ku = self.moved[1] if self.moved is not None and u is self.moved[0] else self._apply_kernel(u)
        c = -coef[:, None]
        self.omega.addcmul_(c, u)
        self.logits.addcmul_(c, Ku)  # spec ngd §2: the logits of W - c outer_sum(u) are s - c K u

    def state(self):
        return {"omega": self.omega, "logits": self.logits}

    def W(self):  # noqa: N802
        R = self.omega.shape[0]
        return self.W0 + outer_sum(self.X, self.Z, self.omega.view((R,) + self.gaps.gamma.shape[-2:]))


def _non_finite_runs(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """Runs with a non-finite entry, shape (R,) bool.

    The caller first checks one sum per run (one pass over the parameters): a sum with an inf or nan term is never
    finite, so only a non-finite sum, which may also be an overflow of finite terms, needs this entrywise check.
    """
    return ~torch.stack([torch.isfinite(t).flatten(1).all(dim=1) for t in params.values()]).all(dim=0)


def _infer_runs(W0: Any, options: dict[str, Any], param: str) -> int | None:
    first = {"W": W0, "KQ": options.get("K0"), "diag": options.get("xi_k0")}[param]
    if first is None:
        return None
    t = torch.as_tensor(first)
    expected = 2 if param != "diag" else 1
    return int(t.shape[0]) if t.dim() == expected + 1 else None


def _initial_params(param: str, W0: Any, options: dict[str, Any], R: int, d: int) -> dict[str, torch.Tensor]:
    if param == "W":
        if W0 is None:
            return {"W": torch.zeros(R, d, d, dtype=torch.float64)}
        return {"W": _runs_tensor("W0", W0, "de", R, {"d": d, "e": d}).clone()}
    names = ("K0", "Q0") if param == "KQ" else ("xi_k0", "xi_q0")
    missing = [k for k in names if options.get(k) is None]
    if missing:
        raise ValidationError(f"param={param!r} needs initial values {list(names)}; missing {missing}")
    axes = "de" if param == "KQ" else "d"
    sizes = {"d": d}
    return {k[:-1]: _runs_tensor(k, options[k], axes, R, sizes).clone() for k in names}


def _make_update(
    optimizer: str, options: dict[str, Any], X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, loss: str, lr: torch.Tensor
) -> Callable[..., None]:
    """The per-step update ``(space, grad mantissas, log_scale, log ||grad||, log L) -> None`` (moves ``space``).

    The step sizes are those of :mod:`attnlab.optim` (``normalized_step_size``, ``polyak_step_size``,
    ``mirror_descent``), applied to log-scaled gradients: a coefficient on the mantissa stays exact after the
    gradient itself underflows.
    """
    if optimizer in ("gd", "ngd"):
        beta = float(check_scalar("momentum", options.get("momentum", 0.0), low=0.0, high=1.0, high_inclusive=False))
        variant = check_in("momentum_variant", options.get("momentum_variant", "heavy_ball"), ("heavy_ball", "normalized_buffer"))
        cap = options.get("max_step")
        cap = None if cap is None else float(check_scalar("max_step", cap, low=0.0, low_inclusive=False))
        buffers: dict[str, torch.Tensor] = {}

        def step(space, grads, log_scale, log_norm, log_risk):
            if beta == 0.0:  # coefficients of the mantissas: e^{log_scale} enters only through the cap
                if optimizer == "gd":
                    coef = lr * torch.exp(log_scale)  # spec ngd A1: W <- W - eta g
                else:  # spec ngd A2: min(eta / ||g||, cap) g = min(eta / ||m||, cap e^s) m
                    scaled_cap = None if cap is None else cap * torch.exp(log_scale)
                    coef = normalized_step_size(lr, torch.exp(log_norm - log_scale), scaled_cap)
                space.step(coef, grads)
                return
            # spec ngd A4: m <- beta m + g (true gradient), W <- W - eta_t m  (eta_t from ||g||, or from ||m||)
            scale = torch.exp(log_scale)
            for k, g in grads.items():
                m = buffers.get(k)
                buffers[k] = _expand(scale, g) * g if m is None else m.mul_(beta).addcmul_(_expand(scale, g), g)
            if optimizer == "gd":
                coef = lr
            else:
                if variant == "heavy_ball":  # eta / ||g|| = eta e^{-s} / ||m||: finite where ||g|| underflows
                    coef = normalized_step_size(lr * torch.exp(-log_scale), torch.exp(log_norm - log_scale), cap)
                else:
                    coef = normalized_step_size(lr, space.norm(buffers), cap)
            space.step(coef, buffers)

        return step

    if optimizer == "polyak":
        c = float(check_scalar("c", options.get("c", 1.0), low=0.0, low_inclusive=False))
        cap = options.get("max_step")
        cap_t = math.inf if cap is None else float(check_scalar("max_step", cap, low=0.0, low_inclusive=False))
        if options.get("optimal_loss") is None:
            # spec ngd A3: L* = (1/n) sum_i l(gamma_{i,opt_i}) (softmax put on the optimal token)
            l_star = log_mean_loss(token_scores(X, y, v).amax(dim=-1), loss).exp()
        else:
            l_star = check_tensor("optimal_loss", options["optimal_loss"]).expand(X.shape[0])

        def step(space, grads, log_scale, log_norm, log_risk):
            sq = torch.exp(2 * (log_norm - log_scale))  # ||mantissa||^2
            space.step(polyak_step_size(log_risk.exp(), l_star, sq, max_lr=cap_t, c=c, log_scale=log_scale), grads)

        return step

    p = float(check_scalar("p", options.get("p", 2.0), low=1.0, low_inclusive=False))
    normalized = bool(options.get("normalized", True))

    def step(space, grads, log_scale, log_norm, log_risk):
        names = list(grads)
        # spec md §4: normalised on the mantissas (scale-free), plain on the true gradient
        G = [grads[k] if normalized else _expand(torch.exp(log_scale), grads[k]) * grads[k] for k in names]
        new = mirror_descent([space.theta[k] for k in names], G, lr=lr, p=p, normalized=normalized, run_dims=1)
        space.assign(dict(zip(names, new)))

    return step


def _record(step, W, log_risk, log_norm, X, Z, select, W_ref, bregman_p) -> pd.DataFrame:
    cols: dict[str, torch.Tensor] = {
        "loss": log_risk.exp(),
        "grad_norm": log_norm.exp(),
        "norm": torch.linalg.matrix_norm(W, "fro"),
        "opt_softmax": selected_probability(X, Z, W, select),
        "margin": attention_margin(X, Z, W, select),
    }
    if W_ref is not None:
        cols["alignment"] = cosine(W, W_ref)
        if bregman_p is not None:
            cols["bregman"] = directional_bregman(W_ref, W, float(bregman_p))
    frame = pd.DataFrame({k: v.detach().numpy() for k, v in cols.items()})
    frame.insert(0, "step", step)
    frame.insert(0, "run", range(len(frame)))
    return frame
