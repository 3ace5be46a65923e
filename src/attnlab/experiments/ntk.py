"""Experiments of the softmax-NTK paper (arXiv:2405.03251): lazy training, Table 1 scaling, diffusion score.

Spec: ../shared/spec/softmax-ntk-diffusion.md §9. The paper has no experiments; every setting here is ours
(``OURS`` lists them all). Names: ``ntk.lazy`` (P1-P6), ``ntk.table1`` (P7), ``diffusion.gmm`` (P8).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.experiments.base import Check, Experiment, ExperimentResult, RunContext, check_less, register
from attnlab.experiments.plotting import label_ours, new_figure
from attnlab.ntk import (
    ExpMLP,
    ReluMLP,
    SoftmaxMLP,
    ForwardProcess,
    circle_mixture,
    contraction_bound,
    coupling_bound,
    cross_kernel,
    denoising_set,
    energy_distance,
    extreme_eigenvalues,
    gradient_descent,
    gram,
    infinite_width_gram,
    kernel_drift,
    kernel_regression_path,
    mode_coverage,
    practical_step,
    reverse_sde_sample,
    theorem_B,
    theorem_step,
    train_score_model,
    weighted_score_error,
)
from attnlab.ntk.network import TwoLayerNet

SPEC = "softmax-ntk-diffusion"
ACTIVATIONS = {"softmax": SoftmaxMLP, "relu": ReluMLP, "exp": ExpMLP}
ROUND_OFF = 1e-20  # ||F - Y||^2 below this is float64 round-off; per-step factors are fitted above it


def _unit_rows(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    return X / X.norm(dim=1, keepdim=True)  # ||x_i|| = 1 (spec §9 reference setting)


def _slope(x: list[float], y: list[float]) -> float:
    """Least-squares slope of log y against log x (NaN when fewer than two finite points)."""
    pts = [(math.log(a), math.log(b)) for a, b in zip(x, y) if b > 0 and math.isfinite(b)]
    if len(pts) < 2:
        return float("nan")
    return float(np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)[0])


def _check_sizes(name: str, values: tuple[int, ...], low: int) -> None:
    if not values:
        raise ValidationError(f"{name} is empty; pass at least one value, e.g. {name}=({low},)")
    for v in values:
        check_scalar(f"{name} entry", v, kind=int, low=low)


def _per_step_factor(frame: pd.DataFrame) -> float:
    """``(||F(t) - Y||^2 / ||F(0) - Y||^2)^{1/t}`` at the last recorded step above round-off."""
    above = frame[frame["sq_error"] > ROUND_OFF]
    last = above.iloc[-1]
    return float((last["sq_error"] / above["sq_error"].iloc[0]) ** (1.0 / last["step"]))


# ---------------------------------------------------------------------------------------------------- ntk.lazy
@dataclass(frozen=True)
class LazyConfig:
    """P1-P6 across widths: zero output, geometric decay, lazy weights, stable kernel, kernel coupling."""

    OURS = ("n", "d_in", "d_out", "widths", "sigma_w", "c", "steps", "record_every", "n_test", "kernel_seeds", "seed")

    n: int = 12  # spec §9 reference setting: n=12, d_in=5, d_out=3, sigma_w=1, c=0.5
    d_in: int = 5
    d_out: int = 3
    widths: tuple[int, ...] = (250, 1000, 4000, 16000)
    sigma_w: float = 1.0
    c: float = 0.5  # practical step lr = c / (m lambda_max(H*)), spec §8
    steps: int = 3000  # enough for ||F - Y||^2 to reach round-off at every width
    record_every: int = 20
    n_test: int = 32  # test points for the network-vs-kernel coupling (P5)
    kernel_seeds: int = 4  # initializations averaged in the H* -> H^inf fit (P6)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n", "d_in", "d_out", "steps", "record_every", "n_test", "kernel_seeds"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        _check_sizes("widths", self.widths, 2)
        check_scalar("sigma_w", self.sigma_w, low=0.0, low_inclusive=False)
        check_scalar("c", self.c, low=0.0, high=1.0, low_inclusive=False)


def _with_weights(net: TwoLayerNet, W: torch.Tensor):
    """A copy of ``net`` holding weights ``W`` (for measurements inside the GD hook)."""
    clone = copy.deepcopy(net)
    with torch.no_grad():
        clone.W.copy_(W)
    return clone


def run_lazy(config: LazyConfig, ctx: RunContext) -> ExperimentResult:
    gen = torch.Generator().manual_seed(config.seed)
    X, Y = _unit_rows(config.n, config.d_in, gen), _unit_rows(config.n, config.d_out, gen)
    X_test = _unit_rows(config.n_test, config.d_in, gen)
    y_norm = float(Y.norm())
    frames, summary = [], []
    for width in ctx.bar(config.widths, desc="ntk.lazy widths"):
        net = SoftmaxMLP(config.d_in, config.d_out, width, config.sigma_w, seed=config.seed + 1)
        F0 = float(net(torch.cat([X, X_test])).detach().abs().max())  # P1
        H0, K0 = gram(net, X), cross_kernel(net, X_test, X)
        lam, lam_max = extreme_eigenvalues(H0)
        lr = practical_step(net, X, config.c)
        recorded = list(range(0, config.steps + 1, config.record_every))
        if recorded[-1] != config.steps:
            recorded.append(config.steps)
        F_ker = dict(zip(recorded, kernel_regression_path(H0, K0, Y, lr=lr, scale=width, steps=recorded)))

        def measure(step: int, W: torch.Tensor, net=net, H0=H0, K0=K0, F_ker=F_ker) -> dict[str, float]:
            moved = _with_weights(net, W)
            return {
                "kernel_drift": kernel_drift(gram(moved, X), H0),  # P4: ||H(t) - H*||_F
                "test_kernel_drift": kernel_drift(cross_kernel(moved, X_test, X), K0),
                "coupling_gap": float((moved(X_test).detach() - F_ker[step]).abs().max()),  # P5
            }

        result = gradient_descent(net, X, Y, lr=lr, steps=config.steps, record_every=config.record_every, record=measure)
        frame = result.frame.assign(width=width)
        bound = contraction_bound(lr, width, lam)
        frame["envelope"] = bound ** frame["step"] * frame["sq_error"].iloc[0]  # spec §5 Lemma 5.3
        frames.append(frame)
        eps_H = float(max(frame["kernel_drift"].max(), frame["test_kernel_drift"].max()))
        summary.append(
            {
                "width": width,
                "max_abs_output_at_init": F0,
                "lambda_min": lam,
                "lambda_max": lam_max,
                "lr": lr,
                "log10_theorem_lr": math.log10(max(theorem_step(lam, config.n, config.d_out, width,
                                                                theorem_B(config.sigma_w, config.n, config.d_out)), 1e-300)),
                "factor": _per_step_factor(frame),
                "factor_bound": bound,
                "envelope_held": bool((frame["sq_error"] <= frame["envelope"] * (1 + 1e-9)).all()),
                "final_sq_error": float(frame["sq_error"].iloc[-1]),
                "m_times_movement": width * float(frame["weight_movement"].max()),
                "sup_kernel_drift": float(frame["kernel_drift"].max()),
                "m_times_drift": width * float(frame["kernel_drift"].max()),
                "max_coupling_gap": float(frame["coupling_gap"].max()),
                "coupling_bound": coupling_bound(eps_H, config.n, config.d_out, y_norm, lam),
            }
        )
    hinf = []
    for width in config.widths:  # P6: H* -> I_d (x) K, relative Frobenius error
        errs = []
        for s in range(config.kernel_seeds):
            net = SoftmaxMLP(config.d_in, config.d_out, width, config.sigma_w, seed=config.seed + 1 + s)
            H_inf = infinite_width_gram(net, X)
            errs.append(float((gram(net, X) - H_inf).norm() / H_inf.norm()))
        hinf.append({"width": width, "hinf_rel_error": float(np.mean(errs))})
    table = pd.DataFrame(summary).merge(pd.DataFrame(hinf), on="width")
    frame = pd.concat(frames, ignore_index=True)
    return ExperimentResult(frame, _lazy_checks(table, config), {"lazy": _lazy_figure(frame, table, config)},
                            {"summary": table}, _lazy_notes(table))


def _lazy_checks(table: pd.DataFrame, config: LazyConfig) -> list[Check]:
    src = f"{SPEC} §9"
    widths = table["width"].tolist()
    checks = [check_less("P1: symmetric init gives F(W(0), .) = 0 exactly (max |F| over widths)",
                         float(table["max_abs_output_at_init"].max()), 0.0, f"{src} P1, §2.1")]
    for row in table.itertuples():
        checks.append(check_less(f"P2: per-step loss factor < 1 - m eta lambda / 2 (m={row.width})",
                                 row.factor, row.factor_bound, f"{src} P2, §5 Lemma 5.3", strict=True))
        checks.append(Check(f"P2: ||F(t)-Y||^2 <= (1 - m eta lambda/2)^t ||Y||^2 at every recorded t (m={row.width})",
                            "True", str(row.envelope_held), "exact", bool(row.envelope_held), f"{src} P2"))
        checks.append(check_less(f"P4: sup_t ||H(t) - H*||_F < lambda / 2 (m={row.width})",
                                 row.sup_kernel_drift, row.lambda_min / 2, f"{src} P4, §5 Lemma 5.3"))
        checks.append(check_less(f"P5: max_t |F_nn - F_ker| at test points <= eps_H sqrt(nd) ||Y|| / lambda (m={row.width})",
                                 row.max_coupling_gap, row.coupling_bound, f"{src} P5, §6.2 Thm F.2"))
    if len(widths) >= 2:
        move_slope = _slope(widths, (table["m_times_movement"] / table["width"]).tolist())
        checks.append(Check("P3: max_r ||w_r(t) - w_r(0)|| ~ 1/m up to log factors (fitted log-log slope)",
                            "in [-1.2, -0.5]", move_slope, "[-1.2, -0.5]", bool(-1.2 <= move_slope <= -0.5), f"{src} P3"))
        drift_slope = _slope(widths, table["sup_kernel_drift"].tolist())
        checks.append(check_less("P4: sup_t ||H(t) - H*||_F shrinks at least like 1/m (fitted slope)",
                                 drift_slope, -1.0, f"{src} P4"))
        gap_slope = _slope(widths, table["max_coupling_gap"].tolist())
        checks.append(check_less("P5: coupling gap shrinks with m (fitted slope)", gap_slope, 0.0, f"{src} P5", strict=True))
        hinf_slope = _slope(widths, table["hinf_rel_error"].tolist())
        checks.append(Check("P6: ||H* - I (x) K||_F / ||I (x) K||_F ~ m^{-1/2} (fitted slope)", -0.5, hinf_slope,
                            "+-0.25", bool(abs(hinf_slope + 0.5) <= 0.25), f"{src} P6, §4.2"))
    return checks


def _lazy_notes(table: pd.DataFrame) -> list[str]:
    return [
        "Theorem 4.2's step size with B of Definition 4.1 (C=10, delta=0.1) is about 10^"
        f"{table['log10_theorem_lr'].min():.0f}; the runs use the practical step c / (m lambda_max(H*)) of spec §8.",
        "Per-step factor = (||F(t)-Y||^2 / ||Y||^2)^(1/t) at the last recorded t above 1e-20 (round-off).",
    ]


def _lazy_figure(frame: pd.DataFrame, table: pd.DataFrame, config: LazyConfig):
    fig, axes = new_figure(4, width=3.4)
    for width, part in frame.groupby("width"):
        (line,) = axes[0].semilogy(part["step"], part["sq_error"], label=f"m={width}")
        axes[0].semilogy(part["step"], part["envelope"], ls="--", color=line.get_color(), lw=0.8)
        axes[3].semilogy(part["step"], part["coupling_gap"].clip(lower=1e-18), color=line.get_color(), label=f"m={width}")
    axes[0].set(xlabel="step", ylabel="||F - Y||^2 (dashed: bound)", ylim=(1e-24, None))
    axes[0].legend(fontsize=7)
    axes[1].loglog(table["width"], table["m_times_movement"], "o-", label="m max_r ||w_r - w_r(0)||")
    axes[1].loglog(table["width"], table["m_times_drift"], "s-", label="m sup ||H(t) - H*||_F")
    axes[1].set(xlabel="width m")
    axes[1].legend(fontsize=7)
    axes[2].loglog(table["width"], table["hinf_rel_error"], "o-", label="measured")
    ref = table["hinf_rel_error"].iloc[0] * (table["width"] / table["width"].iloc[0]) ** -0.5
    axes[2].loglog(table["width"], ref, "k--", lw=0.8, label="m^-1/2")
    axes[2].set(xlabel="width m", ylabel="||H* - I(x)K|| / ||I(x)K||")
    axes[2].legend(fontsize=7)
    axes[3].set(xlabel="step", ylabel="max |F_nn - F_ker| at test points")
    fig.tight_layout()
    label_ours(fig, config)
    return fig


register(Experiment(name="ntk.lazy", paper=SPEC, summary="P1-P6: lazy training of the softmax network across widths",
                    config_type=LazyConfig, run=run_lazy,
                    quick={"widths": (250, 1000, 4000), "steps": 1500, "record_every": 25, "kernel_seeds": 2}))
