"""t13-convexity's and t13-smoothness's statistic: the one-point ratios of f's closed-form gradient along the normal
eigenvectors of the Hessian tend to its eigenvalues (and their squares), which autograd of the closed-form values
gives independently of the gradient formulas (regression.theory, Theorem 1.3)."""

import numpy as np
import pytest
import torch

from attnlab.experiments.regression.common import TheoryConfig
from attnlab.experiments.regression.geometry import _one_point, eigen_ratios
from attnlab.regression import normal_curvatures, unwhiten, whitened_hessian, whitened_hessian_spectrum

CONFIG = TheoryConfig()
PROBLEM = CONFIG.problem()
HESSIAN = whitened_hessian(PROBLEM, CONFIG.mu, CONFIG.seed)
EIGENVALUES = normal_curvatures(whitened_hessian_spectrum(PROBLEM, CONFIG.mu, CONFIG.seed), CONFIG.d)


def test_the_central_ratios_along_each_eigenvector_tend_to_its_eigenvalue_and_its_square():
    convexity, smoothness = eigen_ratios(PROBLEM, CONFIG.mu, HESSIAN, 1e-3)
    assert convexity == pytest.approx(EIGENVALUES, abs=1e-5)
    assert smoothness == pytest.approx(EIGENVALUES**2, abs=1e-5)


def test_their_error_is_of_order_r_squared():
    """The tolerance's premise: from r to 2r the central estimate's error grows fourfold (c r^2 + O(r^4))."""
    r = 0.02 * min(CONFIG.singular_values) ** 0.5
    at_r, at_2r = (eigen_ratios(PROBLEM, CONFIG.mu, HESSIAN, s) for s in (r, 2 * r))
    for which, exact in ((0, EIGENVALUES), (1, EIGENVALUES**2)):
        growth = (at_2r[which] - exact) / (at_r[which] - exact)
        assert growth == pytest.approx(np.full_like(growth, 4.0), abs=0.05)


def test_along_a_mixed_normal_direction_they_are_the_quadratic_forms_of_the_hessian():
    """u = (u_a + u_b) / sqrt 2: <H u, u> = (lambda_a + lambda_b) / 2, ||H u||^2 = (lambda_a^2 + lambda_b^2) / 2."""
    eigenvalues, eigenvectors, (A0, C0) = HESSIAN
    a, b = 3, len(eigenvalues) - 1  # the first normal eigenvector (lambda_min) and the last (lambda_max)
    u = torch.from_numpy((eigenvectors[:, a] + eigenvectors[:, b]) / 2**0.5)
    r = 1e-3
    steps = r * torch.stack([u, -u])
    A = A0 + steps[:, : A0.numel()].reshape(-1, *A0.shape)
    C = C0 + steps[:, A0.numel() :].reshape(-1, *C0.shape)
    convexity, smoothness, _ = _one_point(PROBLEM, CONFIG.mu, *unwhiten(A, C, PROBLEM.Sigma, PROBLEM.Sigma))
    lam_a, lam_b = eigenvalues[a], eigenvalues[b]
    assert float(convexity.mean()) == pytest.approx((lam_a + lam_b) / 2, abs=1e-5)
    assert float(smoothness.mean()) == pytest.approx((lam_a**2 + lam_b**2) / 2, abs=1e-5)
