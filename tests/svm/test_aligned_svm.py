"""Program (9) on Assumption-4 data against the nuclear-norm SVM (Theorem 5.1) and its own KKT conditions.

Spec: kq-nuclear-norm §4 (program (9)), §3.2, §7 item 3.
"""

import warnings

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import aligned_pairs
from attnlab.svm import aligned_l1_svm, attention_svm

TOL = 1e-6  # Clarabel at gap 1e-10; entries of order one


@pytest.fixture
def aligned():
    return aligned_pairs(n=2, m_pairs=1, d=5, c=0.3, seed=1)


def test_program_9_solution_is_a_nuclear_norm_svm_solution(aligned):
    """Theorem 5.1: U_K diag(beta) U_Q^T is feasible for the W*-SVM and has its optimal nuclear norm."""
    sol = aligned_l1_svm(aligned.data, aligned.U_K, aligned.U_Q, aligned.pi)
    W = sol.W.numpy()
    X, Z = aligned.data.X.numpy(), aligned.data.Z.numpy()
    margins = [(X[i, 0] - X[i, t]) @ W @ Z[i] for i in range(2) for t in (1, 2)]
    assert min(margins) >= 1 - TOL
    nuclear = np.linalg.svd(W, compute_uv=False).sum()
    assert nuclear == pytest.approx(np.abs(sol.beta.numpy()).sum(), rel=1e-12)  # orthogonal bases
    assert nuclear == pytest.approx(attention_svm(aligned.data, "nuc").norm_value, rel=TOL)
    assert np.linalg.matrix_rank(W, tol=1e-8) <= aligned.data.n  # §7 item 3: rank <= n


def test_program_9_kkt(aligned):
    sol = aligned_l1_svm(aligned.data, aligned.U_K, aligned.U_Q, aligned.pi)
    X, Z = aligned.data.X.numpy(), aligned.data.Z.numpy()
    rows, lam = [], []
    for i in range(2):
        for t in (1, 2):
            b = np.zeros(5)
            b[int(aligned.pi[i])] = np.sign(X[i, 0] @ Z[i]) * ((X[i, 0] - X[i, t]) @ Z[i])  # spec §4 (9)
            rows.append(b)
            lam.append(float(sol.duals[i, t]))
    B, lam, beta = np.array(rows), np.array(lam), sol.beta.numpy()
    assert (B @ beta).min() >= 1 - TOL  # (a)
    g = B.T @ lam
    on = np.abs(beta) > 1e-6 * np.abs(beta).max()
    assert np.abs(g[on] - np.sign(beta[on])).max() <= TOL  # (b)
    assert np.abs(g[~on]).max(initial=0) <= 1 + TOL
    assert np.max(lam * np.abs(B @ beta - 1)) <= TOL  # (c)


def test_bad_bases_and_maps_are_named(aligned):
    data = aligned.data
    with pytest.raises(ValidationError, match="U_K is not orthogonal"):
        aligned_l1_svm(data, 2 * aligned.U_K, aligned.U_Q, aligned.pi)
    with pytest.raises(ValidationError, match="distinct indices"):
        aligned_l1_svm(data, aligned.U_K, aligned.U_Q, [0, 0])
    with pytest.raises(ValidationError, match=r"U_Q has shape \(4, 4\)"):
        aligned_l1_svm(data, aligned.U_K, torch.eye(4), aligned.pi)


@pytest.mark.parametrize("scale", [1e-4, 1e-2, 1e2, 1e4])
def test_program_9_is_scale_covariant(aligned, scale):
    """beta(a X, a Z) = beta(X, Z) / a^2 for a^2 from 1e-8 to 1e8 (solved at unit scale, then scaled back); solved as
    written, a^2 = 1e-14 read 0 >= 1 and a^2 = 1e14 was 3% off with only a warning."""
    base = aligned_l1_svm(aligned.data, aligned.U_K, aligned.U_Q, aligned.pi)
    data = aligned.data.with_(X=aligned.data.X * scale, Z=aligned.data.Z * scale)
    sol = aligned_l1_svm(data, aligned.U_K, aligned.U_Q, aligned.pi)
    np.testing.assert_allclose(sol.beta.numpy() * scale**2, base.beta.numpy(), rtol=1e-6, atol=1e-9 * base.norm_value)
    np.testing.assert_allclose(sol.W.numpy() * scale**2, base.W.numpy(), rtol=1e-6, atol=1e-9 * base.norm_value)
    assert sol.norm_value * scale**2 == pytest.approx(base.norm_value, rel=1e-6)
    np.testing.assert_allclose(sol.duals.numpy() * scale**2, base.duals.numpy(), rtol=1e-6, atol=1e-9)
    assert sol.support == base.support


@pytest.mark.parametrize("scale", [1e-7, 1e7])
def test_program_9_at_extreme_scales_is_solved_without_a_warning(aligned, scale):
    base = aligned_l1_svm(aligned.data, aligned.U_K, aligned.U_Q, aligned.pi)
    data = aligned.data.with_(X=aligned.data.X * scale, Z=aligned.data.Z * scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SolverAccuracyWarning at 1e7 before the program was solved at unit scale
        sol = aligned_l1_svm(data, aligned.U_K, aligned.U_Q, aligned.pi)
    assert sol.norm_value * scale**2 == pytest.approx(base.norm_value, rel=1e-6)
