"""Empirical in-sample loss (spec §3.1) and its closed-form batched gradient (§5.3) against a slow reference."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import empirical_loss, empirical_loss_and_gradient, population_loss, sample, sample_covariates
from attnlab.regression.empirical import loss_and_gradient


def reference_loss(V, Q, X, Y, tokens="covariates", include_self=True):
    """spec §2-3.1 written as plain loops: query x_i, context z_l, logits z_l^T Q x_i, prediction V sum s_l z_l."""
    Z = X if tokens == "covariates" else torch.cat([X, Y], dim=-1)
    n = X.shape[0]
    total = 0.0
    for i in range(n):
        context = [l for l in range(n) if include_self or l != i]
        logits = torch.stack([Z[l] @ Q @ X[i] for l in context])
        weights = torch.exp(logits - logits.max())
        weights = weights / weights.sum()
        prediction = V @ sum(w * Z[l] for w, l in zip(weights, context))
        total = total + ((Y[i] - prediction) ** 2).sum()
    return total / n


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("tokens", ["covariates", "joint"])
def test_loss_and_gradient_match_autograd_of_reference_loop(problem, params, tokens, include_self):
    X, Y = sample(problem, 7, seed=1)
    p = problem.d + (problem.k if tokens == "joint" else 0)
    V, Q = params(k=problem.k, p=p, d=problem.d)
    loss, grad_V, grad_Q = empirical_loss_and_gradient(V, Q, X, Y, tokens=tokens, include_self=include_self)
    V_, Q_ = V.clone().requires_grad_(), Q.clone().requires_grad_()
    ref = reference_loss(V_, Q_, X, Y, tokens, include_self)
    ref.backward()
    # two exact computations of the same quantity in float64: agreement to ~1e-13 relative
    torch.testing.assert_close(loss, ref.detach(), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grad_V, V_.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grad_Q, Q_.grad, rtol=1e-10, atol=1e-12)


def test_gradient_matches_finite_differences(problem, params, finite_difference):
    X, Y = sample(problem, 6, seed=2)
    V, Q = params(k=problem.k)
    _, grad_V, grad_Q = empirical_loss_and_gradient(V, Q, X, Y)
    fd_Q = finite_difference(lambda q: empirical_loss(V, q, X, Y), Q)
    fd_V = finite_difference(lambda v: empirical_loss(v, Q, X, Y), V)
    torch.testing.assert_close(grad_Q, fd_Q, rtol=1e-7, atol=1e-9)  # central differences, eps = 1e-6
    torch.testing.assert_close(grad_V, fd_V, rtol=1e-7, atol=1e-9)


def test_batched_runs_equal_single_runs(problem, params):
    X, Y = sample(problem, 9, runs=3, seed=4)
    V, Q = params(k=problem.k, runs=3)
    loss, grad_V, grad_Q = empirical_loss_and_gradient(V, Q, X, Y)
    for r in range(3):
        single = empirical_loss_and_gradient(V[r], Q[r], X[r], Y[r])
        for batched, one in zip((loss[r], grad_V[r], grad_Q[r]), single):
            torch.testing.assert_close(batched, one, rtol=1e-13, atol=1e-15)  # same math, batched matmul order


def test_large_logits_stay_finite(problem, params):
    X, Y = sample(problem, 8, seed=3)
    V, Q = params(k=problem.k, scale=200.0)  # logits of order 1e4: exp overflows without max subtraction
    loss, grad_V, grad_Q = empirical_loss_and_gradient(V, Q, X, Y)
    assert all(bool(torch.isfinite(t).all()) for t in (loss, grad_V, grad_Q))


def test_bias_shrinks_like_one_over_n_near_the_minimum(problem, params):
    """spec §3.3: E L_n - L = Theta(1/n) near the manifold; at Q = 0 the bias is exact: prediction = V mean(x)."""
    V, Q = params(k=problem.k, scale=0.3)
    Q = torch.zeros_like(Q)
    # with Q = 0 the predictor is V xbar; E||y_i - V xbar||^2 - L = (tr(V Sigma V^T) - 2 tr(W* Sigma V^T))/n exactly
    n, runs = 10, 4000
    X, Y = sample(problem, n, runs=runs, seed=8)
    losses = empirical_loss(V, Q, X, Y)
    bias, se = (
        float(losses.mean()) - float(population_loss(V, Q, problem.Sigma, problem.W_star, 0.1)),
        float(losses.std()) / runs**0.5,
    )
    exact = float(torch.trace(V @ problem.Sigma @ V.T) - 2 * torch.trace(problem.W_star @ problem.Sigma @ V.T)) / n
    assert abs(bias - exact) <= 4 * se  # 4 standard errors


def test_bad_input_is_refused(problem, params):
    X, Y = sample(problem, 5, seed=0)
    V, Q = params(k=problem.k)
    with pytest.raises(ValidationError, match="Y has shape"):
        empirical_loss(V, Q, X, Y[:4])
    with pytest.raises(ValidationError, match="Q has shape"):
        empirical_loss(V, Q[:, :2], X, Y)
    with pytest.raises(ValidationError, match="include_self=False needs n >= 2"):
        empirical_loss(V, Q, X[:1], Y[:1], include_self=False)
    X_nan = X.clone()
    X_nan[0, 0] = float("nan")
    with pytest.raises(ValidationError, match="X has 1 non-finite"):
        empirical_loss(V, Q, X_nan, Y)


def test_no_samples_are_refused(problem, params):
    V, Q = params(k=problem.k)
    X, Y = sample(problem, 5, seed=0)
    with pytest.raises(ValidationError, match=r"no samples \(n == 0\)"):
        empirical_loss(V, Q, X[:0], Y[:0])


def test_reused_softmax_storage_gives_the_same_values(problem, params):
    """``out=`` (a storage reused over calls) holds the softmax weights; the results are the same bits."""
    X, Y = sample(problem, 9, runs=3, seed=2)
    V, Q = params(k=problem.k, p=problem.d, d=problem.d)
    fresh = loss_and_gradient(V, Q, X, Y, X)
    storage = torch.full((4, 9, 9), float("nan"), dtype=torch.float64)  # one more run than used: a leading slice
    reused = loss_and_gradient(V, Q, X, Y, X, out=storage[:3])
    assert all(torch.equal(a, b) for a, b in zip(fresh, reused))
    torch.testing.assert_close(storage[:3].sum(-1), torch.ones(3, 9, dtype=torch.float64), rtol=0, atol=1e-12)


def test_sample_covariates_are_the_covariates_of_sample(problem):
    """The X of :func:`sample` without drawing its Y: the same bits for the same seed or generator state."""
    X, _ = sample(problem, 6, runs=2, seed=5)
    assert torch.equal(sample_covariates(problem, 6, runs=2, seed=5), X)
    gen = torch.Generator().manual_seed(3)
    assert torch.equal(sample_covariates(problem, 4, generator=gen), sample(problem, 4, seed=3)[0])
    with pytest.raises(ValidationError, match="exactly one of generator= and seed="):
        sample_covariates(problem, 4)
