"""The proof of Theorem 4.2 along ``ntk.lazy``'s runs: Claim 3.4 and Appendices C-E, measured at every recorded step.

Spec: docs/theory/softmax-ntk-diffusion.md §3.2 (Claim 3.4), §5 (Lemma 5.3's parts C.3-C.4, Lemmas D.1 and D.3,
Lemma E.1 with its terms C_0 ... C_3 and their bounds E.3-E.7, Claim E.5). Measure at a recorded step
(:func:`record_terms`), summarise a run (:func:`summarize`), declared claims and their rows
(:func:`induction_checks`), and the wrong mechanisms that must fail them.

Each row is one statistic over every width and every recorded step at which ``||F - Y||^2`` is above round-off
(the steps the induction speaks about); ``m eta lambda ||F - Y||^2`` is the unit the Appendix E terms are read in
(Lemma C.3 needs ``C_0 + C_1 + C_2 + C_3 <= -(m eta lambda / 2) ||F - Y||^2``).
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import torch

from attnlab.experiments.ntk._falsifiers import output_scale
from attnlab.experiments.ntk._shared import SOURCE
from attnlab.ntk import gram_jacobian, network, step_terms
from attnlab.ntk.network import TwoLayerNet
from attnlab.verify import Claim, Falsifier, Reading, Revision

__all__ = ["CLAIMS", "FALSIFIERS", "induction_checks", "record_terms", "summarize"]

_SRC = f"{SOURCE} §5"
_ALL = "every width of the config, one initialization (seed + 1) and one data set (seed); one row for all widths"
_LIVE = "every recorded step with ||F(t) - Y||^2 > round_off (float64 round-off of the loss)"
_SIZES = ("n", "d_in", "d_out", "widths", "sigma_w", "c", "steps", "record_every", "seed")
_BUDGET = (
    "1/6 of m eta lambda ||F - Y||^2: Lemma C.3 needs C_0 + C_1 + C_2 + C_3 <= -(m eta lambda / 2) ||F - Y||^2 and "
    "Lemma E.4 gives C_1 <= -m eta lambda ||F - Y||^2, so the other terms may add (m eta lambda / 2) ||F - Y||^2; "
    "we split it evenly over C_0, C_2, C_3 (ours: Lemma E.2's constants are lost)"
)
_TERMS = (
    "C_0 ... C_3 of one GD step from W(t) with the practical step (Lemma E.1, our reconstruction: C_1 = -2 eta "
    "<J_a^T R, G> the numerator part, C_0 = -2 eta <(J - J_a)^T R, G> the denominator's, C_2 the cross term's "
    "remainder, C_3 = ||F(t+1) - F(t)||^2; G the closed-form gradient, R = F - Y)"
)


def _claim(text: str, result: str, section: str, falsifier: str | tuple[str, ...], key: str, **reading) -> Claim:
    """A claim of this module: source §5, the runs of every width, the sizes of the training runs."""
    params = reading.pop("params", {})
    return Claim(
        text, result, f"{_SRC} {section}", falsifier=falsifier, id=key,
        reading=Reading(subset=_ALL, sizes=reading.pop("sizes", _SIZES), params=params, **reading),
    )  # fmt: skip


GRADIENT = _claim(
    "Claim 3.4: the closed-form gradient m S_r <v_{l,r}, S> x equals autograd's at the trained weights",
    "004:Claim3.4",
    "Claim 3.4",
    "jacobian-denominator-dropped",
    "claim34-gradient",
    statistic="max over widths of ||G - G_autograd||_F / ||G_autograd||_F, G the closed-form gradient of "
    "0.5 ||F(W(T), X)||^2 (targets 0), where <a_l, S> != 0",
    window="the trained weights W(T) (the last step)",
    tolerance="<= bound: float64 agreement (round-off is about 1e-14)",
    params={"bound": 1e-8},
)
GRADIENT_BOUND = _claim(
    "Lemma D.1: max_r ||Delta w_r(t)|| <= 2 e^{2B} sqrt(nd) ||F(t) - Y||_F at every step, e^{2B} = max m S_{i,r}(t)",
    "004:LemD.1",
    "Lemma D.1",
    "gradient-m-twice",
    "lemD1-gradient-bound",
    statistic="max of max_r ||Delta w_r(t)|| / (2 e^{2B(t)} sqrt(n d_out) ||F(t) - Y||_F), e^{2B(t)} := "
    "max_{i,r} m S_{i,r}(W(t)) (Definition 4.1's bound, as the run realises it), Delta w_r the closed-form gradient",
    window=_LIVE,
    tolerance="<= bound (the lemma's constant 2 e^{2B} sqrt(nd): Claim 3.4, |<v_{l,r}, S>| <= 2, Cauchy-Schwarz)",
    params={"bound": 1.0, "round_off": 1e-20},
)
INITIAL_LOSS = _claim(
    "Lemma D.3: symmetric init gives F(W(0), .) = 0, so ||F(0) - Y||^2 = ||Y||^2 <= n (max |F(W(0), x)| over widths)",
    "004:LemD.3",
    "Lemma D.3",
    "uncoupled-init",
    "lemD3-initial-loss",
    statistic="max |F(W(0), x)| over the training and test inputs and every width",
    window="initialization (step 0)",
    tolerance="<= m_max eps_per_term: float64 round-off of the m cancelling terms (then ||F(0) - Y||^2 = ||Y||^2 = n "
    "with unit-norm targets)",
    params={"eps_per_term": 2.0**-52},
    sizes=(*_SIZES, "n_test"),
)
LOSS_STEP = _claim(
    "Lemma C.3: every step contracts the loss by 1 - m eta lambda / 2 (largest per-step factor minus the bound)",
    "004:LemC.3",
    "Lemma C.3",
    "gradient-missing-m",
    "lemC3-loss-step",
    statistic="max over consecutive recorded steps t_k < t_{k+1} of (||F(t_{k+1}) - Y||^2 / ||F(t_k) - Y||^2)^(1 / "
    "(t_{k+1} - t_k)) - (1 - m eta lambda / 2), lambda = lambda_min(H*) of that width",
    window=_LIVE + " (both ends of the interval)",
    tolerance="<= bound (the per-step factor of Lemma C.3, spec reading; every step of an interval at once)",
    params={"bound": 0.0, "round_off": 1e-20},
)
GRADIENT_STEP = _claim(
    "Lemma C.4: every gradient step is small: eta max_r ||Delta w_r(t)|| <= 0.01",
    "004:LemC.4",
    "Lemma C.4",
    ("uncoupled-init", "gradient-m-twice"),
    "lemC4-gradient-step",
    statistic="max over recorded steps of eta max_r ||Delta w_r(t)||, Delta w_r the closed-form gradient",
    window="every recorded step",
    tolerance="<= bound (the spec's recalled constant 0.01 of Lemma C.4's gradient property)",
    params={"bound": 0.01},
)
_FIRST_ORDER_OLD_CLAIM = (
    "Lemma E.1: the loss change's first-order term C_0 + C_1 is the NTK progress -2 eta m R^T H(t) R"
)
_FIRST_ORDER_OLD = Reading(
    statistic="max of |(C_0 + C_1) / (-2 eta m R^T H(t) R) - 1|, with " + _TERMS + " and H(t) the closed-form Gram",
    window=_LIVE,
    subset=_ALL,
    tolerance="<= bound: float64 agreement (both sides are the same first-order term when the step takes the true "
    "gradient; round-off is about 1e-14)",
    params={"bound": 1e-8, "round_off": 1e-20},
    sizes=_SIZES,
)
_GAP = (
    "gap(e) = |2 <R, F(W(t) - e G) - F(t)> / (-2 e m R^T H(t) R) - 1|: the loss change of one step of size e from "
    "the recorded W(t) less its C_3 (by Fact A.3 that is 2 <R, dF>), against the NTK progress; G the closed-form "
    "gradient the GD step takes (Claim 3.4), H(t) = J J^T / m with J autograd's Jacobian of the outputs "
    "(gram_jacobian, independent of the closed form), R = F(t) - Y, eta the practical step"
)
_E1_STATISTIC = "max over widths of |median over the window of gap(eta / 2) / gap(eta) - 1/2|, " + _GAP
_E1_TOLERANCE = (
    "<= bound: Lemma E.1's expansion leaves a remainder O(eta^2) beside the progress's O(eta), so gap(e) = k e (1 + "
    "O(e)) and the ratio is 1/2; bound 0.1 allows the next order (a wrong step or Jacobian leaves an O(1) gap that "
    "does not shrink: ratio 1); the median, so that a step where k nearly vanishes (at init k = 0) does not decide"
)
_E1_DF = (
    "; dF = m (S' - S) a^T formed without cancellation, S' - S = S (u - q) / (1 + q) with u = expm1(-e X G) and q = "
    "<S, u> per input (float64's relative accuracy, about 1e-15, against a long-double reference)"
)
_E1_ONE_R = (
    "; R, G and the progress from one evaluation of F(t) (G = J^T R by the closed form with that R): two float64 "
    "evaluations of F differ by 2e-14 (m = 250) to 1.2e-12 (m = 16000), and that difference in R leaves a gap of "
    "|R^T H dR| / R^T H R ~ |dR| / ||R|| that does not shrink with e"
)
_E1_WINDOW = (
    "every recorded step with ||F(t) - Y||^2 > round_off (declared before the first run; the first version "
    "justified it with a gap of about 1e-4, the measured gap is 1e-8 to 1e-11 there, still far above dF's 1e-15)"
)
_E1_CLAIM = (
    "Lemma E.1: the loss change less C_3 is the NTK progress -2 eta m R^T H(t) R to first order in eta: the "
    "relative gap halves when eta is halved"
)
FIRST_ORDER = _claim(
    _E1_CLAIM,
    "004:LemE.1",
    "Lemma E.1",
    ("gradient-missing-m", "jacobian-factor-x2"),
    "lemE1-first-order",
    statistic=_E1_STATISTIC + _E1_DF + _E1_ONE_R,
    window=_E1_WINDOW,
    tolerance=_E1_TOLERANCE,
    params={"bound": 0.1, "round_off": 1e-10},
)
FIRST_ORDER = dataclasses.replace(
    FIRST_ORDER,
    revisions=(
        Revision(
            _FIRST_ORDER_OLD,
            "2026-11-29",
            "an algebraic identity of our code, not the lemma: C_0 + C_1 = -2 eta <J^T R, G> and -2 eta m R^T H R "
            "came from the same jacobian_coefficients, so they agree for any Jacobian the two paths share; the audit "
            "doubled the Jacobian factor m S everywhere (gradient, Gram, terms; the output kept) and the row passed "
            "at 2.0e-15 while Claims 3.4 and E.6 failed (E.6 at 23.5). The new reading takes the step's actual loss "
            "change and an autograd Gram and tests what the lemma says: the gap to the NTK progress is of higher "
            "order in eta. Its first version (never locked) formed dF as the difference of two O(1) outputs, which "
            "loses 1e-9 of its relative accuracy at m = 16000 against a gap of 1e-8 to 1e-10, and failed at full size "
            "(0.589; medians 0.5, 0.5001, 0.894, 1.089; quick 0.00705): our defect, fixed by forming dF without "
            "cancellation",
            "pass: 2.26485e-14 <= 1e-08",
            "pass: 3.34177e-14 <= 1e-08",
            claim=_FIRST_ORDER_OLD_CLAIM,
        ),
        Revision(
            Reading(
                statistic=_E1_STATISTIC + _E1_DF,
                window=_E1_WINDOW,
                subset=_ALL,
                tolerance=_E1_TOLERANCE,
                params={"bound": 0.1, "round_off": 1e-10},
                sizes=_SIZES,
            ),
            "2026-11-30",
            "our defect, found by the first full reproduction of one code since the reading was declared (d04679a): "
            "the gap's R came from F = m softmax(Z) a^T and the step's G from the Jacobian factors' F = m (S a^T), "
            "two float64 evaluations that differ by 2e-14, 9.6e-14, 3.9e-13, 1.2e-12 at m = 250, 1000, 4000, 16000; "
            "the gap then carries |dR| / ||R||, which does not shrink with e (ratio 1) and grows as R falls: gap times "
            "||R|| at the steps where the ratio went to 1 was 1e-14, 2e-13, 8e-13 at m = 1000, 4000, 16000, the size "
            "of dR. At m = 16000, 14 of the window's 24 steps were such steps. With one F for R, G and the progress "
            "the ratio stays 0.5 down to the window's end (full medians 0.5, 0.5, 0.5, 0.5001). The docs' full "
            "outcome of this reading (0.012) was not of this code: it fails at full size in the pool and in process, "
            "with one thread and with two",
            "pass: 0.00736872 <= 0.1 (medians 0.5, 0.5, 0.5074; largest 1.008 at m = 1000)",
            "fail: 0.4999 > 0.1 (medians 0.5, 0.5, 0.5135, 0.9999; largest 5.097 at m = 16000)",
        ),
    ),
)
DENOMINATOR_TERM = _claim(
    "Lemma E.3: the softmax denominator's first-order term is small: |C_0| <= (m eta lambda / 6) ||F - Y||^2",
    "004:LemE.3",
    "Lemma E.3",
    "uncoupled-init",
    "lemE3-denominator-term",
    statistic="max of |C_0| / (m eta lambda ||F(t) - Y||^2), with " + _TERMS,
    window=_LIVE,
    tolerance="<= bound = " + _BUDGET,
    params={"bound": 1 / 6, "round_off": 1e-20},
)
PROGRESS = _claim(
    "Lemma E.4: the progress term makes progress: -C_1 >= m eta lambda ||F - Y||^2",
    "004:LemE.4",
    "Lemma E.4",
    "gradient-missing-m",
    "lemE4-progress",
    statistic="min of -C_1 / (m eta lambda ||F(t) - Y||^2), with " + _TERMS,
    window=_LIVE,
    tolerance=">= bound (Lemma E.4 with lambda_min(H(t)) >= lambda / 2, spec reading)",
    params={"bound": 1.0, "round_off": 1e-20},
)
KERNEL_LAMBDA = _claim(
    "Claim E.5: the kernel keeps its smallest eigenvalue: lambda_min(H(t)) >= lambda / 2 at every step",
    "004:ClaimE.5",
    "Claim E.5",
    "output-scale-1",
    "claimE5-kernel-lambda",
    statistic="min of lambda_min(H(t)) / lambda_min(H*)",
    window="every recorded step",
    tolerance=">= bound = 1/2 (Claim E.5's lambda / 2, spec reading)",
    params={"bound": 0.5},
)
_SECOND_ORDER_STATISTIC = "max of |C_2| / (m eta lambda ||F(t) - Y||^2), with " + _TERMS
_SECOND_ORDER_WINDOW = (
    "every recorded step with ||F(t) - Y||^2 > round_off: C_2 is the difference of two first-order terms, "
    "and the outputs' float64 error (about sqrt(m) 2^-52 for a sum of m terms) makes it round-off below that"
)
_DF = (
    "; F(t+1) - F(t) formed without cancellation (SoftmaxMLP.output_change: m S (u - q) a^T / (1 + q) with u = "
    "expm1(-eta X G) and q = <S, u> per input), so C_2 and C_3 keep float64's relative accuracy"
)


def _old_second_order(window: str, round_off: float) -> Reading:
    """Claim E.6's reading as it was while ``F(t+1) - F(t)`` was a difference of two outputs (revisions 1 and 2)."""
    return Reading(
        statistic=_SECOND_ORDER_STATISTIC,
        window=window,
        subset=_ALL,
        tolerance="<= bound = " + _BUDGET,
        params={"bound": 1 / 6, "round_off": round_off},
        sizes=_SIZES,
    )


SECOND_ORDER = _claim(
    "Claim E.6: the second-order term is small: |C_2| <= (m eta lambda / 6) ||F - Y||^2",
    "004:ClaimE.6",
    "Claim E.6",
    "gradient-m-twice",
    "claimE6-second-order",
    statistic=_SECOND_ORDER_STATISTIC + _DF,
    window=_LIVE,
    tolerance="<= bound = " + _BUDGET,
    params={"bound": 1 / 6, "round_off": 1e-20},
)
SECOND_ORDER = dataclasses.replace(
    SECOND_ORDER,
    revisions=(
        Revision(
            _old_second_order(_LIVE, 1e-20),
            date="2026-11-28",
            why="failed at full size at m = 16000 from float64 round-off, not from the step: the ratio grows like "
            "1 / ||F - Y|| below ||F - Y||^2 = 1e-16 (max 0.53, 0.10, 0.0014 over ||F - Y||^2 > 1e-20, 1e-18, 1e-16 at "
            "m = 16000), the signature of the outputs' absolute error in a difference of two first-order terms; the "
            "other rows' statistics are ratios of quantities computed directly and keep 1e-20",
            quick="pass: 6.8e-4 (m = 250, 1000, 4000)",
            full="fail: 0.53 (m = 16000, at ||F - Y||^2 = 1e-20 ... 1e-19; 0.031, 0.071 at m = 1000, 4000)",
        ),
        Revision(
            _old_second_order(_SECOND_ORDER_WINDOW, 1e-16),
            date="2026-11-30",
            why="the round-off revision 1 read was ours, not float64's limit: step_terms formed F(t+1) - F(t) as the "
            "difference of two O(1) outputs from two evaluation paths (output_from_logits after the step, the "
            "Jacobian factors' F before it), whose round-off (1e-12 at m = 16000) is larger than C_2 near the end "
            "of the run. Formed without cancellation, as Lemma E.1's row forms it, C_2 is second order down to "
            "||F - Y||^2 = 1e-20 (a test at m = 4000, ||R|| ~ 1e-6: C_2 now quarters with the step, the old ratio "
            "was 3.45), so the window returns to the other rows' 1e-20; the statistic then reads 5.5e-6 quick and "
            "1.2e-5 full, and revision 1's row passes at full size",
            quick="pass: 6.76807e-04 <= 0.166667 (m = 250, 1000, 4000)",
            full="pass: 1.40805e-03 <= 0.166667 (m = 250, 1000, 4000, 16000)",
        ),
    ),
)
OUTPUT_STEP = _claim(
    "Claim E.7: C_3 = ||F(t+1) - F(t)||^2 <= eta^2 m^2 K ||F - Y||^2 with K = lambda_max(H(t))^2",
    "004:ClaimE.7",
    "Claim E.7",
    "gradient-m-twice",
    "claimE7-output-step",
    statistic="max of C_3 / (eta^2 m^2 lambda_max(H(t))^2 ||F(t) - Y||^2), with " + _TERMS,
    window=_LIVE,
    tolerance="<= bound: the claim's constant poly(n, d) e^{O(B)} is lost; lambda_max(H(t))^2 is the smallest constant "
    "of its form (F(t+1) - F(t) = -eta m H(t) R to first order), and bound - 1 allows the step's higher orders",
    params={"bound": 1.1, "round_off": 1e-20},
)
CLAIMS = (
    GRADIENT,
    GRADIENT_BOUND,
    INITIAL_LOSS,
    LOSS_STEP,
    GRADIENT_STEP,
    FIRST_ORDER,
    DENOMINATOR_TERM,
    PROGRESS,
    KERNEL_LAMBDA,
    SECOND_ORDER,
    OUTPUT_STEP,
)


# ---- the wrong mechanisms (each fails the rows that name it, at the quick size) --------------------------------
def _gradient_missing_m(weight_gradient):
    """The gradient without the output's factor m (``S_r <v, S> x``): a misplaced m of spec §3.2."""
    return lambda X, R, phi, b, a, **kw: weight_gradient(X, R, phi, b, a, **kw).div_(phi.shape[1])


def _gradient_m_twice(loss_gradient):
    """The network's closed-form gradient with the output's factor m counted twice (``m^2 S_r <v, S> x``)."""
    return lambda net, X, Y: loss_gradient(net, X, Y) * net.width


def _denominator_dropped(weight_gradient):
    """The closed-form gradient without the softmax denominator's term: ``b = <a_l, S>`` taken as 0."""
    return lambda X, R, phi, b, a, **kw: weight_gradient(X, R, phi, torch.zeros_like(b), a, **kw)


def _jacobian_factor_x2(cls):
    """The network class with its Jacobian factor ``m S`` doubled wherever the closed form uses it (gradient, Gram,
    terms), the output kept: a consistently wrong Jacobian of spec §3.2."""

    class Doubled(cls):
        def jacobian_factors(self, Z):
            phi, b = super().jacobian_factors(Z)
            return 2 * phi, b

        def output_and_factors(self, Z, *, overwrite=False):
            F, phi, b = super().output_and_factors(Z, overwrite=overwrite)
            return F, 2 * phi, b

    return Doubled


def _uncoupled(symmetric_init):
    """Every neuron drawn on its own: no copied pair with opposite output signs (Definition 3.7 dropped)."""

    def init(d_in, d_out, width, sigma_w=1.0, seed=0):
        W, a = symmetric_init(d_in, d_out, 2 * width, sigma_w, seed)
        return W[:, ::2].contiguous(), a[:, ::2].contiguous()  # one neuron of each pair: independent draws

    return init


FALSIFIERS = (
    Falsifier(
        "jacobian-denominator-dropped",
        "the closed-form gradient without the softmax denominator's term -m S_r <a_l, S> x (a cancelling softmax "
        "Jacobian product)",
        "attnlab.ntk.network:weight_gradient",
        _denominator_dropped,
        kind="mechanism",
    ),
    Falsifier(
        "gradient-m-twice",
        "the network's closed-form gradient (Claim 3.4, what the lemmas bound and one step of Lemma E.1 takes) "
        "carries the output's factor m twice, m^2 S_r <v, S> x; GD's loop keeps the right one",
        "attnlab.ntk.network:TwoLayerNet.loss_gradient",
        _gradient_m_twice,
        kind="mechanism",
    ),
    Falsifier(
        "gradient-missing-m",
        "the gradient without the output's factor m, S_r <v, S> x, everywhere (GD's steps, the closed form)",
        "attnlab.ntk.network:weight_gradient",
        _gradient_missing_m,
        kind="mechanism",
    ),
    Falsifier(
        "jacobian-factor-x2",
        "the Jacobian factor m S doubled in every closed-form use (GD's gradient, the Gram, the Lemma E.1 terms), the "
        "output kept: the wrong Jacobian the old Lemma E.1 reading passed at 2e-15",
        "attnlab.experiments.ntk.lazy:SoftmaxMLP",
        _jacobian_factor_x2,
        kind="mechanism",
    ),
    Falsifier(
        "uncoupled-init",
        "the symmetric initialization without its pairs: every neuron and output sign drawn on its own",
        "attnlab.ntk.network:symmetric_init",
        _uncoupled,
        kind="mechanism",
    ),
    Falsifier(
        "output-scale-1",
        "the network's output without its factor m: F = a softmax(W^T x)",
        "attnlab.experiments.ntk.lazy:SoftmaxMLP",
        output_scale(0.0),
        kind="mechanism",
    ),
)


# ---- measure ---------------------------------------------------------------------------------------------------
def record_terms(net: TwoLayerNet, X: torch.Tensor, Y: torch.Tensor, lr: float, H: torch.Tensor) -> dict:
    """The induction's quantities at the net's weights ``W(t)`` (``H = gram(net, X)``): the largest gradient,
    ``e^{2B(t)}``, the Gram's extreme eigenvalues and the terms of one step (Lemma E.1)."""
    with torch.no_grad():
        phi, _ = net.jacobian_factors(X @ net.W)
    evals = torch.linalg.eigvalsh((H + H.T) / 2)
    terms = step_terms(net, X, Y, lr, H)
    gap, gap_half = first_order_gaps(net, X, Y, lr)
    return {
        "e1_gap": gap,
        "e1_gap_half": gap_half,
        "grad_max": float(net.loss_gradient(X, Y).norm(dim=0).max()),  # max_r ||Delta w_r(t)||, spec §3.2
        "softmax_peak_t": float(phi.max()),  # e^{2B(t)} := max_{i,r} m S_{i,r}(t) (Definition 4.1)
        "lambda_min_t": float(evals[0]),
        "lambda_max_t": float(evals[-1]),
        "C0": terms.C0,
        "C1": terms.C1,
        "C2": terms.C2,
        "C3": terms.C3,
        "ntk_progress": terms.ntk_progress,
    }


def first_order_gaps(net: TwoLayerNet, X: torch.Tensor, Y: torch.Tensor, lr: float) -> tuple[float, float]:
    """Lemma E.1's first-order gap at the net's weights ``W(t)`` for the steps ``lr`` and ``lr / 2``.

    Spec §5.2 (Lemma E.1, Fact A.3): ``gap(e) = |2 <R, F(W - e G) - F(W)> / (-2 e m R^T H R) - 1|`` with ``G`` the
    closed-form gradient (Claim 3.4) and ``H`` from autograd's Jacobian (:func:`~attnlab.ntk.gram_jacobian`).
    ``R``, ``G`` and the progress share one evaluation of ``F``: another evaluation's round-off (1e-12 at
    m = 16000) would add ``|dR| / ||R||`` to the gap, which does not shrink with the step.

    Parameters
    ----------
    net : TwoLayerNet
    X : torch.Tensor, shape (n, d_in)
    Y : torch.Tensor, shape (n, d_out)
    lr : float
        The practical step ``eta``.

    Returns
    -------
    tuple of float
        ``gap(lr)`` and ``gap(lr / 2)``.
    """
    H = gram_jacobian(net, X)  # independent of the closed-form Jacobian (torch.func)
    with torch.no_grad():
        W = net.W.detach()
        Z = X @ W
        F, phi, b = net.output_and_factors(Z)
        R = F - Y  # one evaluation of F for the step and the progress: two differ by F's round-off, 1e-12 at m = 16000
        G = network.weight_gradient(X, R, phi, b, net.a)  # the closed-form step GD takes (a falsifier's too), §3.2
        r = R.T.reshape(-1)  # index l * n + i, as the Gram's rows
        progress = net.kernel_scale * float(r @ (H @ r))  # m R^T H R
        XG = X @ G  # the logits' change per unit step
        gaps = []
        for e in (lr, lr / 2):
            dF = net.output_change(Z, -e * XG)  # without cancellation (SoftmaxMLP)
            gaps.append(abs(2.0 * float((R * dF).sum()) / (-2.0 * e * progress) - 1.0))  # Fact A.3, Lemma E.1
    return gaps[0], gaps[1]


def _first_order_ratio(frame: pd.DataFrame) -> tuple[float, float]:
    """Lemma E.1's statistic at one width: the median and the largest ``gap(eta/2) / gap(eta)`` over the window."""
    live = frame[frame["sq_error"] > FIRST_ORDER.param("round_off")]
    ratio = live["e1_gap_half"] / live["e1_gap"]
    return float(ratio.median()), float(ratio.max())


def autograd_gap(net: TwoLayerNet, X: torch.Tensor) -> float:
    """``||G - G_autograd|| / ||G_autograd||`` for ``0.5 ||F(W, X)||^2`` at the net's weights (Claim 3.4)."""
    W = net.W.detach().clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(0.5 * net.output_from_logits(X @ W).pow(2).sum(), W)
    closed = net.loss_gradient(X, torch.zeros(X.shape[0], net.d_out, dtype=X.dtype))
    return float((closed - auto).norm() / auto.norm())


def _second_order_ratio(frame: pd.DataFrame, rate: float, claim: Claim) -> float:
    """Claim E.6's statistic, max |C_2| / (m eta lambda ||F - Y||^2), above the round-off ``claim`` reads it at
    (``rate = m eta lambda``)."""
    live = frame[frame["sq_error"] > claim.param("round_off")]
    return float((live["C2"].abs() / (rate * live["sq_error"])).max())


def summarize(frame: pd.DataFrame, *, width: int, lam: float, lr: float, n: int, d_out: int) -> dict:
    """One width's statistics of the rows, over the recorded steps (see the claims' readings)."""
    live = frame[frame["sq_error"] > GRADIENT_BOUND.param("round_off")]
    sq = live["sq_error"]
    unit = width * lr * lam * sq  # m eta lambda ||F - Y||^2
    factors = (sq.shift(-1) / sq) ** (1.0 / live["step"].diff().shift(-1))  # per-step factor over each interval
    bound = 1 - width * lr * lam / 2  # spec §5 Lemma C.3
    peak = live["softmax_peak_t"]
    return {
        "d1_ratio": float((live["grad_max"] / (2 * peak * math.sqrt(n * d_out) * sq.pow(0.5))).max()),
        "step_factor_excess": float((factors.dropna() - bound).max()),
        "grad_step_max": float(lr * frame["grad_max"].max()),
        "first_order_gap": float(((live["C0"] + live["C1"]) / live["ntk_progress"] - 1).abs().max()),  # revision 1
        **dict(zip(("e1_ratio", "e1_ratio_max"), _first_order_ratio(frame), strict=True)),
        "C0_ratio": float((live["C0"].abs() / unit).max()),
        "C1_ratio": float((-live["C1"] / unit).min()),
        "C2_ratio": _second_order_ratio(frame, width * lr * lam, SECOND_ORDER),
        "C2_ratio_rev1": _second_order_ratio(frame, width * lr * lam, SECOND_ORDER.revised(1)),
        "C2_ratio_rev2": _second_order_ratio(frame, width * lr * lam, SECOND_ORDER.revised(2)),
        "C3_ratio": float((live["C3"] / ((width * lr * live["lambda_max_t"]) ** 2 * sq)).max()),
        "lambda_ratio": float(frame["lambda_min_t"].min() / lam),
    }


# ---- declared rows ---------------------------------------------------------------------------------------------
def induction_checks(table: pd.DataFrame) -> list:
    """One row per claim of this module, each over every width of ``table`` (the lazy run's summary)."""
    widths = table["width"].tolist()
    worst = {"max": lambda c: float(table[c].max()), "min": lambda c: float(table[c].min())}
    at = ", ".join(str(w) for w in widths)

    def less(claim: Claim, column: str, bound: float | None = None):
        return claim.less(worst["max"](column), claim.param("bound") if bound is None else bound, spread=f"m = {at}")

    def greater(claim: Claim, column: str):
        return claim.greater(worst["min"](column), claim.param("bound"), spread=f"m = {at}")

    round_off = max(widths) * INITIAL_LOSS.param("eps_per_term")
    return [
        less(GRADIENT, "autograd_gap"),
        less(GRADIENT_BOUND, "d1_ratio"),
        less(INITIAL_LOSS, "max_abs_output_at_init", round_off),
        less(LOSS_STEP, "step_factor_excess"),
        less(GRADIENT_STEP, "grad_step_max"),
        FIRST_ORDER.less(
            float((table["e1_ratio"] - 0.5).abs().max()),
            FIRST_ORDER.param("bound"),
            spread=f"m = {at}; median gap(eta/2)/gap(eta) per width "
            + ", ".join(f"{v:.4g}" for v in table["e1_ratio"])
            + "; largest "
            + ", ".join(f"{v:.4g}" for v in table["e1_ratio_max"]),
        ),
        less(FIRST_ORDER.revised(1), "first_order_gap"),  # the reading before, still computed
        less(DENOMINATOR_TERM, "C0_ratio"),
        greater(PROGRESS, "C1_ratio"),
        greater(KERNEL_LAMBDA, "lambda_ratio"),
        less(SECOND_ORDER, "C2_ratio"),
        less(SECOND_ORDER.revised(1), "C2_ratio_rev1"),  # the readings before, still computed
        less(SECOND_ORDER.revised(2), "C2_ratio_rev2"),
        less(OUTPUT_STEP, "C3_ratio"),
    ]
