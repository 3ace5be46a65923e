"""The balancing regularizer (spec §3.4), its gradient (§5.2) and its empirical version."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    empirical_covariance,
    empirical_regularizer,
    regularizer,
    regularizer_gradient,
    sample,
    sym_inv_sqrt,
    sym_sqrt,
    token_matrix,
    whiten,
)


@pytest.mark.parametrize("joint", [False, True])
def test_gradient_matches_finite_differences(problem, params, finite_difference, joint):
    Sigma_z = problem.token_covariance("joint") if joint else None
    p = problem.d + (problem.k if joint else 0)
    V, Q = params(k=problem.k, p=p, d=problem.d)
    grad_V, grad_Q = regularizer_gradient(V, Q, problem.Sigma, Sigma_z)
    fd_V = finite_difference(lambda v: regularizer(v, Q, problem.Sigma, Sigma_z), V)
    fd_Q = finite_difference(lambda q: regularizer(V, q, problem.Sigma, Sigma_z), Q)
    torch.testing.assert_close(grad_V, fd_V, rtol=1e-7, atol=1e-8)  # quartic, central differences eps = 1e-6
    torch.testing.assert_close(grad_Q, fd_Q, rtol=1e-7, atol=1e-8)


def test_trace_form_equals_whitened_balance(problem, params):
    """spec §3.4: tr[((V^T V - Q Sigma Q^T) Sigma)^2] = ||A^T A - C C^T||_F^2 (a second, square-root route)."""
    V, Q = params(k=problem.k)
    A, C = whiten(V, Q, problem.Sigma, problem.Sigma)
    expected = ((A.T @ A - C @ C.T) ** 2).sum()
    torch.testing.assert_close(regularizer(V, Q, problem.Sigma), expected, rtol=1e-12, atol=0)  # round-off of eigh


def test_empirical_version_uses_sample_covariances(problem, params):
    X, Y = sample(problem, 50, seed=3)
    V, Q = params(k=problem.k, p=problem.d + problem.k, d=problem.d)
    Z = token_matrix(X, Y, "joint")
    expected = regularizer(V, Q, empirical_covariance(X), empirical_covariance(Z))
    torch.testing.assert_close(empirical_regularizer(V, Q, X, Y, tokens="joint"), expected, rtol=0, atol=0)


def test_orthogonal_action_keeps_regularizer_and_scaling_changes_it(problem, params):
    """spec §3.5: (V, Q) -> (V S^1/2 O S^-1/2, S^-1/2 O^T S^1/2 Q) keeps R; (cV, Q/c) changes it."""
    V, Q = params(k=problem.k)
    O, _ = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    root, inv_root = sym_sqrt(problem.Sigma), sym_inv_sqrt(problem.Sigma)
    rotated = regularizer(V @ root @ O @ inv_root, inv_root @ O.T @ root @ Q, problem.Sigma)
    torch.testing.assert_close(rotated, regularizer(V, Q, problem.Sigma), rtol=1e-12, atol=0)  # round-off only
    assert abs(float(regularizer(2 * V, Q / 2, problem.Sigma) - regularizer(V, Q, problem.Sigma))) > 1e-3


def test_non_spd_covariance_is_refused(params):
    V, Q = params()
    with pytest.raises(ValidationError, match="Sigma is not positive definite"):
        regularizer(V, Q, torch.zeros(3, 3, dtype=torch.float64))
