"""One query's softmax weights and context statistics (spec preconditioned-regression §2, Appendix D): Lemma 8's
covariate gradient against autograd, the statistics against a plain loop, and the Monte-Carlo moments against exact
values where the weights are uniform (Q = 0) and against Gaussian tilting at a large context."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import conditional_moments, context_statistics, mean_jacobian, sample
from attnlab.regression.context import MOMENTS, limit_offset, moments_and_offsets


def _context(problem, m: int, seed: int = 0) -> torch.Tensor:
    return sample(problem, m, seed=seed)[0]


def test_statistics_match_a_plain_loop(problem, params):
    _, Q = params(k=5)
    X = _context(problem, 7)
    stats = context_statistics(Q, X[0], X)
    x, Qn, Xn = X[0].numpy(), Q.numpy(), X.numpy()
    logits = np.array([row @ Qn @ x for row in Xn])  # x_l^T Q x
    s = np.exp(logits - logits.max())
    s /= s.sum()
    mu = sum(w * row for w, row in zip(s, Xn))
    cov = sum(w * np.outer(row - mu, row - mu) for w, row in zip(s, Xn))
    np.testing.assert_allclose(stats.weights.numpy(), s, rtol=1e-12)
    np.testing.assert_allclose(stats.mean.numpy(), mu, rtol=1e-12)
    np.testing.assert_allclose(stats.covariance.numpy(), cov, rtol=1e-11, atol=1e-14)


def test_lemma_8_mean_jacobian_matches_autograd(problem, params):
    """d mu / d x_l for every token, the query's own (it is query and token at once) included."""
    _, Q = params(k=5, scale=0.4)
    X = _context(problem, 6, seed=1)

    def mean(flat: torch.Tensor) -> torch.Tensor:  # mu written out again, so autograd sees every token
        tokens = flat.reshape(X.shape)
        return torch.softmax(tokens @ Q @ tokens[0], 0) @ tokens

    expected = torch.autograd.functional.jacobian(mean, X.flatten()).reshape(3, *X.shape)  # (a, l, b)
    torch.testing.assert_close(mean_jacobian(Q, X), expected.permute(1, 0, 2), rtol=1e-10, atol=1e-13)


def test_lemma_8_without_the_query_term_is_wrong(problem, params):
    """The query's Cov_S Q term is not small: leaving it out is an O(1) mismatch (the inventory's falsifier)."""
    _, Q = params(k=5, scale=0.4)
    X = _context(problem, 6, seed=1)
    query_term = context_statistics(Q, X[0], X).covariance @ Q
    assert float(query_term.norm()) > 0.1 * float(mean_jacobian(Q, X)[0].norm())


def test_uniform_weights_give_the_exact_moments(problem):
    """Q = 0: s_l = 1/n exactly, so E[s_j^2] = 1/n^2, Var(n s_1) = 0 and E||mu||^2 = (|x|^2 + (n - 1) tr Sigma) / n^2."""
    Q = torch.zeros(3, 3, dtype=torch.float64)
    query = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    ns, draws = (4, 16), 20_000
    table = conditional_moments(problem, Q, query, ns, draws, seed=5)
    assert list(table.columns) == ["n", *(c for name in MOMENTS for c in (name, f"{name}_se"))]  # as documented
    for n, row in zip(ns, table.itertuples()):
        assert row.cross_weight_sq == pytest.approx(1 / n**2, rel=1e-12)
        assert row.self_weight_var == pytest.approx(0.0, abs=1e-20)
        exact = (float(query @ query) + (n - 1) * float(torch.trace(problem.Sigma))) / n**2
        assert abs(row.mean_sq_dev - exact) < 4 * row.mean_sq_dev_se  # Monte Carlo, 4 SE
        assert row.mean_sq_dev == pytest.approx(row.mean_var + float(query @ query) / n**2, rel=0.05)


def test_a_large_context_tilts_the_mean_to_sigma_q_x(problem, params):
    """Gaussian tilting (spec §3.3): E mu -> Sigma Q x and E Cov_S -> Sigma, so the mean-square deviations are the
    variances up to the squared biases, which fall like 1/n^2."""
    _, Q = params(k=5, scale=0.3)
    query = sample(problem, 1, seed=9)[0][0]
    row = conditional_moments(problem, Q, query, (2000,), 2000, seed=2).iloc[0]
    assert row.mean_sq_dev - row.mean_var < 4 * row.mean_sq_dev_se + 1e-4
    assert row.covariance_sq_dev - row.covariance_var < 4 * row.covariance_sq_dev_se + 1e-3
    assert row.mean_var == pytest.approx(row.mean_sq_dev, rel=0.1)


def test_the_limit_offset_sees_a_constant_and_not_a_one_over_n_bias(problem):
    """Q = 0: mu is the plain mean of the n tokens, so E[mu | x] - Sigma Q x = x / n exactly (no constant term), and
    the Wald chi^2 of c0 = 0 is a chi^2(3) draw; a limit off by a constant vector is rejected."""
    Q = torch.zeros(3, 3, dtype=torch.float64)
    query = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    ns = (4, 8, 16, 32, 64)
    _, offsets = moments_and_offsets(problem, Q, query, ns, 4000, seed=3)
    for n, mean, cov in zip(ns, offsets.means["mean"], offsets.covariances["mean"]):
        assert np.all(np.abs(mean - query.numpy() / n) < 4 * np.sqrt(np.diag(cov)))  # Monte Carlo, 4 SE
    chi2, dof, _ = limit_offset(offsets, "mean")
    assert dof == 3 and offsets.means["outer"][0].shape == (6,) and chi2 < 16.27  # chi^2(3)'s 99.9% quantile
    offsets.means["mean"][:] = [mean + 0.05 for mean in offsets.means["mean"]]  # a limit 0.05 (1, 1, 1) off
    assert limit_offset(offsets, "mean")[0] > 100
    with pytest.raises(ValidationError, match="terms"):
        limit_offset(offsets, "mean", terms=5)


def test_bad_input_is_refused(problem):
    Q, query = torch.zeros(3, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValidationError, match="ns"):
        conditional_moments(problem, Q, query, (1, 4), 10, seed=0)
    with pytest.raises(ValidationError, match="draws"):
        conditional_moments(problem, Q, query, (4,), 1, seed=0)
    with pytest.raises(ValidationError, match="query"):
        conditional_moments(problem, Q, torch.zeros(2, dtype=torch.float64), (4,), 10, seed=0)
    with pytest.raises(ValidationError, match="problem"):
        conditional_moments("problem", Q, query, (4,), 10, seed=0)
    with pytest.raises(ValidationError, match="X"):
        context_statistics(Q, query, torch.zeros(4, 2, dtype=torch.float64))
    with pytest.raises(ValidationError, match="empty"):
        mean_jacobian(Q, torch.zeros(0, 3, dtype=torch.float64))
