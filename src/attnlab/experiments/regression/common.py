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
