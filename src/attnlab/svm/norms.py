"""The norms of the max-margin programs, each one typed object: its objective, value, dual, and optimality test.

Spec: implicit-bias-ngd §5 (Frobenius, the QP and its dual), kq-nuclear-norm §4 (nuclear norm; the l1 program of a
diagonal W and its subgradient), mirror-descent-lp §3 (``psi = ||.||_p^p / p`` and its gradient) and §5 (entrywise
l_p, its KKT condition ``grad psi(W) = sum lambda A``), steepest-descent §3 (l_inf, an LP with an l_1 dual).

A norm is parsed once at a program's boundary (:func:`as_norm`: ``"fro"``, ``"nuc"``, ``"l1-diag"``, a float ``p``,
``float("inf")``, a registered name, or a :class:`Norm`) and passed inward typed; the programs read its fields, never
its name. A norm of your own is one :class:`Norm` (and optionally :func:`register_norm`); it then works through
:func:`attnlab.svm.attention_svm`. ``stationarity`` defaults to the subgradient test every norm shares:
``g`` is a subgradient of ``||.||`` at ``x`` iff ``||g||_* <= 1`` and ``<g, x> = ||x||``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np
import torch

from attnlab._numerics import inverse_mirror_map, mirror_map
from attnlab._validation import ValidationError, check_scalar

__all__ = [
    "FRO",
    "KKT_TOL",
    "KKT_TOL_POWER_CONE",
    "L1_DIAG",
    "NUC",
    "NORMS",
    "P_MAX",
    "P_MIN",
    "Norm",
    "as_norm",
    "check_p",
    "grad_psi",
    "inverse_grad_psi",
    "lp",
    "register_norm",
    "subgradient_residual",
]

# At the solver tolerances of attnlab.svm._program, QP, SDP and LP solves reach KKT residuals of 1e-12 to 1e-7 (up to
# n (T-1) = 40, d = 16); the power-cone form of l_p norms (1 < p, cvxpy pnorm) only 1e-6 to 1e-5. The tolerances leave
# a margin above that and are far below any error that changes a support set or a norm comparison.
KKT_TOL = 1e-5
KKT_TOL_POWER_CONE = 1e-4
# The entrywise l_p programs are solved for these p only. cvxpy writes pnorm with a rational approximation of p
# (denominators up to 1024): below p = 1.001 it rounds p to 1 and refuses the program (DCPError), and beyond
# p ~ 1e3 the fraction degenerates (ZeroDivisionError). Above p = 100 the psi-normalised duals
# lambda = mu ||W||_p^(p-1) fall below 1e-88 and soon underflow, which would make the KKT certificate vacuous.
P_MIN, P_MAX = 1.001, 100.0
# Entries of a solution below this fraction of its largest entry count as zero in the l1 subgradient test.
_ZERO_TOL = 1e-6

Function = Callable[[np.ndarray], float]


def subgradient_residual(value: Function, dual: Function) -> Callable[[np.ndarray, np.ndarray], float]:
    """The optimality test of a norm whose multipliers give a subgradient: ``(||g||_* - 1)_+`` plus the relative
    defect of ``<g, x> = ||x||`` (the subdifferential of any norm; kq-nuclear-norm §4, steepest-descent §3)."""

    def residual(x: np.ndarray, g: np.ndarray) -> float:
        size = value(x)
        excess = max(dual(g) - 1.0, 0.0)  # ||g||_* <= 1
        pairing = abs(float(np.sum(g * x)) - size) / max(size, 1e-300)  # <g, x> = ||x||
        return excess + pairing

    return residual


@dataclass(frozen=True, eq=False)
class Norm:
    """One norm of the programs ``min ||x|| s.t. M vec(x) >= 1``.

    Attributes
    ----------
    name : str
        Its name (``"fro"``, ``"nuc"``, ``"l1.5"``, ``"linf"``, ``"l1-diag"``).
    objective : callable
        ``objective(x) -> cvxpy expression`` minimised (``1/2 ||x||_F^2`` for the Frobenius QP: same minimiser).
    value : callable
        ``value(x) -> float``, the norm of a solution (NumPy).
    dual : callable
        ``dual(g) -> float``, the dual norm.
    stationarity : callable, optional
        ``stationarity(x, g) -> float``: how far ``g = sum lambda A`` is from the optimality condition at ``x``,
        relative; default :func:`subgradient_residual` of ``value`` and ``dual``.
    multiplier_exponent : float, default=1
        The program's multipliers scale by ``(a b)^(-e)`` when its constraint vectors scale by ``a b``: 2 for the
        Frobenius QP (``x = sum lambda A``), ``p`` for an l_p norm (``grad psi(x) = sum lambda A``), 1 for a
        subgradient.
    objective_degree : float, default=1
        The objective's degree of homogeneity (1 for a norm, 2 for the QP's ``1/2 ||x||^2``): solved in ``x = c x'``,
        the original program's multipliers are the solved one's times ``c^degree``.
    psi_multipliers : callable, optional
        ``psi_multipliers(mu, x)``: the solver's multipliers of ``min ||x||`` turned into those the stationarity test
        reads (l_p: ``mu ||x||_p^(p-1)``, those of ``min ||x||_p^p / p``).
    kkt_tol : float, default=KKT_TOL
        The KKT residual a solve must reach.
    unitarily_invariant : bool, default=False
        ``||U x V^T|| = ||x||`` for orthonormal ``U, V``: the program is solved exactly on the spans of the token
        differences and of the queries (``W = U What V^T``).
    exact_dual : bool, default=False
        The program has the exact non-negative least-squares dual (Frobenius), tried where the solver cannot reach
        its tolerance.
    diagonal : Norm, optional
        For a program on a diagonal ``W = diag(beta)``: the norm of ``beta`` (``"l1-diag"``).
    label : str or float, optional
        What results report as their ``norm`` (default ``name``; an l_p norm reports its float ``p``).
    p : float, optional
        The entrywise exponent of an l_p norm (``inf`` for l_inf).
    """

    name: str
    objective: Callable[[cp.Expression], cp.Expression]
    value: Function
    dual: Function
    stationarity: Callable[[np.ndarray, np.ndarray], float] | None = None
    multiplier_exponent: float = 1.0
    objective_degree: float = 1.0
    psi_multipliers: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    kkt_tol: float = KKT_TOL
    unitarily_invariant: bool = False
    exact_dual: bool = False
    diagonal: Norm | None = None
    label: Any = None

    p: float | None = None

    def __post_init__(self) -> None:
        if self.stationarity is None:
            object.__setattr__(self, "stationarity", subgradient_residual(self.value, self.dual))
        if self.label is None:
            object.__setattr__(self, "label", self.name)

    def __repr__(self) -> str:
        return f"Norm({self.name!r})"


def check_p(p: object) -> float:
    """Return ``float(p)`` for ``p = 1``, ``P_MIN <= p <= P_MAX`` (see ``P_MIN``) or ``p = inf``; refuse others.

    ``p = 1`` and ``p = inf`` are linear programs, solved exactly; the power-cone range between is capped.
    """
    check_scalar("p", p, low=1.0, allow_inf=True)
    p = float(p)
    if p == math.inf:
        return p
    if 1.0 < p < P_MIN:
        raise ValidationError(
            f"p == {p!r} is too close to 1: the power-cone solver approximates p by a fraction and would solve "
            f"p = 1; pass p = 1 (an exact LP) or p >= {P_MIN}"
        )
    if p > P_MAX:
        raise ValidationError(
            f"p == {p!r} is too large: beyond p = {P_MAX:g} the power-cone approximation and the KKT certificate "
            f"of the solution break down; pass p <= {P_MAX:g} (the solutions change little beyond it) or "
            'p = float("inf") (the l_inf program, an exact LP)'
        )
    return p


def grad_psi(x: np.ndarray, p: float) -> np.ndarray:
    """``grad psi(x) = sign(x) |x|^(p-1)`` entrywise, ``psi = 1/p ||x||_p^p``. Spec: mirror-descent-lp §3."""
    return mirror_map(torch.from_numpy(np.asarray(x, dtype=np.float64)), p).numpy()


def inverse_grad_psi(g: np.ndarray, p: float) -> np.ndarray:
    """``(grad psi)^{-1}(g) = sign(g) |g|^(1/(p-1))`` entrywise, ``p > 1``. Spec: mirror-descent-lp §3."""
    return inverse_mirror_map(torch.from_numpy(np.asarray(g, dtype=np.float64)), p).numpy()


def _entrywise(x: np.ndarray, p: float) -> float:
    return float(np.linalg.norm(np.asarray(x).reshape(-1), ord=p))


def _l1_subgradient_gap(x: np.ndarray, g: np.ndarray) -> float:
    """How far ``g`` is from ``partial ||x||_1``: ``|g_j - sign x_j|`` on the support, ``(|g_j| - 1)_+`` off it.

    Spec: kq-nuclear-norm §4, KKT (b) (Clarke subdifferential of the l1 norm).
    """
    on = np.abs(x) > _ZERO_TOL * max(float(np.abs(x).max(initial=0.0)), 1e-300)
    gap_on = np.abs(g[on] - np.sign(x[on]))  # spec kq-nuclear-norm §4 (b): g_j = sign(beta_j) where beta_j != 0
    gap_off = np.maximum(np.abs(g[~on]) - 1.0, 0.0)  # spec kq-nuclear-norm §4 (b): |g_j| <= 1 where beta_j = 0
    return float(max(gap_on.max(initial=0.0), gap_off.max(initial=0.0)))


def _psi_stationarity(p: float) -> Callable[[np.ndarray, np.ndarray], float]:
    """``grad psi(x) = g`` (mirror-descent-lp §5), measured on the well-conditioned side: ``||x - (grad
    psi)^{-1}(g)||_p / ||x||_p`` for ``p <= 2``, ``||grad psi(x) - g||_q / ||grad psi(x)||_q`` for ``p > 2``."""

    def residual(x: np.ndarray, g: np.ndarray) -> float:
        if p <= 2.0:
            scale = max(_entrywise(x, p), 1e-300)
            return _entrywise(x - inverse_grad_psi(g, p), p) / scale  # spec mirror-descent-lp §5: x = grad psi^-1(g)
        q = p / (p - 1.0)
        grad = grad_psi(x, p)
        return _entrywise(grad - g, q) / max(_entrywise(grad, q), 1e-300)  # mirror-descent-lp §5: grad psi(x) = g

    return residual


@functools.lru_cache(maxsize=64)
def lp(p: float) -> Norm:
    """The entrywise l_p norm ``||vec x||_p`` (checked ``p``: 1, ``P_MIN`` to ``P_MAX``, or ``inf``).

    Spec: mirror-descent-lp §5 (l_p-AttSVM); ``p = 1`` and ``p = inf`` are LPs (steepest-descent §3).

    Parameters
    ----------
    p : float
        The exponent.

    Returns
    -------
    Norm
        Its ``label`` is the float ``p``.
    """
    p = check_p(p)
    q = 1.0 if p == math.inf else math.inf if p == 1.0 else p / (p - 1.0)

    def vec(x: cp.Expression) -> cp.Expression:
        return cp.vec(x, order="C")

    if p == math.inf:  # mirror-descent-lp §5 at p = inf: an LP epigraph, a subgradient with ||g||_1 <= 1
        objective = lambda x: cp.Minimize(cp.norm_inf(vec(x)))  # noqa: E731
        stationarity, psi = None, None
    elif p == 1.0:  # kq-nuclear-norm §4: the l1 LP, its subgradient test entrywise
        objective = lambda x: cp.Minimize(cp.pnorm(vec(x), 1.0))  # noqa: E731
        stationarity, psi = _l1_subgradient_gap, lambda mu, x: mu * _entrywise(x, 1.0) ** 0.0
    else:  # spec mirror-descent-lp §5: entrywise l_p, lambda = mu ||W||_p^(p-1) are the multipliers of psi
        objective = lambda x: cp.Minimize(cp.pnorm(vec(x), p))  # noqa: E731
        stationarity, psi = _psi_stationarity(p), lambda mu, x: mu * _entrywise(x, p) ** (p - 1.0)
    return Norm(
        name=f"l{p:g}",
        objective=objective,
        value=lambda x: _entrywise(x, p),
        dual=lambda g: _entrywise(g, q),
        stationarity=stationarity,
        multiplier_exponent=1.0 if p == math.inf else p,
        psi_multipliers=psi,
        kkt_tol=KKT_TOL_POWER_CONE if 1.0 < p < math.inf else KKT_TOL,
        label=p,
        p=p,
    )


FRO = Norm(  # spec implicit-bias-ngd §5: the QP form of min ||W||_F, multipliers with W = sum lambda A
    name="fro",
    objective=lambda x: cp.Minimize(0.5 * cp.sum_squares(x)),
    value=lambda x: float(np.linalg.norm(x)),
    dual=lambda g: float(np.linalg.norm(g)),
    stationarity=_psi_stationarity(2.0),
    multiplier_exponent=2.0,
    objective_degree=2.0,
    unitarily_invariant=True,
    exact_dual=True,
    p=2.0,
)
NUC = Norm(  # spec kq-nuclear-norm §4: (W*-SVM); cvxpy builds the SDP epigraph; the dual is the operator norm
    name="nuc",
    objective=lambda x: cp.Minimize(cp.normNuc(x)),
    value=lambda x: float(np.linalg.svd(x, compute_uv=False).sum()),
    dual=lambda g: float(np.linalg.norm(g, ord=2)),
    unitarily_invariant=True,
)
L1_DIAG = Norm(  # spec kq-nuclear-norm §4: (W*diag-SVM) = (l1-SVM) on beta, W = diag(beta)
    name="l1-diag",
    objective=lp(1.0).objective,
    value=lp(1.0).value,
    dual=lp(1.0).dual,
    stationarity=lp(1.0).stationarity,
    diagonal=lp(1.0),
)
#: The named norms (floats are l_p norms, :func:`lp`); :func:`register_norm` adds one.
NORMS: dict[str, Norm] = {norm.name: norm for norm in (FRO, NUC, L1_DIAG)}


def register_norm(norm: Norm) -> Norm:
    """Make ``norm`` known by its name to every program (``attention_svm(data, norm="<name>")``).

    Parameters
    ----------
    norm : Norm
        A new norm; its name must be new.

    Returns
    -------
    Norm
        ``norm``.

    Raises
    ------
    ValidationError
        When the name is taken.
    """
    if norm.name in NORMS:
        raise ValidationError(f"norm {norm.name!r} is registered already; pick another name")
    NORMS[norm.name] = norm
    return norm


def as_norm(value: object, name: str = "norm") -> Norm:
    """The :class:`Norm` a program's ``norm`` argument names: parsed once, at the boundary.

    Parameters
    ----------
    value : Norm, str or float
        A :class:`Norm`; ``"fro"``, ``"nuc"``, ``"l1-diag"`` or a registered name; a float ``p >= 1``
        (``float("inf")`` included): the entrywise l_p norm.
    name : str, default="norm"
        The argument that gave ``value`` (``"p"`` where a function names its norm ``p``), for the messages: a
        number is read as ``p``, and its refusal says so (``"norm == 0.5 is read as the entrywise l_p norm, and
        p == 0.5, must be >= 1.0"``).

    Returns
    -------
    Norm

    Raises
    ------
    ValidationError
        For anything else, with the fix.
    """
    if isinstance(value, Norm):
        return value
    if isinstance(value, str):
        if value in NORMS:
            return NORMS[value]
        names = ", ".join(f'"{n}"' for n in NORMS)
        raise ValidationError(
            f'{name} must be {names} or a float p >= 1, got {value!r}; pass "fro" for Frobenius or a number such as '
            '1.5 (float("inf") for l_inf) for the entrywise l_p norm'
        )
    try:
        return lp(check_p(value))
    except ValidationError as err:
        if name == "p":  # the message names p already
            raise
        raise ValidationError(f"{name} == {value!r} is read as the entrywise l_p norm, and {err}") from None


def program_norm(norm: Norm | str | float, name: str = "norm") -> Norm:
    """:func:`as_norm`, but the exact QP :data:`FRO` for ``p = 2`` (the entrywise l_2 norm is the Frobenius norm);
    ``name`` as for :func:`as_norm`."""
    norm = as_norm(norm, name)
    return FRO if norm.p == 2.0 else norm
