"""Named pieces shared by every max-margin program: selection, constraint matrices, norm objectives, one solve.

Spec: implicit-bias-ngd §5, mirror-descent-lp §5, kq-nuclear-norm §4.

Every program here has the form ``min ||x|| s.t. M x >= 1`` for a flattened variable ``x`` (a matrix ``W``, a
diagonal ``beta`` or a head ``v``), so one solve routine serves them all; the public functions only build ``M``.
Flattening is row-major (C order) throughout: ``M[k] = A_k.reshape(-1)`` and ``<A_k, W> = M[k] @ W.reshape(-1)``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import cvxpy as cp
import numpy as np
import torch

from attnlab._validation import ValidationError
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.selection import Selection
from attnlab.svm.errors import InfeasibleProgramError, SolverAccuracyWarning, SolverToleranceError, TieWarning
from attnlab.svm.norms import Norm, as_norm

SOLVERS = ("CLARABEL", "SCS")
# spec mirror-descent-lp §5: a constraint is active when its slack is below 1e-6 (relative to the margin 1).
SUPPORT_TOL = 1e-6
# Clarabel's default gap tolerance 1e-8 leaves KKT residuals up to 7e-5 on power-cone (l_p) programs and SCS stops
# at eps 1e-4 by default; these programs are small, so ask both for more. At 1e-10 Clarabel often stops a digit
# short on round-off and reports "optimal_inaccurate" (about one solve in five) with KKT residuals still below
# 1e-5; at 1e-9 it says "optimal" more often but l_p residuals double. Accuracy wins: the KKT certificate, not the
# status, decides whether a solve is trusted (see warn_if_inaccurate).
_CLARABEL_OPTIONS = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "tol_ktratio": 1e-8}
_SCS_OPTIONS = {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000}
# Singular values below this fraction of the largest count as zero when finding the span of the constraint vectors.
_RANK_TOL = 1e-12
# Unit-norm margins at or below this count as "not separable": solver round-off on a zero optimum is ~1e-10.
SEPARABLE_TOL = 1e-8
# Two token scores within this fraction of the largest |score| of their sequence are a tie (float64 rounding).
_TIE_TOL = 1e-12


@dataclass(frozen=True, eq=False)
class ProgramSolution:
    """Raw output of :func:`solve_margin_program` (NumPy, float64); the public result classes wrap it."""

    x: np.ndarray  # shape of the variable, e.g. (d, d) or (d,)
    constraint_values: np.ndarray  # (m,): M @ x.reshape(-1)
    duals: np.ndarray  # (m,) >= 0, normalised so that the stationarity test of `kkt_residual` applies
    status: str
    solver: str
    norm_value: float
    kkt_residual: float
    equality_duals: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (k,): the equality rows' multipliers
    equality_violation: float = 0.0  # max_j |E_j x - target_j|


def check_data(data: object) -> TokenSelectionData:
    """Refuse anything but a :class:`TokenSelectionData` with the fix.

    Raises
    ------
    ValidationError
        Naming ``data`` and what it got.
    """
    if not isinstance(data, TokenSelectionData):
        raise ValidationError(
            f"data must be a TokenSelectionData, got {type(data).__name__}; "
            f"wrap arrays with TokenSelectionData(X, Z, y)"
        )
    return data


def check_square(data: TokenSelectionData, program: str) -> None:
    """Refuse cross-attention data (``d_q != d``) for a program whose ``W`` is diagonal, hence square."""
    if data.d_q != data.d:
        raise ValidationError(
            f"the {program} has a diagonal, square W, but data has tokens of width d = {data.d} and queries of width "
            f"d_q = {data.d_q} (cross-attention, multi-token §8); use attention_svm(data, norm) for a rectangular W"
        )


def check_solver(solver: object) -> str:
    """Return the upper-case solver name; ``None`` means Clarabel."""
    if solver is None:
        return "CLARABEL"
    name = str(solver).upper()
    if name not in SOLVERS:
        raise ValidationError(f"solver == {solver!r}, must be one of {', '.join(SOLVERS)} (or None for CLARABEL)")
    return name


def resolve_select(data: TokenSelectionData, select: object) -> torch.Tensor:
    """The selected token per sequence, shape (n,), int64: ``select``, else ``data.select``, else the optimal tokens.

    Token sets (a ``(n, T)`` mask) are refused: only :func:`~attnlab.svm.attention_svm` (Frobenius or nuclear) and
    :func:`~attnlab.svm.set_direction_svm` solve them.
    """
    if select is not None or data.select is not None:  # parsed once (a Selection passes through unchecked)
        return Selection.parse(data.select if select is None else select, data.n, data.T).one_token("this program")
    if data.v is None:
        raise ValidationError(
            "no token selection: pass select=(n,) token indices (--select on the command line), store one in "
            "data.select, or give the data a head v so that the optimal tokens argmax_t y_i v^T x_it can be used"
        )
    scores = data.token_scores()  # (n, T), spec implicit-bias-ngd §1: gamma_it = y_i v^T x_it
    if not bool((scores != 0).any()):
        raise ValidationError(
            "every token score y_i v^T x_it is 0 (the head v is zero or orthogonal to every token), so no token is "
            "optimal; pass select=(n,) token indices (--select) or a head v that tells the tokens apart"
        )
    ties = tied_sequences(scores)
    if ties:
        more = f" and {len(ties) - 5} more" if len(ties) > 5 else ""
        warnings.warn(
            f"the optimal token is not unique in sequences {ties[:5]}{more} (equal scores y_i v^T x_it); the lowest "
            "index was selected there: pass select=(n,) token indices (--select) to choose",
            TieWarning,
            stacklevel=3,
        )
    return data.optimal_tokens()


def tied_sequences(scores: torch.Tensor) -> list[int]:
    """The sequences whose largest two ``scores`` (``(n, T)``: token scores or logits) are tied: within ``_TIE_TOL``
    of the sequence's largest ``|score|`` (float64 rounding), so that no single token is largest."""
    top2 = scores.topk(2, dim=1).values  # (n, 2)
    return torch.nonzero(top2[:, 0] - top2[:, 1] <= _TIE_TOL * scores.abs().amax(dim=1)).flatten().tolist()


def constraint_pairs(T: int, select: torch.Tensor) -> np.ndarray:
    """All pairs ``(i, t)`` with ``t != select_i``, shape (n(T-1), 2), ordered by ``i`` then ``t``."""
    n = select.shape[0]
    i, t = np.meshgrid(np.arange(n), np.arange(T), indexing="ij")  # (n, T) each
    keep = t != select.numpy()[:, None]
    return np.stack([i[keep], t[keep]], axis=1)


def attention_constraint_vectors(
    data: TokenSelectionData, select: torch.Tensor
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The two factors of each attention-SVM constraint ``(x_{i,sel_i} - x_{i,t})^T W z_i >= 1``.

    Returns ``pairs (m, 2)``, ``diff (m, d)`` with rows ``x_{i,sel_i} - x_{i,t}`` and ``queries (m, d)`` with rows
    ``z_i``, float64, ``m = n (T - 1)``.
    """
    X, Z = data.X.numpy(), data.Z.numpy()
    pairs = constraint_pairs(data.T, select)
    i, t = pairs[:, 0], pairs[:, 1]
    return pairs, X[i, select.numpy()[i]] - X[i, t], Z[i]


def unit_scale(rows: np.ndarray) -> tuple[np.ndarray, float]:
    """``(rows / s, s)`` with ``s`` the largest ``|entry|`` (1 when every entry is 0).

    The programs are scale-covariant: scaling the token differences by ``a`` and the queries by ``b`` scales the
    solution by ``1 / (a b)`` (see :func:`scaled_back`). Solving on unit-scaled vectors keeps data of scale 1e300
    or 1e-300 from overflowing or underflowing into constraints that read ``0 >= 1``.
    """
    s = float(np.abs(rows).max(initial=0.0))
    if s == 0.0 or not math.isfinite(s):
        return rows, 1.0
    return rows / s, s


def scaled_back(
    solution: ProgramSolution, scales: tuple[float, float], norm: Norm, what: str, *, scale_note: str | None = None
) -> ProgramSolution:
    """The solution of the program whose constraint vectors are ``a b`` times those solved, ``scales = (a, b)``.

    The variable and the norm scale by ``1 / (a b)``; the multipliers (the equality rows' too, whose targets do not
    scale) by ``(a b)^(-e)`` with ``e`` the norm's ``multiplier_exponent`` (2 for ``"fro"``, ``x = sum lambda A``;
    ``p`` for a finite ``p``, ``grad psi(x) = sum lambda A``; 1 for a subgradient, which does not scale); margins and
    the KKT residual (relative) do not change. A zero solution (``x = 0``) stays zero. ``scale_note`` replaces the
    error message's account of the scales and the fix (default: those of ``X`` and ``Z``, ``x`` times ``c^2``).

    Raises
    ------
    ValidationError
        If the scaled solution is outside float64's range (the data were separable: the message says so).
    """
    a, b = sorted(scales, reverse=True)  # the larger first: x / a / b never overflows on the way
    if (a, b) == (1.0, 1.0):
        return solution
    value = solution.norm_value / a / b
    log_scale = math.log(a) + math.log(b)
    e = norm.multiplier_exponent  # lambda / (a b)^e, in logs
    duals, equality_duals = (_rescaled(d, e * log_scale) for d in (solution.duals, solution.equality_duals))
    zero = solution.norm_value == 0.0  # W = 0 (a finite part whose log-ratios are all 0) is 0 at every scale
    if not (zero or np.finfo(np.float64).tiny <= value < math.inf) or not np.isfinite(duals).all():
        size = "0" if zero else f"about 1e{math.log10(solution.norm_value) - log_scale / math.log(10):.0f}"
        note = scale_note or (
            f"largest |x_sel - x_t| {scales[0]:.3g}, largest |z| {scales[1]:.3g}; divide X and Z by a common factor "
            "c and the solution by c^2"
        )
        raise ValidationError(
            f"{what}: the data are separable, but the max-margin solution has norm {size} (or multipliers) outside "
            f"float64's range, because of the scale of the tokens ({note}; its direction does not depend on the "
            "scale)"
        )
    return replace(solution, x=solution.x / a / b, duals=duals, equality_duals=equality_duals, norm_value=value)


def _rescaled(duals: np.ndarray, log_factor: float) -> np.ndarray:
    """``duals / e^log_factor`` computed in logs (multipliers of 1e-300 programs stay in range), signs kept."""
    out = np.zeros_like(duals)
    nonzero = duals != 0
    with np.errstate(over="ignore", under="ignore"):
        out[nonzero] = np.sign(duals[nonzero]) * np.exp(np.log(np.abs(duals[nonzero])) - log_factor)
    return out


def constraint_matrices(diff: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``A_k = diff_k queries_k^T``, shape (m, a, b), so that ``<A_k, W> = diff_k^T W queries_k``."""
    return diff[:, :, None] * queries[:, None, :]  # spec implicit-bias-ngd §5: A_it = (x_opt - x_t) z^T


def range_bases(diff: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases ``U (d, r1)`` of the span of the rows of ``diff`` and ``V (d, r2)`` of those of ``queries``.

    For a unitarily invariant norm (Frobenius, nuclear) the optimum lies in ``U What V^T``: projecting any ``W``
    onto these spans keeps every margin ``diff_k^T W z_k`` and does not increase the norm. Solving for ``What``
    (r1, r2) instead of ``W`` (d, d) is exact, and keeps the nuclear-norm SDP small when ``d > n (T - 1)``.
    """
    bases = []
    for rows in (diff, queries):
        _, s, Vt = np.linalg.svd(rows, full_matrices=False)
        bases.append(Vt[s > _RANK_TOL * s.max(initial=0.0)].T)  # directions the rows actually use
    return bases[0], bases[1]


def refuse_empty_constraints(M: np.ndarray, labels: list[str], cause: str) -> None:
    """Raise when a constraint row is zero: ``0 >= 1`` can never hold, and the solver would only say "infeasible"."""
    scale = max(float(np.abs(M).max(initial=0.0)), 1.0)
    empty = np.flatnonzero(np.abs(M).max(axis=1, initial=0.0) <= 1e-12 * scale)
    if empty.size:
        shown = ", ".join(labels[k] for k in empty[:5])
        more = f" and {empty.size - 5} more" if empty.size > 5 else ""
        raise InfeasibleProgramError(
            f"the program is infeasible: constraint(s) {shown}{more} read 0 >= 1 ({cause}); "
            f"drop or perturb those tokens, or select a different token"
        )


def margin_values(x: cp.Variable, M: np.ndarray) -> cp.Expression:
    """The constraint values ``M @ vec(x)``, shape (m,): margins ``<A_k, W>`` of every constraint."""
    return M @ cp.vec(x, order="C")


def kkt_residual(
    x: np.ndarray,
    M: np.ndarray,
    duals: np.ndarray,
    norm: Norm | str | float,
    E: np.ndarray | None = None,
    equality_duals: np.ndarray | None = None,
) -> float:
    """Largest KKT defect of ``min ||x|| s.t. M vec(x) >= 1 (, E vec(x) = b)`` at ``(x, duals)``, primal feasibility
    excluded.

    The maximum of the norm's stationarity residual at ``g = sum_k lambda_k A_k - sum_j nu_j E_j`` (cvxpy's
    Lagrangian adds ``nu^T (E x - b)``), the complementarity ``max_k lambda_k |M_k x - 1| / max lambda``
    (scale-free, since the slack is relative to the margin 1) and the dual infeasibility
    ``max_k (-lambda_k)_+ / max |lambda|``. Primal feasibility is reported apart, as ``max_violation``.
    """
    norm = as_norm(norm)
    g = M.T @ duals
    if E is not None and len(E):
        g = g - E.T @ equality_duals  # multi-token §4: sum lambda A - sum nu E in the subdifferential
    # x = 0 (the finite part of sets whose log-ratios are all 0) is optimal whatever the multipliers of its equalities
    stationarity = norm.stationarity(x, g.reshape(x.shape)) if x.any() else 0.0
    slack = M @ x.reshape(-1) - 1.0
    complementarity = float(np.max(np.abs(duals * slack), initial=0.0)) / max(float(duals.max(initial=0.0)), 1e-300)
    dual_infeasibility = float(np.max(-duals, initial=0.0)) / max(float(np.abs(duals).max(initial=0.0)), 1e-300)
    return max(stationarity, complementarity, dual_infeasibility)


def describe_sizes(M: np.ndarray, shape: tuple[int, ...]) -> str:
    """``"m constraints on a (d, d) variable"`` for error messages."""
    return f"{M.shape[0]} constraints on a {shape} variable"


def run_solver(problem: cp.Problem, solver: str, *, what: str) -> str:
    """Solve ``problem`` with the named solver at tight tolerances and return its status; a crash names the fix.

    cvxpy's own "may be inaccurate" warning is silenced: the status keeps that information, and
    :func:`warn_if_inaccurate` warns from the KKT certificate instead. So is its note that an l_p norm of a p with a
    large denominator is written with more second-order cones (``p = 29/19``): the solution is certified by the same
    KKT test whatever the cones.
    """
    options = _SCS_OPTIONS if solver == "SCS" else _CLARABEL_OPTIONS
    try:
        with warnings.catch_warnings():  # the status records it; our KKT check decides whether to warn
            warnings.filterwarnings("ignore", message="Solution may be inaccurate", category=UserWarning)
            warnings.filterwarnings("ignore", message="pnorm with p=.* is being approximated", category=UserWarning)
            problem.solve(solver=solver, **options)
    except cp.error.SolverError as err:
        raise InfeasibleProgramError(
            f"{what}: solver {solver} failed: {err}; try solver={'SCS' if solver == 'CLARABEL' else 'CLARABEL'}, "
            f"or rescale the tokens to order-one norms"
        ) from err
    return problem.status


class Equalities(NamedTuple):
    """Equality rows ``E vec(x) = target`` of a program (multi-token §3: equal logits inside a set)."""

    E: np.ndarray  # (k, prod(shape))
    target: np.ndarray  # (k,)


class ProgramCache:
    """cvxpy problems built once per shape, their constraint data ``cp.Parameter`` s, re-solved with new values.

    Repeated solves of one program shape (the SVM of each data set of a batch, :class:`~attnlab.svm.SelectionSVMs`)
    then canonicalise the problem once (cvxpy's DPP fast path) instead of once per solve. The solutions agree with a
    fresh solve's to the solver's accuracy (``tests/svm/test_selection_svms.py``).
    """

    def __init__(self) -> None:
        self._problems: dict[tuple, tuple[cp.Problem, cp.Variable, list[cp.Parameter]]] = {}

    def problem(
        self, norm: Norm, shape: tuple[int, ...], m: int, k: int
    ) -> tuple[cp.Problem, cp.Variable, list[cp.Parameter]]:
        """The problem of ``m`` margin rows and ``k`` equality rows on a variable of ``shape`` (built once)."""
        key = (norm, shape, m, k)
        if key not in self._problems:
            n = int(np.prod(shape))
            params = [cp.Parameter((m, n)), cp.Parameter(m), cp.Parameter((k, n)), cp.Parameter(k)]
            x = cp.Variable(shape)
            self._problems[key] = (_problem(x, norm, *params), x, params)
        return self._problems[key]

    def __len__(self) -> int:
        return len(self._problems)


def _problem(x: cp.Variable, norm: Norm, M: Any, rhs: Any, E: Any = None, target: Any = None) -> cp.Problem:
    """``min ||x|| s.t. M vec(x) >= rhs, E vec(x) = target`` (constants or Parameters); the margin rows come first."""
    constraints = [margin_values(x, M) >= rhs] if M.shape[0] else []  # spec ngd §5 / md §5: (x_sel - x_t)^T W z >= 1
    if E is not None and E.shape[0]:
        constraints.append(margin_values(x, E) == target)  # multi-token §3.1-3.2: equal logits inside a set
    return cp.Problem(norm.objective(x), constraints)


def _solve(
    M: np.ndarray,
    shape: tuple[int, ...],
    norm: Norm,
    solver: str,
    what: str,
    rhs: np.ndarray | None = None,
    equalities: Equalities | None = None,
    cache: ProgramCache | None = None,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None, str]:
    """One cvxpy solve of ``min ||x|| s.t. M vec(x) >= rhs`` (default 1), with equality rows if given:
    ``(x, margin duals, equality duals, status)``, the values None unless the status is optimal or
    optimal_inaccurate."""
    E, target = equalities if equalities is not None else (np.zeros((0, M.shape[1])), np.zeros(0))
    rhs = np.ones(len(M)) if rhs is None and cache is not None else rhs
    if cache is None:
        x = cp.Variable(shape)
        problem = _problem(x, norm, M, 1 if rhs is None else rhs, E, target)
    else:
        problem, x, params = cache.problem(norm, shape, len(M), len(E))
        for param, value in zip(params, (M, rhs, E, target)):
            param.value = value
    status = run_solver(problem, solver, what=f"{what} ({describe_sizes(M, shape)})")
    if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):  # values are None here: never read them
        return None, None, None, status
    value = np.asarray(x.value, dtype=np.float64).reshape(shape)
    duals = [np.asarray(c.dual_value, dtype=np.float64).reshape(-1) for c in problem.constraints]
    mu = duals.pop(0) if len(M) else np.zeros(0)
    return value, mu, duals[0] if duals else np.zeros(0), status


def _solution(
    M: np.ndarray,
    value: np.ndarray,
    mu: np.ndarray,
    norm: Norm,
    status: str,
    solver: str,
    equalities: Equalities | None = None,
    nu: np.ndarray | None = None,
) -> ProgramSolution:
    """A checked :class:`ProgramSolution` of ``min ||x|| s.t. M vec(x) >= 1`` from a value and its multipliers."""
    psi = norm.psi_multipliers
    duals = mu if psi is None else psi(mu, value)
    nu = np.zeros(0) if nu is None else (nu if psi is None else psi(nu, value))
    E = None if equalities is None else equalities.E
    return ProgramSolution(
        x=value,
        constraint_values=M @ value.reshape(-1),
        duals=np.maximum(duals, 0.0),
        status=status,
        solver=solver,
        norm_value=norm.value(value),
        kkt_residual=kkt_residual(value, M, duals, norm, E, nu),
        equality_duals=nu,
        equality_violation=0.0
        if E is None
        else float(np.max(np.abs(E @ value.reshape(-1) - equalities.target), initial=0.0)),
    )


def _rescued(
    M: np.ndarray, shape: tuple[int, ...], norm: Norm, solver: str, what: str, cache: ProgramCache | None
) -> ProgramSolution | None:
    """The solution of a program the solver called infeasible, found by two equivalent, better-scaled programs.

    Near ties (a selected token within ~1e-4 of another, or closer) the solution's norm is ~1/gap and the solver's
    absolute tolerances no longer fit the program as written. (a) The variable rescaled, ``x = x' / r_min`` with ``r_min``
    the smallest constraint norm: the solution is of order one. (b) Every constraint divided by its norm,
    ``M_k x / ||M_k|| >= 1 / ||M_k||``. The first whose solution meets every original constraint to the KKT
    tolerance, with a KKT residual within it, is returned; None when neither does.
    """
    r = np.linalg.norm(M, axis=1)
    attempts = [(M / r.min(), None, 1.0 / r.min()), (M / r[:, None], 1.0 / r, 1.0)]
    for M_try, rhs, unscale in attempts:
        try:
            value, mu, _, status = _solve(M_try, shape, norm, solver, what, rhs, cache=cache)
        except InfeasibleProgramError:  # the solver itself failed on this form: try the next
            continue
        if value is None:
            continue
        value = value * unscale  # (a): x = x' / r_min
        # multipliers of the original constraints: (a) mu = mu' unscale^degree (a norm's subgradient: mu' / r_min;
        # 1/2 ||x||^2: lambda' / r_min^2); (b) mu_k = mu'_k / ||M_k||
        mu = mu * unscale**norm.objective_degree if rhs is None else mu / r
        solution = _solution(M, value, mu, norm, status, solver)
        if max_violation(solution.constraint_values) <= norm.kkt_tol and solution.kkt_residual <= norm.kkt_tol:
            return solution
    return None


def solve_margin_program(
    M: np.ndarray,
    shape: tuple[int, ...],
    norm: Norm | str | float,
    solver: str,
    *,
    what: str,
    cause: str,
    equalities: Equalities | None = None,
    cache: ProgramCache | None = None,
) -> ProgramSolution:
    """Solve ``min ||x|| s.t. M vec(x) >= 1 (, E vec(x) = target)`` with cvxpy, check the status, read values and
    duals, self-check KKT.

    Parameters
    ----------
    M : np.ndarray, shape (m, prod(shape)), float64
        One flattened constraint matrix per row (``m = 0``: equality rows only).
    shape : tuple of int
        Shape of the variable, ``(d, d)`` or ``(d,)``.
    norm : Norm (or what :func:`~attnlab.svm.norms.as_norm` reads)
        The objective and its optimality test; ``"fro"`` duals satisfy ``x = sum lambda A``, a float ``p``'s duals
        ``grad psi(x) = sum lambda A``, ``"nuc"`` and ``p = 1`` duals give a subgradient.
    solver : "CLARABEL" or "SCS"
    what, cause : str
        Name of the program and the likely cause of infeasibility, for error messages.
    equalities : Equalities, optional
        Equality rows (multi-token §3); their multipliers are ``equality_duals`` and enter the stationarity test.
    cache : ProgramCache, optional
        Solve through the cache's problem of this shape (Parameters; built once) instead of a new problem.

    Raises
    ------
    InfeasibleProgramError
        On any status other than ``optimal`` / ``optimal_inaccurate``, or a solver failure. For a program without
        equality rows such a status is not believed at once, whatever the spread of the constraint norms: two
        better-scaled equivalent programs are tried first (:func:`_rescued`); if they fail too, the separability
        of the constraints decides the message: :class:`SolverToleranceError` when they are separable (the solver
        could not reach its tolerance at this scale), "infeasible" otherwise. Both messages give the smallest
        constraint norm.
    """
    norm = as_norm(norm)
    value, mu, nu, status = _solve(M, shape, norm, solver, what, equalities=equalities, cache=cache)
    if value is not None:
        solution = _solution(M, value, mu, norm, status, solver, equalities, nu)
        warn_if_inaccurate(solution, norm, what)
        return solution
    r = np.linalg.norm(M, axis=1)
    spread = float(r.min() / r.max()) if r.size and r.max() > 0 else 1.0
    sizes = describe_sizes(M, shape) + ("" if equalities is None else f" and {len(equalities.E)} equalities")
    # Whatever the spread: solvers misreport infeasibility at spreads of 1e-5 as well as 1e-8 (only failures pay);
    # a zero row (0 >= 1) is infeasible as it stands.
    if equalities is None and r.size and r.min() > 0:
        rescued = _rescued(M, shape, norm, solver, what, cache)
        if rescued is not None:
            warn_if_inaccurate(rescued, norm, what)
            return rescued
        margin = max_unit_margin(M / r[:, None], solver, what=what)  # separability of the row-normalised program
        if margin > SEPARABLE_TOL:
            raise SolverToleranceError(
                f"{what}: solver {solver} says {status} ({sizes}, solver {solver}), but the constraints are "
                f"separable (unit-norm margin {margin:.3g} of the normalised constraints): the solver cannot reach "
                f"its tolerance at this scale. The smallest constraint |x_sel - x_t| |z_i| is {spread:.3g} of the "
                f"largest; try norm='fro' with method='dual', the other solver, or move near-tied tokens apart"
            )
    raise InfeasibleProgramError(
        f"{what} is {status} ({sizes}, solver {solver}); likely cause: {cause}. Smallest constraint "
        f"|x_sel - x_t| |z_i|: {spread:.3g} of the largest"
    )


def warn_if_inaccurate(solution: ProgramSolution, norm: Norm, what: str) -> None:
    """Warn (:class:`SolverAccuracyWarning`) when the KKT residual or the constraint violation exceeds the norm's
    tolerance (``norm.kkt_tol``).

    Our KKT check certifies the solution itself, so an ``optimal_inaccurate`` status whose solution passes it is
    only recorded (in the result's ``status``), not warned about.
    """
    tol = norm.kkt_tol
    violation = max(max_violation(solution.constraint_values), solution.equality_violation)
    if solution.kkt_residual > tol or violation > tol:
        warnings.warn(
            f"{what}: solver {solution.solver} returned status {solution.status} with KKT residual "
            f"{solution.kkt_residual:.2e} and constraint violation {violation:.2e} (tolerance {tol:.0e}); treat "
            f"the solution as approximate or try the other solver",
            SolverAccuracyWarning,
            stacklevel=4,
        )


def max_unit_margin(M: np.ndarray, solver: str, *, what: str) -> float:
    """``max_{||w||_2 <= 1} min_k M_k w``: positive iff every margin can be made >= 1, and then ``1/||W_fro||_F``.

    Spec: kq-nuclear-norm §5 (A1 separability, "some W with all margins >= 1"); always feasible, so unlike the
    SVM it measures how far non-separable data are from separable (0 or below).

    The verdict ``margin > SEPARABLE_TOL`` is certified, whatever the solver's status: "separable" by the returned
    ``w`` itself (its own margin ``min_k M_k w / ||w||`` exceeds the threshold), "not separable" by the multipliers
    ``lambda >= 0`` of the margin rows (weak duality: every unit ``w`` has ``min_k M_k w <= ||M^T lambda|| / sum
    lambda``, at most the threshold). A solve whose verdict its own solution does not certify (an
    ``optimal_inaccurate`` stop far from the optimum) is done again with the other solver.

    Raises
    ------
    SolverToleranceError
        When neither solver's verdict is certified (the margin is within the solvers' accuracy of the threshold).
    """
    bounds = []
    for name in (solver, *(s for s in SOLVERS if s != solver)):
        margin, low, high = _unit_margin_bounds(M, name, what=what)
        if (low > SEPARABLE_TOL) if margin > SEPARABLE_TOL else (high <= SEPARABLE_TOL):
            return margin
        bounds.append(f"{name}: {margin:.3g}, certified only in [{low:.3g}, {high:.3g}]")
    raise SolverToleranceError(
        f"{what}: the solvers' unit-norm margins do not certify a verdict ({'; '.join(bounds)}; threshold "
        f"{SEPARABLE_TOL:.0e}): the data are within the solvers' accuracy of the boundary of separability; move "
        "near-tied tokens apart or rescale them"
    )


def _unit_margin_bounds(M: np.ndarray, solver: str, *, what: str) -> tuple[float, float, float]:
    """One solve of the unit-norm margin program: ``(margin, low, high)``, the solver's optimum and the bounds on
    the true optimum that its primal point (``low``) and its multipliers (``high``) certify."""
    w, t = cp.Variable(M.shape[1]), cp.Variable()
    margins = margin_values(w, M) >= t
    problem = cp.Problem(cp.Maximize(t), [margins, cp.norm(w, 2) <= 1])  # unit-norm margin
    run_solver(problem, solver, what=what)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):  # cannot happen for this bounded feasible program
        sizes = describe_sizes(M, (M.shape[1],))
        raise InfeasibleProgramError(f"{what} is {problem.status} ({sizes}, solver {solver})")
    x = np.asarray(w.value, dtype=np.float64)
    size = float(np.linalg.norm(x))
    low = float(np.min(M @ x, initial=math.inf)) / size if size > 0 else 0.0  # the margin of w / ||w||
    lam = np.maximum(np.asarray(margins.dual_value, dtype=np.float64).reshape(-1), 0.0)
    total = float(lam.sum())
    high = float(np.linalg.norm(M.T @ lam)) / total if total > 0 else math.inf  # weak duality
    return float(t.value), max(low, 0.0), high


def active(constraint_values: np.ndarray, tol: float = SUPPORT_TOL) -> np.ndarray:
    """Boolean mask of active constraints: slack ``value - 1 <= tol`` (margin 1, so relative = absolute)."""
    return constraint_values - 1.0 <= tol  # spec mirror-descent-lp §5: support tokens have margin exactly 1


def max_violation(constraint_values: np.ndarray) -> float:
    """Worst constraint violation ``max_k (1 - value_k)_+`` (0 for a feasible point)."""
    return float(np.max(1.0 - constraint_values, initial=0.0))
