"""Lemma 29: from inside the cone at large norm, ||W_k||_p of plain l_p-AttGD grows like log k.

Spec: docs/theory/mirror-descent-lp.md §8.3 (``||W_k||_p = Omega(log k)``: the proof shows ``e^{c ||W_k||_p}`` grows
about linearly), §8.2 and §7 (the cone: ``W_0`` near the direction of ``W^mm_alpha`` at large norm), §4 (plain
l_p-AttGD), §5 (l_p-AttSVM). Not one of the paper's figures: E1 draws the norm of plain MD from ``W_0 ~ N(0, 1)``,
which never enters the lemma's regime at our budgets (docs/experiments/mirror-descent.md).

The start is the lemma's: ``W_0 = rho W^mm_opt,p + sigma N(0, 1)`` (``rho`` in units of the SVM's own norm, so
every softmax gap of the optimal token is at least about ``rho`` at the start), for the optimal tokens (globally,
hence locally, optimal).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.data import stack, unit_gaussian
from attnlab.experiments.mirror_descent.common import SOURCE, check_config, md_path, selected, tidy
from attnlab.experiments.registry import register
from attnlab.metrics import directional_bregman, entrywise_norm
from attnlab.models.functional import loss_gradients, token_scores
from attnlab.plotting import house_figure, label_axes, label_ours, new_figure
from attnlab.svm import SelectionSVMs
from attnlab.verify import Claim, Experiment, ExperimentResult, Falsifier, RunContext

__all__ = ["GrowthConfig", "run_growth"]


@dataclass(frozen=True)
class GrowthConfig:
    """Plain l_p-AttGD from inside the cone of the optimal tokens' l_p-AttSVM; ``||W_k||_p`` against ``k``.

    Spec: mirror-descent-lp §8.3, §7 (the cone). All fields are ours (the paper has no experiment of the lemma);
    the data are the official generator's at E1's sizes.

    Attributes
    ----------
    n, T, d : int
        Sequences, tokens per sequence and token dimension of each data set.
    ps : tuple of float
        Exponents p > 1.
    datasets : int
        Data sets, seeds ``first_seed, first_seed + 1, ...`` (runs of one batched program per p).
    first_seed : int
        Seed of the first data set.
    rho : float
        ``||W_0||_p`` in units of ``||W^mm_opt,p||_p`` (the optimal token's softmax gaps >= ~``rho`` at the start).
    sigma : float
        Standard deviation of the perturbation added to ``rho W^mm``.
    lr : float
        Step size of plain l_p-AttGD (the gradient is ~ e^-rho small at the start).
    steps : int
        Steps; the shape is decided on ``k`` in ``[steps / 100, steps]`` (two decades), past the start's transient.
    points : int
        Log-spaced steps of that window the fits use.
    loss : str
        Loss of the risk (the official code's is logistic).
    """

    n: int = 6
    T: int = 8
    d: int = 10
    ps: tuple[float, ...] = (1.75, 2.0, 3.0)
    datasets: int = 2
    first_seed: int = 1
    rho: float = 2.0
    sigma: float = 0.01
    lr: float = 100.0
    steps: int = 10000
    points: int = 30
    loss: str = "logistic"

    def __post_init__(self) -> None:
        check_config(self, ("n", "T", "d", "datasets", "first_seed", "steps", "points"), ("rho", "lr"))
        check_scalar("sigma", self.sigma, low=0.0)
        if self.steps < 100:
            raise ValidationError(
                f"steps == {self.steps}, must be >= 100: the fit window [steps/100, steps] spans two decades"
            )


def _frozen_step(train):
    """l_p-AttGD whose dual step keeps the first step's length: ``eta ||grad L(W_0)||_q G / ||G||_q``.

    Without the official code's ``eps`` in ``||G||_q + eps``: with it the step shrinks again once ``||G||_q`` falls
    below float64's epsilon, and the growth turns back to logarithmic.
    """

    def wrong(X, Z, y, v, W0, **kwargs):
        q = kwargs["p"] / (kwargs["p"] - 1.0)
        grad, _, _ = loss_gradients(X, Z, y, v, W0, kwargs["loss"], risk=False)
        first = entrywise_norm(grad.value(), q)  # (R,): the first step's dual length over eta
        return train(X, Z, y, v, W0, **{**kwargs, "normalized": True, "eps": 0.0, "lr": kwargs["lr"] * first})

    return wrong


FROZEN_STEP = Falsifier(
    "step-length-frozen",
    "the dual step keeps its first length (the gradient normalised by its dual norm, times the first one's) instead "
    "of shrinking with the gradient: ||W_k||^(p-1) then grows linearly in k",
    "attnlab.experiments.mirror_descent.common:batched_train",
    _frozen_step,
    kind="mechanism",
)
LOG_GROWTH = Claim(
    "p={p:g}: from the cone at large norm, the median ||W_k||_p over the data sets grows like log k (Lemma 29): the "
    "log fit beats a power t^a over k in [K/100, K]",
    "002:Lem29",
    f"{SOURCE} §8.3",
    FROZEN_STEP.name,
)
IN_CONE = Claim(
    "p={p:g}: the iterates stay in the cone of the optimal tokens (the lemma's hypothesis): the softmax's argmax is "
    "the optimal token of every sequence at every recorded step, on every data set",
    "002:Lem29",
    f"{SOURCE} §7, §8.2",
    kind="property",
)
CLAIMS = (LOG_GROWTH, IN_CONE)


def _start(config: GrowthConfig, datasets, p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``W_0 = rho W^mm_opt,p + sigma N(0, 1)`` and ``W^mm_opt,p`` per data set, each (R, d, d).

    Every softmax gap of the optimal token is at least about ``rho`` at ``W_0``.
    """
    optimal = torch.stack([data.optimal_tokens() for data in datasets])
    W_mm = SelectionSVMs(datasets).directions(optimal, p)  # spec §5: l_p-AttSVM of the optimal tokens
    gen = torch.Generator().manual_seed(config.first_seed)
    noise = torch.randn(W_mm.shape, generator=gen, dtype=torch.float64)
    return config.rho * W_mm + config.sigma * noise, W_mm  # spec §7: a start in the cone, rho x the SVM's norm


def run_growth(config: GrowthConfig, ctx: RunContext) -> ExperimentResult:
    """Plain l_p-AttGD from the cone for each p; ``||W_k||_p`` at every step, its shape decided over two decades."""
    datasets = [unit_gaussian(config.n, config.T, config.d, seed=config.first_seed + r) for r in range(config.datasets)]
    batch = stack(datasets)
    optimal = token_scores(batch.X, batch.y, batch.v).argmax(dim=-1)  # (R, n): opt_i = argmax_t gamma_it
    frames, checks = [], []
    window = np.unique(np.geomspace(config.steps // 100, config.steps, config.points).astype(int))
    for p in config.ps:
        W0, W_mm = _start(config, datasets, p)
        steps, path, diverged = md_path(batch, W0, p, config.lr, False, config.steps, 1, config.loss, ctx)
        norm = entrywise_norm(path, p)  # (S, R)
        kept = (selected(batch, path) == optimal).all(dim=-1)  # (S, R): the softmax still picks opt_i
        bregman = directional_bregman(W_mm, path, p)  # spec §3: how far the direction wanders inside the cone
        frames.append(tidy({"norm_p": norm, "in_cone": kept.to(torch.float64), "bregman": bregman}, steps, p=p))
        median = norm.median(dim=-1).values.numpy()
        checks.append(LOG_GROWTH.format(p=p).rate_shape(window, median[window], "log"))
        stayed = bool(kept.all()) and not diverged
        checks.append(
            IN_CONE.format(p=p).holds(
                "every step, every data set",
                f"{int(kept.all(dim=0).sum())}/{kept.shape[1]} data sets"
                + (f"; diverged {diverged}" if diverged else ""),
                "exact",
                stayed,
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    return ExperimentResult(frame=frame, checks=checks, figures={"growth": _growth_figure(config, frame)})


@house_figure
def _growth_figure(config: GrowthConfig, frame: pd.DataFrame):
    fig, axes = new_figure(len(config.ps), width=3.4)
    for ax, p in zip(axes, config.ps):
        rows = frame[(frame["p"] == p) & (frame["step"] > 0)]
        for run, one in rows.groupby("run"):
            ax.semilogx(one["step"], one["norm_p"], lw=1.0, label=f"data set {config.first_seed + run}")
        ax.axvspan(config.steps // 100, config.steps, color="0.9", zorder=0, label="fit window")
        label_axes(ax, "iteration $k$ (plain MD)", r"$\|W_k\|_p$", f"$p = {p:g}$: straight on $\\log k$ (Lemma 29)")
        ax.legend()
    fig.suptitle(f"Norm growth from the cone: $W_0 = {config.rho:g}\\, W^{{mm}} +$ noise, lr {config.lr:g}")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="mirror-descent.growth",
        cost=22.0,  # seconds: one thread, loaded 2-core machine (quick: ~7 s there)
        config_type=GrowthConfig,
        run=run_growth,
        quick={"steps": 3000},
        claims=CLAIMS,
        falsifiers=(FROZEN_STEP,),
    )
)
