"""What the regression experiments share: the theory instance, its perturbed-manifold start, the gap metrics.

Spec: docs/theory/preconditioned-regression.md §4.2 (theta_R), §3.3 (the closed form the gaps are measured with).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

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
