"""Experiments of the key/query nuclear-norm paper: X1-X5 (the paper itself has none), one module each (X2's claims
in a module of their own, ``x2_claims``).

Spec: docs/theory/kq-nuclear-norm.md §9 (proposed experiments X1-X5 [X]), §3 (flow, Lemma 4.1, closed form
Lemma A.1), §4 (programs), §5 (assumptions), §7 (predictions 1-5). Every run follows the gradient flow through
:func:`attnlab.training.flow.gradient_flow` (normalised-GD path by default, RK4 for the identity checks of X1) and compares
margin-normalised directions ``W / mu(W)`` with the max-margin programs of :mod:`attnlab.svm`. Importing the
package registers the five experiments and the paper's checkable results (its coverage table).
"""

from attnlab.experiments.coverage import register_results
from attnlab.experiments.kq_nuclear.x1 import X1Config, run_x1
from attnlab.experiments.kq_nuclear.x2 import X2Config, run_x2
from attnlab.experiments.kq_nuclear.x3 import X3Config, run_x3
from attnlab.experiments.kq_nuclear.x4 import X4Config, run_x4
from attnlab.experiments.kq_nuclear.x5 import X5Config, run_x5
from attnlab.verify import PaperResult

__all__ = ["X1Config", "X2Config", "X3Config", "X4Config", "X5Config", "run_x1", "run_x2", "run_x3", "run_x4", "run_x5"]

register_results(
    "kq-nuclear-norm",
    (
        PaperResult("003:Lem4.1", "the flows on (xi_k, xi_q) and on (w_+, w_-) give the same beta(t) under (4)"),
        PaperResult(
            "003:Lem4.2",
            "under A2 and init (5), ||beta(t)|| = ||xi_k xi_q|| -> infinity (its proof: the loss never increases)",
        ),
        PaperResult("003:LemA.1", "closed form beta(t) = omega_0^2 sinh(B phi(t)) under initialisation (5)"),
        PaperResult("003:Thm4.1", "diagonal K, Q: beta(t) / mu(t) tends to an l1-SVM solution (A2, A3, init (5))"),
        PaperResult("003:Lem5.1", "under Assumption 4 an aligned initialisation stays aligned"),
        PaperResult(
            "003:Thm5.1",
            "under A2-A4 and an aligned init the limit U_K diag(beta_hat) U_Q^T solves the W*-SVM, beta_hat solves (9)",
        ),
    ),
)
