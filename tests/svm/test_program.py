"""The shared pieces of the programs: the KKT self-check goes red on wrong answers, the mirror map inverts, the
separability margin and the NNLS dual match closed forms.

Spec: mirror-descent-lp §3 and §5, kq-nuclear-norm §4 and §5, implicit-bias-ngd §5.
"""

import numpy as np
import pytest

from attnlab.svm import _program as program
from attnlab.svm import norms
from attnlab.svm._dual import solve_frobenius_dual
from attnlab.svm.norms import as_norm, lp


def one_constraint():
    """min ||W|| s.t. <A, W> >= 1 with a single A: W = A / ||A||_F^2 for Frobenius, lambda = 1 / ||A||_F^2."""
    A = np.array([[1.0, 2.0], [0.0, -2.0]])  # ||A||_F^2 = 9
    return A.reshape(1, -1), A


def test_single_constraint_frobenius_closed_form_by_nnls_and_by_cvxpy():
    M, A = one_constraint()
    by_nnls = solve_frobenius_dual(M, (2, 2), what="test")
    by_cvxpy = program.solve_margin_program(M, (2, 2), "fro", "CLARABEL", what="test", cause="")
    for solution in (by_nnls, by_cvxpy):
        np.testing.assert_allclose(solution.x, A / 9, atol=1e-9)
        np.testing.assert_allclose(solution.duals, [1 / 9], atol=1e-9)


def test_single_constraint_nuclear_closed_form():
    """||W||_* >= <A, W> / ||A||_op: the optimum is W = u v^T / sigma_1 (A's top singular pair), lambda = 1/sigma_1."""
    M, A = one_constraint()
    U, s, Vt = np.linalg.svd(A)
    solution = program.solve_margin_program(M, (2, 2), "nuc", "CLARABEL", what="test", cause="")
    assert solution.norm_value == pytest.approx(1 / s[0], rel=1e-7)
    np.testing.assert_allclose(solution.duals, [1 / s[0]], rtol=1e-7)
    np.testing.assert_allclose(solution.x, np.outer(U[:, 0], Vt[0]) / s[0], atol=1e-7)


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.0, 1.5, 3.0])
def test_kkt_residual_is_small_at_the_optimum_and_large_off_it(make_data, constraints, norm):
    data = make_data(0)
    _, A = constraints(data, data.optimal_tokens())
    M = A.reshape(A.shape[0], -1)
    sol = program.solve_margin_program(M, (4, 4), norm, "CLARABEL", what="test", cause="")
    assert program.kkt_residual(sol.x, M, sol.duals, norm) <= as_norm(norm).kkt_tol
    assert program.kkt_residual(1.3 * sol.x, M, sol.duals, norm) > 0.1  # a scaled point breaks complementarity
    assert program.kkt_residual(sol.x, M, 2 * sol.duals, norm) > 0.1  # scaled multipliers break stationarity
    assert program.kkt_residual(sol.x.T, M, sol.duals, norm) > 1e-3  # a different point breaks it too


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0, 3.0, 6.0])
def test_inverse_mirror_map_inverts_grad_psi(p):
    x = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_allclose(norms.inverse_grad_psi(norms.grad_psi(x, p), p), x, rtol=1e-12)
    assert np.sum(norms.grad_psi(x, p) * x) == pytest.approx(np.sum(np.abs(x) ** p))  # <grad psi(W), W> = ||W||_p^p


def test_l1_subgradient_gap():
    x = np.array([2.0, 0.0, -1.0])
    assert lp(1.0).stationarity(x, np.array([1.0, 0.3, -1.0])) == 0.0
    assert lp(1.0).stationarity(x, np.array([1.0, 1.5, -1.0])) == pytest.approx(0.5)  # |g| > 1 off the support
    assert lp(1.0).stationarity(x, np.array([0.8, 0.0, -1.0])) == pytest.approx(0.2)  # g != sign on it


def test_max_unit_margin_is_inverse_frobenius_norm_of_the_svm(make_data, constraints):
    data = make_data(1)
    _, A = constraints(data, data.optimal_tokens())
    M = A.reshape(A.shape[0], -1)
    fro = program.solve_margin_program(M, (4, 4), "fro", "CLARABEL", what="test", cause="")
    assert program.max_unit_margin(M, "CLARABEL", what="test") == pytest.approx(1 / fro.norm_value, rel=1e-7)


def test_max_unit_margin_is_negative_for_opposite_constraints():
    M = np.array([[1.0, 0.0], [-2.0, 0.0]])  # w_1 >= t and -2 w_1 >= t: best t is 0 at w_1 = 0
    assert program.max_unit_margin(M, "CLARABEL", what="test") == pytest.approx(0.0, abs=1e-8)


@pytest.mark.parametrize("scales", [(3.0, 2.0), (1e-20, 1e-30), (1e40, 1e30)])
def test_a_zero_solution_scales_back_to_zero_with_its_multipliers_scaled(scales):
    duals = np.array([0.5, 0.0, 2.0])
    zero = program.ProgramSolution(np.zeros((2, 2)), np.zeros(3), duals, "optimal", "CLARABEL", 0.0, 0.0)
    back = program.scaled_back(zero, scales, as_norm("fro"), "test")
    assert back.norm_value == 0.0 and not back.x.any()
    np.testing.assert_allclose(back.duals, duals / (scales[0] * scales[1]) ** 2, rtol=1e-12)
