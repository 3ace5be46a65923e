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

from attnlab._validation import ValidationError
from attnlab.data import scores_equal, stack
from attnlab.data.assumptions import small_initial_loss
from attnlab.experiments.kq_nuclear.common import (
    SOURCE,
    ScoresConfig,
    diagonal_init,
    factor_not_trained,
    kq_as_beta,
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
        Normalised-GD steps.
    record_every : int
        Steps between records.
    l1_rtol : float
        Relative gap allowed between ``||beta_hat||_1`` and the l1-SVM optimum at the last step.
    seed : int
        Data seed.
    """

    gaps: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0)
    omega: float = 0.1
    step: float = 0.04
    steps: int = 50_000
    record_every: int = 500
    l1_rtol: float = 0.05
    seed: int = 0

    OURS = ("n", "T", "d", "gaps", "omega", "step", "steps", "record_every", "l1_rtol", "seed")
    INTS = ("n", "T", "d", "steps", "record_every", "seed")
    POSITIVE = ("omega", "step", "l1_rtol")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.gaps or any(g <= 0 for g in self.gaps):
            raise ValidationError(f"gaps must be a non-empty tuple of positive score gaps, got {self.gaps}")


KQ_AS_BETA, K_FROZEN = kq_as_beta("x5"), factor_not_trained("x5")
FALSIFIERS = (K_FROZEN, KQ_AS_BETA)
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
_FULL = {"n": 2, "T": 3, "d": 8, "gaps": [0.5, 1.0, 2.0, 3.0, 4.0, 6.0], "seed": 0, "omega": 0.1, "l1_rtol": 0.05}
REACHED = Claim(
    "where A3 holds, ||beta_hat||_1 reaches the l1-SVM optimum (Thm 4.1; worst gap)",
    "003:Thm4.1",
    f"{SOURCE} §7.2, §9 X5",
    (K_FROZEN.name, KQ_AS_BETA.name),
    id="l1-reached",
    reading=_REACHED_READING,
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
            sizes=old_sizes(_FULL, step=(0.04, 0.2), steps=(50000, 1500), l1_rtol=(0.05, 0.3)),
        ),
    ),
)


def _sweep_table(config: X5Config, datasets: list, ratio: torch.Tensor) -> pd.DataFrame:
    """One row per gap: A3 (predicate and reduced form), the initial loss and its bound, the final l1 ratio."""
    rows = []
    for r, (gap, data) in enumerate(zip(config.gaps, datasets)):
        a3 = small_initial_loss(data)
        reduced = config.n * math.exp(-gap / config.T) <= 1 + (config.n - 1) * math.exp(-gap)  # spec kq §5 [D]
        final = float(ratio[-1, r])
        rows.append(
            {
                "gap": gap,
                "a3_holds": a3.holds,
                "a3_reduced_form": reduced,
                "initial_loss": a3.measured,
                "a3_bound": a3.threshold,
                "final_l1_ratio": final,
                "reached": bool(abs(final - 1) <= config.l1_rtol),
            }
        )
    return pd.DataFrame(rows)


def run_x5(config: X5Config, ctx: RunContext) -> ExperimentResult:
    """X5: one diagonal NGD path per gap (data stacked on the runs axis); A3 and the reached l1 ratio per gap."""
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
    l1_values = torch.tensor([attention_svm(data, norm="l1-diag").norm_value for data in datasets])
    args = (batch.X, batch.Z, flow.path["W"], batch.select)
    mu, W_hat = attention_margin(*args), margin_normalized(*args)  # (S, R)
    ratio = torch.diagonal(W_hat, dim1=-2, dim2=-1).abs().sum(-1) / l1_values  # (S, R)
    frame = flow.frame.assign(
        gap=np.tile(config.gaps, len(mu)), mu=mu.reshape(-1).numpy(), l1_ratio=ratio.reshape(-1).numpy()
    )
    table = _sweep_table(config, datasets, ratio)
    holds, violated = table[table["a3_holds"]], table[~table["a3_holds"]]
    worst = (
        float(holds["final_l1_ratio"].iloc[int((holds["final_l1_ratio"] - 1).abs().argmax())]) if len(holds) else 0.0
    )
    checks = [
        A3_SHARE.holds(
            ">= 1 gap",
            f"{len(holds)} of {len(table)} gaps ({', '.join(f'{g:g}' for g in holds['gap']) or 'none'})",
            A3_SHARE.reading.tolerance,
            len(holds) > 0,
        ),
        REACHED.close(1.0, worst, config.l1_rtol, support=len(holds)),
    ]
    notes = [
        f"A3 violated at gaps {violated['gap'].tolist()}; of those, reached the l1 limit: "
        f"{violated.loc[violated['reached'], 'gap'].tolist()} "
        "(A3 is sufficient in the theorem, not shown necessary)"
    ]
    fig = _x5_figure(config, frame, table)
    return ExperimentResult(
        frame=frame, checks=checks, figures={"assumption3": fig}, tables={"sweep": table}, notes=notes
    )


@house_figure
def _x5_figure(config: X5Config, frame: pd.DataFrame, table: pd.DataFrame):
    fig, axes = new_figure(2, width=4.0)
    for r, gap in enumerate(config.gaps):
        part = frame[(frame["run"] == r) & (frame["mu"] > 1)]
        style = "-" if bool(table.loc[r, "a3_holds"]) else ":"
        suffix = "" if style == "-" else " (A3 fails)"
        axes[0].plot(
            np.log(part["mu"]), (1 - part["l1_ratio"]).abs().clip(lower=EPS), style, label=f"gap {gap:g}{suffix}"
        )
    theory_hline(axes[0], config.l1_rtol, "tolerance")
    log_gap_axis(axes[0], r"$|1 - \|\hat\beta\|_1 \,/\, \ell_1\mathrm{-SVM\ optimum}|$")
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
        quick={"steps": 800, "step": 0.3, "record_every": 40, "l1_rtol": 0.1},
        claims=(A3_SHARE, REACHED),
        falsifiers=FALSIFIERS,
    )
)
