"""Algorithm 1 loop (spec §6.2-6.5): convergence with the population oracle, clean stop on blow-up."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim.preconditioned import PreconditionedGD
from attnlab.regression import (
    PopulationOracle,
    make_problem,
    manifold_point,
    population_excess_loss,
    project,
    random_rotation,
)
from attnlab.training.regression import fit


@pytest.fixture
def near_minimum(problem):
    V, Q = manifold_point(random_rotation(3, runs=2, seed=0), problem.W_star, problem.Sigma)
    gen = torch.Generator().manual_seed(1)
    return V + 0.05 * torch.randn(V.shape, generator=gen), Q + 0.05 * torch.randn(Q.shape, generator=gen)


def metrics(problem):
    return {
        "gap": lambda s: population_excess_loss(s["V"], s["Q"], problem.Sigma, problem.W_star),
        "dist": lambda s: project(s["V"], s["Q"], problem.W_star, problem.Sigma).distance,
    }


def test_population_oracle_converges_geometrically_to_round_off():
    """spec §8 T2 / §9.3: with the exact oracle, dist(theta_t, M) contracts geometrically down to round-off."""
    problem = make_problem(d=3, k=5, singular_values=(0.25, 0.2, 0.15), seed=0)  # kappa < 2: fast local rate
    V, Q = manifold_point(random_rotation(3, runs=2, seed=0), problem.W_star, problem.Sigma)
    V0, Q0 = V + 0.05 * torch.randn(V.shape, generator=torch.Generator().manual_seed(1)), Q
    result = fit(
        V0,
        Q0,
        PopulationOracle(problem),
        lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], problem.Sigma, lr=0.5),
        steps=400,
        record_every=100,
        metrics=metrics(problem),
        regularizer_weight=0.25,
        covariance=problem.Sigma,
    )
    final = result.frame[result.frame.step == 400]
    assert float(final.gap.max()) < 1e-24  # round-off level of a squared residual with O(0.1) entries
    assert result.ok and result.status == ["completed", "completed"]


def test_blow_up_stops_cleanly_with_the_last_good_iterate(problem, near_minimum):
    V0, Q0 = near_minimum
    V0 = torch.stack([V0[0], 30 * V0[1]])  # run 1 starts far out, where lr = 0.1 makes the quartic term explode
    result = fit(
        V0,
        Q0,
        PopulationOracle(problem),
        lambda ps: torch.optim.SGD(ps, lr=0.1),
        steps=50,
        metrics=metrics(problem),
        regularizer_weight=0.25,
        covariance=problem.Sigma,
    )
    assert result.status == ["completed", "diverged"] and result.diverged_runs == [1]
    assert bool(torch.isfinite(result.V).all()) and bool(torch.isfinite(result.Q).all())
    assert result.frame.notna().all().all() and all(map(math.isfinite, result.frame.gap))  # never NaN rows
    assert result.frame[result.frame.run == 1].step.max() == result.last_step[1]  # rows stop before the blow-up


def test_all_runs_blowing_up_ends_the_loop(problem, near_minimum):
    V0, Q0 = near_minimum
    result = fit(
        100 * V0,
        Q0,
        PopulationOracle(problem),
        lambda ps: torch.optim.SGD(ps, lr=10.0),
        steps=1000,
        metrics=metrics(problem),
        regularizer_weight=0.25,
        covariance=problem.Sigma,
    )
    assert result.status == ["diverged", "diverged"] and max(result.last_step) < 999


def test_missing_covariance_and_unbatched_start_are_refused(problem, near_minimum):
    V0, Q0 = near_minimum
    opt = lambda ps: torch.optim.SGD(ps, lr=0.1)  # noqa: E731
    with pytest.raises(ValidationError, match="covariance is None"):
        fit(V0, Q0, PopulationOracle(problem), opt, steps=1, metrics={}, regularizer_weight=0.25)
    with pytest.raises(ValidationError, match="V0 has shape"):
        fit(V0[0], Q0[0], PopulationOracle(problem), opt, steps=1, metrics={})


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"renormalization": "cap", "tau_Q": -1.0}, "tau_Q == -1.0, must be > 0"),
        ({"renormalization": "cap", "tau_Q": 0.0}, "tau_Q == 0.0, must be > 0"),
        ({"renormalization": "cap", "tau_Q": math.nan}, "tau_Q == nan, must be a finite number"),
        ({"covariance": torch.eye(4, dtype=torch.float64)}, "covariance has shape \\(4, 4\\)"),
        ({"covariance": torch.full((3, 3), math.nan, dtype=torch.float64)}, "covariance has 9 non-finite"),
        ({"covariance": -torch.eye(3, dtype=torch.float64)}, "covariance is not positive definite"),
        ({"covariance": torch.tensor([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])}, "covariance is not symm"),
        ({"token_covariance": torch.eye(2, dtype=torch.float64)}, "token_covariance has shape \\(2, 2\\)"),
        ({"token_covariance": torch.zeros(3, 3, dtype=torch.float64)}, "token_covariance is not positive definite"),
    ],
)
def test_tau_q_and_the_covariances_are_checked_up_front_by_name(problem, near_minimum, kwargs, match):
    # a negative tau_Q disabled the cap, 0 or NaN were reported as "diverged"; a covariance of the wrong shape raised
    # a raw RuntimeError mid-run, a NaN one ended "diverged", one not positive definite was accepted
    V0, Q0 = near_minimum
    kwargs = {"regularizer_weight": 0.25, "covariance": problem.Sigma, **kwargs}
    with pytest.raises(ValidationError, match=match):
        fit(V0, Q0, PopulationOracle(problem), lambda ps: torch.optim.SGD(ps, lr=0.1), steps=3, metrics={}, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"record_steps": [7]}, "record_steps\\[0\\] == 7, must be <= 5"),
        ({"record_steps": [2, -1]}, "record_steps\\[1\\] == -1, must be >= 0"),
        ({"record_steps": [2.5]}, "record_steps\\[0\\]"),
        ({"progress": 3}, "progress"),
    ],
)
def test_record_steps_and_progress_are_checked_by_name(problem, near_minimum, kwargs, match):
    # a step past the run (or before it) was skipped without a word, and progress=3 was taken as True
    V0, Q0 = near_minimum
    with pytest.raises(ValidationError, match=match):
        fit(V0, Q0, PopulationOracle(problem), lambda ps: torch.optim.SGD(ps, lr=0.1), steps=5, metrics={}, **kwargs)
