"""T1.1 and Theorems 3-5 as declared rows: the finite-context biases of :mod:`attnlab.regression.finite_context`
(``E L_n - L`` and the squared biases of the expected empirical gradients) at one point off M, and their fits in n.

Spec: docs/theory/preconditioned-regression.md §3.1-3.4, §8 (T1.1, T3-T5).
"""

from __future__ import annotations

import scipy.stats

from attnlab.experiments.regression.common import SOURCE, TheoryConfig
from attnlab.regression import RegressionProblem, perturbed_manifold_point
from attnlab.regression.finite_context import bias_expansion, bias_table, profile_exponent
from attnlab.verify import Claim, RunContext, fit_weighted_slope

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


def finite_context_rows(config: TheoryConfig, problem: RegressionProblem, ctx: RunContext):
    """T1.1, Theorems 4 and 5 at one point off M: rows and the table of biases per n."""
    V, Q = perturbed_manifold_point(problem, 1, config.bias_scale, config.seed)
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
        slope, slope_se = fit_weighted_slope(ns, table[value], table[se])
        rows.append(
            claim.less(
                slope,
                -1.0 + 3 * slope_se,
                spread=f"C/n means slope <= -1; + 3 SE of the weighted slope ({slope_se:.3g}, Monte-Carlo SEs "
                f"of the debiased squared bias)",
            )
        )
    return rows, table
