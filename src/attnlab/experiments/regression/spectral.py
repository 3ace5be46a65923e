"""Lemmas 3 and 6 as declared rows: the spectral start's distance to M and loss gap, and the OLS error, against n.

Spec: docs/theory/preconditioned-regression.md §6.1, §8 (L3); the paper's Lemma 6 (the OLS error).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.experiments.regression.common import INSTANCE, SOURCE, TheoryConfig
from attnlab.regression import (
    RegressionProblem,
    empirical_covariance,
    population,
    project,
    sample,
    spectral_init,
    sym_inv_sqrt,
)
from attnlab.regression.linalg import spd_inverse
from attnlab.verify import Claim, Reading, RunContext, fit_slope, spread_tolerance

_S8 = f"{SOURCE} §8"


def _slope_claim(text: str, result: str, falsifier: str, key: str, what: str, slope: float) -> Claim:
    """A Lemma 3 / Lemma 6 row: the mean over seeds of the per-seed log-log slope on n, within 3 SE of ``slope``."""
    return Claim(
        text,
        result,
        _S8,
        falsifier=falsifier,
        id=key,
        reading=Reading(
            statistic=f"mean over seeds of the per-seed least-squares log-log slope of {what} on n",
            window="every sample size n of spectral_ns",
            subset="spectral_seeds samples of size n per n (seed + n), all of them",
            tolerance=f"|mean slope - ({slope:g})| <= 3 standard errors of the per-seed slopes",
            params={"slope": slope, "ses": 3},
            sizes=(*INSTANCE, "spectral_ns", "spectral_seeds"),
        ),
    )


L3_DISTANCE = _slope_claim(
    "L3 dist(theta_0, M) ~ n^-1/2 from the spectral start: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    "spectral-wrong-eigenvector",
    "lem3-distance",
    "dist(theta_0, M) in the Sigma~ norm (theta_0 the spectral start, Algorithm S)",
    -0.5,
)
L3_GAP = _slope_claim(
    "L3 L(theta_0) - L_irr ~ 1/n from the spectral start: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    "spectral-wrong-eigenvector",
    "lem3-gap",
    "L(theta_0) - L_irr (closed form)",
    -1.0,
)
L3_PRECISION = _slope_claim(
    "L3 ||Sigma_hat^-1 - Sigma^-1||_op ~ n^-1/2, the second event: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    "sample-shared-draw",
    "lem3-precision",
    "||Sigma_hat^{-1} - Sigma^{-1}||_op (Sigma_hat = X^T X / n, uncentred)",
    -0.5,
)
L5_RATIO = Claim(
    "L5 dist(theta_0, M) / (||Sigma_hat - Sigma||_op + ||M_hat - M*||_F) stays bounded: log-log slope of its max",
    "000:Lem5",
    _S8,
    falsifier="spectral-wrong-eigenvector",
    id="lem5-ratio",
    reading=Reading(
        statistic="least-squares log-log slope over n of the max over seeds of dist(theta_0, M) / (||Sigma_hat - "
        "Sigma||_op + ||M_hat - M*||_F), M_hat = Sigma_yx_hat Sigma_hat^{-1/2} the whitened estimate of M* = W* "
        "Sigma^{1/2} (spec §6.1 step 2), theta_0 the spectral start",
        window="every sample size n of spectral_ns",
        subset="spectral_seeds samples of size n per n (seed + n), all of them",
        tolerance="slope <= 0.25: Lemma 5's deterministic dist <= C (estimation errors) keeps the ratio bounded; "
        "halfway to the n^{1/2} growth of a start that stays O(1) away from M while the errors fall",
        params={"bound": 0.25},
        sizes=(*INSTANCE, "spectral_ns", "spectral_seeds"),
    ),
)
L6_OLS = _slope_claim(
    "L6 OLS error ||(W_ols - W*) Sigma^1/2||_F ~ n^-1/2: mean log-log slope over {seeds} seeds",
    "000:Lem6",
    "noise-correlated-with-x",
    "lem6-ols",
    "||(W_ols - W*) Sigma^{1/2}||_F (W_ols by least squares)",
    -0.5,
)


def spectral_rows(config: TheoryConfig, problem: RegressionProblem, ctx: RunContext):
    """L3: distance and loss gap of the spectral start against n, one log-log slope per seed."""
    dists, gaps, ols, precisions, ratios = [], [], [], [], []
    root = sym_inv_sqrt(problem.Sigma).inverse()
    for n in ctx.bar(config.spectral_ns, desc="L3 spectral"):
        X, Y = sample(problem, n, runs=config.spectral_seeds, seed=config.seed + n)
        V0, Q0 = spectral_init(X, Y)
        dists.append(project(V0, Q0, problem.W_star, problem.Sigma).distance.numpy())
        gaps.append(population.population_excess_loss(V0, Q0, problem.Sigma, problem.W_star).numpy())
        W_ols = torch.linalg.lstsq(X, Y).solution.transpose(-1, -2)  # Lemma 6: least squares, (seeds, k, d)
        ols.append(torch.linalg.matrix_norm((W_ols - problem.W_star) @ root).numpy())
        Sigma_hat = empirical_covariance(X)
        precisions.append(torch.linalg.matrix_norm(spd_inverse(Sigma_hat) - spd_inverse(problem.Sigma), ord=2).numpy())
        M_hat = empirical_covariance(X, Y) @ sym_inv_sqrt(Sigma_hat)  # spec §6.1 step 2
        errors = torch.linalg.matrix_norm(Sigma_hat - problem.Sigma, ord=2) + torch.linalg.matrix_norm(
            M_hat - problem.W_star @ root
        )
        ratios.append(dists[-1] / errors.numpy())  # Lemma 5: dist <= C (errors of Sigma_hat and M_hat)
    ns = np.asarray(config.spectral_ns, float)
    table = [
        {"check": "spectral", "n": n, "dist": float(np.mean(d)), "gap": float(np.mean(g))}
        for n, d, g in zip(config.spectral_ns, dists, gaps)
    ]
    rows = []
    measured = (
        (L3_DISTANCE, np.stack(dists, 1)),
        (L3_GAP, np.stack(gaps, 1)),
        (L3_PRECISION, np.stack(precisions, 1)),
        (L6_OLS, np.stack(ols, 1)),
    )
    for claim, values in measured:
        slopes = [fit_slope(ns, per_seed)[0] for per_seed in values]
        tolerance, text = spread_tolerance(slopes, claim.param("ses"), what="seeds' slopes")
        mean = float(np.mean(slopes))
        rows.append(claim.format(seeds=len(slopes)).close(claim.param("slope"), mean, atol=tolerance, spread=text))
    largest = np.stack(ratios).max(1)  # (n,): the max over seeds
    rows.append(
        L5_RATIO.less(
            fit_slope(ns, largest)[0],
            L5_RATIO.param("bound"),
            spread=f"max ratio over seeds {', '.join(f'{v:.3g}' for v in largest)}",
        )
    )
    return rows, table
