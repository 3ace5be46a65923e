"""X2's declared claims (kq-nuclear-norm §9 X2): the falsifiers, each claim's reading, and every revision of a
reading with the outcome it had; :mod:`attnlab.experiments.kq_nuclear.x2` runs the experiment and builds the rows.

Spec: kq-nuclear-norm §7.1 (Lemma 4.2), §7.2 (Theorem 4.1 and the l2 contrast of Section 4.2), §7.5 (approximate
KKT at the ``1 / ln mu`` rate).
"""

from __future__ import annotations

import dataclasses

from attnlab.experiments.kq_nuclear import common
from attnlab.verify import Claim, Reading, Revision

__all__ = [
    "A3_HOLDS", "CLOSER_L1", "CLOSER_L2", "DIVERGES", "FALSIFIERS", "KKT_RATE", "L1_OPTIMUM", "L2_OPTIMUM", "PATTERN",
]  # fmt: skip

# the falsifiers patch the models where run_x2 looks them up (attnlab.experiments.kq_nuclear.x2)
KQ_AS_BETA, BETA_AS_KQ = common.kq_as_beta("x2"), common.beta_as_kq("x2")
K_FROZEN, SIZE_SCALED = common.factor_not_trained("x2"), common.step_scaled_by_size("x2", "DiagonalW")
K_HALVED, PENALTY = common.k_gradient_halved("x2"), common.l2_penalty()
K_TILTED, K_PRECONDITIONED, BETA_PRECONDITIONED = (
    common.gradient_preconditioned("x2", "Diagonal", 1.25, 0.8, "-1.25-0.8"),
    common.gradient_preconditioned("x2", "Diagonal", 0.95, 1.05, "-0.95-1.05"),
    common.gradient_preconditioned("x2", "DiagonalW", 0.95, 1.05),
)
FALSIFIERS = (
    K_FROZEN, SIZE_SCALED, K_HALVED, PENALTY, K_TILTED, K_PRECONDITIONED, BETA_PRECONDITIONED, KQ_AS_BETA, BETA_AS_KQ,
)  # fmt: skip
# the contrast of the paper's Section 4.2 is cited from earlier work (GD on W tends to the Frobenius SVM): ours to
# check, not one of this paper's numbered results
_THM41, _SEC42 = "003:Thm4.1", "003:Ext-Sec4.2"
_DATA = ("n", "T", "d", "gap", "seed")
_LIMIT_SIZES = (*_DATA, "omegas", "step", "steps")
_RATE_SIZES = (*_DATA, "omegas", "step", "steps", "record_every")
_LAST = "the last step"
_EACH_OMEGA = (
    "each omega0 of omegas (one row each), initialisation (5), the one scores_equal data set of the config's seed"
)
_BETA_RUN = "beta = diag(W) trained directly from beta(0) = 0, on the same data set"
_FINITE_REL = "(ours: the gap left after a finite arc length; the theorem gives the limit, no rate, §10)"


def _sizes(step: float, steps: int, record_every: int | None = None, **rtol: float) -> dict:
    """Old values of X2's size fields whose quick value differed (the full values never changed)."""
    full = {"n": 2, "T": 3, "d": 8, "gap": 3.0, "seed": 0, "omegas": [1e-3, 1e-1, 1.0], "step": 0.04, "steps": 50000}
    quick = {**full, "step": step, "steps": steps}
    if record_every is not None:
        full, quick = {**full, "record_every": 250}, {**quick, "record_every": record_every}
    for name, (f, q) in rtol.items():
        full, quick = {**full, name: f}, {**quick, name: q}
    return {k: {"full": full[k], "quick": quick[k]} for k in full}


_CI_BUDGET = (
    "the quick size changed for the CI budget with every experiment's (12fefa3: step 0.2 -> 0.3, steps 1500 -> 800); "
    "the full size did not change"
)
_QUICK_1600 = (
    "the quick run went from 800 to 1600 steps (02eeba0) so that omega0 = 1e-3 reaches the l1 zero pattern and "
    "the approximate-KKT rate is tested at the quick size too; the full size did not change"
)
A3_HOLDS = Claim(
    "hypothesis of Theorem 4.1: Assumption 3 at initialisation (5), L(beta(0) = 0) <= the smallest one-mistake loss",
    _THM41,
    f"{common.SOURCE} §5",
    kind="property",
    id="a3-holds",
    reading=Reading(
        "L(W(0)) at W(0) = Diag(xi_k(0) xi_q(0)) = 0 against the smallest one-mistake loss "
        "(data.assumptions.small_initial_loss)",
        "initialisation (no run)",
        "the one scores_equal data set of the config's seed (every omega0: beta(0) = 0 under (5))",
        "L(W(0)) <= that threshold (A3, spec §5)",
        sizes=_DATA,
    ),
)
_L1_READING = Reading(
    "||beta_hat||_1 of the K,Q run, beta_hat = diag(W) / mu(W), against the l1-SVM optimum (LP, "
    "attention_svm(norm='l1-diag'))",
    _LAST,
    _EACH_OMEGA,
    f"relative gap <= config.l1_rtol: 0.03 full, 0.05 quick {_FINITE_REL}",
    sizes=(*_LIMIT_SIZES, "l1_rtol"),
)
_OLD_L1 = "diagonal K,Q (omega0={omega:g}): ||beta_hat||_1 -> l1-SVM optimum (Thm 4.1)"
_LN_MU_READING = Reading(
    "intercept a of the least-squares fit dist = a + b / ln mu, dist = |beta_hat - beta_l1|_inf the max-entry "
    "distance of the K,Q run's beta_hat = diag(W) / mu(W) to the l1-SVM solution (LP, "
    "attention_svm(norm='l1-diag')): the distance's limit as mu -> infinity, read along the roughly 1 / ln mu "
    "approach we derive (spec §7.2 [D])",
    "the second half of the records with mu > 1",
    _EACH_OMEGA,
    "a <= atol, atol = 0.035 (ours: half the l1 solution's smallest nonzero entry, 0.0698, so that a limit "
    "within it keeps the solution's nonzero entries and their signs). One-sided: a distance is >= 0, and where "
    "it falls faster than 1 / ln mu over the window (omega0 = 0.1, 1) the fit extrapolates below 0 (true "
    "a = -0.03 to -0.08), so there a wrong limit up to about atol + 0.08 away would pass",
    {"atol": 0.035},
    _RATE_SIZES,
)
_OLD_LN_MU = (
    "diagonal K,Q (omega0={omega:g}): beta_hat -> the l1-SVM solution (Thm 4.1; limit of the max-entry distance "
    "along a + b / ln mu)"
)
_RATE_DERIVED = (
    "the distance does not fall like 1 / ln mu: along the flow beta = omega0^2 sinh(B^T phi) with phi -> lambda* L, "
    "so an entry j outside the l1 solution's support is beta_hat_j ~ (omega0^2 / mu)^kappa_j, kappa_j = 1 - |g_j| "
    "(g = B^T lambda*, the dual certificate), and the nonzero entries follow them through the active constraints: "
    "a power of mu. The zero entries' local exponents at omega0 = 1e-3 (full) are 0.213 and 0.392, the dual's "
    "0.214 and 0.392. Fitted along 1 / ln mu the faster fall extrapolated below 0 (-0.009, -0.030, -0.062 quick; "
    "-0.0017, -0.030, -0.084 full at omega0 = 1e-3, 0.1, 1), so a limit up to about atol + 0.084 = 0.12 away with "
    "the true run's transient would have passed at omega0 = 1; along the derived rate the true fit is -0.0009, "
    "+0.0045, +0.032 quick and +0.0000, +0.0014, +0.016 full, so such a limit passes only up to 0.003 (quick) / "
    "0.019 (full) away at omega0 = 1. The vertex of xi_k's gradient x diag(linspace(1.25, 0.8)) fails both "
    "(0.127, 0.227, 0.244 quick; 0.113, 0.241, 0.249 full). The run recomputes this reading beside the current row"
)
L1_OPTIMUM = Claim(
    "diagonal K,Q (omega0={omega:g}): beta_hat -> the l1-SVM solution (Thm 4.1; limit of the max-entry distance "
    "along a + b mu^-kappa, kappa from the l1 program's dual)",
    _THM41,
    f"{common.SOURCE} §7.2, §9 X2",
    (K_FROZEN.name, K_TILTED.name, KQ_AS_BETA.name),
    id="l1-optimum",
    reading=Reading(
        "intercept a of the least-squares fit dist = a + b mu^-kappa, dist = |beta_hat - beta_l1|_inf the max-entry "
        "distance of the K,Q run's beta_hat = diag(W) / mu(W) to the l1-SVM solution (LP, "
        "attention_svm(norm='l1-diag')), kappa = 1 - max |g_j| over the solution's zero entries j (entries below "
        "zero_tol of the largest), g = sum_il lambda_il B_il the LP's dual certificate (0.214 on this data): the "
        "distance's limit as mu -> infinity along the rate at which the zero entries fall, (omega0^2 / mu)^kappa "
        "(spec §7.2 [D])",
        "the second half of the records with mu > 1",
        _EACH_OMEGA,
        "a <= atol, atol = 0.035 (ours: half the l1 solution's smallest nonzero entry, 0.0698, so that a limit "
        "within it keeps the solution's nonzero entries and their signs). One-sided: a distance is >= 0; before "
        "the zero entries reach their asymptotic rate the distance falls slower than mu^-kappa (omega0 = 1: local "
        "exponent 0.15-0.17), where the fit overestimates the limit (true a = +0.032 quick, +0.016 full there)",
        {"atol": 0.035, "zero_tol": 1e-2},
        _RATE_SIZES,
    ),
    revisions=(
        Revision(
            _L1_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: 0.8555, 0.8602, 0.8766 for omega0 = 1e-3, 0.1, 1 against 0.852232 (rel 0.05; recomputed at the "
            "old sizes with the current code)",
            "pass: 0.85243, 0.85515, 0.86387 (rel 0.03)",
            claim=_OLD_L1,
            sizes=_sizes(0.2, 1500, l1_rtol=(0.03, 0.05)),
        ),
        Revision(
            _L1_READING,
            "2026-11-25",
            _QUICK_1600,
            "pass: 0.85536, 0.86123, 0.88250 against 0.852232 (rel 0.05)",
            "pass: 0.85243, 0.85515, 0.86387 (rel 0.03)",
            claim=_OLD_L1,
            sizes=_sizes(0.3, 800, l1_rtol=(0.03, 0.05)),
        ),
        Revision(
            _L1_READING,
            "2026-11-28",
            "too weak to fail: the l1 norm of a limit at another vertex of the feasible set is near the optimum. "
            "xi_k's gradient times diag(linspace(1.25, 0.8)) converges to a weighted-l1 solution 0.109-0.121 from "
            "the l1 solution in an entry, and at omega0 = 1e-3 its ||beta_hat||_1 passed (0.8742 quick, 0.8706 full: "
            "2.6% and 2.2% within 5% and 3%; 0.8918 at omega0 = 0.1 quick, within 5%). The distance to the solution "
            "reads the vertex itself: its limit a along a + b / ln mu is -0.009, -0.030, -0.062 quick and -0.0017, "
            "-0.030, -0.084 full for the true runs (omega0 = 1e-3, 0.1, 1) against 0.135, 0.234, 0.237 and 0.122, "
            "0.253, 0.247 under that preconditioner (now the falsifier 'k-gradient-preconditioned-1.25-0.8'). "
            "Milder weights (0.9-1.1, 0.95-1.05) keep the LP's vertex and converge to the true solution (their "
            "multipliers are off: kkt-rate). The run recomputes this reading beside the current row",
            "pass: 0.85511, 0.85826, 0.87319 against 0.852232 (rel 0.05) (55b3e6f)",
            "pass: 0.85243, 0.85515, 0.86387 (rel 0.03) (55b3e6f)",
            claim=_OLD_L1,
            sizes=_sizes(0.3, 1600, l1_rtol=(0.03, 0.05)),
        ),
        Revision(
            _LN_MU_READING,
            "2026-11-28",
            _RATE_DERIVED,
            "pass: -0.009, -0.030, -0.062 for omega0 = 1e-3, 0.1, 1 (<= 0.035) (1e039b5)",
            "pass: -0.0017, -0.030, -0.084 (<= 0.035) (1e039b5)",
            claim=_OLD_LN_MU,
        ),
    ),
)
_CLOSER_L1_READING = Reading(
    "max-entry distances |beta_hat - beta_l1|_inf and |beta_hat - beta_l2|_inf of the K,Q run to the l1- and "
    "l2-SVM solutions",
    _LAST,
    _EACH_OMEGA,
    "to l1 < to l2 strictly (the sign the theorem gives)",
    sizes=_LIMIT_SIZES,
)
_OLD_CLOSER_L1 = "diagonal K,Q (omega0={omega:g}) is closer to the l1 than to the l2 solution"
CLOSER_L1 = Claim(
    "diagonal K,Q (omega0={omega:g}) is closer to the l1 than to the l2 solution (max-entry distance)",
    _THM41,
    f"{common.SOURCE} §7.2",
    (K_FROZEN.name, KQ_AS_BETA.name),
    id="closer-to-l1",
    reading=_CLOSER_L1_READING,
    revisions=(
        Revision(
            _CLOSER_L1_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: to l1 0.0038, 0.0357, 0.118 against to l2 0.357, 0.324, 0.242 (omega0 = 1e-3, 0.1, 1; recomputed "
            "at the old sizes with the current code)",
            "pass: to l1 0.0009, 0.0166, 0.0642 against to l2 0.359, 0.344, 0.296",
            claim=_OLD_CLOSER_L1,
            sizes=_sizes(0.2, 1500),
        ),
        Revision(
            _CLOSER_L1_READING,
            "2026-11-25",
            _QUICK_1600,
            "pass: to l1 0.0070, 0.0391, 0.124 against to l2 0.353, 0.321, 0.236",
            "pass: to l1 0.0009, 0.0166, 0.0642 against to l2 0.359, 0.344, 0.296",
            claim=_OLD_CLOSER_L1,
            sizes=_sizes(0.3, 800),
        ),
    ),
)
_L2_READING = Reading(
    "||beta_hat||_2 of beta trained directly against the diagonal l2-SVM optimum (diagonal_svm(p=2))",
    _LAST,
    _BETA_RUN,
    f"relative gap <= config.l2_rtol: 1e-3 full, 0.002 quick {_FINITE_REL}",
    sizes=(*_LIMIT_SIZES, "l2_rtol"),
)
_L2_OLD_READING = dataclasses.replace(
    _L2_READING, tolerance=f"relative gap <= config.l2_rtol: 1e-3 full, 0.01 quick {_FINITE_REL}"
)
_OLD_L2 = "beta trained directly: ||beta_hat||_2 -> diagonal l2-SVM optimum"
_L2_TIGHTER = (
    "the quick tolerance was tightened from 0.01 to 0.002 (measured 2.8e-4) and the quick run went to 1600 steps "
    "(02eeba0), in the falsifier audit; the full size did not change"
)
_L2_TEXT = "beta trained directly: ||beta_hat||_2 -> diagonal l2-SVM optimum (Section 4.2)"
_L2_LAST = Reading(
    "max-entry distance |beta_hat - beta_l2|_inf of beta trained directly to the diagonal l2-SVM solution "
    "(diagonal_svm(p=2))",
    _LAST,
    _BETA_RUN,
    "<= bound, bound = 1e-3 (ours: the reading resolves a limit 1e-3 from the l2 solution in an entry, 2.6% of "
    "its smallest entry 0.039). beta enters the scores linearly, so the direction's error falls like 1 / ||beta||, "
    "i.e. like 1 / mu along the path (as for GD on separable linear data); the true run's is 0.5 / mu",
    {"bound": 1e-3},
    _LIMIT_SIZES,
)
_L2_LIMIT = (
    "the last value carried the draw's c / mu: at the quick size c is 0.49 at seed 0 and 0.41-1.96 at seeds 2, 3, 6 "
    "and 8 (mu at the end 210-1030), so the row failed there (1.7e-3 to 3.6e-3) while the distance falls exactly as "
    "the reading says, c / mu (the fit's intercept is below 1e-10 at seeds 0, 2, 3 and 6 and 2.2e-4 at seed 8). The "
    "claim is the limit, so the row now reads it along that rate; the weighted-l2 limit of "
    "'beta-gradient-preconditioned' stays 7.7e-3 away. The run recomputes this reading beside the current row"
)
L2_OPTIMUM = Claim(
    "beta trained directly: beta_hat -> the diagonal l2-SVM solution (limit of the max-entry distance along a + b / "
    "mu; Section 4.2)",
    _SEC42,
    f"{common.SOURCE} §7.2, §7.4",
    (SIZE_SCALED.name, BETA_PRECONDITIONED.name, BETA_AS_KQ.name),
    id="l2-optimum",
    reading=Reading(
        "intercept a of the least-squares fit dist = a + b / mu, dist = |beta_hat - beta_l2|_inf the max-entry "
        "distance of beta trained directly to the diagonal l2-SVM solution (diagonal_svm(p=2)): the distance's limit "
        "as mu -> infinity along the rate beta's linear scores give, 1 / ||beta|| ~ 1 / mu (as for GD on separable "
        "linear data)",
        "the second half of the records with mu > 1",
        _BETA_RUN,
        "a <= bound, bound = 1e-3 (ours: a limit 1e-3 from the l2 solution in an entry, 2.6% of its smallest entry "
        "0.039). One-sided: a distance is >= 0",
        {"bound": 1e-3},
        _RATE_SIZES,
    ),
    revisions=(
        Revision(
            _L2_OLD_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: 0.414199 against 0.414013 (rel 0.01; recomputed at the old sizes with the current code)",
            "pass: 0.414041 (rel 1e-3)",
            claim=_OLD_L2,
            sizes=_sizes(0.2, 1500, l2_rtol=(1e-3, 0.01)),
        ),
        Revision(
            _L2_OLD_READING,
            "2026-11-25",
            _L2_TIGHTER,
            "pass: 0.414245 against 0.414013 (rel 0.01)",
            "pass: 0.414041 (rel 1e-3)",
            claim=_OLD_L2,
            sizes=_sizes(0.3, 800, l2_rtol=(1e-3, 0.01)),
        ),
        Revision(
            _L2_READING,
            "2026-11-28",
            "too weak to fail: the norm of a limit near the l2 solution is the optimum to second order in its "
            "distance. beta's gradient times diag(linspace(0.95, 1.05)) converges to a weighted-l2 solution 7.7e-3 "
            "from the l2 solution in an entry, and its ||beta_hat||_2 passed (0.414269: relative gap 6.2e-4 <= 2e-3 "
            "quick; 4.1e-4 <= 1e-3 full). The max-entry distance reads the direction at first order: true 4.3e-4 "
            "quick and 1.0e-4 full, the preconditioned run 7.7e-3 at both (now the falsifier "
            "'beta-gradient-preconditioned'). The run recomputes this reading beside the current row",
            "pass: 0.414129 against 0.414013 (rel 0.002) (55b3e6f)",
            "pass: 0.414041 (rel 1e-3) (55b3e6f)",
            claim=_L2_TEXT,
            sizes=_sizes(0.3, 1600, l2_rtol=(1e-3, 0.002)),
        ),
        Revision(
            _L2_LAST,
            "2026-11-29",
            _L2_LIMIT,
            "pass: 4.27e-4 (<= 1e-3) (a7d89bf)",
            "pass: 1.0e-4 (<= 1e-3) (a7d89bf)",
            claim="beta trained directly: beta_hat -> the diagonal l2-SVM solution (max-entry distance; Section 4.2)",
        ),
    ),
)
_CLOSER_L2_READING = Reading(
    "max-entry distances of beta trained directly to the l2- and l1-SVM solutions",
    _LAST,
    _BETA_RUN,
    "to l2 < to l1 strictly (the sign the contrast gives)",
    sizes=_LIMIT_SIZES,
)
_OLD_CLOSER_L2 = "beta trained directly is closer to the l2 than to the l1 solution"
CLOSER_L2 = Claim(
    "beta trained directly is closer to the l2 than to the l1 solution (max-entry distance; Section 4.2)",
    _SEC42,
    f"{common.SOURCE} §7.2",
    (SIZE_SCALED.name, BETA_AS_KQ.name),
    id="closer-to-l2",
    reading=_CLOSER_L2_READING,
    revisions=(
        Revision(
            _CLOSER_L2_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: to l2 0.00068 against to l1 0.360 (recomputed at the old sizes with the current code)",
            "pass: to l2 0.00010 against to l1 0.360",
            claim=_OLD_CLOSER_L2,
            sizes=_sizes(0.2, 1500),
        ),
        Revision(
            _CLOSER_L2_READING,
            "2026-11-25",
            _QUICK_1600,
            "pass: to l2 0.00085 against to l1 0.360",
            "pass: to l2 0.00010 against to l1 0.360",
            claim=_OLD_CLOSER_L2,
            sizes=_sizes(0.3, 800),
        ),
    ),
)
DIVERGES = Claim(
    "diagonal K,Q (omega0={omega:g}): ||beta(t)|| -> infinity, at least like ln t (Lemma 4.2; exponent of ||beta|| "
    "against ln t over the second half of the path)",
    "003:Lem4.2",
    f"{common.SOURCE} §3.1, §7.1",
    PENALTY.name,
    id="beta-diverges",
    reading=Reading(
        "fitted exponent a of ||beta(t)||_2 ~ c (ln t)^a (least squares of log ||beta|| on log ln t): beta = "
        "diag(W) of the K,Q run, t the flow time the NGD path's clock accumulates (dt = step / ||grad L||)",
        "the second half of the recorded steps",
        _EACH_OMEGA,
        "a >= 1 - tol, tol = 0.1: the lemma says ||beta|| -> infinity, read at the rate we derive (the loss gap "
        "falls like 1 / t, so mu and ||beta|| grow like ln t: a = 1, spec §7.1); tol covers the ln ln t correction "
        "over the window; a path that stalls at a finite minimiser has a -> 0",
        {"tol": 0.1, "side": "at_least"},
        _RATE_SIZES,
    ),
    revisions=(
        Revision(
            Reading(
                "fitted exponent a of ||beta(t)||_2 ~ c (ln t)^a (least squares of log ||beta|| on log ln t): beta = "
                "diag(W) of the K,Q run, t the flow time the NGD path's clock accumulates (dt = step / ||grad L||)",
                "the second half of the recorded steps",
                _EACH_OMEGA,
                "a >= 1 - tol, tol = 0.1: the lemma says ||beta|| -> infinity, read at the rate we derive (the loss "
                "gap falls like 1 / t, so mu and ||beta|| grow like ln t: a = 1, spec §7.1); tol covers the ln ln t "
                "correction over the window; a path that stalls at a finite minimiser has a -> 0",
                {"tol": 0.1},
                _RATE_SIZES,
            ),
            "2026-11-29",
            "the tolerance's text states a one-sided test (a >= 1 - tol), which the row ran, but its params did not "
            "declare the side; the row methods now refuse a side the reading does not declare (a one-sided test is "
            "looser than the two-sided one), so the params say side = at_least. The test and its outcome are the same",
            "pass: 1.00079, 1.00809, 1.02161 for omega0 = 1e-3, 0.1, 1 (>= 0.9)",
            "pass: 1.00026, 1.00535, 1.01638 (>= 0.9)",
        ),
    ),
)
_RESIDUAL = (
    "residual = max-entry distance of g = sum_il lambda_il B_il to the l1 subdifferential at beta_hat (entries "
    "below zero_tol of the largest count as zero), lambda = phi / ln mu (phi integrated along the path)"
)
_SETTLED = (
    "the records with mu > 1 from the arrival of the l1 solution's zero pattern on (held to the last record); the "
    "second half of them"
)
PATTERN = Claim(
    "hypothesis of the rate row: beta_hat has the l1 solution's zero pattern over >= 5 records at the end "
    "(the residual's 1 / ln mu rate is measurable only then)",
    _THM41,
    f"{common.SOURCE} §7.5",
    kind="property",
    id="kkt-hypothesis",
    reading=Reading(
        "number of omega0 whose K,Q run has at least min_records records in the second half of the records that "
        "hold the l1 solution's zero pattern (entries below zero_tol of the largest) to the end",
        _SETTLED,
        _EACH_OMEGA,
        ">= 1 omega0, so that the rate row tests something",
        {"zero_tol": 1e-2, "min_records": 5},
        _RATE_SIZES,
    ),
)
_KKT_SLOPE = Reading(
    f"fitted slope of log residual on log ln mu; {_RESIDUAL}",
    _SETTLED,
    "each omega0 where that window has >= min_records records (the hypothesis row); all of them must pass",
    "-1 +- tol at each, tol = 0.05 (ours: the lower-order terms of O(1/ln mu) over the fitted range of ln mu); "
    "both sides, as check_slope's default computes it, though the row's text says 'slope <= -0.95'",
    {"tol": 0.05, "zero_tol": 1e-2, "min_records": 5},
    _RATE_SIZES,
)
_KKT_LOOSE = Reading(
    f"intercept a of the least-squares fit residual = a + b / ln mu: the residual's limit as mu -> infinity, "
    f"read along the O(1 / ln mu) form the proof gives; {_RESIDUAL}",
    _SETTLED,
    "each omega0 where that window has >= min_records records (the hypothesis row); all of them must pass",
    "|a| <= atol at each, atol = 0.05 (ours: 5% of the unit entries sign(beta_j) that the l1 subgradient must "
    "match; a multiplier estimate off by a constant factor c leaves a = |c - 1| on the support)",
    {"atol": 0.05, "zero_tol": 1e-2, "min_records": 5},
    _RATE_SIZES,
)
_KKT_FIT = (
    "|a| <= atol at each, atol = 0.005 (ours: a multiplier estimate off by a constant factor c leaves a = |c - 1| on "
    "the support, so the reading resolves c off by 0.5%; the fit's own error is below it: "
)
_KKT_STALE, _KKT_ONE_INSTALL, _KKT_READING = (
    dataclasses.replace(
        _KKT_LOOSE, tolerance=_KKT_FIT + text, params={"atol": 0.005, "zero_tol": 1e-2, "min_records": 5}
    )
    for text in (
        "the true runs' a is 6.8e-4 at the quick size, whose NGD steps integrate phi coarsely, and 7.2e-5 at the full "
        "size)",
        "the true runs' a is 2.0e-3 at the quick size, whose NGD steps integrate phi coarsely (a margin of 3e-3, 2.5 "
        "times below atol), and 4.5e-5 at the full size)",
        "over the installs we ran (cvxpy and Clarabel versions) the true runs' a has been 6.8e-4 to 2.0e-3 at the "
        "quick size, whose NGD steps integrate phi coarsely (a margin of at least 3e-3, 2.5 times below atol), and "
        "4.5e-5 to 7.2e-5 at the full size; the row's measured value is this run's)",
    )
)
_OLD_KKT_V5 = (
    "approx. KKT: the stationarity residual of lambda = phi / ln mu -> 0 at least like 1 / ln mu (slope against "
    "ln mu, second half of the records with the l1 zero pattern) for every omega0 where the hypothesis holds"
)
_OLD_KKT_V1 = "approximate KKT (omega0={omega:g}): stationarity residual of lambda = phi / ln mu decreases"
_KKT_V1 = Reading(
    f"{_RESIDUAL}, at the last record against the first record where it is defined (mu > 1)",
    "the first and the last record with mu > 1",
    _EACH_OMEGA,
    "last < first (a decrease; the row's text said '-> 0 like 1/ln mu')",
    {"zero_tol": 1e-2},
    _RATE_SIZES,
)
_OLD_KKT_V3 = (
    "approx. KKT (omega0={omega:g}): stationarity residual of lambda = phi / ln mu -> 0 at least like 1 / ln mu "
    "(slope against ln mu, second half)"
)
_KKT_V3 = Reading(
    f"fitted slope of log residual on log ln mu; {_RESIDUAL}",
    "the second half of the records with mu > 1",
    _EACH_OMEGA,
    "slope <= -1 + 0.05 (ours: the lower-order terms of O(1/ln mu) over the fitted range of ln mu)",
    {"tol": 0.05, "zero_tol": 1e-2},
    _RATE_SIZES,
)
_OLD_KKT_V4 = (
    "approx. KKT (omega0={omega:g}): stationarity residual of lambda = phi / ln mu -> 0 at least like 1 / ln mu "
    "(slope against ln mu, second half of the records with the l1 zero pattern)"
)
_KKT_V4 = Reading(
    f"fitted slope of log residual on log ln mu; {_RESIDUAL}",
    _SETTLED,
    "each omega0 where that window has >= 5 records; the others get a note and no row",
    "slope <= -1 + 0.05 (ours: the lower-order terms of O(1/ln mu) over the fitted range of ln mu)",
    {"tol": 0.05, "zero_tol": 1e-2, "min_records": 5},
    _RATE_SIZES,
)
_KKT_V1_FULL = "pass at each omega0: 15.2 -> 4.36, 1.17 -> 0.352, 0.844 -> 0.168 (omega0 = 1e-3, 0.1, 1)"
KKT_RATE = Claim(
    "approx. KKT: the stationarity residual of lambda = phi / ln mu -> 0 (its fit a + b / ln mu over the second "
    "half of the records with the l1 zero pattern has a = 0) for every omega0 where the hypothesis holds",
    _THM41,
    f"{common.SOURCE} §7.5",
    (K_HALVED.name, K_PRECONDITIONED.name),
    id="kkt-rate",
    reading=_KKT_READING,
    revisions=(
        Revision(
            _KKT_V1,
            "2026-11-22",
            _CI_BUDGET,
            "pass at each omega0: 68.0 -> 26.6, 1.39 -> 0.560, 0.845 -> 0.397 (omega0 = 1e-3, 0.1, 1; recomputed at "
            "the old sizes with the current code)",
            _KKT_V1_FULL,
            claim=_OLD_KKT_V1,
            sizes=_sizes(0.2, 1500, 50),
        ),
        Revision(
            _KKT_V1,
            "2026-11-25",
            "'decreases' says nothing about the limit the lemma needs (a residual that stalls at 0.4 decreases "
            "too): replaced by the 1 / ln mu rate the proof gives, in the checks review (b0fb727); the docs say the "
            "decrease had itself replaced a small-value check that failed before the first commit (not in git)",
            "pass at each omega0: 97.3 -> 41.5, 1.55 -> 0.687, 0.841 -> 0.396",
            _KKT_V1_FULL,
            claim=_OLD_KKT_V1,
            sizes=_sizes(0.3, 800, 40),
        ),
        Revision(
            _KKT_V3,
            "2026-11-25",
            "failed at full size for omega0 = 1 (slope -0.05): before the l1 zero pattern arrives the residual is a "
            "plateau of an entry's sign mismatch, not the multipliers; the window moved to the records that hold "
            "the pattern (9237f3b), re-read after this failure",
            "pass: slopes -1.0001, -0.9905, -3.11 (omega0 = 1e-3, 0.1, 1)",
            "fail: slopes -0.99998, -0.981, -0.052 (omega0 = 1: a plateau)",
            claim=_OLD_KKT_V3,
            sizes=_sizes(0.3, 800, 40),
        ),
        Revision(
            _KKT_V4,
            "2026-11-25",
            "an omega0 without the pattern left a note and no row, so the quick run (800 steps, the pattern at no "
            "omega0) tested nothing; in the falsifier audit (02eeba0) the hypothesis became its own property row, "
            "one rate row covers the omega0 where it holds, and the quick run went to 1600 steps",
            "vacuous: no row (the pattern at no omega0 after 800 steps; three notes)",
            "pass: omega0 = 1e-3 slope -0.99998 over 100 records; notes for 0.1 and 1 (pattern not reached)",
            claim=_OLD_KKT_V4,
            sizes=_sizes(0.3, 800, 40),
        ),
        Revision(
            _KKT_SLOPE,
            "2026-11-28",
            "no small wrong mechanism failed it at the quick size. With K's gradient halved the flow is the "
            "balanced flow of a rescaled product, so phi / ln mu tends to sqrt(2) times the KKT multipliers and the "
            "residual to sqrt(2) - 1 = 0.414, not 0; yet its slope over the quick window is -0.989 (passes), "
            "because there the residual is dominated by its b / ln mu term (b ~ 400 at ln mu ~ 10.5). The theorem's "
            "claim is the limit (the multipliers become a KKT certificate), so the new reading extrapolates the fit "
            "a + b / ln mu to a; the slope is kept beside it. The row also computed -1 +- 0.05 on both sides while "
            "its text said '<= -0.95'",
            "pass: omega0 = 1e-3 slope -1.000 over 10 records (and -0.989 with K's gradient halved)",
            "pass: omega0 = 1e-3 slope -0.99998 over 100 records",
            claim=_OLD_KKT_V5,
        ),
        Revision(
            _KKT_LOOSE,
            "2026-11-28",
            "too wide to fail a mild wrong mechanism: atol 0.05 is 70 times the true quick run's a (6.8e-4) and 700 "
            "times the full run's (7.2e-5); xi_k's gradient times diag(linspace(0.95, 1.05)) keeps the l1 vertex "
            "but its multipliers phi / ln mu are off, and its a (0.029 quick, 0.026 full) passed. atol is now "
            "0.005, from the limit's meaning (a = |c - 1| for multipliers off by a factor c) and the fit's accuracy "
            "at our sizes; the preconditioner is now the falsifier 'k-gradient-preconditioned-0.95-1.05'. The run "
            "recomputes this reading beside the current row",
            "pass: omega0 = 1e-3 a = 6.8e-4 (b = 395, 10 records) (55b3e6f)",
            "pass: omega0 = 1e-3 a = 7.2e-5 (b = 60, 100 records) (55b3e6f)",
        ),
        Revision(
            _KKT_STALE,
            "2026-11-29",
            "its tolerance's justification quoted the true runs' a of 55b3e6f (6.8e-4 quick, 7.2e-5 full); the code "
            "since gives 2.0e-3 quick and 4.5e-5 full (audit, 2026-11-29), so the text now says so, with the quick "
            "margin. The statistic, window, subset and atol are unchanged",
            "pass: omega0 = 1e-3 a = 0.002 (b = 395, 10 records) (8a9b237)",
            "pass: omega0 = 1e-3 a = 4.49e-05 (b = 60, 100 records) (8a9b237)",
        ),
        Revision(
            _KKT_ONE_INSTALL,
            "2026-11-30",
            "its text quoted one install's fits (2.0e-3, 4.5e-5 at 8a9b237); the same code with cvxpy 1.9.3, "
            "Clarabel 0.11.1 gives 55b3e6f's 6.8e-4, 7.2e-5: the value moves with the solvers, so the text gives "
            "the range seen and the measured column the value. Statistic, window, subset and atol unchanged",
            "pass: omega0 = 1e-3 a = 6.8e-4 (b = 395, 10 records) (b958a2a)",
            "pass: omega0 = 1e-3 a = 7.2e-05 (b = 60, 100 records) (d2ec801)",
        ),
    ),
)
