"""Experiments of preconditioned-regression (Goel, Soltanolkotabi, Bartlett 2026): softmax attention fitted to
in-context linear regression with structure-aware preconditioned, regularized GD from a spectral start.

Spec: docs/theory/preconditioned-regression.md. Registered experiments, one module each:

- ``regression.fig1``, ``regression.fig2`` (:mod:`.figures`): the paper's Figures 1 and 2 and its remarks on them;
- ``regression.theory`` (:mod:`.theory`): the table of spec §8 as declared checks, each with a falsifier;
- ``regression.scaling`` (:mod:`.scaling`): population excess loss against n and T (Theorem 2).

Every number of the paper's experiments was lost (spec §9.2): the defaults listed in each config's ``OURS`` are
our proposals, and the reference numbers of spec §9.3 come from the spec's reconstruction, not from the paper.
"""

from attnlab.experiments.coverage import register_results
from attnlab.experiments.regression import figures, scaling, theory
from attnlab.experiments.regression.common import TheoryConfig
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
    "METHODS",
    "REFERENCE_GAPS",
    "FigureOneConfig",
    "FigureTwoConfig",
    "Method",
    "ScalingConfig",
    "TheoryConfig",
    "figures",
    "scaling",
    "theory",
]

_PROOF_STEP = "a step of Theorem 4's proof, a bound whose constants the extraction lost; Theorem 4 is checked"

register_results(
    "preconditioned-regression",
    (
        PaperResult("000:Thm1", "closed form of L; minima on M; one-point strong convexity and smoothness"),
        PaperResult("000:Thm2", "data-compute scaling law: L(theta_T) - L_irr <= C1 (1 - c eta)^T + O(1/n)"),
        PaperResult("000:Thm3", "expected empirical gradient of f_hat within O(1/n) of grad f near M"),
        PaperResult("000:Thm4", "expected empirical loss gradient within O(1/n) of the population gradient"),
        PaperResult("000:Thm5", "expected empirical regularizer gradient within O(1/n) of grad R"),
        PaperResult("000:Lem1", "symmetry at the projection onto M; singular values of its factors"),
        PaperResult("000:Lem2", "descent lemma f - f* <= (beta / 2) dist^2"),
        PaperResult("000:Lem3", "the spectral start is close to M with high probability"),
        PaperResult(
            "000:Lem4",
            "one-point convexity and smoothness of the empirical objective, up to its gradient bias",
            "not checkable",
            "needs E grad f_hat_n at many points per radius (a Monte-Carlo mean each), beyond the reproduction's "
            "budget; its two ingredients, T1.3 and Theorem 3, are checked",
        ),
        PaperResult(
            "000:Lem5",
            "the spectral start's distance to M bounded by the estimation errors",
            "not checkable",
            "a deterministic perturbation bound with lost constants; its consequence, Lemma 3's n^-1/2, is checked",
        ),
        PaperResult("000:Lem6", "OLS error of the whitened estimate ~ n^-1/2 with high probability"),
        PaperResult(
            "000:Lem7",
            "finite exponential moments of the logits within rho of M under A3",
            "unit",
            "tests/regression/test_integrability.py (the closed-form moments against Monte Carlo); our instance is "
            "built inside the region, so an experiment row would hold by construction",
        ),
        PaperResult(
            "000:Lem8",
            "gradients of the softmax predictor",
            "unit",
            "tests/regression/test_empirical.py (the gradient against finite differences and a plain loop)",
        ),
        *(PaperResult(f"000:Lem{i}", f"Lemma {i} of Appendix D", "not checkable", _PROOF_STEP) for i in range(9, 24)),
    ),
)
