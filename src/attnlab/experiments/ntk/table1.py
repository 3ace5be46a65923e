"""``ntk.table1``: the width and iterations needed against n, for the softmax, ReLU and exp networks (P7).

Spec: docs/theory/softmax-ntk-diffusion.md §9 P7, §5.1 (Table 1), §4.2 (limit kernels), §5 Lemma 5.3 (envelope).
Config, build, measure, declared checks, figure.

Two conditions make up Table 1's width, and each is found on its own along the width grid:

- *concentration*: ``||H* - I (x) K||_2 <= lambda^inf / 2``, so that ``lambda_min(H*) >= lambda^inf / 2`` (the
  kernel concentration behind Theorem 4.2's width);
- *training*: GD with the practical step stays under the Lemma 5.3 envelope ``(1 - s lr (lambda^inf / 2) / 2)^t
  ||Y||^2`` until ``||F - Y||^2 <= eps ||Y||^2``.

The width needed is the first concentrated width of the grid at which GD also trains; the run reports which condition
bound there, and the width training needs on its own (searched from ``m = 2``, below the grid), as its own row.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import check_in, check_scalar
from attnlab.experiments.ntk._falsifiers import EXP_KERNEL_OF_SOFTMAX, SOFTMAX_KERNEL_OF_EXP
from attnlab.experiments.ntk._shared import (
    ACTIVATIONS,
    SOURCE,
    check_sizes,
    log_factor_allowance,
)
from attnlab.experiments.registry import register
from attnlab.ntk import contraction_bound, gram, infinite_width_gram, practical_step, unit_rows
from attnlab.ntk.network import TwoLayerNet
from attnlab.plotting import house_figure, label_ours, new_figure
from attnlab.training.ntk import gradient_descent
from attnlab.verify import Claim, Experiment, ExperimentResult, Falsifier, Reading, Revision, RunContext, fit_slope

__all__ = ["Table1Config", "run_table1"]


@dataclass(frozen=True)
class Table1Config:
    """P7: width and iterations needed versus n, for the softmax, ReLU and exp networks (scalar output).

    Attributes
    ----------
    ns : tuple of int
        Training-set sizes (spec §9 P7 adds 128: softmax and exp need m > 131072 there).
    seeds : int
        Data sets and initializations per (activation, n) (spec §9 P7: 5).
    d_in : int
        Input dimension; with 5 the kernel of 128 unit vectors is too ill-conditioned to train.
    sigma_w : float
        Init standard deviation; at 1 the softmax Gram concentrates slower than m^-1/2 below m = 65536.
    c : float
        Practical step ``c / (s lambda_max(H*))`` (spec §8).
    eps : float
        Target ``||F - Y||^2 <= eps ||Y||^2``.
    widths : tuple of int
        The width grid searched, smallest first (even widths).
    max_steps : int
        GD steps allowed at one width.
    record_every : int
        Steps between checks of the envelope.
    activations : tuple of str
        Networks compared: ``"softmax"``, ``"relu"``, ``"exp"``.
    """

    OURS = ("ns", "seeds", "d_in", "sigma_w", "c", "eps", "widths", "max_steps", "record_every", "activations")

    ns: tuple[int, ...] = (8, 16, 32, 64)  # spec §9 P7 adds 128: softmax and exp need m > 131072 there (docs)
    seeds: int = 5  # spec §9 P7
    d_in: int = 16  # ours: with d_in = 5 the kernel of 128 unit vectors is too ill-conditioned to train
    sigma_w: float = 0.5  # ours: at 1 the softmax Gram concentrates slower than m^-1/2 below m = 65536 (docs)
    c: float = 0.5  # practical step c / (s lambda_max(H*)), spec §8
    eps: float = 1e-3  # target ||F - Y||^2 <= eps ||Y||^2
    widths: tuple[int, ...] = tuple(2**k for k in range(4, 19))  # 16 ... 262144: exp at n = 64 needs > 131072
    max_steps: int = 20000
    record_every: int = 5
    activations: tuple[str, ...] = ("softmax", "relu", "exp")

    def __post_init__(self) -> None:
        check_sizes("ns", self.ns, 2)
        check_sizes("widths", self.widths, 2)
        for name in ("seeds", "d_in", "max_steps", "record_every"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        check_scalar("sigma_w", self.sigma_w, low=0.0, low_inclusive=False)
        check_scalar("c", self.c, low=0.0, high=1.0, low_inclusive=False)
        check_scalar("eps", self.eps, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        for act in self.activations:
            check_in("activations entry", act, tuple(ACTIVATIONS))


# ---- declared checks ----------------------------------------------------------------------------------------------
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


def _width_claim(act: str, falsifiers: tuple[str, ...]) -> Claim:
    """Corollary 4.3's width for one activation: the concentration width grows no faster than lambda^-2 n^2."""
    quick, full = _OLD_WIDTH_OUTCOMES[act]
    return Claim(
        "P7, " + act + ": the width needed (set by the kernel's concentration in {conc} of {runs} runs; GD alone "
        "trains at m = {lo} to {hi}) grows no faster than Table 1's lambda^-2 n^2 (lambda^inf ~ n^{lam})",
        "004:Cor4.3",
        _SRC,
        falsifier=falsifiers,
        id=f"cor43-width-{act}",
        reading=Reading(
            statistic="log-log slope in n of the median over seeds of the concentration width, " + _CONCENTRATION
            + "; " + _LOWER_BOUND,
            window=_WINDOW,
            subset=f"the {act} network; per n, seeds 0 ... seeds - 1 (a data set of n unit vectors with labels +-1 "
            "and an initialization per seed)",
            tolerance=_RATE_RULE_NOW,
            params={"log_power": 2.0, "censored_as": 2.0},
        ),
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
_COMPARABLE_READING = Reading(
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
        _COMPARABLE_READING,
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
        reading=_COMPARABLE_READING,
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
        "the networks' kernels converge to a limit 2-5% away from the I (x) K the width is measured against",
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


# ---- build and measure ----------------------------------------------------------------------------------------
def _follows_envelope(net: TwoLayerNet, X, Y, lam_inf: float, config: Table1Config) -> float:
    """Steps GD takes to ``eps`` under the Lemma 5.3 envelope built from ``lambda^inf / 2``; NaN if it leaves it."""
    y_sq = float(Y.pow(2).sum())
    lr = practical_step(net, X, config.c)
    factor = contraction_bound(lr, net.kernel_scale, lam_inf / 2)  # spec §5 Lemma 5.3, lambda >= lambda^inf/2

    def outside(row: dict[str, float]) -> bool:
        return row["sq_error"] > factor ** row["step"] * y_sq

    tol = config.eps * y_sq
    result = gradient_descent(
        net, X, Y, lr=lr, steps=config.max_steps, record_every=config.record_every, tol=tol, stop=outside
    )
    last = result.frame.iloc[-1]
    return float(last["step"]) if last["sq_error"] <= tol and not outside(last.to_dict()) else math.nan


def _needed(config: Table1Config, activation: str, n: int, seed: int) -> dict[str, float]:
    """The first width of the grid that concentrates and trains, which condition bound there, and the width that
    training alone needs (searched on its own from ``m = 2``)."""
    gen = torch.Generator().manual_seed(1000 * seed + n)
    X = unit_rows(n, config.d_in, gen)
    Y = (2.0 * torch.randint(0, 2, (n, 1), generator=gen) - 1.0).to(torch.float64)  # labels +-1, ||y_i|| = 1
    cls = ACTIVATIONS[activation]
    H_inf = infinite_width_gram(cls(config.d_in, 1, 2, config.sigma_w), X)
    lam_inf = float(torch.linalg.eigvalsh(H_inf)[0])  # spec §4.2: deterministic stand-in for lambda
    nan = math.nan
    out = {"activation": activation, "n": n, "seed": seed, "lambda_inf": lam_inf, "width_concentration": nan}
    out |= {"width_needed": nan, "steps_needed": nan, "binds": "none"}
    for width in config.widths:
        net = cls(config.d_in, 1, width, config.sigma_w, seed=seed)
        if float(torch.linalg.matrix_norm(gram(net, X) - H_inf, ord=2)) > lam_inf / 2:
            continue  # not concentrated: H* is not yet within lambda^inf / 2 of I (x) K
        if math.isnan(out["width_concentration"]):
            out["width_concentration"] = float(width)
        steps = _follows_envelope(net, X, Y, lam_inf, config)
        if not math.isnan(steps):
            binds = "concentration" if width == out["width_concentration"] else "training"
            out.update(width_needed=float(width), steps_needed=steps, binds=binds)
            break
    return out | _training_width(config, cls, X, Y, lam_inf, seed)


def _training_width(config: Table1Config, cls, X, Y, lam_inf: float, seed: int) -> dict[str, float]:
    """The first width of ``2, 4, 8, ...`` (up to the grid's largest) at which GD follows the envelope to eps."""
    width = 2
    while width <= max(config.widths):
        steps = _follows_envelope(cls(config.d_in, 1, width, config.sigma_w, seed=seed), X, Y, lam_inf, config)
        if not math.isnan(steps):
            return {"width_training": float(width), "steps_training": steps}
        width *= 2
    return {"width_training": math.nan, "steps_training": math.nan}


def run_table1(config: Table1Config, ctx: RunContext) -> ExperimentResult:
    jobs = [(act, n, seed) for act in config.activations for n in config.ns for seed in range(config.seeds)]
    frame = pd.DataFrame([_needed(config, act, n, seed) for act, n, seed in ctx.bar(jobs, desc="ntk.table1 runs")])
    slope_names = {  # column -> its slope's name in slopes.parquet (the first three as before the falsifier audit)
        "width_needed": "width_slope",
        "steps_needed": "steps_slope",
        "lambda_inf": "lambda_inf_slope",
        "width_concentration": "concentration_width_slope",
        "width_training": "training_width_slope",
    }
    columns = list(slope_names)
    censored = frame.fillna({c: math.inf for c in columns})  # no width in the grid: wider than the grid
    medians = censored.groupby(["activation", "n"], as_index=False)[columns].median()
    binding = _binding_table(frame)
    slopes = pd.DataFrame(
        [
            {"activation": act, **{slope_names[c]: fit_slope(part["n"], part[c])[0] for c in columns}}
            for act, part in medians.groupby("activation")
        ]
    )
    notes = [
        "Table 1 predicts sufficient widths and iterations lambda^-2 n^(2+o(1)) log^2 for every activation; the "
        "measured exponents must not exceed 2 - 2 x (slope of lambda^inf), and softmax's and exp's widths, each "
        "over its own lambda^-2 n^2, must grow like ReLU's ('comparable up to n^o(1)'), within 3 bootstrap SE.",
        f"Censored runs (no width in the grid) count as wider than {max(config.widths)} in the medians, and as "
        f"{2 * max(config.widths)} (the next width, a lower bound) in the comparison's exponents.",
        "What binds (binding.parquet): the width needed is the first concentrated width at which GD also follows "
        "the envelope ('concentration' binds) or a wider one ('training' binds); "
        + "; ".join(f"{r.activation} n={r.n}: {r.binds}" for r in binding.itertuples()),
    ]
    return ExperimentResult(
        frame,
        _table1_checks(frame, config),
        {"table1": _table1_figure(medians, config)},
        {"medians": medians, "slopes": slopes, "binding": binding},
        notes,
    )


def _binding_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (activation, n): the median concentration, training-alone and needed widths, and what bound how often."""
    rows = []
    for (act, n), cell in frame.groupby(["activation", "n"]):
        counts = cell["binds"].value_counts()
        rows.append(
            {
                "activation": act,
                "n": n,
                "width_concentration": float(cell["width_concentration"].fillna(math.inf).median()),
                "width_training": float(cell["width_training"].fillna(math.inf).median()),
                "width_needed": float(cell["width_needed"].fillna(math.inf).median()),
                "binds": ", ".join(f"{kind} {count}/{len(cell)}" for kind, count in counts.items()),
            }
        )
    return pd.DataFrame(rows)


# ---- checks -------------------------------------------------------------------------------------------------------
def _table1_checks(frame: pd.DataFrame, config: Table1Config) -> list:
    """P7 against Table 1: medians identified, exponents within the theorem's, softmax and exp comparable to ReLU."""
    censored = frame.groupby(["activation", "n"])["width_needed"].apply(lambda w: float(w.isna().mean()))
    checks = [
        IDENTIFIED.less(
            float(censored.max()),
            IDENTIFIED.param("bound"),
            strict=True,
            spread="a median needs fewer than half the seeds censored",
        )
    ]
    lam = {act: fit_slope(part["n"], part["lambda_inf"])[0] for act, part in frame.groupby("activation")}
    for act, part in frame.groupby("activation"):
        if act not in WIDTH:
            continue
        found = part[part["binds"] != "none"]
        claim = WIDTH[act].format(
            conc=int((found["binds"] == "concentration").sum()),
            runs=len(found),
            lo=f"{part['width_training'].min():g}",
            hi=f"{part['width_training'].max():g}",
            lam=f"{lam[act]:.3g}",
        )
        medians = part.fillna({"width_concentration": math.inf}).groupby("n")["width_concentration"].median()
        checks.append(_rate_check(claim, medians, lam[act], config))
    if "relu" in lam:
        reading = _COMPARABLE_READING
        cells = _width_cells(frame, reading.param("censored_as") * max(config.widths))
        draws = _bootstrap_exponents(cells, lam, reading.param("resamples"), reading.param("bootstrap_seed"))
        relative = _relative_exponents(cells, lam)
        for act, claim in COMPARABLE.items():
            if act not in lam:
                continue
            gaps = np.array([d[act] - d["relu"] for d in draws])
            gaps = gaps[np.isfinite(gaps)]
            se = float(gaps.std(ddof=1))
            mine, relu = f"{relative[act]:.3g}", f"{relative['relu']:.3g}"
            checks.append(
                claim.format(act=act, mine=mine, relu=relu).close(
                    0.0,
                    relative[act] - relative["relu"],
                    atol=reading.param("se_multiple") * se,
                    spread=f"3 bootstrap SE over seeds ({len(gaps)} resamples of the seeds of every (activation, n); "
                    f"SE {se:.3g}); predicted: the same exponent (Table 1: both lambda^-2 n^(2+o(1)))",
                )
            )
    return checks


def _rate_check(claim: Claim, medians: pd.Series, lam_slope: float, config: Table1Config):
    """The fitted exponent in n of ``medians`` is at most Table 1's ``2 - 2 slope(lambda^inf)`` plus the log^2
    allowance. A median beyond the grid counts as ``censored_as`` x the grid's largest width, so the exponent is then a
    lower bound: the row fails with its (negative) margin when that lower bound exceeds the bound, and as "none in the
    grid" (no margin: the theorem promises a width we did not find) when it does not."""
    beyond = claim.param("censored_as") * max(config.widths)
    missing = [int(n) for n, v in medians.items() if not math.isfinite(v)]
    bound = 2.0 - 2.0 * lam_slope  # spec §5.1 Table 1: lambda^-2 n^2 (log factors below)
    logs = log_factor_allowance(list(config.ns), claim.param("log_power"))
    why = f"the log^2 factor moves the exponent by {logs:.3g} over n in [{min(config.ns)}, {max(config.ns)}]"
    if not missing:
        return claim.slope(medians.index.tolist(), medians.tolist(), bound, logs, side="at_most", spread=why)
    lower = fit_slope(medians.index.tolist(), medians.clip(upper=beyond).tolist())[0]
    margin = bound + logs - lower
    censored = f"none in the grid at n = {', '.join(map(str, missing))} (median over seeds), counted as {beyond:g}"
    return claim.holds(
        f"<= {bound + logs:.3g}",
        float(lower),
        f"{why}; {censored}: the measured exponent is a lower bound",
        False,
        margin=margin if margin < 0 else None,
    )


def _width_cells(frame: pd.DataFrame, beyond: float) -> dict[str, dict[int, np.ndarray]]:
    """The widths needed per activation and n, one entry per seed; a censored run (no width in the grid) counts as
    ``beyond``, the first width past the grid: a lower bound that keeps every exponent finite."""
    widths = frame.fillna({"width_needed": beyond})
    return {
        act: {int(n): cell["width_needed"].to_numpy() for n, cell in part.groupby("n")}
        for act, part in widths.groupby("activation")
    }


def _relative_exponents(
    cells: dict[str, dict[int, np.ndarray]], lam: dict[str, float], resample=None
) -> dict[str, float]:
    """Per activation, the fitted exponent in n of the median width needed over Table 1's bound ``lambda^-2 n^2``
    (spec §5.1): ``slope(median width) - (2 - 2 slope(lambda^inf))``. ``resample`` maps each cell's seeds to a
    bootstrap draw of them."""
    out = {}
    for act, by_n in cells.items():
        medians = [float(np.median(w if resample is None else resample(w))) for w in by_n.values()]
        out[act] = fit_slope(list(by_n), medians)[0] - (2.0 - 2.0 * lam[act])
    return out


def _bootstrap_exponents(
    cells: dict[str, dict[int, np.ndarray]], lam: dict[str, float], resamples: int = 2000, seed: int = 0
) -> list[dict[str, float]]:
    """:func:`_relative_exponents` on ``resamples`` draws of the seeds, with replacement, within every (act, n)."""
    rng = np.random.default_rng(seed)
    return [_relative_exponents(cells, lam, lambda w: w[rng.integers(0, len(w), len(w))]) for _ in range(resamples)]


# ---- figure -------------------------------------------------------------------------------------------------------
@house_figure
def _table1_figure(medians: pd.DataFrame, config: Table1Config):
    fig, axes = new_figure(3, width=3.4)
    for act, part in medians.groupby("activation"):
        (line,) = axes[0].loglog(part["n"], part["width_needed"], "o-", label=act)
        axes[0].loglog(part["n"], part["width_training"], "x:", color=line.get_color())
        axes[1].loglog(part["n"], part["steps_needed"], "o-", label=act)
        axes[2].loglog(part["n"], part["lambda_inf"], "o-", label=act)
    axes[0].plot([], [], "x:", color="0.4", label="training alone")
    axes[0].set(xlabel="$n$", ylabel="width needed (median)")
    axes[1].set(xlabel="$n$", ylabel=r"iterations to $\epsilon$ (median)")
    axes[2].set(xlabel="$n$", ylabel=r"$\lambda_{min}$ of the limit kernel")
    axes[0].legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="ntk.table1",
        cost=858.0,
        config_type=Table1Config,
        run=run_table1,
        quick={"ns": (8, 16, 32), "seeds": 3, "widths": tuple(2**k for k in range(6, 19)), "max_steps": 5000},
        claims=CLAIMS,
        falsifiers=FALSIFIERS,
    )
)
