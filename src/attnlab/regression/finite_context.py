"""Finite-context biases by Monte Carlo, and the fits of their expansion in ``1/n``: ``E L_n - L`` (Theorem 1.1)
and the squared biases of the expected empirical gradients (Theorems 3-5), at one point ``theta`` over fresh samples
of each context size ``n``.

Spec: preconditioned-regression §3.1-3.4, §8 (T1.1, T3-T5). The population side is the closed form
(:func:`population_loss`, :func:`population_gradient`) and, for the regularizer, autograd of the closed-form value
of the regularizer, independent of :func:`regularizer_gradient`. Each is looked up in this module by name, so a
falsifier can swap it (``attnlab.regression.finite_context:regularizer_gradient``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.optimize
import torch

from attnlab._validation import ValidationError, check_scalar, check_seed, check_tensor
from attnlab.regression import empirical, population
from attnlab.regression.data import RegressionProblem, check_problem, sample, sample_covariates
from attnlab.regression.linalg import _covariance
from attnlab.regression.population import population_gradient
from attnlab.regression.regularizer import regularizer_gradient
from attnlab.regression.regularizer import value as regularizer_value

__all__ = ["bias_expansion", "bias_table", "loss_and_gradient_bias", "profile_exponent", "regularizer_gradient_bias"]

_CHUNK_ENTRIES = 2**23  # softmax entries per chunk of samples (64 MiB in float64)


def _squared_bias(diffs: torch.Tensor) -> tuple[float, float]:
    """``||E g||^2`` from samples ``g`` (S, m), debiased by ``tr Cov / S``, and its delta-method SE."""
    S = diffs.shape[0]
    mean, cov_trace = diffs.mean(0), float(diffs.var(0).sum())
    value = float(mean @ mean) - cov_trace / S
    spread = float(((diffs - mean) @ mean).var())  # Var(g^T mean): the variance of 2 mean^T (g_bar - E g) / 2
    return value, 2 * math.sqrt(spread / S)


def _flat(grad_V: torch.Tensor, grad_Q: torch.Tensor) -> torch.Tensor:
    return torch.cat([grad_V.flatten(-2), grad_Q.flatten(-2)], -1)


def _regularizer_truth(V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor) -> torch.Tensor:
    """``grad R`` by autograd of the closed-form value (spec §3.4), flat (k d + d d)."""
    Vt, Qt = V.clone().requires_grad_(True), Q.clone().requires_grad_(True)
    return _flat(*torch.autograd.grad(regularizer_value(Vt, Qt, Sigma, Sigma), (Vt, Qt)))


def _check_point(problem: RegressionProblem, V: object, Q: object) -> tuple[torch.Tensor, torch.Tensor]:
    check_problem(problem)
    sizes = {"k": problem.k, "d": problem.d}
    return check_tensor("V", V, "kd", sizes), check_tensor("Q", Q, "dd", sizes)


def _check_sampling(n: int, samples: int, seed: int) -> None:
    check_scalar("n", n, kind=int, low=1)
    check_scalar("samples", samples, kind=int, low=2)
    check_seed("seed", seed)


def loss_and_gradient_bias(
    problem: RegressionProblem, V: torch.Tensor, Q: torch.Tensor, n: int, samples: int, seed: int, mu: float
) -> dict[str, float]:
    """Monte-Carlo biases of the empirical loss and gradients at one point, over fresh samples of context size n.

    Spec: preconditioned-regression §3.1-3.3 (Theorem 1.1), §5.1-5.3, §8 (T1.1, Theorems 3 and 4).

    Parameters
    ----------
    problem : RegressionProblem
    V : torch.Tensor, shape (k, d), float64
        Value matrix of the point (one point, no runs axis).
    Q : torch.Tensor, shape (d, d), float64
        Key-query matrix of the point.
    n : int
        Context size of each sample.
    samples : int
        Fresh samples of size ``n`` (at least 2, for the standard errors).
    seed : int
        Seeds the samples (chunk ``i`` of them from ``seed + i``).
    mu : float
        Weight of the regularizer in ``f_hat = L_n + mu R_hat``.

    Returns
    -------
    dict of str to float
        ``n``; ``loss_bias`` (``E L_n - L``, plain mean minus the closed form, so a wrong closed form shows as a
        constant) and ``loss_se``; ``grad_bias_sq`` (``||E grad L_n - grad L||^2``, debiased by ``tr Cov / S``) and
        ``grad_se``; ``f_bias_sq`` (``||E grad f_hat_n - grad f||^2``) and ``f_se``.
    """
    V, Q = _check_point(problem, V, Q)
    _check_sampling(n, samples, seed)
    check_scalar("mu", mu, low=0.0)
    S, W = problem.Sigma, problem.W_star
    per_chunk = max(1, _CHUNK_ENTRIES // (n * n))
    weights = torch.empty(min(per_chunk, samples), n, n, dtype=torch.float64)  # every chunk's softmax, one storage
    losses, grads, regs = [], [], []
    for start in range(0, samples, per_chunk):
        X, Y = sample(problem, n, runs=min(per_chunk, samples - start), seed=seed + start)
        # spec §3.1, §5.3: one value per sample
        loss, gV, gQ = empirical.loss_and_gradient(V, Q, X, Y, X, out=weights[: X.shape[0]])
        losses.append(loss)
        grads.append(_flat(gV, gQ))
        regs.append(_flat(*regularizer_gradient(V, Q, _covariance(X))))  # spec §5.2 with Sigma_hat
    loss, grad, reg = torch.cat(losses), torch.cat(grads), torch.cat(regs)
    grad_diff = grad - _flat(*population_gradient(V, Q, S, W))  # spec §5.1
    grad_sq, grad_se = _squared_bias(grad_diff)
    f_sq, f_se = _squared_bias(grad_diff + mu * (reg - _regularizer_truth(V, Q, S)))
    closed_form = float(population.population_loss(V, Q, S, W, problem.noise_std))  # spec §3.3
    return {
        "n": n,
        "loss_bias": float(loss.mean()) - closed_form,
        "loss_se": float(loss.std()) / math.sqrt(samples),
        "grad_bias_sq": grad_sq,
        "grad_se": grad_se,
        "f_bias_sq": f_sq,
        "f_se": f_se,
    }


def regularizer_gradient_bias(
    problem: RegressionProblem, V: torch.Tensor, Q: torch.Tensor, n: int, samples: int, seed: int
) -> dict[str, float]:
    """``||E grad R_hat_n - grad R||^2`` and its SE over ``samples`` fresh covariances ``Sigma_hat`` of size n.

    Spec: preconditioned-regression §3.4, §5.2, §8 (Theorem 5): ``R_hat`` is ``R`` with ``Sigma`` replaced by
    ``Sigma_hat = X^T X / n``. ``grad R`` is autograd of the closed-form value, independent of
    :func:`regularizer_gradient`.

    Parameters
    ----------
    problem : RegressionProblem
    V : torch.Tensor, shape (k, d), float64
    Q : torch.Tensor, shape (d, d), float64
    n : int
        Context size of each sample.
    samples : int
        Fresh samples of size ``n`` (at least 2).
    seed : int

    Returns
    -------
    dict of str to float
        ``n``, ``reg_bias_sq`` (debiased by ``tr Cov / S``) and ``reg_se``.
    """
    V, Q = _check_point(problem, V, Q)
    _check_sampling(n, samples, seed)
    X = sample_covariates(problem, n, runs=samples, seed=seed)  # the X of sample(), without its unread Y
    empirical_gradient = _flat(*regularizer_gradient(V, Q, _covariance(X)))  # spec §5.2 with Sigma_hat
    value, se = _squared_bias(empirical_gradient - _regularizer_truth(V, Q, problem.Sigma))
    return {"n": n, "reg_bias_sq": value, "reg_se": se}


def bias_table(
    problem: RegressionProblem,
    V: torch.Tensor,
    Q: torch.Tensor,
    ns: Sequence[int],
    samples: int,
    regularizer_samples: int,
    seed: int,
    mu: float,
) -> pd.DataFrame:
    """One row per n: the loss bias and the squared gradient biases of L, f_hat and R_hat, with their SEs.

    Spec: preconditioned-regression §8 (T1.1, Theorems 3-5).

    Parameters
    ----------
    problem : RegressionProblem
    V : torch.Tensor, shape (k, d), float64
    Q : torch.Tensor, shape (d, d), float64
    ns : sequence of int
        Context sizes.
    samples, regularizer_samples : int
        Samples per n for :func:`loss_and_gradient_bias` and :func:`regularizer_gradient_bias`.
    seed : int
        Row n draws from ``seed + n`` (loss, gradients) and ``seed + 7 n`` (regularizer).
    mu : float

    Returns
    -------
    pandas.DataFrame
        The columns of both functions, one row per n.
    """
    rows = []
    for n in ns:
        row = loss_and_gradient_bias(problem, V, Q, n, samples, seed + n, mu)
        row.update(regularizer_gradient_bias(problem, V, Q, n, regularizer_samples, seed + 7 * n))
        rows.append(row)
    return pd.DataFrame(rows)


def _weighted(ns: Sequence[float], bias: Sequence[float], se: Sequence[float]) -> tuple[np.ndarray, ...]:
    n, b, s = (np.asarray(v, float) for v in (ns, bias, se))
    if not (n.ndim == 1 and n.shape == b.shape == s.shape and len(n) >= 3):
        raise ValidationError(
            f"ns, bias and se must be 1-d of one length >= 3, got lengths {n.size}, {b.size}, {s.size}; pass one "
            "value per context size"
        )
    if not (np.all(n > 0) and np.all(s > 0) and np.all(np.isfinite(b))):
        raise ValidationError("ns and se must be > 0 and bias finite; drop the points with a zero or NaN spread")
    return n, b, 1.0 / s


def profile_exponent(
    ns: Sequence[float],
    bias: Sequence[float],
    se: Sequence[float],
    *,
    corrections: int = 1,
    s_max: float = 3.0,
    nonnegative: bool = False,
) -> tuple[float, float, float]:
    """Exponent ``s`` of ``bias = n^-s (c + c2 / n + ...)`` by profile least squares, its 1-sigma half-width, and chi^2.

    Spec: preconditioned-regression §8 (T1.1: ``E L_n - L -> 0`` like ``c/n``; T3-T5: squared biases ``<= C/n``).

    Parameters
    ----------
    ns : sequence of float, shape (m,)
        Context sizes, m >= 3.
    bias : sequence of float, shape (m,)
        Finite values; a Monte-Carlo estimate below its noise may be <= 0 (it has no log, but it has a residual).
    se : sequence of float, shape (m,)
        Standard errors of ``bias`` (the weights), > 0.
    corrections : int, default=1
        Next-order terms ``c_j / n^j`` beside the leading one, j = 1 ... corrections; 0 fits ``c n^-s`` alone.
    s_max : float, default=3.0
        The grid of ``s`` is ``[0, s_max]`` in steps of 1e-3.
    nonnegative : bool, default=False
        Fit the coefficients under ``c_j >= 0`` (non-negative least squares): for a quantity that cannot be
        negative, such as a squared bias. Where no ``c >= 0`` fits better than ``c = 0`` (every value <= 0), chi^2
        is flat in ``s`` and the smallest ``s``, 0, is returned.

    Returns
    -------
    s : float
        The best exponent on the grid (the smallest of ties).
    half_width : float
        Half the range of ``s`` with ``chi^2 <= chi^2_min + 1``.
    chi2 : float
        The minimum chi^2.

    Notes
    -----
    For each ``s`` the weighted fit in the coefficients is linear. The ``c_j / n^j`` terms are the next orders of the
    expansion in 1/n, so ``s`` is the leading exponent, not a local slope bent by the finite-n correction. Unlike a
    log-log slope, the fit reads values <= 0 as what they are, points near zero.
    """
    check_scalar("corrections", corrections, kind=int, low=0)
    check_scalar("s_max", s_max, low=0.0, low_inclusive=False)
    n, b, w = _weighted(ns, bias, se)
    if len(n) < corrections + 2:
        raise ValidationError(f"{corrections} corrections need at least {corrections + 2} sizes, got {len(n)}")
    grid = np.linspace(0.0, s_max, round(s_max * 1000) + 1)
    chi2 = np.empty_like(grid)
    for i, s in enumerate(grid):
        design = np.stack([n ** (-s - j) for j in range(corrections + 1)], 1) * w[:, None]
        if nonnegative:
            coef, _ = scipy.optimize.nnls(design, b * w)
        else:
            coef, *_ = np.linalg.lstsq(design, b * w, rcond=None)
        chi2[i] = ((design @ coef - b * w) ** 2).sum()
    best = int(chi2.argmin())
    inside = grid[chi2 <= chi2[best] + 1.0]
    return float(grid[best]), float((inside.max() - inside.min()) / 2), float(chi2[best])


def bias_expansion(ns: Sequence[float], bias: Sequence[float], se: Sequence[float]) -> tuple[float, float, float, int]:
    """Weighted least squares of ``bias = c / n + c2 / n^2`` (no constant): ``c``, its SE, chi^2 and its dof.

    Spec: preconditioned-regression §8 (T1.1: the limit of ``E L_n`` is the closed form ``L``, no offset).

    Parameters
    ----------
    ns, bias, se : sequence of float, shape (m,)
        As in :func:`profile_exponent`.

    Returns
    -------
    c : float
    c_se : float
        The least-squares standard error of ``c``.
    chi2 : float
    dof : int
        ``m - 2``.
    """
    n, b, w = _weighted(ns, bias, se)
    design = np.stack([1 / n, 1 / n**2], 1) * w[:, None]
    coef, *_ = np.linalg.lstsq(design, b * w, rcond=None)
    chi2 = float(((design @ coef - b * w) ** 2).sum())
    return float(coef[0]), float(np.sqrt(np.linalg.inv(design.T @ design)[0, 0])), chi2, len(n) - 2
