"""``ntk.table1``'s declared claims (softmax-ntk-diffusion §9 P7, §5.1 Table 1): the falsifiers, each claim's
reading, and every revision of a reading with the outcome it had; :mod:`attnlab.experiments.ntk.table1` runs the
experiment and builds the rows.

Spec: docs/theory/softmax-ntk-diffusion.md §9 P7, §5.1 (Table 1), §4.2 (limit kernels), Corollary 4.3 (width).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attnlab.experiments.ntk._falsifiers import EXP_KERNEL_OF_SOFTMAX, SOFTMAX_KERNEL_OF_EXP
from attnlab.experiments.ntk._shared import SOURCE
from attnlab.verify import Claim, Falsifier, Reading, Revision

__all__ = ["CLAIMS", "COMPARABLE", "COMPARABLE_READING", "FALSIFIERS", "IDENTIFIED", "WIDTH"]

# the falsifiers patch attnlab.experiments.ntk.table1, where run_table1 looks ACTIVATIONS and infinite_width_gram up
_SRC = f"{SOURCE} §9 P7, §5.1 Table 1"
_PER_ACTIVATION = (
    "each activation, one row each; per n, seeds 0 ... seeds - 1 (a data set of n unit vectors with labels +-1 and "
    "an initialization per seed)"
)
_NEEDED = (
    "the first width of the grid at which ||H* - I (x) K||_2 <= lambda^inf / 2 and GD with the practical step "
    "follows the envelope (1 - s lr (lambda^inf / 2) / 2)^t ||Y||^2 down to eps ||Y||^2"
)
_WINDOW = "the doubling width grid; GD for at most max_steps steps, the envelope read every record_every steps"
_RATE_RULE = (
    "<= 2 - 2 slope_n(lambda^inf) (Table 1's lambda^-2 n^2, lambda^inf of the activation's limit kernel) + the "
    "change a log^log_power n factor makes to the slope over the ns; a median beyond the grid fails the row"
)
# the config as the readings ran at dfa98f4 (the quick grid then ended at 65536)
_BASELINE_SIZES = {
    "ns": {"full": [8, 16, 32, 64], "quick": [8, 16, 32]},
    "seeds": {"full": 5, "quick": 3},
    "d_in": {"full": 16, "quick": 16},
    "sigma_w": {"full": 0.5, "quick": 0.5},
    "c": {"full": 0.5, "quick": 0.5},
    "eps": {"full": 1e-3, "quick": 1e-3},
    "widths": {"full": [2**k for k in range(4, 19)], "quick": [2**k for k in range(6, 17)]},
    "max_steps": {"full": 20000, "quick": 5000},
    "record_every": {"full": 5, "quick": 5},
    "activations": {"full": ["softmax", "relu", "exp"], "quick": ["softmax", "relu", "exp"]},
}
_IDENTIFIED_READING = Reading(
    statistic="max over (activation, n) of the share of seeds with no width in the grid (" + _NEEDED + ")",
    window=_WINDOW,
    subset="every (activation, n) cell, seeds 0 ... seeds - 1",
    tolerance="< bound: a median needs fewer than half the seeds censored",
    params={"bound": 0.5},
)
IDENTIFIED = Claim(
    "P7: the median width is identified: largest share of seeds with no width in the grid, over (activation, n)",
    "004:Cor4.3",
    _SRC,
    kind="property",
    id="p7-identified",
    reading=_IDENTIFIED_READING,
    revisions=(
        Revision(
            _IDENTIFIED_READING,
            date="2026-11-28",
            why="the quick width grid now reaches 262144 (was 65536), so that a censored median's lower bound can "
            "exceed the rate rows' bounds; the reading is unchanged",
            quick="pass: 0 (no cell censored)",
            full="pass (at most 1 of 5 seeds censored in any cell)",
            sizes=_BASELINE_SIZES,
        ),
    ),
)
# the width row as it ran at dfa98f4 (one claim, p7-width-rate, for the three activations): the new claims' history
_OLD_WIDTH_TEXT = (
    "P7: width needed is found in the grid and grows no faster than Table 1's lambda^-2 n^2 "
    "({act}; lambda^inf ~ n^{lam})"
)
_OLD_WIDTH_READING = Reading(
    statistic="log-log slope in n of the median over seeds of the width needed: " + _NEEDED,
    window=_WINDOW,
    subset=_PER_ACTIVATION,
    tolerance=_RATE_RULE,
    params={"log_power": 2.0},
)
_CONCENTRATION = (
    "the first width of the grid at which ||H* - I (x) K||_2 <= lambda^inf / 2 (the kernel concentration behind "
    "Theorem 4.2's width; it set the width needed, concentration and GD together, in every run so far)"
)
_LOWER_BOUND = (
    "a median beyond the grid counts as censored_as x the grid's largest width, so the slope is then a lower bound"
)
_RATE_RULE_NOW = (
    "<= 2 - 2 slope_n(lambda^inf) (Table 1's lambda^-2 n^2, lambda^inf of the activation's limit kernel) + the "
    "change a log^log_power n factor makes to the slope over the ns; with a censored median the row fails: with a "
    "negative margin when the lower bound already exceeds the bound, else as 'no width in the grid'"
)
_OLD_WIDTH_OUTCOMES = {
    "softmax": ("pass: 2.5 (<= 4.72)", "pass: 3.3"),
    "relu": ("pass: 2.5 (<= 3.75)", "pass: 2.3"),
    "exp": ("pass: 3.0 (<= 4.72)", "pass: 3.0"),
}


_CONCENTRATION_OUTCOMES = {
    "softmax": ("pass: 2.5 (<= 4.71712)", "pass: 3.3 (<= 4.64503)"),
    "relu": ("pass: 2.5 (<= 3.74771)", "pass: 2.3 (<= 3.68011)"),
    "exp": ("pass: 3 (<= 4.71712)", "pass: 3 (<= 4.64503)"),
}
_OLD_CONCENTRATION_TEXT = (
    "P7, {act}: the width needed (set by the kernel's concentration in {conc} of {runs} runs; GD alone "
    "trains at m = {lo} to {hi}) grows no faster than Table 1's lambda^-2 n^2 (lambda^inf ~ n^{lam})"
)


def _width_claim(act: str, falsifiers: tuple[str, ...]) -> Claim:
    """How fast H* concentrates to the limit I (x) K (spec §4.2, 004:Ext-LimitKernel), per activation: the width at
    which it is within lambda^inf / 2 grows no faster than lambda^-2 n^2. Not Corollary 4.3's sufficiency."""
    quick, full = _OLD_WIDTH_OUTCOMES[act]
    reading = Reading(
        statistic="log-log slope in n of the median over seeds of the concentration width, "
        + _CONCENTRATION
        + "; "
        + _LOWER_BOUND,
        window=_WINDOW,
        subset=f"the {act} network; per n, seeds 0 ... seeds - 1 (a data set of n unit vectors with labels +-1 "
        "and an initialization per seed)",
        tolerance=_RATE_RULE_NOW,
        params={"log_power": 2.0, "censored_as": 2.0},
    )
    return Claim(
        "P7, " + act + ": the width at which H* has concentrated to our limit I (x) K within lambda^inf / 2 "
        "(which set the width GD needed in {conc} of {runs} runs; GD alone trains at m = {lo} to {hi}) grows no "
        "faster than lambda^-2 n^2 (lambda^inf ~ n^{lam})",
        "004:Ext-LimitKernel",  # the concentration to §4.2's derived limit, not Corollary 4.3's sufficiency
        _SRC,
        falsifier=falsifiers,
        id=f"ext-concentration-width-{act}",  # was cor43-width-{act} (labelled Cor 4.3)
        reading=reading,
        revisions=(
            Revision(
                _OLD_WIDTH_READING,
                date="2026-11-28",
                why="the width needed was the concentration width in 27 of 27 quick runs, so the row now reads that "
                "(and says what bound in its text), one claim per activation so that each can have the mechanism "
                "that fails it; a censored median used to fail the row without a number ('none in the grid'), now "
                "it gives the slope a lower bound; the quick grid reaches 262144 (was 65536) so that the lower bound "
                "can exceed the bound (for exp, whose n = 8 needs m = 512, no exponent above 4.0 fitted in the old "
                "grid, against a bound of 4.7)",
                quick=quick,
                full=full,
                claim=_OLD_WIDTH_TEXT,
                sizes=_BASELINE_SIZES,
            ),
            Revision(
                reading,
                date="2026-11-29",
                why="mislabelled: the row reads how fast H* concentrates to our derived limit I (x) K (§4.2, "
                "004:Ext-LimitKernel), a limit the paper never uses, not Corollary 4.3's sufficient width and "
                "iterations: GD alone follows the envelope at m = 2-8 (quick; width_training 2, 4, 4 for softmax at "
                "n = 8, 16, 32, slope 0.5) whatever n is, so the corollary's own quantity is flat in n. The claim now "
                "names 004:Ext-LimitKernel and says what it reads, under a new id (was cor43-width-*); the reading is "
                "unchanged",
                quick=_CONCENTRATION_OUTCOMES[act][0],
                full=_CONCENTRATION_OUTCOMES[act][1],
                claim=_OLD_CONCENTRATION_TEXT.replace("{act}", act),
            ),
        ),
    )  # fmt: skip


WIDTH = {
    "softmax": _width_claim("softmax", ("init-std-5pct", "limit-gram-1.1")),
    "relu": _width_claim("relu", ("relu-leak-0.05", "limit-gram-1.1")),
    "exp": _width_claim("exp", ("init-std-5pct", "limit-gram-1.1")),
}
_COMPARABLE = (
    "P7: {act} needs a width comparable to ReLU's relative to Table 1's lambda^-2 n^2 (exponent of "
    "width / (lambda^-2 n^2): {act} {mine}, ReLU {relu})"
)
COMPARABLE_READING = Reading(
    statistic="difference of relative exponents, the activation's minus ReLU's: slope in n of the median over "
    "seeds of the width needed (" + _NEEDED + "; a censored run counts as censored_as x the grid's largest width, a "
    "lower bound) minus (2 - 2 slope_n(lambda^inf)), each activation with its own lambda^inf",
    window=_WINDOW,
    subset="the activation and ReLU, every n, seeds 0 ... seeds - 1; one row per activation other than ReLU",
    tolerance="|difference| <= se_multiple bootstrap standard errors (resamples draws of the seeds, with "
    "replacement, within every (activation, n); generator seed bootstrap_seed); predicted 0 (Table 1: both "
    "lambda^-2 n^(2+o(1)))",
    params={"se_multiple": 3.0, "resamples": 2000, "bootstrap_seed": 0, "censored_as": 2.0},
)
# the sizes of the softmax comparison's first two readings (the experiment as it first ran, 2026-11-22)
_FIRST_SIZES = {
    "ns": {"full": [8, 16, 32, 64, 128], "quick": [8, 16, 32]},
    "seeds": {"full": 5, "quick": 2},
    "d_in": {"full": 16, "quick": 16},
    "sigma_w": {"full": 1.0, "quick": 1.0},
    "c": {"full": 0.5, "quick": 0.5},
    "eps": {"full": 1e-3, "quick": 1e-3},
    "widths": {"full": [2**k for k in range(4, 17)], "quick": [64, 256, 1024, 4096, 16384, 65536]},
    "max_steps": {"full": 20000, "quick": 5000},
    "record_every": {"full": 5, "quick": 5},
    "activations": {"full": ["softmax", "relu", "exp"], "quick": ["softmax", "relu", "exp"]},
}
_WITHIN_ONE = "|slope in n of softmax's median width needed - ReLU's| (raw exponents; medians over seeds)"
_SOFTMAX_HISTORY = (
    Revision(
        Reading(
            statistic=_WITHIN_ONE + "; runs with no width in the grid left out of the medians",
            window=_WINDOW,
            subset="softmax and ReLU, every n, seeds 0 ... seeds - 1",
            tolerance="<= 1 (ours: 'comparable up to n^o(1)')",
            params={"bound": 1.0},
            sizes=tuple(_FIRST_SIZES),
        ),
        date="2026-11-22",
        why="failed at the quick size (softmax needed 4-8x ReLU's width at every n); made an observation because "
        "Table 1 compares upper bounds, so measured minimal widths may differ without contradicting a theorem",
        quick="fail: 1.34 (softmax 3.34, ReLU 2.00)",
        full="not run at full size (n = 128 did not fit our CPU time); medium run (n <= 64, 3 seeds): 0.6 "
        "(softmax 3.0, ReLU 2.4)",
        claim="P7: softmax width exponent within 1 of ReLU's (comparable up to n^o(1))",
        sizes=_FIRST_SIZES,
    ),
    Revision(
        Reading(
            statistic=_WITHIN_ONE + "; runs with no width in the grid left out of the medians; an observation (its "
            "verdict never failed the run)",
            window=_WINDOW,
            subset="softmax and ReLU, every n, seeds 0 ... seeds - 1",
            tolerance="<= 1 ('comparable up to n^o(1)'), agrees or disagrees",
            params={"bound": 1.0},
            sizes=tuple(_FIRST_SIZES),
        ),
        date="2026-11-25",
        why="a theorem's prediction is a theory check, not an observation; at sigma_w = 1 the softmax Gram is "
        "pre-asymptotic below m = 65536 (heavy-tailed neuron terms), so the experiment moved to sigma_w = 0.5, "
        "a 2x grid with 3 quick seeds, and n <= 64 (softmax and exp need m > 131072 at n = 128)",
        quick="disagrees: 1.34 (softmax 3.34, ReLU 2.00)",
        full="not run at full size (as the reading before)",
        claim="paper: softmax width exponent within 1 of ReLU's ('comparable up to n^o(1)'; Table 1 compares upper "
        "bounds)",
        sizes=_FIRST_SIZES,
    ),
    Revision(
        Reading(
            statistic=_WITHIN_ONE + "; a censored run counts as wider than the grid (inf) in the medians",
            window=_WINDOW,
            subset="softmax and ReLU, every n, seeds 0 ... seeds - 1",
            tolerance="abs 1: our reading of n^o(1) over the ns; predicted ReLU's exponent",
            params={"atol": 1.0},
        ),
        date="2026-11-25",
        why="the tolerance 1 came from no spread, and the row passed at full size with no margin (3.3 against "
        "2.3); Table 1 states every width in units of lambda^-2, and lambda^inf falls like n^-1 for softmax and exp "
        "but n^-0.5 for ReLU, so the comparison it makes is of width / (lambda^-2 n^2), judged by a bootstrap SE",
        quick="pass: 0.0 (softmax 2.5, ReLU 2.5)",
        full="pass: 1.0 (softmax 3.3, ReLU 2.3), no margin",
        claim="P7: softmax width exponent within 1 of ReLU's (Table 1: comparable up to n^o(1))",
    ),
)
_COMPARISON_OUTCOMES = {
    "softmax": ("pass: -0.97 (abs 1.13, bootstrap SE 0.376)", "pass: 0.04 (bootstrap SE 0.29)"),
    "exp": ("pass: -0.47 (abs 1.13, bootstrap SE 0.378)", "pass: -0.26 (bootstrap SE 0.31)"),
}


def _comparison_claim(act: str, reference: str, history: tuple[Revision, ...]) -> Claim:
    """Table 1's 'comparable to ReLU' for one activation, relative to each one's lambda^-2 n^2."""
    quick, full = _COMPARISON_OUTCOMES[act]
    baseline = Revision(
        COMPARABLE_READING,
        date="2026-11-28",
        why="the claim now names 004:Ext-Table1 (Table 1 is a theoretical table, not a numbered result) and gains a "
        "mechanism falsifier (a leaky ReLU baseline); the quick grid reaches 262144 (was 65536); the reading is "
        "unchanged",
        quick=quick,
        full=full,
        sizes=_BASELINE_SIZES,
    )
    return Claim(
        _COMPARABLE,
        "004:Ext-Table1",  # Table 1 is a theoretical comparison of proven bounds, not a numbered result
        _SRC,
        falsifier=(reference, "relu-leak-0.05"),
        id=f"ext-table1-{act}",
        reading=COMPARABLE_READING,
        revisions=(*history, baseline),
    )


COMPARABLE = {
    "softmax": _comparison_claim("softmax", "softmax-kernel-of-exp", _SOFTMAX_HISTORY),
    "exp": _comparison_claim("exp", "exp-kernel-of-softmax", ()),
}
CLAIMS = (IDENTIFIED, *WIDTH.values(), *COMPARABLE.values())


def _wider_init(cls):
    """The network with its first layer drawn with std 1.05 sigma_w; it still reports sigma_w."""

    class WiderInit(cls):
        def __init__(self, d_in, d_out, width, sigma_w=1.0, seed=0):
            super().__init__(d_in, d_out, width, sigma_w, seed)
            with torch.no_grad():
                self.W.mul_(1.05)

    return WiderInit


def _leaky(cls, leak: float = 0.05):
    """The ReLU network with ``max(z, leak z)``; its limit kernel stays ReLU's."""

    class Leaky(cls):
        def output_from_logits(self, Z):
            return (torch.relu(Z) + leak * Z.clamp(max=0.0)) @ self.a.T / math.sqrt(self.width)

        def jacobian_factors(self, Z):
            phi = torch.where(Z > 0, 1.0, leak).to(Z.dtype) / math.sqrt(self.width)
            return phi, Z.new_zeros(Z.shape[0], self.d_out)

        def output_and_factors(self, Z, *, overwrite=False):
            return (self.output_from_logits(Z), *self.jacobian_factors(Z))

    return Leaky


FALSIFIERS = (
    Falsifier(
        "limit-gram-1.1",
        "the limit Gram I (x) K of §4.2, which H* concentrates around, scaled by 1.1",
        "attnlab.experiments.ntk.table1:infinite_width_gram",
        lambda limit: lambda net, X: 1.1 * limit(net, X),
        kind="reference",
        slow=True,
    ),
    Falsifier(
        "init-std-5pct",
        "the softmax and exp networks' first layer drawn with std 1.05 sigma_w while their limit kernels read sigma_w: "
        "the networks' kernels converge to a limit 2-5% away from the I (x) K the width is measured against. In "
        "effect a reference change: it fails the concentration rows through the mismatch with the reference kernel, "
        "not through how fast the Gram concentrates",
        "attnlab.experiments.ntk.table1:ACTIVATIONS",
        lambda nets: {**nets, "softmax": _wider_init(nets["softmax"]), "exp": _wider_init(nets["exp"])},
        kind="mechanism",
    ),
    Falsifier(
        "relu-leak-0.05",
        "the ReLU baseline with a leak 0.05 (max(z, 0.05 z)) while its limit kernel is ReLU's arc-cosine kernel",
        "attnlab.experiments.ntk.table1:ACTIVATIONS",
        lambda nets: {**nets, "relu": _leaky(nets["relu"])},
        kind="mechanism",
    ),
    dataclasses.replace(SOFTMAX_KERNEL_OF_EXP, slow=True),  # its grid scans take 40 s loaded at the quick size
    EXP_KERNEL_OF_SOFTMAX,
)
