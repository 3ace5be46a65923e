"""What the kq-nuclear experiments share: the paper's initialisation (5), the configs' base and its
validation, the limit fits of the distance to the l1 solution (X2's l1-optimum, X5's l1-reached) and of the KKT
residual, and the falsifiers' wrong mechanisms (the diagonal models the whole-model swaps put in are
:mod:`attnlab.models.diagonal`).

Spec: kq-nuclear-norm §3.1 (initialisation (5)), §2 (the chain rule of ``W = K Q^T``), §7.2 (``beta`` trained
directly; the rate of the zero entries [D]), §7.5 (the KKT residual's rate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_distinct, check_scalar
from attnlab.models import Combined, Diagonal, DiagonalW, Factored
from attnlab.models.functional import LogScaled
from attnlab.training.flow import constraint_vectors
from attnlab.verify import Check, Claim, Falsifier, observation

PAPER = "kq-nuclear-norm"
SOURCE = f"docs/theory/{PAPER}.md"  # what checks cite


def diagonal_init(omegas: tuple[float, ...], d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Initialisation (5) for each omega: ``xi_k = sqrt(2) omega 1``, ``xi_q = 0``; returns ``omega0 (R, d)`` too."""
    omega0 = torch.tensor(omegas, dtype=torch.float64)[:, None].expand(len(omegas), d).clone()
    return omega0, math.sqrt(2.0) * omega0, torch.zeros_like(omega0)  # spec kq §3.1 (5)


def revised_size(claim: Claim, number: int, name: str, quick: bool) -> Any:
    """The value of config field ``name`` that revision ``number`` of ``claim`` ran with, at the quick or full size."""
    return claim.revisions[number - 1].sizes[name]["quick" if quick else "full"]


def distance_limit(rows: pd.DataFrame) -> float:
    """The limit ``a`` of ``dist_l1 = a + b / ln mu`` over the second half of one K,Q run's records with ``mu > 1``.

    Spec: kq-nuclear-norm §7.2: the approach X2's l1-optimum and X5's l1-reached read until 2026-11-28 (their
    revisions 4 and 3); the zero entries fall faster, like a power of ``mu`` (:func:`rate_limit`).

    Parameters
    ----------
    rows : pandas.DataFrame
        One run's records: ``step``, ``mu`` and ``dist_l1`` (the max-entry distance of ``beta_hat`` to the l1-SVM
        solution).

    Returns
    -------
    float
        The intercept of :func:`residual_limit` on those records.
    """
    return residual_limit(*late_distances(rows))[0]  # the second half of the records with mu > 1


def zero_entry_rate(data, beta: torch.Tensor, duals: torch.Tensor, zero_tol: float) -> float:
    """The rate ``kappa`` at which ``beta_hat``'s entries outside the l1 solution's support fall, in powers of ``mu``.

    Spec: kq-nuclear-norm §7.2 [D]: along the flow ``beta = omega0^2 sinh(B phi)`` with ``phi -> lambda* ln mu``,
    so an entry ``j`` that is zero in the solution is ``beta_hat_j ~ (omega0^2 / mu)^(1 - |g_j|)``, ``g = B
    lambda*`` the dual certificate (``|g_j| = 1`` on the support, ``< 1`` off it); the slowest sets the rate.

    Parameters
    ----------
    data : TokenSelectionData
        The data set of the l1 program.
    beta : torch.Tensor, shape (d,)
        Its solution (``attention_svm(data, norm="l1-diag").beta``).
    duals : torch.Tensor, shape (n, T)
        Its multipliers ``lambda*`` (the same result's ``duals``).
    zero_tol : float
        An entry below ``zero_tol`` times the largest is a zero entry (the reading's ``zero_tol``).

    Returns
    -------
    float
        ``1 - max |g_j|`` over the zero entries; 1.0 when the solution has no zero entry.
    """
    g = torch.einsum("nl,nld->d", duals, constraint_vectors(data.X, data.Z, data.select))  # spec kq §4: g = B lambda
    zero = beta.abs() <= zero_tol * beta.abs().max()
    return 1.0 - float(g.abs()[zero].max()) if bool(zero.any()) else 1.0


KAPPA_MIN = 0.15  # ours: below it the l1 limit rows' fit extrapolates past five windows (resolvable_remark)


def resolvable_remark(kappa: float, subset: str, statistic: str = "kappa", spread: str = "") -> Check:
    """X2's and X5's remark of ours on the data: the l1 program's rate ``kappa`` (:func:`zero_entry_rate`) against
    :data:`KAPPA_MIN`, above which the limit rows' fit ``a + b mu^-kappa`` extrapolates less than five windows.

    Spec: kq-nuclear-norm §7.2 [D] (the zero entries fall like ``(omega0^2 / mu)^kappa``). An exploration row, not a
    property: the threshold is ours, chosen knowing seeds 0, 2 and 4, and is neither necessary nor sufficient for the
    limit rows (x5 at seed 1 passes at kappa 0.0064; x5 at seed 10, gap 6, fails at 0.200), so it never fails a run.

    Parameters
    ----------
    kappa : float
        The rate measured (X5: the smallest over the gaps where A3 holds).
    subset : str
        The data sets it was read on.
    statistic : str, default="kappa"
        How several data sets were reduced to ``kappa``.
    spread : str, default=""
        Further text for the row (the rates per gap).

    Returns
    -------
    Check
        ``kind="exploration"``: agrees when ``kappa >= KAPPA_MIN``.
    """
    return observation(
        "the data's l1 program is not nearly degenerate (kappa = 1 - max |g_j| off the l1 solution's support, the "
        f"zero entries' rate), so a finite path can resolve Thm 4.1's limit ({statistic}; {subset})",
        f"kappa >= {KAPPA_MIN:g}",
        f"{kappa:.4g}" + (f"; {spread}" if spread else ""),
        kappa >= KAPPA_MIN,
        f"{SOURCE} §7.2",
        tolerance=f"kappa_min = {KAPPA_MIN:g} (ours): the limit rows fit over the second half of the records, whose "
        "ln mu spans about 1.3; the intercept lies 1 / (exp(1.3 kappa) - 1) window-drops below the last distance, "
        "4.6 at kappa_min. Chosen knowing seeds 0, 2 and 4; a remark, not a hypothesis of the rows",
        result="003:Thm4.1",
        ours=True,
    )


def last_distance_note(dist: float, atol: float) -> str:
    """The last distance beside a limit row's intercept, and whether the intercept is an extrapolation past it."""
    if dist <= atol:
        return f"the last distance {dist:.3g}"
    return f"the last distance {dist:.3g} is {dist / atol:.2g} x atol: the intercept is extrapolated below it"


def rate_limit(log_mu: np.ndarray, dist: np.ndarray, kappa: float) -> tuple[float, float]:
    """Least-squares fit ``dist = a + b mu^-kappa``: the distance's limit ``a`` and its coefficient ``b``.

    Spec: kq-nuclear-norm §7.2 [D] (the distance to the l1 solution falls like ``(omega0^2 / mu)^kappa``).

    Parameters
    ----------
    log_mu : numpy.ndarray, shape (N,)
        ``ln mu`` at the records, at least two distinct values.
    dist : numpy.ndarray, shape (N,)
    kappa : float
        The rate (:func:`zero_entry_rate`), > 0.

    Returns
    -------
    a, b : float
        Intercept (the limit as ``mu -> infinity``) and coefficient of ``mu^-kappa``.
    """
    x = np.exp(-kappa * np.asarray(log_mu, dtype=float))
    b, a = np.polyfit(x, np.asarray(dist, dtype=float), 1)
    return float(a), float(b)


def late_distances(rows: pd.DataFrame, column: str = "dist_l1") -> tuple[np.ndarray, np.ndarray]:
    """``ln mu`` and a distance (``dist_l1``) over the second half of one run's records with ``mu > 1``: the window
    of the limit readings (X2's l1-optimum and l2-optimum, X5's l1-reached).

    Spec: kq-nuclear-norm §7.2 [D] (the limit of the distance to the l1 solution as ``mu -> infinity``).

    Parameters
    ----------
    rows : pandas.DataFrame
        One run's records: ``step``, ``mu`` and ``column``.
    column : str, default="dist_l1"
        The distance column (``"dist_l2"`` for beta trained directly).

    Returns
    -------
    log_mu, dist : numpy.ndarray, shape (N,)
        ``ln mu`` and the distance at those records, in step order.

    Raises
    ------
    ValidationError
        When no record has ``mu > 1`` (a short run whose margin passes 1 late), naming the settings to change.
    """
    rows = rows[rows["mu"] > 1].sort_values("step")
    late = rows.iloc[len(rows) // 2 :]
    if late.empty:  # mu passes 1 only late in a short run (a run with one such record still fits, degenerately)
        raise ValidationError(
            f"the limit readings fit the second half of the records with margin mu > 1, but this run has "
            f"{len(rows)} such records; run longer (raise steps, or lower record_every) so that mu passes 1 early"
        )
    return np.log(late["mu"].to_numpy()), late[column].to_numpy()


def residual_limit(log_mu: np.ndarray, residual: np.ndarray) -> tuple[float, float]:
    """Least-squares fit ``residual = a + b / ln mu``: the residual's limit ``a`` and its ``1 / ln mu`` coefficient.

    Spec: kq-nuclear-norm §7.5 (the approximate-KKT residual of ``lambda = phi / ln mu`` is ``O(1 / ln mu)``).

    Parameters
    ----------
    log_mu : numpy.ndarray, shape (N,)
        ``ln mu`` at the records (all > 0), at least two distinct values.
    residual : numpy.ndarray, shape (N,)

    Returns
    -------
    a, b : float
        Intercept (the limit as ``mu -> infinity``) and slope in ``1 / ln mu``.
    """
    b, a = np.polyfit(1.0 / np.asarray(log_mu, dtype=float), np.asarray(residual, dtype=float), 1)
    return float(a), float(b)


def check_positive(config, names: tuple[str, ...]) -> None:
    for name in names:
        check_scalar(name, getattr(config, name), low=0.0, low_inclusive=False)


def check_ints(config, names: tuple[str, ...]) -> None:
    """Integers >= 1; ``seed`` >= 0, ``T`` and ``d`` >= 2 (a token besides the optimal one, a coordinate besides the
    head's: the data generators refuse fewer)."""
    lows = {"seed": 0, "T": 2, "d": 2}
    for name in names:
        check_scalar(name, getattr(config, name), kind=int, low=lows.get(name, 1))


def check_limit_records(config) -> None:
    """Refuse a run whose records cannot fill the limit rows' window (X2's and X5's, :func:`late_distances`).

    The window is the second half of the records with ``mu > 1``, and a line through it needs >= 2 of them, so the
    run needs >= 3 records after step 0 (``W_0 = 0`` has ``mu = 0``): ``steps > 2 record_every``. Necessary only:
    a run whose first records still have ``mu <= 1`` has fewer (ours).
    """
    if config.steps <= 2 * config.record_every:
        raise ValidationError(
            f"steps == {config.steps}, must be > 2 x record_every == {2 * config.record_every}: the limit rows fit a "
            "line to the second half of the records with mu > 1, >= 2 of them, so the run needs >= 3 records after "
            "step 0, whose W = 0 has mu = 0 (ours)"
        )


def check_omegas(omegas: tuple[float, ...]) -> None:
    if not omegas or not all(0 < w < math.inf for w in omegas):
        raise ValidationError(
            f"omegas must be a non-empty tuple of positive, finite scales, got {omegas}; e.g. (0.1, 1.0)"
        )
    check_distinct("omegas", omegas)


@dataclass(frozen=True)
class KQConfig:
    """What every kq-nuclear config has: ``n`` sequences and the checks of its fields.

    ``__post_init__`` checks the subclass's ``INTS`` (integers >= 1, ``seed`` >= 0) and ``POSITIVE`` (floats > 0);
    a subclass with more to check extends it.

    Attributes
    ----------
    n : int
        Sequences.
    """

    n: int = 3

    INTS: ClassVar[tuple[str, ...]] = ("n",)
    POSITIVE: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        check_ints(self, self.INTS)
        check_positive(self, self.POSITIVE)


@dataclass(frozen=True)
class ScoresConfig(KQConfig):
    """The ``scores_equal`` data set X1, X2 and X5 train on; each adds its run's fields.

    Attributes
    ----------
    T : int
        Tokens per sequence (>= 2).
    d : int
        Token width (>= 2).
    """

    n: int = 2
    T: int = 3
    d: int = 8

    RENAMED: ClassVar[dict[str, str]] = {"L": "T"}  # the token axis is T everywhere (the paper writes L)


# ---- falsifiers: wrong mechanisms, each patched where one experiment module looks it up ------------------------


def _chain_replaced(model_cls: type, chain: Callable[[dict, torch.Tensor], dict]) -> type:
    """``model_cls`` whose chain rule from ``grad_W`` to its tensors is ``chain(params, grad_W)``."""

    class Wrong(model_cls):
        parametrization = model_cls.parametrization._replace(chain=chain)

    return Wrong


def _with_chain(model_cls: type, change: Callable[[dict], dict]) -> type:
    """``model_cls`` whose chain rule is ``change(original grads)``: a wrong gradient of one factor."""
    original = model_cls.parametrization.chain
    return _chain_replaced(model_cls, lambda p, g: change(original(p, g)))


def k_gradient_halved(module: str) -> Falsifier:
    """The flow on ``(xi_k, xi_q)`` with ``xi_k``'s gradient halved: an unbalanced update of the factorisation."""
    return Falsifier(
        "k-gradient-halved",
        "gradient flow on (xi_k, xi_q) with xi_k's gradient halved (the balanced factorisation broken)",
        f"attnlab.experiments.kq_nuclear.{module}:Diagonal",
        lambda cls: _with_chain(cls, lambda g: {**g, "xi_k": g["xi_k"] / 2}),
        kind="mechanism",
    )


def q_gradient_reversed(module: str) -> Falsifier:
    """The flow on ``(xi_k, xi_q)`` with the sign of ``xi_q``'s gradient flipped (a chain-rule sign error)."""
    return Falsifier(
        "q-gradient-reversed",
        "xi_q moves up its gradient (a sign error in the chain rule of beta = xi_k xi_q)",
        f"attnlab.experiments.kq_nuclear.{module}:Diagonal",
        lambda cls: _with_chain(cls, lambda g: {**g, "xi_q": -g["xi_q"]}),
        kind="mechanism",
    )


def factor_gradient_swapped(module: str) -> Falsifier:
    """The chain rule of ``beta = xi_k * xi_q`` with each factor's gradient taken along itself, ``diag(G) * xi_k``
    and ``diag(G) * xi_q`` (for ``diag(G) * xi_q``, ``diag(G) * xi_k``): ``beta_dot = -2 diag(G) beta``, so the
    factorised geometry loses its floor ``2 omega_0^2`` and ``beta(0) = 0`` never moves."""
    return Falsifier(
        "factor-gradient-swapped",
        "the chain rule of beta = xi_k xi_q written grad_xi_k = diag(G) xi_k, grad_xi_q = diag(G) xi_q (each factor "
        "multiplies its own gradient: beta_dot ~ beta, which loses the rate floor 2 omega0^2 of initialisation (5))",
        f"attnlab.experiments.kq_nuclear.{module}:Diagonal",
        lambda cls: _chain_replaced(
            cls,
            lambda p, g: {
                "xi_k": torch.diagonal(g, dim1=-2, dim2=-1) * p["xi_k"],
                "xi_q": torch.diagonal(g, dim1=-2, dim2=-1) * p["xi_q"],
            },
        ),
        kind="mechanism",
    )


def kq_as_beta(module: str) -> Falsifier:
    """The diagonal ``(xi_k, xi_q)`` run replaced by ``beta`` trained directly from ``beta(0) = xi_k(0) xi_q(0)``."""
    return Falsifier(
        "kq-as-beta",
        "the diagonal K, Q factorisation replaced by beta = diag(W) trained directly (no product structure)",
        f"attnlab.experiments.kq_nuclear.{module}:Diagonal",
        lambda cls: lambda d, xi_k0, xi_q0: DiagonalW(xi_k0 * xi_q0),
        kind="gross",
    )


def beta_as_kq(module: str) -> Falsifier:
    """``beta`` trained directly replaced by a diagonal ``(xi_k, xi_q)`` run from (5) at ``omega_0 = 0.1``."""

    def factored(beta0: torch.Tensor) -> Diagonal:
        xi_k0 = torch.full_like(beta0, math.sqrt(2.0) * 0.1)  # spec kq §3.1 (5): beta(0) = 0
        return Diagonal(int(beta0.shape[-1]), xi_k0=xi_k0, xi_q0=torch.zeros_like(beta0))

    return Falsifier(
        "beta-as-kq",
        "beta trained directly replaced by the diagonal factorisation beta = xi_k xi_q (initialisation (5))",
        f"attnlab.experiments.kq_nuclear.{module}:DiagonalW",
        lambda cls: factored,
        kind="gross",
    )


def kq_as_w(module: str) -> Falsifier:
    """The ``(K, Q)`` run replaced by ``W`` trained directly from ``W(0) = K(0) Q(0)^T``."""
    return Falsifier(
        "kq-as-w",
        "the factorisation W = K Q^T replaced by W trained directly (from W(0) = K(0) Q(0)^T)",
        f"attnlab.experiments.kq_nuclear.{module}:Factored",
        lambda cls: lambda d, d_e, K0, Q0: Combined(d, W0=K0 @ Q0.transpose(-1, -2)),
        kind="gross",
    )


def w_as_kq(module: str) -> Falsifier:
    """``W`` trained directly replaced by a ``(K, Q)`` run from ``K(0) = W(0)``, ``Q(0) = W(0)^T``."""
    return Falsifier(
        "w-as-kq",
        "W trained directly replaced by the factorisation W = K Q^T (K(0) = W(0), Q(0) = W(0)^T)",
        f"attnlab.experiments.kq_nuclear.{module}:Combined",
        lambda cls: lambda d, W0: Factored(d, d, K0=W0, Q0=W0.transpose(-1, -2)),
        kind="gross",
    )


def factor_not_trained(module: str, model: str = "Diagonal") -> Falsifier:
    """The key factor (``xi_k`` of ``Diagonal``, ``K`` of ``Factored``) left out of training: only the query moves.

    With ``xi_q(0) = 0`` the diagonal run is then ``beta = xi_k(0) xi_q``, linear in the trained factor: ``beta``
    trained directly with a fixed step per entry, which tends to the l2 solution (spec §7.2).
    """
    name = {"Diagonal": "xi_k", "Factored": "K"}[model]

    def frozen(cls: type) -> type:
        class KeyFrozen(cls):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                getattr(self, name).requires_grad_(False)

        return KeyFrozen

    return Falsifier(
        "k-not-trained",
        f"{name} left out of training (requires_grad off: one factor of the product never moves)",
        f"attnlab.experiments.kq_nuclear.{module}:{model}",
        frozen,
        kind="mechanism",
    )


def transpose_misplaced(module: str) -> Falsifier:
    """The chain rule of ``W = K Q^T`` with the other factor transposed: ``G Q^T`` and ``G^T K^T`` (``d_e = d``)."""
    return Falsifier(
        "transpose-misplaced",
        "the chain rule of W = K Q^T written grad_K = G Q^T, grad_Q = G^T K^T (for G Q, G^T K): a transpose in the "
        "wrong place, which square K and Q (d_e = d) do not catch",
        f"attnlab.experiments.kq_nuclear.{module}:Factored",
        lambda cls: _chain_replaced(
            cls, lambda p, g: {"K": g @ p["Q"].transpose(-1, -2), "Q": g.transpose(-1, -2) @ p["K"].transpose(-1, -2)}
        ),
        kind="mechanism",
    )


_PRECONDITIONED = {"Diagonal": "xi_k", "DiagonalW": "beta", "Factored": "K", "Combined": "W"}


def gradient_preconditioned(module: str, model: str, low: float, high: float, suffix: str = "") -> Falsifier:
    """One tensor's gradient times the fixed diagonal preconditioner ``diag(linspace(low, high))`` over its first
    axis: the entries of ``xi_k`` or ``beta``, the rows of ``K`` or ``W``; the falsifier's name ends in ``suffix``.

    A per-coordinate step of fixed scales (as a frozen Adagrad or Adam preconditioner) is steepest descent in a
    weighted norm, so the limit is a weighted max-margin solution: near the true one for mild weights, not it.
    """
    name = _PRECONDITIONED[model]
    vector = model in ("Diagonal", "DiagonalW")

    def change(grads: dict) -> dict:
        g = grads[name]
        scales = torch.linspace(low, high, g.shape[-1] if vector else g.shape[-2], dtype=g.dtype)
        return {**grads, name: g * scales if vector else scales[:, None] * g}

    where = "entries" if vector else "rows"
    return Falsifier(
        f"{name.split('_')[-1].lower()}-gradient-preconditioned{suffix}",
        f"{name}'s gradient times diag(linspace({low:g}, {high:g})) over its {where} (a fixed per-coordinate "
        "preconditioner: steepest descent in a weighted norm)",
        f"attnlab.experiments.kq_nuclear.{module}:{model}",
        lambda cls: _with_chain(cls, change),
        kind="mechanism",
    )


SIZE_STEP_FLOOR = 1e-2  # the size-scaled step's floor: omega_0^2 at omega_0 = 0.1, so a zero entry still moves


def step_scaled_by_size(module: str, model: str) -> Falsifier:
    """``beta`` (``DiagonalW``) or ``W`` (``Combined``) trained with each entry's step scaled by its own size.

    The update ``-(|w| + c) * grad`` (a multiplicative, size-proportional step, as exponentiated-gradient and
    per-weight trust-ratio optimizers take) is the geometry of the factorised flow (Lemma A.1's
    ``2 sqrt(beta^2 + omega_0^4)``), so it moves the limit from the l2 towards the l1 solution.
    """
    name = {"DiagonalW": "beta", "Combined": "W"}[model]

    def chain(p: dict, g: torch.Tensor) -> dict:
        grad = torch.diagonal(g, dim1=-2, dim2=-1) if name == "beta" else g
        return {name: (p[name].abs() + SIZE_STEP_FLOOR) * grad}

    return Falsifier(
        "step-scaled-by-size",
        f"{name} trained directly with each entry's step scaled by |{name}| + {SIZE_STEP_FLOOR:g} (a multiplicative, "
        "size-proportional update instead of the plain gradient)",
        f"attnlab.experiments.kq_nuclear.{module}:{model}",
        lambda cls: _chain_replaced(cls, chain),
        kind="mechanism",
    )


L2_PENALTY = 1e-3  # weight of the penalty: the penalised minimum sits at a margin of a few units (ln(1/1e-3) ~ 7)


def _penalised(loss_gradients: Callable) -> Callable:
    """``loss_gradients`` of the loss plus ``(L2_PENALTY / 2) ||W||_F^2``: the gradient in ``W`` gains ``L2_PENALTY W``.

    The other log-scaled outputs share ``grad_W``'s scale, so they are moved to the new one.
    """

    def wrong(X, Z, y, v, W, loss="exp", **kwargs):
        grad_W, *rest = loss_gradients(X, Z, y, v, W, loss, **kwargs)
        value = grad_W.value() + L2_PENALTY * W  # the true gradient (it does not underflow: W stays bounded)
        scale = value.abs().amax(dim=(-2, -1)).clamp(min=torch.finfo(value.dtype).tiny)
        moved = torch.exp(grad_W.log_scale) / scale
        out = [LogScaled(value / scale[..., None, None], scale.log())]
        for item in rest:
            if isinstance(item, LogScaled):
                extra = item.mantissa.dim() - moved.dim()
                item = LogScaled(item.mantissa * moved.reshape(moved.shape + (1,) * extra), scale.log())
            out.append(item)
        return tuple(out)

    return wrong


def l2_penalty() -> Falsifier:
    """Weight decay on ``W`` in the loss: the penalised loss has a finite minimiser, so ``||beta||`` stops growing."""
    return Falsifier(
        "l2-penalty",
        f"an L2 penalty ({L2_PENALTY:g} / 2) ||W||_F^2 added to the loss (weight decay), whose minimiser is finite",
        "attnlab.training.spaces:loss_gradients",
        _penalised,
        kind="mechanism",
    )
