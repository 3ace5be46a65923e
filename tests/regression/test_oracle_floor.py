"""The floor of Algorithm 1 under the Monte-Carlo oracle, its noise/bias split, the gap metrics and the perturbed
start (spec preconditioned-regression §4.2, §6.2, §8 T2)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim import PreconditionedGD
from attnlab.regression import (
    MonteCarloOracle,
    gap_metrics,
    noise_and_bias,
    perturbed_manifold_point,
    population_excess_loss,
    project,
)
from attnlab.training.regression import fit, oracle_floors


def test_a_start_of_scale_zero_lies_on_the_manifold_and_the_gap_metrics_vanish_there(problem):
    V, Q = perturbed_manifold_point(problem, runs=3, scale=0.0, seed=4)
    metrics = gap_metrics(problem)
    assert V.shape == (3, 5, 3) and Q.shape == (3, 3, 3) and V.dtype == torch.float64
    assert float(metrics["gap"]({"V": V, "Q": Q}).abs().max()) < 1e-12
    assert float(metrics["dist"]({"V": V, "Q": Q}).abs().max()) < 1e-10


def test_a_perturbed_start_is_off_the_manifold_by_about_its_scale(problem):
    V, Q = perturbed_manifold_point(problem, runs=2, scale=0.05, seed=4)
    dist = gap_metrics(problem)["dist"]({"V": V, "Q": Q})
    assert bool((dist > 0).all()) and float(dist.max()) < 1.0
    again = perturbed_manifold_point(problem, runs=2, scale=0.05, seed=4)
    assert torch.equal(V, again[0]) and torch.equal(Q, again[1])


def test_gap_metrics_are_the_closed_form_and_the_projection(problem, params):
    V, Q = params(runs=2)
    metrics = gap_metrics(problem)
    torch.testing.assert_close(
        metrics["gap"]({"V": V, "Q": Q}), population_excess_loss(V, Q, problem.Sigma, problem.W_star)
    )
    torch.testing.assert_close(metrics["dist"]({"V": V, "Q": Q}), project(V, Q, problem.W_star, problem.Sigma).distance)


def test_joint_gap_metrics_use_the_problems_noise_and_match_the_closed_form(problem):
    # spec §10.1: the joint Sigma_z has sigma^2 I_k in its corner, so the gap must be taken with the problem's sigma
    gen = torch.Generator().manual_seed(1)
    p = problem.d + problem.k
    V = torch.randn(2, problem.k, p, generator=gen, dtype=torch.float64)
    Q = torch.randn(2, p, problem.d, generator=gen, dtype=torch.float64)
    metrics = gap_metrics(problem, "joint")
    expected = population_excess_loss(V, Q, problem.Sigma, problem.W_star, problem.noise_std, tokens="joint")
    assert torch.equal(metrics["gap"]({"V": V, "Q": Q}), expected)
    Sigma_z = problem.token_covariance("joint")
    torch.testing.assert_close(
        metrics["dist"]({"V": V, "Q": Q}), project(V, Q, problem.W_star, problem.Sigma, Sigma_z).distance
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"runs": 0}, "runs"), ({"scale": -1.0}, "scale"), ({"seed": 1.5}, "seed")],
)
def test_bad_start_settings_name_the_argument(problem, kwargs, message):
    settings = {"runs": 2, "scale": 0.1, "seed": 0} | kwargs
    with pytest.raises(ValidationError, match=message):
        perturbed_manifold_point(problem, **settings)


def test_noise_and_bias_is_richardson_in_one_over_b():
    # F(B) = b + v / B exactly: the split recovers v / B and b
    b, v, B = 0.02, 0.4, 8
    floors = pd.DataFrame(
        [
            {"n": n, "batches": k, "run": r, "floor": b / n + v / k}
            for n in (10, 20)
            for k in (B // 2, B)
            for r in (0, 1)
        ]
    )
    parts = noise_and_bias(floors, B)
    assert len(parts) == 4
    assert parts.noise.tolist() == pytest.approx([v / B] * 4)
    assert parts.bias.tolist() == pytest.approx([b / 10, b / 10, b / 20, b / 20])


def _floors(problem, batches=4, ns=(20,)):
    start = perturbed_manifold_point(problem, runs=2, scale=0.05, seed=1)
    Sigma = problem.Sigma.expand(2, -1, -1)
    step = lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], Sigma, lr=0.5)  # noqa: E731
    return start, step, oracle_floors(problem, start, ns, batches, step, steps=6, mu=0.25, seed=3)


def test_each_floor_is_the_second_half_mean_gap_of_a_plain_fit(problem):
    start, step, (floors, trajectories) = _floors(problem)
    assert sorted(set(floors.batches)) == [2, 4] and len(floors) == 4
    assert set(trajectories.columns) >= {"n", "batches", "run", "step", "gap", "dist", "diverged_at"}
    Sigma = problem.Sigma.expand(2, -1, -1)
    oracle = MonteCarloOracle(problem, 20, 4, seed=3 + 20)
    plain = fit(*start, oracle, step, steps=6, record_every=2, regularizer_weight=0.25, covariance=Sigma,
                metrics=gap_metrics(problem))  # fmt: skip
    want = plain.frame[plain.frame.step >= 3].groupby("run").gap.mean()
    got = floors[floors.batches == 4].set_index("run").floor
    assert got.tolist() == pytest.approx(want.tolist(), rel=1e-12)
    assert all(math.isfinite(f) for f in floors.floor)


@pytest.mark.parametrize("batches", [1, 5])
def test_the_batch_count_must_halve(problem, batches):
    with pytest.raises(ValidationError, match="batches"):
        _floors(problem, batches=batches)
