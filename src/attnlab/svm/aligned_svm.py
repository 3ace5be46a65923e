"""The l1 program (9) of the aligned general case: singular values of the limit of K Q^T on fixed bases.

Spec: kq-nuclear-norm §4 (program (9)) and §3.2 (alignment, Assumption 4, Theorem 5.1).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab._validation import ValidationError, check_tensor
from attnlab.data.dataset import TokenSelectionData
from attnlab.svm._program import (
    check_data,
    check_solver,
    check_square,
    constraint_pairs,
    refuse_empty_constraints,
    resolve_select,
    scaled_back,
    solve_margin_program,
    unit_scale,
)
from attnlab.svm.norms import lp
from attnlab.svm.result import AttentionSVMResult, svm_result

__all__ = ["aligned_l1_svm"]

# U^T U = I to this accuracy (orthonormal bases from a QR or SVD are exact to ~1e-15).
_ORTHOGONAL_TOL = 1e-8


def aligned_l1_svm(
    data: TokenSelectionData,
    U_K: object,  # noqa: N803 (the spec's symbol)
    U_Q: object,  # noqa: N803
    pi: object,
    select: object = None,
    solver: str | None = None,
) -> AttentionSVMResult:
    """Solve program (9), ``min ||beta||_1`` s.t. ``beta^T b_il >= 1``, and return ``W = U_K diag(beta) U_Q^T``.

    Spec: kq-nuclear-norm §4, program (9); Theorem 5.1 (its solution is a global solution of the W*-SVM under
    Assumption 4 with aligned bases).

    Parameters
    ----------
    data : TokenSelectionData
        Tokens ``X (n, T, d)``, queries ``Z (n, d)``.
    U_K, U_Q : array-like, shape (d, d)
        Orthogonal bases with ``x_{i,opt}/||x_{i,opt}|| = U_K[:, pi(i)]`` and ``z_i/||z_i|| = U_Q[:, pi(i)]``.
    pi : array-like of int, shape (n,)
        Injective map from sequences to basis directions.
    select : array-like of int, shape (n,), optional
        Default ``data.select``, else the optimal tokens.
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    AttentionSVMResult
        ``norm="l1-aligned"``, ``beta`` the solution of (9), ``W = U_K diag(beta) U_Q^T``; ``margin``,
        ``support`` and ``duals`` are those of program (9) (``sum lambda b`` is a subgradient of ``||beta||_1``).

    Raises
    ------
    ValidationError
        On non-orthogonal bases, a ``pi`` that is not injective or out of range; when the data are so far from
        unit scale that ``beta`` leaves float64's range (the program is solved at unit scale and scaled back).
    InfeasibleProgramError
        When (9) is infeasible (a non-selected token at least as aligned with ``z_i`` as the selected one).

    Notes
    -----
    ``b_il = sign(<x_{i,sel}, z_i>) <x_{i,sel} - x_il, z_i> e_{pi(i)}``. Under Assumption 4 the attention
    margins of ``W`` equal ``beta^T b_il`` and ``||W||_* = ||beta||_1``; otherwise ``W`` need not be feasible
    for the W*-SVM.
    """
    data = check_data(data)
    check_square(data, "aligned l1 program (9)")
    sizes = {"d": data.d}
    bases = {name: check_tensor(name, U, "dd", sizes).numpy() for name, U in (("U_K", U_K), ("U_Q", U_Q))}
    for name, U in bases.items():
        defect = float(np.abs(U.T @ U - np.eye(data.d)).max())
        if defect > _ORTHOGONAL_TOL:
            raise ValidationError(
                f"{name} is not orthogonal: max |U^T U - I| = {defect:.2e}; pass an orthonormal basis "
                f"(e.g. from numpy.linalg.qr)"
            )
    pi_arr = _check_pi(pi, data.n, data.d)
    solver = check_solver(solver)
    select_t = resolve_select(data, select)
    X, Z, sel = data.X.numpy(), data.Z.numpy(), select_t.numpy()
    pairs = constraint_pairs(data.T, select_t)
    i, t = pairs[:, 0], pairs[:, 1]
    x_sel = X[i, sel[i]]  # (m, d)
    coefficient = np.sign(np.sum(x_sel * Z[i], axis=1)) * np.sum((x_sel - X[i, t]) * Z[i], axis=1)  # spec §4 (9)
    M = np.zeros((len(pairs), data.d))
    M[np.arange(len(pairs)), pi_arr[i]] = coefficient  # spec kq-nuclear-norm §4 (9): b_il = c_il e_pi(i)
    M, scale = unit_scale(M)  # solved at unit scale (data of scale 1e-4 or 1e4 defeat the solver's tolerances)
    refuse_empty_constraints(
        M, [f"(i={a}, t={b})" for a, b in pairs], "<x_sel - x_t, z_i> = 0 or <x_sel, z_i> = 0 for that token"
    )
    what = f"aligned l1 program (9) (n={data.n}, T={data.T}, d={data.d})"
    cause = "some non-selected token is at least as aligned with the query as the selected token (c_il <= 0)"
    solution = solve_margin_program(M, (data.d,), lp(1.0), solver, what=what, cause=cause)
    note = f"largest |<x_sel - x_t, z_i>| {scale:.3g}; divide X and Z by a common factor c and the solution by c^2"
    solution = scaled_back(solution, (scale, 1.0), lp(1.0), what, scale_note=note)  # beta(a X, b Z) = beta / (a b)
    W = bases["U_K"] @ np.diag(solution.x) @ bases["U_Q"].T  # spec §4: W_inf = U_K diag(beta) U_Q^T
    return svm_result(solution, W, torch.from_numpy(solution.x.copy()), pairs, data, select_t, "l1-aligned")


def _check_pi(pi: object, n: int, d: int) -> np.ndarray:
    """``pi`` as an int array of ``n`` distinct indices in ``[0, d)``."""
    arr = np.asarray(pi)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValidationError(
            f"pi must be {n} integer basis indices (one per sequence), got shape {arr.shape}, dtype {arr.dtype}"
        )
    if arr.min() < 0 or arr.max() >= d or len(set(arr.tolist())) != n:
        raise ValidationError(f"pi must map the {n} sequences to distinct indices in [0, {d - 1}], got {arr.tolist()}")
    return arr.astype(np.int64)
