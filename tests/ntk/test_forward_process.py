"""Forward process (spec §7.1): closed forms for OU, quadrature for a general g, transition moments."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import ForwardProcess


def test_ou_alpha_and_h_are_the_closed_forms():
    process = ForwardProcess(1.0)
    t = torch.tensor([0.0, 0.01, 0.5, 2.0], dtype=torch.float64)
    assert torch.allclose(process.alpha(t), torch.exp(-t), rtol=1e-15, atol=0)
    assert torch.allclose(process.h(t), 1 - torch.exp(-2 * t), rtol=1e-12, atol=0)  # spec §7.1: g = 1 is OU


def test_general_g_is_integrated_exactly_for_polynomials():
    process = ForwardProcess(lambda t: 1 + t)
    t = torch.tensor([0.3, 1.0, 2.5], dtype=torch.float64)
    assert torch.allclose(process.integral(t), t + t**2 / 2, rtol=1e-13, atol=0)  # Gauss-Legendre exact for deg 1
    assert torch.allclose(process.alpha(t), torch.exp(-(t + t**2 / 2)), rtol=1e-13, atol=0)


def test_transition_moments_match_alpha_and_h():
    process = ForwardProcess(0.7)
    n = 200_000
    x0 = torch.full((n, 1), 0.8, dtype=torch.float64)
    t = torch.full((n,), 0.9, dtype=torch.float64)
    x_t, _ = process.sample(x0, t, torch.Generator().manual_seed(0))
    alpha, h = math.exp(-0.63), -math.expm1(-1.26)
    # Monte-Carlo: std error of the mean sqrt(h / n) ~ 2e-3; of the variance ~ h sqrt(2 / n) ~ 2e-3
    assert abs(float(x_t.mean()) - alpha * 0.8) < 5 * math.sqrt(h / n)
    assert abs(float(x_t.var()) - h) < 5 * h * math.sqrt(2 / n)


def test_bad_schedules_are_refused():
    with pytest.raises(ValidationError, match="g == -1.0"):
        ForwardProcess(-1.0)
    with pytest.raises(ValidationError, match="positive rates"):
        ForwardProcess(lambda t: t - 1)


@pytest.mark.parametrize("t", [-1.0, float("nan"), float("inf"), [0.5, -0.1]])
def test_negative_or_non_finite_times_are_refused(t):
    """alpha(-1) was e and h(-1) a negative variance, silently; the process starts at t = 0 (spec §7.1)."""
    process = ForwardProcess(lambda s: 1 + s)
    for method in (process.alpha, process.h, process.g, process.integral):
        with pytest.raises(ValidationError, match="t must hold finite times >= 0"):
            method(torch.as_tensor(t, dtype=torch.float64))
