"""Lemma 4 as declared rows: Algorithm 1's step direction on the empirical objective keeps Theorem 1.3's one-point
strong convexity and smoothness near M, with worse constants and an additive term in the gradient bias.

Spec: docs/theory/preconditioned-regression.md §4.4 (Theorem 1.3), §5.4 (the preconditioned direction), §6.2 (the
oracle), §8. At points within rho of M the direction is Algorithm 1's own step (``PreconditionedGD`` with the
``Sigma_hat`` of a training sample) applied to ``E grad f_hat_n``, the Monte-Carlo mean of the empirical gradient over
fresh samples of context size n plus ``mu grad R_hat``; the additive term is the bias ``b = E grad f_hat_n - grad f``
(Theorem 3's quantity). The lemma's constants were lost: the rows use the ones a Young and a Cauchy-Schwarz step give
from Theorem 1.3's ``alpha = 2 sigma_d``, ``beta = 4 sigma_1`` derived by hand (:func:`.geometry.derived_constants`),
at rho along the Hessian's normal eigenvectors and the scaling direction, with a context size at which the bias term
is small against ``alpha^2 dist^2``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from attnlab.experiments.regression.common import INSTANCE, SOURCE, TheoryConfig, local_radius
from attnlab.experiments.regression.geometry import Hessian, _along_units, _directions, derived_constants
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
    sample_covariates,
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
_RESOLVED = (
    "at r = rho = 0.25 sigma_d^{1/2} (Sigma~-norm) from theta_R (R Haar of seed): theta_R + r u for the normal "
    "eigenvectors u of the whitened Hessian of f with its least and its largest normal eigenvalue (relative 1e-6; "
    "where the lower and the upper bound are tightest) and for the scaling direction (A, -C) / ||(A, -C)|| (where "
    "the regularizer alone gives convexity); Sigma_hat of "
    "one training sample of size lem4_train (seed + 11); lem4_batches fresh samples of size lem4_resolved_n per "
    "point (seed + 5 + point): ||b||^2 well below alpha^2 dist^2 there (at M 5.5e-5 at n = 1000 against alpha^2 "
    "rho^2 = 8.4e-4)"
)
_RESOLVED_SIZES = (*INSTANCE, "mu", "lem4_resolved_n", "lem4_batches", "lem4_train")
_DERIVED = (
    "alpha = 2 sigma_d and beta = 4 sigma_1, Theorem 1.3's constants derived by hand (geometry.derived_constants)"
)
_OLD_L4_CONVEXITY = Reading(
    statistic=f"min over the points of (<g, theta - theta_bar>_Sigma~ + ||b||^2 / alpha) / dist^2; {_DIRECTION}",
    window="every point of every radius",
    subset=_POINTS,
    tolerance=">= alpha / 2, alpha = lambda_min of the normal Hessian of f at M (Theorem 1.3's sharp constant): "
    "the lemma's lost constants read as a Young step, <grad f, D> - |b| |D| >= alpha/2 |D|^2 - |b|^2 / (2 alpha), "
    "with a factor 2 of room for Sigma_hat",
    params={"fraction": 0.5},
    sizes=_SIZES,
)
L4_CONVEXITY = Claim(
    "L4 empirical one-point convexity at rho: min (<g, theta - theta_bar> + ||b||^2 / alpha) / dist^2 over {count} "
    "points along the Hessian's extreme normal eigenvectors and the scaling direction, against alpha / 2",
    "000:Lem4",
    _S8,
    falsifier=("lem4-step-dropped", "lem4-regularizer-removed"),
    id="lem4-convexity",
    reading=dataclasses.replace(
        _OLD_L4_CONVEXITY,
        window="every point",
        subset=_RESOLVED,
        tolerance=f">= alpha / 2, {_DERIVED}: the lemma's lost constants read as a Young step, <grad f, D> - |b| |D| "
        ">= alpha/2 |D|^2 - |b|^2 / (2 alpha), with a factor 2 of room for Sigma_hat",
        sizes=_RESOLVED_SIZES,
    ),
    revisions=(
        Revision(
            _OLD_L4_CONVEXITY,
            "2026-11-29",
            "nearly vacuous at lem4_n = 100: the median ||b||^2 / dist^2 was 1.43, so the additive ||b||^2 / alpha "
            "(about 4.8 dist^2) swamped the bound alpha / 2 = 0.15: a zero step (0.217), a half step (0.573), "
            "mu = 0 in f_hat (0.576) and a sign-flipped grad R_hat (0.40) all passed; and random directions miss "
            "the scaling direction, where mu = 0 fails (audit fid0 #4, probes p2, p8). Now n = lem4_resolved_n = "
            "1000 at r = rho along the extreme normal eigenvectors and the scaling direction, alpha derived: the "
            "zero step 0.055 and mu = 0 0.031 fail it (true 0.344); the inverted preconditioner, which failed this "
            "reading (-61), passes it (0.496) and fails the smoothness row (5.4e3 against 2). The run recomputes "
            "this reading beside the current row",
            "pass: 0.929 >= 0.15 (8a9b237)",
            "pass: 0.821 >= 0.15 (8a9b237)",
            claim="L4 empirical one-point convexity within rho: min (<g, theta - theta_bar> + ||b||^2 / alpha) / "
            "dist^2 over {count} points, against alpha / 2",
        ),
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
    "L4 empirical one-point smoothness at rho: max (||g||^2 - v_g - 2 ||b||^2) / dist^2 over {count} points along "
    "the Hessian's extreme normal eigenvectors and the scaling direction (both squared norms debiased), against 2 "
    "beta^2",
    "000:Lem4",
    _S8,
    falsifier="preconditioner-inverted",
    id="lem4-smoothness",
    reading=dataclasses.replace(
        _L4_SMOOTHNESS_READING,
        window="every point",
        subset=_RESOLVED,
        tolerance=f"<= 2 beta^2, {_DERIVED}: ||a + b||^2 <= 2 ||a||^2 + 2 ||b||^2 with Theorem 1.3's ||grad f||^2 "
        "<= beta^2 dist^2",
        sizes=_RESOLVED_SIZES,
    ),
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
        Revision(
            _L4_SMOOTHNESS_READING,
            "2026-11-29",
            "at lem4_n = 100 the bias term 2 ||b||^2 dominated and random directions missed the extreme "
            "eigen-directions (audit fid0 #4); now read with the convexity row's points and n, beta derived. The "
            "run recomputes this reading beside the current row",
            "pass: 0.473 <= 2 (8a9b237)",
            "pass: 0.587 <= 2 (8a9b237)",
            claim="L4 empirical one-point smoothness within rho: max (||g||^2 - v_g - 2 ||b||^2) / dist^2 over "
            "{count} points (both squared norms of Monte-Carlo means debiased), against 2 beta^2",
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


def _terms(
    config: TheoryConfig,
    problem: RegressionProblem,
    V: torch.Tensor,
    Q: torch.Tensor,
    n: int,
    seed: int,
    weights: torch.Tensor | None = None,
):
    """Per point (batched): ``<g, theta - theta_bar>``, the debiased ``||b||^2``, ``dist^2``, ``||g||^2`` and the
    Monte-Carlo variance of g, with ``lem4_batches`` fresh samples of size ``n`` per point (seed ``seed``).
    ``weights`` (lem4_batches, P, n, n), if given, holds the softmax weights (``empirical.loss_and_gradient``'s
    ``out``)."""
    S, W, mu = problem.Sigma, problem.W_star, config.mu
    P = V.shape[0]
    X_train = sample_covariates(problem, config.lem4_train, seed=config.seed + 11)
    Sigma_hat = empirical_covariance(X_train).expand(P, -1, -1)  # spec §6.2: Sigma_hat of the training sample
    X, Y = sample(problem, n, runs=config.lem4_batches * P, seed=seed)
    X, Y = X.unflatten(0, (config.lem4_batches, P)), Y.unflatten(0, (config.lem4_batches, P))
    _, loss_V, loss_Q = empirical.loss_and_gradient(V, Q, X, Y, X, out=weights)  # spec §5.3, one per fresh sample
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
    inner = extended_inner(g_V, g_Q, V - proj.V, Q - proj.Q, S, S)
    g_sq = extended_inner(g_V, g_Q, g_V, g_Q, S, S)
    spread = [_direction(V, Q, dV, dQ, Sigma_hat) for dV, dQ in zip(loss_V - loss_V.mean(0), loss_Q - loss_Q.mean(0))]
    g_noise = sum(extended_inner(*d, *d, S, S) for d in spread) / (len(spread) * (len(spread) - 1))  # Var of g
    return inner, bias_sq, proj.distance**2, g_sq, g_noise


def _resolved(config: TheoryConfig, problem: RegressionProblem, hessian: Hessian):
    """The terms of :func:`_terms` at rho along the normal eigenvectors and the scaling direction, one point at a
    time (n x n softmax weights per sample)."""
    units, _ = _directions(problem, hessian)
    normal = normal_curvatures(hessian[0], config.d)
    extreme = (normal <= normal[0] * (1 + 1e-6)) | (normal >= normal[-1] * (1 - 1e-6))  # the least and largest
    keep = torch.from_numpy(np.append(extreme, True))  # and the scaling direction, the last unit
    V, Q = _along_units(problem, hessian, units[: len(units) // 2][keep], local_radius(config.singular_values))
    n = config.lem4_resolved_n
    weights = torch.empty(config.lem4_batches, 1, n, n, dtype=torch.float64)  # every point's softmax, one storage
    parts = [
        _terms(config, problem, V[i : i + 1], Q[i : i + 1], n, config.seed + 5 + i, weights) for i in range(V.shape[0])
    ]
    return [torch.cat([part[j] for part in parts]) for j in range(5)]


def empirical_geometry_rows(config: TheoryConfig, problem: RegressionProblem, hessian: Hessian, ctx: RunContext):
    """Lemma 4's two rows at rho along the Hessian's normal eigenvectors and the scaling direction, their old
    readings at random points within rho beside them, and a table of the per-point terms."""
    alpha, beta = derived_constants(config.singular_values, config.k, config.mu)
    inner, bias_sq, dist_sq, g_sq, g_noise = _resolved(config, problem, hessian)
    convexity = float(((inner + bias_sq / alpha) / dist_sq).min())
    smoothness = float(((g_sq - g_noise - 2 * bias_sq) / dist_sq).max())
    ratio = float((bias_sq / dist_sq).median())
    count = len(inner)
    normal = normal_curvatures(hessian[0], config.d)
    h_alpha, h_beta = float(normal[0]), float(normal[-1])
    V, Q = _points(config, problem)
    o_inner, o_bias, o_dist, o_g, o_noise = _terms(config, problem, V, Q, config.lem4_n, config.seed + 5)
    old_convexity = float(((o_inner + o_bias / h_alpha) / o_dist).min())
    old_ratio = float((o_bias / o_dist).median())
    factor = L4_SMOOTHNESS.param("factor")
    rows = [
        L4_CONVEXITY.format(count=count).greater(
            convexity,
            L4_CONVEXITY.param("fraction") * alpha,
            spread=f"alpha = {alpha:.3g} derived; plain min <g, theta - theta_bar> / dist^2 = "
            f"{float((inner / dist_sq).min()):.3g}; median ||b||^2 / dist^2 = {ratio:.3g} (alpha^2 = {alpha**2:.3g})",
        ),
        L4_CONVEXITY.revised(1)
        .format(count=V.shape[0])
        .greater(
            old_convexity,
            L4_CONVEXITY.revised(1).param("fraction") * h_alpha,
            spread=f"alpha = {h_alpha:.3g}; median ||b||^2 / dist^2 = {old_ratio:.3g}",
        ),
        L4_SMOOTHNESS.format(count=count).less(smoothness, factor * beta**2, spread=f"beta = {beta:.3g} derived"),
        L4_SMOOTHNESS.revised(2)
        .format(count=V.shape[0])
        .less(float(((o_g - o_noise - 2 * o_bias) / o_dist).max()), factor * h_beta**2, spread=f"beta = {h_beta:.3g}"),
        L4_SMOOTHNESS.revised(1)
        .format(count=V.shape[0])
        .less(float(((o_g - 2 * o_bias) / o_dist).max()), factor * h_beta**2, spread=f"beta = {h_beta:.3g}"),
    ]
    table = {"check": "lemma4", "points": count, "alpha": alpha, "beta": beta, "median_bias_over_dist": ratio}
    return rows, table
