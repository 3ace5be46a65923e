"""Experiments of the l_p mirror-descent paper: E1 (the q x p grid), E2 (one path), E3 (joint), RegPath, growth.

Spec: docs/theory/mirror-descent-lp.md §9 E1-E3 (settings of the official code), §8 (predictions), §4 (l_p-AttGD,
l_p-JointGD and the norm-growth inequality), §5 (l_p-AttSVM, l_p head SVM), §6 (data generators). Importing the
package registers the five experiments and the paper's checkable results (its coverage table).
"""

from attnlab.experiments.coverage import register_results
from attnlab.experiments.mirror_descent.bounds import BoundsConfig, run_bounds
from attnlab.experiments.mirror_descent.cone import ConeConfig, run_cone
from attnlab.experiments.mirror_descent.e1 import E1Config, run_e1
from attnlab.experiments.mirror_descent.e2 import E2Config, run_e2
from attnlab.experiments.mirror_descent.e3 import E3Config, run_e3
from attnlab.experiments.mirror_descent.growth import GrowthConfig, run_growth
from attnlab.experiments.mirror_descent.regpath import RegPathConfig, run_regpath
from attnlab.verify import PaperResult

__all__ = [
    "BoundsConfig",
    "ConeConfig",
    "E1Config",
    "E2Config",
    "E3Config",
    "GrowthConfig",
    "RegPathConfig",
    "run_bounds",
    "run_cone",
    "run_e1",
    "run_e2",
    "run_e3",
    "run_growth",
    "run_regpath",
]

# the growth rows' caveat (audit of 2026-11-29): docs/experiments/mirror-descent.md, "What these rows cannot tell"
_PATH_ONLY = (
    "read along plain-MD paths started at 2 ||W^mm||_p, below the cone experiment's R_0.01 = 32 ||W^mm||_p: the row "
    "passes with the mirror map's exponent off by 0.1, so it does not tell the l_p-AttSVM from its neighbours'"
)
_LOST = "its formula was lost in extraction (only the proof's words survive), so there is no statement to measure"
register_results(
    "mirror-descent-lp",
    (
        PaperResult(
            "002:Lem4",
            "||W_k||_p grows by a bounded amount per step of plain l_p-AttGD (statement rebuilt from its proof)",
            "unit",
            "its measurable core, ||W_(k+1)||^(p-1) <= ||W_k||^(p-1) + eta ||grad L||_q (Hoelder on the dual step), "
            "holds for any gradient: tests/optim/test_mirror_descent.py::"
            "test_norm_growth_bounds_hold_for_any_gradient_and_are_equalities_along_the_mirror_map and "
            "test_plain_md_norm_growth_stays_within_the_spec_bounds (the optimizer's step against the bound); the "
            "lemma's data-dependent constant (Lemma 18's) is not printed",
        ),
        PaperResult(
            "002:Lem12",
            "l_p and l_2 norms of a matrix with m entries compare within m^(1/p - 1/2)",
            "unit",
            "tests/test_metrics.py::test_lp_and_l2_norms_of_a_matrix_lie_in_lemma_12s_interval_with_both_ends_attained "
            "(1000 random, 1-sparse and constant matrices; both ends attained)",
        ),
        PaperResult("002:Lem13", "D_psi(A, B) >= a p-dependent power of ||A - B||_p on the unit l_p sphere"),
        PaperResult("002:Lem14", "a two-sided auxiliary scalar inequality", "not checkable", _LOST),
        PaperResult(
            "002:Lem15", "an auxiliary scalar inequality, one form for p >= 2, one for p < 2", "not checkable", _LOST
        ),
        PaperResult("002:Lem16", "the risk lies between two data-dependent constants"),
        PaperResult(
            "002:Lem17",
            "the gradient of the risk (the formula l_p-AttGD uses)",
            "unit",
            "tests/models/test_functional.py::test_gradients_match_autograd_at_random_points and "
            "test_gradient_matches_finite_differences_at_saturated_point",
        ),
        PaperResult("002:Lem18", "the gradient is bounded by a data-dependent constant, uniformly in W"),
        PaperResult(
            "002:Lem19",
            "in the cone, the normalised score gaps stay near the SVM's (12a-c)",
            note="(12a) only, and it holds around the SVM of another exponent too; (12b-c) fails our cone width 1e-2",
        ),
        PaperResult("002:Lem20", "in the cone of a locally optimal selection at large norm, <-grad L(W), W^mm> > 0"),
        PaperResult(
            "002:Lem21", "in the cone at large norm, <-grad L, W/||W||_p> <= (1 + eps) <-grad L, W^mm/||W^mm||_p>"
        ),
        PaperResult(
            "002:Lem22",
            "||W_k||^(p-1) + eta <-grad L, W_k>/||W_k|| <= ||W_(k+1)||^(p-1) under plain l_p-AttGD",
            "unit",
            "convexity of the mirror step: it holds for any gradient, so it checks our MD update: "
            "tests/optim/test_mirror_descent.py::"
            "test_norm_growth_bounds_hold_for_any_gradient_and_are_equalities_along_the_mirror_map and "
            "test_plain_md_norm_growth_stays_within_the_spec_bounds (and the property row of mirror-descent.e1)",
        ),
        PaperResult(
            "002:Lem24",
            "for a small step, the one-step inequality (24) of l_p-AttGD (its core: the loss falls)",
            note="it checks descent only: any descent method at a small step passes it",
        ),
        PaperResult(
            "002:Lem25",
            "the lemma that finishes (25) in Lemma 27's proof",
            "not checkable",
            "its header and statement are absent from the seed; it is only cited by number",
        ),
        PaperResult(
            "002:Lem27",
            "in the cone, a small step satisfies (25) (read: a per-step correlation increment)",
            note=f"{_PATH_ONLY}; eps = 1 was chosen after the runs' transient had been seen",
        ),
        PaperResult(
            "002:Lem28",
            "started in the thin cone, l_p-AttGD stays in the wide cone",
            note=f"{_PATH_ONLY}; the width 0.1 was chosen after the runs' transient had been seen",
        ),
        PaperResult(
            "002:Lem29",
            "from the thin cone, the directional error to W^mm is bounded by (28), falling with the norm",
            note=_PATH_ONLY,
        ),
        PaperResult("002:Lem30", "from the thin cone, ||W_k||_p grows at least logarithmically in k", note=_PATH_ONLY),
    ),
)
