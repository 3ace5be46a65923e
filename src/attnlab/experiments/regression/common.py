"""What the regression experiments share: the theory instance, its perturbed-manifold start, the gap metrics, and
the weighted log-log slope their Monte-Carlo rows use.

Spec: docs/theory/preconditioned-regression.md §4.2 (theta_R), §3.3 (the closed form the gaps are measured with).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
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


def weighted_log_slope(x: Sequence[float], y: Sequence[float], se: Sequence[float]) -> tuple[float, float]:
    """Slope of ``log y`` on ``log x`` weighted by the standard errors of ``log y`` (``se / y``), and its SE.

    The SE is the least-squares one, ``(sum w (log x - mean)^2)^{-1/2}``: the Monte-Carlo spread of the points,
    carried to the slope. Non-positive or non-finite points give NaN (a bias that changed sign has no slope).
    """
    x, y, se = (np.asarray(v, float) for v in (x, y, se))
    if len(x) < 2 or not (np.all(np.isfinite(y)) and np.all(y > 0) and np.all(se > 0)):
        return math.nan, math.nan
    w = (y / se) ** 2
    lx, ly = np.log(x), np.log(y)
    mx = (w * lx).sum() / w.sum()
    sxx = (w * (lx - mx) ** 2).sum()
    slope = float((w * (lx - mx) * ly).sum() / sxx)
    return slope, float(sxx**-0.5)
