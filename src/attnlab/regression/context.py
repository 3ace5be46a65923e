"""The softmax weights and context statistics of one query, their covariate gradients (Lemma 8) and their moments
over fresh contexts given the query (the objects of Appendix D, Lemmas 9-23).

Spec: preconditioned-regression §2 (the predictor), §3.1 (the query is a token of its own context), §8 (Appendix D).
For a query ``x`` (the paper's ``x_i``) and a context ``x_1 = x, x_2, ..., x_n`` the weights are
``s_l = softmax_l(x_l^T Q x)``, the context mean ``mu = sum_l s_l x_l`` and the weighted covariance
``Cov_S = sum_l s_l (x_l - mu)(x_l - mu)^T``. As ``n -> infinity`` with ``x_l ~ N(0, Sigma)``, Gaussian tilting sends
``mu -> Sigma Q x`` and ``Cov_S -> Sigma`` (spec §3.3); each of ``s``, ``mu``, ``mu mu^T`` and ``Cov_S`` concentrates at
rate ``1/n`` given the query, which is what the lemmas of Appendix D bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar, check_seed, check_tensor
from attnlab.regression.data import RegressionProblem, check_problem, sample

__all__ = [
    "ContextStatistics",
    "LimitOffsets",
    "conditional_moments",
    "context_statistics",
    "limit_offset",
    "mean_jacobian",
    "moments_and_offsets",
    "softmax_weights",
]

_CHUNK_ENTRIES = 2**21  # context tokens per chunk of draws (16 MiB of covariates in float64 at d = 3)
MOMENTS = (
    "cross_weight_sq",
    "self_weight_var",
    "normalizer_var",
    "mean_sq_dev",
    "mean_var",
    "outer_sq_dev",
    "outer_var",
    "covariance_sq_dev",
    "covariance_var",
)
"""The columns of :func:`conditional_moments` (each with a ``<name>_se`` column beside it)."""


def softmax_weights(Q: torch.Tensor, query: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """Weights ``s_l = softmax_l(x_l^T Q x)`` of the context tokens for one query, without checks (spec §2).

    Parameters
    ----------
    Q : torch.Tensor, shape (d, d), float64
    query : torch.Tensor, shape ([D,] d), float64
    X : torch.Tensor, shape ([D,] m, d), float64
        Context tokens, one a row.

    Returns
    -------
    torch.Tensor, shape ([D,] m)
        Non-negative, summing to 1 over the context.
    """
    logits = (X @ (Q @ query.unsqueeze(-1))).squeeze(-1)  # spec §2: x_l^T Q x
    return torch.softmax(logits, dim=-1)


@dataclass(frozen=True)
class ContextStatistics:
    """The softmax weights of one query's context and the statistics they weigh (spec §2, Appendix D).

    Attributes
    ----------
    weights : torch.Tensor, shape ([D,] m)
        ``s_l``.
    mean : torch.Tensor, shape ([D,] d)
        ``mu = sum_l s_l x_l``.
    covariance : torch.Tensor, shape ([D,] d, d)
        ``Cov_S = sum_l s_l (x_l - mu)(x_l - mu)^T``.
    """

    weights: torch.Tensor
    mean: torch.Tensor
    covariance: torch.Tensor


def _statistics(Q: torch.Tensor, query: torch.Tensor, X: torch.Tensor) -> ContextStatistics:
    s = softmax_weights(Q, query, X)
    mean = (s.unsqueeze(-2) @ X).squeeze(-2)  # spec §2: mu = sum_l s_l x_l
    second = (X * s.unsqueeze(-1)).transpose(-1, -2) @ X  # sum_l s_l x_l x_l^T
    return ContextStatistics(s, mean, second - mean.unsqueeze(-1) * mean.unsqueeze(-2))


def _check_context(Q: object, query: object, X: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    sizes: dict[str, int] = {}
    Q = check_tensor("Q", Q, "dd", sizes)
    query = check_tensor("query", query, "d", sizes)
    X = check_tensor("X", X, "md", sizes)
    return Q, query, X


def context_statistics(Q: object, query: object, X: object) -> ContextStatistics:
    """The softmax weights, context mean and weighted covariance of one query (spec §2; Appendix D's objects).

    Parameters
    ----------
    Q : array-like, shape (d, d), float64
        Key-query matrix; logits ``x_l^T Q x``.
    query : array-like, shape (d,), float64
        The query ``x``.
    X : array-like, shape (m, d), float64
        The context tokens, one a row; in the in-sample loss the query is one of them (spec §3.1).

    Returns
    -------
    ContextStatistics

    Raises
    ------
    ValidationError
        Mismatched shapes, non-float64 or non-finite entries.

    Examples
    --------
    >>> import torch
    >>> X = torch.eye(2, dtype=torch.float64)
    >>> stats = context_statistics(torch.zeros(2, 2, dtype=torch.float64), X[0], X)
    >>> stats.mean.tolist()  # Q = 0: uniform weights, the plain mean
    [0.5, 0.5]
    """
    return _statistics(*_check_context(Q, query, X))


def mean_jacobian(Q: object, X: object) -> torch.Tensor:
    """Lemma 8: the gradient of the context mean ``mu`` of the query ``x = x_1`` with respect to each token.

    Spec: preconditioned-regression §2, Appendix D (Lemma 8). With ``a = Q x`` and ``s`` the weights,
    ``d mu / d x_l = s_l (I + (x_l - mu) a^T)`` for a context token ``l >= 2``, and for the query, which is both the
    query and the first token, ``d mu / d x_1 = s_1 (I + (x_1 - mu) a^T) + Cov_S Q``.

    Parameters
    ----------
    Q : array-like, shape (d, d), float64
        Key-query matrix.
    X : array-like, shape (m, d), float64
        The context; its first row is the query.

    Returns
    -------
    torch.Tensor, shape (m, d, d)
        Entry ``[l, a, b]`` is ``d mu_a / d (x_l)_b``.

    Raises
    ------
    ValidationError
        Mismatched shapes, non-float64 or non-finite entries, an empty context.

    Examples
    --------
    >>> import torch
    >>> X = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> mean_jacobian(torch.zeros(2, 2, dtype=torch.float64), X)[1].tolist()  # Q = 0: d mu / d x_2 = I / 2
    [[0.5, 0.0], [0.0, 0.5]]
    """
    sizes: dict[str, int] = {}
    Q = check_tensor("Q", Q, "dd", sizes)
    X = check_tensor("X", X, "md", sizes)
    if X.shape[0] == 0:
        raise ValidationError("X is an empty context; its first row is the query, so pass at least one token")
    stats = _statistics(Q, X[0], X)
    a = Q @ X[0]
    eye = torch.eye(X.shape[-1], dtype=X.dtype)
    jacobian = stats.weights[:, None, None] * (eye + (X - stats.mean).unsqueeze(-1) * a)  # Lemma 8, l >= 2
    jacobian[0] += stats.covariance @ Q  # Lemma 8: the query's own logit terms
    return jacobian


def _mean_and_se(values: torch.Tensor) -> tuple[float, float]:
    return float(values.mean()), float(values.std()) / math.sqrt(values.shape[0])


def _variance(values: torch.Tensor) -> tuple[float, float]:
    """``tr Var`` of draws ``values`` (D, m) and its SE: the mean squared deviation from the sample mean."""
    deviations = ((values - values.mean(0)) ** 2).sum(-1) * values.shape[0] / (values.shape[0] - 1)
    return _mean_and_se(deviations)


def _square_deviation(values: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    """``E ||values - target||^2`` from draws (D, m) and its SE."""
    return _mean_and_se(((values - target) ** 2).sum(-1))


def moments_and_offsets(
    problem: RegressionProblem, Q: object, query: object, ns: Sequence[int], draws: int, seed: int
) -> tuple[pd.DataFrame, LimitOffsets]:
    """Monte-Carlo moments of the weights and statistics of one query given the query, per context size n, and the
    conditional biases of ``mu`` and ``mu mu^T`` from their limits (:class:`LimitOffsets`), from the same draws.

    Spec: preconditioned-regression §8 (Appendix D). Each draw is a context ``x_1 = query, x_2, ..., x_n`` with
    ``n - 1`` fresh covariates of ``problem``; ``m = Sigma Q x`` and ``Sigma`` are the ``n -> infinity`` limits of
    ``mu`` and ``Cov_S`` (spec §3.3).

    Parameters
    ----------
    problem : RegressionProblem
        Its ``Sigma`` draws the covariates and is the limit of ``Cov_S``.
    Q : array-like, shape (d, d), float64
    query : array-like, shape (d,), float64
    ns : sequence of int
        Context sizes, each >= 2 (the query and at least one other token).
    draws : int
        Contexts per n, >= 2.
    seed : int
        Context size n draws from ``seed + n``.

    Returns
    -------
    pandas.DataFrame
        One row per n: column ``n`` and each of :data:`MOMENTS` with its SE ``<name>_se``:
        ``cross_weight_sq`` ``E[s_j^2]`` (j >= 2, averaged over the context); ``self_weight_var`` ``Var(n s_1)``;
        ``normalizer_var`` ``Var(Z / n)``, ``Z = sum_l exp(x_l^T Q x)``; ``mean_sq_dev`` ``E ||mu - m||^2`` and
        ``mean_var`` ``tr Var(mu)``; ``outer_sq_dev``, ``outer_var`` the same for ``mu mu^T`` against ``m m^T``;
        ``covariance_sq_dev``, ``covariance_var`` for ``Cov_S`` against ``Sigma``. Every moment is given the query.
    LimitOffsets
        Per n, the Monte-Carlo means of ``mu - m`` and of the distinct entries of ``mu mu^T - m m^T``, with their
        covariances.

    Raises
    ------
    ValidationError
        A context size below 2, fewer than 2 draws, mismatched shapes.
    """
    check_problem(problem)
    sizes = {"d": problem.d}
    Q = check_tensor("Q", Q, "dd", sizes)
    query = check_tensor("query", query, "d", sizes)
    for n in ns:
        check_scalar("ns", n, kind=int, low=2)
    check_scalar("draws", draws, kind=int, low=2)
    check_seed("seed", seed)
    target_mean = problem.Sigma @ Q @ query  # spec §3.3: the tilted mean of the context
    target_outer = torch.outer(target_mean, target_mean)
    rows, offsets = [], LimitOffsets(tuple(ns), {"mean": [], "outer": []}, {"mean": [], "outer": []})
    for n in ns:
        generator = torch.Generator().manual_seed(seed + n)
        parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("cross", "self", "normalizer", "mean", "cov")}
        per_chunk = max(1, _CHUNK_ENTRIES // n)
        for start in range(0, draws, per_chunk):
            X, _ = sample(problem, n - 1, runs=min(per_chunk, draws - start), generator=generator)
            X = torch.cat([query.expand(X.shape[0], 1, -1), X], dim=-2)  # spec §3.1: the query is a token
            stats = _statistics(Q, query, X)
            logits = X @ (Q @ query)  # spec §2: x_l^T Q x, (draws, n)
            parts["cross"].append((stats.weights[:, 1:] ** 2).mean(-1))
            parts["self"].append(n * stats.weights[:, :1])
            parts["normalizer"].append((torch.logsumexp(logits, -1, keepdim=True) - math.log(n)).exp())
            parts["mean"].append(stats.mean)
            parts["cov"].append(stats.covariance.flatten(-2))
        cross, self_weight, normalizer, mean, cov = (torch.cat(parts[k]) for k in parts)
        outer = (mean.unsqueeze(-1) * mean.unsqueeze(-2)).flatten(-2)
        upper = torch.triu_indices(problem.d, problem.d)
        upper = upper[0] * problem.d + upper[1]  # the distinct entries of the symmetric mu mu^T
        offsets.add("mean", mean - target_mean)
        offsets.add("outer", outer[:, upper] - target_outer.flatten()[upper])
        values = {
            "cross_weight_sq": _mean_and_se(cross),  # Lemma 9: E[s_ij^2 | x_i]
            "self_weight_var": _variance(self_weight),  # Lemma 10: Var(n s_ii | x_i)
            "normalizer_var": _variance(normalizer),  # Lemma 10: Var(Z / n | x_i)
            "mean_sq_dev": _square_deviation(mean, target_mean),  # Lemma 11
            "mean_var": _variance(mean),  # Lemma 14
            "outer_sq_dev": _square_deviation(outer, target_outer.flatten()),  # Lemma 15
            "outer_var": _variance(outer),  # Lemma 19
            "covariance_sq_dev": _square_deviation(cov, problem.Sigma.flatten()),  # Lemma 20
            "covariance_var": _variance(cov),  # Lemma 23
        }
        row: dict[str, float] = {"n": n}
        for name, (value, se) in values.items():
            row[name], row[f"{name}_se"] = value, se
        rows.append(row)
    return pd.DataFrame(rows), offsets


@dataclass(frozen=True)
class LimitOffsets:
    """Per context size n, the Monte-Carlo mean of a statistic's deviation from its ``n -> infinity`` limit given the
    query (the conditional bias) and the covariance of that mean (spec §8, Appendix D).

    Attributes
    ----------
    ns : tuple of int
        The context sizes.
    means : dict of str to list of numpy.ndarray, each shape (p,)
        ``"mean"``: ``E[mu | x] - m``; ``"outer"``: the distinct (upper-triangle) entries of ``E[mu mu^T | x] - m m^T``.
    covariances : dict of str to list of numpy.ndarray, each shape (p, p)
        The covariance of each mean: the draws' covariance over the number of draws.
    """

    ns: tuple[int, ...]
    means: dict[str, list[np.ndarray]]
    covariances: dict[str, list[np.ndarray]]

    def add(self, name: str, deviations: torch.Tensor) -> None:
        """Append one n's draws of a deviation, shape (D, p): their mean and its covariance.

        Parameters
        ----------
        name : str
            ``"mean"`` or ``"outer"``.
        deviations : torch.Tensor, shape (D, p)
            One deviation from the limit a draw.
        """
        values = deviations.numpy()
        self.means[name].append(values.mean(0))
        self.covariances[name].append(np.atleast_2d(np.cov(values.T)) / values.shape[0])


def limit_offset(offsets: LimitOffsets, name: str, terms: int = 3) -> tuple[float, int, float]:
    """Wald test that a conditional bias tends to 0: the generalised least-squares fit ``E[.] - limit = c0 + c1 / n
    + ... + c_{terms-1} / n^(terms-1)`` over n (vector coefficients, weights the inverse covariances of the means).

    Spec: preconditioned-regression §8 (Appendix D: each statistic's mean-square deviation from its limit is
    ``<= C/n``, so its conditional bias has no constant term ``c0``).

    Parameters
    ----------
    offsets : LimitOffsets
    name : str
        ``"mean"`` or ``"outer"``.
    terms : int, default=3
        Terms of the expansion in ``1/n``, the constant included; fewer than ``len(offsets.ns)``.

    Returns
    -------
    chi2 : float
        ``c0^T Cov(c0)^-1 c0``, chi^2 with ``dof`` degrees of freedom when ``c0 = 0``.
    dof : int
        The entries of the statistic.
    size : float
        ``||c0||``.
    """
    check_scalar("terms", terms, kind=int, low=1, high=len(offsets.ns) - 1)
    dof = offsets.means[name][0].shape[0]
    normal, moment = np.zeros((terms * dof, terms * dof)), np.zeros(terms * dof)
    for n, mean, cov in zip(offsets.ns, offsets.means[name], offsets.covariances[name], strict=True):
        design = np.kron(float(n) ** -np.arange(terms), np.eye(dof))  # (p, terms p): [I, I/n, I/n^2, ...]
        weighted = np.linalg.solve(cov, design)
        normal += design.T @ weighted
        moment += weighted.T @ mean
    covariance = np.linalg.inv(normal)
    c0 = (covariance @ moment)[:dof]
    return float(c0 @ np.linalg.solve(covariance[:dof, :dof], c0)), dof, float(np.linalg.norm(c0))


def conditional_moments(
    problem: RegressionProblem, Q: object, query: object, ns: Sequence[int], draws: int, seed: int
) -> pd.DataFrame:
    """The moments table of :func:`moments_and_offsets` alone.

    Parameters
    ----------
    problem, Q, query, ns, draws, seed
        As :func:`moments_and_offsets`.

    Returns
    -------
    pandas.DataFrame
        One row per n, as :func:`moments_and_offsets`' first value.
    """
    return moments_and_offsets(problem, Q, query, ns, draws, seed)[0]
