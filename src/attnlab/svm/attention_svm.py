"""The attention SVM: the max-margin key-query matrix that separates the selected token of each sequence.

Spec: implicit-bias-ngd §5 (W-SVM, Frobenius, and its dual), mirror-descent-lp §5 (l_p-AttSVM),
kq-nuclear-norm §4 (W*-SVM nuclear norm, (l1-SVM) diagonal program).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnlab._validation import ValidationError, check_in
from attnlab.data.dataset import TokenSelectionData
from attnlab.svm._dual import solve_frobenius_dual
from attnlab.svm._program import (
    Norm,
    ProgramSolution,
    active,
    attention_constraint_vectors,
    check_data,
    check_norm,
    check_solver,
    constraint_matrices,
    max_violation,
    range_bases,
    refuse_empty_constraints,
    resolve_select,
    solve_margin_program,
)

__all__ = ["AttentionSVMResult", "attention_svm"]

_EMPTY_CAUSE = "the selected token equals that token of its sequence, or the query z_i is zero"
_INFEASIBLE_CAUSE = (
    "the selected tokens are not separable: the constraints contradict each other (e.g. two sequences with the "
    "same query need the same token pair ranked both ways); check is_separable(data, select) or choose another "
    "selection"
)


@dataclass(frozen=True, eq=False)
class AttentionSVMResult:
    """Solution of an attention SVM.

    Attributes
    ----------
    W : torch.Tensor, shape (d, d), float64
        The max-margin matrix (``diag(beta)`` for ``"l1-diag"``).
    status : str
        cvxpy status, ``"optimal"`` or ``"optimal_inaccurate"`` (the dual method reports ``"optimal"``). We ask
        Clarabel for a 1e-10 gap, which it often misses by a digit on round-off ("optimal_inaccurate"); trust
        ``kkt_residual`` and ``max_violation``, which are checked (a warning is raised when they are too large).
    margin : float
        Smallest constraint value ``min_{i, t != sel_i} (x_{i,sel_i} - x_{i,t})^T W z_i`` (1 at the optimum).
    norm_value : float
        Value of the program's norm at ``W`` (``||beta||_1`` for ``"l1-diag"``).
    support : tuple of (int, int)
        Active constraints ``(i, t)``: slack at most 1e-6 (spec mirror-descent-lp §5).
    duals : torch.Tensor, shape (n, T), float64
        Multipliers ``lambda_{i,t} >= 0``, zero on the selected tokens, normalised so that ``sum lambda A`` is
        ``W`` (``"fro"``), ``grad psi(W) = sign(W)|W|^{p-1}`` (float ``p``), a subgradient of ``||W||_*``
        (``"nuc"``) or, for ``"l1-diag"``, ``sum lambda B`` is a subgradient of ``||beta||_1``.
    kkt_residual : float
        Largest KKT defect (stationarity, complementarity, dual feasibility) at ``(W, duals)``.
    solver : str
        ``"CLARABEL"``, ``"SCS"`` or ``"NNLS"`` (the dual method).
    max_violation : float
        Worst primal constraint violation ``max (1 - margin_{i,t})_+``.
    norm : str or float
        The program solved.
    select : torch.Tensor, shape (n,), int64
        The selected token of each sequence.
    beta : torch.Tensor, shape (d,), float64, or None
        The diagonal of ``W`` for ``"l1-diag"``, else None.
    """

    W: torch.Tensor
    status: str
    margin: float
    norm_value: float
    support: tuple[tuple[int, int], ...]
    duals: torch.Tensor
    kkt_residual: float
    solver: str
    max_violation: float
    norm: Norm
    select: torch.Tensor
    beta: torch.Tensor | None = None


def attention_svm(
    data: TokenSelectionData,
    norm: Norm = "fro",
    select: object = None,
    solver: str | None = None,
    *,
    method: str = "primal",
) -> AttentionSVMResult:
    """Solve the attention SVM ``min ||W|| s.t. (x_{i,sel_i} - x_{i,t})^T W z_i >= 1`` for all ``t != sel_i``.

    Spec: implicit-bias-ngd §5 (W-SVM), mirror-descent-lp §5 (l_p-AttSVM), kq-nuclear-norm §4 (W*-SVM, l1-SVM).

    Parameters
    ----------
    data : TokenSelectionData
        Tokens ``X (n, T, d)``, queries ``Z (n, d)``, labels, optional head ``v (d,)``.
    norm : {"fro", "nuc", "l1-diag"} or float, default="fro"
        ``"fro"``: Frobenius (a QP on ``1/2 ||W||_F^2``); ``"nuc"``: nuclear norm (an SDP); a float ``p >= 1``:
        the entrywise ``||vec W||_p`` (``p = 1`` is an LP); ``"l1-diag"``: ``W = diag(beta)`` with
        ``min ||beta||_1`` (an LP).
    select : array-like of int, shape (n,), optional
        Selected token per sequence; default ``data.select``, else ``data.optimal_tokens()``.
    solver : {"CLARABEL", "SCS"}, optional
        cvxpy solver; default Clarabel. SCS runs at eps 1e-9.
    method : {"primal", "dual"}, default="primal"
        ``"dual"`` (``norm="fro"`` only) solves the dual exactly by non-negative least squares, without cvxpy.

    Returns
    -------
    AttentionSVMResult

    Raises
    ------
    InfeasibleProgramError
        When the program is infeasible (the message names the status, the sizes and the likely cause) or the
        solver fails.
    ValidationError
        On a bad ``norm`` (e.g. ``p < 1``), ``solver``, ``method`` or ``select``.

    Warns
    -----
    SolverAccuracyWarning
        When the KKT residual or the constraint violation exceeds 1e-5 (1e-4 for a float ``p > 1``, whose
        power-cone form is less accurate). An ``optimal_inaccurate`` status that passes is only recorded.

    Notes
    -----
    With ``A_{i,t} = (x_{i,sel_i} - x_{i,t}) z_i^T`` the constraints read ``<A_{i,t}, W> >= 1``; the diagonal
    program's constraint vectors are ``B_{i,t} = z_i * (x_{i,sel_i} - x_{i,t})``, the diagonals of ``A_{i,t}``.
    The Frobenius dual is ``max_{lambda >= 0} sum lambda - 1/2 ||sum lambda A||_F^2`` with ``W = sum lambda A``.
    Both unitarily invariant norms (``"fro"``, ``"nuc"``) are solved exactly on the spans of the token
    differences and of the queries (``W = U What V^T``, ``What`` at most ``n (T - 1) x n``), so the nuclear-norm
    SDP stays small for wide tokens (``d = 128``, ``n (T - 1) = 40``: seconds instead of an out-of-memory SDP).
    Entrywise ``l_p`` programs keep all ``d^2`` variables (``d = 128``: about 2 s for ``p = 1``, 40 s for
    ``p = 1.5``).

    Examples
    --------
    >>> X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    >>> data = TokenSelectionData(X, Z=[[1.0, 0.0], [0.0, 1.0]], y=[1, -1], select=[0, 0])
    >>> round(attention_svm(data).margin, 6)
    1.0
    """
    data = check_data(data)
    norm = check_norm(norm)
    solver = check_solver(solver)
    check_in("method", method, ("primal", "dual"))
    if method == "dual" and norm != "fro":
        raise ValidationError(f'method="dual" solves only norm="fro", got norm={norm!r}; use method="primal"')
    select_t = resolve_select(data, select)
    pairs, diff, queries = attention_constraint_vectors(data, select_t)
    m, d = len(pairs), data.d
    labels = [f"(i={i}, t={t})" for i, t in pairs]
    what = f"attention SVM (norm={norm!r}, n={data.n}, T={data.T}, d={d})"
    beta = None
    if norm == "l1-diag":
        M = diff * queries  # spec kq-nuclear-norm §1: B_il = z_i * (x_opt - x_il), the diagonal of A_il
        refuse_empty_constraints(M, labels, _EMPTY_CAUSE + " in the diagonal (z_i * (x_sel - x_t) = 0)")
        solution = solve_margin_program(M, (d,), 1.0, solver, what=what, cause=_INFEASIBLE_CAUSE)
        W = np.diag(solution.x)  # spec kq-nuclear-norm §4: (W*diag-SVM) = (l1-SVM), W = diag(beta)
        beta = torch.from_numpy(solution.x.copy())
    elif norm in ("fro", "nuc"):
        U, V = range_bases(diff, queries)  # unitarily invariant: W = U What V^T exactly (see range_bases)
        M = constraint_matrices(diff @ U, queries @ V).reshape(m, -1)  # <A_k, U What V^T> = <U^T A_k V, What>
        refuse_empty_constraints(M, labels, _EMPTY_CAUSE)
        shape = (U.shape[1], V.shape[1])
        if method == "dual":
            solution = solve_frobenius_dual(M, shape, what=what)
        else:
            solution = solve_margin_program(M, shape, norm, solver, what=what, cause=_INFEASIBLE_CAUSE)
        W = U @ solution.x @ V.T
    else:
        M = constraint_matrices(diff, queries).reshape(m, d * d)
        refuse_empty_constraints(M, labels, _EMPTY_CAUSE)
        solution = solve_margin_program(M, (d, d), norm, solver, what=what, cause=_INFEASIBLE_CAUSE)
        W = solution.x
    return svm_result(solution, W, beta, pairs, data, select_t, norm)


def svm_result(
    solution: ProgramSolution,
    W: np.ndarray,
    beta: torch.Tensor | None,
    pairs: np.ndarray,
    data: TokenSelectionData,
    select: torch.Tensor,
    norm: Norm,
) -> AttentionSVMResult:
    """Wrap a raw solution: duals onto the (n, T) grid, support pairs, margin and violation."""
    duals = torch.zeros(data.n, data.T, dtype=torch.float64)
    duals[pairs[:, 0], pairs[:, 1]] = torch.from_numpy(solution.duals)
    mask = active(solution.constraint_values)
    return AttentionSVMResult(
        W=torch.from_numpy(np.ascontiguousarray(W)),
        status=solution.status,
        margin=float(solution.constraint_values.min()),
        norm_value=solution.norm_value,
        support=tuple((int(i), int(t)) for i, t in pairs[mask]),
        duals=duals,
        kkt_residual=solution.kkt_residual,
        solver=solution.solver,
        max_violation=max_violation(solution.constraint_values),
        norm=norm,
        select=select.clone(),
        beta=beta,
    )
