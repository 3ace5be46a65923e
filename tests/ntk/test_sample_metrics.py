"""Mode coverage and energy distance on hand-checkable cases."""

import math

import torch

from attnlab.ntk import energy_distance, mode_coverage


def test_energy_distance_of_two_point_masses_is_twice_their_distance():
    x = torch.zeros(5, 1, dtype=torch.float64)
    y = torch.ones(4, 1, dtype=torch.float64)
    assert abs(energy_distance(x, y) - 2.0) < 1e-12  # 2 E|X-Y| - 0 - 0


def test_energy_distance_is_near_zero_for_the_same_law_and_positive_for_a_shift():
    gen = torch.Generator().manual_seed(0)
    a, b = (
        torch.randn(2000, 2, generator=gen, dtype=torch.float64),
        torch.randn(2000, 2, generator=gen, dtype=torch.float64),
    )
    same = energy_distance(a, b)
    assert abs(same) < 0.01  # U-statistic: unbiased, fluctuations ~ 1/n
    assert energy_distance(a, b + 0.5) > 10 * abs(same)


def test_mode_coverage_counts_points_near_each_mode():
    means = torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    pts = torch.tensor([[0.05, 0.0], [0.98, 0.0], [1.02, 0.0], [0.5, 0.5]], dtype=torch.float64)
    covered, shares = mode_coverage(pts, means, 0.1)
    assert covered == 0.75 and torch.allclose(shares, torch.tensor([0.25, 0.5], dtype=torch.float64))


def test_energy_distance_matches_the_closed_form_for_two_shifted_gaussians():
    # 1-d N(0, 1) vs N(mu, 1): X - Y ~ N(-mu, 2), X - X' ~ N(0, 2), and E|N(m, s^2)| = s sqrt(2/pi) e^{-m^2/2s^2}
    # + m (1 - 2 Phi(-m/s)); so ED = 2 E|N(mu, 2)| - 2 E|N(0, 2)|
    mu, s = 1.0, math.sqrt(2.0)
    abs_mean = s * math.sqrt(2 / math.pi) * math.exp(-(mu**2) / (2 * s**2)) + mu * math.erf(mu / (s * math.sqrt(2)))
    exact = 2 * abs_mean - 2 * s * math.sqrt(2 / math.pi)  # = 0.3645
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4000, 1, generator=gen, dtype=torch.float64)
    y = mu + torch.randn(4000, 1, generator=gen, dtype=torch.float64)
    assert abs(energy_distance(x, y) - exact) < 0.03  # U-statistic std ~ 0.01 at n = 4000
