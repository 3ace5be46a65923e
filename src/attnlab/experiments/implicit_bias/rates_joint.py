"""The joint-training predictions of §8 (items 9-12): the adaptive rule A6 from zero on DM.

Spec: docs/theory/implicit-bias-ngd.md §8 items 9-12 (Theorems 2-4, Lemmas 12-14), §6.2 (DM, Condition 1),
§4 A6. Measures one run, then builds its rows from the claims declared below.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.experiments.implicit_bias.common import SOURCE
from attnlab.experiments.implicit_bias.falsifiers import (
    dm_equal_norms,
    joint_head_preconditioned,
    joint_w_not_adaptive,
    joint_w_shrunk,
    u_svm_other_token,
    w_ascent,
    w_frozen,
)
from attnlab.experiments.implicit_bias.rates_fixed import SVM_NUCLEAR
from attnlab.metrics import Metric, alignment, head_alignment, selected_probabilities
from attnlab.models import Combined
from attnlab.models.functional import _attention_probabilities as attention_probabilities
from attnlab.models.functional import _margins as margins
from attnlab.models.functional import mixtures, token_scores
from attnlab.optim import JointAdaptive
from attnlab.training import train
from attnlab.verify import (
    Check,
    Claim,
    Falsifier,
    Reading,
    Revision,
    at_steps,
    fit_slope,
    geometric_steps,
    old_sizes,
    size_change,
)


def _swap_tokens(dm):
    """DM whose selected (optimal) token is the smaller-norm one: Condition 1's norm ordering reversed (the model is
    blind to token order, so only which token the SVMs and Lemma 13's metrics call optimal changes)."""

    def swapped(*args, **kw):
        data = dm(*args, **kw)
        return TokenSelectionData(data.X.flip(1), Z=data.Z, y=data.y, v=data.v, select=data.select)

    return swapped


def _block_normalized(optimizer):
    return lambda groups, lr, normalizer="loss", **kw: optimizer(groups, lr=lr, normalizer="block_grad_norm", **kw)


def _decay_scaled(factor: float):  # A6 with alpha x factor (0: no decay)
    return lambda optimizer: lambda groups, lr, alpha=0.0, **kw: optimizer(groups, lr=lr, alpha=factor * alpha, **kw)


_RATES = "attnlab.experiments.implicit_bias.rates"  # where the DM data and both SVMs are built
U_SVM_OTHER, EQUAL_NORMS = u_svm_other_token(_RATES), dm_equal_norms(_RATES)
W_FROZEN, W_ASCENT, W_SHRUNK = w_frozen(__name__), w_ascent(__name__), joint_w_shrunk(__name__)
HEAD_PRECONDITIONED, W_NOT_ADAPTIVE = joint_head_preconditioned(__name__), joint_w_not_adaptive(__name__)
TOKENS_SWAPPED = Falsifier(
    "dm-norms-swapped",
    "DM with the selected token of the smaller norm (Condition 1 reversed; the attention is blind to token order, "
    "so only the selection changes)",
    f"{_RATES}:dm",
    _swap_tokens,
    kind="reference",  # training is unchanged: only the token the checks call optimal moves
)  # fmt: skip
NO_DECAY = Falsifier(
    "joint-no-decay", "the joint rule A6 without its (t+1)^-alpha decay (alpha = 0)", f"{__name__}:JointAdaptive",
    _decay_scaled(0.0), kind="mechanism",
)  # fmt: skip
DECAY_OFF = Falsifier(
    "joint-alpha-x1.15", "the joint rule A6 with its decay exponent alpha x 1.15 ((t+1)^(-1.15 alpha))",
    f"{__name__}:JointAdaptive", _decay_scaled(1.15), kind="mechanism",
)  # fmt: skip
BLOCK_NORMALIZED = Falsifier(
    "joint-block-normalized",
    "the joint rule A6 normalised by each block's gradient norm instead of the loss (A7 with A6's decay)",
    f"{__name__}:JointAdaptive", _block_normalized, kind="mechanism",
)  # fmt: skip
FALSIFIERS = (
    U_SVM_OTHER, TOKENS_SWAPPED, NO_DECAY, DECAY_OFF, BLOCK_NORMALIZED, W_FROZEN, EQUAL_NORMS, W_ASCENT,
    HEAD_PRECONDITIONED, W_NOT_ADAPTIVE, W_SHRUNK,
)  # and rates_fixed's  # fmt: skip


def _claim(text: str, result: str, section: str, falsifier: Falsifier | tuple[Falsifier, ...], **declared) -> Claim:
    """A claim of this module: ``falsifier`` one :class:`Falsifier` or a tuple of them; ``declared`` are its ``id``,
    ``reading`` and, where it has them, ``revisions``."""
    names = tuple(f.name for f in (falsifier if isinstance(falsifier, tuple) else (falsifier,)))
    return Claim(text, result, f"{SOURCE} {section}", falsifier=names, **declared)


_RUN = "the one joint run of A6 on the DM data set of the config's seed, (u, W) from zero (Condition 1)"
_SIZES = ("n_joint", "d_joint", "sigma_opt", "sigma_oth", "joint_lr", "alpha", "joint_steps", "loss", "seed")
_EVERY = (*_SIZES, "joint_record_every")
_OLD_SIZES = old_sizes(
    {"sigma_opt": 2.0, "sigma_oth": 1.0, "joint_lr": 0.5, "alpha": 2.0 / 3.0, "loss": "exp", "seed": 0},
    n_joint=(8, 4), d_joint=(200, 30), joint_steps=(20_000, 2000), joint_record_every=(20, 10),
)  # fmt: skip


_RESIZED = "2026-11-28"  # the quick joint run grew for u-aligns' slope reading
_GREW = (
    "the quick joint run grew from 2000 to 10000 steps, so that u-aligns' slope reading (its revision 1) can fail a "
    "head preconditioned towards another direction; this reading is unchanged"
)
_LOSS_TEXT = "joint loss (Thm 2): -log L(theta_t) grows like t^(1-alpha): log-log slope over the last decade"
_LOSS_SLOPE = Reading(
    "least-squares slope of log(-log L(theta_t)) on log t", "the recorded steps nearest geometric_steps(T, "
    "first=1, 8 per decade) with t >= T / decade (the last decade)", _RUN,
    "1 - alpha +- max(drift, 1/ln T), drift = |slope(last decade) - slope([T/decade^2, T/decade))|: Thm 2's rate "
    "up to constants and lower-order terms", {"decade": 10}, _EVERY,
)  # fmt: skip
LOSS_RATE = _claim(
    "joint loss (Thm 2): -log L(theta_t) grows like t^(1-alpha): its per-step gain falls like t^(-alpha) (log-log "
    "slope + 1 over the last decade)", "001:Thm2", "§8.9", (NO_DECAY, DECAY_OFF),
    id="loss-rate",
    reading=Reading(
        "1 + least-squares slope of log g'(t) on log t, g'(t) = (g(t_k+1) - g(t_k)) / (t_k+1 - t_k) between "
        "consecutive records, g = -log L(theta_t), at their geometric midpoints", "the pairs whose midpoint lies in "
        "the last decade [T / decade, T]", _RUN,
        "1 - alpha +- max(drift, floor), drift = |estimate(last decade) - estimate([T/decade^2, T/decade))|. Thm 2's "
        "bound comes from A6's step (t+1)^(-alpha) times a gain per unit step bounded below (Lemma 3), so g' ~ "
        "t^(-alpha); a constant offset in g, which biases the log-log slope of g itself by about 1/ln T, cancels in "
        "g'. floor = 0.01 ours: the reading resolves an error of 1.5% in alpha",
        {"decade": 10, "floor": 0.01}, _EVERY,
    ),
    revisions=(
        size_change(_LOSS_SLOPE, _OLD_SIZES, _RESIZED, _GREW, "pass: 0.425 against 1/3 +- 0.19 (700ea6b)",
                    claim=_LOSS_TEXT),
        Revision(
            _LOSS_SLOPE, "2026-11-28",
            "too weak to fail: A6 with its exponent alpha x 1.15 passed at both sizes (0.312 quick and 0.320 full, "
            "against the prediction 1/3 +- 0.109 and +- 0.107; the true run 0.384 and 0.387). -log L = c t^(1-alpha) "
            "+ e with an offset e biases the log-log slope of -log L upwards (true +0.05, alpha x 1.15 +0.08 to "
            "+0.09). The per-step gain's exponent cancels the offset: true 0.3334 at both sizes, alpha x 1.15 0.2335 "
            "quick and 0.2338 full (now the falsifier 'joint-alpha-x1.15'), alpha x 0.85 0.4334. The run recomputes "
            "this reading at the current sizes beside the current row",
            "pass: 0.384 against 1/3 +- 0.109 (35538ac)", "pass: 0.387 against 1/3 +- 0.10 (35538ac)",
            claim=_LOSS_TEXT,
        ),
    ),
)  # fmt: skip
LOSS_CONSTANT = _claim(
    "joint loss (Thm 2, its constant [D]): -log L(theta_t) gains eta (t+1)^(-alpha) / ||u_mm||^2 per step: the gain "
    "over the last decade over eta sum (t+1)^(-alpha) tends to 1/||u_mm||^2", "001:Thm2", "§8.9",
    (W_FROZEN, NO_DECAY, DECAY_OFF),
    id="loss-constant",
    reading=Reading(
        "(g(T) - g(t0)) / (eta sum_{s=t0}^{T-1} (s+1)^(-alpha)), g = -log L(theta_t), u_mm the u-SVM of the optimal "
        "tokens", "t0 the recorded step nearest T / decade, T the last", _RUN,
        "1/||u_mm||^2 within rtol, ours [D]: A6's step gains g_t+1 - g_t = eta (t+1)^(-alpha) (||grad_u L||^2 + "
        "||grad_W L||^2) / L^2 to first order; once the attention saturates ||grad_W L|| / L -> 0 and grad_u L / L "
        "-> -sum_i p_i y_i x_i,opt, p_i = l_i / sum_j l_j -> the u-SVM's dual weights over their sum ||u_mm||^2, so "
        "||grad_u L|| / L -> 1/||u_mm||; Thm 2's exp(-c t^(1-alpha)) with c = eta / ((1 - alpha) ||u_mm||^2). rtol "
        "ours: the second-order term of the step (relative eta t^(-alpha) / ||u_mm||^2) and the lower-order terms "
        "of the dual weights' approach", {"decade": 10, "rtol": 0.05, "atol": 0.0}, _EVERY,
    ),
)  # fmt: skip
W_LOG_NORM = _claim(
    "joint W (Lemma 12): ||W_t|| = Theta(log t), not a power (geometric steps)", "001:Lem12", "§8.10",
    (BLOCK_NORMALIZED, W_NOT_ADAPTIVE, W_SHRUNK),
    id="w-log-norm",
    reading=Reading(
        "relative RMS residuals of the fits ||W_t|| ~ a + b log t and ||W_t|| ~ c t^a", "the recorded steps nearest "
        "geometric_steps(T, first=max(joint_record_every, T // first), 8 per decade)", _RUN,
        "the log fit has the smaller residual, over at least min_decades decades of t",
        {"min_decades": 2.0, "first": 100}, _EVERY,
    ),
    revisions=(
        Revision(
            Reading(
                "relative RMS residuals of the fits ||W_t|| ~ a + b log t and ||W_t|| ~ c t^a", "the recorded steps "
                "nearest geometric_steps(T, first=joint_record_every, 8 per decade): from the first record", _RUN,
                "the log fit has the smaller residual, over at least min_decades decades of t",
                {"min_decades": 2.0}, _EVERY,
            ),
            "2026-11-25",
            "from the first record at the quick size of the time (600 joint steps recorded every 2: points [2, 600]) "
            "the power fit won: the norm grows from W_0 = 0, so the first decade is a start-up. The window moved to "
            "[T/100, T] and the quick size to 2000 steps recorded every 10. Established from "
            "docs/experiments/implicit-bias.md at 09bab5a (the change of 72bea5f); the run recomputes this reading "
            "at the current sizes beside the current row.",
            "fail: the power fit better over [2, 600] (the docs of 09bab5a give no numbers); recomputed at cdadd74 "
            "with 600 steps recorded every 2: log-fit RMS 3.28, power-fit RMS 0.53 (a = 0.70), fail",
            "not run at the full size before it was replaced; the run recomputes it at the full size ([20, 20000])",
            sizes=old_sizes(
                {"sigma_opt": 2.0, "sigma_oth": 1.0, "joint_lr": 0.5, "alpha": 2.0 / 3.0, "loss": "exp", "seed": 0},
                n_joint=(8, 4), d_joint=(200, 30), joint_steps=(20_000, 600), joint_record_every=(20, 2),
            ),
        ),
    ),
)  # fmt: skip
_W_LOG_SLOPES = Reading(
    "the least-squares slope of ||W_t|| on ln t over the last decade over its slope over the decade before; and the "
    "relative RMS residuals of the fits ||W_t|| ~ a + b log t and ||W_t|| ~ c t^a", "the recorded steps in [T / "
    "decade, T] and in [T / decade^2, T / decade); the fits on the recorded steps nearest geometric_steps(T, "
    "first=max(joint_record_every, T // first), 8 per decade)", _RUN,
    "slope ratio >= ratio and the log fit has the smaller residual, over at least min_decades decades of t. Ours: "
    "a ln t + b keeps its slope over every decade (ratio 1), a norm that levels off loses it (ratio -> 0), ratio "
    "is halfway; the fits' comparison fails a power growth (A6 normalised per block)",
    {"min_decades": 2.0, "first": 100, "decade": 10, "ratio": 0.5}, _EVERY,
)  # fmt: skip


def _strengthened(claim: Claim) -> Claim:
    """w-log-norm after its 2026-11-29 revision: the reading :data:`_W_LOG_SLOPES`, the old one kept as revision 3."""
    old = Revision(
        claim.reading, "2026-11-29",
        "too weak to fail: A6 without its 1/L factor on the W block (now the falsifier 'joint-w-not-adaptive'), "
        "whose ||W_t|| levels off, passed the log-against-power comparison at the quick size: log-fit RMS 0.0332 < "
        "power-fit RMS 0.0338 (a = 0.03) (audit fid1, 2026-11-29); the project had retired the same comparison for "
        "GD's norm on 2026-11-28 (gd-log-norm) for the same weakness. A log growth keeps the slope of ||W_t|| on "
        "ln t from decade to decade, a norm that levels off loses it, so the reading now also asks the last "
        "decade's slope to be at least half the decade before's. The run recomputes this reading beside the row",
        "pass: log-fit RMS 0.0194, power-fit RMS 0.0475 (a = 0.18)",
        "pass: log-fit RMS 0.0212, power-fit RMS 0.0564 (a = 0.2)",
    )  # fmt: skip
    return dataclasses.replace(claim, reading=_W_LOG_SLOPES, revisions=(*claim.revisions, old))


W_ALIGNS = _claim(
    "joint W (Thm 3): 1 - corr(W_t, W_mm) falls over the last decade at least as fast as 1/log t", "001:Thm3",
    "§8.10", (EQUAL_NORMS, SVM_NUCLEAR),
    id="w-aligns",
    reading=Reading(
        "gap(T) / gap(t0), gap = 1 - corr(W_t, W_mm)", "t0 the recorded step t > 0 nearest T / decade, T the last",
        _RUN, "<= ln t0 / ln T: the factor by which C / log t shrinks from t0 to T (Thm 3's O(1/log t))",
        {"decade": 10}, _EVERY,
    ),
)  # fmt: skip
_U_RATIO = Reading(
    "gap(T) / gap(t0), gap = 1 - corr(u_t, u_mm), u_mm the u-SVM of the optimal tokens", "t0 the recorded step "
    "t > 0 nearest T / decade, T the last", _RUN,
    "<= ln t0 / ln T: C / log t (Thm 4 gives no rate; Thm 3's for W is the slowest we accept)",
    {"decade": 10}, _EVERY,
)  # fmt: skip
U_ALIGNS = _claim(
    "joint u (Thm 4): 1 - corr(u_t, u_mm) falls like a bounded offset from u_mm's direction: over the last "
    "half-decade its log-log slope is at most -k, k the slope of log ||u_t||", "001:Thm4", "§8.11",
    (W_FROZEN, U_SVM_OTHER, HEAD_PRECONDITIONED),
    id="u-aligns",
    reading=Reading(
        "least-squares slope of log(1 - corr(u_t, u_mm)) on log t, u_mm the u-SVM of the optimal tokens; k the "
        "least-squares slope of log ||u_t|| on log t over the same records", "every recorded step t >= T / "
        "sqrt(decade) (the last half-decade), T the last recorded step", _RUN,
        "<= -k, ours (Thm 4 gives no rate for u): u_t = c_t u_mm + a bounded offset leaves 1 - corr ~ ||u_t||^-2 "
        "(slope -2k), a head that tends to another direction levels off (slope -> 0); -k is halfway. Under A6 "
        "||u_t|| grows like a power of t near 1/3",
        {"decade": 10}, _EVERY,
    ),
    revisions=(
        Revision(
            _U_RATIO, "2026-11-28",
            "too weak to fail: the last-decade ratio against ln t0 / ln T passed with the head's gradient times "
            "diag(linspace(0.9, 1.1)) in A6 (now the falsifier 'joint-head-preconditioned'): 0.27 at the quick size "
            "and 0.41 at the full size, against 0.70 and 0.77; its gap still shrinks over the last decade before it "
            "levels off. The slope over the last half-decade against the head's own growth separates it: at the "
            "quick size with 10000 steps the true run reads -0.732 against -k = -0.372, the preconditioned head "
            "-0.257; at the full size -0.738 against -0.375, and -0.296. At the old quick size (2000 steps) the "
            "preconditioned head read -0.482 against -0.403 and passed, so the quick size grew to 10000 steps; the "
            "full size is unchanged. The run recomputes this reading at the current sizes beside the current row",
            "pass: 0.157 <= 0.697 (t0 = 200, T = 2000) (700ea6b)",
            "pass: 0.176 <= 0.767 (t0 = 2000, T = 20000) (700ea6b)",
            claim="joint u (Thm 4): 1 - corr(u_t, u_mm) falls over the last decade at least as fast as 1/log t",
            sizes=_OLD_SIZES,
        ),
    ),
)  # fmt: skip
U_MARGIN = _claim(
    "joint u (Thm 4): normalised opt-token margin of u_T, as a fraction of 1/||u_mm||, in (0.5, 1]", "001:Thm4",
    "§8.11", (EQUAL_NORMS, U_SVM_OTHER),
    id="u-margin",
    reading=Reading(
        "min_i y_i u_T^T x_i,opt ||u_mm|| / ||u_T||", "the last recorded step T", _RUN,
        "in (low, 1 + solver]: no head has a larger normalised margin than the u-SVM's (solver: its accuracy); "
        "low ours (Thm 4's fraction was lost)", {"low": 0.5, "solver": 1e-6}, _EVERY,
    ),
)  # fmt: skip
GAPS = _claim(
    "Lemma 13 (ii): min_i score gap gamma_i1 - gamma_i2 positive and non-decreasing (recorded drops)", "001:Lem13",
    "§8.12", (EQUAL_NORMS, TOKENS_SWAPPED),
    id="lemma13-gaps",
    reading=Reading(
        "number of recorded steps where min_i (gamma_i,opt - gamma_i,other) fell by more than rounding from the "
        "previous record, and its minimum", "every recorded step t >= joint_record_every", _RUN,
        "no drop and the minimum > 0 (exact, rounding for float64)", {"rounding": 1e-12}, _EVERY,
    ),
)  # fmt: skip
PHI = _claim(
    "Lemma 13 (iii): min_i phi_opt >= 1/2 and non-decreasing (recorded drops)", "001:Lem13", "§8.12",
    (EQUAL_NORMS, TOKENS_SWAPPED),
    id="lemma13-phi",
    reading=Reading(
        "number of recorded steps t >= joint_record_every where min_i phi_opt,i fell by more than rounding from the "
        "previous record, and min_i phi_opt,i over every recorded step", "every recorded step", _RUN,
        "no drop and the minimum >= bound (exact, rounding for float64)", {"rounding": 1e-12, "bound": 0.5}, _EVERY,
    ),
)  # fmt: skip
SEPARABLE = _claim(
    "Lemma 14: the attention outputs stay separable by the u-SVM's direction: min_i y_i u_mm^T X_i^T phi_i > 0",
    "001:Lem14", "§8.12", (W_ASCENT, TOKENS_SWAPPED),
    id="lemma14-separable",
    reading=Reading(
        "min over recorded t and samples i of y_i u_mm^T X_i^T phi_i(W_t) / ||u_mm||, phi_i the attention of the "
        "query on sample i's tokens", "every recorded step", _RUN,
        "> 0: every sample's attention output on the positive side of u_mm (Lemma 14's separability; its set's "
        "thresholds are lost, so the reading is all samples)", {}, _EVERY,
    ),
)  # fmt: skip
CLAIMS = (
    LOSS_RATE,
    LOSS_CONSTANT,
    _strengthened(
        W_LOG_NORM.resized(
            _OLD_SIZES, _RESIZED, _GREW, "pass: log-fit RMS 0.0378, power-fit RMS 0.137 (a = 0.331) (700ea6b)"
        )
    ),
    W_ALIGNS.resized(_OLD_SIZES, _RESIZED, _GREW, "pass: 0.387 <= 0.697 (t0 = 200, T = 2000) (700ea6b)"),
    U_ALIGNS,
    U_MARGIN.resized(_OLD_SIZES, _RESIZED, _GREW, "pass: 0.982 in (0.5, 1] (700ea6b)"),
    GAPS.resized(_OLD_SIZES, _RESIZED, _GREW, "pass: no drop, min gap 0.493 > 0 (700ea6b)"),
    PHI.resized(_OLD_SIZES, _RESIZED, _GREW, "pass: no drop, min 0.5 >= 0.5 (700ea6b)"),
    SEPARABLE.resized(_OLD_SIZES, _RESIZED, _GREW, "pass: 0.451 > 0 (700ea6b)"),
)
# the rows are built by the claims as declared (with the sizes' revision), the ones the run is judged against
LOSS_RATE, LOSS_CONSTANT, W_LOG_NORM, W_ALIGNS, U_ALIGNS, U_MARGIN, GAPS, PHI, SEPARABLE = CLAIMS


def _metrics(data, u_mm: torch.Tensor, loss: str) -> list[Metric]:
    """Per-run summaries recorded along joint training (spec §8.11-12): margins, gaps, loss ratio, separation."""

    def min_gap(state):
        g = token_scores(data.X, data.y, state["v"])  # (n, 2), with the current head
        return (g[:, 0] - g[:, 1]).min()  # spec §8.12 (ii): gamma_i1 - gamma_i2

    def log_loss_ratio(state):
        z = margins(data.X, data.Z, data.y, state["v"], state["W"])  # y_i f(X_i); exp loss: log l_i = -z_i
        return z.max() - z.min()  # spec §8.12 (i): log max_ij l_i / l_j

    def u_margin(state):
        x_opt, v = data.X[torch.arange(data.n), data.select], state["v"]
        return (data.y * (x_opt @ v)).min() / v.norm() * u_mm.norm()  # spec §8.11

    def separation(state):
        mixed = mixtures(data.X, attention_probabilities(data.X, state["W"], data.Z))  # (n, d): X_i^T phi_i
        return (data.y * (mixed @ u_mm)).min() / u_mm.norm()  # spec §8.12 (Lemma 14)

    return [
        Metric("min_score_gap", min_gap),
        Metric(
            "min_opt_softmax", lambda state: selected_probabilities(data.X, data.Z, state["W"], data.select).min()
        ),  # spec §8.12 (iii)
        Metric("log_loss_ratio", log_loss_ratio),
        Metric("u_margin_fraction", u_margin),
        Metric("min_separation", separation),
        Metric("head_norm", lambda state: state["v"].norm()),
    ]


def joint_rates(config, ctx, data, W_mm: torch.Tensor, u_mm: torch.Tensor) -> tuple[pd.DataFrame, list[Check], str]:
    """Items 9-13: the joint adaptive rule A6 from zero on DM ``data``, against the W-SVM and the u-SVM.

    Returns the recorded frame, the rows, and the note that reports Lemma 13 (i).
    """
    model = Combined(config.d_joint, train_head=True)  # Condition 1: u_0 = 0, W_0 = 0
    optimizer = JointAdaptive(
        [{"params": [model.v]}, {"params": [model.weight]}], lr=config.joint_lr, alpha=config.alpha, normalizer="loss"
    )  # spec A6
    metrics = [alignment(W_mm), head_alignment(u_mm), *_metrics(data, u_mm, config.loss)]
    frame = train(
        model, optimizer, data, config.loss, config.joint_steps, config.joint_record_every, metrics,
        progress=ctx.progress,
    ).frame.assign(part="joint")  # fmt: skip
    T = config.joint_steps
    checks = [
        _loss_rate(frame, T, config.alpha),
        _loss_slope(frame, T, config.alpha),
        _loss_constant(frame, T, config, float(u_mm.norm())),
        *_w_log_norm(frame, T, config.joint_record_every),
        W_LOG_NORM.revised(1).rate_shape(*_geometric(frame, "norm", config.joint_record_every, T), "log"),
        _decade(W_ALIGNS, frame, "alignment", T),
        _head_slope(frame, T),
        _decade(U_ALIGNS.revised(1), frame, "head_alignment", T),
        _margin_check(float(frame["u_margin_fraction"].iloc[-1])),
        *_lemma13(frame, config.joint_record_every),
        _separation_check(frame),
    ]
    return frame, checks, loss_ratio_note(frame, T)


def check_joint_steps(steps: int, every: int) -> None:
    """Refuse a joint run whose w-log-norm window spans under the 2 decades its log-against-power fit needs.

    The window reads the records nearest :func:`geometric_steps` from ``max(every, steps // first)`` to ``steps``
    (:func:`joint_rates`), so it spans ``log10(steps / t0)`` decades, ``t0`` the record nearest that start (the
    earlier on a tie); >= 2 decades also leaves every other window of the joint rows >= 8 records.

    Raises
    ------
    ValidationError
        Naming ``joint_steps``, its value and the fix (ours: what the fit needs).
    """
    start = max(every, steps // W_LOG_NORM.param("first"))
    below = start // every * every
    t0 = min((t for t in (below, below + every, steps) if t <= steps), key=lambda t: (abs(t - start), t))
    if math.log10(steps / t0) < W_LOG_NORM.param("min_decades"):
        raise ValidationError(
            f"joint_steps == {steps} with joint_record_every == {every}: w-log-norm's log-against-power fit reads the "
            f"records from t0 = {t0}, the one nearest max(joint_record_every, joint_steps // 100) = {start}, to "
            f"joint_steps, a ratio joint_steps / t0 = {steps / t0:.4g} under the 100 (2 decades) it needs: joint_steps "
            f"must be >= 100 x joint_record_every = {100 * every}, with t0 <= joint_steps / 100 (every multiple of "
            f"{100 * every} is) (ours)"
        )


def _w_log_norm(frame: pd.DataFrame, T: int, every: int) -> list[Check]:
    """Lemma 12's Theta(log t): the slope of ``||W_t||`` on ``ln t`` keeps at least ``ratio`` of its value from the
    decade before to the last, and the log fit beats the power fit (spec §8.10); then the old reading, the fits
    alone (revision 3)."""
    decade, ratio = W_LOG_NORM.param("decade"), W_LOG_NORM.param("ratio")
    rows = frame[frame["step"] > 0]
    t, norm = rows["step"].to_numpy(dtype=float), rows["norm"].to_numpy()

    def slope(low: float, high: float, last: bool) -> float:
        inside = (t >= low) & ((t <= high) if last else (t < high))
        return fit_slope(t[inside], norm[inside], logy=False)[0]  # spec §8.10: d||W_t|| / d ln t

    last, before = slope(T / decade, T, True), slope(T / decade**2, T / decade, False)
    fits = W_LOG_NORM.revised(3).rate_shape(*_geometric(frame, "norm", max(every, T // W_LOG_NORM.param("first")), T),
                                            "log")  # fmt: skip
    kept = last / before if before > 0 else -math.inf
    margin = min((kept - ratio) / ratio, fits.margin if fits.margin is not None else -math.inf)
    current = W_LOG_NORM.holds(
        f"slope ratio >= {ratio:g} and log shape",
        f"slope ratio {kept:.4g} ({last:.4g} / {before:.4g}); {fits.measured}",
        f"ours: the slope of ||W_t|| on ln t over [T/{decade:g}, T] at least {ratio:g} x that over [T/{decade**2:g}, "
        f"T/{decade:g}) (a log growth keeps it, a norm that levels off loses it) and {fits.tolerance}; margin: the "
        "smaller of the ratio's relative excess and the fits' residual advantage",
        bool(kept >= ratio and fits.passed), margin=margin,
    )  # fmt: skip
    return [current, fits]


def _geometric(frame: pd.DataFrame, column: str, first: int, T: int) -> tuple[pd.Series, pd.Series]:
    rows = at_steps(frame, geometric_steps(T, first=first))
    return rows["step"], rows[column]


def _gain_exponent(t: np.ndarray, gain: np.ndarray, low: float, high: float) -> float:
    """``1 +`` the log-log slope of the per-step gain ``g'`` between consecutive records whose geometric midpoint
    lies in ``[low, high]``: the exponent of ``g = -log L ~ c t^beta`` with any constant offset cancelled."""
    rate, middle = np.diff(gain) / np.diff(t), np.sqrt(t[1:] * t[:-1])
    inside = (middle >= low) & (middle <= high)
    slope, _ = fit_slope(middle[inside], rate[inside])  # spec §8.9: g' ~ t^(beta - 1)
    return 1.0 + slope


def _loss_rate(frame: pd.DataFrame, T: int, alpha: float) -> Check:
    """Thm 2: ``-log L ~ c t^(1-alpha)``, read from the per-step gain over the last decade, within its drift from
    the decade before (at least the reading's floor)."""
    rows = frame[frame["step"] > 0]
    t, gain = rows["step"].to_numpy(dtype=float), -rows["log_loss"].to_numpy()
    decade, floor = LOSS_RATE.param("decade"), LOSS_RATE.param("floor")
    last, before = _gain_exponent(t, gain, T / decade, T), _gain_exponent(t, gain, T / decade**2, T / decade)
    drift = abs(last - before)
    return LOSS_RATE.close(
        1 - alpha, last, atol=max(drift, floor),
        spread=f"the exponent's drift from the decade before ({drift:.3g}), at least {floor:g} (ours)",
    )  # fmt: skip


def _loss_constant(frame: pd.DataFrame, T: int, config, u_mm_norm: float) -> Check:
    """Thm 2's constant [D]: the gain of ``-log L`` over the last decade over ``eta sum (s+1)^(-alpha)``, against
    ``1 / ||u_mm||^2`` (spec §8.9; :data:`LOSS_CONSTANT` says why)."""
    rows = frame[frame["step"] > 0]
    t0_row = rows.iloc[int(np.abs(rows["step"].to_numpy() - T / LOSS_CONSTANT.param("decade")).argmin())]
    t0, g0, gT = int(t0_row["step"]), -float(t0_row["log_loss"]), -float(rows["log_loss"].iloc[-1])
    steps = np.arange(t0, T, dtype=float)
    schedule = config.joint_lr * float(((steps + 1) ** -config.alpha).sum())  # spec A6: eta (t+1)^-alpha per step
    return LOSS_CONSTANT.close(
        1 / u_mm_norm**2, (gT - g0) / schedule,
        spread=f"ours: the step's second-order term and the dual weights' approach; -log L from {g0:.4g} at t0 = {t0} "
        f"to {gT:.4g} at T = {T}, ||u_mm|| = {u_mm_norm:.6g}",
    )  # fmt: skip


def _loss_slope(frame: pd.DataFrame, T: int, alpha: float) -> Check:
    """Revision 2 of loss-rate: the log-log slope of ``-log L`` itself on the last decade, within its drift from the
    decade before (at least ``1/ln T``)."""
    old = LOSS_RATE.revised(2)
    t, y = _geometric(frame.assign(gain=-frame["log_loss"]), "gain", 1, T)
    decade = old.param("decade")
    last, before = t >= T / decade, (t >= T / decade**2) & (t < T / decade)
    slope_last, _ = fit_slope(t[last], y[last])
    slope_before, _ = fit_slope(t[before], y[before])
    drift = abs(slope_last - slope_before)
    return old.close(
        1 - alpha, slope_last, atol=max(drift, 1 / math.log(T)),
        spread=f"the slope's drift from the decade before ({drift:.3g}), at least 1/ln T for the lower-order terms "
        "of Thm 2 (the rate holds up to constants)",
    )  # fmt: skip


def _decade(claim: Claim, frame: pd.DataFrame, column: str, T: int) -> Check:
    """``gap(T) / gap(T/10) <= ln(T/10) / ln T``: a ``C / log t`` rate (Thm 3's for W; the slowest we accept for u)."""
    rows = frame[frame["step"] > 0]
    t0_row = rows.iloc[int(np.abs(rows["step"].to_numpy() - T / claim.param("decade")).argmin())]
    t0, gap0, gap_T = int(t0_row["step"]), 1 - float(t0_row[column]), 1 - float(rows[column].iloc[-1])
    return claim.less(gap_T / gap0, math.log(t0) / math.log(T),
                      spread=f"ln t0 / ln T for C / log t from t0 = {t0} to T = {T} (gap {gap0:.3g} at t0)")  # fmt: skip


def _head_slope(frame: pd.DataFrame, T: int) -> Check:
    """u-aligns: the log-log slope of ``1 - corr(u_t, u_mm)`` over the last half-decade against ``-k``, ``k`` that of
    ``||u_t||`` (spec §8.11; the bound is ours, :data:`U_ALIGNS` says why)."""
    rows = frame[frame["step"] >= T / math.sqrt(U_ALIGNS.param("decade"))]
    slope, _ = fit_slope(rows["step"], 1 - rows["head_alignment"])
    k, _ = fit_slope(rows["step"], rows["head_norm"])
    return U_ALIGNS.less(
        slope, -k,
        spread=f"ours: halfway between a bounded offset's ||u||^-2 (slope {-2 * k:.3g}) and a gap that levels off, "
        f"k = {k:.3g} the slope of log ||u_t|| over the same {len(rows)} records from t = {int(rows['step'].iloc[0])} "
        f"to T = {T}",
    )  # fmt: skip


def _margin_check(fraction: float) -> Check:
    """Thm 4's margin fraction in ``(0.5, 1]``: no head beats the u-SVM's normalised margin ``1 / ||u_mm||``."""
    low, solver = U_MARGIN.param("low"), U_MARGIN.param("solver")
    return U_MARGIN.holds(
        f"in ({low:g}, 1]",
        fraction,
        f"1 + {solver:g}: the u-SVM's normalised margin is the largest any head has ({solver:g}: the solver's "
        f"accuracy); {low:g}: ours (Thm 4's fraction was lost)",
        low < fraction <= 1.0 + solver,
        margin=min(fraction - low, 1.0 + solver - fraction),
    )


def _lemma13(frame: pd.DataFrame, every: int) -> list[Check]:
    after = frame[frame["step"] >= every]
    gap_steps, phi_steps = after["min_score_gap"].diff(), after["min_opt_softmax"].diff()
    gaps_drop = int((gap_steps < -GAPS.param("rounding")).sum())
    phi_drop = int((phi_steps < -PHI.param("rounding")).sum())
    bound, min_gap = PHI.param("bound"), float(after["min_score_gap"].min())
    return [
        GAPS.holds(
            0,
            gaps_drop,
            f"exact; min gap {min_gap:.3g} > 0; margin: the smaller of the min gap and rounding plus the largest fall",
            gaps_drop == 0 and min_gap > 0,
            margin=min(min_gap, GAPS.param("rounding") + float(gap_steps.min())),
        ),  # fmt: skip
        PHI.holds(
            0,
            phi_drop,
            f"exact; min {float(frame['min_opt_softmax'].min()):.4g} >= {bound:g}; margin: the smaller of min - bound "
            "and rounding plus the largest fall",
            phi_drop == 0 and bool((frame["min_opt_softmax"] >= bound).all()),
            margin=min(float(frame["min_opt_softmax"].min()) - bound, PHI.param("rounding") + float(phi_steps.min())),
        ),  # fmt: skip
    ]


def loss_ratio_note(frame: pd.DataFrame, T: int) -> str:
    """Lemma 13 (i), reported and not checked: the rises of ``max_ij log l_i/l_j`` over the last two doublings.

    No wrong mechanism we tried (the selection swapped, A6 without its decay, A6 normalised per block) makes the
    rises stop shrinking at the quick size, so a row would pass whatever the lemma says (docs/experiments).
    """
    ratio = frame.set_index("step")["log_loss_ratio"]
    at = [float(ratio.iloc[int(np.abs(ratio.index.to_numpy() - T / k).argmin())]) for k in (4, 2, 1)]
    return (
        f"Lemma 13 (i), not a check (no falsifier fails it): max_ij log l_i/l_j is {at[2]:.4g} at T = {T}; it rose "
        f"by {at[1] - at[0]:.3g} over [T/4, T/2] and by {at[2] - at[1]:.3g} over [T/2, T]"
    )


def _separation_check(frame: pd.DataFrame) -> Check:
    """Lemma 14: every sample's attention output on the positive side of ``u_mm``, at every recorded step."""
    worst = float(frame["min_separation"].min())
    return SEPARABLE.holds(
        "> 0", worst, "> 0 at every recorded step (the margin is the smallest value)", worst > 0, margin=worst
    )
