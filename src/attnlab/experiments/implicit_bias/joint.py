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
from attnlab.data import condition1, dm, near_orthogonal
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
        Step length of per-block NGD, of joint NGD and of the joint rule A6.
    alpha : float
        Decay exponent of the joint rule A6, the rule Theorem 4 speaks of (``alpha in [2/3, 1)``); A6 runs beside
        the figure's four methods for the theory row and is not one of the paper's curves.
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
    alpha: float = 2.0 / 3.0
    gd_lr: float = 0.5
    polyak_cap: float | None = None
    steps: int = 2000
    record_every: int = 10
    loss: str = "exp"
    seed: int = 0

    OURS = ("n", "d", "sigma_opt", "sigma_oth", "lr", "alpha", "gd_lr", "polyak_cap", "steps")

    POSITIVE = ("sigma_opt", "sigma_oth", "lr", "gd_lr")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.polyak_cap is not None:
            check_scalar("polyak_cap", self.polyak_cap, low=0.0, low_inclusive=False)
        check_scalar("alpha", self.alpha, low=2.0 / 3.0, high=1.0, high_inclusive=False)  # Thm 4's range
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


THEORY_RULE = "A6"  # the run Theorem 4's row reads: the joint rule A6 (spec §4), not one of the figure's curves
FIGURE = ("GD", "NGD", "Polyak", "NGD-joint")  # the paper's four methods, the only ones its remarks speak of


def _a6(config: Fig3Config):
    """The joint rule A6 (spec §4, eq. 13 with the 1/L factor and (t+1)^-alpha): the rule of Theorems 2-4."""
    return lambda m: JointAdaptive(
        [{"params": [m.v]}, {"params": [m.weight]}], lr=config.lr, alpha=config.alpha, normalizer="loss"
    )


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
    methods = {**_optimizers(config), THEORY_RULE: _a6(config)}
    for method, make in ctx.bar(methods.items(), desc="methods"):
        model = Combined(config.d, train_head=True)  # Condition 1: u_0 = 0, W_0 = 0
        traj = train(
            model, make(model), data, config.loss, config.steps, config.record_every, metrics, progress=ctx.progress
        )
        frames.append(traj.frame.assign(method=method, status=traj.frame["run"].map(dict(enumerate(traj.status)))))
    frame = pd.concat(frames, ignore_index=True)
    checks = [*_head_checks(frame), *_remarks(frame[frame["method"].isin(FIGURE)])]
    shown = frame[frame["method"].isin(FIGURE) & (frame["step"] > 0)]
    table = shown.pivot_table(index="step", columns="method", values="log_loss")
    overtaken = table.index[table["NGD"] < table["Polyak"]]
    a1, cond = near_orthogonal(data), condition1(data)  # spec §7: A1 and Condition 1's norm ratio
    notes = [
        f"Assumption 1 (kappa n T <= 1, C = 1 ours): kappa n T = {a1.measured:.3g}: "
        + ("inside A1" if a1.holds else "outside A1: the theorems' hypothesis is not met by this data set")
        + f"; Condition 1's norm ratio min ||x_opt||^2 / max ||x_other||^2 = {cond.measured:.3g} (>= 1 holds)",
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
_RULES_SLOPE = Reading(
    statistic="least-squares slope of log G(t) on log t, " + _WORST,
    window="every recorded step t >= T / sqrt(decade) (the last half-decade), T the last recorded step",
    subset=_SUBSET,
    tolerance="<= bound = -1, ours: Thm 4 gives no rate for u. Normalised steps of fixed length grow the head "
    "linearly (||u_t|| ~ t), so a bounded offset from u_mm's direction leaves 1 - corr ~ t^-2 (slope -2), while "
    "a head that tends to another direction levels off (slope -> 0); -1 is halfway. A C / log t rate (slope "
    "-1 / ln t) is refused: over a finite window it cannot be told from a head that levels off",
    params={"decade": 10, "bound": -1.0},
    sizes=_SIZES,
)
_RULES_TEXT = (
    "Thm 4: every normalised method (NGD, NGD-joint, Polyak) aligns u with u_mm: the worst 1 - corr(u_t, u_mm) "
    "falls like a power of t over the last half-decade (log-log slope at most -1)"
)
_ON_A6 = (
    "Theorem 4 is stated for the joint rule A6 with alpha in [2/3, 1) (spec §4 A6, §8.11); this reading took the "
    "worst head over fig. 3's per-block NGD (A7, alpha = 0), NGD-joint (A5) and Polyak, none of which the theorem "
    "covers (audit fid1 #5). The row now reads A6 (alpha = 2/3, lr 0.5) on the same data; the reading on the three "
    "rules goes on as the extension row head-aligns-rules (001:Ext-Thm4-rules), with the same falsifiers"
)
HEAD_ALIGNS = Claim(
    "Thm 4: the joint rule A6 aligns u with u_mm: over the last half-decade the log-log slope of "
    "1 - corr(u_t, u_mm) is at most -k, k the slope of log ||u_t||",
    "001:Thm4",
    f"{SOURCE} §8.11",
    falsifier=(W_FROZEN.name, U_SVM_OTHER.name),
    id="head-aligns",
    reading=Reading(
        statistic="least-squares slope of log(1 - corr(u_t, u_mm)) on log t of A6 (alpha, lr), u_mm the u-SVM of "
        "the optimal tokens; k the least-squares slope of log ||u_t|| on log t over the same records",
        window="every recorded step t >= T / sqrt(decade) (the last half-decade), T the last recorded step",
        subset=_SUBSET + "; outside Assumption 1 (kappa n T = 9.8 quick, 7.7 full)",
        tolerance="<= -k, ours (Thm 4 gives no rate for u), as implicit-bias.rates' u-aligns: u_t = c_t u_mm + a "
        "bounded offset leaves 1 - corr ~ ||u_t||^-2 (slope -2k), a head that tends to another direction levels off "
        "(slope -> 0); -k is halfway. A preconditioned head (head-preconditioned) is not registered here: under A6 "
        "it is told apart only after ~10^4 steps (rates' u-aligns revision: -0.482 against -0.403 at 2000 steps)",
        params={"decade": 10},
        sizes=(*_SIZES, "alpha"),
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
        Revision(
            reading=_RULES_SLOPE,
            date="2026-11-29",
            why=_ON_A6,
            quick="pass: -2.00729 <= -1 (28 records from t = 130 to T = 400) (8a9b237)",
            full="pass: -2.00192 <= -1 (7103c0e)",
            claim=_RULES_TEXT,
        ),
    ),
)
HEAD_ALIGNS_RULES = Claim(
    "extension of Thm 4 to fig. 3's normalised rules (Thm 4 covers A6 only): per-block NGD (A7), NGD-joint (A5) "
    "and Polyak align u with u_mm: the worst 1 - corr(u_t, u_mm) falls like a power of t over the last "
    "half-decade (log-log slope at most -1)",
    "001:Ext-Thm4-rules",
    f"{SOURCE} §8.11",
    falsifier=(W_FROZEN.name, HEAD_PRECONDITIONED.name, U_SVM_OTHER.name),
    id="head-aligns-rules",
    reading=_RULES_SLOPE,
)
CLAIMS = (HEAD_ALIGNS, HEAD_ALIGNS_RULES)


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
    """Thm 4 on ``u`` under A6 (the slope of ``1 - corr`` against ``-k``), and its extension to the normalised rules
    (the slope of ``log G`` against -1). Both bounds are ours: Thm 4 gives no rate (the readings say why)."""
    a6 = frame[(frame["method"] == THEORY_RULE) & (frame["step"] > 0)].sort_values("step")
    T = int(a6["step"].iloc[-1])
    rows = a6[a6["step"] >= T / math.sqrt(HEAD_ALIGNS.param("decade"))]  # spec §8.11: the last half-decade
    slope, _ = fit_slope(rows["step"], 1 - rows["head_alignment"])
    k, _ = fit_slope(rows["step"], rows["head_norm"])
    theorem = HEAD_ALIGNS.less(
        slope, -k,
        spread=f"ours: halfway between a bounded offset's ||u||^-2 (slope {-2 * k:.3g}) and a gap that levels off, "
        f"k = {k:.3g} the slope of log ||u_t|| over the same {len(rows)} records from t = {int(rows['step'].iloc[0])} "
        f"to T = {T} (gap {1 - float(rows['head_alignment'].iloc[0]):.3g} to {1 - float(rows['head_alignment'].iloc[-1]):.3g})",
    )  # fmt: skip
    gap = _worst_gap(frame)
    steps = gap.index.to_numpy()
    last = steps >= steps[-1] / math.sqrt(HEAD_ALIGNS_RULES.param("decade"))  # spec §8.11: the last half-decade
    slope, _ = fit_slope(steps[last], gap.to_numpy()[last])
    first = int(steps[last][0])
    extension = HEAD_ALIGNS_RULES.less(
        slope,
        HEAD_ALIGNS_RULES.param("bound"),
        spread=f"ours: halfway between a bounded offset's t^-2 and a gap that levels off (Thm 4 gives no rate); "
        f"slope over {int(last.sum())} records from t = {first} to T = {int(steps[-1])} (worst gap "
        f"{float(gap.loc[first]):.3g} at t = {first}, {float(gap.iloc[-1]):.3g} at T)",
    )
    return [theorem, extension]


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
            result="001:Fig3",
            tolerance="value at the last step; lowest wins",
        ),
        observation(
            "fig. 3: every other method is faster than GD (GD's log L at the last step is the highest)",
            "GD highest",
            shown,
            ranked[-1] == "GD",
            source,
            result="001:Fig3",
            tolerance="value at the last step",
        ),
        observation(
            "fig. 3: NGD and NGD-joint reach similar losses (log L_NGD / log L_joint at the last step)",
            "similar",
            ratio,
            abs(ratio - 1) <= 0.1,
            source,
            result="001:Fig3",
            tolerance="within 10% (ours: the paper gives no number)",
        ),
        observation(
            "fig. 3: NGD slightly faster than NGD-joint on the other metrics (NGD minus NGD-joint at the last step: "
            "corr(W, W_mm), corr(u, u_mm), mean phi_opt)",
            ">= 0 on each",
            ", ".join(f"{c} {v:+.3g}" for c, v in ahead.items()),
            all(v >= 0 for v in ahead.values()),
            source,
            result="001:Fig3",
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
