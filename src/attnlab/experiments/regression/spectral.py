"""Lemmas 3 and 6 as declared rows: the spectral start's distance to M and loss gap, and the OLS error, against n.

Spec: docs/theory/preconditioned-regression.md §6.1, §8 (L3); the paper's Lemma 6 (the OLS error).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.experiments.regression.common import SOURCE, TheoryConfig
from attnlab.regression import RegressionProblem, population, project, sample, spectral_init, sym_inv_sqrt
from attnlab.verify import Claim, RunContext, fit_slope, spread_tolerance

_S8 = f"{SOURCE} §8"
L3_DISTANCE = Claim(
    "L3 dist(theta_0, M) ~ n^-1/2 from the spectral start: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    _S8,
    falsifier="spectral-wrong-eigenvector",
)
L3_GAP = Claim(
    "L3 L(theta_0) - L_irr ~ 1/n from the spectral start: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    _S8,
    falsifier="spectral-wrong-eigenvector",
)
L6_OLS = Claim(
    "L6 OLS error ||(W_ols - W*) Sigma^1/2||_F ~ n^-1/2: mean log-log slope over {seeds} seeds",
    "000:Lem6",
    _S8,
    falsifier="noise-correlated-with-x",
)


def spectral_rows(config: TheoryConfig, problem: RegressionProblem, ctx: RunContext):
    """L3: distance and loss gap of the spectral start against n, one log-log slope per seed."""
    dists, gaps, ols = [], [], []
    root = sym_inv_sqrt(problem.Sigma).inverse()
    for n in ctx.bar(config.spectral_ns, desc="L3 spectral"):
        X, Y = sample(problem, n, runs=config.spectral_seeds, seed=config.seed + n)
        V0, Q0 = spectral_init(X, Y)
        dists.append(project(V0, Q0, problem.W_star, problem.Sigma).distance.numpy())
        gaps.append(population.population_excess_loss(V0, Q0, problem.Sigma, problem.W_star).numpy())
        W_ols = torch.linalg.lstsq(X, Y).solution.transpose(-1, -2)  # Lemma 6: least squares, (seeds, k, d)
        ols.append(torch.linalg.matrix_norm((W_ols - problem.W_star) @ root).numpy())
    ns = np.asarray(config.spectral_ns, float)
    table = [
        {"check": "spectral", "n": n, "dist": float(np.mean(d)), "gap": float(np.mean(g))}
        for n, d, g in zip(config.spectral_ns, dists, gaps)
    ]
    rows = []
    measured = (
        (L3_DISTANCE, np.stack(dists, 1), -0.5),
        (L3_GAP, np.stack(gaps, 1), -1.0),
        (L6_OLS, np.stack(ols, 1), -0.5),
    )
    for claim, values, predicted in measured:
        slopes = [fit_slope(ns, per_seed)[0] for per_seed in values]
        tolerance, text = spread_tolerance(slopes, what="seeds' slopes")
        rows.append(
            claim.format(seeds=len(slopes)).close(predicted, float(np.mean(slopes)), atol=tolerance, spread=text)
        )
    return rows, table
