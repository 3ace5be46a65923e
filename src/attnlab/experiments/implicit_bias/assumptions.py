"""The hypotheses of the paper as measured results: Lemma 4 (a small initialisation keeps every initial logit
small), Lemma 8 (Example 1 meets Assumptions 1 and 2 once d is large) and Lemma 11 (DM's tokens are nearly
orthogonal once d is large). No training: data sets and initialisations are drawn, and the lemma's statement is
measured over the draws.

Spec: docs/theory/implicit-bias-ngd.md §6 (Example 1, DM), §7 (Assumptions 1, 2 and the small initialisation as
predicates; their thresholds were lost, so the levels below are ours). Reads: config, claims, falsifiers, the three
measurements, figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.data import TokenSelectionData, dm, example1
from attnlab.data.assumptions import equal_nonopt_scores, near_orthogonal
from attnlab.experiments.implicit_bias.common import SOURCE, ImplicitBiasConfig, small_init
from attnlab.experiments.registry import register
from attnlab.metrics import token_bound
from attnlab.models.functional import attention_logits
from attnlab.plotting import house_figure, label_ours, new_figure, theory_line
from attnlab.verify import (
    Check,
    Claim,
    Experiment,
    ExperimentResult,
    Falsifier,
    Reading,
    Revision,
    RunContext,
    fit_slope,
)

__all__ = ["AssumptionsConfig"]


@dataclass(frozen=True)
class AssumptionsConfig(ImplicitBiasConfig):
    """Draws of Example 1, of DM and of small initialisations (spec §6, §7; every value is ours).

    Attributes
    ----------
    n : int
        Sequences of the Example-1 data sets (Lemmas 4 and 8).
    T : int
        Tokens per sequence of Example 1 (>= 2).
    rho, sigma : float
        Example 1's signal and noise scale; Lemma 8 needs a large enough signal-to-noise ratio ``sigma / rho`` for
        the optimal tokens, which share the decoder's direction, to be nearly orthogonal (``rho^2 n T <= sigma^2``).
    dims : tuple of int
        Widths ``d`` of Example 1 (Lemma 8), increasing.
    n_dm : int
        Sequences of the DM data sets (Lemma 11).
    sigma_opt, sigma_oth : float
        DM's token scales.
    dm_dims : tuple of int
        Widths ``d`` of DM (Lemma 11), increasing.
    draws : int
        Data sets drawn at each width (seeds ``seed .. seed + draws - 1``).
    d_init : int
        Width of the Example-1 data set on which initial logits are measured (Lemma 4).
    init_scales : tuple of float
        Standard deviations ``omega`` of the entries of ``W_0`` (Lemma 4), increasing.
    init_draws : int
        ``W_0`` drawn at each scale.
    delta : float
        Lemma 4's failure probability: the ``1 - delta`` quantile of the largest initial logit is bounded.
    seed : int
        First seed of the data sets; ``seed + 1`` draws the initialisations.
    """

    n: int = 4
    T: int = 4
    rho: float = 1.0
    sigma: float = 8.0
    dims: tuple[int, ...] = (64, 256, 1024, 4096, 16384)
    n_dm: int = 8
    sigma_opt: float = 2.0
    sigma_oth: float = 1.0
    dm_dims: tuple[int, ...] = (50, 200, 800, 3200, 12800)
    draws: int = 100
    d_init: int = 64
    init_scales: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1)
    init_draws: int = 200
    delta: float = 0.1
    seed: int = 0

    OURS = (
        "n", "T", "rho", "sigma", "dims", "n_dm", "sigma_opt", "sigma_oth", "dm_dims", "draws", "d_init",
        "init_scales", "init_draws", "delta",
    )  # fmt: skip

    POSITIVE = ("rho", "sigma", "sigma_opt", "sigma_oth", "delta")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("n_dm", "draws", "d_init", "init_draws"):
            check_scalar(name, getattr(self, name), kind=int, low=2)
        check_scalar("delta", self.delta, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        for name in ("dims", "dm_dims", "init_scales"):
            values = getattr(self, name)
            if len(values) < 2 or any(not b > a > 0 for a, b in zip(values, values[1:])):
                raise ValidationError(f"{name} must hold at least two increasing positive values, got {values!r}")


# ---- claims ---------------------------------------------------------------------------------------------------------

_INIT = "init_draws draws of W_0 per scale omega, on the Example-1 data set of width d_init and the config's seed"
_SHARE = "the widths in order, and the share at the largest"
INIT_BOUND = Claim(
    "Lemma 4: with probability >= 1 - delta every initial logit |x_it^T W_0 x_i1| is at most "
    "omega B^2 sqrt(2 log(2 n T / delta)) (W_0 entries i.i.d. N(0, omega^2))",
    "001:Lem4",
    f"{SOURCE} §7",
    falsifier="init-std-sqrt",
    id="init-bound",
    reading=Reading(
        statistic="max over the scales omega of q / (omega B^2 sqrt(2 log(2 n T / delta))), q the 1 - delta quantile "
        "over the draws of max_{i,t} |x_it^T W_0 x_i1|, B the largest token norm",
        window="no steps: W_0 only",
        subset=_INIT,
        tolerance="<= 1: each logit is N(0, omega^2 ||x_it||^2 ||x_i1||^2), and a union bound over the n T logits "
        "gives the quantile [D] (Lemma 4's constants were lost)",
        params={"bound": 1.0},
        sizes=("n", "T", "rho", "sigma", "d_init", "init_scales", "init_draws", "delta", "seed"),
    ),
)
_MEDIAN_SLOPE = Reading(
    statistic="least-squares slope of log(median over the draws of max_{i,t} |x_it^T W_0 x_i1|) on log omega",
    window="no steps: W_0 only",
    subset=_INIT,
    tolerance="1 +- tol: the logits are linear in W_0 (tol ours: the medians of independent draws at each scale)",
    params={"slope": 1.0, "tol": 0.05},
    sizes=("n", "T", "rho", "sigma", "d_init", "init_scales", "init_draws", "seed"),
)
INIT_LINEAR = Claim(
    "Lemma 4: the initial logits are linear in the initialisation's scale omega: x_it^T W_0 x_i1 ~ "
    "N(0, omega^2 ||x_it||^2 ||x_i1||^2) at every scale",
    "001:Lem4",
    f"{SOURCE} §7",
    falsifier=("init-std-sqrt", "init-std-power-1.03"),
    id="init-linear",
    reading=Reading(
        statistic="max over the scales omega of |z|, z = (m - 1) / se: m the mean over the draws and the n T logits "
        "of (x_it^T W_0 x_i1)^2 / (omega^2 ||x_it||^2 ||x_i1||^2), se its standard error under that law",
        window="no steps: W_0 only",
        subset=_INIT,
        tolerance="<= the two-sided normal quantile at 1 - alpha / (2 S), S scales (Bonferroni): each logit is "
        "N(0, omega^2 ||x||^2 ||z||^2) [D], so m has mean 1 and, two logits correlating by cos(x, x') cos(z, z'), "
        "variance 2 sum_kl cos_kl^2 / ((n T)^2 draws) [D]; a W_0 whose scale is not omega moves m off 1",
        params={"ratio": 1.0, "alpha": 0.001},
        sizes=("n", "T", "rho", "sigma", "d_init", "init_scales", "init_draws", "seed"),
    ),
    revisions=(
        Revision(
            reading=_MEDIAN_SLOPE,
            date="2026-11-28",
            why="too weak to fail: the slope of independent draws' medians sat 2.7 bootstrap SE off 1 (0.984 quick), "
            "so a tolerance of +-0.05 passed a W_0 of std omega^1.03 (now the falsifier 'init-std-power-1.03'; "
            "1.014 quick, 1.027 full) and omega^1.05 (1.034, 1.047). The logits' exact law gives a normalised second "
            "moment of 1 at every scale, which omega^1.03 reads 0.60-0.84 quick (max |z| 11.1; full 16.1) and "
            "omega^1.05 0.42-0.77 (16.2; full 23.2), against the true 0.97-1.04 (max |z| 1.19 quick, 0.90 full)",
            quick="pass: 0.983906 within 1 +- 0.05 (03a6be6)",
            full="pass: 0.996772 within 1 +- 0.05 (03a6be6)",
            claim="Lemma 4: the initial logits scale linearly with the initialisation's scale omega",
        ),
    ),
)
EXAMPLE1_ASSUMPTIONS = Claim(
    "Lemma 8: the share of Example-1 draws meeting Assumptions 1 and 2 grows with d and reaches 1",
    "001:Lem8",
    f"{SOURCE} §6.1, §7",
    falsifier="noise-along-u",
    id="example1-assumptions",
    reading=Reading(
        statistic="per width d, the share of the draws where Assumption 1 (kappa n T <= 1) and Assumption 2 (the "
        "non-optimal scores of each sequence equal to 1e-9) both hold",
        window=_SHARE,
        subset="draws Example-1 data sets per width (seeds seed ..), n sequences of T tokens, rho, sigma",
        tolerance="the share never falls by more than 3 binomial standard errors from one width to the next, and is "
        ">= level at the largest width (level ours: Lemma 8's thresholds were lost)",
        params={"level": 0.95, "k": 3.0},
        sizes=("n", "T", "rho", "sigma", "dims", "draws", "seed"),
    ),
)
DM_ORTHOGONAL = Claim(
    "Lemma 11: the share of DM draws whose distinct tokens are nearly orthogonal grows with d and reaches 1",
    "001:Lem11",
    f"{SOURCE} §6.2, §7",
    falsifier="dm-shared-mean",
    id="dm-orthogonal",
    reading=Reading(
        statistic="per width d, the share of the draws whose largest |cos| between two distinct tokens is <= "
        "1 / (n_dm T), T = 2",
        window=_SHARE,
        subset="draws DM data sets per width (seeds seed ..), n_dm sequences, sigma_opt > sigma_oth (Condition 1)",
        tolerance="the share never falls by more than 3 binomial standard errors from one width to the next, and is "
        ">= level at the largest width (the level 1 / (n T) and the share ours: Lemma 11's thresholds were lost)",
        params={"level": 0.95, "k": 3.0},
        sizes=("n_dm", "sigma_opt", "sigma_oth", "dm_dims", "draws", "seed"),
    ),
)
CLAIMS = (INIT_BOUND, INIT_LINEAR, EXAMPLE1_ASSUMPTIONS, DM_ORTHOGONAL)


# ---- falsifiers -----------------------------------------------------------------------------------------------------


def _std_sqrt(init):
    """``W_0`` drawn with variance ``omega`` instead of ``omega^2`` (standard deviation ``sqrt(omega)``)."""
    return lambda d, scale, generator: init(d, math.sqrt(scale), generator)


def _std_power(init):
    """``W_0`` with standard deviation ``omega^1.03``: logits a power of the scale a little off linear."""
    return lambda d, scale, generator: init(d, scale**1.03, generator)


def _noise_along_u(generator):
    """Example 1 whose non-optimal tokens keep a component of their noise along the decoder ``u``."""

    def drawn(*args, **kw):
        data = generator(*args, **kw)
        X = data.X.clone()
        X[..., 0] += 0.1 * X[..., 1]  # u = e_1: the noise's second coordinate leaks onto it (spec §6.1)
        X[torch.arange(data.n), data.select, 0] = data.X[torch.arange(data.n), data.select, 0]
        return TokenSelectionData(X, y=data.y, v=data.v, select=data.select)

    return drawn


def _shared_mean(generator):
    """DM whose tokens all carry one shared mean vector (of the other token's scale)."""

    def drawn(n, d, sigma_opt, sigma_oth, *args, **kw):
        data = generator(n, d, sigma_opt, sigma_oth, *args, **kw)
        mean = torch.full((d,), sigma_oth / math.sqrt(d), dtype=torch.float64)
        return TokenSelectionData(data.X + mean, y=data.y, v=data.v, select=data.select)

    return drawn


FALSIFIERS = (
    Falsifier(
        "init-std-sqrt",
        "W_0's entries drawn with variance omega instead of omega^2",
        f"{__name__}:small_init",
        _std_sqrt,
        kind="mechanism",
    ),
    Falsifier(
        "init-std-power-1.03",
        "W_0's entries drawn with standard deviation omega^1.03 instead of omega",
        f"{__name__}:small_init",
        _std_power,
        kind="mechanism",
    ),
    Falsifier(
        "noise-along-u",
        "Example 1's non-optimal tokens with a component of their noise along the decoder (not projected out)",
        f"{__name__}:example1",
        _noise_along_u,
        kind="mechanism",
    ),
    Falsifier(
        "dm-shared-mean",
        "DM's tokens all shifted by one mean vector of the other token's scale",
        f"{__name__}:dm",
        _shared_mean,
        kind="mechanism",
    ),
)


# ---- measurements ---------------------------------------------------------------------------------------------------


def _initial_logits(config: AssumptionsConfig) -> pd.DataFrame:
    """Lemma 4: the largest |initial logit| of every draw of ``W_0`` at every scale (one row per draw), and the
    draw's mean of ``logit^2 / (omega^2 ||x||^2 ||z||^2)`` with that mean's variance under the logits' law."""
    data = example1(config.n, config.T, config.d_init, config.rho, config.sigma, seed=config.seed)
    gen = torch.Generator().manual_seed(config.seed + 1)
    x_norm = data.X.norm(dim=-1)  # (n, T)
    z_norm = data.Z.norm(dim=-1, keepdim=True)  # (n, 1)
    rows = []
    for scale in config.init_scales:
        W0 = torch.stack([small_init(config.d_init, scale, gen) for _ in range(config.init_draws)])  # (R, d, d)
        logits = attention_logits(data.X, W0, data.Z)  # spec §2: x^T W_0 z
        moment = (logits / (scale * x_norm * z_norm)).square().mean(dim=(-2, -1))  # spec §7: 1 in expectation [D]
        rows.append(
            pd.DataFrame(
                {
                    "part": "init",
                    "scale": scale,
                    "run": range(config.init_draws),
                    "value": logits.abs().amax(dim=(-2, -1)).numpy(),
                    "moment": moment.numpy(),
                }
            )
        )
    frame = pd.concat(rows, ignore_index=True)
    return frame.assign(B=float(token_bound(data.X)), moment_var=_moment_variance(data))


def _moment_variance(data: TokenSelectionData) -> float:
    """Variance of one draw's mean of the ``n T`` normalised squared logits when ``W_0`` is i.i.d. Gaussian [D].

    Two logits ``x^T W_0 z`` and ``x'^T W_0 z'`` have correlation ``cos(x, x') cos(z, z')``, and two standard normals
    of correlation ``c`` have squares of covariance ``2 c^2``.
    """
    x = data.X / data.X.norm(dim=-1, keepdim=True)  # (n, T, d)
    z = (data.Z / data.Z.norm(dim=-1, keepdim=True)).unsqueeze(-2).expand_as(x)
    x, z = x.reshape(-1, x.shape[-1]), z.reshape(-1, x.shape[-1])
    corr = (x @ x.T) * (z @ z.T)  # spec §7: Cov(x^T W z, x'^T W z') = omega^2 (x . x')(z . z')
    return float(2.0 * corr.square().sum() / corr.shape[0] ** 2)


def _shares(config: AssumptionsConfig) -> pd.DataFrame:
    """Lemmas 8 and 11: whether each draw at each width meets the lemma's predicate (one row per draw)."""
    rows = []
    for d in config.dims:
        for k in range(config.draws):
            data = example1(config.n, config.T, d, config.rho, config.sigma, seed=config.seed + k)
            holds = near_orthogonal(data).holds and equal_nonopt_scores(data).holds  # spec §7: A1 and A2
            rows.append({"part": "example1", "d": d, "run": k, "holds": holds})
    level = 1.0 / (config.n_dm * 2)  # ours: 1 / (n T), T = 2
    for d in config.dm_dims:
        for k in range(config.draws):
            X = dm(config.n_dm, d, config.sigma_opt, config.sigma_oth, seed=config.seed + k).X.reshape(-1, d)
            unit = X / X.norm(dim=-1, keepdim=True)
            cos = (unit @ unit.T).fill_diagonal_(0.0)  # spec §7: cosines between distinct tokens
            rows.append({"part": "dm", "d": d, "run": k, "holds": bool(cos.abs().max() <= level)})
    return pd.DataFrame(rows)


def _init_linear(init: pd.DataFrame, draws: int) -> Check:
    """The normalised second moment of the logits at every scale against 1, in standard errors (Bonferroni)."""
    alpha, scales = INIT_LINEAR.param("alpha"), init["scale"].nunique()
    bound = NormalDist().inv_cdf(1 - alpha / (2 * scales))  # two-sided, the family over the scales
    moment = init.groupby("scale")["moment"].mean()
    se = math.sqrt(float(init["moment_var"].iloc[0]) / draws)  # independent draws of W_0 at each scale
    z = (moment - INIT_LINEAR.param("ratio")) / se
    shown = ", ".join(f"{scale:g}: {m:.3f}" for scale, m in moment.items())
    return INIT_LINEAR.less(
        float(z.abs().max()),
        bound,
        spread=f"the normal quantile at 1 - {alpha:g} / {2 * scales}; the moments {shown}, se {se:.3g}",
    )


def _share_check(claim: Claim, shares: pd.Series, draws: int) -> Check:
    """The share never falls by more than k binomial standard errors between widths and ends >= the level."""
    level, k = claim.param("level"), claim.param("k")
    values = shares.to_numpy(dtype=float)
    se = np.sqrt(np.maximum(values * (1 - values), 1.0 / draws) / draws)  # binomial, floored at one draw
    falls = values[:-1] - values[1:] - k * np.hypot(se[:-1], se[1:])  # > 0: a fall beyond the noise
    margin = min(float(values[-1] - level), float(-falls.max()))
    shown = ", ".join(f"d {d}: {v:.2f}" for d, v in shares.items())
    return claim.holds(
        f"non-decreasing, >= {level:g} at d = {shares.index[-1]}",
        shown,
        f"falls <= {k:g} binomial SE over {draws} draws; the last share >= {level:g}",
        margin >= 0,
        margin=margin,
    )


def run_assumptions(config: AssumptionsConfig, ctx: RunContext) -> ExperimentResult:
    """Lemmas 4, 8 and 11 over draws: no training."""
    init = _initial_logits(config)
    shares = _shares(config)
    n_logits = config.n * config.T
    B = float(init["B"].iloc[0])
    per_scale = init.groupby("scale")["value"]
    quantile = per_scale.quantile(1 - config.delta)
    bound = quantile.index.to_numpy() * B**2 * math.sqrt(2 * math.log(2 * n_logits / config.delta))  # [D]
    slope, _ = fit_slope(per_scale.median().index, per_scale.median().to_numpy())
    share = {part: rows.groupby("d")["holds"].mean() for part, rows in shares.groupby("part")}
    checks = [
        INIT_BOUND.less(
            float((quantile.to_numpy() / bound).max()),
            INIT_BOUND.param("bound"),
            spread=f"the union bound over n T = {n_logits} Gaussian logits, B = {B:.3g}",
        ),
        _init_linear(init[init["part"] == "init"], config.init_draws),
        INIT_LINEAR.revised(1).close(1.0, slope, atol=INIT_LINEAR.revised(1).param("tol")),
        _share_check(EXAMPLE1_ASSUMPTIONS, share["example1"], config.draws),
        _share_check(DM_ORTHOGONAL, share["dm"], config.draws),
    ]
    frame = pd.concat([init, shares], ignore_index=True).assign(step=0)  # no training: every row is a draw
    figure = _figure(config, quantile, bound, share)
    return ExperimentResult(frame=frame, checks=checks, figures={"assumptions": figure})


@house_figure
def _figure(config: AssumptionsConfig, quantile: pd.Series, bound: np.ndarray, share: dict):
    fig, axes = new_figure(3)
    axes[0].loglog(quantile.index, quantile.to_numpy(), "o-", label=rf"$1-\delta$ quantile, $\delta={config.delta:g}$")
    theory_line(axes[0], quantile.index.to_numpy(), bound, r"Lemma 4 bound $\omega B^2 \sqrt{2 \log(2nT/\delta)}$")
    axes[0].set_xlabel(r"$\omega$")
    axes[0].set_ylabel(r"$\max_{i,t} |x_{it}^\top W_0 x_{i1}|$")
    for ax, part, title in ((axes[1], "example1", "Lemma 8: Example 1, A1 and A2"), (axes[2], "dm", "Lemma 11: DM")):
        ax.semilogx(share[part].index, share[part].to_numpy(), "o-", label="share of draws")
        ax.set_xlabel(r"$d$")
        ax.set_ylabel("share of draws")
        ax.set_title(title)
    for ax in axes:
        ax.legend()
    fig.suptitle("The paper's hypotheses over draws")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="implicit-bias.assumptions",
        cost=5.0,
        config_type=AssumptionsConfig,
        run=run_assumptions,
        quick={"draws": 20, "init_draws": 100},
        claims=CLAIMS,
        falsifiers=FALSIFIERS,
    )
)
