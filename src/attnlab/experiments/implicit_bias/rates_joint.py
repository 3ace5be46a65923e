"""The joint-training predictions of §8 (items 9-13): the adaptive rule A6 from zero on DM.

Spec: docs/theory/implicit-bias-ngd.md §8 items 9-13 (Theorems 2-4, Lemmas 3, 12, 13), §6.2 (DM, Condition 1),
§4 A6. Measures one run, then builds its rows from the claims declared below.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from attnlab.data import TokenSelectionData
from attnlab.experiments.implicit_bias.common import SOURCE
from attnlab.experiments.implicit_bias.falsifiers import u_svm_other_token
from attnlab.experiments.implicit_bias.rates_fixed import SVM_NUCLEAR
from attnlab.metrics import Metric, alignment, head_alignment, selected_probabilities
from attnlab.models import Combined
from attnlab.models.functional import LogScaled, loss_gradients, margins, token_scores
from attnlab.optim import JointAdaptive
from attnlab.training import train
from attnlab.verify import Check, Claim, Falsifier, at_steps, fit_slope, geometric_steps


def _swap_tokens(dm):
    """DM whose selected (optimal) token is the smaller-norm one: Condition 1's norm ordering reversed.

    The model averages tokens with softmax weights, so their order does not change training: only which token the
    SVMs and Lemma 13's metrics call optimal changes.
    """

    def swapped(*args, **kw):
        data = dm(*args, **kw)
        return TokenSelectionData(data.X.flip(1), Z=data.Z, y=data.y, v=data.v, select=data.select)

    return swapped


def _halve_head_gradient(gradients):
    """The loss gradients with the head's halved: ``grad_u L / 2``."""

    def halved(*args, head=False, **kw):
        grad_W, grad_u, *rest = gradients(*args, head=head, **kw)
        if grad_u is not None:
            grad_u = LogScaled(grad_u.mantissa, grad_u.log_scale + math.log(0.5))
        return (grad_W, grad_u, *rest)

    return halved


def _block_normalized(optimizer):
    return lambda groups, lr, normalizer="loss", **kw: optimizer(groups, lr=lr, normalizer="block_grad_norm", **kw)


def _no_decay(optimizer):
    return lambda groups, lr, alpha=0.0, **kw: optimizer(groups, lr=lr, alpha=0.0, **kw)


_RATES = "attnlab.experiments.implicit_bias.rates"  # where the DM data and both SVMs are built
U_SVM_OTHER = u_svm_other_token(_RATES)
HEAD_HALVED = Falsifier(
    "head-gradient-halved",
    "the gradient of the head u halved",
    f"{__name__}:loss_gradients",
    _halve_head_gradient,
    kind="mechanism",
)
TOKENS_SWAPPED = Falsifier(
    "dm-norms-swapped",
    "DM with the selected token of the smaller norm (Condition 1 reversed; the attention is blind to token order, "
    "so only the selection changes)",
    f"{_RATES}:dm",
    _swap_tokens,
    kind="mechanism",
)  # fmt: skip
NO_DECAY = Falsifier(
    "joint-no-decay", "the joint rule A6 without its (t+1)^-alpha decay (alpha = 0)", f"{__name__}:JointAdaptive",
    _no_decay,
    kind="mechanism",
)  # fmt: skip
BLOCK_NORMALIZED = Falsifier(
    "joint-block-normalized",
    "the joint rule A6 normalised by each block's gradient norm instead of the loss (A7 with A6's decay)",
    f"{__name__}:JointAdaptive",
    _block_normalized,
    kind="mechanism",
)
FALSIFIERS = (U_SVM_OTHER, HEAD_HALVED, TOKENS_SWAPPED, NO_DECAY, BLOCK_NORMALIZED)  # and rates_fixed.SVM_NUCLEAR


def _claim(text: str, result: str, section: str, falsifier: Falsifier) -> Claim:
    return Claim(text, result, f"{SOURCE} {section}", falsifier=falsifier.name)


LOSS_RATE = _claim("joint loss (Thm 2): -log L(theta_t) grows like t^(1-alpha): log-log slope over the last decade",
                   "001:Thm2", "§8.9", NO_DECAY)  # fmt: skip
W_LOG_NORM = _claim("joint W (Lemma 12): ||W_t|| = Theta(log t), not a power (geometric steps)", "001:Lem12", "§8.10",
                    BLOCK_NORMALIZED)  # fmt: skip
W_ALIGNS = _claim("joint W (Thm 3): 1 - corr(W_t, W_mm) falls over the last decade at least as fast as 1/log t",
                  "001:Thm3", "§8.10", SVM_NUCLEAR)  # fmt: skip
U_ALIGNS = _claim("joint u (Thm 4): 1 - corr(u_t, u_mm) falls over the last decade at least as fast as 1/log t",
                  "001:Thm4", "§8.11", U_SVM_OTHER)  # fmt: skip
U_MARGIN = _claim("joint u (Thm 4): normalised opt-token margin of u_T, as a fraction of 1/||u_mm||, in (0.5, 1]", "001:Thm4",
                  "§8.11", U_SVM_OTHER)  # fmt: skip
GAPS = _claim("Lemma 13 (ii): min_i score gap gamma_i1 - gamma_i2 positive and non-decreasing (recorded drops)",
              "001:Lem13", "§8.12", TOKENS_SWAPPED)  # fmt: skip
PHI = _claim("Lemma 13 (iii): min_i phi_opt >= 1/2 and non-decreasing (recorded drops)", "001:Lem13", "§8.12",
             TOKENS_SWAPPED)  # fmt: skip
PL = _claim("Lemma 3 (PL-like): ||grad_u L|| ||u_mm|| / L >= c along the run, c from Lemma 13 (iii)", "001:Lem3",
            "§8.13", HEAD_HALVED)  # fmt: skip
CLAIMS = (LOSS_RATE, W_LOG_NORM, W_ALIGNS, U_ALIGNS, U_MARGIN, GAPS, PHI, PL)


def _metrics(data, u_mm: torch.Tensor, loss: str) -> list[Metric]:
    """Per-run summaries recorded along joint training (spec §8.11-13): margins, gaps, loss ratio, PL ratio."""

    def min_gap(state):
        g = token_scores(data.X, data.y, state["v"])  # (n, 2), with the current head
        return (g[:, 0] - g[:, 1]).min()  # spec §8.12 (ii): gamma_i1 - gamma_i2

    def log_loss_ratio(state):
        z = margins(data.X, data.Z, data.y, state["v"], state["W"])  # y_i f(X_i); exp loss: log l_i = -z_i
        return z.max() - z.min()  # spec §8.12 (i): log max_ij l_i / l_j

    def u_margin(state):
        x_opt, v = data.X[torch.arange(data.n), data.select], state["v"]
        return (data.y * (x_opt @ v)).min() / v.norm() * u_mm.norm()  # spec §8.11

    def log_pl_ratio(state):
        _, grad_u, log_risk = loss_gradients(data.X, data.Z, data.y, state["v"], state["W"], loss, head=True)
        log_norm = torch.log(torch.linalg.vector_norm(grad_u.mantissa)) + grad_u.log_scale
        return log_norm + torch.log(u_mm.norm()) - log_risk  # spec §8.13: log(||grad_u L|| ||u_mm|| / L)

    return [
        Metric("min_score_gap", min_gap),
        Metric(
            "min_opt_softmax", lambda state: selected_probabilities(data.X, data.Z, state["W"], data.select).min()
        ),  # spec §8.12 (iii)
        Metric("log_loss_ratio", log_loss_ratio),
        Metric("u_margin_fraction", u_margin),
        Metric("log_pl_ratio", log_pl_ratio),
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
    beta = float((data.X[:, 1] @ u_mm).abs().max())  # max_i |u_mm^T x_i2|: near-orthogonality (Lemma 11)
    checks = [
        _loss_rate(frame, T, config.alpha),
        W_LOG_NORM.rate_shape(*_geometric(frame, "norm", max(config.joint_record_every, T // 100), T), "log"),
        _decade(W_ALIGNS, frame, "alignment", T),
        _decade(U_ALIGNS, frame, "head_alignment", T),
        _margin_check(float(frame["u_margin_fraction"].iloc[-1])),
        *_lemma13(frame, config.joint_record_every),
        _pl_check(frame, beta),
    ]
    return frame, checks, loss_ratio_note(frame, T)


def _geometric(frame: pd.DataFrame, column: str, first: int, T: int) -> tuple[pd.Series, pd.Series]:
    rows = at_steps(frame, geometric_steps(T, first=first))
    return rows["step"], rows[column]


def _loss_rate(frame: pd.DataFrame, T: int, alpha: float) -> Check:
    """Thm 2: ``-log L ~ c t^(1-alpha)``; the slope on the last decade, within its drift from the decade before."""
    t, y = _geometric(frame.assign(gain=-frame["log_loss"]), "gain", 1, T)
    last, before = t >= T / 10, (t >= T / 100) & (t < T / 10)
    slope_last, _ = fit_slope(t[last], y[last])
    slope_before, _ = fit_slope(t[before], y[before])
    drift = abs(slope_last - slope_before)
    return LOSS_RATE.close(
        1 - alpha, slope_last, atol=max(drift, 1 / math.log(T)),
        spread=f"the slope's drift from the decade before ({drift:.3g}), at least 1/ln T for the lower-order terms "
        "of Thm 2 (the rate holds up to constants)",
    )  # fmt: skip


def _decade(claim: Claim, frame: pd.DataFrame, column: str, T: int) -> Check:
    """``gap(T) / gap(T/10) <= ln(T/10) / ln T``: a ``C / log t`` rate (Thm 3's for W; the slowest we accept for u)."""
    rows = frame[frame["step"] > 0]
    t0_row = rows.iloc[int(np.abs(rows["step"].to_numpy() - T / 10).argmin())]
    t0, gap0, gap_T = int(t0_row["step"]), 1 - float(t0_row[column]), 1 - float(rows[column].iloc[-1])
    return claim.less(gap_T / gap0, math.log(t0) / math.log(T),
                      spread=f"ln t0 / ln T for C / log t from t0 = {t0} to T = {T} (gap {gap0:.3g} at t0)")  # fmt: skip


def _margin_check(fraction: float) -> Check:
    """Thm 4's margin fraction in ``(0.5, 1]``: no head beats the u-SVM's normalised margin ``1 / ||u_mm||``."""
    return U_MARGIN.holds(
        "in (0.5, 1]",
        fraction,
        "1 + 1e-6: the u-SVM's normalised margin is the largest any head has (1e-6: the solver's accuracy); "
        "0.5: ours (Thm 4's fraction was lost)",
        0.5 < fraction <= 1.0 + 1e-6,
    )


def _lemma13(frame: pd.DataFrame, every: int) -> list[Check]:
    after = frame[frame["step"] >= every]
    gaps_drop = int((after["min_score_gap"].diff() < -1e-12).sum())
    phi_drop = int((after["min_opt_softmax"].diff() < -1e-12).sum())
    return [
        GAPS.holds(
            0,
            gaps_drop,
            f"exact; min gap {float(after['min_score_gap'].min()):.3g} > 0",
            gaps_drop == 0 and bool((after["min_score_gap"] > 0).all()),
        ),  # fmt: skip
        PHI.holds(
            0,
            phi_drop,
            f"exact; min {float(frame['min_opt_softmax'].min()):.4g} >= 0.5",
            phi_drop == 0 and bool((frame["min_opt_softmax"] >= 0.5).all()),
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


def _pl_check(frame: pd.DataFrame, beta: float) -> Check:
    """Lemma 3: ``||grad_u L|| >= <-grad_u L, u_mm_bar> >= L min_i y_i u_mm^T X_i^T phi_i / ||u_mm||`` and, with
    ``phi_opt >= phi_min`` and ``|u_mm^T x_i2| <= beta``, the constant ``c = phi_min - (1 - phi_min) beta``."""
    phi_min = float(frame["min_opt_softmax"][frame["step"] > 0].min())
    c = phi_min - (1 - phi_min) * beta  # spec §8.13 [D]: u_mm's margin 1 on the opt tokens
    ratio = float(np.exp(frame["log_pl_ratio"][frame["step"] > 0]).min())
    return PL.greater(ratio, c, spread=f"c = phi_min - (1 - phi_min) beta with phi_min {phi_min:.4g} (the run's "
                      f"min phi_opt, >= 1/2 by Lemma 13) and beta = max_i |u_mm^T x_i2| = {beta:.3g}")  # fmt: skip
