"""What the regression experiments share: the theory instance and Algorithm 1's step settings.

Spec: docs/theory/preconditioned-regression.md §7 (A1-A3 on the instance), §6.2 (Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Real

from attnlab._validation import ValidationError, check_count, check_grid, check_scalar
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
class InstanceConfig:
    """The theory instance and its seeds that ``regression.theory``, ``regression.scaling`` and ``regression.context``
    share (sizes are ours; the paper gives none).

    Attributes
    ----------
    d : int
        Covariate dimension; >= 1.
    k : int
        Response dimension, k >= d (A2).
    noise_std : float
        Noise sigma; L_irr = k sigma^2; >= 0.
    singular_values : tuple of float
        sigma(W* Sigma^{1/2}), d values, each > 0 (A2): A3 holds and kappa < 2 (a fast local rate).
    problem_seed : int
        Seed of Sigma and the singular vectors of W*.
    seed : int
        Seed of every sample, rotation and start.
    """

    d: int = 3
    k: int = 6
    noise_std: float = 0.1
    singular_values: tuple[float, ...] = (0.25, 0.2, 0.15)
    problem_seed: int = 0
    seed: int = 0

    OURS = ("d", "k", "noise_std", "singular_values")

    def __post_init__(self) -> None:
        check_scalar("d", self.d, kind=int, low=1)
        check_scalar("k", self.k, kind=int, low=self.d)
        check_scalar("noise_std", self.noise_std, low=0.0)
        if len(self.singular_values) != self.d:
            raise ValidationError(f"singular_values has {len(self.singular_values)} entries, needs d == {self.d}")
        for value in self.singular_values:
            check_scalar("singular_values entry", value, low=0.0, low_inclusive=False)

    def problem(self) -> RegressionProblem:
        """The instance these settings describe (:func:`theory_problem`)."""
        return theory_problem(self.d, self.k, self.noise_std, self.singular_values, self.problem_seed)


@dataclass(frozen=True)
class TheoryInstanceConfig(InstanceConfig):
    """The theory instance and Algorithm 1's step settings that ``regression.theory`` and ``regression.scaling``
    share (sizes are ours; the paper gives none).

    The instance (d, k, noise_std, singular_values, problem_seed) and seed are :class:`InstanceConfig`'s.

    Attributes
    ----------
    mu : float
        Regularizer weight (spec §3.4 [R]); >= 0.
    lr : float
        Step size eta of Algorithm 1; > 0.
    start_scale : float
        Entry size of the perturbation of theta_R: the perturbed-manifold start (spec §9.3); > 0 (the runs read
        their approach to M from a start off it).
    """

    mu: float = 0.25  # spec §3.4 [R]
    lr: float = 0.5
    start_scale: float = 0.05

    OURS = ("d", "k", "noise_std", "singular_values", "mu", "lr")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("mu", self.mu, low=0.0)  # checked here under its config name (fit calls it regularizer_weight)
        check_scalar("lr", self.lr, low=0.0, low_inclusive=False)
        check_scalar("start_scale", self.start_scale, low=0.0, low_inclusive=False)


MAX_SEEDS = 100
"""Most seeds (runs) a regression experiment takes in one count field (ours: a bound on the run's time and memory,
which grow linearly in it; 5 x the largest default)."""
SEEDS_WHY = "ours: a bound on the run's time and memory, which grow linearly in it"


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
        Context sizes of the Monte-Carlo biases (T1.1, Theorems 4 and 5): distinct, each >= 1, at least three
        (the rows fit their rates in n).
    bias_samples : int
        Fresh samples per n for the loss and gradient biases.
    regularizer_samples : int
        Fresh covariances per n for the regularizer-gradient bias (Theorem 5; cheap, so many).
    bias_scale : float
        Entry size of the perturbation of theta_R: the point off the manifold M where the biases are measured; >= 0.
    spectral_ns : tuple of int
        Sample sizes of the spectral start (Lemma 3): distinct, each >= d (an invertible Sigma_hat), at least two
        of them in the last decade, n >= max(spectral_ns) / 10 (L5 fits its slope there).
    spectral_seeds : int
        Samples per n of the spectral start; from 2 (the rows' tolerance is a spread over seeds) to 100 (ours: a
        bound on the run's time and memory).
    radii : tuple of float
        T1.3 radii, multiples of sigma_d^{1/2}; rho = 0.25 (Tu et al.): at least one, distinct, each in (0, rho]
        (the T1.3 and L4 rows read points within rho of M).
    directions : int
        Random directions per radius (T1.3).
    lr : float
        Step of the population-oracle and Monte-Carlo-oracle runs (T2); > 0.
    start_scale : float
        Entry size of the perturbation of theta_R where the T2 runs start (the perturbed-manifold start); > 0 (T2
        reads the approach to M from a start off it).
    steps : int
        Steps of the population-oracle run (T2, L2); >= 25 (T2's rate reads at least 5 recorded steps, one every 5).
    mc_ns : tuple of int
        Context sizes of the Monte-Carlo-oracle floor (T2): distinct, each >= 1, at least two (the floor's rate in
        n).
    mc_batches : int
        Fresh samples per step of the Monte-Carlo oracle (the floor is also run at half of it): even, >= 2.
    mc_runs : int
        Starts per n of the floor runs; >= 2.
    mc_steps : int
        Steps of the floor runs; the floor is the mean gap over their second half; >= 2 (a second half after the
        start).
    lem4_n : int
        Context size of the fresh samples of the Lemma 4 rows; >= 1.
    lem4_batches : int
        Fresh samples per point of the Lemma 4 rows (the Monte-Carlo mean of the empirical gradient).
    lem4_directions : int
        Points per radius of the Lemma 4 rows' old readings (their revisions); >= 1.
    lem4_resolved_n : int
        Context size of the fresh samples of the Lemma 4 rows at rho (along the Hessian's normal eigenvectors and
        the scaling direction); >= 1. Ours: large enough that the oracle's squared bias ||b||^2 is well below
        alpha^2 rho^2 (at M: 5.5e-5 at n = 1000 against alpha^2 rho^2 = 8.4e-4; 2.8e-3 at n = 100).
    second_singular_values : tuple of float
        sigma(W* Sigma^{1/2}) of the second instance of t13-sigma-scaling (the same Sigma, singular vectors and seed),
        d values, each > 0; ours: sigma_1 halved and sigma_d a third of the default's, so that both constants move.
    lem4_train : int
        Size of the training sample whose Sigma_hat preconditions the Lemma 4 rows; >= d (an invertible
        Sigma_hat).
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
    lem4_resolved_n: int = 1000
    second_singular_values: tuple[float, ...] = (0.125, 0.1, 0.05)
    lem4_train: int = 1000

    OURS = TheoryInstanceConfig.OURS + ("bias_ns", "bias_scale", "mc_ns", "radii", "second_singular_values")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("bias_scale", self.bias_scale, low=0.0)
        for name in ("bias_samples", "regularizer_samples", "directions", "mc_runs", "lem4_batches"):
            check_scalar(name, getattr(self, name), kind=int, low=2)
        check_count("spectral_seeds", self.spectral_seeds, 2, MAX_SEEDS, SEEDS_WHY)
        check_grid("bias_ns", self.bias_ns, 1, points=3, why="the rows fit their rates in n")
        check_grid("mc_ns", self.mc_ns, 1, points=2, why="the floor's rate in n")
        check_grid(
            "spectral_ns",
            self.spectral_ns,
            low=self.d,
            points=2,
            why="L3 and L6 are slopes in n",
            low_why="d: an invertible Sigma_hat",
        )
        last = [n for n in self.spectral_ns if n >= max(self.spectral_ns) / 10]
        if len(last) < 2:
            raise ValidationError(
                f"spectral_ns == {tuple(self.spectral_ns)} has {len(last)} size(s) in its last decade (n >= "
                f"{max(self.spectral_ns) / 10:g}); L5 fits its slope there and needs two, e.g. spectral_ns="
                f"{','.join(map(str, sorted(self.spectral_ns)))},{max(self.spectral_ns) * 10}"
            )
        if not self.radii:
            raise ValidationError(f"radii is empty; pass at least one radius in (0, {RHO}], e.g. radii=0.02,0.1")
        for radius in self.radii:  # the T1.3 and L4 rows read points within rho of M
            check_scalar("radii entry", radius, low=0.0, high=RHO, low_inclusive=False)
        check_grid("radii", self.radii, 0.0, kind=Real)
        # T2's rate reads >= 5 recorded steps (one every 5, T2_RATE's min_records) with 1e-7 < dist < 1e-2
        check_scalar("steps", self.steps, kind=int, low=25)
        check_scalar("mc_batches", self.mc_batches, kind=int, low=2)
        if self.mc_batches % 2:
            raise ValidationError(
                f"mc_batches == {self.mc_batches}, must be even (the floor is also run at mc_batches // 2); pass "
                f"mc_batches={self.mc_batches + 1}"
            )
        check_scalar("mc_steps", self.mc_steps, kind=int, low=2)  # the floor: the mean over the second half
        check_scalar("lem4_n", self.lem4_n, kind=int, low=1)
        check_scalar("lem4_directions", self.lem4_directions, kind=int, low=1)
        check_scalar("lem4_resolved_n", self.lem4_resolved_n, kind=int, low=1)
        if len(self.second_singular_values) != self.d:
            raise ValidationError(
                f"second_singular_values has {len(self.second_singular_values)} entries, needs d == {self.d}"
            )
        for value in self.second_singular_values:
            check_scalar("second_singular_values entry", value, low=0.0, low_inclusive=False)
        if check_scalar("lem4_train", self.lem4_train, kind=int, low=1) < self.d:
            raise ValidationError(
                f"lem4_train == {self.lem4_train}, must be >= d == {self.d} (an invertible Sigma_hat)"
            )


RHO = 0.25
"""The local region of T1.3 in multiples of sigma_d^{1/2} (Tu et al.): the T1.3 and L4 rows read points within it."""
