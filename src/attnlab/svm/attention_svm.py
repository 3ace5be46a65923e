"""The attention SVM: the max-margin key-query matrix that separates the selected token of each sequence.

Spec: implicit-bias-ngd §5 (W-SVM, Frobenius, and its dual), mirror-descent-lp §5 (l_p-AttSVM),
kq-nuclear-norm §4 (W*-SVM nuclear norm, (l1-SVM) diagonal program).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab._validation import ValidationError, check_in, check_tensor
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.selection import Selection
from attnlab.data.token_sets import is_token_sets
from attnlab.models.functional import attention_logits
from attnlab.svm._dual import solve_frobenius_dual
from attnlab.svm._program import (
    ProgramCache,
    ProgramSolution,
    attention_constraint_vectors,
    check_data,
    check_solver,
    constraint_matrices,
    max_violation,
    range_bases,
    refuse_empty_constraints,
    resolve_select,
    scaled_back,
    solve_margin_program,
    tied_sequences,
    unit_scale,
)
from attnlab.svm.diagonal_svm import diagonal_program
from attnlab.svm.errors import InfeasibleProgramError, SolverToleranceError
from attnlab.svm.multi_token import SetProgramResult, set_direction_svm
from attnlab.svm.norms import KKT_TOL, Norm, as_norm
from attnlab.svm.result import EMPTY_CAUSE, INFEASIBLE_CAUSE, AttentionSVMResult, svm_result

__all__ = ["AttentionSVMResult", "attended_svm", "attention_svm", "solve_attention_svm"]


def _primal(
    M: np.ndarray, shape: tuple[int, int], norm: Norm, solver: str, what: str, cache: ProgramCache | None
) -> ProgramSolution:
    """The primal program; for a norm with an exact dual (Frobenius), when the solver cannot reach its tolerance at
    near ties, the exact dual."""
    try:
        return solve_margin_program(M, shape, norm, solver, what=what, cause=INFEASIBLE_CAUSE, cache=cache)
    except SolverToleranceError as err:
        if not norm.exact_dual:
            raise
        try:
            solution = solve_frobenius_dual(M, shape, what=what)
        except ValidationError:  # dependent constraints: the dual's reduction does not apply
            raise err from None
        if max_violation(solution.constraint_values) > norm.kkt_tol or solution.kkt_residual > KKT_TOL:
            raise err from None
        return solution


def attention_svm(
    data: TokenSelectionData,
    norm: Norm | str | float = "fro",
    select: object = None,
    solver: str | None = None,
    *,
    method: str = "primal",
) -> AttentionSVMResult | SetProgramResult:
    """Solve the attention SVM ``min ||W|| s.t. (x_{i,sel_i} - x_{i,t})^T W z_i >= 1`` for all ``t != sel_i``.

    Spec: implicit-bias-ngd §5 (W-SVM), mirror-descent-lp §5 (l_p-AttSVM), kq-nuclear-norm §4 (W*-SVM, l1-SVM).

    Parameters
    ----------
    data : TokenSelectionData
        Tokens ``X (n, T, d)``, queries ``Z (n, d_q)`` (``d_q != d``: cross-attention, ``W`` is ``(d, d_q)``;
        multi-token §8), labels, optional head ``v (d,)``.
    norm : {"fro", "nuc", "l1-diag"}, float or Norm, default="fro"
        ``"fro"``: Frobenius (a QP on ``1/2 ||W||_F^2``); ``"nuc"``: nuclear norm (an SDP); a float ``p >= 1``:
        the entrywise ``||vec W||_p`` (``p = 1`` and ``p = float("inf")``, the limit of sign descent, are LPs);
        ``"l1-diag"``: ``W = diag(beta)`` with ``min ||beta||_1`` (an LP); a :class:`~attnlab.svm.norms.Norm` of
        your own, or its registered name (:func:`~attnlab.svm.norms.register_norm`).
    select : array-like of int of shape (n,), or token sets, optional
        Selected token per sequence; default ``data.select``, else ``data.optimal_tokens()``. Token sets (an
        ``(n, T)`` bool mask or n lists of indices; multi-token §2) solve the set-direction program instead
        (:func:`~attnlab.svm.set_direction_svm`, ``norm`` "fro" or "nuc") and return its
        :class:`~attnlab.svm.SetProgramResult`.
    solver : {"CLARABEL", "SCS"}, optional
        cvxpy solver; default Clarabel. SCS runs at eps 1e-9.
    method : {"primal", "dual"}, default="primal"
        ``"dual"`` (``norm="fro"`` only) solves the dual exactly by non-negative least squares, without cvxpy.

    Returns
    -------
    AttentionSVMResult
        Its ``W`` has shape ``(d, d_q)``.

    Raises
    ------
    InfeasibleProgramError
        When the program is infeasible (the message names the status, the sizes, the likely cause and the smallest
        constraint ``|x_sel - x_t| |z_i|``) or the solver fails. A status other than optimal is not believed at
        once (solvers misreport near ties, a selected token within ~1e-4 of another or closer, as infeasible):
        rescaled programs, and for ``"fro"`` the exact dual, are tried first;
        :class:`~attnlab.svm.SolverToleranceError` (a subclass) says when the constraints are separable but no
        solve reached the tolerance.
    ValidationError
        On ``data`` that is not a :class:`~attnlab.data.TokenSelectionData`, or a bad ``norm`` (e.g. ``p < 1``; the
        message names ``norm``), ``solver``, ``method`` or ``select``.

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
    >>> import torch
    >>> from attnlab.data import TokenSelectionData
    >>> X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    >>> data = TokenSelectionData(X, Z=[[1.0, 0.0], [0.0, 1.0]], y=[1, -1], select=[0, 0])
    >>> round(attention_svm(data).margin, 6)
    1.0
    """
    data = check_data(data)
    norm = as_norm(norm)
    solver = check_solver(solver)
    check_in("method", method, ("primal", "dual"))
    if method == "dual" and not norm.exact_dual:
        raise ValidationError(f'method="dual" solves only norm="fro", got norm={norm.label!r}; use method="primal"')
    sets = select if select is not None else data.select
    sets = sets.value if isinstance(sets, Selection) else sets  # a parsed selection: its indices or its mask
    if is_token_sets(sets):
        if method != "primal":
            raise ValidationError('token sets are solved by the primal program only; pass method="primal"')
        return set_direction_svm(data, sets, norm, solver)  # multi-token §3.1
    return solve_attention_svm(data, norm, resolve_select(data, select), solver, method=method)


def solve_attention_svm(
    data: TokenSelectionData,
    norm: Norm,
    select: torch.Tensor,
    solver: str,
    *,
    method: str = "primal",
    cache: ProgramCache | None = None,
) -> AttentionSVMResult:
    """:func:`attention_svm` on checked inputs (one token per sequence, a :class:`Norm`, a solver name); ``cache``
    re-solves programs of one shape through one cvxpy problem (:class:`~attnlab.svm._program.ProgramCache`)."""
    if norm.diagonal is not None:
        return diagonal_program(data, norm.diagonal, norm.label, select, solver, cache=cache)
    pairs, diff, queries = attention_constraint_vectors(data, select)
    (diff, diff_scale), (queries, query_scale) = unit_scale(diff), unit_scale(queries)  # solved at unit scale
    m, d, d_q = len(pairs), data.d, data.d_q
    labels = [f"(i={i}, t={t})" for i, t in pairs]
    what = f"attention SVM (norm={norm.label!r}, n={data.n}, T={data.T}, d={d}{'' if d_q == d else f', d_q={d_q}'})"
    if norm.unitarily_invariant:
        U, V = range_bases(diff, queries)  # unitarily invariant: W = U What V^T exactly (see range_bases)
        M = constraint_matrices(diff @ U, queries @ V).reshape(m, -1)  # <A_k, U What V^T> = <U^T A_k V, What>
        shape = (U.shape[1], V.shape[1])
    else:
        U = V = None
        M = constraint_matrices(diff, queries).reshape(m, d * d_q)  # multi-token §8: W is (d, d_q)
        shape = (d, d_q)
    refuse_empty_constraints(M, labels, EMPTY_CAUSE)
    if method == "dual":
        solution = solve_frobenius_dual(M, shape, what=what)
    else:
        solution = _primal(M, shape, norm, solver, what, cache)
    solution = scaled_back(solution, (diff_scale, query_scale), norm, what)  # W(a X, b Z) = W(X, Z) / (a b)
    W = solution.x if U is None else U @ solution.x @ V.T
    return svm_result(solution, W, None, pairs, data, select, norm.label)


def attended_svm(
    data: TokenSelectionData, W: object, norm: Norm | str | float = "fro", *, solver: str | None = None
) -> AttentionSVMResult:
    """The SVM of the selection a trained ``W`` attends to: ``select_i = argmax_t x_{i,t}^T W z_i``.

    Spec: implicit-bias-ngd §2 (the attended token) and §5 (the SVM of a selection): the direction a run that
    keeps its attended selection converges to.

    Parameters
    ----------
    data : TokenSelectionData
    W : array-like, shape (d, d_q)
        The trained combined matrix.
    norm : {"fro", "nuc", "l1-diag"} or float, default="fro"
        As in :func:`attention_svm`.
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    AttentionSVMResult
        Its ``select`` is the attended selection.

    Raises
    ------
    InfeasibleProgramError
        When the attended selection cannot be separated (e.g. a tie with another token), or ``W`` attends to no
        single token of some sequence: its largest logits there are tied (within float64 rounding, the tolerance
        of the optimal tokens' ties), so no selection is attended; the message names the sequences.
    ValidationError
        On ``data`` that is not a :class:`~attnlab.data.TokenSelectionData`, a ``W`` of the wrong shape or with
        non-finite entries, or a bad ``norm`` or ``solver``.
    """
    data = check_data(data)
    W_t = check_tensor("W", W, "dq", {"d": data.d, "q": data.d_q})
    logits = attention_logits(data.X, W_t, data.Z)  # (n, T)
    ties = tied_sequences(logits)
    if ties:
        raise InfeasibleProgramError(
            f"W attends to no single token in sequences {ties[:5]} ({len(ties)} in all): their largest logits "
            "x_it^T W z_i are tied, so W selects no token there and the attended selection has no SVM; pass a W that "
            "tells those tokens apart, or choose the tokens yourself with attention_svm(data, norm, select=...)"
        )
    select = Selection.attended(logits)  # implicit-bias-ngd §2: the attended token
    return attention_svm(data, norm, select=select, solver=solver)
