"""The objective above its minimum and its curvature at M (spec preconditioned-regression §3.3-3.4, §4.2-4.4)."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab._validation import ValidationError
from attnlab.regression import (
    manifold_point,
    normal_curvatures,
    objective_excess,
    random_rotation,
    whitened_hessian,
    whitened_hessian_spectrum,
)


def test_objective_excess_is_zero_on_the_manifold_and_positive_off_it(problem):
    """Theorem 1.2: f = L_irr on M (both components of O(d)); a step off M raises it."""
    Rs = random_rotation(problem.d, runs=4, seed=0)
    Rs[::2, :, 0] *= -1
    V, Q = manifold_point(Rs, problem.W_star, problem.Sigma)
    on = objective_excess(problem, 0.1, V, Q)
    assert on.shape == (4,) and float(on.abs().max()) < 1e-12
    assert bool((objective_excess(problem, 0.1, V + 0.05, Q) > 1e-6).all())


def test_hessian_has_zero_tangent_and_positive_normal_curvatures(problem):
    """M has dimension d(d-1)/2 (that of O(d)): as many zero eigenvalues, the rest > 0 (Theorem 1.3's alpha > 0)."""
    spectrum = whitened_hessian_spectrum(problem, 0.1, seed=0)
    d = problem.d
    assert spectrum.shape == (problem.k * d + d * d,)
    tangent = d * (d - 1) // 2
    assert np.abs(spectrum[:tangent]).max() < 1e-9 * spectrum[-1]
    normal = normal_curvatures(spectrum, d)
    assert len(normal) == len(spectrum) - tangent and normal[0] > 1e-6 * spectrum[-1]


def test_the_hessian_s_eigenvectors_are_orthonormal_and_its_eigenvalues_the_spectrum(problem):
    eigenvalues, eigenvectors, (A, C) = whitened_hessian(problem, 0.1, seed=0)
    assert np.array_equal(eigenvalues, whitened_hessian_spectrum(problem, 0.1, seed=0))
    assert eigenvectors.shape == (A.numel() + C.numel(),) * 2
    assert np.abs(eigenvectors.T @ eigenvectors - np.eye(len(eigenvalues))).max() < 1e-12


def test_bad_arguments_are_refused(problem):
    with pytest.raises(ValidationError, match="make_problem"):
        whitened_hessian_spectrum("problem", 0.1, seed=0)
    with pytest.raises(ValidationError, match="mu"):
        objective_excess(problem, -1.0, *manifold_point(random_rotation(3, seed=0), problem.W_star, problem.Sigma))
    with pytest.raises(ValidationError, match=r"d \(d - 1\) / 2 = 3"):
        normal_curvatures(np.zeros(3), 3)
