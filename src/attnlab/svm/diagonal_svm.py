"""The diagonal attention SVM: the max-margin ``W = diag(beta)``, in the l1 norm (kq-nuclear-norm's program) or l_p.

Spec: kq-nuclear-norm §4 ((W*diag-SVM) = (l1-SVM); the l2 program is the limit of training ``beta`` directly, §7.2).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.data.dataset import TokenSelectionData
from attnlab.svm._program import (
    ProgramCache,
    attention_constraint_vectors,
    check_data,
    check_solver,
    check_square,
    refuse_empty_constraints,
    resolve_select,
    scaled_back,
    solve_margin_program,
    unit_scale,
)
from attnlab.svm.norms import Norm, check_p, program_norm
from attnlab.svm.result import EMPTY_CAUSE, INFEASIBLE_CAUSE, AttentionSVMResult, svm_result

__all__ = ["diagonal_program", "diagonal_svm"]


def diagonal_svm(
    data: TokenSelectionData, p: float = 1.0, select: object = None, solver: str | None = None
) -> AttentionSVMResult:
    """Solve ``min ||beta||_p s.t. beta^T B_{i,t} >= 1``, ``B_{i,t} = z_i * (x_{i,sel_i} - x_{i,t})``.

    Spec: kq-nuclear-norm §4 ((l1-SVM), equal to the diagonal nuclear-norm program (W*diag-SVM)).

    Parameters
    ----------
    data : TokenSelectionData
        Tokens ``X (n, T, d)``, queries ``Z (n, d)``.
    p : float, default=1.0
        ``p = 1`` is the LP of kq-nuclear-norm §4 (the limit of the K, Q flow); ``p = 2`` is solved as the QP on
        ``1/2 ||beta||^2`` (the limit of training ``beta`` directly).
    select : array-like of int, shape (n,), optional
        Default ``data.select``, else the optimal tokens.
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    AttentionSVMResult
        ``W = diag(beta)``, ``beta`` (d,), ``norm = "l1-diag"`` for ``p = 1`` (else ``"l{p}-diag"``); ``duals``
        with ``sum lambda B`` a subgradient of ``||beta||_1`` (``p = 1``) or equal to ``grad psi(beta)``.

    Raises
    ------
    InfeasibleProgramError
        When no diagonal ``W`` separates the selected tokens (common when ``n (T - 1) > d``).
    ValidationError
        On ``p < 1``, a bad solver or selection, or queries of another width than the tokens (``d_q != d``).

    Notes
    -----
    ``<diag(beta), A_{i,t}> = beta^T diag(A_{i,t}) = beta^T B_{i,t}``, so these are the attention-SVM constraints
    restricted to diagonal ``W``.
    """
    data = check_data(data)
    p = check_p(p)
    solver = check_solver(solver)
    name = "l1-diag" if p == 1.0 else f"l{p:g}-diag"
    return diagonal_program(data, program_norm(p), name, resolve_select(data, select), solver)


def diagonal_program(
    data: TokenSelectionData,
    norm: Norm,
    label: str,
    select: torch.Tensor,
    solver: str,
    *,
    cache: ProgramCache | None = None,
) -> AttentionSVMResult:
    """:func:`diagonal_svm` for the norm ``norm`` of ``beta`` on checked inputs; the result's ``norm`` is ``label``.

    Spec: kq-nuclear-norm §4 ((W*diag-SVM) = (l1-SVM) for the l1 norm of ``beta``).

    Parameters
    ----------
    data : TokenSelectionData
    norm : Norm
        The norm of ``beta`` (``FRO`` solves the l2 program as the QP on ``1/2 ||beta||^2``).
    label : str
        The program's name in the result (``"l1-diag"``).
    select : torch.Tensor, shape (n,), int64
        The selected token of each sequence.
    solver : str
    cache : ProgramCache, optional
        Re-solve programs of one shape through one cvxpy problem.

    Returns
    -------
    AttentionSVMResult
    """
    check_square(data, "diagonal SVM")
    pairs, diff, queries = attention_constraint_vectors(data, select)
    (diff, diff_scale), (queries, query_scale) = unit_scale(diff), unit_scale(queries)  # solved at unit scale
    M = diff * queries  # spec kq-nuclear-norm §1: B_il = z_i * (x_opt - x_il), the diagonal of A_il
    labels = [f"(i={i}, t={t})" for i, t in pairs]
    refuse_empty_constraints(M, labels, EMPTY_CAUSE + " in the diagonal (z_i * (x_sel - x_t) = 0)")
    what = f"diagonal attention SVM ({label}, n={data.n}, T={data.T}, d={data.d})"
    solution = solve_margin_program(M, (data.d,), norm, solver, what=what, cause=INFEASIBLE_CAUSE, cache=cache)
    solution = scaled_back(solution, (diff_scale, query_scale), norm, what)  # beta(a X, b Z) = beta / (a b)
    W = np.diag(solution.x)  # spec kq-nuclear-norm §4: (W*diag-SVM) = (l1-SVM), W = diag(beta)
    return svm_result(solution, W, torch.from_numpy(solution.x.copy()), pairs, data, select, label)
