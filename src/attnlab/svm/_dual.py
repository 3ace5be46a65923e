"""The exact dual solver of the Frobenius attention SVM, as a non-negative least-squares problem.

Spec: implicit-bias-ngd §5 (dual of the W-SVM, derived there [D]).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

from attnlab._validation import ValidationError
from attnlab.svm._program import ProgramSolution, kkt_residual, warn_if_inaccurate
from attnlab.svm.norms import FRO

# ||M c - 1|| above this (times sqrt m) means the equality system M c = 1 has no solution (dependent rows leave a
# residual of order one; near ties give a least-norm c of norm ~1/gap, whose round-off reaches ~1e-8).
_CONSISTENCY_TOL = 1e-6


def solve_frobenius_dual(M: np.ndarray, shape: tuple[int, ...], *, what: str) -> ProgramSolution:
    """Solve ``max_{lambda >= 0} sum lambda - 1/2 ||M^T lambda||^2`` exactly and return ``W = M^T lambda``.

    Parameters
    ----------
    M : np.ndarray, shape (m, d*d), float64
        Flattened constraint matrices ``A_k`` (row-major).
    shape : tuple of int
        Shape of ``W``.
    what : str
        Name of the program, for the accuracy warning.

    Returns
    -------
    ProgramSolution
        ``status="optimal"``, ``solver="NNLS"``.

    Raises
    ------
    ValidationError
        When ``M c = 1`` has no solution (linearly dependent constraints with different right-hand sides), where
        the reduction to NNLS does not apply; use ``method="primal"``.

    Notes
    -----
    With any ``c`` such that ``M c = 1``, ``1/2 ||M^T lambda - c||^2 = 1/2 ||M^T lambda||^2 - sum lambda +
    const``, so the dual is the NNLS problem ``min_{lambda >= 0} ||M^T lambda - c||``, solved exactly by the
    Lawson-Hanson active-set method. ``c = M^+ 1`` exists whenever the ``A_k`` are linearly independent (generic
    data with ``n (T - 1) <= d^2``), and it is itself feasible, so the primal is then never infeasible.
    """
    m = M.shape[0]
    r = np.linalg.norm(M, axis=1)
    unit = M / r[:, None]  # rows of norm one: near ties (rows of norm ~1e-8) do not pass for dependent rows
    c, *_ = np.linalg.lstsq(unit, 1.0 / r, rcond=None)  # least-norm c with M c = 1
    if np.linalg.norm(r * (unit @ c) - 1.0) > _CONSISTENCY_TOL * np.sqrt(m):
        raise ValidationError(
            f'method="dual" needs linearly independent constraints, but the {m} constraint matrices on a {shape} '
            f'variable are dependent with unequal right-hand sides; use method="primal"'
        )
    # spec implicit-bias-ngd §5: max sum lambda - 1/2 ||sum lambda A||^2 over lambda >= 0, in lambda' = r lambda
    scaled_duals, _ = nnls(unit.T, c)
    duals = scaled_duals / r
    W = (M.T @ duals).reshape(shape)  # spec implicit-bias-ngd §5: W_mm = sum lambda A
    solution = ProgramSolution(
        x=W,
        constraint_values=M @ W.reshape(-1),
        duals=duals,
        status="optimal",
        solver="NNLS",
        norm_value=FRO.value(W),
        kkt_residual=kkt_residual(W, M, duals, FRO),
    )
    warn_if_inaccurate(solution, FRO, what)
    return solution
