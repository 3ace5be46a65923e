"""What a run of Algorithm 1 is measured by: the population gap ``L - L_irr`` and the distance to the minima.

Spec: preconditioned-regression §3.3 (the closed-form excess loss), §4.3 (the projection onto the manifold M).
"""

from __future__ import annotations

import torch

from attnlab.metrics import Metric
from attnlab.regression._checks import check_tokens
from attnlab.regression.data import RegressionProblem, check_problem
from attnlab.regression.manifold import project
from attnlab.regression.population import excess

__all__ = ["gap_metrics"]


def gap_metrics(problem: RegressionProblem, tokens: str = "covariates") -> dict[str, Metric]:
    """The ``metrics`` of :func:`~attnlab.training.regression.fit` that every regression run records.

    Parameters
    ----------
    problem : RegressionProblem
        The law the population quantities are taken under.
    tokens : {"covariates", "joint"}, default="covariates"
        The token reading of ``V, Q`` (spec §10.1).

    Returns
    -------
    dict of str to Metric
        ``"gap"``: ``L(V, Q) - L_irr`` (spec §3.3), ``"dist"``: ``dist((V, Q), M)`` (spec §4.3), each a metric of the
        state ``{"V": (R, k, p), "Q": (R, p, d)}`` with values of shape ``(R,)``.

    Raises
    ------
    ValidationError
        A ``problem`` that is not a :class:`~attnlab.regression.RegressionProblem`, or unknown ``tokens``.
    """
    check_problem(problem)
    tokens = check_tokens(tokens)
    Sigma_z = problem.token_covariance(tokens)
    return {
        "gap": Metric(  # spec §3.3, §10.1: the joint Sigma_z holds sigma^2 I_k, so it needs the problem's sigma
            "gap",
            lambda s: _gap(problem, Sigma_z, s["V"], s["Q"]),
        ),
        "dist": Metric("dist", lambda s: project(s["V"], s["Q"], problem.W_star, problem.Sigma, Sigma_z).distance),
    }


def _gap(problem: RegressionProblem, Sigma_z: torch.Tensor, V: torch.Tensor, Q: torch.Tensor) -> torch.Tensor:
    """``L(V, Q) - L_irr`` of the iterates of a run, checked by the run (spec §3.3): the closed form without checks,
    so a recorded value is never refused (:func:`~attnlab.regression.population_excess_loss` refuses overflow)."""
    with torch.no_grad():
        return excess(V, Q, problem.Sigma, Sigma_z, problem.W_star)
