"""X5: sweep the score gap; where Assumption 3 holds, the diagonal flow reaches the l1-SVM direction (Theorem 4.1).

Spec: kq-nuclear-norm §9 X5, §5 (A3 and its reduced form for beta(0) = 0), §7.2.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_distinct
from attnlab.data import scores_equal, stack
from attnlab.data.assumptions import small_initial_loss
from attnlab.experiments.kq_nuclear.common import (
    SOURCE,
    ScoresConfig,
    check_limit_records,
    diagonal_init,
    distance_limit,
    factor_not_trained,
    gradient_preconditioned,
    kq_as_beta,
    last_distance_note,
    late_distances,
    rate_limit,
    resolvable_remark,
    revised_size,
    zero_entry_rate,
)
from attnlab.experiments.registry import register
from attnlab.metrics import attention_margin, margin_normalized
from attnlab.models import Diagonal
from attnlab.plotting import (
    EPS,
    house_figure,
    label_axes,
    label_ours,
    log_gap_axis,
    new_figure,
    theory_hline,
    theory_line,
)
from attnlab.svm import attention_svm
from attnlab.training.flow import gradient_flow
from attnlab.verify import Claim, Experiment, ExperimentResult, Reading, Revision, RunContext, old_sizes

__all__ = ["X5Config", "run_x5"]


@dataclass(frozen=True)
class X5Config(ScoresConfig):
    """X5: sweep the score gap; where Assumption 3 holds, does the diagonal flow reach the l1-SVM direction?

    Spec: kq-nuclear-norm §9 X5, §5, §7.2. All values are ours.

    Attributes
    ----------
    gaps : tuple of float
        Score gaps of the optimal token, one data set and run each.
    omega : float
        Initialisation scale ``omega_0`` of (5).
    step : float
        Arc length of each normalised-GD step.
    steps : int
        Normalised-GD steps; > 2 ``record_every``: the limit rows fit a line to the second half of the records with
        ``mu > 1``, >= 2 of them, and ``W_0 = 0`` has ``mu = 0`` (ours, what the fit needs).
    record_every : int
        Steps between records.
    seed : int
        Data seed.
    """

    gaps: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0)
    omega: float = 0.1
    step: float = 0.04
    steps: int = 50_000
    record_every: int = 500
    seed: int = 0

    OURS = ("n", "T", "d", "gaps", "omega", "step", "steps", "record_every", "seed")
    INTS = ("n", "T", "d", "steps", "record_every", "seed")
    POSITIVE = ("omega", "step")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.gaps or not all(0 < g < math.inf for g in self.gaps):
            raise ValidationError(f"gaps must be a non-empty tuple of positive score gaps, got {self.gaps}")
        check_distinct("gaps", self.gaps)
        check_limit_records(self)


KQ_AS_BETA, K_FROZEN = kq_as_beta("x5"), factor_not_trained("x5")
K_TILTED = gradient_preconditioned("x5", "Diagonal", 1.25, 0.8, "-1.25-0.8")
FALSIFIERS = (K_FROZEN, K_TILTED, KQ_AS_BETA)
_DATA = ("n", "T", "d", "gaps", "seed")
A3_SHARE = Claim(
    "hypothesis of the sweep's row: Assumption 3 holds at some gap of the sweep (share of gaps where it holds)",
    "003:Thm4.1",
    f"{SOURCE} §5, §9 X5",
    kind="property",
    id="a3-share",
    reading=Reading(
        "number of gaps of the sweep whose data set satisfies Assumption 3 at initialisation (5) "
        "(data.assumptions.small_initial_loss)",
        "initialisation (no run)",
        "the scores_equal data set of each gap, the config's seed",
        ">= 1 gap, so that the row below tests the theorem",
        sizes=_DATA,
    ),
)
_REACHED_READING = Reading(
    "||beta_hat||_1 / (l1-SVM optimum) of each gap's diagonal K,Q run, beta_hat = diag(W) / mu(W); the row shows "
    "the gap whose ratio is farthest from 1",
    "the last step",
    "the gaps where Assumption 3 holds (the hypothesis row), one run each from initialisation (5) at omega",
    "|ratio - 1| <= config.l1_rtol: 0.05 full, 0.1 quick (ours: the gap left after a finite arc length; the theorem "
    "gives the limit, no rate, §10)",
    sizes=(*_DATA, "omega", "step", "steps", "l1_rtol"),
)
_LN_MU_READING = Reading(
    "intercept a of the least-squares fit dist = a + b / ln mu, dist = |beta_hat - beta_l1|_inf the max-entry "
    "distance of each gap's diagonal K,Q run (beta_hat = diag(W) / mu(W)) to that gap's l1-SVM solution: the "
    "distance's limit as mu -> infinity, read along the roughly 1 / ln mu approach we derive (spec §7.2 [D]); "
    "the row shows the largest a",
    "the second half of the records with mu > 1",
    "the gaps where Assumption 3 holds (the hypothesis row), one run each from initialisation (5) at omega",
    "a <= atol at every such gap, atol = 0.035 (ours: half the l1 solutions' smallest nonzero entry, 0.0698 at "
    "every gap where A3 holds, so that a limit within it keeps the solution's nonzero entries and their signs; "
    "as kq-nuclear.x2's l1-optimum). One-sided: a distance is >= 0, and where it falls faster than 1 / ln mu "
    "over the window the fit extrapolates below 0",
    {"atol": 0.035},
    (*_DATA, "omega", "step", "steps", "record_every"),
)
_RATE_READING = Reading(
    "intercept a of the least-squares fit dist = a + b mu^-kappa, dist = |beta_hat - beta_l1|_inf the max-entry "
    "distance of each gap's diagonal K,Q run (beta_hat = diag(W) / mu(W)) to that gap's l1-SVM solution, kappa = "
    "1 - max |g_j| over that solution's zero entries j (entries below zero_tol of the largest), g = sum_il "
    "lambda_il B_il its LP's dual certificate (0.206, 0.214, 0.218, 0.222 at gaps 2, 3, 4, 6): the distance's "
    "limit as mu -> infinity along the rate at which the zero entries fall, (omega0^2 / mu)^kappa (spec §7.2 "
    "[D], as kq-nuclear.x2's l1-optimum); the row shows the largest a",
    "the second half of the records with mu > 1",
    "the gaps where Assumption 3 holds (the hypothesis row), one run each from initialisation (5) at omega",
    "a <= atol at every such gap, atol = 0.035 (ours: half the l1 solutions' smallest nonzero entry, 0.0698 at "
    "every gap where A3 holds, so that a limit within it keeps the solution's nonzero entries and their signs; "
    "as kq-nuclear.x2's l1-optimum). One-sided: a distance is >= 0; before the zero entries reach their "
    "asymptotic rate the distance falls slower than mu^-kappa and the fit overestimates the limit (true a up to "
    "+0.013 quick, +0.002 full)",
    {"atol": 0.035, "zero_tol": 1e-2},
    (*_DATA, "omega", "step", "steps", "record_every"),
)
_RATE_ONE_INSTALL = dataclasses.replace(
    _RATE_READING,
    tolerance="a <= atol at every such gap, atol = 0.035 (ours: half the l1 solutions' smallest nonzero entry, "
    "0.0698 at every gap where A3 holds, so that a limit within it keeps the solution's nonzero entries and "
    "their signs; as kq-nuclear.x2's l1-optimum). One-sided: a distance is >= 0; before the zero entries reach "
    "their asymptotic rate the distance falls slower than mu^-kappa and the fit overestimates the limit (true a "
    "up to +0.008 quick, +0.002 full)",
)
_FULL = {"n": 2, "T": 3, "d": 8, "gaps": [0.5, 1.0, 2.0, 3.0, 4.0, 6.0], "seed": 0, "omega": 0.1, "l1_rtol": 0.05}
_OLD_REACHED = "where A3 holds, ||beta_hat||_1 reaches the l1-SVM optimum (Thm 4.1; worst gap)"
_OLD_LN_MU = (
    "where A3 holds, beta_hat reaches the l1-SVM solution (Thm 4.1; limit of the max-entry distance along a + b / "
    "ln mu, worst gap)"
)
REACHED = Claim(
    "where A3 holds, beta_hat reaches the l1-SVM solution (Thm 4.1; limit of the max-entry distance along a + b "
    "mu^-kappa, kappa from each gap's l1 dual, worst gap)",
    "003:Thm4.1",
    f"{SOURCE} §7.2, §9 X5",
    (K_FROZEN.name, K_TILTED.name, KQ_AS_BETA.name),
    id="l1-reached",
    reading=dataclasses.replace(
        _RATE_READING,
        tolerance="a <= atol at every such gap, atol = 0.035 (ours: half the l1 solutions' smallest nonzero entry, "
        "0.0698 at every gap where A3 holds, so that a limit within it keeps the solution's nonzero entries and "
        "their signs; as kq-nuclear.x2's l1-optimum). One-sided: a distance is >= 0; before the zero entries reach "
        "their asymptotic rate the distance falls slower than mu^-kappa and the fit overestimates the limit (over "
        "the installs we ran, whose cvxpy and Clarabel versions move kappa through the l1 dual, the true a has been "
        "+0.008 to +0.013 quick and +0.002 full; the row's measured value is this run's)",
    ),
    revisions=(
        Revision(
            dataclasses.replace(
                _REACHED_READING,
                tolerance="|ratio - 1| <= config.l1_rtol: 0.05 full, 0.3 quick (ours: the gap left after a finite arc "
                "length; the theorem gives the limit, no rate, §10)",
            ),
            "2026-11-22",
            "the quick size changed for the CI budget with every experiment's (12fefa3: 1500 steps of 0.2 -> 800 "
            "of 0.3) and its tolerance came down from 0.3 to 0.1; the full size did not change",
            "pass: 1.0119 (rel 0.3; recomputed at the old sizes with the current code)",
            "pass: 1.0046 (rel 0.05)",
            claim=_OLD_REACHED,
            sizes=old_sizes(_FULL, step=(0.04, 0.2), steps=(50000, 1500), l1_rtol=(0.05, 0.3)),
        ),
        Revision(
            _REACHED_READING,
            "2026-11-28",
            "too weak to fail: the l1 norm of a limit at another vertex of the feasible set is near the optimum. "
            "xi_k's gradient times diag(linspace(1.25, 0.8)) converges to another vertex (0.20-0.25 from each "
            "gap's solution in an entry), and its worst ratio passed at the quick size (1.063 within 10%; 1.059 "
            "failed the full size's 5%). The distance to each gap's solution reads the vertex itself, as "
            "kq-nuclear.x2's l1-optimum does since the same day: its limit a along a + b / ln mu is at most -0.026 "
            "quick and -0.025 full for the true runs against 0.247 and 0.258 under that preconditioner (now the "
            "falsifier 'k-gradient-preconditioned-1.25-0.8'). The run recomputes this reading beside the current row",
            "pass: 1.0146 (rel 0.1) (55b3e6f)",
            "pass: 1.0046 (rel 0.05) (55b3e6f)",
            claim=_OLD_REACHED,
            sizes=old_sizes(_FULL, step=(0.04, 0.3), steps=(50000, 800), l1_rtol=(0.05, 0.1)),
        ),
        Revision(
            _LN_MU_READING,
            "2026-11-28",
            "the distance does not fall like 1 / ln mu but like a power of mu, (omega0^2 / mu)^kappa with kappa = 1 - "
            "max |g_j| off the l1 solution's support (kq-nuclear.x2's l1-optimum, re-read the same day, af8e4e0). "
            "Fitted along 1 / ln mu the faster fall extrapolated below 0 at every gap where A3 holds (-0.045, -0.035, "
            "-0.026, -0.026 quick; -0.025, -0.030, -0.033, -0.037 full at gaps 2, 3, 4, 6), so a limit up to about "
            "0.035 + 0.025 = 0.06 away with the true runs' approach would have passed at both sizes; along the "
            "derived rate (kappa 0.206-0.222) the true fits are -0.008, +0.002, +0.010, +0.013 quick and +0.0009, "
            "+0.0015, +0.0016, +0.0020 full, so such a limit passes only up to 0.022 (quick) / 0.033 (full) away. "
            "The other vertex of xi_k's gradient x diag(linspace(1.25, 0.8)) fails both (0.243 quick, 0.252 full "
            "along the rate). The run recomputes this reading beside the current row",
            "pass: -0.0256 (<= 0.035; -0.045 to -0.026 over gaps 2, 3, 4, 6) (af8e4e0)",
            "pass: -0.0248 (<= 0.035; -0.037 to -0.025) (af8e4e0)",
            claim=_OLD_LN_MU,
        ),
        Revision(
            _RATE_READING,
            "2026-11-29",
            "its tolerance's text quoted the true quick fits of the day it was declared (up to +0.013); the current "
            "code gives -0.002, +0.002, +0.008, +0.007 quick at gaps 2, 3, 4, 6 (audit of stale numbers, 2026-11-29), "
            "so the text says up to +0.008. The statistic, window, subset and atol are unchanged",
            "pass: 0.0081 (<= 0.035; gap 4) (8a9b237)",
            "pass: 0.0020 (<= 0.035; gap 6) (8a9b237)",
        ),
        Revision(
            _RATE_ONE_INSTALL,
            "2026-11-30",
            "its tolerance's text quoted one install's true quick fit again (up to +0.008 at 8a9b237); the same code "
            "on another install (cvxpy 1.9.3, Clarabel 0.11.1) gives +0.0126 at gap 6, near the +0.013 of the day "
            "the reading was declared: the fit's kappa comes from each gap's l1 dual, a solver's output, so the "
            "number moves with the solvers' versions. The text now gives the range seen over the installs and "
            "leaves the value to the measured column. The statistic, window, subset and atol are unchanged",
            "pass: 0.0126 (<= 0.035; gap 6) (b958a2a)",
            "pass: 0.0020 (<= 0.035; gap 6) (d2ec801)",
        ),
    ),
)


def _sweep_table(config: X5Config, datasets: list, refs: list, frame: pd.DataFrame) -> pd.DataFrame:
    """One row per gap: A3 (predicate and reduced form), the initial loss and its bound, the final l1 ratio and
    distance to the l1 solution, the rate kappa of its zero entries, and the distance's limit along mu^-kappa (the
    row's reading) and along 1 / ln mu (its revision 3)."""
    rows, last = [], frame[frame["step"] == frame["step"].max()].set_index("run")
    for r, (gap, data, ref) in enumerate(zip(config.gaps, datasets, refs)):
        a3 = small_initial_loss(data)
        reduced = config.n * math.exp(-gap / config.T) <= 1 + (config.n - 1) * math.exp(-gap)  # spec kq §5 [D]
        kappa = zero_entry_rate(data, ref.beta, ref.duals, REACHED.param("zero_tol"))
        run = frame[frame["run"] == r]
        limit, _ = rate_limit(*late_distances(run), kappa)  # spec §7.2 [D]: dist = a + b mu^-kappa, a -> 0
        rows.append(
            {
                "gap": gap,
                "a3_holds": a3.holds,
                "a3_reduced_form": reduced,
                "initial_loss": a3.measured,
                "a3_bound": a3.threshold,
                "final_l1_ratio": float(last.loc[r, "l1_ratio"]),
                "final_dist_l1": float(last.loc[r, "dist_l1"]),
                "kappa": kappa,
                "dist_limit": limit,
                "dist_limit_ln_mu": distance_limit(run),
                "reached": bool(limit <= REACHED.param("atol")),
            }
        )
    return pd.DataFrame(rows)


def run_x5(config: X5Config, ctx: RunContext) -> ExperimentResult:
    """X5: one diagonal NGD path per gap (data stacked on the runs axis); A3 and the reached l1 solution per gap."""
    datasets = [scores_equal(config.n, config.T, config.d, gap, seed=config.seed) for gap in config.gaps]
    batch = stack(datasets)  # one run per gap, (R, n, T, d)
    _, xi_k0, xi_q0 = diagonal_init((config.omega,) * len(config.gaps), config.d)
    flow = gradient_flow(
        Diagonal(config.d, xi_k0=xi_k0, xi_q0=xi_q0),
        batch,
        step=config.step,
        steps=config.steps,
        record_every=config.record_every,
        progress=ctx.progress,
    )
    refs = [attention_svm(data, norm="l1-diag") for data in datasets]
    args = (batch.X, batch.Z, flow.path["W"], batch.select)
    mu, W_hat = attention_margin(*args), margin_normalized(*args)  # (S, R)
    beta_hat = torch.diagonal(W_hat, dim1=-2, dim2=-1)  # (S, R, d)
    ratio = beta_hat.abs().sum(-1) / torch.tensor([ref.norm_value for ref in refs])
    dist = (beta_hat - torch.stack([ref.beta for ref in refs])).abs().amax(-1)  # (S, R)
    frame = flow.frame.assign(
        gap=np.tile(config.gaps, len(mu)),
        mu=mu.reshape(-1).numpy(),
        l1_ratio=ratio.reshape(-1).numpy(),
        dist_l1=dist.reshape(-1).numpy(),
    )
    table = _sweep_table(config, datasets, refs, frame)
    holds, violated = table[table["a3_holds"]], table[~table["a3_holds"]]
    worst = (
        float(holds["final_l1_ratio"].iloc[int((holds["final_l1_ratio"] - 1).abs().argmax())]) if len(holds) else 0.0
    )
    ln_mu = REACHED.revised(3)
    checks = [
        A3_SHARE.holds(
            ">= 1 gap",
            f"{len(holds)} of {len(table)} gaps ({', '.join(f'{g:g}' for g in holds['gap']) or 'none'})",
            A3_SHARE.reading.tolerance,
            len(holds) > 0,
        ),
        resolvable_remark(
            _smallest(holds, "kappa"),
            "the scores_equal data sets of the gaps where Assumption 3 holds, the config's seed",
            "the smallest kappa over the data sets",
            _kappas(holds),
        ),
        REACHED.less(_worst(holds, "dist_limit"), REACHED.param("atol"), support=len(holds), spread=_spread(holds)),
        ln_mu.less(_worst(holds, "dist_limit_ln_mu"), ln_mu.param("atol"), support=len(holds)),
        REACHED.revised(2).close(1.0, worst, revised_size(REACHED, 2, "l1_rtol", ctx.quick), support=len(holds)),
    ]
    notes = [
        f"A3 violated at gaps {violated['gap'].tolist()}; of those, reached the l1 solution (the row's reading): "
        f"{violated.loc[violated['reached'], 'gap'].tolist()} "
        "(A3 is sufficient in the theorem, not shown necessary)"
    ]
    fig = _x5_figure(config, frame, table)
    return ExperimentResult(
        frame=frame, checks=checks, figures={"assumption3": fig}, tables={"sweep": table}, notes=notes
    )


def _worst(holds: pd.DataFrame, column: str) -> float:
    """The largest limit over the gaps where A3 holds (nan where it holds at none)."""
    return float(holds[column].max()) if len(holds) else math.nan


def _smallest(holds: pd.DataFrame, column: str) -> float:
    """The smallest value over the gaps where A3 holds (nan where it holds at none)."""
    return float(holds[column].min()) if len(holds) else math.nan


def _spread(holds: pd.DataFrame) -> str:
    """The rates, and the last distance of the gap whose limit the row shows, for the limit row's spread."""
    if not len(holds):
        return _kappas(holds)
    worst = holds.iloc[int(holds["dist_limit"].to_numpy().argmax())]
    last = last_distance_note(float(worst["final_dist_l1"]), REACHED.param("atol"))
    return f"{_kappas(holds)}; at gap {worst['gap']:g} (the largest a) {last}"


def _kappas(holds: pd.DataFrame) -> str:
    """The rates of the gaps where A3 holds, for the row's spread."""
    return "kappa " + ", ".join(f"{k:.3g} (gap {g:g})" for g, k in zip(holds["gap"], holds["kappa"]))


@house_figure
def _x5_figure(config: X5Config, frame: pd.DataFrame, table: pd.DataFrame):
    fig, axes = new_figure(2, width=4.0)
    for r, gap in enumerate(config.gaps):
        part = frame[(frame["run"] == r) & (frame["mu"] > 1)]
        style = "-" if bool(table.loc[r, "a3_holds"]) else ":"
        suffix = "" if style == "-" else " (A3 fails)"
        axes[0].plot(np.log(part["mu"]), part["dist_l1"].clip(lower=EPS), style, label=f"gap {gap:g}{suffix}")
    theory_hline(axes[0], REACHED.param("atol"), "the limit's tolerance")
    log_gap_axis(axes[0], r"$|\hat\beta - \beta_{\ell_1}|_\infty$")
    axes[0].set_xlabel(r"$\ln \mu(t)$")
    axes[1].plot(table["gap"], table["initial_loss"], "o-", label=r"$L(\theta(0))$")
    theory_line(axes[1], table["gap"], table["a3_bound"], "A3 bound", marker="s")
    axes[1].set_yscale("log")
    label_axes(axes[1], "score gap", "loss at initialisation")
    for ax in axes:
        ax.legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="kq-nuclear.x5",
        cost=42.0,
        config_type=X5Config,
        run=run_x5,
        quick={"steps": 800, "step": 0.3, "record_every": 40},
        claims=(A3_SHARE, REACHED),
        falsifiers=FALSIFIERS,
    )
)
