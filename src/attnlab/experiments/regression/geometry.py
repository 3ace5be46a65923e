"""Theorem 1.2-1.3 and Lemma 1 as declared rows: the minima on M, the projection's symmetry, one-point strong convexity
and smoothness, with the sharp constants from the Hessian of f at M in the whitened coordinates.

Spec: docs/theory/preconditioned-regression.md §4.2-4.4, §8 (T1.2, T1.3, L1).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlab.experiments.regression.common import INSTANCE, SOURCE, TheoryConfig, local_radius, theory_problem
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
from attnlab.regression.curvature import normal_curvatures, objective_excess, whitened_hessian
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
L1_SANDWICH = Claim(
    "L1 singular values of the projection's factors A_bar and C_bar are sigma_i(W* Sigma^{1/2})^{1/2}, inside "
    "[sigma_d^{1/2}, sigma_1^{1/2}]: max deviation",
    "000:Lem1",
    _S8,
    kind="property",
    id="lem1-sandwich",
    reading=Reading(
        statistic="max over the points and i of |sigma_i(A_bar) - s_i^{1/2}| and |sigma_i(C_bar) - s_i^{1/2}|, "
        "A_bar, C_bar the whitened factors of the Sigma~-projection (Procrustes), s_i the instance's singular values "
        "sigma_i(W* Sigma^{1/2}) (config), both sorted",
        window="every point of every radius",
        subset=_BALL,
        tolerance="<= 1e-12 (round-off of an SVD-based projection): spec §4.3, the sandwich holds with equality",
        params={"bound": 1e-12},
        sizes=_BALL_SIZES,
    ),
)
T13_SIGMA_SCALING = Claim(
    "T1.3 alpha ~ sigma_d across two instances: min <grad f, theta - theta_bar> / dist^2 along the Hessian's normal "
    "eigenvectors and the scaling direction out to rho, over alpha = 2 sigma_d derived, at sigma(M*) = "
    "singular_values and second_singular_values",
    "000:Thm1",
    _S8,
    falsifier="regularizer-removed",
    id="t13-sigma-scaling",
    reading=Reading(
        statistic="at each instance, the min of q = <grad_Sigma~ f, theta - theta_bar> / dist^2 over theta_R +- r u "
        "(R Haar of seed; u the normal eigenvectors of its whitened Hessian and the scaling direction (A, -C) / "
        "||(A, -C)||; r in radii times its own sigma_d^{1/2}), divided by its alpha = 2 sigma_d (derived_constants); "
        "the row shows both quotients and judges the farther from 1",
        window="every point",
        subset="two instances: the theory instance and the same Sigma, singular vectors and seed with sigma(M*) = "
        "second_singular_values (sigma_1 halved, sigma_d a third)",
        tolerance="each quotient in [1/2, 2]: Theorem 1.3's alpha ~ sigma_d read as a factor 2 either way (ours); "
        "a constant that did not move with sigma_d would leave one quotient outside",
        params={"low": 0.5, "high": 2.0},
        sizes=(*INSTANCE, "mu", "radii", "second_singular_values"),
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
_SHARP_CONVEXITY = Reading(
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
)
_SHARP_SMOOTHNESS = Reading(
    statistic="max over u of the central estimate (q(r u) + q(-r u)) / 2, q = ||grad_Sigma~ f||^2 / dist^2 at "
    "theta = theta_R + r u (whitened gradient of the closed forms)",
    window=_CENTRAL,
    subset=_EIGEN,
    tolerance="|estimate(r) - lambda_max(H)^2| <= max(|estimate(2r) - estimate(r)|, floor): lambda_max(H) is the "
    "sharp beta, the r -> 0 limit of q^{1/2} along its eigenvector, and q along any normal eigenvector tends to "
    f"its eigenvalue squared, no larger; {_SHARP}",
    params={"radius": 0.02, "floor": 1e-9},
    sizes=(*INSTANCE, "mu"),
)
_WITHIN_RHO = (
    "every radius r in radii (multiples of sigma_d^{1/2}, all <= rho = 0.25 sigma_d^{1/2}): the directions random "
    "perturbations of theta_R (Haar R of seed + 7, Gaussian directions of seed + 1e4 r), and at theta_R (R Haar of "
    "seed) +- r u for every normal eigenvector u of the whitened Hessian of f (autograd, its d (d - 1) / 2 tangent "
    "eigenvectors dropped) and for the scaling direction u = (A, -C) / ||(A, -C)|| (the orbit (c V, Q / c), along "
    "which L is constant)"
)
_DERIVED = (
    "alpha and beta derived by hand, independent of f's code (spec §4.4): at theta_R, in the basis of the SVD of "
    "M*, the second-order term of f = ||A C - M*||^2 + mu ||A^T A - C C^T||^2 splits into blocks: an A-row outside "
    "range(U) (k > d) has curvature 2 sigma_j, the diagonal pair (A_ii, C_ii) 4 sigma_i and 16 mu sigma_i, the "
    "off-diagonal quadruple (A_ij, A_ji, C_ij, C_ji) a 4 x 4 form with one tangent zero; alpha = the least "
    "normal eigenvalue (2 sigma_d here), beta = the largest (4 sigma_1)"
)
T13_CONVEXITY = Claim(
    "T1.3 one-point strong convexity within rho: min <grad f, theta - theta_bar> / dist^2 over {count} points, "
    "against alpha / 2, alpha = 2 sigma_d derived",
    "000:Thm1",
    _S8,
    falsifier=("projection-skipped", "regularizer-sign-flipped", "regularizer-gradient-dropped", "regularizer-removed"),
    id="t13-convexity",
    reading=Reading(
        statistic="min of q = <grad_Sigma~ f, theta - theta_bar> / dist^2 (whitened gradient of the closed forms, "
        "theta_bar the Sigma~-projection) over the points",
        window="every point",
        subset=_WITHIN_RHO,
        tolerance=f">= alpha / 2; {_DERIVED}; the factor 1/2 (ours, the form <grad f, Delta> >= alpha / 2 "
        "||Delta||^2 + ... of Tu et al.) allows for the cubic and quartic terms of f out to rho",
        params={"fraction": 0.5},
        sizes=(*INSTANCE, "mu", "radii", "directions"),
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
        Revision(
            _SHARP_CONVEXITY,
            "2026-11-29",
            "its prediction, lambda_min of the Hessian of the same f, moves with the mechanism: for any smooth f "
            "the ratio along an eigenvector tends to its eigenvalue, so the row checked our code against itself. "
            "With the regularizer removed consistently (mu = 0, value and gradient) the theorem fails (alpha = 0 "
            "along the scaling direction) and the row still passed (1.25e-5 against -3e-17 +- 3.8e-5, audit fid0 "
            "p1). Now alpha = 2 sigma_d is derived by hand and read over points out to rho, the scaling direction "
            "included (mu = 0 there: 0.025-0.030 against 0.30, p6). The run recomputes this reading beside the "
            "current row",
            "pass: 0.30006 within 0.3 +- 0.00018 (8a9b237)",
            "pass: 0.30006 within 0.3 +- 0.00018 (8a9b237)",
            claim="T1.3 one-point strong convexity, sharp alpha: min over the Hessian's normal eigenvectors u of "
            "<grad f, theta - theta_bar> / dist^2 at theta_R +- r u, against lambda_min(H)",
        ),
    ),
)
T13_SMOOTHNESS = Claim(
    "T1.3 smoothness within rho: max ||grad f||^2 / (B(dist) dist)^2 over {count} points, B(dist) = beta + c1 "
    "sqrt(sigma_1) dist + c2 dist^2, beta = 4 sigma_1 derived",
    "000:Thm1",
    _S8,
    falsifier=("identity-metric", "loss-gradient-doubled"),
    id="t13-smoothness",
    reading=Reading(
        statistic="max over the points of ||grad_Sigma~ f||^2 / dist^2 divided by B(dist)^2 (whitened gradient of "
        "the closed forms, dist to the Sigma~-projection)",
        window="every point",
        subset=_WITHIN_RHO,
        tolerance=f"<= 1; {_DERIVED}; grad f(theta_bar + Delta) = H Delta + quadratic + cubic terms in Delta "
        "(spec §5.4), bounded with ||A_bar||_op = ||C_bar||_op = sigma_1^{1/2}: ||H Delta|| <= beta ||Delta||, the "
        "quadratic terms <= c1 sigma_1^{1/2} ||Delta||^2, the cubic <= c2 ||Delta||^3, c1 = sqrt2 (1 + 2 sqrt2) "
        "(1 + 4 mu), c2 = sqrt2 (1 + 4 mu)",
        params={"bound": 1.0},
        sizes=(*INSTANCE, "mu", "radii", "directions"),
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
        Revision(
            _SHARP_SMOOTHNESS,
            "2026-11-29",
            "its prediction, lambda_max of the Hessian of the same f, moves with the mechanism (calculus, not "
            "Theorem 1.3: audit fid0 #1). Now beta = 4 sigma_1 is derived by hand and the row reads every point out "
            "to rho against a derived bound on the gradient's nonlinear terms; that bound's slack at the smallest "
            "radius (4%) lets a 5% slip of the loss gradient pass (0.990 <= 1 quick), which this reading caught "
            "(1.0515 against 1 +- 8.1e-4), so 'loss-gradient-x1.05' was retired with it. The run recomputes this "
            "reading beside the current row",
            "pass: 1.00027 within 1 +- 0.00081 (8a9b237)",
            "pass: 1.00027 within 1 +- 0.00081 (8a9b237)",
            claim="T1.3 smoothness, sharp beta: max over the Hessian's normal eigenvectors u of ||grad f||^2 / dist^2 "
            "at theta_R +- r u, against lambda_max(H)^2",
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


def derived_constants(singular_values, k: int, mu: float) -> tuple[float, float]:
    """Theorem 1.3's alpha and beta derived by hand: the least and largest normal eigenvalue of the Hessian of
    ``f = ||A C - M*||^2 + mu ||A^T A - C C^T||^2`` at a point of M (whitened coordinates), without f's code.

    Spec §4.4. At ``theta_R`` in the basis of the SVD of ``M*`` (``A = U S^{1/2}``, ``C = S^{1/2} V_M^T`` up to R),
    the quadratic term of f splits into blocks: an A-row outside range(U) (only when k > d) has curvature
    ``2 s_j``; the diagonal pair ``(A_ii, C_ii)`` has ``2 s (a + c)^2 + 8 mu s (a - c)^2``, eigenvalues ``4 s_i``
    and ``16 mu s_i``; the quadruple ``(A_ij, A_ji, C_ij, C_ji)``, i < j, has the 4 x 4 form below, one of whose
    eigenvalues is the tangent direction's 0.

    Parameters
    ----------
    singular_values : sequence of float
        sigma(W* Sigma^{1/2}), each > 0.
    k : int
        Response dimension, >= d.
    mu : float
        Regularizer weight, >= 0.

    Returns
    -------
    alpha, beta : float
        The least and largest normal eigenvalue (alpha = 2 sigma_d, beta = 4 sigma_1 at mu = 1/4, k > d).
    """
    s = np.asarray(singular_values, dtype=float)
    d = len(s)
    normal = [2 * s] * (k - d) + [4 * s, 16 * mu * s]  # A rows outside range(U); the diagonal pairs
    for i in range(d):
        for j in range(i + 1, d):
            ri, rj = s[i] ** 0.5, s[j] ** 0.5
            # second-order term (doubled): 2 [(a_ij rj + ri c_ij)^2 + (a_ji ri + rj c_ji)^2]
            #   + 4 mu (a_ji rj + a_ij ri - c_ij rj - c_ji ri)^2, variables (a_ij, a_ji, c_ij, c_ji)
            loss = np.array([[rj, 0, ri, 0], [0, ri, 0, rj]])
            bal = np.array([ri, rj, -rj, -ri])
            form = 2 * loss.T @ loss + 4 * mu * np.outer(bal, bal)
            normal.append(np.linalg.eigvalsh(form)[1:])  # the least is the tangent direction's 0
    values = np.concatenate([np.ravel(v) for v in normal])
    return float(values.min()), float(values.max())


def _one_point(problem: RegressionProblem, mu: float, V: torch.Tensor, Q: torch.Tensor, with_distance: bool = False):
    """At the points ``(V, Q)`` (batched): ``<grad f, theta - theta_bar> / dist^2`` and ``||grad f||^2 / dist^2`` in the
    whitened geometry (spec §4.4), ``theta_bar`` the Sigma~-projection, and Lemma 1's symmetry defect there (and
    ``dist`` last, with ``with_distance``)."""
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
    out = (inner / dist2, norm2 / dist2, float((sym - sym.transpose(-1, -2)).abs().max()))
    return (*out, proj.distance) if with_distance else out


Hessian = tuple[np.ndarray, np.ndarray, tuple[torch.Tensor, torch.Tensor]]


def _directions(problem: RegressionProblem, hessian: Hessian) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Unit directions at ``theta_R`` of ``hessian``: its normal eigenvectors and the scaling direction
    ``(A, -C) / ||(A, -C)||``, each with both signs (rows, in ``concat(A.flatten(), C.flatten())``)."""
    _, eigenvectors, (A0, C0) = hessian
    normal = torch.from_numpy(eigenvectors[:, problem.d * (problem.d - 1) // 2 :].T.copy())  # spec §4.4: dim O(d)
    scaling = torch.cat([A0.flatten(), -C0.flatten()])  # spec §3.5: the orbit (c V, Q / c)
    units = torch.cat([normal, (scaling / scaling.norm())[None]])
    return torch.cat([units, -units]), (A0, C0)


def _along(problem: RegressionProblem, hessian: Hessian, r: float):
    """The points ``theta_R + r u`` for every direction of :func:`_directions`, as ``(V, Q)`` (batched)."""
    return _along_units(problem, hessian, _directions(problem, hessian)[0], r)


def _along_units(problem: RegressionProblem, hessian: Hessian, units: torch.Tensor, r: float):
    """The points ``theta_R + r u`` for the unit rows ``units`` at ``hessian``'s ``theta_R``, as ``(V, Q)``."""
    A0, C0 = hessian[2]
    steps = r * units
    A = A0 + steps[:, : A0.numel()].reshape(-1, *A0.shape)
    C = C0 + steps[:, A0.numel() :].reshape(-1, *C0.shape)
    return unwhiten(A, C, problem.Sigma, problem.Sigma)


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
    """T1.3's revision 2 (2026-11-29): the extreme central ratios over the normal eigenvectors at r and 2r against
    the Hessian of the same f (spec §4.4)."""
    normal = normal_curvatures(hessian[0], config.d)
    ratios: dict[float, tuple[np.ndarray, np.ndarray]] = {}  # both rows read the ratios of one radius once
    rows = []
    for claim, which, pick, predicted in (
        (T13_CONVEXITY.revised(2), 0, np.min, float(normal[0])),
        (T13_SMOOTHNESS.revised(2), 1, np.max, float(normal[-1]) ** 2),
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


def _sandwich(problem: RegressionProblem, singular_values, V0, Q0, dA, dC) -> float:
    """Lemma 1(2): the largest deviation of the singular values of the projection's whitened factors from
    ``s_i^{1/2}`` (spec §4.3) at the points ``theta_R + (dA, dC)`` (whitened perturbations of ``(V0, Q0)``)."""
    S = problem.Sigma
    A0, C0 = whiten(V0, Q0, S, S)
    proj = project(*unwhiten(A0 + dA, C0 + dC, S, S), problem.W_star, S)
    A_bar, C_bar = whiten(proj.V, proj.Q, S, S)
    root = torch.tensor(sorted(singular_values, reverse=True), dtype=torch.float64).sqrt()
    return max(float((torch.linalg.svdvals(F) - root).abs().max()) for F in (A_bar, C_bar))


def _smoothness_bound(config: TheoryConfig, beta: float, dist: torch.Tensor) -> torch.Tensor:
    """B(dist) = beta + c1 sigma_1^{1/2} dist + c2 dist^2: the derived bound on ||grad f|| / dist (t13-smoothness)."""
    c1 = 2**0.5 * (1 + 2 * 2**0.5) * (1 + 4 * config.mu)  # spec §5.4: the quadratic terms of the whitened gradient
    c2 = 2**0.5 * (1 + 4 * config.mu)  # the cubic terms
    return beta + c1 * max(config.singular_values) ** 0.5 * dist + c2 * dist**2


def _eigen_min(config: TheoryConfig, problem: RegressionProblem, hessian: Hessian, singular_values) -> float:
    """The min of the convexity ratio along :func:`_directions` at every radius (multiples of sigma_d^{1/2})."""
    root = min(singular_values) ** 0.5
    return min(
        float(_one_point(problem, config.mu, *_along(problem, hessian, r * root))[0].min()) for r in config.radii
    )


def sigma_scaling_row(config: TheoryConfig, problem: RegressionProblem, hessian: Hessian):
    """t13-sigma-scaling: the measured alpha over 2 sigma_d at the theory instance and at a second one (spec §4.4)."""
    second = theory_problem(config.d, config.k, config.noise_std, config.second_singular_values, config.problem_seed)
    quotients = []
    for prob, hess, values in (
        (problem, hessian, config.singular_values),
        (second, whitened_hessian(second, config.mu, config.seed), config.second_singular_values),
    ):
        alpha, _ = derived_constants(values, config.k, config.mu)
        quotients.append(_eigen_min(config, prob, hess, values) / alpha)
    low, high = T13_SIGMA_SCALING.param("low"), T13_SIGMA_SCALING.param("high")
    worst = max(quotients, key=lambda q: abs(math.log(q)) if q > 0 else math.inf)
    return T13_SIGMA_SCALING.holds(
        f"{low:g} <= quotient <= {high:g} at both",
        f"{quotients[0]:.4g}, {quotients[1]:.4g}",
        f"alpha = 2 sigma_d derived: {2 * min(config.singular_values):.3g} and {2 * min(config.second_singular_values):.3g}"
        "; a factor 2 either way (ours)",
        low <= worst <= high,
        margin=min(min(quotients) - low, high - max(quotients)),
    )


def geometry_rows(config: TheoryConfig, problem: RegressionProblem, hessian: Hessian, ctx: RunContext):
    """L1 and T1.3 over random perturbations of theta_R and along the Hessian's normal eigenvectors and the scaling
    direction at each radius (multiples of sigma_d^{1/2}), against alpha and beta derived by hand
    (:func:`derived_constants`); the old readings beside them (:func:`_sharp_rows`). ``hessian``: the whitened
    Hessian at theta_R (:func:`~attnlab.regression.whitened_hessian`), computed once by the caller."""
    spectrum = hessian[0]
    S, W = problem.Sigma, problem.W_star
    s_min = min(config.singular_values)
    alpha_d, beta_d = derived_constants(config.singular_values, config.k, config.mu)
    ratios_a, ratios_b, sym_defect, table = [], [], 0.0, []
    ball_a, ball_b, far, sandwich = [], [], 0.0, 0.0
    for r in ctx.bar(config.radii, desc="T1.3 radii"):
        V0, Q0 = manifold_point(random_rotation(config.d, runs=config.directions, seed=config.seed + 7), W, S)
        A0, C0 = whiten(V0, Q0, S, S)
        gen = torch.Generator().manual_seed(config.seed + int(1e4 * r))
        dA, dC = torch.randn(A0.shape, generator=gen), torch.randn(C0.shape, generator=gen)
        scale = r * s_min**0.5 / (dA.square().sum((-2, -1)) + dC.square().sum((-2, -1))).sqrt()[:, None, None]
        convexity, smoothness, defect, dist = _one_point(
            problem, config.mu, *unwhiten(A0 + scale * dA, C0 + scale * dC, S, S), with_distance=True
        )
        sym_defect = max(sym_defect, defect)
        sandwich = max(sandwich, _sandwich(problem, config.singular_values, V0, Q0, scale * dA, scale * dC))
        ratios_a.append(float(convexity.min()))
        ratios_b.append(float(smoothness.max()))
        c_e, s_e, _, d_e = _one_point(problem, config.mu, *_along(problem, hessian, r * s_min**0.5), with_distance=True)
        ball_a.append(min(ratios_a[-1], float(c_e.min())))
        ball_b.append(
            max(
                float((q / _smoothness_bound(config, beta_d, x) ** 2).max())
                for q, x in ((smoothness, dist), (s_e, d_e))
            )
        )
        far = max(far, float(torch.cat([dist, d_e]).max()) / local_radius(config.singular_values))
        table.append(
            {
                "check": "one_point",
                "radius": r,
                "alpha_hat": ratios_a[-1],
                "beta_sq_hat": ratios_b[-1],
                "alpha_ball": ball_a[-1],
                "beta_bound_ratio": ball_b[-1],
            }  # fmt: skip
        )
    count = config.directions * len(config.radii)
    count_all = count + 2 * (len(normal_curvatures(spectrum, config.d)) + 1) * len(config.radii)
    lam_max = float(spectrum[-1])
    alpha = min(ratios_a)
    old_convexity, old_smoothness = T13_CONVEXITY.revised(1), T13_SMOOTHNESS.revised(1)
    fraction = T13_CONVEXITY.param("fraction")
    by_radius = ", ".join(f"{a:.3g}" for a in ball_a)
    rows = [
        L1_SYMMETRY.less(sym_defect, L1_SYMMETRY.param("bound"), spread="round-off of an SVD-based projection"),
        L1_SANDWICH.less(sandwich, L1_SANDWICH.param("bound"), spread="round-off of an SVD-based projection"),
        T13_CONVEXITY.format(count=count_all).greater(
            min(ball_a),
            fraction * alpha_d,
            spread=f"alpha = {alpha_d:.3g} derived (= {alpha_d / s_min:.3g} sigma_d); min per radius {by_radius}; "
            f"largest dist / rho {far:.3g}",
        ),
        T13_SMOOTHNESS.format(count=count_all).less(
            max(ball_b),
            T13_SMOOTHNESS.param("bound"),
            spread=f"beta = {beta_d:.3g} derived (= {beta_d / max(config.singular_values):.3g} sigma_1); max per "
            f"radius {', '.join(f'{b:.3g}' for b in ball_b)}",
        ),
        sigma_scaling_row(config, problem, hessian),
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
