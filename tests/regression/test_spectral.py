"""Spectral initialization (spec §6.1): the start lies on the manifold estimated from the sample."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    empirical_covariance,
    empirical_regularizer,
    project,
    random_rotation,
    sample,
    spectral_init,
    token_matrix,
)
from attnlab.regression.linalg import spd_inverse


@pytest.mark.parametrize("tokens", ["covariates", "joint"])
def test_spectral_start_lies_on_the_estimated_manifold(problem, tokens):
    X, Y = sample(problem, 200, runs=3, seed=1)
    V0, Q0 = spectral_init(X, Y, tokens=tokens)
    Sigma_hat, Sigma_z_hat = empirical_covariance(X), empirical_covariance(token_matrix(X, Y, tokens))
    W_ols = empirical_covariance(X, Y) @ spd_inverse(Sigma_hat)
    proj = project(V0, Q0, W_ols, Sigma_hat, Sigma_z_hat)
    assert float(proj.distance.max()) < 1e-7  # sqrt of round-off: the squared distance is ~1e-16
    # it fits the estimated target exactly: V0 Sigma_z_hat Q0 = W_OLS (spec §6.1, whitened A C = M_hat)
    torch.testing.assert_close(V0 @ Sigma_z_hat @ Q0, W_ols, rtol=0, atol=1e-13)
    assert float(empirical_regularizer(V0, Q0, X, Y, tokens=tokens).abs().max()) < 1e-26  # R_hat = 0 to round-off


def test_any_rotation_gives_a_point_of_the_same_estimated_manifold(problem):
    X, Y = sample(problem, 100, seed=2)
    V0, Q0 = spectral_init(X, Y, R0=random_rotation(3, seed=5))
    torch.testing.assert_close(V0 @ empirical_covariance(X) @ Q0, V0 @ empirical_covariance(X) @ Q0)
    V1, Q1 = spectral_init(X, Y)
    torch.testing.assert_close(V0 @ empirical_covariance(X) @ Q0, V1 @ empirical_covariance(X) @ Q1, rtol=0, atol=1e-13)


def test_spectral_start_converges_to_the_true_manifold(problem):
    """spec §6.1 / Lemma 3: the distance to the true manifold shrinks with n (here 4x from n = 200 to 3200)."""
    dists = []
    for n in (200, 3200):
        X, Y = sample(problem, n, runs=20, seed=n)
        V0, Q0 = spectral_init(X, Y)
        dists.append(float(project(V0, Q0, problem.W_star, problem.Sigma).distance.median()))
    assert 2.5 < dists[0] / dists[1] < 6.5  # n^{-1/2} predicts 4; 20 runs give a median within ~30%


def test_k_less_than_d_and_too_few_samples_are_refused(problem):
    X, Y = sample(problem, 50, seed=0)
    with pytest.raises(ValidationError, match="k == 2 responses < d == 3.*k >= d"):
        spectral_init(X, Y[:, :2])
    with pytest.raises(ValidationError, match="singular.*n >= 3"):
        spectral_init(X[:2], Y[:2])


def test_a_start_rotation_without_orthonormal_columns_is_refused(problem):
    """R0 = diag(2, 1, 1) once returned a start 7 away from W_OLS (V0 Sigma_z Q0 != W_OLS) without a word."""
    X, Y = sample(problem, 50, seed=0)
    with pytest.raises(ValidationError, match="R0 does not have orthonormal columns"):
        spectral_init(X, Y, R0=torch.diag(torch.tensor([2.0, 1.0, 1.0], dtype=torch.float64)))
    with pytest.raises(ValidationError, match="R0 has shape"):
        spectral_init(X, Y, R0=torch.eye(3, 2, dtype=torch.float64))
