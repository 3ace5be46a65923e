"""Euler-Maruyama reverse-SDE sampling (spec §7.2) against the exact Gaussian case."""

import math

import torch

from attnlab.ntk import (
    ForwardProcess,
    GaussianMixture,
    circle_mixture,
    energy_distance,
    euler_maruyama,
    mode_coverage,
    reverse_sde_sample,
    score_from_denoiser,
)


def test_euler_maruyama_reproduces_ou_moments():
    # dY = -Y ds + sqrt(2) dB from Y0 = 1: mean e^{-s}, variance 1 - e^{-2s}
    y0 = torch.ones(100_000, 1, dtype=torch.float64)
    times = torch.linspace(0.0, 1.0, 201, dtype=torch.float64)
    y = euler_maruyama(lambda y, s: -y, lambda s: math.sqrt(2.0), y0, times, seed=0)
    # tolerance: Euler bias O(ds) = 5e-3 relative plus 5 Monte-Carlo std errors (~1.5e-2 on the variance)
    assert abs(float(y.mean()) - math.exp(-1)) < 0.01
    assert abs(float(y.var()) - (1 - math.exp(-2))) < 0.02


def test_reverse_sde_with_the_exact_score_recovers_the_gaussian_marginal():
    process = ForwardProcess(1.0)
    mu, s = torch.tensor([[0.4, -0.2]], dtype=torch.float64), 0.3
    target = GaussianMixture(mu, [s], [1.0])
    T0, T, n = 0.05, 2.0, 40_000
    gen = torch.Generator().manual_seed(0)
    aT, vT = math.exp(-T), math.exp(-2 * T) * s**2 - math.expm1(-2 * T)
    y0 = aT * mu + math.sqrt(vT) * torch.randn(n, 2, generator=gen, dtype=torch.float64)  # exact p_T
    y = reverse_sde_sample(lambda x, t: target.score(x, t, process), process, y0, T0, T, steps=400, seed=1)
    a0 = math.exp(-T0)
    v0 = a0**2 * s**2 - math.expm1(-2 * T0)  # p_T0 = N(alpha mu, alpha^2 s^2 + h)
    # Euler bias O(ds = 5e-3) on the variance (6% seen at ds = 1e-2); MC std errors ~0.7% (variance), 2e-3 (mean)
    assert torch.allclose(y.mean(0), a0 * mu[0], atol=0.01)
    assert torch.allclose(y.var(0), torch.full((2,), v0, dtype=torch.float64), rtol=0.05)


def test_exact_score_sampler_puts_its_mass_on_the_circle_mixture_modes():
    # The experiment's path (diffusion.gmm): N(0, I) start at T = 2, 50 uniform Euler-Maruyama steps down to
    # T0 = 0.01, then the final denoising step; spec §9's mixture (4 modes of std 0.05 on the circle of radius 0.5)
    process = ForwardProcess(1.0)
    target = circle_mixture()
    gen = torch.Generator().manual_seed(0)
    y0 = torch.randn(2000, 2, generator=gen, dtype=torch.float64)
    samples = reverse_sde_sample(
        lambda x, t: target.score(x, t, process),
        process,
        y0,
        0.01,
        2.0,
        50,
        seed=3,
        denoiser=lambda x, t: target.denoiser(x, t, process),
    )
    covered, shares = mode_coverage(samples, target.means, 3 * 0.05)
    # measured 0.84 (every mode 0.20-0.22) with 50 steps, 0.92 with 200: the Euler bias at the stiff last steps
    assert covered >= 0.75 and float(shares.min()) >= 0.15
    assert energy_distance(samples, target.sample(2000, gen)) < 0.01  # measured 0.0015 (the F = 0 sampler: 0.38)


def test_tweedie_conversion_of_the_exact_denoiser_is_the_exact_score():
    # spec §7.4: (alpha E[X0 | Xt] - x) / h = grad log p_t, the conversion every learned score goes through
    process, target = ForwardProcess(1.0), circle_mixture()
    x = torch.randn(50, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for t in (0.01, 0.3, 2.0):
        tt = torch.full((50,), t, dtype=torch.float64)
        converted = score_from_denoiser(process, x, tt, target.denoiser(x, tt, process))
        assert torch.allclose(converted, target.score(x, tt, process), rtol=1e-9, atol=1e-9)
