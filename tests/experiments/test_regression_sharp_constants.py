"""t13-convexity's and t13-smoothness's old (revision 2) statistic, their hand-derived predictions and bound: the
one-point ratios of f's closed-form gradient along the normal eigenvectors of the Hessian tend to its eigenvalues (and
their squares), which autograd of the closed-form values gives independently of the gradient formulas; the derived
alpha, beta equal the extreme ones (regression.theory, Theorem 1.3)."""

import numpy as np
import pytest
import torch

from attnlab.experiments.regression.common import TheoryConfig
from attnlab.experiments.regression.geometry import (
    _along,
    _one_point,
    _smoothness_bound,
    derived_constants,
    eigen_ratios,
)
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


@pytest.mark.parametrize(
    ("singular_values", "k", "mu"),
    [((0.25, 0.2, 0.15), 6, 0.25), ((0.25, 0.2, 0.15), 3, 0.25), ((0.4, 0.1, 0.05), 5, 0.1), ((0.3, 0.2, 0.1), 4, 1.0)],
)
def test_the_hand_derived_alpha_and_beta_are_the_extreme_normal_eigenvalues_of_the_autograd_hessian(
    singular_values, k, mu
):
    """t13-convexity's and t13-smoothness's predictions (derived by hand, spec §4.4) against autograd of the closed
    forms at another instance: the two agree, so the derivation is f's; the rows never read the autograd Hessian."""
    problem = TheoryConfig(k=k, singular_values=singular_values).problem()
    normal = normal_curvatures(whitened_hessian_spectrum(problem, mu, 0), 3)
    alpha, beta = derived_constants(singular_values, k, mu)
    assert (alpha, beta) == pytest.approx((normal[0], normal[-1]), rel=1e-8)


def test_without_the_regularizer_the_derived_alpha_is_zero():
    """mu = 0: L alone is flat along the scaling orbit (spec §3.5), so Theorem 1.3's alpha is 0."""
    assert derived_constants((0.25, 0.2, 0.15), 6, 0.0)[0] == pytest.approx(0.0, abs=1e-15)


def test_the_smoothness_bound_holds_far_inside_and_at_rho_and_is_tight_at_m():
    """The derived B(dist) bounds ||grad f|| / dist at every point the row reads, and tends to beta as dist -> 0."""
    _, beta = derived_constants(CONFIG.singular_values, CONFIG.k, CONFIG.mu)
    for r in (1e-4, 0.25 * min(CONFIG.singular_values) ** 0.5):
        _, smoothness, _, dist = _one_point(PROBLEM, CONFIG.mu, *_along(PROBLEM, HESSIAN, r), with_distance=True)
        assert bool((smoothness <= _smoothness_bound(CONFIG, beta, dist) ** 2).all())
    assert float(_smoothness_bound(CONFIG, beta, torch.tensor(0.0))) == pytest.approx(beta)
