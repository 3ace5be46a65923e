"""Renormalization along the scaling orbit (spec §6.4)."""

from __future__ import annotations

import torch

from attnlab.regression import population_loss, regularizer, renormalize, sym_sqrt


def test_balance_keeps_the_loss_and_minimises_the_regularizer_on_the_orbit(problem, params):
    V, Q = params(k=problem.k, runs=2)
    S = problem.Sigma
    Vb, Qb = renormalize(V, Q, S, S, "balance")
    args = (S, problem.W_star, problem.noise_std)
    torch.testing.assert_close(population_loss(Vb, Qb, *args), population_loss(V, Q, *args), rtol=1e-13, atol=0)
    best = regularizer(Vb, Qb, S)
    for c in (0.8, 0.95, 1.05, 1.25):  # a grid around the optimum never does better
        assert bool((regularizer(c * Vb, Qb / c, S) >= best - 1e-14).all())


def test_cap_bounds_the_whitened_key_query_norm(problem, params):
    V, Q = params(k=problem.k, runs=2, scale=3.0)
    S = problem.Sigma
    _, Qc = renormalize(V, Q, S, S, "cap", tau_Q=0.5)
    norms = torch.linalg.matrix_norm(sym_sqrt(S) @ Qc @ sym_sqrt(S), ord=2)
    torch.testing.assert_close(norms, torch.full_like(norms, 0.5), rtol=1e-12, atol=0)
    V2, Q2 = renormalize(V, Q / 100, S, S, "cap", tau_Q=0.5)  # already inside: unchanged
    assert torch.equal(Q2, Q / 100) and torch.equal(V2, V)
