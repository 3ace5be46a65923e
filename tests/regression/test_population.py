"""Closed-form population loss (spec §3.3) and its gradient (§5.1) against finite differences and Monte-Carlo."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import population_excess_loss, population_gradient, population_loss, sample, token_covariance


@pytest.mark.parametrize("tokens", ["covariates", "joint"])
def test_population_gradient_matches_finite_differences(problem, params, finite_difference, tokens):
    p = problem.d + (problem.k if tokens == "joint" else 0)
    V, Q = params(k=problem.k, p=p, d=problem.d)
    args = (problem.Sigma, problem.W_star, problem.noise_std)
    grad_V, grad_Q = population_gradient(V, Q, *args, tokens=tokens)
    fd_V = finite_difference(lambda v: population_loss(v, Q, *args, tokens=tokens), V)
    fd_Q = finite_difference(lambda q: population_loss(V, q, *args, tokens=tokens), Q)
    # central differences of a quartic with O(1) entries: truncation ~eps^2 = 1e-12, round-off ~1e-16/1e-6 = 1e-10
    torch.testing.assert_close(grad_V, fd_V, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(grad_Q, fd_Q, rtol=1e-7, atol=1e-8)


def test_tilting_identity_monte_carlo_within_standard_error(problem):
    """spec §3.3: E[x' e^{x'^T a}] = Sigma a E[e^{x'^T a}] for x' ~ N(0, Sigma)."""
    a = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
    X, _ = sample(problem, 400_000, seed=11)
    weights = torch.exp(X @ a)
    values = X * weights[:, None] - (problem.Sigma @ a) * weights[:, None]  # mean 0 exactly
    mean, se = values.mean(0), values.std(0) / values.shape[0] ** 0.5
    assert bool((mean.abs() <= 4 * se).all())  # 4 standard errors: a false alarm has probability ~1e-4 per entry


@pytest.mark.parametrize("tokens", ["covariates", "joint"])
def test_closed_form_matches_monte_carlo_of_infinite_context_predictor(problem, params, tokens):
    """spec §3.2-3.3: with the tilted (infinite-context) predictor V Sigma_z Q x, the squared error averages to L."""
    p = problem.d + (problem.k if tokens == "joint" else 0)
    V, Q = params(k=problem.k, p=p, d=problem.d, scale=0.3)
    Sigma_z = token_covariance(problem.Sigma, problem.W_star, problem.noise_std, tokens=tokens)
    X, Y = sample(problem, 200_000, seed=5)
    errors = ((Y - X @ (V @ Sigma_z @ Q).T) ** 2).sum(-1)
    mc, se = float(errors.mean()), float(errors.std()) / errors.shape[0] ** 0.5
    closed = float(population_loss(V, Q, problem.Sigma, problem.W_star, problem.noise_std, tokens=tokens))
    assert abs(mc - closed) <= 4 * se  # 4 standard errors


def test_closed_form_matches_monte_carlo_with_finite_context_tilting(problem, params):
    """spec §3.2 as written: each query's ratio of expectations estimated from its own fresh context of m draws.

    The ratio estimate has bias O(1/m); with m = 4000 it is far below the standard error of 3000 queries.
    """
    V, Q = params(k=problem.k, scale=0.3)
    gen = torch.Generator().manual_seed(2)
    X, Y = sample(problem, 3000, generator=gen)
    context, _ = sample(problem, 4000, generator=gen)
    errors = []
    for chunk_x, chunk_y in zip(X.split(500), Y.split(500)):
        fresh, _ = sample(problem, 4000, generator=gen)
        ctx = torch.cat([context, fresh])
        weights = torch.softmax(chunk_x @ Q.T @ ctx.T, dim=-1)  # ratio of sums -> ratio of expectations
        errors.append(((chunk_y - weights @ ctx @ V.T) ** 2).sum(-1))
    errors = torch.cat(errors)
    mc, se = float(errors.mean()), float(errors.std()) / errors.shape[0] ** 0.5
    closed = float(population_loss(V, Q, problem.Sigma, problem.W_star, problem.noise_std))
    assert abs(mc - closed) <= 4 * se + 1e-3 * closed  # 4 SE plus the O(1/m) ratio bias (1e-3 relative is generous)


def test_excess_loss_is_loss_minus_irreducible_without_cancellation(problem, params):
    V, Q = params(k=problem.k)
    args = (problem.Sigma, problem.W_star, problem.noise_std)
    total = population_loss(V, Q, *args)
    torch.testing.assert_close(population_excess_loss(V, Q, *args) + problem.irreducible_loss, total)


def test_batched_runs_equal_single_runs(problem, params):
    V, Q = params(k=problem.k, runs=3)
    args = (problem.Sigma, problem.W_star, problem.noise_std)
    batched = population_loss(V, Q, *args)
    singles = torch.stack([population_loss(V[r], Q[r], *args) for r in range(3)])
    torch.testing.assert_close(batched, singles, rtol=1e-14, atol=0)  # same float operations up to reordering


def test_non_spd_covariance_is_refused_with_the_fix(problem, params):
    V, Q = params(k=problem.k)
    bad = torch.diag(torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64))
    with pytest.raises(ValidationError, match="Sigma is not positive definite.*A1"):
        population_loss(V, Q, bad, problem.W_star, 0.1)
    asym = problem.Sigma.clone()
    asym[0, 1] += 0.5
    with pytest.raises(ValidationError, match="Sigma is not symmetric"):
        population_loss(V, Q, asym, problem.W_star, 0.1)


def test_shape_mismatch_and_bad_noise_are_refused(problem, params):
    V, Q = params(k=problem.k)
    with pytest.raises(ValidationError, match="V has shape"):
        population_loss(V[:, :2], Q, problem.Sigma, problem.W_star, 0.1)
    with pytest.raises(ValidationError, match="noise_std"):
        population_loss(V, Q, problem.Sigma, problem.W_star, -0.1)
    with pytest.raises(ValidationError, match="tokens"):
        population_loss(V, Q, problem.Sigma, problem.W_star, 0.1, tokens="xy")
