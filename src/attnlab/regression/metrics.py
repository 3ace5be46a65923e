"""What a run of Algorithm 1 is measured by: the population gap ``L - L_irr`` and the distance to the minima.

Spec: preconditioned-regression §3.3 (the closed-form excess loss), §4.3 (the projection onto the manifold M).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attnlab.regression._checks import check_tokens
from attnlab.regression.data import RegressionProblem
from attnlab.regression.manifold import project
from attnlab.regression.population import population_excess_loss

__all__ = ["gap_metrics"]


def gap_metrics(
    problem: RegressionProblem, tokens: str = "covariates"
) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """The ``metrics`` of :func:`~attnlab.training.regression.fit` that every regression run records.

    Parameters
    ----------
    problem : RegressionProblem
        The law the population quantities are taken under.
    tokens : {"covariates", "joint"}, default="covariates"
        The token reading of ``V, Q`` (spec §10.1).

    Returns
    -------
    dict of str to callable
        ``"gap"``: ``(V, Q) -> L(V, Q) - L_irr`` (spec §3.3), ``"dist"``: ``(V, Q) -> dist((V, Q), M)`` (spec §4.3),
        each of shape ``(R,)`` for ``V`` (R, k, p) and ``Q`` (R, p, d).
    """
    tokens = check_tokens(tokens)
    Sigma_z = problem.token_covariance(tokens)
    return {
        "gap": lambda V, Q: population_excess_loss(V, Q, problem.Sigma, problem.W_star, tokens=tokens),
        "dist": lambda V, Q: project(V, Q, problem.W_star, problem.Sigma, Sigma_z).distance,
    }
