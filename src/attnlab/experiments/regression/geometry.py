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
from attnlab.verify import Claim, Reading, Revision, RunContext

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
_EIGEN = (
    "the normal eigenvectors u of H, the Hessian of f at theta_R (R Haar of seed) in whitened coordinates by "
    "autograd of the closed-form values (its d (d - 1) / 2 tangent eigenvectors dropped), each at theta_R +- r u"
)
_CENTRAL = (
    "at r = radius sigma_d^{1/2} and at 2r (Sigma~-norm): the central estimate (q(r u) + q(-r u)) / 2 cancels the "
    "O(r) term of the one-sided ratio, odd in r, and leaves c r^2 + O(r^4), which changes by 3 c r^2 from r to 2r"
)
_SHARP = (
    "so the tolerance, |estimate(2r) - estimate(r)|, is three times the remainder at r (numerics, ours), at least "
    "floor = 1e-9 (ours: above the ratios' float64 round-off at this r, ~1e-13, below the remainder, ~1e-4)"
)
_OLD_CONVEXITY = Reading(
    statistic="min of <grad_Sigma~ f, theta - theta_bar> / dist^2 (whitened gradient of the closed forms, "
    "theta_bar the Sigma~-projection)",
    window="every point of every radius",
    subset=_BALL,
    tolerance="> 0 strictly (the theorem's alpha > 0)",
    params={"bound": 0.0},
    sizes=_BALL_SIZES,
)
_OLD_SMOOTHNESS = Reading(
    statistic="max of ||grad_Sigma~ f||^2 / dist^2 (whitened gradient of the closed forms)",
    window="every point of every radius",
    subset=_BALL,
    tolerance="<= lambda_max(H)^2, H the Hessian of f at theta_R in whitened coordinates (autograd of the "
    "closed-form values, seed): the r -> 0 limit of ||H Delta||^2 / ||Delta||^2",
    params={"power": 2},
    sizes=_BALL_SIZES,
)
T13_CONVEXITY = Claim(
    "T1.3 one-point strong convexity, sharp alpha: min over the Hessian's normal eigenvectors u of <grad f, theta - "
    "theta_bar> / dist^2 at theta_R +- r u, against lambda_min(H)",
    "000:Thm1",
    _S8,
    falsifier=("projection-skipped", "regularizer-sign-flipped", "regularizer-gradient-dropped"),
    id="t13-convexity",
    reading=Reading(
        statistic="min over u of the central estimate (q(r u) + q(-r u)) / 2, q = <grad_Sigma~ f, theta - "
        "theta_bar> / dist^2 at theta = theta_R + r u (whitened gradient of the closed forms, theta_bar the "
        "Sigma~-projection)",
        window=_CENTRAL,
        subset=_EIGEN,
        tolerance="|estimate(r) - lambda_min(H)| <= max(|estimate(2r) - estimate(r)|, floor): lambda_min(H) is the "
        "sharp alpha, the r -> 0 limit of q along its eigenvector, and q along any normal eigenvector tends to its "
        f"eigenvalue, no smaller; {_SHARP}",
        params={"radius": 0.02, "floor": 1e-9},
        sizes=(*INSTANCE, "mu"),
    ),
    revisions=(
        Revision(
            _OLD_CONVEXITY,
            "2026-11-28",
            "too weak to fail: only the sign of the ratio over random directions, which average the normal "
            "curvatures (0.50 near M against lambda_min = 0.30): f's gradient without the regularizer's passed "
            "(0.205 > 0 quick). Along the Hessian's normal eigenvectors the ratio tends to each eigenvalue; their "
            "min is the sharp alpha: true 0.30006 against 0.30 +- 1.8e-4, the regularizer's gradient dropped "
            "0.0683 (now the falsifier 'regularizer-gradient-dropped'). The run recomputes this reading beside the "
            "current row",
            "pass: 0.501 > 0 (55b3e6f)",
            "pass: 0.447 > 0 (55b3e6f)",
            claim="T1.3 one-point strong convexity within rho: min <grad f, theta - theta_bar> / dist^2 over {count} "
            "points",
        ),
    ),
)
T13_SMOOTHNESS = Claim(
    "T1.3 smoothness, sharp beta: max over the Hessian's normal eigenvectors u of ||grad f||^2 / dist^2 at theta_R "
    "+- r u, against lambda_max(H)^2",
    "000:Thm1",
    _S8,
    falsifier=("identity-metric", "loss-gradient-doubled", "loss-gradient-x1.05"),
    id="t13-smoothness",
    reading=Reading(
        statistic="max over u of the central estimate (q(r u) + q(-r u)) / 2, q = ||grad_Sigma~ f||^2 / dist^2 at "
        "theta = theta_R + r u (whitened gradient of the closed forms)",
        window=_CENTRAL,
        subset=_EIGEN,
        tolerance="|estimate(r) - lambda_max(H)^2| <= max(|estimate(2r) - estimate(r)|, floor): lambda_max(H) is the "
        "sharp beta, the r -> 0 limit of q^{1/2} along its eigenvector, and q along any normal eigenvector tends to "
        f"its eigenvalue squared, no larger; {_SHARP}",
        params={"radius": 0.02, "floor": 1e-9},
        sizes=(*INSTANCE, "mu"),
    ),
    revisions=(
        Revision(
            _OLD_SMOOTHNESS,
            "2026-11-28",
            "too weak to fail: random directions miss the top eigenvector (0.85 quick, 0.80 full against "
            "lambda_max^2 = 1), so the population gradient x 1.05 and x 1.08 passed (0.915, 0.953 quick). Along the "
            "Hessian's normal eigenvectors the ratio tends to each eigenvalue squared; their max is the sharp "
            "beta^2: true 1.00027 against 1 +- 8.1e-4, x 1.05 1.0515 (now the falsifier 'loss-gradient-x1.05'), "
            "x 1.08 1.0835; one-sided at r the O(r) term alone is 0.024 (1.024 true). The run recomputes this "
            "reading beside the current row",
            "pass: 0.854 <= 1 (55b3e6f)",
            "pass: 0.804 <= 1 (55b3e6f)",
            claim="T1.3 smoothness within rho: max ||grad f||^2 / dist^2 over {count} points, against lambda_max(H)^2",
        ),
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


def _one_point(problem: RegressionProblem, mu: float, V: torch.Tensor, Q: torch.Tensor):
    """At the points ``(V, Q)`` (batched): ``<grad f, theta - theta_bar> / dist^2`` and ``||grad f||^2 / dist^2`` in the
    whitened geometry (spec §4.4), ``theta_bar`` the Sigma~-projection, and Lemma 1's symmetry defect there."""
    S, W = problem.Sigma, problem.W_star
    proj = project(V, Q, W, S)
    A, C = whiten(V, Q, S, S)
    Ab, Cb = whiten(proj.V, proj.Q, S, S)
    sym = (A - Ab).transpose(-1, -2) @ Ab + (C - Cb) @ Cb.transpose(-1, -2)
    gV, gQ = _grad_f(problem, mu, V, Q)
    root_inv = sym_inv_sqrt(S)
    gA, gC = gV @ root_inv, root_inv @ gQ @ root_inv  # spec §4.4: the gradient in the whitened geometry
    dist2 = proj.distance**2
    inner = (gA * (A - Ab)).sum((-2, -1)) + (gC * (C - Cb)).sum((-2, -1))
    norm2 = (gA**2).sum((-2, -1)) + (gC**2).sum((-2, -1))
    return inner / dist2, norm2 / dist2, float((sym - sym.transpose(-1, -2)).abs().max())


Hessian = tuple[np.ndarray, np.ndarray, tuple[torch.Tensor, torch.Tensor]]


def eigen_ratios(problem: RegressionProblem, mu: float, hessian: Hessian, r: float) -> tuple[np.ndarray, np.ndarray]:
    """The central estimates ``(q(r u) + q(-r u)) / 2`` of both one-point ratios of :func:`_one_point` along every
    normal eigenvector ``u`` of the whitened Hessian at ``theta_R`` (``hessian``, from
    :func:`~attnlab.regression.whitened_hessian`), in ascending eigenvalue order: they tend to ``lambda_u`` and
    ``lambda_u^2`` as ``r -> 0`` (spec §4.4), with an error ``O(r^2)``."""
    _, eigenvectors, (A0, C0) = hessian
    normal = torch.from_numpy(eigenvectors[:, problem.d * (problem.d - 1) // 2 :].T.copy())  # spec §4.4: dim O(d)
    steps = r * torch.cat([normal, -normal])
    A = A0 + steps[:, : A0.numel()].reshape(-1, *A0.shape)
    C = C0 + steps[:, A0.numel() :].reshape(-1, *C0.shape)
    convexity, smoothness, _ = _one_point(problem, mu, *unwhiten(A, C, problem.Sigma, problem.Sigma))
    m = len(normal)
    return ((convexity[:m] + convexity[m:]) / 2).numpy(), ((smoothness[:m] + smoothness[m:]) / 2).numpy()


def _sharp_rows(config: TheoryConfig, problem: RegressionProblem, hessian: Hessian):
    """T1.3's sharp constants: the extreme central ratios over the normal eigenvectors at r and 2r (spec §4.4)."""
    normal = normal_curvatures(hessian[0], config.d)
    ratios: dict[float, tuple[np.ndarray, np.ndarray]] = {}  # both rows read the ratios of one radius once
    rows = []
    for claim, which, pick, predicted in (
        (T13_CONVEXITY, 0, np.min, float(normal[0])),
        (T13_SMOOTHNESS, 1, np.max, float(normal[-1]) ** 2),
    ):
        r = claim.param("radius") * min(config.singular_values) ** 0.5
        for s in (r, 2 * r):
            if s not in ratios:
                ratios[s] = eigen_ratios(problem, config.mu, hessian, s)
        at_r, at_2r = (float(pick(ratios[s][which])) for s in (r, 2 * r))
        change, floor = abs(at_2r - at_r), claim.param("floor")
        rows.append(
            claim.close(
                predicted,
                at_r,
                atol=max(change, floor),
                spread=f"the central estimate's change from r to 2r ({change:.2g}: three times its O(r^2) remainder "
                f"at r = {r:.3g}), at least {floor:g} (ours); over the {len(normal)} normal eigenvectors",
            )
        )
    return rows


def geometry_rows(config: TheoryConfig, problem: RegressionProblem, hessian: Hessian, ctx: RunContext):
    """L1 and T1.3's old readings over random perturbations of theta_R at each radius (multiples of
    sigma_d^{1/2}); T1.3 along the Hessian's normal eigenvectors (:func:`_sharp_rows`). ``hessian``: the whitened
    Hessian at theta_R (:func:`~attnlab.regression.whitened_hessian`), computed once by the caller."""
    spectrum = hessian[0]
    S, W = problem.Sigma, problem.W_star
    s_min = min(config.singular_values)
    ratios_a, ratios_b, sym_defect, table = [], [], 0.0, []
    for r in ctx.bar(config.radii, desc="T1.3 radii"):
        V0, Q0 = manifold_point(random_rotation(config.d, runs=config.directions, seed=config.seed + 7), W, S)
        A0, C0 = whiten(V0, Q0, S, S)
        gen = torch.Generator().manual_seed(config.seed + int(1e4 * r))
        dA, dC = torch.randn(A0.shape, generator=gen), torch.randn(C0.shape, generator=gen)
        scale = r * s_min**0.5 / (dA.square().sum((-2, -1)) + dC.square().sum((-2, -1))).sqrt()[:, None, None]
        convexity, smoothness, defect = _one_point(
            problem, config.mu, *unwhiten(A0 + scale * dA, C0 + scale * dC, S, S)
        )
        sym_defect = max(sym_defect, defect)
        ratios_a.append(float(convexity.min()))
        ratios_b.append(float(smoothness.max()))
        table.append({"check": "one_point", "radius": r, "alpha_hat": ratios_a[-1], "beta_sq_hat": ratios_b[-1]})
    count = config.directions * len(config.radii)
    lam_max = float(spectrum[-1])
    alpha = min(ratios_a)
    old_convexity, old_smoothness = T13_CONVEXITY.revised(1), T13_SMOOTHNESS.revised(1)
    rows = [
        L1_SYMMETRY.less(sym_defect, L1_SYMMETRY.param("bound"), spread="round-off of an SVD-based projection"),
        *_sharp_rows(config, problem, hessian),
        old_convexity.format(count=count).greater(
            alpha,
            old_convexity.param("bound"),
            strict=True,
            spread=f"the theorem's alpha > 0; alpha / sigma_d = {alpha / s_min:.3g}, lambda_min of the normal "
            f"Hessian / sigma_d = {float(normal_curvatures(spectrum, config.d)[0]) / s_min:.3g}",
        ),
        old_smoothness.format(count=count).less(
            max(ratios_b),
            lam_max ** old_smoothness.param("power"),
            spread=f"beta^2 <= lambda_max(H)^2 = {lam_max**2:.3g} (the r -> 0 limit of ||H Delta||^2 / ||Delta||^2; "
            f"= {lam_max**2 / max(config.singular_values) ** 2:.3g} sigma_1^2)",
        ),
    ]
    return rows, table
