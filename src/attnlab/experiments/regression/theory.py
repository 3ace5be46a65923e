"""``regression.theory``: the table of spec §8 as declared checks, each with a falsifier.

Spec: docs/theory/preconditioned-regression.md §8. Reads top to bottom: config, claims and falsifiers, one measure
function per group of rows (finite context, minima, local geometry, spectral start, training, floor), the figure.
The constants the rows compare with come from the theorems' own objects: the Hessian of f at theta_R in the
whitened coordinates (autograd of the closed forms) gives the sharp alpha, beta and local rate; Monte-Carlo and
seed spreads give every tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from attnlab._validation import ValidationError, check_scalar
from attnlab.experiments.registry import register
from attnlab.experiments.regression.common import TheoryInstanceConfig
from attnlab.experiments.regression.empirical_geometry import L4_CONVEXITY, L4_SMOOTHNESS, empirical_geometry_rows
from attnlab.experiments.regression.falsifiers import FALSIFIERS
from attnlab.experiments.regression.finite_context import (
    T3_OBJECTIVE,
    T4_GRADIENT,
    T5_REGULARIZER,
    T11_LIMIT,
    T11_RATE,
    finite_context_rows,
)
from attnlab.experiments.regression.floor import THEORY_FLOOR
from attnlab.experiments.regression.geometry import (
    L1_SYMMETRY,
    T12_MINIMUM,
    T12_STATIONARY,
    T13_CONVEXITY,
    T13_SMOOTHNESS,
    geometry_rows,
    minima_rows,
)
from attnlab.experiments.regression.spectral import (
    L3_DISTANCE,
    L3_GAP,
    L3_PRECISION,
    L5_RATIO,
    L6_OLS,
    spectral_rows,
)
from attnlab.experiments.regression.training import (
    L2_DESCENT,
    T2_POPULATION,
    T2_RATE,
    floor_checks,
    training_rows,
)
from attnlab.plotting import house_figure, label_axes, label_ours, log_gap_axis, new_figure, plot_band
from attnlab.regression.curvature import whitened_hessian_spectrum
from attnlab.verify import Experiment, ExperimentResult, RunContext

__all__ = ["TheoryConfig"]


@dataclass(frozen=True)
class TheoryConfig(TheoryInstanceConfig):
    """Settings of the measured checks of spec §8 (sizes are ours; the paper gives none).

    The instance (d, k, noise_std, singular_values, problem_seed), seed, mu, lr and start_scale are
    :class:`~attnlab.experiments.regression.common.TheoryInstanceConfig`'s; the T2 runs amend lr and start_scale.

    Attributes
    ----------
    bias_ns : tuple of int
        Context sizes of the Monte-Carlo biases (T1.1, Theorems 4 and 5).
    bias_samples : int
        Fresh samples per n for the loss and gradient biases.
    regularizer_samples : int
        Fresh covariances per n for the regularizer-gradient bias (Theorem 5; cheap, so many).
    bias_scale : float
        Entry size of the perturbation of theta_R: the point off the manifold M where the biases are measured.
    spectral_ns : tuple of int
        Sample sizes of the spectral start (Lemma 3).
    spectral_seeds : int
        Samples per n of the spectral start.
    radii : tuple of float
        T1.3 radii, multiples of sigma_d^{1/2}; rho = 0.25 (Tu et al.).
    directions : int
        Random directions per radius (T1.3).
    lr : float
        Step of the population-oracle and Monte-Carlo-oracle runs (T2).
    start_scale : float
        Entry size of the perturbation of theta_R where the T2 runs start (the perturbed-manifold start).
    steps : int
        Steps of the population-oracle run (T2, L2).
    mc_ns : tuple of int
        Context sizes of the Monte-Carlo-oracle floor (T2).
    mc_batches : int
        Fresh samples per step of the Monte-Carlo oracle (the floor is also run at half of it).
    mc_runs : int
        Starts per n of the floor runs.
    mc_steps : int
        Steps of the floor runs; the floor is the mean gap over their second half.
    lem4_n : int
        Context size of the fresh samples of the Lemma 4 rows.
    lem4_batches : int
        Fresh samples per point of the Lemma 4 rows (the Monte-Carlo mean of the empirical gradient).
    lem4_directions : int
        Points per radius of the Lemma 4 rows.
    lem4_train : int
        Size of the training sample whose Sigma_hat preconditions the Lemma 4 rows.
    """

    bias_ns: tuple[int, ...] = (25, 50, 100, 200, 400, 800)
    bias_samples: int = 400
    regularizer_samples: int = 4000
    bias_scale: float = 0.05
    spectral_ns: tuple[int, ...] = (100, 1000, 10_000, 100_000)
    spectral_seeds: int = 20
    radii: tuple[float, ...] = (0.02, 0.05, 0.1, 0.25)
    directions: int = 300
    steps: int = 300
    mc_ns: tuple[int, ...] = (50, 100, 200)
    mc_batches: int = 16
    mc_runs: int = 3
    mc_steps: int = 150
    lem4_n: int = 100
    lem4_batches: int = 64
    lem4_directions: int = 10
    lem4_train: int = 1000

    OURS = TheoryInstanceConfig.OURS + ("bias_ns", "bias_scale", "mc_ns", "radii")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("mc_batches", self.mc_batches, kind=int, low=2)
        for name in ("bias_samples", "regularizer_samples", "spectral_seeds", "directions", "mc_runs", "lem4_batches"):
            check_scalar(name, getattr(self, name), kind=int, low=2)
        if len(self.bias_ns) < 3 or len(self.mc_ns) < 2:
            raise ValidationError(
                f"bias_ns needs >= 3 sizes and mc_ns >= 2 to fit their rates, got {self.bias_ns} and {self.mc_ns}"
            )


CLAIMS = (
    T11_RATE,
    T11_LIMIT,
    T3_OBJECTIVE,
    T4_GRADIENT,
    T5_REGULARIZER,
    T12_MINIMUM,
    T12_STATIONARY,
    L1_SYMMETRY,
    T13_CONVEXITY,
    T13_SMOOTHNESS,
    L4_CONVEXITY,
    L4_SMOOTHNESS,
    L3_DISTANCE,
    L3_GAP,
    L3_PRECISION,
    L5_RATIO,
    L6_OLS,
    T2_POPULATION,
    T2_RATE,
    L2_DESCENT,
    THEORY_FLOOR.oracle,
    THEORY_FLOOR.bound,
)


# ---- figure and registration --------------------------------------------------------------------------------------


@house_figure
def _figure(config: TheoryConfig, biases: pd.DataFrame, spectral: pd.DataFrame, population_run, floors):
    fig, axes = new_figure(3, width=3.8)
    axes[0].loglog(biases.n, biases.loss_bias.abs(), "o-", label=r"$|\mathbb{E} L_n - L|$")
    axes[0].loglog(
        biases.n, biases.grad_bias_sq.clip(lower=1e-16), "s-", label=r"$\|\mathbb{E}\nabla L_n-\nabla L\|^2$"
    )
    axes[0].loglog(
        biases.n, biases.reg_bias_sq.clip(lower=1e-16), "^-", label=r"$\|\mathbb{E}\nabla\hat R_n-\nabla R\|^2$"
    )
    label_axes(axes[0], "$n$", "bias off M", "T1.1 / Thm 4-5 biases")
    axes[1].loglog(spectral.n, spectral.dist, "o-", label=r"$\mathrm{dist}(\theta_0, M)$")
    axes[1].loglog(spectral.n, spectral.gap, "s-", label=r"$L(\theta_0) - L_{irr}$")
    label_axes(axes[1], "$n$", "at the spectral start", "L3 spectral start")
    plot_band(axes[2], population_run, "step", "gap", label="population oracle", logy=True)
    for (n, batches), part in floors.groupby(["n", "batches"]):
        if batches == config.mc_batches:
            median = part.groupby("step").gap.median()
            axes[2].plot(median.index, median.values, label=f"Monte-Carlo oracle $n={n}$, {batches} batches")
    log_gap_axis(axes[2], r"$L(\theta_t) - L_{irr}$")
    axes[2].set(xlabel="iteration $t$", title=r"T2: $L - L_{irr}$")
    for ax in axes:
        ax.legend()
    label_ours(fig, config)
    return fig


def run_theory(config: TheoryConfig, ctx: RunContext) -> ExperimentResult:
    """Every row of the table of spec §8 as a declared check."""
    problem = config.problem()
    spectrum = whitened_hessian_spectrum(problem, config.mu, config.seed)
    bias_rows, biases = finite_context_rows(config, problem, ctx)
    geometry_checks, geometry = geometry_rows(config, problem, spectrum, ctx)
    lemma4_checks, lemma4 = empirical_geometry_rows(config, problem, spectrum, ctx)
    spectral_checks, spectral = spectral_rows(config, problem, ctx)
    training_checks, population_run = training_rows(config, problem, spectrum, ctx)
    floor_rows, parts, trajectories, floor_note = floor_checks(config, problem, biases, ctx)
    checks = [*bias_rows, *minima_rows(config, problem), *geometry_checks, *lemma4_checks, *spectral_checks]
    checks += training_checks
    checks += floor_rows
    spectral_table = pd.DataFrame(spectral)
    tables = {
        "biases": biases,
        "one_point": pd.DataFrame(geometry),
        "lemma4": pd.DataFrame([lemma4]),
        "spectral": spectral_table,
        "floors": parts,
        "hessian": pd.DataFrame({"eigenvalue": spectrum}),
    }
    return ExperimentResult(
        frame=population_run.assign(oracle="population"),
        checks=checks,
        figures={"theory": _figure(config, biases, spectral_table, population_run, trajectories)},
        tables=tables,
        notes=[problem.assumptions().describe(), floor_note],
    )


register(
    Experiment(
        name="regression.theory",
        cost=53.0,
        config_type=TheoryConfig,
        run=run_theory,
        quick={
            "bias_ns": (25, 50, 100, 200),
            "bias_samples": 200,
            "regularizer_samples": 2000,
            "spectral_ns": (100, 1000, 10_000),
            "spectral_seeds": 10,
            "directions": 100,
            "steps": 150,
            "mc_ns": (50, 100, 200),
            "mc_batches": 8,
            "mc_runs": 2,
            "mc_steps": 60,
            "lem4_batches": 32,
            "lem4_directions": 5,
        },
        claims=CLAIMS,
        falsifiers=FALSIFIERS,
    )
)
