"""Geometry of the minima (spec §4): manifold points are global minima, Procrustes projection, Lemma 1 symmetry."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    extended_inner,
    manifold_point,
    population_excess_loss,
    population_gradient,
    project,
    random_rotation,
    regularizer,
    regularizer_gradient,
    target_svd,
    whiten,
)


def readings(problem):
    return [
        ("covariates", problem.Sigma, problem.d),
        ("joint", problem.token_covariance("joint"), problem.d + problem.k),
    ]


@pytest.mark.parametrize("reading", [0, 1])
def test_manifold_points_are_global_minima_with_zero_gradient(problem, reading):
    """spec §4.2 / T1.2: f(theta_R) = L_irr, R(theta_R) = 0, grad f(theta_R) = 0 for R in both components of O(d)."""
    tokens, Sigma_z, p = readings(problem)[reading]
    R = random_rotation(problem.d, p, runs=4, seed=1)
    R[1, :, 0] *= -1  # the other component (det = -1 when square)
    V, Q = manifold_point(R, problem.W_star, problem.Sigma, Sigma_z)
    args = (problem.Sigma, problem.W_star, problem.noise_std)
    assert (
        float(population_excess_loss(V, Q, *args, tokens=tokens).abs().max()) < 1e-26
    )  # (O(1) entries x 1e-14 round-off)^2
    assert float(regularizer(V, Q, problem.Sigma, Sigma_z).abs().max()) < 1e-28
    grads = population_gradient(V, Q, *args, tokens=tokens) + regularizer_gradient(V, Q, problem.Sigma, Sigma_z)
    assert max(float(g.abs().max()) for g in grads) < 1e-14  # round-off of O(1) entries


def test_projection_first_order_symmetry_and_singular_values(problem, params):
    """spec §4.3 Lemma 1: Delta_A^T A_bar + Delta_C C_bar^T symmetric; sigma_i(A_bar) = sigma_i(C_bar) = sigma_i(M*)^1/2."""
    V, Q = params(k=problem.k, runs=5, seed=7)
    proj = project(V, Q, problem.W_star, problem.Sigma)
    A, C = whiten(V, Q, problem.Sigma, problem.Sigma)
    A_bar, C_bar = whiten(proj.V, proj.Q, problem.Sigma, problem.Sigma)
    S = (A - A_bar).transpose(-1, -2) @ A_bar + (C - C_bar) @ C_bar.transpose(-1, -2)
    assert float((S - S.transpose(-1, -2)).abs().max()) < 1e-13  # round-off of O(1) products
    _, s_star, _ = target_svd(problem.W_star, problem.Sigma)
    for M in (A_bar, C_bar):
        torch.testing.assert_close(torch.linalg.svdvals(M), s_star.sqrt().expand(5, -1), rtol=1e-12, atol=1e-14)


def test_projection_beats_nearby_rotations(problem, params):
    """spec §4.3: R* minimises the distance; 200 random nearby rotations (and the other component) never do better."""
    V, Q = params(k=problem.k, seed=3)
    proj = project(V, Q, problem.W_star, problem.Sigma)
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        skew = 0.1 * torch.randn(3, 3, generator=gen, dtype=torch.float64)
        R = torch.linalg.matrix_exp(skew - skew.T) @ proj.R
        Vr, Qr = manifold_point(R, problem.W_star, problem.Sigma)
        dist2 = extended_inner(V - Vr, Q - Qr, V - Vr, Q - Qr, problem.Sigma, problem.Sigma)
        assert float(dist2) >= float(proj.distance) ** 2 - 1e-12  # round-off of a sum of O(1) squares


def test_distance_is_the_extended_norm_and_vanishes_on_the_manifold(problem, params):
    """spec §4.1: ||theta||_Sigma~^2 = ||A||_F^2 + ||C||_F^2; dist(theta_R, M) = 0."""
    V, Q = params(k=problem.k)
    A, C = whiten(V, Q, problem.Sigma, problem.Sigma)
    norm2 = extended_inner(V, Q, V, Q, problem.Sigma, problem.Sigma)
    torch.testing.assert_close(norm2, (A**2).sum() + (C**2).sum(), rtol=1e-12, atol=0)
    Vm, Qm = manifold_point(random_rotation(3, seed=4), problem.W_star, problem.Sigma)
    proj = project(Vm, Qm, problem.W_star, problem.Sigma)
    assert float(proj.distance) < 1e-7  # sqrt of round-off (~1e-15)
    torch.testing.assert_close(proj.V, Vm, rtol=0, atol=1e-12)


def test_joint_projection_has_orthonormal_columns(problem, params):
    """spec §10.1: with joint tokens R* is p x d with orthonormal columns, and the symmetry still holds."""
    p = problem.d + problem.k
    V, Q = params(k=problem.k, p=p, d=problem.d, seed=2)
    Sigma_z = problem.token_covariance("joint")
    proj = project(V, Q, problem.W_star, problem.Sigma, Sigma_z)
    torch.testing.assert_close(proj.R.T @ proj.R, torch.eye(3, dtype=torch.float64), rtol=0, atol=1e-13)
    A, C = whiten(V, Q, problem.Sigma, Sigma_z)
    A_bar, C_bar = whiten(proj.V, proj.Q, problem.Sigma, Sigma_z)
    S = (A - A_bar).T @ A_bar + (C - C_bar) @ C_bar.T
    assert float((S - S.T).abs().max()) < 1e-12


def test_wrong_rotation_shape_is_refused(problem):
    with pytest.raises(ValidationError, match="R has shape"):
        manifold_point(torch.eye(2, dtype=torch.float64), problem.W_star, problem.Sigma)


def test_a_rotation_without_orthonormal_columns_is_refused(problem):
    """theta_R is a minimum only for R^T R = I (spec §4.2): a scaled R would give a point off the manifold."""
    with pytest.raises(ValidationError, match=r"R does not have orthonormal columns: max \|R\^T R - I\| = 3"):
        manifold_point(torch.diag(torch.tensor([2.0, 1.0, 1.0], dtype=torch.float64)), problem.W_star, problem.Sigma)


def test_fewer_responses_than_covariates_are_refused_by_name(problem, params):
    """A2 (k >= d), as make_problem and spectral_init refuse it: W* with k = 2 < d = 3 has no manifold of minima."""
    W = problem.W_star[:2]
    with pytest.raises(ValidationError, match=r"W has k == 2 rows < d == 3 columns.*assumption A2"):
        manifold_point(torch.eye(3, dtype=torch.float64), W, problem.Sigma)
    V, Q = params(k=2)
    with pytest.raises(ValidationError, match=r"W_star has k == 2 rows < d == 3 columns.*assumption A2"):
        project(V, Q, W, problem.Sigma)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"d": 3, "p": 2}, "p == 2, must be >= 3"),
        ({"d": 0}, "d == 0, must be >= 1"),
        ({"d": 2, "runs": 0}, "runs == 0, must be >= 1"),
        ({"d": 2.0}, "d must be a int"),
        ({"d": 2, "seed": 1.5}, "seed must be a int"),
        ({"d": 2, "seed": -1}, "seed == -1, must be >= 0"),
    ],
)
def test_random_rotation_refuses_shapes_it_cannot_draw_and_bad_seeds(kwargs, message):
    d = kwargs.pop("d")
    with pytest.raises(ValidationError, match=message):
        random_rotation(d, **kwargs)


def test_random_rotation_has_p_rows_and_orthonormal_columns():
    R = random_rotation(2, 4, runs=3, seed=0)
    assert R.shape == (3, 4, 2)
    torch.testing.assert_close(R.transpose(-1, -2) @ R, torch.eye(2, dtype=torch.float64).expand(3, 2, 2))
