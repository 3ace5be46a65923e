"""Lemma 4 as declared rows: Algorithm 1's step direction on the empirical objective keeps Theorem 1.3's one-point
strong convexity and smoothness near M, with worse constants and an additive term in the gradient bias.

Spec: docs/theory/preconditioned-regression.md §4.4 (Theorem 1.3), §5.4 (the preconditioned direction), §6.2 (the
oracle), §8. At points within rho of M the direction is Algorithm 1's own step (``PreconditionedGD`` with the
``Sigma_hat`` of a training sample) applied to ``E grad f_hat_n``, the Monte-Carlo mean of the empirical gradient over
fresh samples of context size n plus ``mu grad R_hat``; the additive term is the bias ``b = E grad f_hat_n - grad f``
(Theorem 3's quantity). The lemma's constants were lost: the rows use the ones a Young and a Cauchy-Schwarz step give
from the sharp ``alpha``, ``beta`` of Theorem 1.3 (the extreme normal eigenvalues of the Hessian of f at M).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from attnlab.experiments.regression.common import INSTANCE, SOURCE, TheoryConfig
from attnlab.optim.preconditioned import PreconditionedGD
from attnlab.regression import (
    RegressionProblem,
    empirical,
    empirical_covariance,
    extended_inner,
    manifold_point,
    population_gradient,
    project,
    random_rotation,
    regularizer_gradient,
    sample,
    unwhiten,
    whiten,
)
from attnlab.regression.curvature import normal_curvatures
from attnlab.regression.linalg import spd_inverse
from attnlab.verify import Claim, Reading, Revision, RunContext

_S8 = f"{SOURCE} §8"
_POINTS = (
    "lem4_directions random perturbations of theta_R per radius r in radii, of Sigma~-norm r sigma_d^{1/2} (Haar R "
    "of seed + 7, Gaussian directions of seed + 1e4 r + 1); Sigma_hat of one training sample of size lem4_train "
    "(seed + 11); lem4_batches fresh samples of size lem4_n per point (seed + 5)"
)
_SIZES = (*INSTANCE, "mu", "radii", "lem4_directions", "lem4_n", "lem4_batches", "lem4_train")
_DIRECTION = (
    "g = Algorithm 1's step direction (PreconditionedGD with Sigma_hat) on E grad f_hat_n = the Monte-Carlo mean of "
    "grad L_n plus mu grad R_hat(Sigma_hat); b = E grad f_hat_n - grad f (closed forms), its squared dual norm "
    "||Sigma^{-1} b||_Sigma~^2 debiased by the Monte-Carlo variance; dist = ||theta - theta_bar||_Sigma~"
)
L4_CONVEXITY = Claim(
    "L4 empirical one-point convexity within rho: min (<g, theta - theta_bar> + ||b||^2 / alpha) / dist^2 over "
    "{count} points, against alpha / 2",
    "000:Lem4",
    _S8,
    falsifier="preconditioner-inverted",
    id="lem4-convexity",
    reading=Reading(
        statistic=f"min over the points of (<g, theta - theta_bar>_Sigma~ + ||b||^2 / alpha) / dist^2; {_DIRECTION}",
        window="every point of every radius",
        subset=_POINTS,
        tolerance=">= alpha / 2, alpha = lambda_min of the normal Hessian of f at M (Theorem 1.3's sharp constant): "
        "the lemma's lost constants read as a Young step, <grad f, D> - |b| |D| >= alpha/2 |D|^2 - |b|^2 / (2 alpha), "
        "with a factor 2 of room for Sigma_hat",
        params={"fraction": 0.5},
        sizes=_SIZES,
    ),
)
_L4_SMOOTHNESS_READING = Reading(
    statistic=f"max over the points of (||g||_Sigma~^2 - v_g - 2 ||b||^2) / dist^2, v_g the Monte-Carlo variance "
    f"of g (Algorithm 1's direction of the per-sample gradients' spread over the lem4_batches samples), so that "
    f"both squared norms are debiased; {_DIRECTION}",
    window="every point of every radius",
    subset=_POINTS,
    tolerance="<= 2 beta^2, beta = lambda_max of the normal Hessian of f at M: ||a + b||^2 <= 2 ||a||^2 + "
    "2 ||b||^2 with Theorem 1.3's ||grad f||^2 <= beta^2 dist^2",
    params={"factor": 2},
    sizes=_SIZES,
)
L4_SMOOTHNESS = Claim(
    "L4 empirical one-point smoothness within rho: max (||g||^2 - v_g - 2 ||b||^2) / dist^2 over {count} points "
    "(both squared norms of Monte-Carlo means debiased), against 2 beta^2",
    "000:Lem4",
    _S8,
    falsifier="preconditioner-inverted",
    id="lem4-smoothness",
    reading=_L4_SMOOTHNESS_READING,
    revisions=(
        Revision(
            dataclasses.replace(
                _L4_SMOOTHNESS_READING,
                statistic=f"max over the points of (||g||_Sigma~^2 - 2 ||b||^2) / dist^2; {_DIRECTION}",
            ),
            "2026-11-29",
            "||b||^2 was debiased by the Monte-Carlo variance but ||g||^2, the squared norm of the same Monte-Carlo "
            "mean, was not, so the statistic carried + v_g / dist^2, largest at the smallest radius: at seed 6 "
            "(quick) 2.31 at r = 0.02 (median -11.7 there; 0.82 at r = 0.25). With v_g subtracted it is 0.75; over "
            "seeds 0-8 (quick) the largest values go from 0.35-2.31 to 0.19-1.22. The run computes this reading "
            "beside the current row",
            "pass at seeds 0-5, 7 and 8 (0.52 at seed 0); fail at seed 6 (2.31 against 2)",
            "pass at seeds 0 (0.62) and 6 (0.66)",
            claim="L4 empirical one-point smoothness within rho: max (||g||^2 - 2 ||b||^2) / dist^2 over {count} "
            "points, against 2 beta^2",
        ),
    ),
)


def _points(config: TheoryConfig, problem: RegressionProblem) -> tuple[torch.Tensor, torch.Tensor]:
    """Random perturbations of theta_R at each radius (multiples of sigma_d^{1/2}), stacked: (P, k, d), (P, d, d)."""
    S, W = problem.Sigma, problem.W_star
    points = []
    for r in config.radii:
        V0, Q0 = manifold_point(random_rotation(config.d, runs=config.lem4_directions, seed=config.seed + 7), W, S)
        A0, C0 = whiten(V0, Q0, S, S)
        gen = torch.Generator().manual_seed(config.seed + int(1e4 * r) + 1)
        dA = torch.randn(A0.shape, generator=gen, dtype=torch.float64)
        dC = torch.randn(C0.shape, generator=gen, dtype=torch.float64)
        norm = (dA.square().sum((-2, -1)) + dC.square().sum((-2, -1))).sqrt()[:, None, None]
        scale = r * min(config.singular_values) ** 0.5 / norm
        points.append(unwhiten(A0 + scale * dA, C0 + scale * dC, S, S))
    return torch.cat([V for V, _ in points]), torch.cat([Q for _, Q in points])


def _direction(V: torch.Tensor, Q: torch.Tensor, grad_V: torch.Tensor, grad_Q: torch.Tensor, covariance: torch.Tensor):
    """Algorithm 1's step direction for the gradient ``(grad_V, grad_Q)``: one step of lr 1 from a copy of theta."""
    V_step, Q_step = V.clone(), Q.clone()
    optimizer = PreconditionedGD.for_attention(V_step, Q_step, covariance, lr=1.0)  # spec §5.4
    V_step.grad, Q_step.grad = grad_V, grad_Q
    optimizer.step()
    return V - V_step, Q - Q_step


def empirical_geometry_rows(config: TheoryConfig, problem: RegressionProblem, spectrum: np.ndarray, ctx: RunContext):
    """Lemma 4's two rows at points within rho of M, and a table of the per-point terms."""
    S, W, mu = problem.Sigma, problem.W_star, config.mu
    V, Q = _points(config, problem)
    P = V.shape[0]
    X_train, _ = sample(problem, config.lem4_train, seed=config.seed + 11)
    Sigma_hat = empirical_covariance(X_train).expand(P, -1, -1)  # spec §6.2: Sigma_hat of the training sample
    X, Y = sample(problem, config.lem4_n, runs=config.lem4_batches * P, seed=config.seed + 5)
    X, Y = X.unflatten(0, (config.lem4_batches, P)), Y.unflatten(0, (config.lem4_batches, P))
    _, loss_V, loss_Q = empirical.loss_and_gradient(V, Q, X, Y, X)  # spec §5.3, one per fresh sample
    reg_V, reg_Q = regularizer_gradient(V, Q, Sigma_hat)  # spec §5.2 with Sigma_hat
    mean_V, mean_Q = loss_V.mean(0) + mu * reg_V, loss_Q.mean(0) + mu * reg_Q  # E grad f_hat_n
    pop_V, pop_Q = population_gradient(V, Q, S, W)  # spec §5.1
    true_V, true_Q = regularizer_gradient(V, Q, S.expand(P, -1, -1))
    inv = spd_inverse(S)

    def dual(g_V: torch.Tensor, g_Q: torch.Tensor) -> torch.Tensor:  # ||Sigma^-1 g||_Sigma~^2, the whitened norm
        return extended_inner(g_V @ inv, inv @ g_Q @ inv, g_V @ inv, inv @ g_Q @ inv, S, S)

    noise = dual(loss_V - loss_V.mean(0), loss_Q - loss_Q.mean(0)).mean(0) / (config.lem4_batches - 1)
    bias_sq = dual(mean_V - pop_V - mu * true_V, mean_Q - pop_Q - mu * true_Q) - noise  # debiased ||b||^2
    g_V, g_Q = _direction(V, Q, mean_V, mean_Q, Sigma_hat)
    proj = project(V, Q, W, S)
    dist_sq = proj.distance**2
    inner = extended_inner(g_V, g_Q, V - proj.V, Q - proj.Q, S, S)
    normal = normal_curvatures(spectrum, config.d)
    alpha, beta = float(normal[0]), float(normal[-1])
    convexity = float(((inner + bias_sq / alpha) / dist_sq).min())
    g_sq = extended_inner(g_V, g_Q, g_V, g_Q, S, S)
    spread = [_direction(V, Q, dV, dQ, Sigma_hat) for dV, dQ in zip(loss_V - loss_V.mean(0), loss_Q - loss_Q.mean(0))]
    g_noise = sum(extended_inner(*d, *d, S, S) for d in spread) / (len(spread) * (len(spread) - 1))  # Var of g
    smoothness = float(((g_sq - g_noise - 2 * bias_sq) / dist_sq).max())
    old_smoothness = float(((g_sq - 2 * bias_sq) / dist_sq).max())
    count = P
    ratio = float((bias_sq / dist_sq).median())
    rows = [
        L4_CONVEXITY.format(count=count).greater(
            convexity,
            L4_CONVEXITY.param("fraction") * alpha,
            spread=f"alpha = {alpha:.3g}; plain min <g, theta - theta_bar> / dist^2 = {float((inner / dist_sq).min()):.3g}"
            f" (the bias term is active: median ||b||^2 / dist^2 = {ratio:.3g})",
        ),
        L4_SMOOTHNESS.format(count=count).less(
            smoothness, L4_SMOOTHNESS.param("factor") * beta**2, spread=f"beta = {beta:.3g}"
        ),
        L4_SMOOTHNESS.revised(1)
        .format(count=count)
        .less(old_smoothness, L4_SMOOTHNESS.param("factor") * beta**2, spread=f"beta = {beta:.3g}"),
    ]
    table = {"check": "lemma4", "points": P, "alpha": alpha, "beta": beta, "median_bias_over_dist": ratio}
    return rows, table
