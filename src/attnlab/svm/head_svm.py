"""The head SVM: the max-margin linear head on the selected tokens (u-SVM for p = 2, l_p head SVM otherwise).

Spec: implicit-bias-ngd §5 (u-SVM), mirror-descent-lp §5 (l_p-SVM for the head).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnlab.data.dataset import TokenSelectionData
from attnlab.svm._program import (
    active,
    check_data,
    check_solver,
    max_violation,
    refuse_empty_constraints,
    resolve_select,
    scaled_back,
    solve_margin_program,
    unit_scale,
)
from attnlab.svm.norms import check_p, program_norm

__all__ = ["HeadSVMResult", "head_svm"]


@dataclass(frozen=True, eq=False)
class HeadSVMResult:
    """Solution of a head SVM.

    Attributes
    ----------
    v : torch.Tensor, shape (d,), float64
        The max-margin head.
    status : str
        cvxpy status, ``"optimal"`` or ``"optimal_inaccurate"`` (see :class:`AttentionSVMResult`; trust
        ``kkt_residual``).
    margin : float
        ``min_i y_i x_{i,sel_i}^T v`` (1 at the optimum).
    norm_value : float
        ``||v||_p``.
    support : tuple of int
        Sequences whose constraint is active (slack at most 1e-6).
    duals : torch.Tensor, shape (n,), float64
        Multipliers ``lambda_i >= 0`` with ``grad psi(v) = sum_i lambda_i y_i x_{i,sel_i}``
        (``v`` itself for ``p = 2``; a subgradient of ``||v||_1`` for ``p = 1``).
    kkt_residual : float
        Largest KKT defect (stationarity, complementarity, dual feasibility).
    solver : str
    max_violation : float
        ``max_i (1 - y_i x_{i,sel_i}^T v)_+``.
    p : float
    select : torch.Tensor, shape (n,), int64
    """

    v: torch.Tensor
    status: str
    margin: float
    norm_value: float
    support: tuple[int, ...]
    duals: torch.Tensor
    kkt_residual: float
    solver: str
    max_violation: float
    p: float
    select: torch.Tensor


def head_svm(
    data: TokenSelectionData, p: float = 2.0, select: object = None, solver: str | None = None
) -> HeadSVMResult:
    """Solve ``min ||v||_p s.t. y_i x_{i,sel_i}^T v >= 1`` for all ``i``.

    Spec: implicit-bias-ngd §5 (u-SVM, ``p = 2``), mirror-descent-lp §5 (l_p-SVM for the head).

    Parameters
    ----------
    data : TokenSelectionData
        Tokens ``X (n, T, d)`` and labels ``y (n,)``.
    p : float, default=2.0
        Norm exponent, ``p >= 1``; ``p = 2`` is solved as the QP on ``1/2 ||v||^2``, ``p = 1`` is an LP.
    select : array-like of int, shape (n,), optional
        Token used for each sequence; default ``data.select``, else the optimal tokens of ``data.v``.
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    HeadSVMResult

    Raises
    ------
    InfeasibleProgramError
        When no head separates the selected tokens by label (e.g. one token selected with both labels).
    ValidationError
        On ``p < 1``, a bad solver or selection; when the data are so far from unit scale that the solution or its
        multipliers leave float64's range (the program is solved at unit scale and scaled back).

    Examples
    --------
    >>> import torch
    >>> from attnlab.data import TokenSelectionData
    >>> X = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [-1.0, 0.0]]])
    >>> sol = head_svm(TokenSelectionData(X, y=[1, -1]), select=[0, 1])
    >>> sol.support, round(sol.norm_value, 6)
    ((1,), 1.0)
    """
    data = check_data(data)
    p = check_p(p)
    solver = check_solver(solver)
    select_t = resolve_select(data, select)
    idx = torch.arange(data.n)
    M = (data.y[:, None] * data.X[idx, select_t]).numpy()  # spec implicit-bias-ngd §5: y_i x_{i,opt}^T u >= 1, (n, d)
    M, scale = unit_scale(M)  # solved at unit scale (data of scale 1e-8 or 1e8 defeat the solver's tolerances)
    refuse_empty_constraints(M, [f"(i={i})" for i in range(data.n)], "the selected token of that sequence is zero")
    what = f"head SVM (p={p}, n={data.n}, d={data.d})"
    cause = "the selected tokens are not linearly separable by their labels (e.g. one token selected with both labels)"
    norm = program_norm(p)
    solution = solve_margin_program(M, (data.d,), norm, solver, what=what, cause=cause)
    note = f"largest |x_sel| {scale:.3g}; divide X by a factor c and the solution by c"
    solution = scaled_back(solution, (scale, 1.0), norm, what, scale_note=note)  # v(a X) = v(X) / a
    return HeadSVMResult(
        v=torch.from_numpy(solution.x.copy()),
        status=solution.status,
        margin=float(solution.constraint_values.min()),
        norm_value=solution.norm_value,  # ||v||_p, scaled back in logs (|v|^p of a 1e-150 v underflows)
        support=tuple(int(i) for i in np.flatnonzero(active(solution.constraint_values))),
        duals=torch.from_numpy(solution.duals.copy()),
        kkt_residual=solution.kkt_residual,
        solver=solution.solver,
        max_violation=max_violation(solution.constraint_values),
        p=p,
        select=select_t.clone(),
    )
