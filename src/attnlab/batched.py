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
from attnlab.models.functional import loss_gradients, score_gaps, token_scores

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
    grad_buffer = None  # each step's gradient is used up within the step, so the next one reuses its memory
    records: list[pd.DataFrame] = []
    from tqdm.auto import tqdm

    progress = options.get("progress")
    for step in tqdm(range(steps + 1), desc=f"batched {optimizer}", disable=None if progress else True, leave=False):
        W = _combine(param, params)
        gW, _, log_risk = loss_gradients(Xr, Zr, yr, vr, W, loss, gaps=gaps, out=grad_buffer)
        grad_buffer = gW.mantissa
        grads = _chain(param, params, gW.mantissa)
        log_norm = 0.5 * torch.log(sum(_per_run_sq(g) for g in grads.values())) + gW.log_scale
        if record_every is not None and (step % record_every == 0 or step == steps):
            records.append(_record(step, W, log_risk, log_norm, Xr, Zr, select_t, W_ref_t, options.get("bregman_p")))
        if step == steps:
            break
        params = update(params, grads, gW.log_scale, log_norm, log_risk)
        if not bool(torch.isfinite(sum(t.flatten(1).sum(dim=1) for t in params.values())).all()):
            bad = _non_finite_runs(params)
            if bool(bad.any()):
                runs = bad.nonzero().flatten().tolist()[:10]
                raise ValidationError(
                    f"runs {runs} became non-finite at step {step + 1} with optimizer {optimizer!r}; "
                    "lower lr or set max_step"
                )
    frame = pd.concat(records, ignore_index=True) if records else None
    return BatchedRun(W=_combine(param, params), frame=frame, params=params)


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
) -> Callable[..., dict[str, torch.Tensor]]:
    """The per-step update ``(params, grad mantissas, log_scale, log ||grad||, log L) -> params``."""
    state: dict[str, Any] = {}
    if optimizer in ("gd", "ngd"):
        beta = float(check_scalar("momentum", options.get("momentum", 0.0), low=0.0, high=1.0, high_inclusive=False))
        variant = check_in("momentum_variant", options.get("momentum_variant", "heavy_ball"), ("heavy_ball", "normalized_buffer"))
        cap = options.get("max_step")
        log_cap = None if cap is None else math.log(check_scalar("max_step", cap, low=0.0, low_inclusive=False))

        def step(params, grads, log_scale, log_norm, log_risk):
            if optimizer == "gd":
                log_coef = torch.log(lr) + log_scale  # spec ngd A1: W <- W - eta g
            else:
                log_coef = torch.log(lr) - (log_norm - log_scale)  # spec ngd A2: eta / ||g|| (on mantissas)
                if log_cap is not None:
                    log_coef = torch.minimum(log_coef, log_cap + log_scale)  # spec ngd A2: min(eta/||g||, cap)
            if beta == 0.0:  # p - coef g in one pass, in place: train owns params (cloned from the inputs)
                return {k: p.addcmul_(_expand(-torch.exp(log_coef), p), grads[k]) for k, p in params.items()}
            # spec ngd A4: m <- beta m + g (true gradient), W <- W - eta_t m  (or eta m/||m||)
            true = {k: _expand(torch.exp(log_scale), g) * g for k, g in grads.items()}
            m = state.setdefault("m", {k: torch.zeros_like(g) for k, g in true.items()})
            for k in m:
                m[k] = beta * m[k] + true[k]
            if variant == "normalized_buffer":
                coef = lr / torch.sqrt(sum(_per_run_sq(b) for b in m.values()))
            else:
                coef = torch.exp(log_coef - log_scale)
            return {k: p - _expand(coef, p) * m[k] for k, p in params.items()}

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

        def step(params, grads, log_scale, log_norm, log_risk):
            gap = log_risk.exp() - l_star
            if bool((gap < 0).any()):
                raise ValidationError("optimal_loss is above the current loss for some run; pass a smaller optimal_loss")
            eta = torch.minimum(gap / (c * torch.exp(2 * log_norm)), torch.tensor(cap_t, dtype=gap.dtype))  # spec ngd A3
            coef = eta * torch.exp(log_scale)
            return {k: p - _expand(coef, p) * grads[k] for k, p in params.items()}

        return step

    p = float(check_scalar("p", options.get("p", 2.0), low=1.0, low_inclusive=False))
    normalized = bool(options.get("normalized", True))
    q = p / (p - 1.0)

    def step(params, grads, log_scale, log_norm, log_risk):
        out = {}
        for k, w in params.items():
            g = grads[k]
            if normalized:  # spec md §4: G / (||G||_q + eps), per tensor, scale-free on mantissas
                g = g / (_expand(torch.linalg.vector_norm(g.flatten(1), ord=q, dim=1), g) + torch.finfo(g.dtype).eps)
            else:
                g = g * _expand(torch.exp(log_scale), g)
            dual = torch.sign(w) * w.abs() ** (p - 1) - _expand(lr, w) * g  # spec md §4: grad psi(W) - eta G
            out[k] = torch.sign(dual) * dual.abs() ** (1.0 / (p - 1))  # spec md §4: (grad psi)^{-1}
        return out

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
