"""Gradient oracles of Algorithm 1 (spec §6.2-6.3)."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    MinibatchOracle,
    MonteCarloOracle,
    PopulationOracle,
    empirical_loss_and_gradient,
    oracles,
    population_gradient,
    sample,
)
from attnlab.regression.oracles import smallest_first


def test_population_oracle_is_the_closed_form_gradient(problem, params):
    V, Q = params(k=problem.k, runs=2)
    for got, want in zip(PopulationOracle(problem)(V, Q), population_gradient(V, Q, problem.Sigma, problem.W_star)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_full_minibatch_is_the_in_sample_gradient(problem, params):
    """b = n: every permutation of the sample gives the same in-sample loss (both context options agree)."""
    X, Y = sample(problem, 30, runs=2, seed=1)
    V, Q = params(k=problem.k, runs=2)
    _, gV, gQ = empirical_loss_and_gradient(V, Q, X, Y)
    for context in ("minibatch", "all"):
        oV, oQ = MinibatchOracle(X, Y, 30, context=context)(V, Q)
        torch.testing.assert_close(oV, gV, rtol=1e-12, atol=1e-14)  # sums in another order
        torch.testing.assert_close(oQ, gQ, rtol=1e-12, atol=1e-14)


def test_same_seed_draws_the_same_minibatches(problem, params):
    X, Y = sample(problem, 50, runs=2, seed=2)
    V, Q = params(k=problem.k, runs=2)
    a, b = MinibatchOracle(X, Y, 8, seed=3), MinibatchOracle(X, Y, 8, seed=3)
    for _ in range(3):
        for ga, gb in zip(a(V, Q), b(V, Q)):
            assert torch.equal(ga, gb)


def test_monte_carlo_oracle_approaches_population_gradient_near_the_minimum(problem, params):
    """spec §6.2 (ii): bias O(1/n) + noise O((n batches)^-1/2); with Q small the bias is small too."""
    V, Q = params(k=problem.k, runs=1, scale=0.2)
    gV, gQ = MonteCarloOracle(problem, 200, 30, seed=0)(V, Q)
    pV, pQ = population_gradient(V, Q, problem.Sigma, problem.W_star)
    rel = float(torch.linalg.vector_norm(torch.cat([(gV - pV).flatten(), (gQ - pQ).flatten()])))
    rel /= float(torch.linalg.vector_norm(torch.cat([pV.flatten(), pQ.flatten()])))
    assert rel < 0.1  # 6000 samples; a wrong formula gives O(1)


@pytest.mark.parametrize(("chunk_entries", "per_chunk"), [(2**24, 5), (2 * 12 * 12, 1)])
def test_monte_carlo_oracle_is_the_mean_over_its_fresh_samples(problem, params, monkeypatch, chunk_entries, per_chunk):
    """Against a plain loop: fresh samples (per_chunk batches x 2 runs per draw, from the same generator), the
    in-sample gradient of each, the mean over the 5 batches; all batches in one chunk, or one batch per chunk."""
    monkeypatch.setattr(oracles, "_CHUNK_ENTRIES", chunk_entries)
    V, Q = params(k=problem.k, runs=2)
    gV, gQ = MonteCarloOracle(problem, 12, 5, seed=4)(V, Q)
    generator, want_V, want_Q = torch.Generator().manual_seed(4), torch.zeros_like(V), torch.zeros_like(Q)
    for _ in range(5 // per_chunk):
        X, Y = sample(problem, 12, runs=per_chunk * 2, generator=generator)
        for batch in range(per_chunk):
            rows = slice(2 * batch, 2 * batch + 2)  # batch-major: the runs of one batch are adjacent
            _, bV, bQ = empirical_loss_and_gradient(V, Q, X[rows], Y[rows])
            want_V, want_Q = want_V + bV / 5, want_Q + bQ / 5
    torch.testing.assert_close(gV, want_V, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(gQ, want_Q, rtol=1e-12, atol=1e-14)


def test_bad_settings_are_refused(problem):
    X, Y = sample(problem, 10, runs=1, seed=0)
    with pytest.raises(ValidationError, match="batch_size == 11, must be <= 10"):
        MinibatchOracle(X, Y, 11)
    with pytest.raises(ValidationError, match="context == 'train'"):
        MinibatchOracle(X, Y, 5, context="train")
    with pytest.raises(ValidationError, match="X has shape"):
        MinibatchOracle(X[0], Y[0], 5)


@pytest.mark.parametrize("shape, k", [((5, 10_000), 256), ((3, 7), 7), ((2, 4, 300), 299), ((50,), 1)])
def test_smallest_first_is_argsorts_first_k_ties_included(shape, k):
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):  # float32 draws: at (5, 10^4) about one draw in six has a tie among the 257 smallest
        u = torch.rand(*shape, generator=gen)
        assert torch.equal(smallest_first(u, k), u.argsort(-1)[..., :k])


def test_smallest_first_orders_ties_as_argsort():
    u = torch.tensor([[0.5, 0.1, 0.1, 0.3, 0.1], [0.9, 0.8, 0.7, 0.6, 0.5]])
    assert torch.equal(smallest_first(u, 3), u.argsort(-1)[:, :3])
    assert smallest_first(u, 3)[1].tolist() == [4, 3, 2]


@pytest.mark.parametrize("tokens", ["covariates", "joint"])
def test_all_context_without_the_self_term_is_the_in_sample_gradient_without_it(problem, params, tokens):
    """b = n, context "all", include_self=False: every query attends to the n - 1 other tokens (spec §3.1, §6.3)."""
    X, Y = sample(problem, 30, runs=2, seed=1)
    p = problem.d + (problem.k if tokens == "joint" else 0)
    V, Q = params(k=problem.k, p=p, runs=2)
    _, gV, gQ = empirical_loss_and_gradient(V, Q, X, Y, tokens=tokens, include_self=False)
    oV, oQ = MinibatchOracle(X, Y, 30, context="all", tokens=tokens, include_self=False)(V, Q)
    torch.testing.assert_close(oV, gV, rtol=1e-12, atol=1e-14)  # sums in another order
    torch.testing.assert_close(oQ, gQ, rtol=1e-12, atol=1e-14)


def test_all_context_without_the_self_term_on_a_minibatch_masks_each_querys_own_token(problem, params, monkeypatch):
    """b < n: the gradient of the drawn queries against a plain loop, one query and its n - 1 other tokens at a
    time; one query per chunk gives the same numbers."""
    X, Y = sample(problem, 12, runs=2, seed=5)
    V, Q = params(k=problem.k, runs=2)
    got = MinibatchOracle(X, Y, 5, context="all", include_self=False, seed=7)(V, Q)
    idx = smallest_first(torch.rand(2, 12, generator=torch.Generator().manual_seed(7)), 5)
    want_V, want_Q = torch.zeros_like(V), torch.zeros_like(Q)
    for r in range(2):
        for i in idx[r].tolist():
            keep = [j for j in range(12) if j != i]
            _, bV, bQ = oracles.empirical.loss_and_gradient(V[r], Q[r], X[r, i : i + 1], Y[r, i : i + 1], X[r, keep])
            want_V[r] += bV / 5
            want_Q[r] += bQ / 5
    torch.testing.assert_close(got[0], want_V, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(got[1], want_Q, rtol=1e-12, atol=1e-14)
    monkeypatch.setattr(oracles, "_CHUNK_ENTRIES", 1)
    chunked = MinibatchOracle(X, Y, 5, context="all", include_self=False, seed=7)(V, Q)
    torch.testing.assert_close(chunked[0], got[0], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(chunked[1], got[1], rtol=1e-12, atol=1e-14)


def test_a_context_of_one_token_without_the_self_term_and_a_non_bool_flag_are_refused(problem):
    X, Y = sample(problem, 10, runs=1, seed=0)
    with pytest.raises(ValidationError, match="include_self=False with context='minibatch' leaves a query no token"):
        MinibatchOracle(X, Y, 1, include_self=False)
    with pytest.raises(ValidationError, match="include_self == 'no', must be a bool"):
        MinibatchOracle(X, Y, 5, include_self="no")


def test_monte_carlo_oracle_refuses_unbatched_iterates_by_name(problem, params):
    V, Q = params(k=problem.k)
    with pytest.raises(ValidationError, match=r"oracles take batched iterates V \(R, k, p\).*V\[None\]"):
        MonteCarloOracle(problem, 10, 2)(V, Q)


def test_sample_refuses_a_fractional_seed_instead_of_truncating_it(problem):
    with pytest.raises(ValidationError, match="seed must be a int, got 1.5"):
        sample(problem, 5, seed=1.5)
    with pytest.raises(ValidationError, match="seed == -1, must be >= 0"):
        sample(problem, 5, seed=-1)
