"""The flagship: Example-1 data, the W-SVM, and a trained trajectory converging to it in direction.

Spec: implicit-bias-ngd §5 (W-SVM), §6.1 (Example 1), §8 items 1, 3, 8 (norm growth; NGD and GD converge in
direction to W_mm; GD's norm grows only logarithmically). This is the ten-line Python example of the README,
run as an experiment so that it writes the same outputs as every other one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from attnlab.data import example1
from attnlab.experiments.base import Check, Experiment, ExperimentResult, RunContext, check_less, register
from attnlab.experiments.plotting import (
    CORR_GAP,
    EPS,
    STEP,
    house_figure,
    label_ours,
    log_gap_axis,
    new_figure,
    rounding_floor,
)
from attnlab.metrics import alignment, opt_softmax
from attnlab.models import Combined
from attnlab.optim import NormalizedGD
from attnlab.runner.store import write_csv
from attnlab.svm import attention_svm
from attnlab.training import train

__all__ = ["FlagshipConfig"]


@dataclass(frozen=True)
class FlagshipConfig:
    """Settings of the flagship run (spec implicit-bias-ngd §9 fig. 2 proposals, all [L])."""

    n: int = 8
    T: int = 6
    d: int = 64
    rho: float = 1.0
    sigma: float = 2.0
    ngd_lr: float = 0.1
    gd_lr: float = 1.0
    steps: int = 2000
    record_every: int = 20
    loss: str = "exp"
    seed: int = 0

    OURS = ("n", "T", "d", "rho", "sigma", "ngd_lr", "gd_lr", "steps")


def run(config: FlagshipConfig, ctx: RunContext) -> ExperimentResult:
    """Train GD and NGD from zero on Example 1 and measure alignment with the W-SVM."""
    data = example1(n=config.n, T=config.T, d=config.d, rho=config.rho, sigma=config.sigma, seed=config.seed)
    sol = attention_svm(data, norm="fro")
    frames = []
    for method in ("gd", "ngd"):
        model = Combined(data.d)
        if method == "gd":
            opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=config.gd_lr)
        else:
            opt = NormalizedGD(model.parameters(), lr=config.ngd_lr)
        traj = train(
            model,
            opt,
            data,
            loss=config.loss,
            steps=config.steps,
            record_every=config.record_every,
            metrics=[alignment(sol.W), opt_softmax()],
            progress=ctx.progress,
        )
        frames.append(traj.frame.assign(method=method))
    frame = pd.concat(frames, ignore_index=True)
    write_csv(ctx.out / "trajectory.csv", frame)  # a plain CSV beside the Parquet table, for spreadsheets
    final = frame.groupby("method").last()

    checks = [
        # spec §8.3 (Theorem 1): NGD converges in direction to W_mm
        Check(
            "NGD alignment with W_mm at the last step (Thm 1)",
            "-> 1",
            float(final.loc["ngd", "alignment"]),
            ">= 0.99",
            bool(final.loc["ngd", "alignment"] >= 0.99),
            "docs/theory/implicit-bias-ngd.md §8.3",
        ),
        # spec §8.8: GD converges in direction too, more slowly than NGD
        Check(
            "GD alignment below NGD's (Thm 6 vs Thm 1)",
            "GD < NGD",
            float(final.loc["gd", "alignment"]),
            f"< {final.loc['ngd', 'alignment']:.6g}",
            bool(final.loc["gd", "alignment"] < final.loc["ngd", "alignment"]),
            "docs/theory/implicit-bias-ngd.md §8.8",
        ),
        # spec §8.8: GD's norm grows like log t, far below NGD's linear growth
        check_less(
            "GD ||W_T|| / log T stays O(1) (Thm 6)",
            float(final.loc["gd", "norm"]) / math.log(config.steps),
            10.0,
            "docs/theory/implicit-bias-ngd.md §8.8",
        ),
    ]

    fig = _figure(config, frame)
    summary = pd.DataFrame(
        {"quantity": ["svm_margin", "svm_norm", "svm_status"], "value": [sol.margin, sol.norm_value, sol.status]}
    ).astype({"value": str})
    return ExperimentResult(frame=frame, checks=checks, figures={"flagship": fig}, tables={"svm": summary})


@house_figure
def _figure(config: FlagshipConfig, frame: pd.DataFrame):
    fig, axes = new_figure(3)
    for method, part in frame.groupby("method"):
        axes[1].plot(part["step"], part["norm"], label=method.upper())
        part = part[part["step"] > 0]  # W_0 = 0: no direction yet
        axes[0].plot(part["step"], 1 - part["alignment"], label=method.upper())
        axes[2].plot(part["step"], (1 - part["opt_softmax"]).clip(lower=EPS), label=method.upper())
    log_gap_axis(axes[0], CORR_GAP)
    axes[1].set_ylabel(r"$\|W_t\|_F$")
    log_gap_axis(axes[2], r"$1 - \mathrm{mean}\ \varphi_{opt}$")
    rounding_floor(axes[2])
    for ax in axes:
        ax.set_xlabel(STEP)
        ax.legend()
    fig.suptitle(f"Example 1 ($n={config.n}$, $T={config.T}$, $d={config.d}$): GD and NGD against the W-SVM")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="flagship",
        cost=4.0,
        paper="implicit-bias-ngd",
        summary="Example 1: W-SVM, GD and NGD from zero, alignment and norm vs step",
        config_type=FlagshipConfig,
        run=run,
        quick={"steps": 400, "d": 32},
    )
)
