"""Rectangular W (cross-attention, d_q != d) in every SVM program, against formulations written here from the
definitions: one cvxpy constraint per (sequence, token) on a plain (d, d_q) variable, and scipy's linprog for the
l_inf program.

Spec: multi-token §8 (rectangular W), implicit-bias-ngd §5, mirror-descent-lp §5, kq-nuclear-norm §4.
"""

import cvxpy as cp
import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.svm import attention_svm, diagonal_svm
from attnlab.svm.multi_token import set_direction_svm, svm_equivalence

D, D_Q = 5, 3


def _data(seed=0, n=4, T=3):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, T, D, generator=gen, dtype=torch.float64)
    Z = torch.randn(n, D_Q, generator=gen, dtype=torch.float64)
    return TokenSelectionData(X, Z=Z, y=torch.ones(n), select=torch.zeros(n, dtype=torch.int64))


def _cos(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _plain(data, norm):
    """min ||W|| s.t. (x_{i,0} - x_{i,t})^T W z_i >= 1 for t != 0, written out on a (d, d_q) variable."""
    X, Z = data.X.numpy(), data.Z.numpy()
    W = cp.Variable((D, D_Q))
    cons = [(X[i, 0] - X[i, t]) @ W @ Z[i] >= 1 for i in range(data.n) for t in range(1, data.T)]
    objective = {"fro": cp.norm(W, "fro"), "nuc": cp.normNuc(W)}.get(norm)
    if objective is None:
        objective = cp.pnorm(cp.vec(W, order="C"), norm) if norm != np.inf else cp.max(cp.abs(W))
    cp.Problem(cp.Minimize(objective), cons).solve(solver="CLARABEL")
    return W.value


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.0, 1.5, np.inf])
def test_attention_svm_of_a_rectangular_w_matches_a_plain_program(norm):
    data = _data()
    svm = attention_svm(data, norm)
    assert svm.W.shape == (D, D_Q)
    assert _cos(svm.W, _plain(data, norm)) >= 1 - 1e-6
    assert svm.kkt_residual <= 1e-4
    assert svm.margin == pytest.approx(1.0, abs=1e-6)


def test_the_linf_program_of_a_rectangular_w_matches_scipy_linprog():
    data = _data(1)
    X, Z = data.X.numpy(), data.Z.numpy()
    rows = np.array([np.outer(X[i, 0] - X[i, t], Z[i]).ravel() for i in range(data.n) for t in range(1, data.T)])
    k = D * D_Q  # variables: vec W (k entries) and the bound s >= |W_ab|
    cost = np.r_[np.zeros(k), 1.0]
    A_ub = np.block([[-rows, np.zeros((len(rows), 1))], [np.eye(k), -np.ones((k, 1))], [-np.eye(k), -np.ones((k, 1))]])
    b_ub = np.r_[-np.ones(len(rows)), np.zeros(2 * k)]
    lp = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=[(None, None)] * (k + 1), method="highs")
    svm = attention_svm(data, float("inf"))
    assert svm.norm_value == pytest.approx(lp.fun, rel=1e-7)
    assert float(np.max(1 - rows @ svm.W.numpy().ravel())) <= 1e-7  # feasible, and of the LP's optimal value


def test_the_direction_program_of_token_sets_takes_a_rectangular_w():
    data = _data(2, n=3, T=4)
    sets = [[0, 1], [2], [1, 3]]
    result = set_direction_svm(data, sets, "fro")
    X, Z = data.X.numpy(), data.Z.numpy()
    W = cp.Variable((D, D_Q))
    cons = []
    for i, inside in enumerate(sets):
        outside = [t for t in range(4) if t not in inside]
        cons += [(X[i, a] - X[i, t]) @ W @ Z[i] >= 1 for a in inside for t in outside]
        cons += [(X[i, a] - X[i, b]) @ W @ Z[i] == 0 for a in inside for b in inside if a < b]
    cp.Problem(cp.Minimize(cp.norm(W, "fro")), cons).solve(solver="CLARABEL")
    assert result.W.shape == (D, D_Q)
    assert _cos(result.W, W.value) >= 1 - 1e-6
    assert result.kkt_residual <= 1e-5
    trained = 7.0 * result.W + 0.01 * torch.randn(D, D_Q, generator=torch.Generator().manual_seed(0))
    assert svm_equivalence(data, trained, sets).W.shape == (D, D_Q)


def test_square_only_programs_refuse_cross_attention_naming_both_widths():
    with pytest.raises(ValidationError, match=r"d = 5 and queries of width d_q = 3 .*attention_svm\(data, norm\)"):
        diagonal_svm(_data())
    with pytest.raises(ValidationError, match=r"diagonal SVM has a diagonal, square W"):
        attention_svm(_data(), "l1-diag")
