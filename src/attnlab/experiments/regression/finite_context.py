"""T1.1 and Theorems 3-5 as declared rows: the finite-context biases of :mod:`attnlab.regression.finite_context`
(``E L_n - L`` and the squared biases of the expected empirical gradients) at one point off M, and their fits in n.

Spec: docs/theory/preconditioned-regression.md §3.1-3.4, §8 (T1.1, T3-T5).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import scipy.stats

from attnlab.experiments.regression.common import (
    INSTANCE,
    MOVED_WHY,
    SOURCE,
    THEORY_BEFORE_MOVE,
    TheoryConfig,
    moved_inside,
    near_points,
)
from attnlab.regression import RegressionProblem
from attnlab.regression.finite_context import bias_expansion, bias_table, profile_exponent
from attnlab.verify import Claim, Reading, Revision, RunContext, fit_weighted_slope, old_sizes, pinned, size_change

_S8 = f"{SOURCE} §8"
_POINT = "one point theta_R + N(0, bias_scale^2) entries off M (perturbed_manifold_point, seed)"
_BIAS_SIZES = (*INSTANCE, "bias_ns", "bias_samples", "bias_scale")  # the readings as declared before the move
_INSIDE = (
    "one point at dist(theta, M) = bias_distance rho (0.3 rho; rho = 0.25 sigma_d^{1/2}), theta_R moved along a "
    "random normal direction (near_points, seed): inside the theorems' region"
)


def _moved(claim: Claim, quick: str, full: str, more: str = "") -> Claim:
    """``claim`` read at the point inside rho; the reading at the old point (4.2 rho) kept as a revision."""
    why = MOVED_WHY.format(where="the bias point lay at 4.2 rho", more=more)
    return moved_inside(claim, THEORY_BEFORE_MOVE, why, quick, full, {_POINT: _INSIDE})


# every bias field's full and quick value before 2026-11-28, when the quick bias sizes became the full ones
_OLD_BIAS = old_sizes(
    {"d": 3, "k": 6, "noise_std": 0.1, "singular_values": (0.25, 0.2, 0.15), "problem_seed": 0, "seed": 0,
     "bias_scale": 0.05, "mu": 0.25},
    bias_ns=((25, 50, 100, 200, 400, 800), (25, 50, 100, 200)), bias_samples=(400, 200),
    regularizer_samples=(4000, 2000),
)  # fmt: skip
_RESIZED = "2026-11-28"  # the quick bias sizes became the full ones
_GREW = (
    "the quick context sizes grew from 25 ... 200 with 200 samples per n to the full grid 25 ... 800 with 400, so "
    "that the Theorem 3-5 rows' slope over the three largest n (their newest revision) reaches the sizes where a "
    "floor shows (at 800 with 200 samples T1.1's exponent fit collapsed to s = 0 +- 0.44); this reading is unchanged"
)


_T11_RATE = Reading(
    statistic="leading exponent s of E L_n - L = n^-s (c + c2/n) by profile least squares (grid of step 1e-3 on "
    "[0, 3], weights 1/SE); E L_n the plain Monte-Carlo mean of the softmax in-sample loss, L the closed form",
    window="every context size n of bias_ns",
    subset=f"{_POINT}; bias_samples fresh samples of size n per n (seed + 1 + n)",
    tolerance="|s - 1| <= 3 profile-chi^2 half-widths of s (the range with chi^2 <= min + 1), Monte-Carlo SEs",
    params={"exponent": 1.0, "halfwidths": 3},
    sizes=_BIAS_SIZES,
)
T11_RATE = Claim(
    "T1.1 E L_n - L -> 0 like c/n off M: leading exponent s of n^-s (c + c2/n) fitted to the Monte-Carlo biases",
    "000:Thm1",
    _S8,
    falsifier="temperature-1.3",
    id="t11-rate",
    reading=_T11_RATE,
    revisions=(size_change(_T11_RATE, _OLD_BIAS, _RESIZED, _GREW, "pass: s = 1.11 within 1 +- 0.468 (0870f93)"),),
)
T11_RATE = _moved(T11_RATE, "pass: s = 0.93 within 1 +- 0.16 (908f6af)", "pass: s = 0.93 within 1 +- 0.16 (908f6af)")
_T11_LIMIT = Reading(
    statistic="chi^2 of the weighted least-squares fit E L_n - L = c/n + c2/n^2 (no constant), weights 1/SE",
    window="every context size n of bias_ns",
    subset=f"{_POINT}; the Monte-Carlo means of t11-rate",
    tolerance="chi^2 <= its 99.9% quantile with len(bias_ns) - 2 dof (a constant offset would not fit)",
    params={"quantile": 0.999},
    sizes=_BIAS_SIZES,
)
T11_LIMIT = Claim(
    "T1.1 the limit is the closed form: c/n + c2/n^2 with no constant fits E L_n - L (chi^2 over {dof} dof)",
    "000:Thm1",
    _S8,
    falsifier=("irreducible-d-sigma2", "temperature-1.3"),
    id="t11-limit",
    reading=_T11_LIMIT,
    revisions=(size_change(_T11_LIMIT, _OLD_BIAS, _RESIZED, _GREW, "pass: chi^2 2.62 <= 13.8 (2 dof) (0870f93)"),),
)
T11_LIMIT = _moved(
    T11_LIMIT, "pass: chi^2 8.88 <= 18.5 (4 dof) (908f6af)", "pass: chi^2 8.88 <= 18.5 (4 dof) (908f6af)"
)


def _gradient_bias_claim(
    head: str,
    result: str,
    falsifier: str | tuple[str, ...],
    key: str,
    what: str,
    samples: str,
    outcomes: Mapping[str, tuple],
    every_n: Mapping[str, float],
    wrong: str,
    log_slope: Mapping[str, float],
) -> Claim:
    """A Theorem 3-5 row: the exponent of a squared gradient bias fitted as ``c n^-s`` over the three largest n,
    ``-s <= -0.75`` (C/n with slack). ``outcomes``: the quick and full (slope, bound) of revision 1, "<= -1 + 3 SE
    of the slope"; ``every_n``: the quick and full slope of revision 2, the same bound over every n; ``wrong``: what
    passed revision 2; ``log_slope``: the quick and full slope of revision 3, the log-log slope over the three
    largest n."""
    text = f"{head}: log-log slope over the three largest n"
    statistic = (
        f"weighted least-squares log-log slope over n of the debiased squared bias {what} (Monte-Carlo mean minus "
        "the closed form, minus tr Cov / S), weights from its delta-method SE"
    )
    subset = f"{_POINT}; {samples}"
    sizes = (*_BIAS_SIZES, "regularizer_samples", "mu")
    within_spread = Revision(
        reading=Reading(
            statistic=statistic,
            window="every context size n of bias_ns",
            subset=subset,
            tolerance="slope <= -1 + 3 standard errors of the weighted slope (C/n means slope <= -1)",
            params={"slope": -1.0, "ses": 3},
            sizes=sizes,
        ),
        date="2026-11-27",
        why="the bound -1 + 3 SE of the slope widened with the Monte-Carlo spread of the quick run (to "
        f"{outcomes['quick'][1]:.2f}), so a bias whose square falls like n^-1/2 passed there; the bound now does not "
        "depend on the spread",
        quick=f"pass: {outcomes['quick'][0]:.2f} (bound <= {outcomes['quick'][1]:.2f})",
        full=f"pass: {outcomes['full'][0]:.2f} (bound <= {outcomes['full'][1]:.2f})",
        claim=text.replace("the three largest n", "n"),
    )
    tolerance = (
        "slope <= -0.75: the theorem's C/n (slope -1) with a quarter decade per decade of slack for finite-n "
        "curvature and Monte-Carlo noise, halfway to a half rate (-0.5)"
    )
    every = Reading(statistic, "every context size n of bias_ns", subset, tolerance, {"bound": -0.75}, sizes)
    over_every_n = Revision(
        reading=every,
        date="2026-11-28",
        why=f"too weak to fail: over every n the early sizes' steep fall hides a floor that a wrong mechanism leaves "
        f"at the largest n, so {wrong} passed; C/n is a statement about large n, so the slope is read over the three "
        "largest, where a floor flattens it",
        quick=f"pass: {every_n['quick']:.3g} <= -0.75 (0870f93)",
        full=f"pass: {every_n['full']:.3g} <= -0.75 (0870f93)",
        claim=text.replace("the three largest n", "n"),
    )
    largest = dataclasses.replace(every, window="the three largest context sizes n of bias_ns (the rate's regime)")
    on_log_axes = Revision(
        reading=largest,
        date="2026-11-29",
        why="undefined at other draws: where the debiased squared bias at one of the three largest n is <= 0 (below "
        "its Monte-Carlo noise, as at n = 800 at seeds 4 and 5) it has no log, so the slope was nan and the row "
        "failed on a point that says the bias is too small to resolve. The exponent is now fitted to the values "
        "themselves, c n^-s with c >= 0, where such a point is a point near 0; the temperatures 1.3 and 1.05 and "
        "the wrong regularizer gradients still leave a floor the fit reads as -s > -0.75",
        quick=f"pass: {log_slope['quick']:.3g} <= -0.75 (cb3f4e7)",
        full=f"pass: {log_slope['full']:.3g} <= -0.75 (cb3f4e7)",
        claim=text,
    )
    return Claim(
        f"{head}: exponent of c n^-s fitted over the three largest n",
        result,
        _S8,
        falsifier=falsifier,
        id=key,
        reading=dataclasses.replace(
            largest,
            statistic=f"-s, the exponent of the debiased squared bias {what} (Monte-Carlo mean minus the closed form, "
            "minus tr Cov / S) fitted as c n^-s with c >= 0 by profile least squares (s on a grid of step 1e-3 on "
            "[0, s_max]), weights 1/SE (its delta-method SE); a value <= 0 enters as a point near 0",
            params={"bound": -0.75, "s_max": 6.0},
        ),
        # revisions 1 and 2 ran at the old quick bias sizes
        revisions=(*pinned((within_spread, over_every_n), _OLD_BIAS), on_log_axes),
    )


T3_OBJECTIVE = _gradient_bias_claim(
    "Thm 3 ||E grad f_hat_n - grad f||^2 <= C/n off M (f_hat = L_n + mu R_hat)",
    "000:Thm3",
    ("temperature-1.3", "temperature-1.05"),
    "thm3-objective",
    "||E grad f_hat_n - grad f||^2 (f_hat = L_n + mu R_hat; grad R by autograd of its closed-form value)",
    "bias_samples fresh samples per n",
    {"quick": (-1.59618, -0.403757), "full": (-1.51342, -0.727954)},
    {"quick": -1.59618, "full": -1.51342},
    "a softmax temperature of 1.05 in the empirical loss (-0.87)",
    {"quick": -1.4902, "full": -1.4902},
)
T4_GRADIENT = _gradient_bias_claim(
    "Thm 4 ||E grad L_n - grad L||^2 <= C/n off M",
    "000:Thm4",
    ("temperature-1.3", "temperature-1.05"),
    "thm4-loss-gradient",
    "||E grad L_n - grad L||^2",
    "bias_samples fresh samples per n",
    {"quick": (-1.54372, -0.409265), "full": (-1.43531, -0.727198)},
    {"quick": -1.54372, "full": -1.43531},
    "a softmax temperature of 1.05 in the empirical loss (-0.78)",
    {"quick": -1.55618, "full": -1.55618},
)
T5_REGULARIZER = _gradient_bias_claim(
    "Thm 5 ||E grad R_hat_n - grad R||^2 <= C/n off M",
    "000:Thm5",
    ("regularizer-gradient-halved", "regularizer-sign-flipped"),
    "thm5-regularizer-gradient",
    "||E grad R_hat_n - grad R||^2 (grad R by autograd of its closed-form value)",
    "regularizer_samples fresh covariances Sigma_hat per n (seed + 1 + 7 n)",
    {"quick": (-2.22369, -0.680985), "full": (-2.08768, -0.833257)},
    {"quick": -2.22369, "full": -2.08768},
    "the empirical regularizer's gradient x 1.1 (-0.79)",
    {"quick": -2.30011, "full": -2.05414},
)
T3_OBJECTIVE = _moved(
    T3_OBJECTIVE,
    "pass: -s = -1.51 <= -0.75 (half-width 0.318, largest n at 2.4 SE) (908f6af)",
    "pass: -s = -1.51 <= -0.75 (half-width 0.318, largest n at 2.4 SE) (908f6af)",
)
T4_GRADIENT = _moved(
    T4_GRADIENT,
    "pass: -s = -1.60 <= -0.75 (half-width 0.33, largest n at 2.2 SE) (908f6af)",
    "pass: -s = -1.60 <= -0.75 (half-width 0.33, largest n at 2.2 SE) (908f6af)",
)
T5_REGULARIZER = _moved(
    T5_REGULARIZER,
    "pass: -s = -2.32 <= -0.75 (half-width 0.351, largest n at 1.8 SE) (908f6af)",
    "pass: -s = -2.07 <= -0.75 (half-width 0.217, largest n at 3 SE) (908f6af)",
    ". The falsifier regularizer-gradient-1.1 no longer fails the row (-1.88 quick, against -0.26 at the old point): "
    "its floor 0.01 ||grad R||^2 shrinks with the distance to M (2.9e-2 at 4.2 rho, 3.1e-5 at 0.3 rho), below the "
    "true squared bias at n = 800 (1.1e-4 +- 3.3e-5 quick); it is retired, the halved and sign-flipped gradients "
    "still fail the row",
)


def finite_context_rows(config: TheoryConfig, problem: RegressionProblem, ctx: RunContext):
    """T1.1, Theorems 4 and 5 at one point off M: rows and the table of biases per n."""
    V, Q = near_points(problem, config.singular_values, 1, config.bias_distance, config.seed)
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
            T11_RATE.param("exponent"),
            s,
            atol=T11_RATE.param("halfwidths") * s_se,
            spread=f"3 x the profile-chi^2 half-width of s ({s_se:.3g}), Monte-Carlo SEs of {config.bias_samples} "
            f"samples per n as weights; n E L_n - L = {', '.join(f'{v:.3g}' for v in ns * table.loss_bias)}",
        )
    ]
    _, _, chi2, dof = bias_expansion(ns, table.loss_bias, table.loss_se)
    quantile = float(scipy.stats.chi2.ppf(T11_LIMIT.param("quantile"), dof))
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
    largest = slice(-3, None)  # the rate's regime: the three largest n
    for claim, value, se in gradients:
        tail, tail_se = table[value].to_numpy()[largest], table[se].to_numpy()[largest]
        s, half_width, _ = profile_exponent(
            ns[largest], tail, tail_se, corrections=0, s_max=claim.param("s_max"), nonnegative=True
        )
        over = f"over n = {', '.join(f'{n:g}' for n in ns[largest])}"
        rows.append(
            claim.less(
                0.0 - s,
                claim.param("bound"),
                spread=_exponent_spread(over, s, half_width, tail, tail_se) + _edge(s, tail, claim.param("s_max")),
            )
        )
        last, last_se = fit_weighted_slope(ns[largest], tail, tail_se)
        why = _no_slope(ns, table[value])
        rows.append(
            claim.revised(3).less(
                last,
                claim.param("bound"),
                spread=f"C/n means slope <= -1; {over}, weighted slope SE {last_se:.3g} (Monte-Carlo SEs of the "
                "debiased squared bias)" + _no_slope(ns[largest], tail),
            )
        )
        slope, slope_se = fit_weighted_slope(ns, table[value], table[se])
        every = claim.revised(2)
        rows.append(
            every.less(
                slope,
                every.param("bound"),
                spread=f"C/n means slope <= -1; weighted slope SE {slope_se:.3g} over every n{why}",
            )
        )
        old = claim.revised(1)
        rows.append(
            old.less(
                slope,
                old.param("slope") + old.param("ses") * slope_se,
                spread=f"C/n means slope <= -1; + 3 SE of the weighted slope ({slope_se:.3g}, Monte-Carlo SEs "
                f"of the debiased squared bias){why}",
            )
        )
    return rows, table


def _exponent_spread(over: str, s: float, half_width: float, tail, tail_se) -> str:
    """The spread of a Theorem 3-5 row: the exponent's half-width, and how well the largest n is resolved (shown,
    not judged: the docs say why)."""
    return (
        f"C/n means -s <= -1; {over}, 1-sigma half-width of s {half_width:.3g} (chi^2 <= min + 1, Monte-Carlo SEs of "
        f"the debiased squared bias); largest n at {tail[-1] / tail_se[-1]:.2g} SE, upper 2-sigma limit of -s "
        f"{2 * half_width - s:.3g} (not judged: unresolved at our sizes, docs)"
    )


def _no_slope(ns, values) -> str:
    """The note of a slope over ``ns`` that is undefined: a debiased squared bias below its Monte-Carlo noise is
    ``<= 0``, and its log, so the slope, is nan. Empty when every value is positive."""
    unresolved = [f"{n:g}" for n, v in zip(ns, values) if not v > 0]
    return f"; no slope: the debiased squared bias is <= 0 at n = {', '.join(unresolved)}" if unresolved else ""


def _edge(s: float, values, s_max: float) -> str:
    """The note of an exponent fit that ended at its grid's edge: 0 where no ``c > 0`` fits (every value <= 0),
    ``s_max`` where the values fall faster than the grid reaches (the last one near 0). Empty inside the grid."""
    if not (values > 0).any():
        return "; no c > 0 fits: every value is <= 0, so s is the grid's 0"
    return f"; s at the grid's end, {s_max:g}: the fall is at least this steep" if s >= s_max else ""
