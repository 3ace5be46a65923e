"""Experiments of preconditioned-regression (Goel, Soltanolkotabi, Bartlett 2026): softmax attention fitted to
in-context linear regression with structure-aware preconditioned, regularized GD from a spectral start.

Spec: docs/theory/preconditioned-regression.md. Registered experiments, one module each:

- ``regression.fig1``, ``regression.fig2`` (:mod:`.figures`): the paper's Figures 1 and 2 and its remarks on them;
- ``regression.theory`` (:mod:`.theory`): the table of spec §8 as declared checks, each with a falsifier;
- ``regression.scaling`` (:mod:`.scaling`): population excess loss against n and T (Theorem 2);
- ``regression.context`` (:mod:`.context`): the lemmas of Appendix D, moments of one query's context given it.

Every number of the paper's experiments was lost (spec §9.2): the defaults listed in each config's ``OURS`` are
our proposals, and the reference numbers of spec §9.3 come from the spec's reconstruction, not from the paper.
"""

from attnlab.experiments.coverage import register_results
from attnlab.experiments.regression import context, figures, scaling, theory
from attnlab.experiments.regression.common import TheoryConfig
from attnlab.experiments.regression.context import ContextConfig
from attnlab.experiments.regression.figures import (
    METHODS,
    REFERENCE_GAPS,
    FigureOneConfig,
    FigureTwoConfig,
    Method,
)
from attnlab.experiments.regression.scaling import ScalingConfig
from attnlab.verify import PaperResult

__all__ = [
    "ContextConfig",
    "METHODS",
    "REFERENCE_GAPS",
    "FigureOneConfig",
    "FigureTwoConfig",
    "Method",
    "ScalingConfig",
    "TheoryConfig",
    "context",
    "figures",
    "scaling",
    "theory",
]

_LOST = "statement lost in extraction (what survives: the header{proof}); {use}; no quantity to measure"

register_results(
    "preconditioned-regression",
    (
        PaperResult(
            "000:Thm1",
            "closed form of L; minima on M; one-point strong convexity and smoothness",
            "checked",
            "part (3)'s scaling across instances: alpha ~ sigma_d is read at two instances (t13-sigma-scaling); "
            "beta ~ sigma_1 only at one (t13-smoothness, beta = 4 sigma_1 derived for it)",
        ),
        PaperResult("000:Lem1", "symmetry at the projection onto M; singular values of its factors"),
        PaperResult(
            "000:Thm2",
            "data-compute scaling law: L(theta_T) - L_irr <= C1 (1 - c eta)^T + O(1/n)",
            "checked",
            "its rows start at 0.3 rho from M, inside the theorem's start region dist <= rho (property row "
            "near-m-inside-rho; 3.5-5 rho before 2026-11-30, audit fid0 #2); eta = 0.5 = 0.5 / beta, the theorem's "
            "c' in eta <= c' / beta being unstated",
        ),
        PaperResult("000:Lem2", "descent lemma f - f* <= (beta / 2) dist^2"),
        PaperResult(
            "000:Lem3",
            "good initialization: the spectral start is close to M and Sigma_hat^-1 to Sigma^-1",
            "checked",
            "the event 'within a fraction of rho' is read with the fraction 1/2 (lost; ours) for the start only; the "
            "second event is read through its n^-1/2 rate, its bound being lost",
        ),
        PaperResult(
            "000:Lem4", "one-point convexity and smoothness of the empirical objective, up to its gradient bias"
        ),
        PaperResult(
            "000:Thm3",
            "expected empirical gradient of f_hat within O(1/n) of grad f near M",
            "checked",
            "read at a point 0.3 rho from M, inside the theorem's region (property row near-m-inside-rho; 4.2 rho "
            "before 2026-11-30, audit fid0 #2)",
        ),
        PaperResult("000:Lem5", "the spectral start's distance to M bounded by the estimation errors"),
        PaperResult("000:Lem6", "OLS error of the whitened estimate ~ n^-1/2 with high probability"),
        PaperResult(
            "000:Lem7",
            "finite exponential moments of the logits within rho of M under A3",
            "unit",
            "tests/regression/test_integrability.py (the closed-form moments against Monte Carlo at Q = 0.08 randn, "
            "not at theta near M); no row reads it. The multiplier matters: on M ||C||_op = sigma_1^{1/2} = 0.5 "
            "(c3 = 0.25), so the cross-logit moment E exp(c x'^T Q x) is finite for c < 2 only; c = 2 sits on the "
            "boundary (finite at 24 of 50 theta_R by round-off, at none for c = 2.1); at the bias point (0.3 rho off "
            "M) it is finite for c < 1.98, at the point used before 2026-11-30 (4.2 rho off M) only for c < 1.47 "
            "(audit fid0 #6)",
        ),
        PaperResult(
            "000:Thm4",
            "expected empirical loss gradient within O(1/n) of the population gradient",
            "checked",
            "read at a point 0.3 rho from M, inside the theorem's region (property row near-m-inside-rho; 4.2 rho "
            "before 2026-11-30, audit fid0 #2)",
        ),
        PaperResult(
            "000:Thm5",
            "expected empirical regularizer gradient within O(1/n) of grad R",
            "checked",
            "read at a point 0.3 rho from M, inside the theorem's region (property row near-m-inside-rho; 4.2 rho "
            "before 2026-11-30, audit fid0 #2); there a 10% slip of grad R_hat passes (its floor 0.01 ||grad R||^2 "
            "= 3.1e-5 is below the true squared bias at n = 800)",
        ),
        PaperResult(
            "000:Lem8",
            "gradients of the softmax weights and context mean with respect to the covariates",
            "unit",
            "tests/regression/test_context.py (mean_jacobian, the query's own term included, against autograd of "
            "the context mean written out in the test)",
        ),
        PaperResult("000:Lem9", "second moment of a softmax weight given the query <= C/n^2"),
        PaperResult("000:Lem10", "conditional variances of softmax-weight statistics <= C/n"),
        PaperResult(
            "000:Lem11",
            "mean-square deviation of the context mean mu_i from Sigma Q x_i <= C/n",
            "checked",
            "the current row reads the limit only (no constant in the conditional bias); the C/n rate of the "
            "deviation only by its kept slope reading (revision 1), at a point 0.3 rho off M",
        ),
        PaperResult(
            "000:Lem12",
            "statement lost",
            "not checkable",
            _LOST.format(proof=" and an empty proof", use="nothing cites it"),
        ),
        PaperResult(
            "000:Lem13",
            "statement lost (used twice in Theorem 4's proof)",
            "not checkable",
            _LOST.format(
                proof=" and an empty proof",
                use="Theorem 4's proof uses it for the V-gradient gap and the second term of (17) without saying "
                "what it bounds",
            ),
        ),
        PaperResult("000:Lem14", "conditional variance of the context mean mu_i <= C/n"),
        PaperResult(
            "000:Lem15",
            "mean-square deviation of mu_i mu_i^T (section D.3's statistic) <= C/n",
            "checked",
            "the current row reads the limit only (no constant in the conditional bias); the C/n rate of the "
            "deviation only by its kept slope reading (revision 1), at a point 0.3 rho off M",
        ),
        PaperResult(
            "000:Lem16",
            "statement lost (Lemma 11 and Hoelder bound two terms)",
            "not checkable",
            _LOST.format(
                proof=" and a two-line proof", use="the proof does not name the terms it bounds; nothing cites it"
            ),
        ),
        PaperResult(
            "000:Lem17",
            "statement lost",
            "not checkable",
            _LOST.format(proof="", use="no proof is printed and nothing cites it"),
        ),
        PaperResult(
            "000:Lem18",
            "statement lost (used for the first term of the V-gradient gap)",
            "not checkable",
            _LOST.format(proof=" and an empty proof", use="Theorem 4's proof uses it without saying what it bounds"),
        ),
        PaperResult("000:Lem19", "conditional variance of mu_i mu_i^T (section D.3's statistic) <= C/n"),
        PaperResult("000:Lem20", "mean-square deviation of the weighted context covariance from Sigma <= C/n"),
        PaperResult(
            "000:Lem21",
            "statement lost",
            "not checkable",
            _LOST.format(proof=" and an empty proof", use="nothing cites it"),
        ),
        PaperResult(
            "000:Lem22",
            "statement lost (an operator-norm bound for the third term of (17))",
            "not checkable",
            _LOST.format(proof=" and an empty proof", use="Theorem 4's proof uses it through an operator norm only"),
        ),
        PaperResult("000:Lem23", "conditional variance of the weighted context covariance <= C/n"),
    ),
)
