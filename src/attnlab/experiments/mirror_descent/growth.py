"""Plain l_p-AttGD from the thin cone at large norm: Lemmas 24 and 27-30 of the seed's appendix A.4-A.5.

Spec: docs/theory/mirror-descent-lp.md §8.2-8.3 (the cone lemmas and the rate), §7 (the cone: ``W_0`` near the
direction of ``W^mm_alpha`` at large norm), §4 (plain l_p-AttGD and the norm-growth inequality), §5 (l_p-AttSVM), §3
(``dB_p``; on the unit l_p sphere ``D_psi(A, B) = 1 - <grad psi(B), A>``). Not one of the paper's figures: E1 draws
the norm of plain MD from ``W_0 ~ N(0, 1)``, which never enters the lemmas' regime at our budgets.

The start is the lemmas': ``W_0 = rho W^mm_opt,p + sigma N(0, 1)`` (``rho`` in units of the SVM's own norm, so every
softmax gap of the optimal token is at least about ``rho``), for the optimal tokens (globally, hence locally,
optimal). The lemmas ask for a small enough step; the runs cover a grid of steps on the runs axis, and Lemma 24's
row (the loss falls at every step) says on the run itself whether a step is small in the lemma's sense.
The start, ``rho = 2``, lies below the radius ``R_0.01 = 32 ||W^mm||_p`` that mirror-descent.cone finds Lemma 21
needs, and the runs end 10-50 times farther from every SVM than the SVMs of ``p +- 0.1`` are from ``p``'s: the rows
test the lemmas' inequalities along these paths, not the mirror map's exponent (docs/experiments/mirror-descent.md).

Lemma 27's inequality (25) was lost in extraction. Its proof starts from the MD update
``grad psi(W_{k+1}) - grad psi(W_k) = -eta grad L(W_k)`` and Lemma 21's correlation bound, and Lemma 28 sums (25)
over steps and divides by ``||W_k||^{p-1}``; with ``||grad psi(W)||_q = ||W||_p^{p-1}`` and, on the unit sphere,
``dB_p(W^mm, W) = 1 - <grad psi(W), W^mm / ||W^mm||_p> / ||W||_p^{p-1}``, the reading that makes that sum bound
``dB_p`` is a per-step correlation increment (Sun et al. 2022 for linear models):
``<grad psi(W_{k+1}) - grad psi(W_k), W^mm / ||W^mm||_p> >= (||W_{k+1}||_p^{p-1} - ||W_k||_p^{p-1}) / (1 + eps)``.
Under it ``dB_p`` need not fall at every step (it falls only while ``dB_p > eps`` roughly), which is what the runs
show from the thin cone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._numerics import mirror_map
from attnlab._validation import ValidationError, check_distinct, check_scalar
from attnlab.data import stack, unit_gaussian
from attnlab.experiments.mirror_descent.common import SOURCE, check_config, md_path, selected, tidy
from attnlab.experiments.mirror_descent.falsifiers import LOGITS_TRANSPOSED, WEIGHT_DECAY
from attnlab.experiments.registry import register
from attnlab.losses import _mean_loss as mean_loss
from attnlab.metrics import directional_bregman, entrywise_norm
from attnlab.models.functional import _margins as margins
from attnlab.models.functional import token_scores
from attnlab.plotting import house_figure, label_axes, label_ours, log_gap_axis, new_figure
from attnlab.svm import SelectionSVMs
from attnlab.verify import Check, Claim, Experiment, ExperimentResult, Reading, Revision, RunContext, fit_slope

__all__ = ["GrowthConfig", "run_growth"]


@dataclass(frozen=True)
class GrowthConfig:
    """Plain l_p-AttGD from inside the cone of the optimal tokens' l_p-AttSVM, over a grid of steps.

    Spec: mirror-descent-lp §8.2-8.3, §7 (the cone). All fields are ours (the paper has no experiment of these
    lemmas); the data are the official generator's at E1's sizes.

    Attributes
    ----------
    n, T, d : int
        Sequences, tokens per sequence (>= 2) and token dimension of each data set.
    ps : tuple of float
        Exponents p > 1.
    datasets : int
        Data sets, seeds ``first_seed, first_seed + 1, ...``.
    first_seed : int
        Seed of the first data set (and of the start's perturbation).
    rho : float
        ``||W_0||_p`` in units of ``||W^mm_opt,p||_p`` (the optimal token's softmax gaps >= ~``rho`` at the start).
    sigma : float
        Standard deviation of the perturbation added to ``rho W^mm``.
    lrs : tuple of float
        Step sizes of plain l_p-AttGD; every data set runs with each (one batched program per p).
    steps : int
        Steps ``K`` of every run, each one recorded; the growth rows read ``k`` in ``[K/100, K]`` (two decades).
    points : int
        Log-spaced steps of that window used by the log-against-power fits of Lemma 30's first reading.
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
    lrs: tuple[float, ...] = (1.0, 10.0, 100.0)
    steps: int = 10000
    points: int = 30
    loss: str = "logistic"

    def __post_init__(self) -> None:
        check_config(self, ("n", "T", "d", "datasets", "first_seed", "steps", "points"), ("rho",))
        check_scalar("sigma", self.sigma, low=0.0)
        if not self.lrs or any(not isinstance(lr, int | float) or not 0 < lr < math.inf for lr in self.lrs):
            raise ValidationError(f"lrs must be a non-empty tuple of positive step sizes, got {self.lrs}")
        check_distinct("lrs", self.lrs)
        if self.steps < 100:
            raise ValidationError(
                f"steps == {self.steps}, must be >= 100: the growth rows read two decades [steps/100, steps]"
            )


_SIZES = ("n", "T", "d", "ps", "datasets", "first_seed", "rho", "sigma", "lrs", "steps", "loss")
_OLD_EVERY_RUN = (
    "every data set with every step size of lrs, each started at rho W^mm_opt,p + sigma N(0, 1), in the thin cone "
    "of its optimal tokens (globally, hence locally, optimal)"
)
# spec §8.2-8.3: Lemma 27 assumes ||W_k||_p >= R_eps of Lemma 21; mirror-descent.cone finds R_0.01 = 32 ||W^mm||_p
_EVERY_RUN = (
    f"{_OLD_EVERY_RUN}, at rho = 2 ||W^mm||_p: below the radius R_eps = 32 ||W^mm||_p from which mirror-descent.cone "
    "finds Lemma 21's ratio with eps = 0.01 (p = 1.75, 2); the runs end at 7-10 ||W^mm||_p, so Lemma 27's hypothesis "
    "||W_k||_p >= R_eps holds there only for a large eps. From this start dB_p rises from 1e-4 to 0.05-0.08 within "
    "the first steps and ends at 0.02-0.07, 10-50 times the distance between the SVMs of p and p +- 0.1: the rows "
    "test the lemmas' inequalities along these paths, not the mirror map's exponent (every row passes with it off by "
    "0.1, mirror-exponent-off-0.1, at both sizes; docs/findings.md, readings a wrong mechanism still passes)"
)
_REVISED = "2026-11-29"
_WHY_TEXT = (
    "the audit of 2026-11-29 (defects 1-3): every growth row passes with the mirror map's exponent off by 0.1 (full: "
    "Lem27 slack 0.191 / 0.197 / 0.182 against the true 0.219 / 0.222 / 0.199, Lem28 largest dB_p 0.054 / 0.062 / "
    "0.079 against 0.049 / 0.058 / 0.077, Lem29 slopes -0.34 / -0.40 / -0.37) and the start (2 ||W^mm||_p) lies "
    "below the cone experiment's R_0.01 = 32 ||W^mm||_p; the old text said neither. A reading that could tell the "
    "exponent was tried (the end point nearer in dB_p to p's SVM than to p +- 0.1's, declared before it ran): it "
    "fails the true run at p = 3 (quick -0.0098, full -0.011), the runs ending 10-50 times farther from every SVM "
    "than the SVMs are from each other, so it was not registered. Numbers unchanged; the text now says what the row "
    "cannot tell"
)
_SMALL_STEP = "the lemma's small step: the grid of lrs, each small in Lemma 24's sense on its run (the row below)"

_LEM30_TOLERANCE = (
    "g1 > 0 and g2 >= r_min g1 with r_min = 0.85 on every run. Omega(log k) is a lower bound: with c = g1 / log 10 "
    "the first decade's slope in log k, ||W_k|| - c log k may not fall by more than 15% of g1 over the second. The "
    "proof's bound (1/c) log(a + b k) has gains per decade that never shrink (ratio >= 1); a sub-logarithmic growth "
    "log log k gives 0.71 over these decades at K = 10^4 (0.65 at 3000), a stalled norm 0"
)
_LEM30_STATISTIC = (
    "per run, the gains g1 = ||W_{K/10}||_p - ||W_{K/100}||_p and g2 = ||W_K||_p - ||W_{K/10}||_p; the row reads the "
    "smallest g2 / g1 over the runs (margin: the smallest (g2 - r_min g1) and g1, over max(|g1|, |g2|))"
)
LEM30 = Claim(
    "p={p:g}: from the thin cone, ||W_k||_p grows at least logarithmically (Lemma 30, Omega(log k)): the norm's gain "
    "over the last decade of k is at least r_min = {r_min:g} times its gain over the decade before, on every run",
    "002:Lem30",
    f"{SOURCE} §8.3",
    WEIGHT_DECAY.name,
    id="lem30-norm-growth",
    reading=Reading(
        statistic=_LEM30_STATISTIC,
        window="the two decades of steps [K/100, K/10] and [K/10, K]",
        subset=f"{_EVERY_RUN}; {_SMALL_STEP}",
        tolerance=f"{_LEM30_TOLERANCE}. It checks a shape, on the safe side of the lemma: a norm that jumps early and "
        "then grows more slowly, yet stays above (1/c) log(a + b k), satisfies Lemma 30 and fails this row",
        params={"r_min": 0.85},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=Reading(
                statistic="relative RMS residuals of the least-squares fits a + b log k and c k^a to the median over "
                "the data sets of ||W_k||_p of plain l_p-AttGD (check_rate_shape)",
                window="`points` log-spaced integer steps k in [K/100, K] (duplicates dropped)",
                subset="every data set (each starts at rho W^mm_opt,p + sigma N(0, 1), in the cone of its optimal "
                "tokens)",
                tolerance="the log fit has the smaller residual, over at least 2 decades of k",
                params={"min_decades": 2.0},
                sizes=("n", "T", "d", "ps", "datasets", "first_seed", "rho", "sigma", "lr", "steps", "points", "loss"),
            ),
            claim="p={p:g}: from the cone at large norm, the median ||W_k||_p over the data sets grows like log k "
            "(Lemma 29): the log fit beats a power t^a over k in [K/100, K]",
            sizes={
                "n": {"full": 6, "quick": 6},
                "T": {"full": 8, "quick": 8},
                "d": {"full": 10, "quick": 10},
                "ps": {"full": [1.75, 2.0, 3.0], "quick": [1.75, 2.0, 3.0]},
                "datasets": {"full": 2, "quick": 2},
                "first_seed": {"full": 1, "quick": 1},
                "rho": {"full": 2.0, "quick": 2.0},
                "sigma": {"full": 0.01, "quick": 0.01},
                "lr": {"full": 100.0, "quick": 100.0},
                "steps": {"full": 10000, "quick": 3000},
                "points": {"full": 30, "quick": 30},
                "loss": {"full": "logistic", "quick": "logistic"},
            },
            date="2026-11-28",
            why="the lemma is a lower bound, Omega(log k), and needs only a small enough step; the old reading "
            "asked that log k fit better than a power at lr 100, our choice. It fails at lr 1 for every p and at lr "
            "10 for p = 2 and 3, where the norm grows faster than log k over these decades (convex in log k: the "
            "proof's (1/c) log(a + b k) before b k dominates a), which satisfies the lemma; and a growth k^0.15 "
            "would satisfy the lemma but fail the old row. The new reading tests the lower bound's shape over the "
            "grid of small steps. The claim was numbered Lemma 29 after our coverage table; the seed's proofs make "
            "Lemma 30 the norm growth (the inventory), so the lock keeps the old claim as "
            "mirror-descent.growth/log-growth, retired",
            quick="pass at lr 100: log-fit RMS 0.0044 / 0.0055 / 0.0092 against power 0.0125 / 0.0129 / 0.0107 "
            "(p = 1.75 / 2 / 3); recomputed on the lr 100 runs by every run",
            full="pass at lr 100 (log RMS 1.7e-3 / 2.4e-3 / 4.8e-3 against power 1.2e-2 / 1.2e-2 / 1.1e-2); fails at "
            "lr 1 for every p and at lr 10 for p = 2, 3 (issue of the findings review); recomputed on the lr 100 "
            "runs by every full run",
        ),
        Revision(
            reading=Reading(
                statistic=_LEM30_STATISTIC,
                window="the two decades of steps [K/100, K/10] and [K/10, K]",
                subset=f"{_OLD_EVERY_RUN}; {_SMALL_STEP}",
                tolerance=_LEM30_TOLERANCE,
                params={"r_min": 0.85},
                sizes=_SIZES,
            ),
            date=_REVISED,
            why=f"{_WHY_TEXT}. The tolerance now also says that the row checks the lower bound's shape, on the safe "
            "side (audit defect 8)",
            quick="pass: g2 / g1 >= 1.03 / 1.04 / 1.08 (p = 1.75 / 2 / 3); the current row computes the same numbers",
            full="pass: g2 / g1 >= 1.01 / 1.02 / 1.05; the current row computes the same numbers",
        ),
    ),
)
LEM24 = Claim(
    "p={p:g}: at the small steps of the grid the loss falls at every step of plain l_p-AttGD (Lemma 24's measurable "
    "core; its inequality (24) was lost): largest relative one-step change (L(W_(k+1)) - L(W_k)) / L(W_k)",
    "002:Lem24",
    f"{SOURCE} §4, §8.2",
    LOGITS_TRANSPOSED.name,
    id="lem24-monotone-loss",
    reading=Reading(
        statistic="the largest (L(W_{k+1}) - L(W_k)) / L(W_k) over the steps and runs, L the empirical risk",
        window="every step k = 0 .. K - 1",
        subset=_EVERY_RUN,
        tolerance="<= 1e-12: float64 rounding of L (relative 1e-16 per term, n terms), three orders of margin. The row "
        "checks descent only: any descent method at a small step passes it, mirror descent of another exponent too "
        "(p + 0.1: margins 2e-8 to 2e-7; the swapped exponents 1/(p - 1) and p - 1, i.e. the dual exponent p/(p - 1), "
        "the true map itself at p = 2: 6e-8 / 3e-8 / 7e-9 at the quick size), so no mirror-map falsifier is "
        "registered for it",
        params={"bound": 1e-12},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=Reading(
                statistic="the largest (L(W_{k+1}) - L(W_k)) / L(W_k) over the steps and runs, L the empirical risk",
                window="every step k = 0 .. K - 1",
                subset=_OLD_EVERY_RUN,
                tolerance="<= 1e-12: float64 rounding of L (relative 1e-16 per term, n terms), three orders of margin",
                params={"bound": 1e-12},
                sizes=_SIZES,
            ),
            date=_REVISED,
            why=f"{_WHY_TEXT}. The tolerance now says that the row checks descent only (audit defect 7: mirror "
            "descent with the exponent off by 0.1 passes with margins 2e-8 to 2e-7)",
            quick="pass: largest rise -1.6e-8 / -3.0e-8 / -1.7e-7 (p = 1.75 / 2 / 3); the current row computes the same numbers",
            full="pass: -1.4e-9 / -2.7e-9 / -1.8e-8; the current row computes the same numbers",
        ),
    ),
)
_LEM27_STATISTIC = (
    "the smallest over the steps and runs of (<theta_{k+1} - theta_k, W^mm / ||W^mm||_p> - (||W_{k+1}||_p^{p-1} - "
    "||W_k||_p^{p-1}) / (1 + eps)) / ||theta_{k+1} - theta_k||_q, theta = grad psi(W) (both read off the iterates)"
)
_LEM27_TOLERANCE = (
    ">= 0 with eps = 1, the loosest eps the lemma is stated for that still makes the correlation with W^mm grow at "
    "least half as fast as the norm; the row also reports the smallest eps that holds over the second half of the "
    "steps"
)
LEM27 = Claim(
    "p={p:g}: inequality (25) of Lemma 27 read as a per-step correlation increment, <grad psi(W_(k+1)) - grad "
    "psi(W_k), W^mm / ||W^mm||_p> >= (||W_(k+1)||_p^(p-1) - ||W_k||_p^(p-1)) / (1 + eps) with eps = {eps:g}, holds "
    "at every step of every run (smallest slack over the dual step's l_q length)",
    "002:Lem27",
    f"{SOURCE} §8.2",
    LOGITS_TRANSPOSED.name,
    id="lem27-correlation-increment",
    reading=Reading(
        statistic=_LEM27_STATISTIC,
        window="every step k = 0 .. K - 1",
        subset=f"{_EVERY_RUN}; {_SMALL_STEP}",
        tolerance=f"{_LEM27_TOLERANCE}. eps = 1 was fixed on 2026-11-28 (0f754b7), after 2b1c429 (2026-11-25) had "
        "recorded dB_p rising to 0.05-0.08 from this start: below R_eps only a large eps can hold, and eps = 1 bounds "
        "dB_p only by eps / (1 + eps) = 0.5 (§8.7). The exponent off by 0.1 passes it (slack 0.19 / 0.20 / 0.18)",
        params={"eps": 1.0, "bound": 0.0},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=Reading(
                statistic=_LEM27_STATISTIC,
                window="every step k = 0 .. K - 1",
                subset=f"{_OLD_EVERY_RUN}; {_SMALL_STEP}",
                tolerance=_LEM27_TOLERANCE,
                params={"eps": 1.0, "bound": 0.0},
                sizes=_SIZES,
            ),
            date=_REVISED,
            why=f"{_WHY_TEXT}. The tolerance now says when and why eps = 1 was chosen",
            quick="pass: smallest slack 0.219 / 0.222 / 0.199 (p = 1.75 / 2 / 3); the current row computes the same numbers",
            full="pass: 0.219 / 0.222 / 0.199; the current row computes the same numbers",
        ),
    ),
)
_LEM28_TOLERANCE = (
    "<= mu_wide = 0.1, the inventory's example width of the wide cone (~800x the thin cone's start); the lemma's "
    "widths are data-dependent constants it does not print"
)
LEM28 = Claim(
    "p={p:g}: started in the thin cone (dB_p(W^mm, W_0) ~ 1e-4), l_p-AttGD stays in the wide cone dB_p(W^mm, W_k) "
    "<= mu_wide = {mu:g} at every step of every run (Lemma 28's cone invariance)",
    "002:Lem28",
    f"{SOURCE} §7, §8.2",
    LOGITS_TRANSPOSED.name,
    id="lem28-cone-invariance",
    reading=Reading(
        statistic="the largest dB_p(W^mm_opt,p, W_k) over the steps and runs",
        window="every step k = 0 .. K",
        subset=f"{_EVERY_RUN}; {_SMALL_STEP}",
        tolerance=f"{_LEM28_TOLERANCE}. 0.1 was fixed on 2026-11-28 (0f754b7) with the data in hand, after 2b1c429 "
        "(2026-11-25) had recorded dB_p rising to 0.05-0.08 in the first steps (the runs' largest: 0.049 / 0.058 / "
        "0.077); it is not derived, and the exponent off by 0.1 stays inside it (0.054 / 0.062 / 0.079)",
        params={"bound": 0.1},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=Reading(
                statistic="the largest dB_p(W^mm_opt,p, W_k) over the steps and runs",
                window="every step k = 0 .. K",
                subset=f"{_OLD_EVERY_RUN}; {_SMALL_STEP}",
                tolerance=_LEM28_TOLERANCE,
                params={"bound": 0.1},
                sizes=_SIZES,
            ),
            date=_REVISED,
            why=f"{_WHY_TEXT}. The tolerance now says when and why 0.1 was chosen",
            quick="pass: largest dB_p 0.049 / 0.058 / 0.077 (p = 1.75 / 2 / 3); the current row computes the same numbers",
            full="pass: 0.049 / 0.058 / 0.077; the current row computes the same numbers",
        ),
    ),
)
_LEM29_STATISTIC = (
    "per run, the least-squares slope of log dB_p(W^mm_opt,p, W_k) on log ||W_k||_p; the row reads the largest over "
    "the runs"
)
LEM29 = Claim(
    "p={p:g}: the directional error dB_p(W^mm, W_k) falls as ||W_k||_p grows (Lemma 29's bound (28), lost, "
    "decreases with the norm): largest log-log slope of dB_p against ||W_k||_p over the second half of each run",
    "002:Lem29",
    f"{SOURCE} §8.3",
    LOGITS_TRANSPOSED.name,
    id="lem29-direction",
    reading=Reading(
        statistic=_LEM29_STATISTIC,
        window="the second half of the steps, k in [K/2, K]",
        subset=f"{_EVERY_RUN}; {_SMALL_STEP}",
        tolerance="< 0 on every run (the bound's decrease with the norm; its p-dependent rate was lost). A path "
        "falling toward a nonzero floor passes too, and so does the exponent off by 0.1 (full: -0.34 / -0.40 / -0.37)",
        params={"bound": 0.0},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=Reading(
                statistic=_LEM29_STATISTIC,
                window="the second half of the steps, k in [K/2, K]",
                subset=f"{_OLD_EVERY_RUN}; {_SMALL_STEP}",
                tolerance="< 0 on every run (the bound's decrease with the norm; its p-dependent rate was lost)",
                params={"bound": 0.0},
                sizes=_SIZES,
            ),
            date=_REVISED,
            why=_WHY_TEXT,
            quick="pass: largest slope -0.77 / -0.96 / -1.04 (p = 1.75 / 2 / 3); the current row computes the same numbers",
            full="pass: -0.29 / -0.38 / -0.35; the current row computes the same numbers",
        ),
    ),
)
KEPT = Claim(
    "p={p:g}: the iterates keep the optimal tokens (the cone of Definition 3 the lemmas assume): the softmax's argmax "
    "is the optimal token of every sequence at every step, on every run",
    "002:Lem28",
    f"{SOURCE} §7, §8.2",
    kind="property",
    id="selection-kept",
)
CLAIMS = (LEM30, LEM24, LEM27, LEM28, LEM29, KEPT)


def _start(config: GrowthConfig, datasets, p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``W_0 = rho W^mm_opt,p + sigma N(0, 1)`` and ``W^mm_opt,p`` per data set, each (D, d, d).

    Every softmax gap of the optimal token is at least about ``rho`` at ``W_0``.
    """
    optimal = torch.stack([data.optimal_tokens() for data in datasets])
    W_mm = SelectionSVMs(datasets).directions(optimal, p)  # spec §5: l_p-AttSVM of the optimal tokens
    gen = torch.Generator().manual_seed(config.first_seed)
    noise = torch.randn(W_mm.shape, generator=gen, dtype=torch.float64)
    return config.rho * W_mm + config.sigma * noise, W_mm  # spec §7: a start in the cone, rho x the SVM's norm


def _repeat(x: torch.Tensor, times: int) -> torch.Tensor:
    """``x`` (D, ...) repeated ``times`` times on the runs axis, step-size major: run ``l D + j``."""
    return x.repeat(times, *([1] * (x.dim() - 1)))


def _path_quantities(batch, path: torch.Tensor, W_mm: torch.Tensor, p: float, loss: str) -> dict[str, torch.Tensor]:
    """Per (step, run): ``||W_k||_p``, loss, ``dB_p``, and the (25) increments of step ``k -> k + 1`` (NaN at K)."""
    norm = entrywise_norm(path, p)  # (S, R)
    unit = W_mm / entrywise_norm(W_mm, p)[:, None, None]
    theta = mirror_map(path, p)  # spec §3: the dual iterate grad psi(W_k)
    step = theta[1:] - theta[:-1]
    nan = torch.full_like(norm[:1], float("nan"))
    return {
        "norm_p": norm,
        "loss": mean_loss(margins(batch.X, batch.Z, batch.y, batch.v, path), loss),  # spec §2: (1/n) sum l(Y f)
        "bregman": directional_bregman(W_mm, path, p),  # spec §3: dB_p(W^mm, W_k)
        "d_corr": torch.cat([(step * unit).sum((-2, -1)), nan]),  # <theta_{k+1} - theta_k, W^mm/||W^mm||_p>
        "d_power": torch.cat([norm[1:] ** (p - 1) - norm[:-1] ** (p - 1), nan]),  # ||W_{k+1}||^{p-1} - ||W_k||^{p-1}
        "dual_step": torch.cat([entrywise_norm(step, p / (p - 1)), nan]),  # ||theta_{k+1} - theta_k||_q
    }


def _runs(config: GrowthConfig, ctx: RunContext) -> pd.DataFrame:
    """Every p: one batched program of plain l_p-AttGD over (step size x data set), every step kept."""
    datasets = [unit_gaussian(config.n, config.T, config.d, seed=config.first_seed + r) for r in range(config.datasets)]
    batch = stack(datasets)
    times, D = len(config.lrs), config.datasets
    runs = stack([datasets[j] for _ in config.lrs for j in range(D)])  # run l D + j: step size l, data set j
    lr = torch.tensor([lr for lr in config.lrs for _ in range(D)], dtype=torch.float64)
    optimal = _repeat(token_scores(batch.X, batch.y, batch.v).argmax(dim=-1), times)  # (R, n): opt_i
    frames = []
    for p in config.ps:
        W0, W_mm = _start(config, datasets, p)
        steps, path, diverged = md_path(runs, _repeat(W0, times), p, lr, False, config.steps, 1, config.loss, ctx)
        columns = _path_quantities(runs, path, _repeat(W_mm, times), p, config.loss)
        columns["kept"] = (selected(runs, path) == optimal).all(dim=-1).to(torch.float64)  # softmax picks opt_i
        frame = tidy(columns, steps, p=p)
        frame["lr"] = lr.numpy()[frame["run"]]
        frame["dataset"] = frame["run"] % D
        frame["diverged"] = frame["run"].isin(diverged)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _at(rows: pd.DataFrame, k: int) -> pd.Series:
    """``||W_k||_p`` per run at step ``k``."""
    return rows[rows["step"] == k].set_index("run")["norm_p"]


def _growth_row(config: GrowthConfig, p: float, rows: pd.DataFrame) -> Check:
    """Lemma 30: the norm's gain per decade of k does not shrink below r_min of the previous decade's."""
    K, r_min = config.steps, LEM30.param("r_min")
    g1 = _at(rows, K // 10) - _at(rows, K // 100)
    g2 = _at(rows, K) - _at(rows, K // 10)
    scale = np.maximum(np.maximum(g1.abs(), g2.abs()), np.finfo(float).tiny)
    margin = float((np.minimum(g2 - r_min * g1, g1) / scale).min())
    lrs = rows.groupby("run")["lr"].first()
    ratios = (g2 / g1).groupby(lrs).apply(lambda r: ", ".join(f"{v:.3g}" for v in r))
    measured = f"g2 / g1 = {(g2 / g1).min():.3g} at least; " + "; ".join(f"lr {lr:g}: {r}" for lr, r in ratios.items())
    claim = LEM30.format(p=p, r_min=r_min)
    tolerance = f"g1 > 0 and g2 >= {r_min:g} g1 on every run (the lower bound's shape over two decades)"
    return claim.holds(f">= {r_min:g}", measured, tolerance, margin >= 0, margin=margin, support=len(g1))


def _old_growth_row(config: GrowthConfig, p: float, rows: pd.DataFrame) -> Check | None:
    """Revision 1 of Lemma 30's row: log k against a power on the median norm of the lr 100 runs (its step)."""
    mine = rows[rows["lr"] == 100.0]
    if mine.empty:
        return None  # the old reading's step is not in this grid: the revision shows its recorded outcome
    median = mine.groupby("step")["norm_p"].quantile(0.5, interpolation="lower")  # torch's median, as it ran
    window = np.unique(np.geomspace(config.steps // 100, config.steps, config.points).astype(int))
    return LEM30.revised(1).format(p=p).rate_shape(window, median.loc[window].to_numpy(), "log")


def _stopped(config: GrowthConfig, p: float, rows: pd.DataFrame) -> list[Check]:
    """Every theory row failing, when all runs of ``p`` stopped on a non-finite loss before step K."""
    diverged = sorted(int(run) for run in rows.loc[rows["diverged"], "run"].unique())
    measured = f"the runs stopped at step {int(rows['step'].max())} of {config.steps}: diverged runs {diverged}"
    claims = (
        LEM30.format(p=p, r_min=LEM30.param("r_min")),
        LEM24.format(p=p),
        LEM27.format(p=p, eps=LEM27.param("eps")),
    )
    claims += (LEM28.format(p=p, mu=LEM28.param("bound")), LEM29.format(p=p), KEPT.format(p=p))
    return [
        claim.holds("every run reaches step K", measured, "the lemmas need the whole run", False) for claim in claims
    ]


def _checks(config: GrowthConfig, p: float, rows: pd.DataFrame) -> list[Check]:
    K, runs = config.steps, rows["run"].nunique()
    if rows["step"].max() < K:
        return _stopped(config, p, rows)
    steps = rows[rows["step"] < K]
    checks = [_growth_row(config, p, rows)]
    old = _old_growth_row(config, p, rows)
    checks += [old] if old is not None else []
    loss_next = rows.groupby("run")["loss"].shift(-1)
    rise = float(((loss_next - rows["loss"]) / rows["loss"]).max())  # NaN at K is skipped
    checks.append(LEM24.format(p=p).less(rise, LEM24.param("bound"), support=runs))
    eps = LEM27.param("eps")
    slack = float(((steps["d_corr"] - steps["d_power"] / (1 + eps)) / steps["dual_step"]).min())
    late = steps[steps["step"] >= K // 2]
    needed = float((late["d_power"] / late["d_corr"]).max() - 1) if (late["d_corr"] > 0).all() else float("inf")
    claim = LEM27.format(p=p, eps=eps)
    checks.append(
        claim.holds(
            f">= {LEM27.param('bound'):g}",
            f"smallest slack {slack:.3g}; the smallest eps that holds over k >= K/2: {needed:.3g}",
            f"(25) with eps = {eps:g} at every step; slack over ||theta_(k+1) - theta_k||_q",
            slack >= LEM27.param("bound"),
            margin=slack - LEM27.param("bound"),
            support=runs,
        )
    )
    widest = float(rows["bregman"].max())
    checks.append(LEM28.format(p=p, mu=LEM28.param("bound")).less(widest, LEM28.param("bound"), support=runs))
    second = rows[rows["step"] >= K // 2]
    slopes = pd.Series({run: fit_slope(one["norm_p"], one["bregman"])[0] for run, one in second.groupby("run")})
    checks.append(LEM29.format(p=p).less(float(slopes.max()), LEM29.param("bound"), strict=True, support=runs))
    kept = rows.groupby("run")["kept"].min()
    diverged = sorted(rows.loc[rows["diverged"], "run"].unique())
    checks.append(
        KEPT.format(p=p).holds(
            "every step, every run",
            f"{int((kept > 0.5).sum())}/{runs} runs" + (f"; diverged {diverged}" if diverged else ""),
            "exact",
            bool((kept > 0.5).all()) and not diverged,
        )
    )
    return checks


def run_growth(config: GrowthConfig, ctx: RunContext) -> ExperimentResult:
    """Plain l_p-AttGD from the thin cone for each p and step size; the rows of Lemmas 24 and 27-30."""
    frame = _runs(config, ctx)
    checks = [row for p in config.ps for row in _checks(config, p, frame[frame["p"] == p])]
    return ExperimentResult(frame=frame, checks=checks, figures={"growth": _growth_figure(config, frame)})


@house_figure
def _growth_figure(config: GrowthConfig, frame: pd.DataFrame):
    fig, axes = new_figure(len(config.ps), 2, width=3.4)
    shown = np.unique(np.geomspace(1, config.steps, 300).astype(int))  # log-spaced: a line of K points is slow
    for col, p in enumerate(config.ps):
        rows = frame[(frame["p"] == p) & frame["step"].isin(shown)]
        top, bottom = axes[col], axes[len(config.ps) + col]
        for (lr, dataset), one in rows.groupby(["lr", "dataset"]):
            label = f"lr {lr:g}, data set {config.first_seed + dataset}"
            (line,) = top.semilogx(one["step"], one["norm_p"], lw=1.0, label=label)
            bottom.loglog(one["step"], one["bregman"], lw=1.0, color=line.get_color(), label=label)
        top.axvspan(config.steps // 100, config.steps, color="0.9", zorder=0, label="two decades (Lemma 30)")
        label_axes(top, "iteration $k$", r"$\|W_k\|_p$", f"$p = {p:g}$: at least $\\log k$ (Lemma 30)")
        log_gap_axis(bottom, r"$D_{\psi_p}(W^{mm}, W_k)$", logx=True)
        bottom.axhline(LEM28.param("bound"), color="0.3", ls="--", lw=0.8, label=r"$\mu_{wide}$ (Lemma 28)")
        bottom.set(xlabel="iteration $k$", title=f"$p = {p:g}$: direction (Lemmas 28, 29)")
        top.legend(fontsize=6)
        bottom.legend(fontsize=6)
    fig.suptitle(f"Plain $\\ell_p$-AttGD from the thin cone:\n$W_0 = {config.rho:g}\\, W^{{mm}} +$ noise")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="mirror-descent.growth",
        cost=41.0,
        config_type=GrowthConfig,
        run=run_growth,
        quick={"steps": 3000, "lrs": (10.0, 100.0)},
        claims=CLAIMS,
        falsifiers=(WEIGHT_DECAY, LOGITS_TRANSPOSED),
    )
)
