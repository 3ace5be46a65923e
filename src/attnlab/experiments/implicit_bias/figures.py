"""The figures of the implicit-bias experiments, drawn from their tidy tables.

Spec: docs/theory/implicit-bias-ngd.md §9 (figs. 2, 3, 5: the panels the paper shows), §8 (the rates panel: each
prediction drawn next to its measurement).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnlab.experiments.implicit_bias.common import NORMED_MOM
from attnlab.plotting import (
    CORR_GAP,
    EPS,
    STEP,
    house_figure,
    label_axes,
    label_ours,
    log_gap_axis,
    new_figure,
    panel_grid,
    plot_band,
    rounding_floor,
    theory_hline,
    theory_line,
)

__all__ = ["fixed_decoder_figure", "joint_figure", "rates_figure"]


@house_figure
def fixed_decoder_figure(config, frame: pd.DataFrame, W_mm_norm: float, L_star: float):
    """Figs. 2 and 5: loss gap, norm, saturation, Lemma 1's slope and Theorem 1's alignment, one curve per method."""
    fig, axes = panel_grid(5)
    for method, rows in frame.groupby("method", sort=False):
        rows = rows.sort_values("step")
        # NGD-mom's alternative form (spec A4), run beside the paper's methods: dashed
        alternative = {"ls": "--", "label": r"NGD-mom, $m / \|m\|$ (A4's alternative)"}
        style = alternative if method == NORMED_MOM else {"label": method}
        axes[0].plot(rows["step"], (rows["loss"] - L_star).clip(lower=EPS * L_star), **style)
        axes[1].plot(rows["step"], rows["norm"], **style)
        axes[2].plot(rows["step"], (1 - rows["opt_softmax"]).clip(lower=EPS), **style)
        axes[3].plot(rows["step"], rows["log_one_minus_opt"], **style)
        positive = rows[rows["step"] > 0]
        axes[4].plot(positive["step"], 1 - positive["alignment"], **style)
    ngd = frame[frame["method"] == "NGD-uncapped"].sort_values("step")
    t_end, y_end = float(ngd["step"].iloc[-1]), float(ngd["log_one_minus_opt"].iloc[-1])
    n_end = float(ngd["norm"].iloc[-1])
    t_line = np.linspace(config.steps / 2, t_end, 20)
    n_line = np.interp(t_line, ngd["step"], ngd["norm"])
    theory_line(axes[3], t_line, y_end - (n_line - n_end) / W_mm_norm, r"Lemma 1: slope $-\|W_t\| / \|W_{mm}\|$")
    positive = ngd[ngd["step"] > 0]
    middle = positive.iloc[len(positive) // 2]
    anchor_t, anchor_y = float(middle["step"]), float(1 - middle["alignment"])
    t_ref = positive["step"].to_numpy(dtype=float)
    theory_line(axes[4], t_ref, anchor_y * anchor_t / t_ref, r"Thm 1 bound $\propto 1/t$")
    log_gap_axis(axes[0], r"$L(W_t) - L_*$")
    rounding_floor(axes[0], EPS * L_star)
    axes[1].set_ylabel(r"$\|W_t\|_F$")
    log_gap_axis(axes[2], r"$1 - \mathrm{mean}\ \varphi_{opt}$")
    rounding_floor(axes[2])
    axes[3].set_ylabel(r"$\max_i\ \log(1 - \varphi_{opt})$")
    log_gap_axis(axes[4], CORR_GAP, logx=True)
    for ax in axes:
        ax.set_xlabel(STEP)
    axes[0].legend()
    for ax in axes[2:]:
        ax.legend()
    kind = "antipodal" if config.antipodal else "orthogonal"
    fig.suptitle(f"Example 1 ({kind} opt tokens), fixed decoder")
    label_ours(fig, config)
    return fig


@house_figure
def joint_figure(config, frame: pd.DataFrame):
    """Fig. 3: loss, both norms, saturation and both alignments of the four methods of joint training."""
    fig, axes = panel_grid(6)
    # (quantity drawn, y-label, gap on a log axis)
    columns = [
        (lambda f: f["loss"], r"training loss $L(u_t, W_t)$", True),
        (lambda f: f["head_norm"], r"$\|u_t\|$", False),
        (lambda f: f["norm"], r"$\|W_t\|_F$", False),
        (lambda f: (1 - f["opt_softmax"]).clip(lower=EPS), r"$1 - \mathrm{mean}\ \varphi_{opt}$", True),
        (lambda f: 1 - f["alignment"], CORR_GAP, True),
        (lambda f: 1 - f["head_alignment"], r"$1 - \mathrm{corr}(u_t, u_{mm})$", True),
    ]
    for method, rows in frame.groupby("method", sort=False):
        rows = rows[rows["step"] > 0].sort_values("step")  # (u_0, W_0) = 0: no direction yet
        extra = method == "A6"  # Theorem 4's rule, run beside the paper's four methods (not one of its curves)
        style = {"ls": "--", "label": "A6 (Thm 4's rule; not in the paper)"} if extra else {"label": method}
        for ax, (quantity, _, _) in zip(axes, columns):
            ax.plot(rows["step"], quantity(rows), **style)
    for ax, (_, ylabel, gap) in zip(axes, columns):
        if gap:
            log_gap_axis(ax, ylabel)
        else:
            ax.set_ylabel(ylabel)
        ax.set_xlabel(STEP)
    rounding_floor(axes[3])
    axes[0].legend()
    axes[3].legend()
    fig.suptitle("DM, joint training of $(u, W)$ from zero")
    label_ours(fig, config)
    return fig


@house_figure
def rates_figure(config, frame: pd.DataFrame, W_mm_norm: float, predicted_slope: float):
    """§8: one panel per group of predictions, each bound or slope drawn next to its measurement."""
    fig, axes = new_figure(4, 2, width=3.6)
    single = frame[frame["part"] == "ngd_single"]
    ax = axes[0]
    ax.plot(single["step"], single["norm"], label=r"$\|W_t\|_F$ (NGD)")
    theory_line(ax, single["step"], single["norm_upper"], r"$\|W_0\| + \eta t$")
    theory_line(ax, single["step"], single["norm_lower"], "Lemma 7 lower bound", ls=":")
    label_axes(ax, STEP, r"$\|W_t\|_F$", "1. norm growth")
    ax.legend()
    ax = axes[1]
    ax.plot(single["step"], single["lemma6"], label=r"Lemma 6 ratio ($\geq 1$)")
    ax.plot(single["step"], single["lemma2"], label=r"Lemma 2 ratio ($\to\ \geq 1$)")
    theory_hline(ax, 1.0, "bound: 1", lw=0.8)
    ax.set_yscale("log")
    label_axes(ax, STEP, "gradient correlation ratio", "2, 6. gradient correlations")
    ax.legend()
    ax = axes[2]
    for part, label in (("ngd_directions", "NGD"), ("gd_directions", "GD")):
        rows = frame[(frame["part"] == part) & (frame["step"] > 0)].assign(gap=lambda f: 1 - f["alignment"])
        plot_band(ax, rows, "step", "gap", label=f"{label}, {config.directions} directions")
    ngd = frame[(frame["part"] == "ngd_directions") & (frame["step"] > 0)].groupby("step")["alignment"].median()
    t_ref = ngd.index.to_numpy(float)
    mid = len(t_ref) // 2
    theory_line(ax, t_ref, (1 - ngd.iloc[mid]) * t_ref[mid] / t_ref, r"Thm 1 bound $\propto 1/t$")
    log_gap_axis(ax, CORR_GAP, logx=True)
    ax.set(xlabel=STEP, title="3, 8. directional convergence")
    ax.legend()
    ax = axes[3]
    ax.plot(single["step"], single["log_one_minus_opt"], label="measured (NGD)")
    t_end, y_end = float(single["step"].iloc[-1]), float(single["log_one_minus_opt"].iloc[-1])
    t_line = np.array([config.steps / 2, t_end])
    theory_line(ax, t_line, y_end + predicted_slope * (t_line - t_end), f"Lemma 1 slope {predicted_slope:.4g}")
    label_axes(ax, STEP, r"$\max_i\ \log(1 - \varphi_{opt})$", "4. softmax saturation")
    ax.legend()
    ax = axes[4]
    polyak = frame[frame["part"] == "polyak_random_W"]
    ax.loglog(polyak["norm"], polyak["polyak_length"], ".", ms=3, label=r"$(L - L_*) / \|\nabla L\|$")
    theory_line(ax, polyak["norm"], polyak["polyak_upper"], "upper bound")
    theory_hline(ax, float(polyak["polyak_lower"].iloc[0]), "lower bound", ls=":")
    label_axes(ax, r"$\|W\|_F$ (random $W$)", "Polyak step length", "7. Polyak step length")
    ax.legend()
    joint = frame[(frame["part"] == "joint") & (frame["step"] > 0)]
    ax = axes[5]
    ax.plot(joint["step"] ** (1 - config.alpha), -joint["log_loss"])
    label_axes(ax, f"$t^{{{1 - config.alpha:.3g}}}$", r"$-\log L(\theta_t)$", "9. joint loss rate (linear = Thm 2)")
    ax = axes[6]
    ax.semilogx(joint["step"], joint["norm"], label=r"$\|W_t\|_F$")
    ax.semilogx(joint["step"], joint["head_norm"], label=r"$\|u_t\|$")
    label_axes(ax, STEP, "norm", "10. norm growth (straight on log t)")
    ax.legend()
    ax = axes[7]
    ax.semilogx(joint["step"], 1 - joint["alignment"], label=r"$1 - \mathrm{corr}(W_t, W_{mm})$")
    ax.semilogx(joint["step"], 1 - joint["head_alignment"], label=r"$1 - \mathrm{corr}(u_t, u_{mm})$")
    ax.semilogx(joint["step"], 1 - joint["min_opt_softmax"], label=r"$1 - \min_i \varphi_{opt}$")
    log_gap_axis(ax, "gap to the limit")
    ax.set(xlabel=STEP, title="10-12. joint alignment, saturation")
    ax.legend()
    label_ours(fig, config)
    return fig
