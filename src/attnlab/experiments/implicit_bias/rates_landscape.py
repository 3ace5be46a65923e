"""Lemmas 2 and 5 where they have content: the key correlation at ``W`` off ``W_mm``'s ray, and the monotone optimal
score of violated samples over the first steps of NGD, GD and Polyak from random directions.

Spec: docs/theory/implicit-bias-ngd.md §8 items 5 and 6 (Lemmas 5 and 2), §4 A1-A3, §5. Lemma 6 and Thm 7's lower
step-length bound hold at every ``W`` for every loss, head and temperature of their class, so no mechanism of the
landscape can fail them: they are unit tests (``tests/experiments/test_implicit_bias_landscape.py``).
"""

from __future__ import annotations

import math

import torch

from attnlab.experiments.implicit_bias.common import GD_RULE, NGD_RULE, POLYAK_RULE, SOURCE, small_init, violated_drops
from attnlab.experiments.implicit_bias.falsifiers import attention_transposed, optimal_score_shifted, step_ascent
from attnlab.metrics import gradient_direction
from attnlab.training.batched import train as batched_train
from attnlab.verify import Check, Claim, Reading, Revision

ATTENTION_TRANSPOSED = attention_transposed(__name__)
STEP_ASCENT = step_ascent(__name__)
OPT_SHIFTED = optimal_score_shifted("attnlab.experiments.implicit_bias.rates")  # a hypothesis falsifier
FALSIFIERS = (ATTENTION_TRANSPOSED, STEP_ASCENT)  # OPT_SHIFTED is registered by rates_fixed

_DATA = ("n", "T", "d", "rho", "sigma", "loss", "seed")
_PATH = "the one NGD path of the Example-1 data set of the config's seed from W_0 ~ N(0, init_scale^2)"
_PATH_SIZES = (*_DATA, "init_scale", "eta", "steps")
_STARTS = (
    "directions initial W_0 with i.i.d. N(0, init_scale^2) entries (Lemma 4's small initialisation, as the NGD path's "
    "start), one Example-1 data set (config's seed); NGD (eta), GD (gd_lr) and uncapped Polyak (L_* the infimum) "
    "from each"
)
_DIRECTIONS = (
    "the directions random initial W_0 of norm direction_norm (those of the direction runs), one Example-1 data set "
    "(config's seed); NGD (eta), GD (gd_lr) and uncapped Polyak (L_* the infimum) from each"
)
_CONE = (
    "random_W points W = r ||W_mm|| V, V = (W_mm_bar + m P) / ||W_mm_bar + m P||, P a random unit direction "
    "orthogonal to W_mm, m = tan(angle to W_mm) log-spaced over [cone_low, cone_high] (5.7 to 45 degrees), at the "
    "radii r in radii; the Example-1 data set of the config's seed"
)

_OLD_LEMMA2 = Reading(
    "min over the window of <-grad L(W_t), W_mm / ||W_mm||> / <-grad L(W_t), W_t / ||W_t||>",
    "the steps with ||W_t|| >= ||W_T|| / half", _PATH, ">= 1 - eps (ours: Lemma 2 holds for every eps)",
    {"eps": 0.01, "half": 2}, _PATH_SIZES,
)  # fmt: skip
LEMMA2 = Claim(
    "key correlation (Lemma 2): <-grad L, W_mm_bar> >= (1 - eps) <-grad L, W_bar> once ||W|| >= R_eps, at W off "
    "W_mm's ray in a cone (5.7 to 45 degrees), eps = 1e-3 holding over the last decade of radii",
    "001:Lem2", f"{SOURCE} §8.6", (ATTENTION_TRANSPOSED.name,),
    id="lemma2",
    reading=Reading(
        "min over the cone's points at the radii r >= r_max / 10 of <-grad L(W), W_mm_bar> / <-grad L(W), W_bar> "
        "(a point with <-grad L, W_bar> <= 0 reads +inf where the inequality holds, -inf where not, and is counted "
        "apart); R_eps, the least radius from which every larger radius holds, reported for eps in 0.1, 0.01, 0.001",
        "the radii r in [r_max / 10, r_max] (the last decade: R_eps <= r_max / 10, ours)", _CONE,
        ">= 1 - eps, eps the least of 0.1, 0.01, 0.001 (Lemma 2 holds for every eps). Ours [D]: as r grows the "
        "gradient's weights e^(-r <A_it, V>) concentrate on the pairs of least margin under V, where <A, W_mm_bar> >= "
        "1 / ||W_mm|| >= <A, V>, so the ratio tends to >= 1 / cos(angle) > 1; the last decade puts r m >= 10 for every "
        "point (weights e^-10 off the least margin). Near the ray (angle -> 0) every model reads 1 + O(angle), so "
        "the cone starts at 5.7 degrees",
        {"eps": 1e-3, "cone_low": 0.1, "cone_high": 1.0, "radii": (1.0, 10**0.5, 10.0, 10**1.5, 100.0, 10**2.5, 1000.0)},
        (*_DATA, "random_W"),
    ),
    revisions=(
        Revision(
            _OLD_LEMMA2, "2026-11-30",
            "read only on the converged NGD path (1 - corr ~ 1e-4), where the ratio is 1 + O(angle) whatever Lemma 2 "
            "says, so plain GD passed it (1.024) and its only falsifier, optimal-score-shifted, broke a hypothesis "
            "(audit fid1, 2026-11-29, defect 4). Read now off the ray in a cone over a decade of radii, where a model "
            "with the attention logits transposed (its max-margin direction W_mm^T) fails",
            "pass: 1.00003 >= 0.99", "pass: 1.00001 >= 0.99",
            claim="key correlation (Lemma 2): <-grad L, W_mm_bar> / <-grad L, W_bar> >= 1 - eps once ||W|| is large "
            "(min over the second half of ||W||)",
        ),
    ),
)  # fmt: skip
_OLD_LEMMA5 = Reading(
    "number of (t, i) with min_t' <A_it', W_t> < 1 (sample i violates the W-SVM at W_t) and phi_opt,i(W_t+1) < "
    "phi_opt,i(W_t) - rounding", "every step t = 0..steps-1", _PATH,
    "== 0 (exact; phi drops below rounding are float64 rounding at phi ~ 1)", {"rounding": 1e-15}, _PATH_SIZES,
)  # fmt: skip
_RANDOM_START_LEMMA5 = Reading(
    "number of (rule, direction, t, i) with min_t' <A_it', W_t> < 1 (sample i violates the W-SVM at W_t) and "
    "phi_opt,i(W_t+1) < phi_opt,i(W_t) - rounding",
    "every step t = 0..window-1 (ours: the violations end within it; the count of pairs still violated at its "
    "end is reported)", _DIRECTIONS,
    "== 0 (exact; phi drops below rounding are float64 rounding at phi ~ 1). Outside Lemma 4's small "
    "initialisation (||W_0|| = 1) and Assumption 1, as every run of this experiment",
    {"rounding": 1e-15, "window": 100}, (*_DATA, "directions", "direction_norm", "eta", "gd_lr"),
)  # fmt: skip
LEMMA5 = Claim(
    "monotone opt score (Lemma 5): steps where a violated sample's phi_opt decreased, NGD, GD and Polyak from "
    "Lemma 4's small initialisation in every random direction", "001:Lem5", f"{SOURCE} §8.5",
    (STEP_ASCENT.name, OPT_SHIFTED.name),
    id="lemma5",
    reading=Reading(
        "number of (rule, start, t, i) with min_t' <A_it', W_t> < 1 (sample i violates the W-SVM at W_t) and "
        "phi_opt,i(W_t+1) < phi_opt,i(W_t) - rounding",
        "every step t = 0..window-1 (ours: the violations end within it; the count of pairs still violated at its "
        "end is reported)", _STARTS,
        "== 0 (exact; phi drops below rounding are float64 rounding at phi ~ 1). Inside Lemma 4's small "
        "initialisation, outside Assumption 1 as every run of this experiment",
        {"rounding": 1e-15, "window": 100}, (*_DATA, "directions", "init_scale", "eta", "gd_lr"),
    ),
    revisions=(
        Revision(
            _OLD_LEMMA5, "2026-11-30",
            "rested on the 14 violated (t, i) pairs of one NGD path, all in steps 0-7, and plain GD passed it (0); "
            "its only falsifier, optimal-score-shifted, broke a hypothesis (audit fid1, 2026-11-29, defect 4). Read "
            "now over the first steps of NGD, GD and Polyak from every random direction",
            "pass: 0 (margin 0.0304)", "pass: 0 (margin 0.0475)",
            claim="monotone opt score (Lemma 5): steps where a violated sample's phi_opt decreased",
        ),
        Revision(
            _RANDOM_START_LEMMA5, "2026-11-30",
            "its starts (||W_0|| = 1) lay outside Lemma 4's small initialisation, a hypothesis of Lemma 5, while the "
            "same day's change of paper 000 moved its points inside their theorems' region for that reason (review "
            "of 2026-11-30); the starts are now Lemma 4's N(0, init_scale^2) entries",
            "pass: 0 (NGD 263, GD 91, Polyak 81 violated pairs; margin 0.0284)",
            "pass: 0 (NGD 393, GD 108, Polyak 96 violated pairs; margin 0.0398)",
            claim="monotone opt score (Lemma 5): steps where a violated sample's phi_opt decreased, NGD, GD and "
            "Polyak from every random direction",
        ),
    ),
)  # fmt: skip
CLAIMS = (LEMMA2, LEMMA5)


def cone_points(config, sol) -> tuple[torch.Tensor, torch.Tensor]:
    """The unit directions ``V`` of :data:`LEMMA2`'s cone, shape ``(random_W, d, d)``, and their ``tan(angle)``."""
    W_bar = sol.W / sol.W.norm()
    gen = torch.Generator().manual_seed(config.seed + 4)
    P = torch.randn(config.random_W, config.d, config.d, generator=gen, dtype=torch.float64)
    P = P - (P * W_bar).sum((-2, -1))[:, None, None] * W_bar  # orthogonal to W_mm
    P = P / torch.linalg.matrix_norm(P)[:, None, None]
    low, high = LEMMA2.param("cone_low"), LEMMA2.param("cone_high")
    m = torch.logspace(math.log10(low), math.log10(high), config.random_W, dtype=torch.float64)
    V = W_bar + m[:, None, None] * P
    return V / torch.linalg.matrix_norm(V)[:, None, None], m


def key_correlation(config, data, sol) -> list[Check]:
    """Lemma 2 at the cone's points over a geometric grid of radii (spec §8.6); :data:`LEMMA2`'s reading."""
    W_bar, V = sol.W / sol.W.norm(), cone_points(config, sol)[0]
    radii, eps = LEMMA2.param("radii"), LEMMA2.param("eps")
    ratios, apart = [], 0
    for r in radii:
        direction, _, _ = gradient_direction(data.X, data.Z, data.y, data.v, r * float(sol.W.norm()) * V, config.loss)
        num, den = (direction * W_bar).sum((-2, -1)), (direction * V).sum((-2, -1))  # spec §8.6, both over ||grad||
        apart += int((den <= 0).sum()) if r >= radii[-1] / 10 else 0
        trivial = torch.where(num >= (1 - eps) * den, math.inf, -math.inf)  # den <= 0: the inequality itself
        ratios.append(torch.where(den > 0, num / den, trivial))
    worst = torch.stack(ratios).amin(-1)  # (radii,): the least ratio over the cone at each radius
    reached = {e: _least_radius(worst, radii, e) for e in (0.1, 0.01, 0.001)}
    last = [k for k, r in enumerate(radii) if r >= radii[-1] / 10]
    return [
        LEMMA2.greater(
            float(worst[last].min()), 1 - eps,
            spread=f"eps = {eps:g}, the least of Lemma 2's eps we read; R_eps / ||W_mm|| for eps = 0.1, 0.01, 0.001: "
            + ", ".join(f"{reached[e]:.3g}" for e in reached)
            + f" (inf: not reached on the grid); {apart} of the last decade's points with <-grad L, W_bar> <= 0; eps "
            "and the window were fixed after a probe of candidate falsifiers had shown true ratios 0.9887 at ||W|| = "
            "||W_mm|| and 1.0027 at 100 ||W_mm|| (docs/findings.md)",
        ),
    ]  # fmt: skip


def _least_radius(worst: torch.Tensor, radii: tuple, eps: float) -> float:
    """The least grid radius from which every larger one keeps the cone's least ratio ``>= 1 - eps`` (inf if none)."""
    holds = (worst >= 1 - eps).tolist()
    k = len(holds)
    while k > 0 and holds[k - 1]:
        k -= 1
    return radii[k] if k < len(holds) else math.inf


def violated_steps(config, ctx, data) -> list[Check]:
    """Lemma 5 over the first ``window`` steps of NGD, GD and uncapped Polyak from Lemma 4's small initialisation
    (spec §8.5, §7): the count of a violated sample's ``phi_opt`` falling, over every rule and start.

    Parameters
    ----------
    config : RatesConfig
        Its data fields, ``directions`` (the starts), ``init_scale``, ``eta``, ``gd_lr`` and ``loss``.
    ctx : RunContext
        For the progress bars.
    data : TokenSelectionData
        The Example-1 data set of the config's seed.

    Returns
    -------
    list of Check
        :data:`LEMMA5`'s row.
    """
    gen = torch.Generator().manual_seed(config.seed + 2)
    W0 = torch.stack([small_init(config.d, config.init_scale, gen) for _ in range(config.directions)])  # spec §7
    rounding, window = LEMMA5.param("rounding"), LEMMA5.param("window")
    failures, largest, parts = 0, -math.inf, []
    rules = (("NGD", NGD_RULE, {"lr": config.eta}), ("GD", GD_RULE, {"lr": config.gd_lr}), ("Polyak", POLYAK_RULE, {}))
    for name, rule, options in rules:  # spec A2, A1, A3 (as the direction runs)
        run = batched_train(
            data.X, data.Z, data.y, data.v, W0, param="W", optimizer=rule, loss=config.loss, steps=window,
            record_every=1, keep_iterates=True, progress=ctx.progress, **options,
        )  # fmt: skip
        drops, violated = violated_drops(data, run.iterates["W"])  # (window, R, n), (window + 1, R, n)
        failures += int((drops > rounding).sum())
        largest = max(largest, float(drops.max()))
        parts.append(f"{name} {int(violated[:-1].sum())} violated pairs, {int(violated[-1].sum())} at step {window}")
    return [
        LEMMA5.holds(
            0, failures,
            f"exact (phi drops below {rounding:g} are rounding); margin: rounding minus the largest drop; "
            + "; ".join(parts),
            failures == 0, margin=rounding - largest if math.isfinite(largest) else math.inf,
        ),
    ]  # fmt: skip
