"""Geometry of the minima (spec §4): manifold points are global minima, Procrustes projection, Lemma 1 symmetry."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    extended_inner,
    manifold_point,
    near_manifold_point,
    perturbed_manifold_point,
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


@pytest.mark.parametrize("distance", [0.0, 0.01, 0.029, 0.1])
def test_near_manifold_points_lie_at_the_distance_asked_for(problem, distance):
    """spec §4.3: theta_bar + t (theta - theta_bar) projects onto theta_bar (Lemma 1), so dist is set exactly."""
    V, Q = near_manifold_point(problem, 4, distance, seed=2)
    assert V.shape == (4, problem.k, problem.d) and Q.shape == (4, problem.d, problem.d)
    reached = project(V, Q, problem.W_star, problem.Sigma).distance
    torch.testing.assert_close(reached, torch.full((4,), distance, dtype=torch.float64), rtol=1e-9, atol=1e-15)
    again = near_manifold_point(problem, 4, distance, seed=2)
    assert torch.equal(V, again[0]) and torch.equal(Q, again[1])  # the same points for the same seed


def test_near_manifold_points_are_near_their_rotation_and_move_with_the_seed(problem):
    """The point is theta_R of the seed's rotation moved by ``distance`` (whitened), not a point elsewhere on M."""
    V, Q = near_manifold_point(problem, 3, 0.03, seed=5)
    V0, Q0 = manifold_point(random_rotation(problem.d, runs=3, seed=5), problem.W_star, problem.Sigma)
    A, C = whiten(V - V0, Q - Q0, problem.Sigma, problem.Sigma)
    moved = (A.square().sum((-2, -1)) + C.square().sum((-2, -1))).sqrt()
    # |theta_bar - theta_R| <= 2 x 0.03 (the drawn step and its residual), then 0.03 along the normal
    assert float(moved.max()) < 0.09
    other = near_manifold_point(problem, 3, 0.03, seed=6)
    assert not torch.allclose(V, other[0])


def test_the_old_perturbed_points_were_far_outside_rho(problem):
    """Why the experiments moved: raw N(0, 0.05^2) entries put the point several rho from M (audit fid0 #2)."""
    rho = 0.25 * float(torch.linalg.svdvals(problem.W_star @ torch.linalg.cholesky(problem.Sigma)).min()) ** 0.5
    V, Q = perturbed_manifold_point(problem, 4, 0.05, seed=0)
    assert float(project(V, Q, problem.W_star, problem.Sigma).distance.min()) > 2 * rho


@pytest.mark.parametrize(("distance", "message"), [(-0.1, "distance == -0.1, must be >= 0"), (float("inf"), "finite")])
def test_near_manifold_point_refuses_a_negative_or_infinite_distance(problem, distance, message):
    with pytest.raises(ValidationError, match=message):
        near_manifold_point(problem, 2, distance, seed=0)
