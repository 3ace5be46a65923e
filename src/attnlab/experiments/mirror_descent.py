"""Experiments of the l_p mirror-descent paper: E1 (the q x p grid over 100 data sets), E2 (one path), E3 (joint).

Spec: docs/theory/mirror-descent-lp.md §9 E1-E3 (settings of the official code), §8 (predictions 1-5), §4 (l_p-AttGD,
l_p-JointGD and the norm-growth inequality), §5 (l_p-AttSVM, l_p head SVM), §6 (data generators).

The fixed-head runs are :func:`attnlab.batched.train` programs with the data sets on the runs axis. Mirror descent
keeps no state, so a run cut into chunks continues exactly; :func:`_md_path` uses that to keep the iterates at
the recorded steps, because the SVM directions are known only after training (the selected tokens are the argmax
of the final softmax, as in the official code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.batched import train as batched_train
from attnlab.data import StackedData, TokenSelectionData, joint_toy, stack, unit_gaussian
from attnlab.experiments.base import (
    Check,
    Experiment,
    ExperimentResult,
    RunContext,
    check_greater,
    check_less,
    check_ordering,
    observation,
    register,
)
from attnlab.experiments.plotting import (
    EPS,
    house_figure,
    label_axes,
    label_ours,
    log_gap_axis,
    new_figure,
    rounding_floor,
    theory_line,
)
from attnlab.losses import LOSSES, mean_loss
from attnlab.metrics import Metric, directional_bregman, entrywise_norm
from attnlab.models import Combined
from attnlab.models.functional import attention_probabilities, loss_gradients, margins, token_scores
from attnlab.optim import MirrorDescent
from attnlab.svm import attention_svm, head_svm, is_locally_optimal
from attnlab.training import train

__all__ = ["E1Config", "E2Config", "E3Config"]

PAPER = "mirror-descent-lp"
SOURCE = f"docs/theory/{PAPER}.md"  # what checks cite


# ---------------------------------------------------------------------------------------------------------------
# shared pieces


def _check_config(config, ints: tuple[str, ...], positives: tuple[str, ...]) -> None:
    """Check integers >= 1 (``seed``, ``first_seed`` >= 0), positive floats, and ``p > 1`` with one epoch count each."""
    for name in ints:
        check_scalar(name, getattr(config, name), kind=int, low=0 if name.endswith("seed") else 1)
    for name in positives:
        check_scalar(name, getattr(config, name), low=0.0, low_inclusive=False)
    if hasattr(config, "loss"):
        check_in("loss", config.loss, LOSSES)
    if not config.ps or any(p <= 1 for p in config.ps):
        raise ValidationError(f"ps must be a non-empty tuple of exponents p > 1, got {config.ps}")
    if len(config.epochs) != len(config.ps) or any(e < 1 for e in config.epochs):
        raise ValidationError(
            f"epochs must give one positive step count per p: {len(config.ps)} values for ps={config.ps}, "
            f"got {config.epochs}"
        )


def _svm_norm(q: float) -> str | float:
    """The attention-SVM ``norm`` for exponent ``q``: the exact QP ``"fro"`` at ``q = 2``, else the entrywise ``q``."""
    return "fro" if q == 2.0 else float(q)


def _md_path(
    batch: StackedData,
    W0: torch.Tensor,
    p: float,
    lr: float,
    normalized: bool,
    steps: int,
    every: int,
    loss: str,
    ctx: RunContext,
    desc: str,
) -> tuple[np.ndarray, torch.Tensor]:
    """l_p-AttGD iterates at steps ``0, every, 2 every, ..., steps`` of R fixed-head runs.

    Spec: mirror-descent-lp §4 (l_p-AttGD, plain or dual-norm normalised): one batched program that keeps its
    iterates at the recorded steps.

    Returns
    -------
    steps : numpy.ndarray of int, shape (S,)
    path : torch.Tensor, shape (S, R, d, d), float64
    """
    run = batched_train(
        batch.X,
        batch.Z,
        batch.y,
        batch.v,
        W0,
        param="W",
        optimizer="md",
        lr=lr,
        loss=loss,
        steps=steps,
        p=p,
        normalized=normalized,
        record_every=every,
        keep_iterates=True,
        progress=ctx.progress,
    )
    bad = [r for r, status in enumerate(run.status) if status != "completed"]
    if bad:
        raise ValidationError(f"{desc}: runs {bad} diverged (non-finite loss); lower lr")
    return run.iterates["step"].numpy(), run.iterates["W"]


def _selected(batch: StackedData, W: torch.Tensor) -> torch.Tensor:
    """The token of largest attention in each sequence, shape ``([S,] R, n)`` (the official code's selection)."""
    return attention_probabilities(batch.X, W, batch.Z).argmax(dim=-1)  # spec §6: argmax of the softmax


def _svm_directions(datasets: list[TokenSelectionData], select: torch.Tensor, q: float, cache: dict) -> torch.Tensor:
    """``W^mm_{alpha, q}`` of every data set for its selection ``select[r]``, shape ``(R, d, d)``; solved once each."""
    out = []
    for r, data in enumerate(datasets):
        key = (r, tuple(select[r].tolist()), q)
        if key not in cache:
            cache[key] = attention_svm(data, _svm_norm(q), select=select[r]).W  # spec §5: l_q-AttSVM
        out.append(cache[key])
    return torch.stack(out)


def _locally_optimal(datasets: list[TokenSelectionData], select: torch.Tensor, p: float, cache: dict) -> torch.Tensor:
    """Whether each data set's selection ``select[r]`` is locally optimal for the l_p-AttSVM, shape ``(R,)`` bool.

    Spec: mirror-descent-lp §5 Definition 3, the hypothesis of the local convergence of §8.2. The SVM solved for the
    check is kept in ``cache`` (the key of :func:`_svm_directions`).
    """
    holds = []
    for r, data in enumerate(datasets):
        report = is_locally_optimal(data, select=select[r], p=_svm_norm(p))  # spec §5 Def. 3
        cache.setdefault((r, tuple(select[r].tolist()), p), report.svm.W)
        holds.append(report.holds)
    return torch.tensor(holds)


def _still_decreasing(steps: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """``values`` at the recorded steps nearest ``K/4``, ``K/2`` and ``K`` (``K`` the last step), by name."""
    K = steps[-1]
    return {name: float(values[int(np.abs(steps - K / k).argmin())]) for name, k in (("K", 1), ("K/2", 2), ("K/4", 4))}


def _path_metrics(batch: StackedData, path: torch.Tensor, p: float, loss: str) -> dict[str, torch.Tensor]:
    """Per (step, run) loss, ``||W_k||_p``, mean max-softmax probability and logistic probability, each ``(S, R)``.

    Spec: mirror-descent-lp §9 E1 ("metrics also stored per step").
    """
    probs = attention_probabilities(batch.X, path, batch.Z)  # (S, R, n, T)
    top, chosen = probs.max(dim=-1)
    gamma = token_scores(batch.X, batch.y, batch.v).expand(probs.shape)  # (S, R, n, T): gamma = Y v^T x
    gamma_hat = gamma.gather(-1, chosen[..., None]).squeeze(-1)
    return {
        "loss": mean_loss(margins(batch.X, batch.Z, batch.y, batch.v, path), loss),  # spec §2: (1/n) sum l(Y f)
        "norm_p": entrywise_norm(path, p),
        "max_softmax": top.mean(dim=-1),
        "logistic_prob": torch.sigmoid(gamma_hat).mean(dim=-1),  # spec §9: (1/n) sum (1 + e^{-Y x_hat^T v})^{-1}
    }


def _tidy(columns: dict[str, torch.Tensor], steps: np.ndarray, **constants) -> pd.DataFrame:
    """One row per (step, run) from ``(S, R)`` tensors, with constant columns in front."""
    S, R = next(iter(columns.values())).shape
    frame = pd.DataFrame({k: v.detach().reshape(-1).numpy() for k, v in columns.items()})
    frame.insert(0, "step", np.repeat(steps, R))
    frame.insert(0, "run", np.tile(np.arange(R), S))
    for position, (name, value) in enumerate(constants.items()):
        frame.insert(position, name, value)
    return frame


def _r_squared(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of ``y`` on ``x`` and the coefficient of determination."""
    coef = np.polyfit(x, y, 1)
    resid = y - np.polyval(coef, x)
    total = float(((y - y.mean()) ** 2).sum())
    return float(coef[0]), 1.0 - float((resid**2).sum()) / total if total > 0 else 1.0


# ---------------------------------------------------------------------------------------------------------------
# E1: the 3 x 3 grid over 100 data sets, selectivity, monotone dB, norm growth


@dataclass(frozen=True)
class E1Config:
    """E1: normalised l_p-AttGD on 100 synthetic data sets; ``dB_p(W^mm_q, W_k)`` for every (q, p).

    Spec: mirror-descent-lp §9 E1 (sizes, ``ps``, ``epochs``, ``lr``, 100 data sets with seeds 1-100, ``W_0 ~
    N(0, 1)``, logistic loss), §8.3-8.4 (selectivity, monotone decrease, log growth of ``||W_k||_p``), §4 (norm
    growth inequality). Ours: ``records`` (recorded points per run), ``seed`` (the generator of ``W_0``; the
    official draw order is not reproduced), and the unnormalised run of the rate checks (``rate_*``: the theory
    is for plain MD, the figure for normalised MD).
    """

    n: int = 6
    T: int = 8
    d: int = 10
    ps: tuple[float, ...] = (1.75, 2.0, 3.0)
    epochs: tuple[int, ...] = (1500, 2000, 20000)
    lr: float = 0.1
    datasets: int = 100
    first_seed: int = 1
    init_std: float = 1.0
    records: int = 200
    rate_datasets: int = 4
    rate_lr: float = 10.0
    rate_steps: int = 2000
    loss: str = "logistic"
    seed: int = 0

    OURS = ("records", "rate_datasets", "rate_lr", "rate_steps", "seed")

    def __post_init__(self) -> None:
        _check_config(
            self,
            ("n", "T", "d", "datasets", "first_seed", "records", "rate_datasets", "rate_steps", "seed"),
            ("lr", "rate_lr"),
        )
        check_scalar("init_std", self.init_std, low=0.0, low_inclusive=False)
        if self.rate_datasets > self.datasets:
            raise ValidationError(f"rate_datasets == {self.rate_datasets}, must be <= datasets == {self.datasets}")


def _e1_data(config: E1Config) -> tuple[list[TokenSelectionData], StackedData, torch.Tensor]:
    """Data sets of seeds ``first_seed, ...`` stacked on the runs axis, and ``W_0 ~ N(0, init_std^2)`` (R, d, d)."""
    datasets = [unit_gaussian(config.n, config.T, config.d, seed=config.first_seed + r) for r in range(config.datasets)]
    gen = torch.Generator().manual_seed(config.seed)
    W0 = config.init_std * torch.randn(config.datasets, config.d, config.d, generator=gen, dtype=torch.float64)
    return datasets, stack(datasets), W0  # spec §9 E1: --std 1


def _grid_runs(config: E1Config, ctx: RunContext, datasets, batch, W0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Normalised MD for each p (one batched program over the data sets); dB_p against every q-SVM along the path."""
    cache: dict = {}
    bregman_frames, metric_frames = [], []
    optimal = token_scores(batch.X, batch.y, batch.v).argmax(dim=-1)  # (R, n): opt_i = argmax_t gamma_it
    for p, epochs in zip(config.ps, config.epochs):
        steps, path = _md_path(
            batch, W0, p, config.lr, True, epochs, max(1, epochs // config.records), config.loss, ctx, f"E1 p={p:g}"
        )
        select = _selected(batch, path[-1])  # spec §6: SVM tokens = argmax of the final softmax
        globally = (select == optimal).all(dim=-1).to(torch.float64)  # spec §5: alpha_i = opt_i for all i
        local = _locally_optimal(datasets, select, p, cache).to(torch.float64)  # the hypothesis of §8.2, per run
        for q in config.ps:
            W_mm = _svm_directions(datasets, select, q, cache)
            dB = directional_bregman(W_mm, path, p)  # spec §3: D_psi_p(W^mm_q/||.||_p, W_k/||W_k||_p), (S, R)
            bregman_frames.append(
                _tidy({"bregman": dB, "locally_optimal": local.expand(len(steps), -1)}, steps, p=p, q=q)
            )
        metrics = _path_metrics(batch, path, p, config.loss)
        metrics["globally_optimal"] = globally.expand(len(steps), -1)  # of the final selection, on every row
        metrics["locally_optimal"] = local.expand(len(steps), -1)
        metric_frames.append(_tidy(metrics, steps, p=p))
    return pd.concat(bregman_frames, ignore_index=True), pd.concat(metric_frames, ignore_index=True)


def _norm_growth(config: E1Config, ctx: RunContext, batch: StackedData, W0: torch.Tensor) -> pd.DataFrame:
    """Plain l_p-AttGD on the first ``rate_datasets`` data sets, every step: ``||W_k||_p`` and the §4 bounds.

    Spec: mirror-descent-lp §4: ``||W_k||^{p-1} + eta <-grad L, W_k>/||W_k|| <= ||W_{k+1}||^{p-1} <=
    ||W_k||^{p-1} + eta ||grad L||_q`` (norms ``l_p``, ``q = p/(p-1)``).
    """
    R = config.rate_datasets
    sub = StackedData(batch.X[:R], batch.Z[:R], batch.y[:R], batch.v[:R], None)
    frames = []
    for p in config.ps:
        q = p / (p - 1.0)
        steps, path = _md_path(
            sub, W0[:R], p, config.rate_lr, False, config.rate_steps, 1, config.loss, ctx, f"plain MD p={p:g}"
        )
        grad, _, _ = loss_gradients(sub.X, sub.Z, sub.y, sub.v, path, config.loss)
        G = grad.value()  # (S, R, d, d)
        norm = entrywise_norm(path, p)
        power = norm ** (p - 1)
        lower = power + config.rate_lr * (-G * path).sum((-2, -1)) / norm  # spec §4 (Lemma 22)
        upper = power + config.rate_lr * entrywise_norm(G, q)  # spec §4 (Hoelder)
        nxt = torch.cat([power[1:], torch.full_like(power[:1], math.nan)])  # ||W_{k+1}||^{p-1}; none after the last
        frames.append(_tidy({"norm_p": norm, "power_next": nxt, "lower": lower, "upper": upper}, steps, p=p))
    return pd.concat(frames, ignore_index=True)


def _e1_checks(config: E1Config, bregman: pd.DataFrame, growth: pd.DataFrame) -> tuple[list[Check], pd.DataFrame]:
    final = bregman[bregman["step"] == bregman.groupby("p")["step"].transform("max")]
    grid = final.groupby(["p", "q"])["bregman"].agg(["mean", "std", "median"]).reset_index()  # every data set
    checks = []
    for p in config.ps:
        held = final[(final["p"] == p) & (final["locally_optimal"] > 0.5)]
        runs = sorted(held["run"].unique())
        total = final.loc[final["p"] == p, "run"].nunique()
        share = f"{len(runs)}/{total} data sets whose final selection is locally optimal (Def. 3, the hypothesis)"
        checks.append(
            check_greater(
                f"p={p:g}: hypothesis of §8.2: share of data sets whose final selection is "
                "locally optimal (the claims below are tested on those only)",
                len(runs) / total,
                0.0,
                f"{SOURCE} §5 Def. 3, §8.2",
                strict=True,
            )
        )
        if not runs:
            continue
        row = held.groupby("q")["bregman"].mean()
        per_run = held.pivot(index="run", columns="q", values="bregman")
        wins = float((per_run.idxmin(axis=1) == p).mean())
        values = ", ".join(f"q={q:g}: {v:.3g}" for q, v in row.items())
        checks.append(
            Check(
                f"selectivity (p={p:g}): mean dB_p(W^mm_q, W_K) is smallest at q = p, over {share}",
                f"argmin q = {p:g}",
                values,
                "ordering",
                bool(row.idxmin() == p),
                f"{SOURCE} §8.4",
            )
        )
        checks.append(
            check_greater(
                f"selectivity (p={p:g}): share whose smallest dB_p(W^mm_q, W_K) is at q = p, over {share}",
                wins,
                0.9,
                f"{SOURCE} §8.4",
                spread="0.9 (ours): the limit puts every run at q = p; finite K may not",
            )
        )
        path = bregman[(bregman["p"] == p) & (bregman["q"] == p) & bregman["run"].isin(runs)]
        mean = path.groupby("step")["bregman"].mean()
        rises = np.diff(mean.to_numpy())
        worst = float(rises.max() / mean.iloc[0])
        checks.append(
            check_less(
                f"monotone decrease (p={p:g}): largest rise of the mean dB_p(W^mm_p, W_k) between "
                f"records, relative to its start, over {share}",
                worst,
                1e-3,
                f"{SOURCE} §8.2-8.3",
                spread="1e-3 of the start (ours): the records are a sample of the path",
            )
        )
        rows = growth[growth["p"] == p]
        median = rows.groupby("step")["norm_p"].median()
        late = median[median.index >= max(1, config.rate_steps // 10)]
        slope, r2 = _r_squared(np.log(late.index.to_numpy(float)), late.to_numpy())
        checks.append(
            Check(
                f"log growth (p={p:g}, plain MD): R^2 of the median ||W_k||_p on log k (k >= steps/10)",
                ">= 0.95",
                r2,
                f"slope {slope:.3g} > 0",
                r2 >= 0.95 and slope > 0,
                f"{SOURCE} §8.3",
            )
        )
    pairs = growth.dropna(subset=["power_next"])
    scale = pairs["power_next"].abs()
    below = float(((pairs["lower"] - pairs["power_next"]) / scale).max())
    above = float(((pairs["power_next"] - pairs["upper"]) / scale).max())
    checks.append(
        check_less(
            "norm growth lower bound ||W_k||^(p-1) + eta <-grad L, W_k>/||W_k|| <= ||W_(k+1)||^(p-1):"
            " worst relative excess over steps, runs and p",
            below,
            1e-10,
            f"{SOURCE} §4",
        )
    )
    checks.append(
        check_less(
            "norm growth upper bound ||W_(k+1)||^(p-1) <= ||W_k||^(p-1) + eta ||grad L||_q: worst "
            "relative excess over steps, runs and p",
            above,
            1e-10,
            f"{SOURCE} §4",
        )
    )
    return checks, grid


@house_figure
def _e1_figure(config: E1Config, bregman: pd.DataFrame, growth: pd.DataFrame):
    fig, axes = new_figure(len(config.ps) + 1, width=3.4)
    for ax, p in zip(axes, config.ps):
        for q in config.ps:
            stats = (
                bregman[(bregman["p"] == p) & (bregman["q"] == q)]
                .groupby("step")["bregman"]
                .agg(["mean", "std", "min"])
            )
            (line,) = ax.plot(stats.index, stats["mean"], label=f"$q = {q:g}$")
            if q == p:  # the paper shows the band for one curve; mean - std < 0 on a log axis, so clip at the min
                low = np.maximum(stats["mean"] - stats["std"], stats["min"])
                ax.fill_between(stats.index, low, stats["mean"] + stats["std"], alpha=0.2, color=line.get_color())
        log_gap_axis(ax, r"$D_{\psi_p}(W^{mm}_q, W_k)$")
        ax.set_xlabel("iteration $k$")
        ax.set_title(f"$\\ell_p$-AttGD, $p = {p:g}$")
        ax.legend()
    ax = axes[-1]
    for p in config.ps:
        median = growth[(growth["p"] == p) & (growth["step"] > 0)].groupby("step")["norm_p"].median()
        ax.semilogx(median.index, median, label=f"$p = {p:g}$")
    label_axes(ax, "iteration $k$ (plain MD)", r"$\|W_k\|_p$", r"straight on $\log k$ (§8.3)")
    ax.legend()
    fig.suptitle(f"E1: mean over {config.datasets} data sets; band ($q = p$): ±1 std, clipped at the smallest data set")
    label_ours(fig, config)
    return fig


def run_e1(config: E1Config, ctx: RunContext) -> ExperimentResult:
    """E1: the q x p grid of directional Bregman divergences, selectivity, monotone decrease and norm growth."""
    datasets, batch, W0 = _e1_data(config)
    bregman, metrics = _grid_runs(config, ctx, datasets, batch, W0)
    growth = _norm_growth(config, ctx, batch, W0)
    checks, grid = _e1_checks(config, bregman, growth)
    last = (
        metrics[metrics["step"] == metrics.groupby("p")["step"].transform("max")]
        .groupby("p")[["max_softmax", "logistic_prob", "globally_optimal", "locally_optimal"]]
        .mean()
    )
    notes = [
        "final mean dB_p(W^mm_q, W_K), rows p, columns q:\n"
        + grid.pivot(index="p", columns="q", values="mean").to_string(float_format="%.3g"),
        "final mean max-softmax and logistic probability, and shares of data sets whose final selection is "
        f"globally optimal and locally optimal (Def. 3), per p: {last.round(4).to_dict('index')}",
    ]
    return ExperimentResult(
        frame=bregman,
        checks=checks,
        figures={"e1": _e1_figure(config, bregman, growth)},
        tables={"grid": grid, "metrics": metrics, "norm_growth": growth},
        notes=notes,
    )


register(
    Experiment(
        name="mirror-descent.e1",
        cost=56.0,
        paper=PAPER,
        config_type=E1Config,
        run=run_e1,
        summary="E1: normalised l_p-AttGD on 100 data sets, the q x p grid of dB_p(W^mm_q, W_k), selectivity, "
        "monotone dB, log norm growth and the per-step norm bounds of plain MD",
        quick={
            "datasets": 6,
            "epochs": (150, 150, 300),
            "lr": 1.0,
            "records": 40,
            "rate_datasets": 2,
            "rate_steps": 200,
        },
    )
)


# ---------------------------------------------------------------------------------------------------------------
# E2: one instance, the 2-D path of two entries against the l_p-AttSVM ray

ENTRIES = ((1, 2), (3, 4))  # spec §9 E2: the plotted entries W_{1,2}, W_{3,4} (0-based)


@dataclass(frozen=True)
class E2Config:
    """E2: normalised l_p-AttGD from ``W_0 = 0`` on one data set; the path of ``(W_{1,2}, W_{3,4})`` and the SVM ray.

    Spec: mirror-descent-lp §9 E2 (seed 1, ``--std 0``, ``ps``, ``epochs``, ``lr`` and the arrow iterations, four
    per p in the order of ``ps``). Ours: ``record_every``. ``bregman_tol`` is kept for old command lines and no
    longer used: the check is that dB_p still decreases (no rate is known, so no absolute level is predicted).
    """

    n: int = 6
    T: int = 8
    d: int = 10
    ps: tuple[float, ...] = (1.75, 2.0, 3.0)
    epochs: tuple[int, ...] = (1500, 2000, 20000)
    lr: float = 0.1
    arrows: tuple[int, ...] = (140, 225, 310, 425, 300, 500, 700, 900, 1500, 4000, 8000, 13000)
    record_every: int = 5
    bregman_tol: float = 0.05
    loss: str = "logistic"
    seed: int = 1

    OURS = ("record_every", "bregman_tol")

    def __post_init__(self) -> None:
        _check_config(self, ("n", "T", "d", "record_every", "seed"), ("lr", "bregman_tol"))
        if self.d < 5:
            raise ValidationError(f"d == {self.d}, must be >= 5 to hold the plotted entries W[1, 2] and W[3, 4]")
        per_p = [self.arrows[4 * k : 4 * k + 4] for k in range(len(self.ps))]
        if len(self.arrows) != 4 * len(self.ps) or any(max(a) > e for a, e in zip(per_p, self.epochs)):
            raise ValidationError(
                f"arrows must hold 4 iterations per p, each <= its epochs {self.epochs}, got {self.arrows}"
            )


def run_e2(config: E2Config, ctx: RunContext) -> ExperimentResult:
    """E2: one path per p, the l_p-AttSVM of the final selection, and the directional divergence along the path."""
    data = unit_gaussian(config.n, config.T, config.d, seed=config.seed)
    batch = stack([data])
    W0 = torch.zeros(1, config.d, config.d, dtype=torch.float64)  # spec §9 E2: --std 0
    frames, rays, checks, notes = [], {}, [], []
    for p, epochs in zip(config.ps, config.epochs):
        steps, path = _md_path(
            batch, W0, p, config.lr, True, epochs, config.record_every, config.loss, ctx, f"E2 p={p:g}"
        )
        select, cache = _selected(batch, path[-1]), {}
        local = bool(_locally_optimal([data], select, p, cache)[0])  # spec §5 Def. 3: the hypothesis of §8.2
        W_mm = _svm_directions([data], select, p, cache)  # (1, d, d)
        dB = directional_bregman(W_mm, path[1:], p)  # spec §3; W_0 = 0 has no direction
        columns = {f"w_{i}{j}": path[:, :, i, j] for i, j in ENTRIES}
        columns["bregman"] = torch.cat([torch.full((1, 1), math.nan, dtype=torch.float64), dB])
        columns["norm_p"] = entrywise_norm(path, p)
        frames.append(_tidy(columns, steps, p=p))
        rays[p] = (W_mm[0] / entrywise_norm(W_mm[0], p)).numpy()  # unit l_p direction of W^mm_p
        if local:  # the theorem speaks only of locally optimal selections
            values = _still_decreasing(steps[1:], dB[:, 0].numpy())
            checks.append(
                check_ordering(
                    f"p={p:g} (final selection locally optimal): the path turns toward the l_p-AttSVM direction, "
                    "dB_p(W^mm_p, W_k) still decreasing at k = K/4, K/2, K",
                    values,
                    ["K", "K/2", "K/4"],
                    f"{SOURCE} §8.2-8.3, §9 E2",
                    spread="no rate is known (§8.3), so no absolute level",
                )
            )
        else:
            notes.append(f"p={p:g}: the final selection is not locally optimal (Def. 3); §8.2 makes no claim")
    frame = pd.concat(frames, ignore_index=True)
    ray_table = pd.DataFrame(
        [{"p": p, **{f"w_{i}{j}": float(ray[i, j]) for i, j in ENTRIES}} for p, ray in rays.items()]
    )
    return ExperimentResult(
        frame=frame,
        checks=checks,
        figures={"e2": _e2_figure(config, frame, ray_table)},
        tables={"svm_rays": ray_table},
        notes=notes,
    )


@house_figure
def _e2_figure(config: E2Config, frame: pd.DataFrame, rays: pd.DataFrame):
    (a, b), (c, e) = ENTRIES
    x, y = f"w_{a}{b}", f"w_{c}{e}"
    fig, axes = new_figure(len(config.ps), width=3.4, height=3.2)
    for k, (ax, p) in enumerate(zip(axes, config.ps)):
        rows = frame[frame["p"] == p].set_index("step")
        ax.plot(rows[x], rows[y], lw=1.2, label=f"$\\ell_{{{p:g}}}$-AttGD path")
        ray = rays[rays["p"] == p].iloc[0]
        scale = float(rows["norm_p"].iloc[-1])  # rescaled to the final ||W_K||_p
        theory_line(ax, [0, scale * ray[x]], [0, scale * ray[y]], f"$\\ell_{{{p:g}}}$-AttSVM ray")
        for it in config.arrows[4 * k : 4 * k + 4]:
            at = rows.index[np.abs(rows.index - it).argmin()]
            nxt = rows.index[min(rows.index.get_loc(at) + 1, len(rows) - 1)]
            ax.annotate(
                "",
                xy=(rows.at[nxt, x], rows.at[nxt, y]),
                xytext=(rows.at[at, x], rows.at[at, y]),
                arrowprops={"arrowstyle": "->", "color": "C3"},
            )
        label_axes(
            ax,
            f"$W_{{{a}{b}}}$",
            f"$W_{{{c}{e}}}$",
            f"$p = {p:g}$ (arrows at {', '.join(map(str, config.arrows[4 * k : 4 * k + 4]))})",
        )
        ax.legend()
    fig.suptitle(f"E2: one data set (seed {config.seed}), $W_0 = 0$")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="mirror-descent.e2",
        cost=12.0,
        paper=PAPER,
        config_type=E2Config,
        run=run_e2,
        summary="E2: one path of (W[1,2], W[3,4]) under normalised l_p-AttGD from 0 against the l_p-AttSVM ray",
        quick={"epochs": (200, 200, 400), "lr": 1.0, "arrows": (20, 40, 60, 80, 20, 40, 60, 80, 50, 100, 200, 300)},
    )
)


# ---------------------------------------------------------------------------------------------------------------
# E3: l_p-JointGD on the toy set


@dataclass(frozen=True)
class E3Config:
    """E3: normalised l_p-JointGD of ``(W, v)`` from zero on the 2x3x2 toy set.

    Spec: mirror-descent-lp §9 E3 (``ps``, ``epochs``, ``lr``, first 100 epochs plotted, paths of ``(W_{0,0},
    W_{0,1})`` and ``(v_0, v_1)``), §8.5 (both probabilities -> 1). Ours: ``prob_tol``. ``bregman_tol`` is kept
    for old command lines and no longer used: the checks are that dB_p still decreases (no rate is known).
    """

    ps: tuple[float, ...] = (1.75, 2.0, 3.0)
    epochs: tuple[int, ...] = (1500, 2000, 20000)
    lr: float = 0.1
    first_epochs: int = 100
    prob_tol: float = 0.01
    bregman_tol: float = 0.05
    loss: str = "logistic"

    OURS = ("prob_tol", "bregman_tol")

    def __post_init__(self) -> None:
        _check_config(self, ("first_epochs",), ("lr", "prob_tol", "bregman_tol"))


def _joint_metrics() -> list[Metric]:
    """Entries of ``W`` (2, 2) and ``v`` (2,), mean max-softmax probability and logistic probability (spec §9 E3)."""

    def softmax_prob(model, data):
        return attention_probabilities(data.X, model.W, data.Z).amax(dim=-1).mean(dim=-1)

    def logistic_prob(model, data):
        chosen = attention_probabilities(data.X, model.W, data.Z).argmax(dim=-1, keepdim=True)
        gamma = token_scores(data.X, data.y, model.v).gather(-1, chosen).squeeze(-1)
        return torch.sigmoid(gamma).mean(dim=-1)  # spec §9: (1/n) sum (1 + e^{-Y x_hat^T v})^{-1}

    entries = [
        Metric(f"w_{i}{j}", lambda model, data, i=i, j=j: model.W[..., i, j]) for i in range(2) for j in range(2)
    ]
    heads = [Metric(f"v_{i}", lambda model, data, i=i: model.v[..., i]) for i in range(2)]
    return entries + heads + [Metric("softmax_prob", softmax_prob), Metric("logistic_prob", logistic_prob)]


def run_e3(config: E3Config, ctx: RunContext) -> ExperimentResult:
    """E3: l_p-JointGD for each p; the final W and v against the l_p-AttSVM and the l_p head SVM of the selection."""
    data = joint_toy()
    frames, svms, checks = [], [], []
    for p, epochs in ctx.bar(list(zip(config.ps, config.epochs)), desc="E3 p"):
        model = Combined(2, train_head=True)  # spec §9 E3: W_0 = 0, v_0 = 0
        optimizer = MirrorDescent(model.parameters(), lr=config.lr, p=p, normalized=True)  # spec §4 l_p-JointGD
        traj = train(model, optimizer, data, config.loss, epochs, 1, _joint_metrics(), progress=ctx.progress)
        frames.append(traj.frame.assign(p=p))
        W, v = model.W.detach(), model.v.detach()
        select = attention_probabilities(data.X, W, data.Z).argmax(dim=-1)  # spec §6: final softmax argmax
        W_mm = attention_svm(data, _svm_norm(p), select=select).W  # spec §5: l_p-AttSVM
        v_mm = head_svm(data, p, select=select).v  # spec §5: l_p head SVM
        dB_W = float(directional_bregman(W_mm, W, p))
        dB_v = float(directional_bregman(v_mm[None], v[None], p))  # a vector as a 1 x d matrix
        svms.append(
            {
                "p": p,
                **{f"w_{i}{j}": float(W_mm[i, j]) for i in range(2) for j in range(2)},
                "v_0": float(v_mm[0]),
                "v_1": float(v_mm[1]),
                "bregman_W": dB_W,
                "bregman_v": dB_v,
            }
        )
        last = traj.frame.iloc[-1]
        for column, what in (
            ("softmax_prob", "mean softmax probability of the selected token"),
            ("logistic_prob", "logistic probability of the selected token"),
        ):
            checks.append(
                Check(
                    f"p={p:g}: {what} -> 1",
                    f">= {1 - config.prob_tol:g}",
                    float(last[column]),
                    "prob_tol (ours)",
                    float(last[column]) >= 1 - config.prob_tol,
                    f"{SOURCE} §8.5",
                )
            )
        rows = traj.frame[traj.frame["step"] > 0]
        steps = rows["step"].to_numpy()
        W_path = torch.tensor(rows[["w_00", "w_01", "w_10", "w_11"]].to_numpy()).reshape(-1, 2, 2)
        v_path = torch.tensor(rows[["v_0", "v_1"]].to_numpy())[:, None, :]  # a vector as a 1 x d matrix
        for name, ref, path in (
            ("W turns toward the l_p-AttSVM", W_mm, W_path),
            ("v turns toward the l_p head SVM", v_mm[None], v_path),
        ):
            values = _still_decreasing(steps, directional_bregman(ref, path, p).numpy())  # spec §3
            falling = values["K"] < values["K/2"] < values["K/4"]
            checks.append(
                observation(  # the theorem is for the regularisation path, not for these iterates
                    f"p={p:g}: {name}: dB_p still decreasing at k = K/4, K/2, K (the paper's remark on its E3 figure)",
                    "K < K/2 < K/4",
                    ", ".join(f"{k} {v:.4g}" for k, v in values.items()),
                    falling,
                    f"{SOURCE} §8.5, §9 E3",
                )
            )
    frame = pd.concat(frames, ignore_index=True)
    svm_table = pd.DataFrame(svms)
    return ExperimentResult(
        frame=frame, checks=checks, figures={"e3": _e3_figure(config, frame, svm_table)}, tables={"svms": svm_table}
    )


@house_figure
def _e3_figure(config: E3Config, frame: pd.DataFrame, svms: pd.DataFrame):
    fig, axes = new_figure(4, width=3.3)
    early = frame[frame["step"] <= config.first_epochs]
    for p, rows in frame.groupby("p", sort=False):
        first = early[early["p"] == p]
        axes[0].plot(first["step"], (1 - first["softmax_prob"]).clip(lower=EPS), label=f"$p = {p:g}$")
        axes[1].plot(first["step"], (1 - first["logistic_prob"]).clip(lower=EPS), label=f"$p = {p:g}$")
        svm = svms[svms["p"] == p].iloc[0]
        for ax, (x, y) in ((axes[2], ("w_00", "w_01")), (axes[3], ("v_0", "v_1"))):
            (line,) = ax.plot(rows[x], rows[y], label=f"$p = {p:g}$")
            end = float(np.hypot(rows[x].iloc[-1], rows[y].iloc[-1]))
            scale = end / float(np.hypot(svm[x], svm[y]))  # the SVM ray drawn out to the path's final length
            ax.plot([0, scale * svm[x]], [0, scale * svm[y]], "--", color=line.get_color(), lw=0.9)
    for ax, ray in ((axes[2], r"$\ell_p$-AttSVM ray"), (axes[3], r"$\ell_p$ head-SVM ray")):
        ax.plot([], [], "--", color="0.4", lw=0.9, label=f"dashed: {ray}")  # one legend entry for every ray
    for ax, name in ((axes[0], "softmax"), (axes[1], "logistic")):
        log_gap_axis(ax, f"1 - {name} probability")
        ax.set(xlabel="epoch", title=f"first {config.first_epochs} epochs")
        rounding_floor(ax)
    label_axes(axes[2], r"$W_{00}$", r"$W_{01}$", r"path of $W$")
    label_axes(axes[3], r"$v_0$", r"$v_1$", r"path of $v$")
    for ax in axes:
        ax.legend()
    fig.suptitle(r"E3: $\ell_p$-JointGD on the toy set from $(W, v) = 0$")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="mirror-descent.e3",
        cost=35.0,
        paper=PAPER,
        config_type=E3Config,
        run=run_e3,
        summary="E3: l_p-JointGD of (W, v) on the toy set: softmax and logistic probability, paths against both SVM rays",
        quick={"epochs": (100, 100, 200), "lr": 1.0},
    )
)
