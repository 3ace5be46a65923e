"""Theorem 1.2-1.3 and Lemma 1 as declared rows: the minima on M, the projection's symmetry, one-point strong convexity
and smoothness, with the sharp constants from the Hessian of f at M in the whitened coordinates.

Spec: docs/theory/preconditioned-regression.md §4.2-4.4, §8 (T1.2, T1.3, L1).
"""

from __future__ import annotations

import numpy as np
import torch

from attnlab.experiments.regression.common import INSTANCE, SOURCE, TheoryConfig
from attnlab.regression import (
    RegressionProblem,
    manifold_point,
    population_gradient,
    project,
    random_rotation,
    regularizer_gradient,
    sym_inv_sqrt,
    unwhiten,
    whiten,
)
from attnlab.regression.curvature import normal_curvatures, objective_excess
from attnlab.verify import Claim, Reading, RunContext

_S8 = f"{SOURCE} §8"
_ON_M = "6 points theta_R of M: Haar rotations R (seed), every other with its first column negated (det -1)"
_BALL = (
    "directions random perturbations of theta_R per radius r in radii, of Sigma~-norm r sigma_d^{1/2} "
    "(Haar R of seed + 7, Gaussian directions of seed + 1e4 r)"
)
_BALL_SIZES = (*INSTANCE, "mu", "radii", "directions")
T12_MINIMUM = Claim(
    "T1.2 f(theta_R) = L_irr on M: max |f - L_irr| over 6 R, both det signs",
    "000:Thm1",
    _S8,
    falsifier=("irreducible-d-sigma2", "unbalanced-minima"),
    id="t12-minimum",
    reading=Reading(
        statistic="max |f(theta_R) - L_irr|, f = L + mu R by the closed forms (population_loss, regularizer)",
        window="the points themselves (no run)",
        subset=_ON_M,
        tolerance="<= 64 ulp of L_irr (float64 round-off of the closed form)",
        params={"ulps": 64, "points": 6},
        sizes=(*INSTANCE, "mu"),
    ),
)
T12_STATIONARY = Claim(
    "T1.2 grad f(theta_R) = 0 on M: max entry",
    "000:Thm1",
    _S8,
    kind="property",
    id="t12-stationary",
    reading=Reading(
        statistic="max |entry| of grad f = grad L + mu grad R (closed-form gradients) at the points",
        window="the points themselves (no run)",
        subset=_ON_M,
        tolerance="<= 1e-12 (round-off of the closed-form gradients)",
        params={"bound": 1e-12},
        sizes=(*INSTANCE, "mu"),
    ),
)
L1_SYMMETRY = Claim(
    "L1 Delta_A^T A_bar + Delta_C C_bar^T is symmetric at the projection: max defect",
    "000:Lem1",
    _S8,
    falsifier=("projection-skipped", "unbalanced-minima"),
    id="lem1-symmetry",
    reading=Reading(
        statistic="max |S - S^T| entry of S = Delta_A^T A_bar + Delta_C C_bar^T at the Sigma~-projection (Procrustes)",
        window="every point of every radius",
        subset=_BALL,
        tolerance="<= 1e-12 (round-off of an SVD-based projection)",
        params={"bound": 1e-12},
        sizes=_BALL_SIZES,
    ),
)
T13_CONVEXITY = Claim(
    "T1.3 one-point strong convexity within rho: min <grad f, theta - theta_bar> / dist^2 over {count} points",
    "000:Thm1",
    _S8,
    falsifier=("projection-skipped", "regularizer-sign-flipped"),
    id="t13-convexity",
    reading=Reading(
        statistic="min of <grad_Sigma~ f, theta - theta_bar> / dist^2 (whitened gradient of the closed forms, "
        "theta_bar the Sigma~-projection)",
        window="every point of every radius",
        subset=_BALL,
        tolerance="> 0 strictly (the theorem's alpha > 0)",
        params={"bound": 0.0},
        sizes=_BALL_SIZES,
    ),
)
T13_SMOOTHNESS = Claim(
    "T1.3 smoothness within rho: max ||grad f||^2 / dist^2 over {count} points, against lambda_max(H)^2",
    "000:Thm1",
    _S8,
    falsifier=("identity-metric", "loss-gradient-doubled"),
    id="t13-smoothness",
    reading=Reading(
        statistic="max of ||grad_Sigma~ f||^2 / dist^2 (whitened gradient of the closed forms)",
        window="every point of every radius",
        subset=_BALL,
        tolerance="<= lambda_max(H)^2, H the Hessian of f at theta_R in whitened coordinates (autograd of the "
        "closed-form values, seed): the r -> 0 limit of ||H Delta||^2 / ||Delta||^2",
        params={"power": 2},
        sizes=_BALL_SIZES,
    ),
)


def _grad_f(problem: RegressionProblem, mu: float, V: torch.Tensor, Q: torch.Tensor):
    gV, gQ = population_gradient(V, Q, problem.Sigma, problem.W_star)  # spec §5.1
    rV, rQ = regularizer_gradient(V, Q, problem.Sigma)  # spec §5.2
    return gV + mu * rV, gQ + mu * rQ


def minima_rows(config: TheoryConfig, problem: RegressionProblem):
    """T1.2 at 6 points of M, both components of O(d)."""
    Rs = random_rotation(config.d, runs=T12_MINIMUM.param("points"), seed=config.seed)
    Rs[::2, :, 0] *= -1  # both components of O(d)
    V, Q = manifold_point(Rs, problem.W_star, problem.Sigma)
    roundoff = T12_MINIMUM.param("ulps") * torch.finfo(torch.float64).eps * problem.irreducible_loss
    value = float(objective_excess(problem, config.mu, V, Q).abs().max())
    grad = max(float(g.abs().max()) for g in _grad_f(problem, config.mu, V, Q))
    return [
        T12_MINIMUM.less(value, roundoff, spread="round-off: 64 ulp of L_irr"),
        T12_STATIONARY.less(grad, T12_STATIONARY.param("bound"), spread="round-off of the closed-form gradients"),
    ]


def geometry_rows(config: TheoryConfig, problem: RegressionProblem, spectrum: np.ndarray, ctx: RunContext):
    """L1 and T1.3 over random perturbations of theta_R at each radius (multiples of sigma_d^{1/2})."""
    S, W = problem.Sigma, problem.W_star
    s_min = min(config.singular_values)
    ratios_a, ratios_b, sym_defect, table = [], [], 0.0, []
    for r in ctx.bar(config.radii, desc="T1.3 radii"):
        V0, Q0 = manifold_point(random_rotation(config.d, runs=config.directions, seed=config.seed + 7), W, S)
        A0, C0 = whiten(V0, Q0, S, S)
        gen = torch.Generator().manual_seed(config.seed + int(1e4 * r))
        dA, dC = torch.randn(A0.shape, generator=gen), torch.randn(C0.shape, generator=gen)
        scale = r * s_min**0.5 / (dA.square().sum((-2, -1)) + dC.square().sum((-2, -1))).sqrt()[:, None, None]
        V, Q = unwhiten(A0 + scale * dA, C0 + scale * dC, S, S)
        proj = project(V, Q, W, S)
        A, C = whiten(V, Q, S, S)
        Ab, Cb = whiten(proj.V, proj.Q, S, S)
        sym = (A - Ab).transpose(-1, -2) @ Ab + (C - Cb) @ Cb.transpose(-1, -2)
        sym_defect = max(sym_defect, float((sym - sym.transpose(-1, -2)).abs().max()))
        gV, gQ = _grad_f(problem, config.mu, V, Q)
        root_inv = sym_inv_sqrt(S)
        gA, gC = gV @ root_inv, root_inv @ gQ @ root_inv  # spec §4.4: the gradient in the whitened geometry
        dist2 = proj.distance**2
        inner = (gA * (A - Ab)).sum((-2, -1)) + (gC * (C - Cb)).sum((-2, -1))
        ratios_a.append(float((inner / dist2).min()))
        ratios_b.append(float((((gA**2).sum((-2, -1)) + (gC**2).sum((-2, -1))) / dist2).max()))
        table.append({"check": "one_point", "radius": r, "alpha_hat": ratios_a[-1], "beta_sq_hat": ratios_b[-1]})
    count = config.directions * len(config.radii)
    lam_max = float(spectrum[-1])
    alpha = min(ratios_a)
    rows = [
        L1_SYMMETRY.less(sym_defect, L1_SYMMETRY.param("bound"), spread="round-off of an SVD-based projection"),
        T13_CONVEXITY.format(count=count).greater(
            alpha,
            T13_CONVEXITY.param("bound"),
            strict=True,
            spread=f"the theorem's alpha > 0; alpha / sigma_d = {alpha / s_min:.3g}, lambda_min of the normal "
            f"Hessian / sigma_d = {float(normal_curvatures(spectrum, config.d)[0]) / s_min:.3g}",
        ),
        T13_SMOOTHNESS.format(count=count).less(
            max(ratios_b),
            lam_max ** T13_SMOOTHNESS.param("power"),
            spread=f"beta^2 <= lambda_max(H)^2 = {lam_max**2:.3g} (the r -> 0 limit of ||H Delta||^2 / ||Delta||^2; "
            f"= {lam_max**2 / max(config.singular_values) ** 2:.3g} sigma_1^2)",
        ),
    ]
    return rows, table
