"""The diagonal program for p = 2 against its KKT conditions and the attention SVM restricted to diagonals.

Spec: kq-nuclear-norm §4 (the l1 case is tested with the attention SVM's "l1-diag" norm in test_attention_svm).
"""

import cvxpy as cp
import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.svm import attention_svm, diagonal_svm

TOL = 1e-6  # Clarabel at gap 1e-10 on entries of order one


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    return TokenSelectionData(torch.randn(2, 3, 6, generator=g), torch.randn(2, 6, generator=g), [1, -1], select=[0, 0])


def constraint_vectors(data):
    X, Z = data.X.numpy(), data.Z.numpy()
    return np.array([Z[i] * (X[i, 0] - X[i, t]) for i in range(2) for t in (1, 2)])  # kq-nuclear-norm §1: B_il


def test_l2_diagonal_kkt_beta_equals_sum_of_multipliers(data):
    sol = diagonal_svm(data, p=2)
    B, beta = constraint_vectors(data), sol.beta.numpy()
    lam = np.array([float(sol.duals[i, t]) for i in range(2) for t in (1, 2)])
    assert sol.norm == "l2-diag" and sol.norm_value == pytest.approx(np.linalg.norm(beta))
    assert (B @ beta).min() >= 1 - TOL and np.all(lam >= 0)
    np.testing.assert_allclose(beta, B.T @ lam, atol=TOL)  # stationarity of 1/2 ||beta||^2
    assert np.max(lam * np.abs(B @ beta - 1)) <= TOL


def test_diagonal_program_is_the_attention_svm_over_diagonal_matrices(data):
    """The spec's constraints on a diagonal cvxpy matrix variable give the same optimum, for p = 1 and p = 2."""
    X, Z = data.X.numpy(), data.Z.numpy()
    beta = cp.Variable(6)
    W = cp.diag(beta)
    cons = [(X[i, 0] - X[i, t]) @ W @ Z[i] >= 1 for i in range(2) for t in (1, 2)]
    for p in (1, 2):
        problem = cp.Problem(cp.Minimize(cp.norm(beta, p)), cons)
        problem.solve(solver="CLARABEL")
        assert diagonal_svm(data, p=p).norm_value == pytest.approx(problem.value, rel=1e-6)
    np.testing.assert_array_equal(diagonal_svm(data).W.numpy(), attention_svm(data, "l1-diag").W.numpy())


def test_p_below_one_is_refused(data):
    with pytest.raises(ValidationError, match="p == 0.5, must be >= 1"):
        diagonal_svm(data, p=0.5)


def test_linf_diagonal_matches_an_independent_linprog(data):
    """p = inf is accepted here too: min t s.t. -t <= beta_j <= t, B beta >= 1, written out for scipy's HiGHS."""
    B = constraint_vectors(data)
    m, k = B.shape
    A_ub = np.vstack(
        [
            np.hstack([np.eye(k), -np.ones((k, 1))]),
            np.hstack([-np.eye(k), -np.ones((k, 1))]),
            np.hstack([-B, np.zeros((m, 1))]),
        ]
    )
    cost = np.r_[np.zeros(k), 1.0]
    lp = linprog(cost, A_ub=A_ub, b_ub=np.r_[np.zeros(2 * k), -np.ones(m)], bounds=(None, None), method="highs")
    assert lp.status == 0
    sol = diagonal_svm(data, float("inf"))
    assert sol.norm_value == pytest.approx(lp.fun, rel=1e-6)  # solver tolerance, as the other LP tests
    assert sol.kkt_residual <= 1e-5
