"""``regression.scaling``: the population excess loss of Algorithm 1 over a grid of n and T (Theorem 2's data-compute
law), with the floor measured by an oracle whose noise is shown to be below the bias it measures.

Spec: docs/theory/preconditioned-regression.md §8 T2. Algorithm 1 with the Monte-Carlo oracle (``batches`` fresh
samples of size n per step, and half as many: :mod:`~attnlab.experiments.regression.floor`), the true-Sigma
preconditioner and regularizer, from starts at dist(theta_0, M) = start_distance rho (0.3 rho, inside Theorem 2's
start region).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from attnlab._validation import ValidationError, check_count, check_grid, check_scalar
from attnlab.experiments.registry import register
from attnlab.experiments.regression.common import (
    MAX_SEEDS,
    SEEDS_WHY,
    TheoryInstanceConfig,
    near_points,
    true_sigma_step,
)
from attnlab.experiments.regression.floor import SCALING_FLOOR, floor_rows
from attnlab.experiments.regression.theory import FALSIFIERS
from attnlab.plotting import house_figure, label_ours, log_gap_axis, new_figure, plot_band
from attnlab.training.regression import oracle_floors
from attnlab.verify import Experiment, ExperimentResult, RunContext

__all__ = ["ScalingConfig"]


@dataclass(frozen=True)
class ScalingConfig(TheoryInstanceConfig):
    """Algorithm 1 with the Monte-Carlo oracle on the theory instance, from a fixed distance to the manifold, so both
    terms of ``C1 (1 - c eta)^T + O(1/n)`` (spec §8 T2) are visible.

    The instance (d, k, noise_std, singular_values, problem_seed), seed, mu, lr and start_distance are
    :class:`~attnlab.experiments.regression.common.TheoryInstanceConfig`'s.

    Attributes
    ----------
    seed : int
        Seed of the starts and the oracle's samples.
    steps : int
        Iterations T; the floor is the mean gap over the second half; >= 2 (a second half after the start).
    ns : tuple of int
        Context sizes n of the oracle's samples: distinct, each >= 1, at least two (the floor's rate in n).
    seeds : int
        Starts per n; from 2 to 100 (ours: a bound on the run's time and memory).
    batches : int
        Fresh samples per step of the oracle (every n also runs at half of it, to show the noise is below the bias):
        even, >= 2.
    record_every : int
        Steps between recorded points; >= 1.
    """

    steps: int = 150
    ns: tuple[int, ...] = (25, 50, 100, 200)
    seeds: int = 4
    batches: int = 16
    record_every: int = 2

    OURS = TheoryInstanceConfig.OURS + ("ns", "batches", "start_distance")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("batches", self.batches, kind=int, low=2)
        if self.batches % 2:
            raise ValidationError(
                f"batches == {self.batches}, must be even (every n also runs at batches // 2); pass "
                f"batches={self.batches + 1}"
            )
        check_count("seeds", self.seeds, 2, MAX_SEEDS, SEEDS_WHY)
        check_grid("ns", self.ns, 1, points=2, why="the floor's rate in n")
        check_scalar("steps", self.steps, kind=int, low=2)  # the floor: the mean gap over the second half
        check_scalar("record_every", self.record_every, kind=int, low=1)


def run_scaling(config: ScalingConfig, ctx: RunContext) -> ExperimentResult:
    """Population excess loss L(theta_T) - L_irr over n and T; the floor's rate in n, noise and bias apart."""
    problem = config.problem()
    start = near_points(problem, config.singular_values, config.seeds, config.start_distance, config.seed)
    floors, frame = oracle_floors(
        problem,
        start,
        config.ns,
        config.batches,
        true_sigma_step(problem, config.seeds, config.lr),
        steps=config.steps,
        mu=config.mu,
        seed=config.seed,
        record_every=config.record_every,
        bar=lambda ns: ctx.bar(ns, desc="n"),
    )
    checks, parts, _ = floor_rows(floors, config.batches, config.ns, SCALING_FLOOR)
    frame = frame[frame.batches == config.batches].assign(seed=lambda f: config.seed + f.run)
    table = parts.groupby("n")[["floor", "noise", "bias"]].mean().reset_index()
    table["n_times_bias"] = table.n * table.bias
    return ExperimentResult(
        frame=frame,
        checks=checks,
        figures={"scaling": _figure(config, frame)},
        tables={"floors": table},
        notes=[problem.assumptions().describe()],
    )


@house_figure
def _figure(config: ScalingConfig, frame: pd.DataFrame):
    fig, axes = new_figure(2, width=4.4, height=3.4)
    for n in config.ns:
        plot_band(axes[0], frame[frame.n == n], "step", "gap", label=f"$n = {n}$")
    log_gap_axis(axes[0], r"$L(\theta_T) - L_{irr}$")
    axes[0].set_xlabel("iteration $T$")
    axes[0].legend()
    grid = frame.groupby(["n", "step"]).gap.median().unstack("step")
    image = axes[1].imshow(
        np.log10(grid.values),
        aspect="auto",
        origin="lower",
        cmap="viridis",
        extent=(0, config.steps, -0.5, len(config.ns) - 0.5),
    )
    axes[1].set_yticks(range(len(config.ns)), [str(n) for n in config.ns])
    axes[1].set(xlabel="iteration $T$", ylabel="$n$")
    axes[1].grid(False)
    fig.colorbar(image, ax=axes[1], label=r"$\log_{10}$ median $(L - L_{irr})$")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="regression.scaling",
        cost=48.0,
        config_type=ScalingConfig,
        run=run_scaling,
        quick={"ns": (50, 100, 200), "seeds": 2, "steps": 60, "batches": 8},
        claims=(SCALING_FLOOR.oracle, SCALING_FLOOR.bound),
        falsifiers=tuple(f for f in FALSIFIERS if f.name == "temperature-1.3"),
    )
)
