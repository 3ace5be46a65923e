"""Lemmas 3 and 6 as declared rows: the spectral start's distance to M and loss gap, and the OLS error, against n.

Spec: docs/theory/preconditioned-regression.md §6.1, §8 (L3); the paper's Lemma 6 (the OLS error).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.experiments.regression.common import INSTANCE, SOURCE, TheoryConfig, local_radius
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
from attnlab.verify import Claim, Reading, Revision, RunContext, fit_slope, old_sizes, spread_tolerance

_S8 = f"{SOURCE} §8"
_SPECTRAL_SIZES = (*INSTANCE, "spectral_ns", "spectral_seeds")
_SEEDS = "spectral_seeds samples of size n per n (seed + n), all of them"


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
            subset=_SEEDS,
            tolerance=f"|mean slope - ({slope:g})| <= 3 standard errors of the per-seed slopes",
            params={"slope": slope, "ses": 3},
            sizes=_SPECTRAL_SIZES,
        ),
    )


L3_EVENT = Claim(
    "L3 the event itself: share of seeds whose spectral start lies within rho / 2 of M, at the largest n, and the "
    "shares non-decreasing in n",
    "000:Lem3",
    _S8,
    falsifier="spectral-wrong-eigenvector",
    id="lem3-event",
    reading=Reading(
        statistic="share over seeds of dist(theta_0, M) <= rho / 2 (Sigma~ norm, rho = 0.25 sigma_d^{1/2}) at each "
        "n; the row shows the shares",
        window="every sample size n of spectral_ns",
        subset=_SEEDS,
        tolerance="share = 1 at the largest n and each share >= the one at the next smaller n: Lemma 3's 'within a "
        "fixed fraction of rho with probability -> 1' read with the fraction 1/2 (seed-results 000:Lem3; the "
        "paper's fraction was lost)",
        params={"fraction": 0.5},
        sizes=_SPECTRAL_SIZES,
    ),
)
_OLD_SIZES = old_sizes(
    {"d": 3, "k": 6, "noise_std": 0.1, "singular_values": (0.25, 0.2, 0.15), "problem_seed": 0, "seed": 0},
    spectral_ns=((100, 1_000, 10_000, 100_000), (100, 1_000, 10_000)), spectral_seeds=(20, 10),
)  # fmt: skip
_GREW = (
    "the quick size of the spectral rows grew to the full one (n up to 100000, 20 seeds; it was n up to 10000, 10 "
    "seeds), so that lem5-ratio's last-decade reading (its revision 1) sees a start rotated by 0.02 rad; this reading "
    "is unchanged"
)
_RESIZED = "2026-11-28"  # the quick spectral size became the full one


L3_DISTANCE = _slope_claim(
    "L3 dist(theta_0, M) ~ n^-1/2 from the spectral start: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    "spectral-wrong-eigenvector",
    "lem3-distance",
    "dist(theta_0, M) in the Sigma~ norm (theta_0 the spectral start, Algorithm S)",
    -0.5,
).resized(
    _OLD_SIZES,
    _RESIZED,
    _GREW,
    "pass: -0.486 against -0.5 +- 0.056 (3 SE over 10 seeds) (55b3e6f)",
)
L3_GAP = _slope_claim(
    "L3 L(theta_0) - L_irr ~ 1/n from the spectral start: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    "spectral-wrong-eigenvector",
    "lem3-gap",
    "L(theta_0) - L_irr (closed form)",
    -1.0,
).resized(
    _OLD_SIZES,
    _RESIZED,
    _GREW,
    "pass: -0.975 against -1 +- 0.145 (3 SE over 10 seeds) (55b3e6f)",
)
L3_PRECISION = _slope_claim(
    "L3 ||Sigma_hat^-1 - Sigma^-1||_op ~ n^-1/2, the second event: mean log-log slope over {seeds} seeds",
    "000:Lem3",
    "sample-shared-draw",
    "lem3-precision",
    "||Sigma_hat^{-1} - Sigma^{-1}||_op (Sigma_hat = X^T X / n, uncentred)",
    -0.5,
).resized(
    _OLD_SIZES,
    _RESIZED,
    _GREW,
    "pass: -0.504 against -0.5 +- 0.102 (3 SE over 10 seeds) (55b3e6f)",
)
_RATIO = (
    "the max over seeds of dist(theta_0, M) / (||Sigma_hat - Sigma||_op + ||M_hat - M*||_F), M_hat = Sigma_yx_hat "
    "Sigma_hat^{-1/2} the whitened estimate of M* = W* Sigma^{1/2} (spec §6.1 step 2), theta_0 the spectral start"
)
_OLD_RATIO = Reading(
    statistic=f"least-squares log-log slope over n of {_RATIO}",
    window="every sample size n of spectral_ns",
    subset=_SEEDS,
    tolerance="slope <= 0.25: Lemma 5's deterministic dist <= C (estimation errors) keeps the ratio bounded; "
    "halfway to the n^{1/2} growth of a start that stays O(1) away from M while the errors fall",
    params={"bound": 0.25},
    sizes=_SPECTRAL_SIZES,
)
L5_RATIO = Claim(
    "L5 dist(theta_0, M) / (||Sigma_hat - Sigma||_op + ||M_hat - M*||_F) stays bounded: log-log slope of its max over "
    "the last decade of n",
    "000:Lem5",
    _S8,
    falsifier=("spectral-wrong-eigenvector", "spectral-rotated-0.02"),
    id="lem5-ratio",
    reading=Reading(
        statistic=f"least-squares log-log slope over n of {_RATIO}",
        window="the sample sizes n of spectral_ns in the last decade, n >= max(spectral_ns) / decade (10^4, 10^5)",
        subset=_SEEDS,
        tolerance="slope <= 0.25: Lemma 5's deterministic dist <= C (estimation errors) keeps the ratio bounded; "
        "halfway to the n^{1/2} growth of a start that stays a fixed distance c away from M while the errors fall. "
        "Such a start reads ratio ~ R + c' c n^{1/2}, flat while the errors exceed c and rising like n^{1/2} after: "
        "the last decade, where the errors are smallest, is where it shows, and the earlier flat decades dilute a "
        "slope over every n",
        params={"bound": 0.25, "decade": 10},
        sizes=_SPECTRAL_SIZES,
    ),
    revisions=(
        Revision(
            _OLD_RATIO,
            "2026-11-28",
            "too weak to fail: the slope over every n dilutes a late rise. The spectral start with its first two "
            "left singular vectors rotated by 0.02 rad (now the falsifier 'spectral-rotated-0.02') passed at full "
            "size, 0.134 <= 0.25 (max ratios 0.434, 0.309, 0.474, 1.05), and at the old quick size (n up to 10000) "
            "it does not show at all (-0.022). Over the last decade: true -0.005, rotated 0.345; over 12 seeds of "
            "the config, true -0.014 +- 0.065 (sd; at most 0.094), rotated 0.34 +- 0.10 (2 of 12 below 0.25). The "
            "quick size grew to the full one. The run recomputes this reading at the current sizes beside the "
            "current row",
            "pass: -0.072 <= 0.25 (max ratios 0.334, 0.341, 0.24; n up to 10000, 10 seeds) (55b3e6f)",
            "pass: -0.017 <= 0.25 (max ratios 0.431, 0.313, 0.364, 0.36) (55b3e6f)",
            claim="L5 dist(theta_0, M) / (||Sigma_hat - Sigma||_op + ||M_hat - M*||_F) stays bounded: log-log slope of "
            "its max",
            sizes=_OLD_SIZES,
        ),
    ),
)


L6_OLS = _slope_claim(
    "L6 OLS error ||(W_ols - W*) Sigma^1/2||_F ~ n^-1/2: mean log-log slope over {seeds} seeds",
    "000:Lem6",
    "noise-correlated-with-x",
    "lem6-ols",
    "||(W_ols - W*) Sigma^{1/2}||_F (W_ols by least squares)",
    -0.5,
).resized(
    _OLD_SIZES,
    _RESIZED,
    _GREW,
    "pass: -0.478 against -0.5 +- 0.044 (3 SE over 10 seeds) (55b3e6f)",
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
    radius = L3_EVENT.param("fraction") * local_radius(config.singular_values)  # spec §4.4: rho / 2
    shares = [float((d <= radius).mean()) for d in dists]
    rising = all(b >= a for a, b in zip(shares, shares[1:]))
    rows.append(
        L3_EVENT.holds(
            "share 1 at the largest n, non-decreasing in n",
            ", ".join(f"{share:.2f}" for share in shares),
            f"at n = {', '.join(map(str, ns.astype(int)))}; rho / 2 = {radius:.3g}; mean dist "
            f"{', '.join(f'{float(np.mean(d)):.3g}' for d in dists)}",
            shares[-1] == 1.0 and rising,
            margin=min(shares[-1] - 1.0, min((b - a for a, b in zip(shares, shares[1:])), default=0.0)),
        )
    )
    largest = np.stack(ratios).max(1)  # (n,): the max over seeds
    shown = (
        f"max ratio over seeds {', '.join(f'{v:.3g}' for v in largest)} at n = {', '.join(map(str, ns.astype(int)))}"
    )
    last = ns >= ns.max() / L5_RATIO.param("decade")  # Lemma 5: a fixed error of the start shows once errors are small
    old = L5_RATIO.revised(1)
    rows += [
        L5_RATIO.less(
            fit_slope(ns[last], largest[last])[0],
            L5_RATIO.param("bound"),
            spread=f"halfway to n^1/2 over the last decade (n >= {int(ns.max() / L5_RATIO.param('decade'))}); {shown}",
        ),
        old.less(fit_slope(ns, largest)[0], old.param("bound"), spread=f"halfway to n^1/2 over every n; {shown}"),
    ]
    return rows, table
