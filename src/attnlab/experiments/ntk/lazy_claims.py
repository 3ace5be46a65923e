"""``ntk.lazy``'s declared claims (softmax-ntk-diffusion §9 P1-P6, §4.3 Lemma 5.1): each theory row names its paper
result and the wrong mechanism under which it must fail; the readings, every revision of a reading with the outcome
it had, and the falsifiers. :mod:`attnlab.experiments.ntk.lazy` runs the experiment and builds the rows.

Spec: docs/theory/softmax-ntk-diffusion.md §9 P1-P6, §4.3 (Lemma 5.1), §5 (Theorem 4.2, Lemma 5.3), §6.2
(Theorem F.2).
"""

from __future__ import annotations

import dataclasses

import torch

from attnlab.experiments.ntk import induction
from attnlab.experiments.ntk._falsifiers import LR_PAST_STABILITY, SOFTMAX_KERNEL_OF_EXP, output_scale
from attnlab.experiments.ntk._shared import SOURCE
from attnlab.experiments.ntk.lemma51 import GRAM_UNNORMALISED, OUTPUT_SCALE_M_SQUARED, PERTURBATION
from attnlab.verify import Claim, Falsifier, Reading, Revision, old_sizes

__all__ = [
    "CLAIMS",
    "COUPLING_RATE",
    "FALSIFIERS",
    "KERNEL_DRIFT_RATE",
    "KERNEL_NEAR",
    "LAZY_WEIGHTS",
    "LIMIT_KERNEL",
    "LOSS_ENVELOPE",
    "LOSS_FACTOR",
    "init_std_scaled",
]

_SRC = f"{SOURCE} §9"
_EACH_WIDTH = "each width of the config, one symmetric initialization (seed + 1) and one data set (seed) each"
_RUN_SIZES = ("n", "d_in", "d_out", "widths", "sigma_w", "c", "steps", "record_every", "seed")
_LOG_RULE = (
    "the change a log^2 m factor (the theorem's log factors) can make to the slope over the widths, "
    "log_power log(log m_max / log m_min) / log(m_max / m_min): 0.29 for m in [250, 4000]"
)
LOSS_FACTOR = Claim(
    "P2: per-step loss factor < 1 - m eta lambda / 2 (m={width})",
    "004:Lem5.3",
    f"{_SRC} P2, §5 Lemma 5.3",
    falsifier=("lr-past-stability", "gradient-missing-m"),
    id="p2-loss-factor",
    reading=Reading(
        statistic="per-step factor (||F(t) - Y||^2 / ||F(0) - Y||^2)^(1/t), t the last recorded step with "
        "||F(t) - Y||^2 > round_off",
        window="from step 0 to the last recorded step above round_off (float64 round-off of the loss)",
        subset=_EACH_WIDTH + "; one row per width",
        tolerance="< 1 - m eta lambda / 2 strictly, lambda = lambda_min(H*) of that initialization (Lemma 5.3's "
        "loss factor, spec reading)",
        params={"round_off": 1e-20},
        sizes=_RUN_SIZES,
    ),
)
_ENVELOPE_READING = Reading(
    statistic="whether ||F(t) - Y||^2 <= (1 - m eta lambda / 2)^t ||F(0) - Y||^2 (1 + round_off_rel) + round_off "
    "at every recorded t; margin: min over t of 1 - ||F(t) - Y||^2 / that allowance",
    window="every recorded step (every record_every steps, and the last)",
    subset=_EACH_WIDTH + "; one row per width",
    tolerance="exact, with round_off_rel relative allowance for float64 round-off and round_off absolute: the "
    "squared error's float64 floor, below which the loss-factor row reads no step either",
    params={"round_off_rel": 1e-9, "round_off": LOSS_FACTOR.param("round_off")},
    sizes=_RUN_SIZES,
)
LOSS_ENVELOPE = Claim(
    "P2: ||F(t)-Y||^2 <= (1 - m eta lambda/2)^t ||Y||^2 at every recorded t (m={width})",
    "004:Thm4.2",
    f"{_SRC} P2, §5 Theorem 4.2",
    falsifier=("lr-past-stability", "gradient-missing-m"),
    id="p2-envelope",
    reading=_ENVELOPE_READING,
    revisions=(
        Revision(
            dataclasses.replace(
                _ENVELOPE_READING,
                statistic="whether ||F(t) - Y||^2 <= (1 - m eta lambda / 2)^t ||F(0) - Y||^2 (1 + round_off_rel) at "
                "every recorded t; margin: min over t of 1 - ||F(t) - Y||^2 / (envelope (1 + round_off_rel))",
                tolerance="exact, with round_off_rel relative allowance for float64 round-off",
                params={"round_off_rel": 1e-9},
            ),
            date="2026-11-29",
            why="a relative allowance alone fails any run whose envelope falls below the squared error's float64 "
            "floor: at seed 5 (full) the m = 16000 run reaches ||F - Y||^2 = 7.2e-25 by step 2800 and stays there "
            "(2.4e-13 per output), while the envelope falls on to 3.4e-29 at step 3000 (ratio 2.1e4). The loss-"
            "factor row already reads nothing below round_off = 1e-20; the envelope now allows the same floor",
            quick="pass at seeds 0-8 (quick)",
            full="pass at seed 0; fail at seed 5 (m = 16000: 7.2e-25 against the envelope 3.4e-29 at step 3000)",
        ),
    ),
)
KERNEL_NEAR = Claim(
    "P4: sup_t ||H(t) - H*||_F < lambda / 2 (m={width})",
    "004:ClaimE.5",  # the kernel staying near H* while the weights stay close (Lemma 5.3 bounds weights and loss)
    f"{_SRC} P4, §5 Claim E.5",
    falsifier=("lr-past-stability", "uncoupled-init"),
    id="claimE5-kernel-near",  # was p4-kernel-near (labelled Lemma 5.3)
    reading=Reading(
        statistic="sup over recorded t of ||H(t) - H*||_F",
        window="every recorded step",
        subset=_EACH_WIDTH + "; one row per width",
        tolerance="<= lambda_min(H*) / 2 (the kernel radius of Lemma 5.3's induction, spec reading)",
        sizes=_RUN_SIZES,
    ),
)
LAZY_WEIGHTS = Claim(
    "P3: lazy weights: sup_t max_r ||w_r(t) - w_r(0)|| <= D ~ e^{2B} / m, with e^{2B} measured as "
    "max_{i,r} m S_{i,r}(W(0)): the slope of max movement / e^{2B} in m is -1",
    "004:LemC.2",  # the induction's weight property (Lemma 5.3's part C.2); its radius R is lost, its 1/m scaling not
    f"{_SRC} P3, §5 Lemmas 5.3, C.2",
    falsifier="output-scale-sqrt-m",
    id="lemC2-lazy-weights",  # was p3-lazy-weights (labelled Lemma 5.3)
    reading=Reading(
        statistic="log-log slope in m of sup_t max_r ||w_r(t) - w_r(0)|| / max_{i,r} m S_{i,r}(W(0))",
        window="sup over every recorded step",
        subset="the widths of the config, one initialization each",
        tolerance="-1 +- " + _LOG_RULE,
        params={"log_power": 2.0},
        sizes=_RUN_SIZES,
    ),
)
KERNEL_DRIFT_RATE = Claim(
    "P4: sup_t ||H(t) - H*||_F shrinks at least like 1/m",
    "004:Lem5.1",  # weights moved by R ~ 1/m (P3) move the kernel by at most R n d e^{O(B)} (Lemma 5.1)
    f"{_SRC} P4, §4.3 Lemma 5.1",
    falsifier=("lr-past-stability", "uncoupled-init"),
    id="lem51-drift-rate",  # was p4-drift-rate (labelled Lemma 5.3)
    reading=Reading(
        statistic="log-log slope in m of sup_t ||H(t) - H*||_F",
        window="sup over every recorded step",
        subset="the widths of the config, one initialization each",
        tolerance="<= -1 + " + _LOG_RULE,
        params={"log_power": 2.0},
        sizes=_RUN_SIZES,
    ),
)
_COUPLING_READING = Reading(
    statistic="log-log slope in m of max over recorded t, test points and outputs of |F_nn - F_ker|, F_ker "
    "Algorithm D from gamma(0) = 0 with the network's step",
    window="every recorded step",
    subset="the widths of the config, one initialization each; n_test unit-norm test points (seed)",
    tolerance="<= -1 + " + _LOG_RULE,
    params={"log_power": 2.0},
    sizes=(*_RUN_SIZES, "n_test"),
)
COUPLING_RATE = Claim(
    "P5: max_t |F_nn - F_ker| at test points shrinks at least like 1/m, the order of the kernel drift eps_H in "
    "Thm F.2's gap <= eps_H sqrt(nd) ||Y|| / lambda (a fixed slope: the measured eps_H and the bound are not read)",
    "004:ThmF.2",
    f"{_SRC} P5, §6.2 Thm F.2",
    falsifier="output-scale-sqrt-m",
    id="p5-coupling-rate",
    reading=_COUPLING_READING,
    revisions=(
        Revision(
            _COUPLING_READING,
            "2026-11-29",
            "the claim said 'at least like the kernel drift', but the reading is a fixed slope -1 (+ 0.29): the "
            "measured drift falls faster (slope -1.57 quick) than the gap (-1.26), and the ratio of the gap to the "
            "measured bound eps_H sqrt(nd) ||Y|| / lambda rises with m (8.6e-5, 5.7e-4, 4.5e-4 at m = 250, 1000, "
            "4000: slope +0.60 over the 0.29 allowance; +0.14 over m = 1000-16000), so Theorem F.2's form with one "
            "constant is not what passes. The claim text now says what the row reads; the reading is unchanged",
            "pass: -1.2613 <= -0.706487",
            "pass: -1.51654 <= -0.729997",
            claim="P5: max_t |F_nn - F_ker| at test points shrinks at least like the kernel drift, 1/m "
            "(Thm F.2: gap <= eps_H sqrt(nd) ||Y|| / lambda)",
        ),
    ),
)
_LIMIT_WINDOW = "H* at initialization (no training)"


_LIMIT_SIZES = ("n", "d_in", "d_out", "sigma_w", "kernel_seeds", "kernel_widths", "seed")
_P6_SAME = {"n": 12, "d_in": 5, "d_out": 3, "sigma_w": 1.0, "seed": 0}  # P6's sizes no revision changed


def _p6_training_sizes(inits_full: int, inits_quick: int) -> dict:
    """The sizes of P6's readings on the training widths (before the kernel widths existed)."""
    return old_sizes(
        _P6_SAME, widths=([250, 1000, 4000, 16000], [250, 1000, 4000]), kernel_seeds=(inits_full, inits_quick)
    )


LIMIT_KERNEL = Claim(
    "P6: ||H* - I (x) K||_F / ||I (x) K||_F ~ m^{-1/2}",
    "004:Ext-LimitKernel",  # the spec's derived limit of Definition 3.6's Gram, not a numbered result
    f"{_SRC} P6, §4.2",
    falsifier=("softmax-kernel-of-exp", "init-std-mismatch", "init-std-5pct"),
    id="ext-limit-kernel",
    reading=Reading(
        statistic="log-log slope in m of the mean over initializations of ||H* - I (x) K||_F / ||I (x) K||_F",
        window=_LIMIT_WINDOW + ", at the kernel widths (m = 16000, 64000, 256000; quick 4000, 16000, 64000)",
        subset="kernel_seeds initializations (seeds seed + 1 ...) of one data set",
        tolerance="-0.5 +- se_multiple standard errors of the slopes fitted per initialization",
        params={"se_multiple": 3.0},
        sizes=_LIMIT_SIZES,
    ),
    revisions=(
        Revision(
            Reading(
                statistic="log-log slope in m of the mean over initializations of ||H* - I (x) K||_F / ||I (x) K||_F",
                window=_LIMIT_WINDOW + ", at the training widths",
                subset="kernel_seeds initializations of one data set",
                tolerance="-0.5 +- 0.25 (ours): Monte-Carlo error of the mean over kernel_seeds inits",
                params={"tol": 0.25},
                sizes=("n", "d_in", "d_out", "widths", "sigma_w", "kernel_seeds", "seed"),
            ),
            date="2026-11-25",
            why="the tolerance 0.25 was chosen by us, not measured; replaced by 3 standard errors of the per-init "
            "slopes (the spread of the statistic itself)",
            quick="pass: -0.497 (widths 250, 1000, 4000; 2 inits; recomputed 2026-11-27)",
            full="pass: -0.385 (widths 250 ... 16000; 4 inits)",
            sizes=_p6_training_sizes(4, 2),
        ),
        Revision(
            Reading(
                statistic="log-log slope in m of the mean over initializations of ||H* - I (x) K||_F / ||I (x) K||_F",
                window=_LIMIT_WINDOW + ", at the training widths (m = 250 ... 16000; quick 250, 1000, 4000)",
                subset="kernel_seeds initializations (seeds seed + 1 ...) of one data set",
                tolerance="-0.5 +- se_multiple standard errors of the slopes fitted per initialization",
                params={"se_multiple": 3.0},
                sizes=("n", "d_in", "d_out", "widths", "sigma_w", "kernel_seeds", "seed"),
            ),
            date="2026-11-25",
            why="failed at full size (-0.373 against -0.5 +- 0.104): the training widths are pre-asymptotic for "
            "the m^-1/2 rate at sigma_w = 1 (heavy-tailed neuron terms e^{2 w_r^T x}); measured on its own grid "
            "m = 16000 ... 256000 instead, with the same tolerance rule",
            quick="pass: -0.420 (-0.5 +- 0.185, 4 inits)",
            full="fail: -0.373 (-0.5 +- 0.104, 8 inits, SE 0.035)",
            sizes=_p6_training_sizes(8, 4),
        ),
        Revision(
            Reading(
                statistic="log-log slope in m of the mean over initializations of ||H* - I (x) K||_F / ||I (x) K||_F",
                window=_LIMIT_WINDOW + ", at the kernel widths (m = 16000, 64000, 256000; quick 250, 1000, 4000)",
                subset="kernel_seeds initializations (seeds seed + 1 ...) of one data set",
                tolerance="-0.5 +- se_multiple standard errors of the slopes fitted per initialization",
                params={"se_multiple": 3.0},
                sizes=_LIMIT_SIZES,
            ),
            date="2026-11-28",
            why="too weak at the quick size: W drawn with std 1.05 or 1.1 sigma_w (a limit kernel of the wrong "
            "scale) gave -0.387 and -0.329 against -0.5 +- 0.21 and passed; the quick widths 250 ... 4000 are as "
            "pre-asymptotic as the training widths were at full size. The quick size moved to m = 4000, 16000, "
            "64000, where the true slope is -0.46 and W's std x 1.05 (now the falsifier 'init-std-5pct') fails",
            quick="pass: -0.420 (-0.5 +- 0.185, 4 inits; afb0975)",
            full="the full size did not change: the current row's full outcome is this reading's",
            sizes=old_sizes(_P6_SAME, kernel_seeds=(8, 4), kernel_widths=([16000, 64000, 256000], [250, 1000, 4000])),
        ),
    ),
)
CLAIMS = (
    LOSS_FACTOR,
    LOSS_ENVELOPE,
    KERNEL_NEAR,
    LAZY_WEIGHTS,
    KERNEL_DRIFT_RATE,
    COUPLING_RATE,
    LIMIT_KERNEL,
    PERTURBATION,
    *induction.CLAIMS,
)


def init_std_scaled(factor: float):
    """A falsifier's wrapper: the softmax network whose W is drawn with std ``factor`` sigma_w while it (and its limit
    kernel) reads sigma_w."""

    def wrap(cls):
        class Mismatched(cls):
            def __init__(self, d_in, d_out, width, sigma_w=1.0, seed=0):
                super().__init__(d_in, d_out, width, sigma_w, seed)
                with torch.no_grad():
                    self.W.mul_(factor)

        return Mismatched

    return wrap


FALSIFIERS = (
    LR_PAST_STABILITY,
    Falsifier(
        "output-scale-sqrt-m",
        "the network's output scale m replaced by sqrt(m): F = sqrt(m) a softmax(W^T x)",
        "attnlab.experiments.ntk.lazy:SoftmaxMLP",
        output_scale(0.5),
        kind="mechanism",
    ),
    Falsifier(
        "init-std-mismatch",
        "W drawn with std 1.5 sigma_w while the network and its limit kernel I (x) K read sigma_w",
        "attnlab.experiments.ntk.lazy:SoftmaxMLP",
        init_std_scaled(1.5),
        kind="mechanism",
    ),
    Falsifier(
        "init-std-5pct",
        "W drawn with std 1.05 sigma_w while the network and its limit kernel I (x) K read sigma_w",
        "attnlab.experiments.ntk.lazy:SoftmaxMLP",
        init_std_scaled(1.05),
        kind="mechanism",
    ),
    SOFTMAX_KERNEL_OF_EXP,
    GRAM_UNNORMALISED,
    OUTPUT_SCALE_M_SQUARED,
    *induction.FALSIFIERS,
)
