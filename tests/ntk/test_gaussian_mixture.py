"""Gaussian mixture target (spec §9): score vs autograd, Tweedie, denoiser orthogonality by Monte-Carlo."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import ForwardProcess, GaussianMixture, circle_mixture

PROCESS = ForwardProcess(1.0)


def _points(n=50, seed=0):
    return 0.8 * torch.randn(n, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("t", [0.0, 0.01, 0.3, 2.0])
def test_score_is_the_gradient_of_the_log_density(t):
    target = circle_mixture()
    x = _points()
    step = 1e-6
    grad = torch.stack(
        [
            (target.log_density(x + step * e, t, PROCESS) - target.log_density(x - step * e, t, PROCESS)) / (2 * step)
            for e in torch.eye(2, dtype=torch.float64)
        ],
        dim=1,
    )  # central differences: truncation ~ step^2, round-off ~ 1e-16 |log p| / step ~ 1e-9
    score = target.score(x, t, PROCESS)
    # log p_0 has curvature ~ 1 / 0.05^2 at t = 0, so differences carry ~1e-6 relative error there
    assert torch.allclose(score, grad, rtol=1e-5, atol=1e-5 * float(score.abs().max()))


@pytest.mark.parametrize("t", [0.01, 0.3, 2.0])
def test_tweedie_links_denoiser_and_score(t):
    target = GaussianMixture([[0.3, 0.0], [-0.2, 0.4]], [0.1, 0.2], [0.3, 0.7])
    x = _points()
    alpha, h = PROCESS.alpha(torch.tensor(t)), PROCESS.h(torch.tensor(t))
    tweedie = (alpha * target.denoiser(x, t, PROCESS) - x) / h  # spec §7.4
    assert torch.allclose(tweedie, target.score(x, t, PROCESS), rtol=1e-9, atol=1e-9)


def test_denoiser_residual_is_orthogonal_to_functions_of_x_t():
    target = circle_mixture()
    gen = torch.Generator().manual_seed(1)
    n = 200_000
    x0 = target.sample(n, gen)
    t = torch.full((n,), 0.2, dtype=torch.float64)
    x_t, _ = PROCESS.sample(x0, t, gen)
    residual = x0 - target.denoiser(x_t, t, PROCESS)
    for test_fn in (x_t, torch.sin(3 * x_t), torch.ones_like(x_t)):
        corr = (residual * test_fn).mean(0)
        scale = (residual * test_fn).std(0) / n**0.5
        assert (corr.abs() < 5 * scale).all()  # E[(X0 - E[X0|Xt]) g(Xt)] = 0 up to 5 Monte-Carlo std errors


def test_sample_respects_max_norm_and_weights():
    target = GaussianMixture([[0.0, 0.0], [0.9, 0.0]], [0.3, 0.3], [0.5, 0.5])
    x = target.sample(5000, torch.Generator().manual_seed(2), max_norm=1.0)
    assert float(x.norm(dim=1).max()) <= 1.0
    assert circle_mixture().sample(10, torch.Generator().manual_seed(0)).shape == (10, 2)


def test_bad_mixtures_are_refused():
    with pytest.raises(ValidationError, match="weights must be nonnegative and sum to 1"):
        GaussianMixture([[0.0], [1.0]], [1.0, 1.0], [0.5, 0.6])
    with pytest.raises(ValidationError, match="stds must be positive"):
        GaussianMixture([[0.0]], [0.0], [1.0])


def test_bad_times_are_refused_by_the_score_and_the_density():
    """A negative time gave NaN scores; a time per point of the wrong count a bare torch error."""
    mixture, process, x = circle_mixture(), ForwardProcess(1.0), torch.zeros(2, 2, dtype=torch.float64)
    for method in (mixture.score, mixture.log_density, mixture.denoiser):
        with pytest.raises(ValidationError, match="t must hold finite times >= 0"):
            method(x, -0.5, process)
        with pytest.raises(ValidationError, match=r"t has shape \(3,\): pass one time for every point"):
            method(x, torch.ones(3, dtype=torch.float64), process)
        assert method(x, torch.tensor([0.3], dtype=torch.float64), process).shape[0] == 2
