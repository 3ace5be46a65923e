"""What the regression experiments share: the theory instance and Algorithm 1's step settings.

Spec: docs/theory/preconditioned-regression.md §7 (A1-A3 on the instance), §6.2 (Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from attnlab._validation import ValidationError, check_scalar
from attnlab.optim.preconditioned import PreconditionedGD
from attnlab.regression import (
    RegressionProblem,
    make_problem,
)

PAPER = "preconditioned-regression"
SOURCE = "docs/theory/preconditioned-regression.md"
INSTANCE = ("d", "k", "noise_std", "singular_values", "problem_seed", "seed")
"""The config fields of the theory instance and its seed: every reading of the theory rows depends on them."""


@dataclass(frozen=True)
class TheoryInstanceConfig:
    """The theory instance and Algorithm 1's step settings that ``regression.theory`` and ``regression.scaling``
    share (sizes are ours; the paper gives none).

    Attributes
    ----------
    d : int
        Covariate dimension.
    k : int
        Response dimension, k >= d (A2).
    noise_std : float
        Noise sigma; L_irr = k sigma^2.
    singular_values : tuple of float
        sigma(W* Sigma^{1/2}), d values: A3 holds and kappa < 2 (a fast local rate).
    problem_seed : int
        Seed of Sigma and the singular vectors of W*.
    seed : int
        Seed of every sample, rotation and start.
    mu : float
        Regularizer weight (spec §3.4 [R]).
    lr : float
        Step size eta of Algorithm 1.
    start_scale : float
        Entry size of the perturbation of theta_R: the perturbed-manifold start (spec §9.3).
    """

    d: int = 3
    k: int = 6
    noise_std: float = 0.1
    singular_values: tuple[float, ...] = (0.25, 0.2, 0.15)
    problem_seed: int = 0
    seed: int = 0
    mu: float = 0.25  # spec §3.4 [R]
    lr: float = 0.5
    start_scale: float = 0.05

    OURS = ("d", "k", "noise_std", "singular_values", "mu", "lr")

    def __post_init__(self) -> None:
        check_scalar("k", self.k, kind=int, low=self.d)
        if len(self.singular_values) != self.d:
            raise ValidationError(f"singular_values has {len(self.singular_values)} entries, needs d == {self.d}")

    def problem(self) -> RegressionProblem:
        """The instance these settings describe (:func:`theory_problem`)."""
        return theory_problem(self.d, self.k, self.noise_std, self.singular_values, self.problem_seed)


def theory_problem(d: int, k: int, noise_std: float, singular_values: Sequence[float], seed: int) -> RegressionProblem:
    """The instance of the theory rows: sigma(W* Sigma^{1/2}) fixed, so A3 holds and kappa is small."""
    return make_problem(d, k, noise_std=noise_std, singular_values=tuple(singular_values), seed=seed)


def true_sigma_step(problem: RegressionProblem, runs: int, lr: float) -> Callable[[list], PreconditionedGD]:
    """Algorithm 1's preconditioned step with the true Sigma for ``runs`` runs (the floors' ``make_optimizer``)."""
    Sigma = problem.Sigma.expand(runs, -1, -1)
    return lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], Sigma, lr=lr)  # spec §6.2


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
