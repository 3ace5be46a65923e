"""Fig. 3: GD, per-block NGD, Polyak and joint NGD training the head ``u`` and ``W`` together on DM.

Spec: docs/theory/implicit-bias-ngd.md §9 fig. 3 (settings [L]; the paper's three remarks), §6.2 (DM), §4 A1, A3,
A5, A7, §8.11 (Theorem 4: ``u`` aligns with the u-SVM). Reads: config, build, measure, checks, figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.data import dm
from attnlab.experiments.implicit_bias.common import SOURCE, ImplicitBiasConfig, check_windows
from attnlab.experiments.implicit_bias.falsifiers import head_preconditioned, u_svm_other_token, w_frozen
from attnlab.experiments.implicit_bias.figures import joint_figure
from attnlab.experiments.registry import register
from attnlab.metrics import Metric, alignment, head_alignment, opt_softmax
from attnlab.models import Combined
from attnlab.optim import JointAdaptive, NormalizedGD, PolyakStep
from attnlab.svm import attention_svm, head_svm
from attnlab.training import train
from attnlab.verify import (
    Claim,
    Experiment,
    ExperimentResult,
    Reading,
    Revision,
    RunContext,
    fit_slope,
    observation,
    old_sizes,
)

__all__ = ["Fig3Config", "run_fig3"]


@dataclass(frozen=True)
class Fig3Config(ImplicitBiasConfig):
    """Fig. 3: GD, per-block NGD (A7), Polyak and joint NGD (A5) training ``(u, W)`` from zero on DM.

    Spec: implicit-bias-ngd §9 fig. 3 (settings [L]), §6.2 (DM), §4 A5, A7, A3 (``L_* = 0``: ``u`` can grow).

    ``polyak_cap=None`` (uncapped) is ours: a cap turns Polyak into GD with that step once the loss is small.

    Attributes
    ----------
    d : int
        Token width.
    sigma_opt : float
        Norm scale of the optimal token (the first, also the query).
    sigma_oth : float
        Norm scale of the other token (smaller than ``sigma_opt``: Condition 1).
    lr : float
        Step length of per-block NGD and of joint NGD.
    gd_lr : float
        GD's step size.
    polyak_cap : float or None
        Cap on Polyak's step size; None is uncapped.
    steps : int
        Training steps of every method; > ``record_every``, so that the last half-decade ``[steps / sqrt(10),
        steps]`` holds the >= 2 records head-aligns fits a slope to (ours, what the fit needs).
    record_every : int
        Steps between recorded rows.
    loss : str
        ``"exp"`` (the theory's) or ``"logistic"``.
    seed : int
        Seed of the data.
    """

    d: int = 200
    sigma_opt: float = 2.0
    sigma_oth: float = 1.0
    lr: float = 0.5
    gd_lr: float = 0.5
    polyak_cap: float | None = None
    steps: int = 2000
    record_every: int = 10
    loss: str = "exp"
    seed: int = 0

    OURS = ("n", "d", "sigma_opt", "sigma_oth", "lr", "gd_lr", "polyak_cap", "steps")

    POSITIVE = ("sigma_opt", "sigma_oth", "lr", "gd_lr")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.polyak_cap is not None:
            check_scalar("polyak_cap", self.polyak_cap, low=0.0, low_inclusive=False)
        if self.sigma_opt <= self.sigma_oth:
            raise ValidationError(f"sigma_opt == {self.sigma_opt} must exceed sigma_oth == {self.sigma_oth}")
        check_windows("steps", self.steps, "record_every", self.record_every, _short_windows)


# ---- build ----------------------------------------------------------------------------------------------------------


def _optimizers(config: Fig3Config) -> dict:
    """Method name -> optimizer factory on a model (spec §4 A1, A7, A3, A5)."""
    return {
        "GD": lambda m: torch.optim.SGD(m.parameters(), lr=config.gd_lr),  # A1 on theta
        "NGD": lambda m: JointAdaptive(
            [{"params": [m.v]}, {"params": [m.weight]}], lr=config.lr, alpha=0.0, normalizer="block_grad_norm"
        ),  # A7: per-block NGD
        "Polyak": lambda m: PolyakStep(  # A3 with L_* = 0
            m.parameters(), max_step=math.inf if config.polyak_cap is None else config.polyak_cap, optimal_loss=0.0
        ),
        "NGD-joint": lambda m: NormalizedGD(m.parameters(), lr=config.lr),  # A5: one norm over (u, W)
    }


def _head_norm() -> Metric:
    return Metric("head_norm", lambda state: torch.linalg.vector_norm(state["v"], dim=-1))


# ---- measure --------------------------------------------------------------------------------------------------------


def run_fig3(config: Fig3Config, ctx: RunContext) -> ExperimentResult:
    """Fig. 3: joint training on DM, against the W-SVM and the u-SVM of the optimal tokens."""
    data = dm(config.n, config.d, config.sigma_opt, config.sigma_oth, seed=config.seed)
    W_mm = attention_svm(data, norm="fro").W
    u_mm = head_svm(data, p=2.0).v
    metrics = [alignment(W_mm), head_alignment(u_mm), opt_softmax(), _head_norm()]
    frames = []
    for method, make in ctx.bar(_optimizers(config).items(), desc="methods"):
        model = Combined(config.d, train_head=True)  # Condition 1: u_0 = 0, W_0 = 0
        traj = train(
            model, make(model), data, config.loss, config.steps, config.record_every, metrics, progress=ctx.progress
        )
        frames.append(traj.frame.assign(method=method, status=traj.frame["run"].map(dict(enumerate(traj.status)))))
    frame = pd.concat(frames, ignore_index=True)
    checks = [*_head_checks(frame), *_remarks(frame)]
    table = frame[frame["step"] > 0].pivot_table(index="step", columns="method", values="log_loss")
    overtaken = table.index[table["NGD"] < table["Polyak"]]
    notes = [
        "final log L per method: " + str(table.iloc[-1].round(4).to_dict()),
        "NGD's loss falls below Polyak's from step "
        + (f"{int(overtaken[0])} on" if len(overtaken) else "never (Polyak stays fastest)"),
    ]
    return ExperimentResult(frame=frame, checks=checks, figures={"fig": joint_figure(config, frame)}, notes=notes)


# ---- declared checks ------------------------------------------------------------------------------------------------

U_SVM_OTHER, W_FROZEN = u_svm_other_token(__name__), w_frozen(__name__)
HEAD_PRECONDITIONED = head_preconditioned(__name__)
_METHODS = ("NGD", "NGD-joint", "Polyak")
_WORST = (
    "G(t) = max over NGD (A7), NGD-joint (A5) and Polyak (A3, L_* = 0) of 1 - corr(u_t, u_mm), u_mm the u-SVM of the "
    "optimal tokens"
)
_SUBSET = "the one DM data set of the config's seed, (u, W) from zero (Condition 1)"
_SIZES = ("n", "d", "sigma_opt", "sigma_oth", "lr", "polyak_cap", "steps", "record_every", "loss", "seed")
_DECADE_RATIO = Reading(
    statistic="G(T) / G(t0), " + _WORST,
    window="t0 the recorded step t > 0 nearest T / decade, T the last recorded step",
    subset=_SUBSET,
    tolerance="<= ln t0 / ln T: the factor by which C / log t shrinks from t0 to T (Thm 4 gives no rate for u; "
    "Thm 3's O(1/log t) for W is the slowest we accept)",
    params={"decade": 10},
    sizes=_SIZES,
)
HEAD_ALIGNS = Claim(
    "Thm 4: every normalised method (NGD, NGD-joint, Polyak) aligns u with u_mm: the worst 1 - corr(u_t, u_mm) "
    "falls like a power of t over the last half-decade (log-log slope at most -1)",
    "001:Thm4",
    f"{SOURCE} §8.11",
    falsifier=(W_FROZEN.name, HEAD_PRECONDITIONED.name, U_SVM_OTHER.name),
    id="head-aligns",
    reading=Reading(
        statistic="least-squares slope of log G(t) on log t, " + _WORST,
        window="every recorded step t >= T / sqrt(decade) (the last half-decade), T the last recorded step",
        subset=_SUBSET,
        tolerance="<= bound = -1, ours: Thm 4 gives no rate for u. Normalised steps of fixed length grow the head "
        "linearly (||u_t|| ~ t), so a bounded offset from u_mm's direction leaves 1 - corr ~ t^-2 (slope -2), while "
        "a head that tends to another direction levels off (slope -> 0); -1 is halfway. A C / log t rate (slope "
        "-1 / ln t) is refused: over a finite window it cannot be told from a head that levels off",
        params={"decade": 10, "bound": -1.0},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            reading=_DECADE_RATIO,
            date="2026-11-28",
            why="too weak to fail: the last-decade ratio against ln t0 / ln T passed at the quick size (150 steps) "
            "under wrong mechanisms that turn u towards another direction: the head's gradient times "
            "diag(linspace(0.95, 1.05)) in every method (now the falsifier 'head-preconditioned') gave 0.0214 "
            "<= 0.460, times diag(linspace(0.9, 1.1)) 0.0657, the tokens the model sees times "
            "diag(linspace(0.9, 1.1)) 0.0820; at the full size they fail (0.875, 0.966, 0.963 > 0.697). Their "
            "gap levels off, so the log-log slope over the last half-decade separates them (-0.256, -0.089, "
            "-0.077 at 400 steps, about 0 at the full size) from the true run's -2.01; the quick size grew to 400 "
            "steps, where the preconditioned head (0.95-1.05) reads -0.896 at 150 steps but -0.256 at 400",
            quick="pass: 0.00432 <= 0.460 (t0 = 10, T = 150; worst gap 0.0221 at t0, 9.56e-05 at T) (afb0975)",
            full="pass: 0.00990 <= 0.697 (t0 = 200, T = 2000; worst gap 6.84e-05 at t0, 6.78e-07 at T) (afb0975)",
            claim="Thm 4: every normalised method (NGD, NGD-joint, Polyak) aligns u with u_mm: the worst "
            "1 - corr(u_t, u_mm) falls over the last decade at least as fast as 1/log t",
            sizes=old_sizes(
                {
                    "sigma_opt": 2.0,
                    "sigma_oth": 1.0,
                    "lr": 0.5,
                    "polyak_cap": None,
                    "record_every": 10,
                    "loss": "exp",
                    "seed": 0,
                },
                n=(8, 4),
                d=(200, 30),
                steps=(2000, 150),
            ),
        ),
    ),
)
CLAIMS = (HEAD_ALIGNS,)


def _short_windows(records: np.ndarray, steps: int) -> str | None:
    """Why the records of a run of ``steps`` steps leave head-aligns' window too few points, or None."""
    positive = records[records > 0]
    window = positive[positive >= steps / math.sqrt(HEAD_ALIGNS.param("decade"))]
    if len(window) < 2:
        return (
            f"head-aligns fits a slope over the last half-decade [steps / sqrt(10), steps], which needs >= 2 records "
            f"(it holds {len(window)}): steps must exceed record_every"
        )
    return None


def _worst_gap(frame: pd.DataFrame) -> pd.Series:
    """``G(t)``: the worst ``1 - corr(u_t, u_mm)`` over the normalised methods at each recorded step ``t > 0``."""
    rows = frame[frame["method"].isin(_METHODS) & (frame["step"] > 0)]
    return (1 - rows.pivot_table(index="step", columns="method", values="head_alignment")).max(axis=1)


def _head_checks(frame: pd.DataFrame) -> list:
    """Thm 4 on ``u``: the slope of ``log G`` over the last half-decade, and the old last-decade ratio (revision 1).

    Thm 4 gives no rate for ``u``; the slope's bound is ours (the tolerance text of :data:`HEAD_ALIGNS` says why).
    """
    gap = _worst_gap(frame)
    steps = gap.index.to_numpy()
    T = int(steps[-1])
    last = steps >= T / math.sqrt(HEAD_ALIGNS.param("decade"))  # spec §8.11: the last half-decade
    slope, _ = fit_slope(steps[last], gap.to_numpy()[last])
    first = int(steps[last][0])
    current = HEAD_ALIGNS.less(
        slope,
        HEAD_ALIGNS.param("bound"),
        spread=f"ours: halfway between a bounded offset's t^-2 and a gap that levels off (Thm 4 gives no rate); "
        f"slope over {int(last.sum())} records from t = {first} to T = {T} (worst gap {float(gap.loc[first]):.3g} "
        f"at t = {first}, {float(gap.iloc[-1]):.3g} at T)",
    )
    old = HEAD_ALIGNS.revised(1)
    t0 = int(steps[int(np.abs(steps - T / old.param("decade")).argmin())])
    bound = math.log(t0) / math.log(T)  # spec §8.10-11: C / log t from t0 to T
    ratio = old.less(
        float(gap.iloc[-1] / gap.loc[t0]),
        bound,
        spread=f"ln t0 / ln T for C / log t from t0 = {t0} to T = {T} (worst gap {float(gap.loc[t0]):.3g} at t0, "
        f"{float(gap.iloc[-1]):.3g} at T)",
    )
    return [current, ratio]


def _remarks(frame: pd.DataFrame) -> list:
    """The paper's remarks about fig. 3, judged by the value at the last step (the paper's own criterion)."""
    source = f"{SOURCE} §9 fig. 3 (the paper's remark)"
    final = frame.sort_values("step").groupby("method").last()
    loss = final["log_loss"].to_dict()
    ranked = sorted(loss, key=loss.get)
    others = ["alignment", "head_alignment", "opt_softmax"]
    ahead = {c: float(final.loc["NGD", c] - final.loc["NGD-joint", c]) for c in others}
    ratio = loss["NGD"] / loss["NGD-joint"]
    shown = ", ".join(f"{m} {loss[m]:.4g}" for m in ranked)
    return [
        observation(
            "fig. 3: Polyak is the fastest (log L at the last step lowest of the four methods)",
            "Polyak lowest",
            shown,
            ranked[0] == "Polyak",
            source,
            tolerance="value at the last step; lowest wins",
        ),
        observation(
            "fig. 3: every other method is faster than GD (GD's log L at the last step is the highest)",
            "GD highest",
            shown,
            ranked[-1] == "GD",
            source,
            tolerance="value at the last step",
        ),
        observation(
            "fig. 3: NGD and NGD-joint reach similar losses (log L_NGD / log L_joint at the last step)",
            "similar",
            ratio,
            abs(ratio - 1) <= 0.1,
            source,
            tolerance="within 10% (ours: the paper gives no number)",
        ),
        observation(
            "fig. 3: NGD slightly faster than NGD-joint on the other metrics (NGD minus NGD-joint at the last step: "
            "corr(W, W_mm), corr(u, u_mm), mean phi_opt)",
            ">= 0 on each",
            ", ".join(f"{c} {v:+.3g}" for c, v in ahead.items()),
            all(v >= 0 for v in ahead.values()),
            source,
            tolerance="value at the last step, each metric",
        ),
    ]


register(
    Experiment(
        name="implicit-bias.fig3",
        cost=27.0,
        config_type=Fig3Config,
        run=run_fig3,
        quick={"n": 4, "d": 30, "steps": 400},
        claims=CLAIMS,
        falsifiers=(U_SVM_OTHER, W_FROZEN, HEAD_PRECONDITIONED),
    )
)
