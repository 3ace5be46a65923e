"""Score model (spec §7.4): parametrization, training with early stopping, weighted score error (spec §9)."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import (
    ForwardProcess,
    SoftmaxMLP,
    circle_mixture,
    denoiser_error_at,
    denoising_set,
    weighted_score_error,
)
from attnlab.training.ntk import train_score_model

PROCESS = ForwardProcess(1.0)
T0, T = 0.01, 2.0


def _sets(n, seed=0):
    target = circle_mixture()
    gen = torch.Generator().manual_seed(seed)
    train = denoising_set(target.sample(n, gen, 1.0), PROCESS, T0, T, seed + 1)
    held_out = denoising_set(target.sample(256, gen, 1.0), PROCESS, T0, T, seed + 2)
    return target, train, held_out


def test_score_is_alpha_denoiser_minus_x_over_h():
    target, train, held_out = _sets(64)
    model, _ = train_score_model(SoftmaxMLP(3, 2, 64), train, held_out, PROCESS, T, steps=20, record_every=5)
    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    t = torch.full((5,), 0.4, dtype=torch.float64)
    expected = (PROCESS.alpha(t)[:, None] * model.denoiser(x, t) - x) / PROCESS.h(t)[:, None]  # spec §7.4
    assert torch.allclose(model.score(x, t), expected, rtol=1e-14, atol=0)


def test_plain_parametrization_starts_from_a_zero_denoiser():
    _, train, held_out = _sets(64)
    model, result = train_score_model(SoftmaxMLP(3, 2, 64), train, held_out, PROCESS, T, steps=0, skip=False)
    assert result.steps == 0
    assert float(model.denoiser(train.x_t, train.t).abs().max()) == 0.0  # symmetric init: F = 0


def test_training_lowers_the_weighted_error_below_the_untrained_model():
    target, train, held_out = _sets(256)
    options = {"skip": False, "input_map": "sphere", "T0": T0}
    untrained, _ = train_score_model(SoftmaxMLP(3, 2, 256, 2.0), train, held_out, PROCESS, T, steps=0, **options)
    trained, result = train_score_model(
        SoftmaxMLP(3, 2, 256, 2.0), train, held_out, PROCESS, T, steps=400, record_every=10, patience=10, **options
    )
    before = weighted_score_error(untrained, target, T0, T, n=2000, seed=7)
    after = weighted_score_error(trained, target, T0, T, n=2000, seed=7)
    assert after < before  # same fresh draws for both (common random numbers)
    assert result.best_step == int(result.frame.loc[result.frame["val_error"].idxmin(), "step"])


def test_error_at_a_time_is_the_integrand_of_the_weighted_error():
    target, train, held_out = _sets(256)
    model, _ = train_score_model(
        SoftmaxMLP(3, 2, 64, 2.0), train, held_out, PROCESS, T, steps=50, record_every=10, input_map="sphere", T0=T0
    )
    untrained, _ = train_score_model(SoftmaxMLP(3, 2, 64), train, held_out, PROCESS, T, steps=0, skip=False)
    # F = 0: the error at t is E||E[X0 | X_t]||^2, which tends to E||X0||^2 = 0.25 + 2 * 0.05^2 as t -> 0
    assert abs(denoiser_error_at(untrained, target, 1e-6, n=20_000, seed=1) - 0.255) < 0.005  # MC std ~1e-4
    # the uniform-t average of the integrand (trapezoid on 201 times) matches the Monte-Carlo weighted error
    grid = torch.linspace(T0, T, 201, dtype=torch.float64)
    values = torch.tensor([denoiser_error_at(model, target, float(t), n=2000, seed=2) for t in grid])
    average = float(torch.trapezoid(values, grid)) / (T - T0)
    weighted = weighted_score_error(model, target, T0, T, n=40_000, seed=3)
    assert abs(average - weighted) < 0.1 * weighted  # weighted over seeds 3-7: +-3%; 401 times move the average 0.4%


def test_bad_input_map_arguments_name_the_argument_and_the_fix():
    _, train, held_out = _sets(32)
    with pytest.raises(ValidationError, match="input_map == 'cube'"):
        train_score_model(SoftmaxMLP(3, 2, 8), train, held_out, PROCESS, T, steps=0, input_map="cube")
    with pytest.raises(ValidationError, match="pass T0="):
        train_score_model(SoftmaxMLP(3, 2, 8), train, held_out, PROCESS, T, steps=0, input_map="sphere")
