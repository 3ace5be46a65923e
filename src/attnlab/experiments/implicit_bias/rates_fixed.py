"""The fixed-decoder predictions of §8 (items 1-8): one NGD path, NGD / GD / Polyak from random directions, and
Polyak's step length at random ``W``.

Spec: docs/theory/implicit-bias-ngd.md §8 items 1-8 (Lemmas 1, 7; Theorems 1, 6, 7), §4 A1-A3, §5. Each part
measures, then builds its rows from the claims declared below it; Lemmas 2 and 5 are read in :mod:`.rates_landscape`
(their old readings, along the NGD path, here), Lemma 6 and Thm 7's lower step bound are unit tests.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from attnlab.experiments.implicit_bias.common import (
    GD_RULE,
    NGD_RULE,
    POLYAK_RULE,
    SOURCE,
    nearest_record,
    small_init,
    violated_drops,
)
from attnlab.experiments.implicit_bias.falsifiers import (
    polyak_doubled_gap,
    polyak_float64_gap,
    rule_gd_normalized,
    rule_gd_preconditioned,
    rule_gd_weight_decay,
    rule_gradient_step,
    svm_nuclear_norm,
)
from attnlab.experiments.implicit_bias.rates_landscape import LEMMA2, LEMMA5, OPT_SHIFTED
from attnlab.experiments.norm_growth import LOG_GROWTH_TOLERANCE, LOG_GROWTH_WINDOW, log_growth
from attnlab.metrics import (
    cosine,
    gradient_direction,
    largest_gap,
    log_one_minus_selected,
    optimal_loss,
    selected_probabilities,
    token_bound,
)
from attnlab.models import Combined
from attnlab.optim.polyak import polyak_step_size
from attnlab.training.batched import train as batched_train
from attnlab.training.flow import gradient_flow
from attnlab.verify import (
    Check,
    Claim,
    Reading,
    Revision,
    at_steps,
    fit_slope,
    geometric_steps,
    old_sizes,
)

# Falsifiers of this module's mechanisms; the data-model one patches rates.py, where Example 1 is drawn.
SVM_NUCLEAR = svm_nuclear_norm("attnlab.experiments.implicit_bias.rates")
NGD_GRADIENT_STEP, GD_NORMALIZED = rule_gradient_step(__name__), rule_gd_normalized(__name__)
POLYAK_DOUBLED = polyak_doubled_gap(__name__)  # polyak-step-upper's test applies it (a property: not registered)
POLYAK_FLOAT64_GAP = polyak_float64_gap("attnlab.training.engine")  # the engine forms the gap the rule reads
GD_WEIGHT_DECAY, GD_PRECONDITIONED = rule_gd_weight_decay(__name__), rule_gd_preconditioned(__name__)
FALSIFIERS = (
    SVM_NUCLEAR, NGD_GRADIENT_STEP, GD_NORMALIZED, OPT_SHIFTED, POLYAK_FLOAT64_GAP, GD_WEIGHT_DECAY, GD_PRECONDITIONED,
)  # fmt: skip


def _claim(text: str, result: str, section: str, falsifier=(), kind: str = "theory", **declared) -> Claim:
    """A claim of this module: ``falsifier`` one :class:`Falsifier` or a tuple of them; ``declared`` are its ``id``,
    ``reading`` and, where it has them, ``revisions``."""
    names = tuple(f.name for f in (falsifier if isinstance(falsifier, tuple) else (falsifier,)))
    return Claim(text, result, f"{SOURCE} {section}", falsifier=names, kind=kind, **declared)


# the config fields of the Example-1 data set every fixed-decoder part reads
_DATA = ("n", "T", "d", "rho", "sigma", "loss", "seed")
_PATH = "the one NGD path of the Example-1 data set of the config's seed from W_0 ~ N(0, init_scale^2)"
_PATH_SIZES = (*_DATA, "init_scale", "eta", "steps")

# ---- items 1, 2, 4, 5, 6: one NGD path from a small initialisation --------------------------------------------------

STEP_LENGTH = _claim(
    "every uncapped NGD step has length eta: max_t | ||W_t+1 - W_t|| / eta - 1 |", "001:Lem7", "§4 A2", kind="property",
    id="step-length",
    reading=Reading(
        "max over steps of | ||W_t+1 - W_t||_F / eta - 1 |", "every step 0..steps-1", _PATH,
        "<= bound: rounding of differences of iterates of norm <= eta T", {"bound": 1e-9}, _PATH_SIZES,
    ),
)  # fmt: skip
LEMMA7_LOWER = _claim(
    "norm growth lower bound <W_0, W_mm_bar> + eta t / (2 B^2 ||W_mm||) <= ||W_t|| (Lemma 7)",
    "001:Lem7", "§8.1", NGD_GRADIENT_STEP,
    id="lemma7-lower",
    reading=Reading(
        "min over t of ||W_t|| - (<W_0, W_mm / ||W_mm||> + eta t / (2 B^2 ||W_mm||)), B = max token norm",
        "every step t = 0..steps", _PATH, ">= -rounding (Lemma 7's bound [D], float64 rounding of ||W_t||)",
        {"rounding": 1e-9}, _PATH_SIZES,
    ),
)  # fmt: skip
_NORM_RATIO_OWN = Reading(
    "||W_T|| / (eta T)", "the last step T", _PATH,
    "1 +- (||W_0|| / (eta T) + max(0, 1 - ||W_t'|| / (eta t'))), t' = T // turn: the start plus the length lost "
    "while the first steps turn, which Lemma 7 says only shrinks", {"turn": 10}, _PATH_SIZES,
)  # fmt: skip
NORM_RATIO = _claim(
    "||W_T|| / (eta T) -> 1 (NGD steps align)", "001:Lem7", "§8.1", NGD_GRADIENT_STEP,
    id="norm-ratio",
    reading=Reading(
        "||W_T|| / (eta T)", "the last step T", _PATH,
        "1 +- atol, ours [D] (a consequence of A2 and Thm 1, not Lemma 7's linear lower bound): every uncapped NGD "
        "step has length eta, and once the steps align (Thm 1) ||W_T|| = eta T minus the length lost while the "
        "first steps turned, a constant, so the ratio -> 1 like 1 - O(1/T) (0.972 at T = 100 in the spec's "
        "simulation). atol ours, fixed: a step length short by a constant fraction of more than atol fails",
        {"atol": 0.05, "rtol": 0.0}, _PATH_SIZES,
    ),
    revisions=(
        Revision(
            _NORM_RATIO_OWN, "2026-11-29",
            "the tolerance came from the run it judged: 1 - ||W_t'|| / (eta t') at t' = T / 10 widens it by any "
            "constant shortfall of the steps, so NGD with steps of 0.8 eta read 0.798 and passed against a tolerance "
            "of 0.218 at the quick size (audit fid1, 2026-11-29; the step-length property row and lemma1-slope "
            "failed that probe). The tolerance is now fixed before the run",
            "pass: 0.998062 against 1 +- 0.0189", "pass: 0.999902 against 1 +- 0.00341",
        ),
    ),
)  # fmt: skip
_LEMMA1_STATISTIC = "least-squares slope of max_i log(1 - phi_opt,i(W_t)) on t"
_LEMMA1_WINDOW = "t >= steps // half (the second half)"
_LEMMA1_DRIFT = "drift * |slope on [steps/2, 3 steps/4) - slope on [3 steps/4, steps]|: Lemma 1's o(1) still moving"
LEMMA1 = _claim(
    "softmax saturation (Lemma 1): per-step slope of max_i log(1 - phi_opt) (second half)", "001:Lem1", "§8.4",
    (NGD_GRADIENT_STEP, SVM_NUCLEAR),
    id="lemma1-slope",
    reading=Reading(
        _LEMMA1_STATISTIC, _LEMMA1_WINDOW, _PATH,
        f"-eta / ||W_mm|| +- ({_LEMMA1_DRIFT}) + rtol * eta / ||W_mm|| (the W-SVM norm's relative accuracy)",
        {"half": 2, "drift": 3.0, "rtol": 1e-9}, _PATH_SIZES,
    ),
    revisions=(
        Revision(
            Reading(
                _LEMMA1_STATISTIC, _LEMMA1_WINDOW, _PATH, f"-eta / ||W_mm|| +- {_LEMMA1_DRIFT}",
                {"half": 2, "drift": 3.0}, _PATH_SIZES,
            ),
            "2026-11-29",
            "the tolerance left out the prediction's own error: where the slope has stopped moving, 3 x its drift "
            "is round-off (3.3e-16 and 5.2e-15 at seeds 2 and 3, quick), below the relative accuracy of ||W_mm|| from "
            "the W-SVM solve, and the row failed by 1.1e-11 and 1.9e-12 (relative 3.6e-11 and 6.3e-12) on a slope "
            "that matched Lemma 1 to 11 digits (`attnlab reproduce --quick --seed S`, docs/findings.md, 'Verdicts "
            "at other seeds'). rtol 1e-9 covers that accuracy and stays far below what the registered falsifiers "
            "move (percent-level slopes); the full size at seeds 2 and 3 passed the old reading",
            "pass: -0.255437 against -0.255436 +- 1.7e-06 (default seed 0)",
            "pass: -0.299885 against -0.299885 +- 4.0e-09 (default seed 0)",
        ),
    ),
)  # fmt: skip


def ngd_path(config, ctx, data, sol) -> tuple[pd.DataFrame, list[Check], float]:
    """Items 1, 2, 4, 5, 6 on one uncapped NGD path recorded at every step; returns frame, rows, Lemma 1's slope.

    Lemma 6's ratio is drawn, not checked (a unit test: it holds at every ``W``); Lemmas 2 and 5 are read here only
    as their old readings (revision rows of :mod:`.rates_landscape`'s claims)."""
    W_mm, d = sol.W, config.d
    W_bar = W_mm / W_mm.norm()
    B = float(token_bound(data.X))
    gen = torch.Generator().manual_seed(config.seed + 1)
    W0 = small_init(d, config.init_scale, gen)  # small init (Lemma 4)
    path = gradient_flow(
        Combined(d, W0=W0), data, step=config.eta, steps=config.steps, method=NGD_RULE, record_every=1,
        loss=config.loss, progress=ctx.progress,
    ).path  # fmt: skip
    W, t = path["W"], path["step"].to(torch.float64)  # (S, d, d), (S,), S = steps + 1
    norms = torch.linalg.matrix_norm(W)
    lengths = torch.linalg.matrix_norm(W[1:] - W[:-1]) / config.eta
    lower = float((W0 * W_bar).sum()) + config.eta * t / (2 * B**2 * float(W_mm.norm()))  # spec §8.1 [D]
    direction, _, _ = gradient_direction(data.X, data.Z, data.y, data.v, W, config.loss)
    corr_mm = (direction * W_bar).sum((-2, -1))  # <-grad L, W_mm_bar> / ||grad L||
    lemma6 = corr_mm * 2 * B**2 * float(W_mm.norm())  # spec §8.2: >= 1
    lemma2 = corr_mm / (direction * (W / norms[:, None, None])).sum((-2, -1))  # spec §8.6: -> >= 1 - eps
    log_gap = log_one_minus_selected(data.X, data.Z, W, data.select).amax(-1)  # (S,)
    drops, violated = violated_drops(data, W)  # spec §8.5: (S - 1, n), a violated sample's fall in phi_opt
    rounding = LEMMA5.revised(1).param("rounding")  # round-off guard at phi ~ 1
    lemma5_failures = int((drops > rounding).sum())
    predicted = -config.eta / float(W_mm.norm())  # spec §8.4: -eta min <A, W_mm> / ||W_mm||, min = 1
    late = norms >= norms[-1] / LEMMA2.revised(1).param("half")
    ratio = float(norms[-1] / (config.eta * config.steps))
    checks = [
        STEP_LENGTH.holds(
            "0",
            float((lengths - 1).abs().max()),
            f"<= {STEP_LENGTH.param('bound'):g}: rounding of differences of iterates of norm <= eta T",
            bool((lengths - 1).abs().max() <= STEP_LENGTH.param("bound")),
        ),  # fmt: skip
        LEMMA7_LOWER.greater(
            float((norms - lower).min()), -LEMMA7_LOWER.param("rounding"), spread="rounding of ||W_t||"
        ),
        NORM_RATIO.close(1.0, ratio, spread="ours, fixed: a constant shortfall of the step length fails"),
        NORM_RATIO.revised(1).close(
            1.0,
            ratio,
            atol=float(norms[0]) / (config.eta * config.steps) + _turning(norms, config.eta),
            spread="||W_0|| / (eta T) + the length lost while the first steps turn (measured: "
            "1 - ||W_t|| / (eta t) at t = T / 10, which Lemma 7 says only shrinks)",
        ),  # fmt: skip
        LEMMA2.revised(1).greater(
            float(lemma2[late].min()),
            1 - LEMMA2.revised(1).param("eps"),
            spread=f"eps = {LEMMA2.revised(1).param('eps'):g} (ours: Lemma 2 holds for every eps)",
        ),
        *_slope_checks(t, log_gap, predicted, config.steps),
        LEMMA5.revised(1).holds(
            0,
            lemma5_failures,
            f"exact (phi drops below {rounding:g} are rounding); margin: rounding minus the largest drop",
            lemma5_failures == 0,
            margin=rounding - float(drops.max()) if bool(violated[:-1].any()) else math.inf,
        ),
    ]
    frame = pd.DataFrame({
        "part": "ngd_single", "run": 0, "step": t.numpy(), "norm": norms.numpy(),
        "norm_upper": (float(W0.norm()) + config.eta * t).numpy(), "norm_lower": lower.numpy(),
        "lemma6": lemma6.numpy(), "lemma2": lemma2.numpy(), "log_one_minus_opt": log_gap.numpy(),
        "alignment": cosine(W, W_mm).numpy(),
    })  # fmt: skip
    return frame, checks, predicted


def _turning(norms: torch.Tensor, eta: float) -> float:
    """``1 - ||W_t|| / (eta t)`` at ``t = T / 10``: the length lost by then, an upper bound on the loss at ``T``."""
    t = max(1, (len(norms) - 1) // NORM_RATIO.revised(1).param("turn"))
    return max(0.0, 1.0 - float(norms[t]) / (eta * t))


def _slope_checks(t: torch.Tensor, log_gap: torch.Tensor, predicted: float, steps: int) -> list[Check]:
    """Lemma 1's per-step slope on the second half; tolerance three times its drift between the last quarters plus
    the prediction's own accuracy (``rtol``), and the revised reading without it beside it."""
    third, fourth = (t >= steps // 2) & (t < 3 * steps // 4), t >= 3 * steps // 4
    drift = abs(fit_slope(t[third], log_gap[third], logx=False, logy=False)[0]
                - fit_slope(t[fourth], log_gap[fourth], logx=False, logy=False)[0])  # fmt: skip
    half, factor = t >= steps // LEMMA1.param("half"), LEMMA1.param("drift")
    accuracy = LEMMA1.param("rtol") * abs(predicted)  # spec §8.4: the slope -eta / ||W_mm||, ||W_mm|| from a solver
    spread = f"{factor:g} x the slope's drift between the third and last quarter ({drift:.3g})"
    return [
        LEMMA1.slope(t[half], log_gap[half], predicted, factor * drift + accuracy, logx=False, logy=False,
                     spread=f"{spread} + rtol {LEMMA1.param('rtol'):g} of the prediction ({accuracy:.3g})"),
        LEMMA1.revised(1).slope(t[half], log_gap[half], predicted, factor * drift, logx=False, logy=False,
                                spread=spread),
    ]  # fmt: skip


# ---- items 3, 7, 8: NGD, GD and Polyak from random directions -------------------------------------------------------

_DIRECTIONS = "the directions random initial W_0 of norm direction_norm, one Example-1 data set (config's seed)"
_DIRECTION_SIZES = (*_DATA, "directions", "direction_norm", "steps", "record_every")
NGD_GLOBAL = _claim(
    "global directional convergence (Thm 1): over the random initial directions, the worst 1 - corr(W_t, W_mm) "
    "falls over the last decade by at least the O~(1/t) factor (NGD)",
    "001:Thm1", "§8.3", (NGD_GRADIENT_STEP, SVM_NUCLEAR),
    id="ngd-global",
    reading=Reading(
        "max over the directions of gap(t1) / gap(t0) of uncapped NGD (A2), gap = 1 - corr(W_t, W_mm)",
        "t0, t1 the recorded steps nearest T / decade and T", _DIRECTIONS,
        "<= (t0/t1) ln t1 / ln t0: the factor by which C log t / t shrinks from t0 to t1, any C (Thm 1)",
        {"decade": 10}, (*_DIRECTION_SIZES, "eta"),
    ),
)  # fmt: skip
NGD_RATE = _claim(
    "directional rate (Thm 1): worst slope of log(1 - corr) vs log t over the directions (2nd half) is at most "
    "that of log t / t",
    "001:Thm1", "§8.3", NGD_GRADIENT_STEP,
    id="ngd-rate",
    reading=Reading(
        "max over the directions of the least-squares slope of log(1 - corr(W_t, W_mm)) on log t, uncapped NGD (A2)",
        "recorded steps t >= T // half", _DIRECTIONS,
        "<= slope + 1/ln t_mid, t_mid the window's median recorded step: the local slope of log t / t (Thm 1's O~)",
        {"half": 2, "slope": -1.0}, (*_DIRECTION_SIZES, "eta"),
    ),
)  # fmt: skip
GD_DIRECTION = _claim(
    "plain GD converges in direction to W_mm (Thm 6) from every random direction: the displacement W_T - W_t0 over "
    "the last decade points along W_mm", "001:Thm6", "§8.8", GD_PRECONDITIONED,
    id="gd-direction",
    reading=Reading(
        "max over the directions of 1 - corr(W_T - W_t0, W_mm) of GD (A1): the direction GD moved in over the last "
        "decade", "t0 the recorded step nearest T / decade, T the last", _DIRECTIONS,
        "<= bound, ours [D]: Thm 6's direction with Lemma 1's Theta(log t) norm, W_t = W_mm ln t + rho_t with rho_t "
        "bounded (as GD on separable linear data), leaves the displacement W_mm ln(T/t0) + (rho_T - rho_t0), whose "
        "1 - corr ~ ||rho_T - rho_t0||^2 / (2 ||W_mm||^2 ln^2(T/t0)) -> 0 as rho_t settles, while W_0 and any "
        "constant offset cancel; a GD whose limit direction W' is off W_mm reads 1 - corr(W', W_mm). The bound is "
        "the smallest such offset the row resolves (an angle of 11 degrees)",
        {"decade": 10, "bound": 0.02}, (*_DIRECTION_SIZES, "gd_lr"),
    ),
)  # fmt: skip
_GD_LOG_READING = Reading(
    "relative RMS residuals of the fits ||W_t|| ~ a + b log t and ||W_t|| ~ c t^a, of the median over the "
    "directions of GD's ||W_t||", "the recorded steps nearest geometric_steps(T, first=max(record_every, "
    "T // first), 8 per decade)", _DIRECTIONS,
    "the log fit has the smaller residual, over at least min_decades decades of t", {"min_decades": 2.0,
    "first": 100}, (*_DIRECTION_SIZES, "gd_lr"),
)  # fmt: skip
_GD_LOG_CLAIM = "plain GD: ||W_t|| = Theta(log t), not a power (median run, geometric steps)"
GD_LOG_NORM = _claim(
    "plain GD: ||W_t|| grows like ||W_mm|| log t from every random direction (Thm 6's Theta(log t), its constant "
    "from Lemma 1's tail)", "001:Thm6", "§8.8", (GD_NORMALIZED, GD_WEIGHT_DECAY),
    id="gd-log-norm",
    reading=Reading(
        "over the directions, the ratio farthest from 1 of the least-squares slope of GD's ||W_t|| on ln t over "
        "||W_mm||, W_mm the Frobenius W-SVM (margin 1) of the data set", LOG_GROWTH_WINDOW, _DIRECTIONS,
        LOG_GROWTH_TOLERANCE, {"decade": 10, "ratio": 1.0}, (*_DIRECTION_SIZES, "gd_lr"),
    ),
    revisions=(
        Revision(
            _GD_LOG_READING,
            "2026-11-25",
            "the same reading at the quick size of the time (300 steps, so the points spanned [3, 300]) failed: a "
            "power t^0.16 fitted GD's median norm marginally better than log t. The quick size went to 1000 steps "
            "(points [10, 1000], 8 directions recorded every 10), where the log fit wins clearly; the full size did "
            "not change. Established from docs/experiments/implicit-bias.md at 09bab5a (the change of 72bea5f).",
            "fail: log-fit RMS 0.0125, power-fit RMS 0.0120 (a = 0.16) over [3, 300], as the docs of 09bab5a record "
            "it; recomputed at cdadd74 with 20 directions recorded every 3: 0.0133 against 0.0120 (a = 0.16), fail",
            "the full size did not change: the current row's full outcome is this reading's",
            claim=_GD_LOG_CLAIM,
            sizes={
                "n": {"full": 4, "quick": 3}, "T": {"full": 4, "quick": 3}, "d": {"full": 64, "quick": 16},
                "rho": {"full": 1.0, "quick": 1.0}, "sigma": {"full": 2.0, "quick": 2.0},
                "loss": {"full": "exp", "quick": "exp"}, "seed": {"full": 0, "quick": 0},
                "directions": {"full": 24, "quick": 20}, "direction_norm": {"full": 1.0, "quick": 1.0},
                "steps": {"full": 2000, "quick": 300}, "record_every": {"full": 20, "quick": 3},
                "gd_lr": {"full": 1.0, "quick": 1.0},
            },
        ),
        Revision(
            _GD_LOG_READING,
            "2026-11-28",
            "too weak to fail: a bounded norm's slow approach passes a log-against-power comparison. GD with weight "
            "decay 1e-3 (now the falsifier 'gd-weight-decay'), whose ||W_t|| levels off, read log-fit RMS 0.0427 < "
            "power-fit 0.0477 quick and 0.0395 < 0.0402 full (true 0.0054 < 0.0138 and 0.00203 < 0.00989); weight "
            "decay 1e-4 0.00553 < 0.0204 and 0.0140 < 0.0219. Lemma 1's tail fixes the constant of Thm 6's "
            "Theta(log t), ||W_t|| ~ ||W_mm|| ln t (as the flagship's gd-log-norm reads it), so the slope of ||W_t|| "
            "on ln t over the last decade over ||W_mm|| separates them (the worst direction): weight decay 1e-3 0.057 "
            "quick and -0.127 full, 1e-4 0.749 and 0.565, true 0.922 and 0.943",
            "pass: log-fit RMS 0.0054 < power-fit RMS 0.0138 (a = 0.143) over 2 decades",
            "pass: log-fit RMS 0.00203 < power-fit RMS 0.00989 (a = 0.114) over 2 decades",
            claim=_GD_LOG_CLAIM,
        ),
    ),
)  # fmt: skip
POLYAK_GLOBAL = _claim(
    "Polyak converges in direction (Thm 7): over the random initial directions, the worst 1 - corr(W_t, W_mm) "
    "falls by at least the O~(1/t) factor (uncapped Polyak, L - L_* from the margins)",
    "001:Thm7", "§8.7", (POLYAK_FLOAT64_GAP, SVM_NUCLEAR),
    id="polyak-global",
    reading=Reading(
        "max over the directions of gap(t1) / gap(t0) of uncapped Polyak (A3, L_* the infimum, L - L_* from the "
        "margins), gap = 1 - corr(W_t, W_mm)", "t0, t1 the recorded steps nearest record_every and T", _DIRECTIONS,
        "<= (t0/t1) ln t1 / ln t0: the factor by which C log t / t shrinks from t0 to t1, any C (Thm 7 as Thm 1)",
        {}, _DIRECTION_SIZES,
    ),
)  # fmt: skip


def _shrinks(frame: pd.DataFrame, t0: float, t1: float) -> tuple[float, float, str]:
    """Worst run's ``gap(t1) / gap(t0)`` (recorded steps nearest to ``t0``, ``t1``) and Thm 1's bound on it.

    ``gap = 1 - corr(W_t, W_mm)``; a rate ``C log t / t`` lets it shrink by no less than ``(t0/t1) ln t1 / ln t0``.
    """
    steps = np.sort(frame["step"].unique())
    t0, t1 = (int(steps[np.abs(steps - t).argmin()]) for t in (t0, t1))
    gap = 1 - frame.pivot_table(index="step", columns="run", values="alignment")
    worst = float((gap.loc[t1] / gap.loc[t0]).max())
    factor = (t0 / t1) * math.log(t1) / math.log(t0) if t1 > t0 > 1 else math.nan  # spec §8.3: C log t / t
    return worst, factor, f"(t0/t1) ln t1 / ln t0 for C log t / t from t0 = {t0} to t1 = {t1}"


def directions(config, ctx, data, sol) -> tuple[pd.DataFrame, list[Check]]:
    """Items 3, 7 (directional part) and 8: NGD, GD and uncapped Polyak from ``directions`` random directions."""
    gen = torch.Generator().manual_seed(config.seed + 2)
    G = torch.randn(config.directions, config.d, config.d, generator=gen, dtype=torch.float64)
    W0 = config.direction_norm * G / torch.linalg.matrix_norm(G)[:, None, None]  # random directions, (R, d, d)
    frames, gd_iterates = [], None
    for part, rule, options in (
        ("ngd", NGD_RULE, {"lr": config.eta}), ("gd", GD_RULE, {"lr": config.gd_lr, "keep_iterates": True}),
        ("polyak", POLYAK_RULE, {}),
    ):  # fmt: skip
        run = batched_train(
            data.X, data.Z, data.y, data.v, W0, param="W", optimizer=rule, loss=config.loss, steps=config.steps,
            record_every=config.record_every, W_ref=sol.W, progress=ctx.progress, **options,
        )  # fmt: skip
        frames.append(run.frame.assign(part=f"{part}_directions"))
        gd_iterates = run.iterates if part == "gd" else gd_iterates
    frame = pd.concat(frames, ignore_index=True)
    part = {name: frame[frame["part"] == f"{name}_directions"] for name in ("ngd", "gd", "polyak")}
    T = config.steps
    late = part["ngd"][part["ngd"]["step"] >= T // NGD_RATE.param("half")]
    rates = [fit_slope(g["step"], 1 - g["alignment"])[0] for _, g in late.groupby("run")]
    t_mid = float(late["step"].median())
    worst, factor, why = _shrinks(part["ngd"], T / NGD_GLOBAL.param("decade"), T)
    polyak_worst, polyak_factor, polyak_why = _shrinks(part["polyak"], config.record_every, T)
    checks = [
        NGD_GLOBAL.less(worst, factor, spread=why),
        NGD_RATE.less(
            max(rates),
            NGD_RATE.param("slope") + 1 / math.log(t_mid),
            spread=f"the local slope of log t / t, -1 + 1/ln t at the median step {t_mid:g}",
        ),  # fmt: skip
        _gd_direction(gd_iterates, sol.W, T),
        *_gd_log_norm(part["gd"], float(sol.W.norm()), config.record_every),
        POLYAK_GLOBAL.less(
            polyak_worst,
            polyak_factor,
            spread=f"{polyak_why}; L - L_* from the margins, so no float64 floor stops the steps",
        ),  # fmt: skip
    ]
    return frame, checks


def _gd_direction(iterates: dict, W_mm: torch.Tensor, T: int) -> Check:
    """Thm 6: ``1 - corr(W_T - W_t0, W_mm)`` of every GD run, ``t0`` the record nearest ``T / decade`` (spec §8.8;
    the bounded-offset derivation is :data:`GD_DIRECTION`'s reading)."""
    steps = iterates["step"].to(torch.float64)
    t0 = int(steps[int((steps - T / GD_DIRECTION.param("decade")).abs().argmin())])
    moved = iterates["W"][-1] - iterates["W"][int((steps == t0).nonzero()[0, 0])]  # (R, d, d): W_T - W_t0
    gaps = 1 - cosine(moved, W_mm)  # spec §8.8 [D]: -> 0 along W_mm ln t + rho_t, rho_t bounded
    return GD_DIRECTION.less(
        float(gaps.max()), support=len(gaps),
        spread=f"the worst of {len(gaps)} directions (median {float(gaps.median()):.3g}), displacement from t0 = {t0} "
        f"to T = {T}; ours: a limit direction off W_mm by 1 - corr >= {GD_DIRECTION.param('bound'):g} fails",
    )  # fmt: skip


def _gd_log_norm(gd: pd.DataFrame, w_mm: float, record_every: int) -> list[Check]:
    """Lemma 1's constant of GD's log t growth from every direction: the ratio farthest from 1 of the slope of
    ``||W_t||`` on ``ln t`` over the last decade over ``||W_mm||``; and the old reading, the log fit against the power
    fit of the median run (revision 2)."""
    growths = [log_growth(g["step"], g["norm"], w_mm, GD_LOG_NORM.param("decade")) for _, g in gd.groupby("run")]
    worst = max(growths, key=lambda g: abs(g.ratio - GD_LOG_NORM.param("ratio")))  # spec §8.8: every direction
    ratios = [g.ratio for g in growths]
    current = GD_LOG_NORM.close(
        GD_LOG_NORM.param("ratio"), worst.ratio, atol=worst.tolerance,
        spread=f"{worst.spread()}; the worst of {len(growths)} directions (ratios {min(ratios):.4g} to "
        f"{max(ratios):.4g})",
    )  # fmt: skip
    old, T = GD_LOG_NORM.revised(2), int(gd["step"].max())
    median = at_steps(
        gd.groupby("step")["norm"].median().reset_index(),
        geometric_steps(T, first=max(record_every, T // old.param("first"))),
    )
    return [current, old.rate_shape(median["step"], median["norm"], "log")]


def short_windows(records: np.ndarray, steps: int) -> str | None:
    """Why the records of the direction runs (``steps`` steps) leave a window of :func:`directions` too few points,
    or None (:class:`~attnlab.experiments.implicit_bias.rates.RatesConfig` refuses such a run)."""
    late = records[records >= steps // NGD_RATE.param("half")]
    if len(late) < 2:
        return (
            f"ngd-rate fits a slope per direction over the records t >= steps // 2, >= 2 of them (it holds {len(late)})"
        )
    decade = records[records >= steps / GD_LOG_NORM.param("decade")]
    if len(decade) < 2:
        return (
            f"gd-log-norm fits a slope over the last decade [steps / 10, steps], >= 2 records (it holds {len(decade)})"
        )
    t0 = nearest_record(records, steps / NGD_GLOBAL.param("decade"))  # _shrinks reads the records with step 0
    if not 1 < t0 < steps:
        return (
            f"ngd-global reads the record nearest steps / 10, t0 = {t0}, against steps through ln steps / ln t0, "
            "which needs 1 < t0 < steps"
        )
    return None


# ---- item 7: Polyak's step length at random W ----------------------------------------------------------------------

_RANDOM_W = "random_W random W, ||W|| log-spaced from 0.1 to 10, on the Example-1 data set of the config's seed"
POLYAK_UPPER = _claim(
    "the library's uncapped Polyak step (polyak_step_size) has length <= ||W_mm|| / min_i phi_opt at random W (max "
    "of ratio/bound): a property of our step rule against Thm 7's bound [D]", "001:Thm7", "§8.7", kind="property",
    id="polyak-step-upper",
    reading=Reading(
        "max over the random W with L >= L_* of polyak_step_size(L, L_*, ||g||^2) ||g|| / (||W_mm|| / min_i "
        "phi_opt,i(W)), the library's Polyak step", "no steps", f"{_RANDOM_W}; those with L(W) >= L_*",
        "<= 1 (Thm 7's bound [D])", {"bound": 1.0}, (*_DATA, "random_W"),
    ),
)  # fmt: skip


def polyak_bounds(config, data, sol) -> tuple[pd.DataFrame, list[Check]]:
    """Item 7: ``(L - L_*)/||grad L|| <= ||W_mm|| / min_i phi_opt`` at random ``W`` for the library's Polyak step (a
    property); the lower bound ``e^{-Delta_max}/(2B^2)`` is drawn, and unit-tested (it holds at every ``W``)."""
    gen = torch.Generator().manual_seed(config.seed + 3)
    G = torch.randn(config.random_W, config.d, config.d, generator=gen, dtype=torch.float64)
    scales = torch.logspace(-1, 1, config.random_W, dtype=torch.float64)  # ||W|| from 0.1 to 10
    W = scales[:, None, None] * G / torch.linalg.matrix_norm(G)[:, None, None]
    _, log_grad, log_risk = gradient_direction(data.X, data.Z, data.y, data.v, W, config.loss)
    grad_norm = log_grad.exp()
    L_star, loss = float(optimal_loss(data.X, data.y, data.v, data.select, config.loss)), log_risk.exp()
    gap_length = (loss - L_star) / grad_norm  # spec §8.7: the uncapped Polyak step's length (L - L_*) / ||g||
    valid = loss >= L_star  # the Polyak step is defined where L >= L_* (every W when L_* is the infimum)
    length = polyak_step_size(loss[valid], L_star, grad_norm[valid] ** 2) * grad_norm[valid]  # spec A3
    low = math.exp(-float(largest_gap(data.X, data.y, data.v, data.select))) / (
        2 * float(token_bound(data.X)) ** 2
    )  # spec §8.7 [D]
    high = float(sol.W.norm()) / selected_probabilities(data.X, data.Z, W, data.select).amin(-1)  # spec §8.7 [D]
    frame = pd.DataFrame({
        "part": "polyak_random_W", "run": np.arange(config.random_W), "step": 0, "norm": scales.numpy(),
        "polyak_length": gap_length.numpy(), "polyak_upper": high.numpy(), "polyak_lower": low,
    })  # fmt: skip
    checks = [
        POLYAK_UPPER.less(
            float((length / high[valid]).max()) if bool(valid.any()) else math.nan,
            POLYAK_UPPER.param("bound"),
            support=int(valid.sum()),
            spread=f"Thm 7's bound [D]; the library's Polyak step size at the {int(valid.sum())} W with L >= L_*",
        ),
    ]
    return frame, checks


# the quick direction runs grew from 8 to 20 directions (spec §8.3: >= 20 to test globality)
_DIRECTIONS_OLD = old_sizes(
    {"rho": 1.0, "sigma": 2.0, "loss": "exp", "seed": 0, "direction_norm": 1.0, "eta": 0.1, "gd_lr": 1.0},
    n=(4, 3), T=(4, 3), d=(64, 16), directions=(24, 8), steps=(2000, 1000), record_every=(20, 10),
)  # fmt: skip
_MORE = "2026-11-29"
_TWENTY = (
    "the quick direction runs grew from 8 to 20 random directions, the spec's least number to test globality "
    "(§8.3: >= 20); the run costs about 0.1 s more. This reading is unchanged"
)


CLAIMS = (
    STEP_LENGTH, LEMMA7_LOWER, NORM_RATIO, LEMMA1,
    NGD_GLOBAL.resized(_DIRECTIONS_OLD, _MORE, _TWENTY, "pass: 0.0117 <= 0.15 (t0 = 100, t1 = 1000)"),
    NGD_RATE.resized(_DIRECTIONS_OLD, _MORE, _TWENTY, "pass: -1.97 <= -0.849"),
    GD_DIRECTION,
    GD_LOG_NORM.resized(_DIRECTIONS_OLD, _MORE, _TWENTY, "pass: 0.9216 within 1 +- 0.158 (ratios 0.9216 to 0.9258)"),
    POLYAK_GLOBAL.resized(_DIRECTIONS_OLD, _MORE, _TWENTY, "pass: 0.000148 <= 0.03 (t0 = 10, t1 = 1000)"),
    POLYAK_UPPER,
)  # fmt: skip
# the rows are built by the claims as declared (with the sizes' revision), the ones the run is judged against
NGD_GLOBAL, NGD_RATE, GD_LOG_NORM, POLYAK_GLOBAL = CLAIMS[4], CLAIMS[5], CLAIMS[7], CLAIMS[8]
