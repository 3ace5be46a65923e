"""Closed-form exponential moments of the logits (spec §7) against Monte-Carlo."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.regression import cross_logit_mgf, sample, self_logit_mgf


@pytest.fixture
def small_Q():
    # small enough that 2 ||C||_op < 1: the Monte-Carlo second moment is finite, so the standard error is valid
    return 0.08 * torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_cross_moment_matches_monte_carlo(problem, small_Q):
    X, _ = sample(problem, 300_000, seed=1)
    Xp, _ = sample(problem, 300_000, seed=2)
    values = torch.exp(((Xp @ small_Q) * X).sum(-1))  # z'^T Q x with independent z' and x
    mc, se = float(values.mean()), float(values.std()) / values.shape[0] ** 0.5
    assert abs(mc - float(cross_logit_mgf(1.0, small_Q, problem.Sigma))) <= 4 * se  # 4 standard errors


@pytest.mark.parametrize("tokens", ["covariates", "joint"])
def test_self_moment_matches_monte_carlo(problem, small_Q, tokens):
    Q = (
        small_Q
        if tokens == "covariates"
        else torch.cat([small_Q, 0.05 * torch.ones(problem.k, 3, dtype=torch.float64)])
    )
    X, Y = sample(problem, 300_000, seed=3)
    Z = X if tokens == "covariates" else torch.cat([X, Y], -1)
    values = torch.exp(((Z @ Q) * X).sum(-1))  # z^T Q x with the query's own token
    mc, se = float(values.mean()), float(values.std()) / values.shape[0] ** 0.5
    closed = float(self_logit_mgf(1.0, Q, problem.Sigma, problem.W_star, problem.noise_std, tokens=tokens))
    assert abs(mc - closed) <= 4 * se


def test_moments_are_infinite_past_the_integrability_radius(problem, small_Q):
    """spec §7: E e^{c z'^T Q x} < inf iff c ||C||_op < 1."""
    from attnlab.regression import sym_sqrt

    C = sym_sqrt(problem.Sigma) @ small_Q @ sym_sqrt(problem.Sigma)
    radius = 1.0 / float(torch.linalg.matrix_norm(C, ord=2))
    assert math.isfinite(float(cross_logit_mgf(0.99 * radius, small_Q, problem.Sigma)))
    assert math.isinf(float(cross_logit_mgf(1.01 * radius, small_Q, problem.Sigma)))
