"""Training sets for score estimation (spec §7.5) and the input map."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import ForwardProcess, GaussianMixture, circle_mixture, denoising_set, fit_input_map

PROCESS = ForwardProcess(1.0)


def _data(n=500, seed=0):
    x0 = circle_mixture().sample(n, torch.Generator().manual_seed(seed), 1.0)
    return denoising_set(x0, PROCESS, 0.01, 2.0, seed=seed)


def test_times_lie_in_the_window_and_noise_has_the_transition_law():
    data = _data(n=20_000)
    assert float(data.t.min()) >= 0.01 and float(data.t.max()) <= 2.0
    xi = (data.x_t - PROCESS.alpha(data.t)[:, None] * data.x0) / PROCESS.h(data.t).sqrt()[:, None]
    assert abs(float(xi.mean())) < 0.02 and abs(float(xi.var()) - 1) < 0.03  # 20k N(0,1) draws: 5 std errors


def test_input_map_puts_training_inputs_in_the_unit_ball_with_one_on_the_boundary():
    data = _data()
    inputs = fit_input_map(data, PROCESS, 2.0)
    norms = inputs(data.t, data.x_t).norm(dim=1)
    assert abs(float(norms.max()) - 1.0) < 1e-12
    u = inputs(0.5, data.x_t[:3])
    assert torch.allclose(u[:, 0], torch.full((3,), 0.25 / inputs.rho, dtype=torch.float64))  # t / T / rho


def test_skip_gain_is_the_exact_denoiser_of_a_centred_gaussian():
    target = GaussianMixture([[0.0, 0.0]], [0.4], [1.0])
    data = denoising_set(target.sample(200_000, torch.Generator().manual_seed(1)), PROCESS, 0.01, 2.0, seed=1)
    inputs = fit_input_map(data, PROCESS, 2.0)
    x = torch.randn(10, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    t = torch.full((10,), 0.3, dtype=torch.float64)
    exact = target.denoiser(x, t, PROCESS)
    # v0 is estimated from 4e5 coordinates: relative error ~ sqrt(2 / 4e5) ~ 2e-3
    assert torch.allclose(inputs.skip_gain(t)[:, None] * x, exact, rtol=1e-2, atol=1e-3)
    no_skip = fit_input_map(data, PROCESS, 2.0, skip=False)
    assert torch.equal(no_skip.skip_gain(t), torch.zeros(10, dtype=torch.float64))


def test_log_uniform_times_put_as_many_draws_in_each_decade():
    x0 = torch.zeros(40_000, 2, dtype=torch.float64)
    t = denoising_set(x0, PROCESS, 0.01, 1.0, seed=0, times="log-uniform").t
    assert t.min() >= 0.01 and t.max() <= 1.0
    share = float((t < 0.1).double().mean())
    assert abs(share - 0.5) < 0.01  # two decades, half the draws in each (binomial std 0.0025)
    assert float((denoising_set(x0, PROCESS, 0.01, 1.0, seed=0).t < 0.1).double().mean()) < 0.1  # uniform: ~9%


def test_unknown_time_distribution_is_refused():
    with pytest.raises(ValidationError, match="times"):
        denoising_set(torch.zeros(4, 2, dtype=torch.float64), PROCESS, 0.01, 1.0, seed=0, times="geometric")
