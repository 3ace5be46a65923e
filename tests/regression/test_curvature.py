"""The objective above its minimum and its curvature at M (spec preconditioned-regression §3.3-3.4, §4.2-4.4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    manifold_point,
    normal_curvatures,
    objective_excess,
    project,
    random_rotation,
    segment_curvature,
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


def test_segment_curvature_bounds_the_excess_as_the_descent_lemma_says(problem):
    """Taylor from the projection (f = f*, grad f = 0 there): f - f* <= beta_seg / 2 dist^2 at points off M, where
    the Hessian at M alone does not bound it; on M the segment is a point and beta_seg is the largest eigenvalue
    there. The batched Hessians against torch.autograd.functional.hessian of the unbatched closed form."""
    mu = 0.1
    top_at_m = float(whitened_hessian_spectrum(problem, mu, seed=0)[-1])
    V, Q = manifold_point(random_rotation(problem.d, runs=6, seed=1), problem.W_star, problem.Sigma)
    assert torch.allclose(segment_curvature(problem, mu, V, Q), torch.full((6,), top_at_m), rtol=1e-9)
    gen = torch.Generator().manual_seed(2)
    scales = torch.tensor([0.05, 0.1, 0.2, 0.4, 0.8, 1.2], dtype=torch.float64)[:, None, None]
    V_off = V + scales * torch.randn(V.shape, generator=gen, dtype=torch.float64)
    Q_off = Q + scales * torch.randn(Q.shape, generator=gen, dtype=torch.float64)
    beta = segment_curvature(problem, mu, V_off, Q_off, points=17)
    ratio = (
        objective_excess(problem, mu, V_off, Q_off) / project(V_off, Q_off, problem.W_star, problem.Sigma).distance ** 2
    )
    assert bool((ratio <= beta / 2).all()) and bool((ratio > top_at_m / 2).any())  # the constant at M is too small
    from attnlab.regression import population
    from attnlab.regression.curvature import _hessians
    from attnlab.regression.manifold import unwhiten, whiten
    from attnlab.regression.regularizer import value

    S = problem.Sigma
    A, C = whiten(V_off, Q_off, S, S)
    sizes = (A[0].numel(), C[0].numel())

    def f(flat):  # one point, unbatched: the closed forms of spec §3.3-3.4
        a, c = flat.split(sizes)
        V1, Q1 = unwhiten(a.reshape(A.shape[1:]), c.reshape(C.shape[1:]), S, S)
        return population.excess(V1, Q1, S, S, problem.W_star) + mu * value(V1, Q1, S, S)

    reference = torch.stack(
        [torch.autograd.functional.hessian(f, torch.cat([a.flatten(), c.flatten()])) for a, c in zip(A, C)]
    )
    assert torch.allclose(_hessians(problem, mu, A, C), reference, rtol=1e-12, atol=1e-12)


def test_bad_arguments_are_refused(problem):
    with pytest.raises(ValidationError, match="make_problem"):
        whitened_hessian_spectrum("problem", 0.1, seed=0)
    with pytest.raises(ValidationError, match="mu"):
        objective_excess(problem, -1.0, *manifold_point(random_rotation(3, seed=0), problem.W_star, problem.Sigma))
    with pytest.raises(ValidationError, match="points"):
        segment_curvature(problem, 0.1, *manifold_point(random_rotation(3, seed=0), problem.W_star, problem.Sigma), 1)
    with pytest.raises(ValidationError, match="V"):
        segment_curvature(problem, 0.1, torch.zeros(2, 2, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValidationError, match=r"d \(d - 1\) / 2 = 3"):
        normal_curvatures(np.zeros(3), 3)
