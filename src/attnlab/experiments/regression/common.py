"""What the regression experiments share: the theory instance, its perturbed-manifold start, the gap metrics.

Spec: docs/theory/preconditioned-regression.md §4.2 (theta_R), §3.3 (the closed form the gaps are measured with).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.regression import (
    RegressionProblem,
    make_problem,
    manifold_point,
    population_excess_loss,
    project,
    random_rotation,
)

PAPER = "preconditioned-regression"
SOURCE = "docs/theory/preconditioned-regression.md"


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


def perturbed_start(
    problem: RegressionProblem, runs: int, scale: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``theta_R`` for ``runs`` random ``R`` in O(d), plus i.i.d. N(0, scale^2) entries: a start near M (spec §4.2).

    Returns ``V`` (runs, k, d) and ``Q`` (runs, d, d). With ``scale = 0`` the points lie on M.
    """
    V, Q = manifold_point(random_rotation(problem.d, runs=runs, seed=seed), problem.W_star, problem.Sigma)
    gen = torch.Generator().manual_seed(seed + 1)
    return V + scale * torch.randn(V.shape, generator=gen), Q + scale * torch.randn(Q.shape, generator=gen)


def gap_metrics(problem: RegressionProblem, tokens: str = "covariates") -> dict[str, Callable]:
    """Metrics of :func:`attnlab.regression.fit`: the population gap L - L_irr and dist(theta, M) (spec §3.3, §4.3)."""
    Sigma_z = problem.token_covariance(tokens)
    return {
        "gap": lambda V, Q: population_excess_loss(V, Q, problem.Sigma, problem.W_star, tokens=tokens),
        "dist": lambda V, Q: project(V, Q, problem.W_star, problem.Sigma, Sigma_z).distance,
    }
