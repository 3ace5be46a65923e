"""The result of an attention SVM, shared by the full, diagonal and aligned programs.

Spec: implicit-bias-ngd §5, mirror-descent-lp §5, kq-nuclear-norm §4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnlab.data.dataset import TokenSelectionData
from attnlab.svm._program import ProgramSolution, active, max_violation

__all__ = ["AttentionSVMResult"]

EMPTY_CAUSE = "the selected token equals that token of its sequence, or the query z_i is zero"
INFEASIBLE_CAUSE = (
    "the selected tokens are not separable: the constraints contradict each other (e.g. two sequences with the "
    "same query need the same token pair ranked both ways); check is_separable(data, select) or choose another "
    "selection"
)


@dataclass(frozen=True, eq=False)
class AttentionSVMResult:
    """Solution of an attention SVM.

    Attributes
    ----------
    W : torch.Tensor, shape (d, d_q), float64 (square but for cross-attention)
        The max-margin matrix (``diag(beta)`` for the diagonal programs).
    status : str
        cvxpy status, ``"optimal"`` or ``"optimal_inaccurate"`` (the dual method reports ``"optimal"``). We ask
        Clarabel for a 1e-10 gap, which it often misses by a digit on round-off ("optimal_inaccurate"); trust
        ``kkt_residual`` and ``max_violation``, which are checked (a warning is raised when they are too large).
    margin : float
        Smallest constraint value ``min_{i, t != sel_i} (x_{i,sel_i} - x_{i,t})^T W z_i`` (1 at the optimum).
    norm_value : float
        Value of the program's norm at ``W`` (``||beta||_p`` for the diagonal and aligned programs).
    support : tuple of (int, int)
        Active constraints ``(i, t)``: slack at most 1e-6 (spec mirror-descent-lp §5).
    duals : torch.Tensor, shape (n, T), float64
        Multipliers ``lambda_{i,t} >= 0``, zero on the selected tokens, normalised so that ``sum lambda A`` is
        ``W`` (``"fro"``), ``grad psi(W) = sign(W)|W|^{p-1}`` (float ``p``), a subgradient of ``||W||_*``
        (``"nuc"``) or, for the diagonal and aligned programs, ``sum lambda B`` is a subgradient of
        ``||beta||_1`` (``grad psi(beta)`` for ``p > 1``).
    kkt_residual : float
        Largest KKT defect (stationarity, complementarity, dual feasibility) at ``(W, duals)``.
    solver : str
        ``"CLARABEL"``, ``"SCS"`` or ``"NNLS"`` (the dual method).
    max_violation : float
        Worst primal constraint violation ``max (1 - margin_{i,t})_+``.
    norm : str or float
        The program solved: ``"fro"``, ``"nuc"``, a float ``p``, ``"l1-diag"`` / ``"l{p}-diag"``
        (:func:`~attnlab.svm.diagonal_svm`) or ``"l1-aligned"`` (:func:`~attnlab.svm.aligned_l1_svm`).
    select : torch.Tensor, shape (n,), int64
        The selected token of each sequence.
    beta : torch.Tensor, shape (d,), float64, or None
        The solution of a diagonal or aligned program (``W = diag(beta)`` or ``U_K diag(beta) U_Q^T``), else None.
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
    norm: str | float
    select: torch.Tensor
    beta: torch.Tensor | None = None


def svm_result(
    solution: ProgramSolution,
    W: np.ndarray,
    beta: torch.Tensor | None,
    pairs: np.ndarray,
    data: TokenSelectionData,
    select: torch.Tensor,
    norm: str | float,
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
