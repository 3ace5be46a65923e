"""Finite-context biases by Monte Carlo: ``E L_n - L`` (Theorem 1.1) and the squared biases of the expected empirical
gradients (Theorems 3-5), at one point theta over fresh samples of each context size n.

Spec: docs/theory/preconditioned-regression.md §3.1-3.4, §8 (T1.1, T3). The population side is the library's closed
form (:func:`population_loss`, :func:`population_gradient`) and, for the regularizer, autograd of the closed-form
value of the regularizer: each is looked up here by name, so a falsifier can swap it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scipy.stats
import torch

from attnlab.experiments.regression.common import SOURCE, perturbed_start, weighted_log_slope
from attnlab.regression import (
    RegressionProblem,
    empirical,
    empirical_covariance,
    population,
    population_gradient,
    regularizer_gradient,
    sample,
)
from attnlab.regression.regularizer import value as regularizer_value
from attnlab.verify import Claim, RunContext

if TYPE_CHECKING:
    from attnlab.experiments.regression.theory import TheoryConfig

_S8 = f"{SOURCE} §8"
T11_RATE = Claim(
    "T1.1 E L_n - L -> 0 like c/n off M: leading exponent s of n^-s (c + c2/n) fitted to the Monte-Carlo biases",
    "000:Thm1",
    _S8,
    falsifier="temperature-1.3",
)
T11_LIMIT = Claim(
    "T1.1 the limit is the closed form: c/n + c2/n^2 with no constant fits E L_n - L (chi^2 over {dof} dof)",
    "000:Thm1",
    _S8,
    falsifier="irreducible-d-sigma2",
)
T3_OBJECTIVE = Claim(
    "Thm 3 ||E grad f_hat_n - grad f||^2 <= C/n off M (f_hat = L_n + mu R_hat): log-log slope over n",
    "000:Thm3",
    _S8,
    falsifier="temperature-1.3",
)
T4_GRADIENT = Claim(
    "Thm 4 ||E grad L_n - grad L||^2 <= C/n off M: log-log slope over n", "000:Thm4", _S8, falsifier="temperature-1.3"
)
T5_REGULARIZER = Claim(
    "Thm 5 ||E grad R_hat_n - grad R||^2 <= C/n off M: log-log slope over n",
    "000:Thm5",
    _S8,
    falsifier="regularizer-gradient-halved",
)

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


def loss_and_gradient_bias(
    problem: RegressionProblem, V: torch.Tensor, Q: torch.Tensor, n: int, samples: int, seed: int, mu: float
) -> dict[str, float]:
    """Over ``samples`` fresh samples of size ``n``: ``E L_n - L``, ``||E grad L_n - grad L||^2`` (Theorem 4) and
    ``||E grad f_hat_n - grad f||^2`` (Theorem 3, ``f_hat = L_n + mu R_hat``), with SEs.

    ``V`` (k, d), ``Q`` (d, d) is one point. ``L`` and ``grad L`` are the closed forms (spec §3.3, §5.1); the loss
    bias is the plain Monte-Carlo mean of ``L_n`` minus the closed form, so a wrong closed form shows as a constant.
    """
    S, W = problem.Sigma, problem.W_star
    per_chunk = max(1, _CHUNK_ENTRIES // (n * n))
    losses, grads, regs = [], [], []
    for start in range(0, samples, per_chunk):
        X, Y = sample(problem, n, runs=min(per_chunk, samples - start), seed=seed + start)
        loss, gV, gQ = empirical.loss_and_gradient(V, Q, X, Y, X)  # spec §3.1, §5.3: one value per sample
        losses.append(loss)
        grads.append(_flat(gV, gQ))
        regs.append(_flat(*regularizer_gradient(V, Q, empirical_covariance(X))))  # spec §5.2 with Sigma_hat
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

    Theorem 5: ``R_hat`` is ``R`` with ``Sigma`` replaced by ``Sigma_hat = X^T X / n`` (spec §3.4). ``grad R`` is
    autograd of the closed-form value, independent of :func:`regularizer_gradient`.
    """
    X, _ = sample(problem, n, runs=samples, seed=seed)
    empirical_gradient = _flat(*regularizer_gradient(V, Q, empirical_covariance(X)))  # spec §5.2 with Sigma_hat
    value, se = _squared_bias(empirical_gradient - _regularizer_truth(V, Q, problem.Sigma))
    return {"n": n, "reg_bias_sq": value, "reg_se": se}


def profile_exponent(ns: Sequence[float], bias: Sequence[float], se: Sequence[float]) -> tuple[float, float, float]:
    """Exponent ``s`` of ``bias = n^-s (c + c2 / n)`` by profile least squares, its 1-sigma half-width, and chi^2.

    For each ``s`` on a grid the weighted fit in ``(c, c2)`` is linear; the half-width is half the range of ``s``
    with ``chi^2 <= chi^2_min + 1`` (the Monte-Carlo SEs as weights). The ``c2 / n`` term is the next order of the
    expansion in 1/n, so ``s`` is the leading exponent, not a local slope bent by the finite-n correction.
    """
    n, b, w = np.asarray(ns, float), np.asarray(bias, float), 1.0 / np.asarray(se, float)
    grid = np.linspace(0.0, 3.0, 3001)
    chi2 = np.empty_like(grid)
    for i, s in enumerate(grid):
        design = np.stack([n**-s, n ** (-s - 1)], 1) * w[:, None]
        coef, *_ = np.linalg.lstsq(design, b * w, rcond=None)
        chi2[i] = ((design @ coef - b * w) ** 2).sum()
    best = int(chi2.argmin())
    inside = grid[chi2 <= chi2[best] + 1.0]
    return float(grid[best]), float((inside.max() - inside.min()) / 2), float(chi2[best])


def bias_expansion(ns: Sequence[float], bias: Sequence[float], se: Sequence[float]) -> tuple[float, float, float, int]:
    """Weighted least squares of ``bias = c / n + c2 / n^2`` (no constant): ``c``, its SE, chi^2 and its dof."""
    n, b, w = np.asarray(ns, float), np.asarray(bias, float), 1.0 / np.asarray(se, float)
    design = np.stack([1 / n, 1 / n**2], 1) * w[:, None]
    coef, *_ = np.linalg.lstsq(design, b * w, rcond=None)
    chi2 = float(((design @ coef - b * w) ** 2).sum())
    return float(coef[0]), float(np.sqrt(np.linalg.inv(design.T @ design)[0, 0])), chi2, len(n) - 2


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
    """One row per n: the loss bias, the squared gradient biases of L, f_hat and R_hat, with their SEs."""
    rows = []
    for n in ns:
        row = loss_and_gradient_bias(problem, V, Q, n, samples, seed + n, mu)
        row.update(regularizer_gradient_bias(problem, V, Q, n, regularizer_samples, seed + 7 * n))
        rows.append(row)
    return pd.DataFrame(rows)


def finite_context_rows(config: TheoryConfig, problem: RegressionProblem, ctx: RunContext):
    """T1.1, Theorems 4 and 5 at one point off M: rows and the table of biases per n."""
    V, Q = perturbed_start(problem, 1, config.bias_scale, config.seed)
    table = bias_table(
        problem,
        V[0],
        Q[0],
        ctx.bar(config.bias_ns, desc="T1.1 / Thm 4-5 biases"),
        config.bias_samples,
        config.regularizer_samples,
        config.seed + 1,
        config.mu,
    )
    ns = table.n.to_numpy(float)
    s, s_se, _ = profile_exponent(ns, table.loss_bias, table.loss_se)
    rows = [
        T11_RATE.close(
            1.0,
            s,
            atol=3 * s_se,
            spread=f"3 x the profile-chi^2 half-width of s ({s_se:.3g}), Monte-Carlo SEs of {config.bias_samples} "
            f"samples per n as weights; n E L_n - L = {', '.join(f'{v:.3g}' for v in ns * table.loss_bias)}",
        )
    ]
    _, _, chi2, dof = bias_expansion(ns, table.loss_bias, table.loss_se)
    quantile = float(scipy.stats.chi2.ppf(0.999, dof))
    rows.append(
        T11_LIMIT.format(dof=dof).less(
            chi2, quantile, spread="99.9% quantile of chi^2 with the Monte-Carlo SEs (a constant offset would not fit)"
        )
    )
    gradients = (
        (T3_OBJECTIVE, "f_bias_sq", "f_se"),
        (T4_GRADIENT, "grad_bias_sq", "grad_se"),
        (T5_REGULARIZER, "reg_bias_sq", "reg_se"),
    )
    for claim, value, se in gradients:
        slope, slope_se = weighted_log_slope(ns, table[value], table[se])
        rows.append(
            claim.less(
                slope,
                -1.0 + 3 * slope_se,
                spread=f"C/n means slope <= -1; + 3 SE of the weighted slope ({slope_se:.3g}, Monte-Carlo SEs "
                f"of the debiased squared bias)",
            )
        )
    return rows, table
