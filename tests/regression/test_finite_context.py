"""The finite-context biases and the fits of their expansion in 1/n (spec preconditioned-regression §8 T1.1, T3-T5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.regression import (
    bias_expansion,
    bias_table,
    manifold_point,
    profile_exponent,
    random_rotation,
    regularizer_gradient,
    regularizer_gradient_bias,
)
from attnlab.regression.finite_context import _flat, _regularizer_truth, _squared_bias


def test_bias_expansion_recovers_the_coefficients_of_c_over_n():
    """Weighted least squares on exact data c/n + c2/n^2 returns c, and chi^2 = 0 (numpy's lstsq as the truth)."""
    ns = np.array([25.0, 50.0, 100.0, 200.0])
    c, c_se, chi2, dof = bias_expansion(ns, 2.0 / ns - 5.0 / ns**2, np.full(4, 1e-3))
    assert c == pytest.approx(2.0, rel=1e-9) and chi2 == pytest.approx(0.0, abs=1e-12) and dof == 2
    _, _, chi2_slow, _ = bias_expansion(ns, 0.3 / np.sqrt(ns), np.full(4, 1e-4))  # a slower term does not fit
    assert chi2_slow > 100
    _, _, chi2_offset, _ = bias_expansion(ns, 2.0 / ns + 0.01, np.full(4, 1e-3))  # nor does a constant offset
    assert chi2_offset > 13.8  # above the 99.9% quantile of chi^2 with 2 dof: the row would fail


def test_profile_exponent_finds_the_leading_exponent_under_a_next_order_term():
    """Exact data n^-s (c + c2/n): the profile fit returns s to the grid's resolution, chi^2 ~ 0."""
    ns = np.array([25.0, 50.0, 100.0, 200.0, 400.0])
    for s in (0.5, 1.0, 1.7):
        found, half_width, chi2 = profile_exponent(ns, ns**-s * (3.0 - 20.0 / ns), np.full(5, 1e-6) * ns**-s)
        assert found == pytest.approx(s, abs=1e-3) and chi2 < 1e-3 and half_width < 0.01


def test_profile_exponent_reads_a_squared_bias_below_its_noise_as_a_point_near_zero():
    """A Theorem 3-5 fit: ``c n^-s`` with ``c >= 0`` over three sizes. A last value <= 0 (a debiased estimate below its
    Monte-Carlo noise) has no log, but the fit still returns the exponent the other points and its SE allow."""
    ns = np.array([200.0, 400.0, 800.0])
    exact, _, chi2 = profile_exponent(ns, 0.4 / ns, np.full(3, 1e-7), corrections=0, nonnegative=True)
    assert exact == pytest.approx(1.0, abs=1e-3) and chi2 < 1e-6
    below = profile_exponent(ns, [2e-3, 5e-4, -1e-4], [1e-4, 1e-4, 1e-4], corrections=0, s_max=6.0, nonnegative=True)
    assert 2.0 < below[0] < 6.0  # steeper than the first two points' slope of 2: the last one is near 0
    floor = profile_exponent(ns, [2e-3, 1.9e-3, 1.8e-3], [1e-4] * 3, corrections=0, nonnegative=True)
    assert floor[0] < 0.2  # a floor reads as a flat exponent, which the rows' bound -s <= -0.75 fails
    nothing, _, _ = profile_exponent(ns, [-1e-4, 0.0, -2e-4], [1e-4] * 3, corrections=0, nonnegative=True)
    assert nothing == 0.0  # no c > 0 fits: chi^2 is flat in s and the smallest s is returned
    unconstrained, _, _ = profile_exponent(ns, -0.2 / ns, [1e-6] * 3, corrections=0)
    assert unconstrained == pytest.approx(1.0, abs=0.1)  # without the constraint a negative c fits the shape
    with pytest.raises(ValidationError, match="corrections"):
        profile_exponent(ns, 0.4 / ns, np.full(3, 1e-7), corrections=2)


def test_squared_bias_is_debiased_by_the_sampling_noise():
    """The mean of ||g_bar||^2 - tr Cov / S over repetitions is ||E g||^2 (here 0.25, with unit noise, S = 50)."""
    gen = torch.Generator().manual_seed(0)
    values = [_squared_bias(0.5 + torch.randn(50, 1, generator=gen, dtype=torch.float64))[0] for _ in range(2000)]
    assert np.mean(values) == pytest.approx(0.25, abs=0.01)  # the plain ||g_bar||^2 would average 0.27


def test_autograd_truth_of_the_regularizer_gradient_is_the_closed_form_gradient(problem, params):
    """The two ways to grad R agree at the population covariance, so a bias can only come from Sigma_hat."""
    V, Q = params()
    closed = _flat(*regularizer_gradient(V, Q, problem.Sigma))
    torch.testing.assert_close(_regularizer_truth(V, Q, problem.Sigma), closed, rtol=1e-12, atol=1e-12)


def test_regularizer_bias_falls_with_the_context_size(problem):
    """Theorem 5 bounds ||E grad R_hat_n - grad R||^2 by C/n. Here it falls like 1/n^2: E Sigma_hat = Sigma, so the
    bias of grad R_hat (quadratic in Sigma_hat) is O(Var Sigma_hat) = O(1/n), and quadrupling n divides its square by
    about 16."""
    V, Q = manifold_point(random_rotation(problem.d, seed=0), problem.W_star, problem.Sigma)
    V, Q = V + 0.1, Q - 0.1  # off M
    small, large = (regularizer_gradient_bias(problem, V, Q, n, 4000, seed=1)["reg_bias_sq"] for n in (20, 80))
    assert 10.0 < small / large < 25.0


def test_bias_table_has_one_row_per_context_size(problem, params):
    V, Q = params()
    table = bias_table(problem, V, Q, (10, 20), samples=8, regularizer_samples=8, seed=0, mu=0.1)
    assert list(table.n) == [10, 20]
    assert {"loss_bias", "loss_se", "grad_bias_sq", "f_bias_sq", "reg_bias_sq", "reg_se"} <= set(table.columns)


def test_bad_arguments_are_refused_with_the_fix(problem, params):
    V, Q = params()
    with pytest.raises(ValidationError, match="samples"):
        regularizer_gradient_bias(problem, V, Q, 10, 1, seed=0)
    with pytest.raises(ValidationError, match="V"):
        regularizer_gradient_bias(problem, V[:2], Q, 10, 8, seed=0)
    with pytest.raises(ValidationError, match="make_problem"):
        regularizer_gradient_bias("problem", V, Q, 10, 8, seed=0)
    with pytest.raises(ValidationError, match="one value per context size"):
        profile_exponent([1.0, 2.0], [1.0, 0.5], [0.1, 0.1])
    with pytest.raises(ValidationError, match="se must be > 0"):
        bias_expansion([1.0, 2.0, 4.0], [1.0, 0.5, 0.2], [0.1, 0.0, 0.1])
