"""Training sets for score estimation (spec §7.5) and the input map."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import ForwardProcess, GaussianMixture, InputMap, circle_mixture, denoising_set, fit_input_map

PROCESS = ForwardProcess(1.0)


def _data(n=500, seed=0):
    x0 = circle_mixture().sample(n, torch.Generator().manual_seed(seed), 1.0)
    return denoising_set(x0, PROCESS, 0.01, 2.0, seed=seed)


def test_times_lie_in_the_window_and_noise_has_the_transition_law():
    data = _data(n=20_000)
    assert float(data.t.min()) >= 0.01 and float(data.t.max()) <= 2.0
    xi = (data.x_t - PROCESS.alpha(data.t)[:, None] * data.x0) / PROCESS.h(data.t).sqrt()[:, None]
    assert abs(float(xi.mean())) < 0.02 and abs(float(xi.var()) - 1) < 0.03  # 20k N(0,1) draws: 5 std errors


@pytest.mark.parametrize("kind", ["spec", "scaled"])
def test_input_map_puts_training_inputs_in_the_unit_ball_with_one_on_the_boundary(kind):
    data = _data()
    inputs = fit_input_map(data, PROCESS, 2.0, kind=kind)
    norms = inputs(data.t, data.x_t).norm(dim=1)
    assert abs(float(norms.max()) - 1.0) < 1e-12
    u = inputs(0.5, data.x_t[:3])
    assert torch.allclose(u[:, 0], torch.full((3,), 0.25 / inputs.rho, dtype=torch.float64))  # t / T / rho
    if kind == "spec":  # spec §7.5: u = (t/T, x_t) / rho
        assert torch.allclose(u[:, 1:], data.x_t[:3] / inputs.rho, rtol=1e-15, atol=0)


def test_sphere_map_has_norm_r_t_and_is_inverted_by_the_stereographic_projection():
    data = _data()
    inputs = fit_input_map(data, PROCESS, 2.0, kind="sphere", T0=0.01, decay=0.9)
    x = 3 * torch.randn(1000, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)  # far outside too
    t = torch.logspace(-2, torch.log10(torch.tensor(2.0)).item(), 1000, dtype=torch.float64)
    u = inputs(t, x)
    r = 1 - 0.9 * torch.log(t / 0.01) / torch.log(torch.tensor(200.0, dtype=torch.float64))
    assert torch.allclose(u.norm(dim=1), r, rtol=1e-12, atol=0)  # every input in the unit ball, no fitted divisor
    assert abs(float(u.norm(dim=1).max()) - 1.0) < 1e-12 and abs(float(u.norm(dim=1).min()) - 0.1) < 1e-12
    # the stereographic projection from the south pole of the unit-norm point recovers z = x / c(t)
    unit = u / r[:, None]
    z = unit[:, :2] / (1 + unit[:, 2:])
    c = (PROCESS.alpha(t) ** 2 * inputs.v0 + PROCESS.h(t)).sqrt()
    assert torch.allclose(z, x / c[:, None], rtol=1e-9, atol=1e-12)
    assert inputs.rho == 1.0


def test_sphere_map_needs_T0_and_a_decay_below_one():
    data = _data(n=50)
    with pytest.raises(ValidationError, match="T0"):
        fit_input_map(data, PROCESS, 2.0, kind="sphere")
    with pytest.raises(ValidationError, match="decay"):
        fit_input_map(data, PROCESS, 2.0, kind="sphere", T0=0.01, decay=1.0)
    with pytest.raises(ValidationError, match="kind"):
        fit_input_map(data, PROCESS, 2.0, kind="cube")
    with pytest.raises(ValidationError, match="pass T0="):  # built directly, too: no silent log(t / 0)
        InputMap(PROCESS, 2.0, 0.25, 1.0, kind="sphere")


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


def test_log_power_times_concentrate_at_small_t_as_stated():
    x0 = torch.zeros(40_000, 2, dtype=torch.float64)
    t = denoising_set(x0, PROCESS, 0.01, 2.0, seed=0, times="log-uniform", power=3.0).t
    assert t.min() >= 0.01 and t.max() <= 2.0
    expected = (torch.log(torch.tensor(3.0)) / torch.log(torch.tensor(200.0))).item() ** (1 / 3)  # P(U^3 < log3/log200)
    assert abs(float((t < 0.03).double().mean()) - expected) < 0.01  # 0.592; binomial std 0.0025


def test_unknown_time_distribution_is_refused():
    with pytest.raises(ValidationError, match="times"):
        denoising_set(torch.zeros(4, 2, dtype=torch.float64), PROCESS, 0.01, 1.0, seed=0, times="geometric")
