"""Figs. 2 and 5: GD, NGD, NGD with momentum and Polyak on Example 1 with a fixed decoder.

Spec: docs/theory/implicit-bias-ngd.md §9 (figs. 2, 5; every setting is a proposal [L]), §6.1 (Example 1), §4 A1-A4,
§8 items 3, 4, 8 (Theorem 1's rate, Lemma 1's saturation, Theorem 6's GD). Reads: config, build (data, W-SVM,
optimizers), measure (one training run per method), declared checks and the paper's remarks, figure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_distinct, check_in, check_scalar
from attnlab.data import example1
from attnlab.experiments.fig2_remark import assumption1_note
from attnlab.experiments.implicit_bias.common import (
    NORMED_MOM,
    SOURCE,
    Example1Config,
    check_windows,
    last,
    nearest_record,
    small_init,
    worst_log_one_minus_opt,
)
from attnlab.experiments.implicit_bias.falsifiers import (
    attention_temperature,
    head_scaled,
    l_star_zero,
    ngd_gradient_step,
    svm_other_token,
)
from attnlab.experiments.implicit_bias.figures import fixed_decoder_figure
from attnlab.experiments.implicit_bias.remarks import cap_grid_remark, fixed_decoder_remarks
from attnlab.experiments.registry import register
from attnlab.metrics import alignment, largest_gap, margin, opt_softmax, optimal_loss
from attnlab.models import Combined
from attnlab.optim import NormalizedGD, PolyakStep
from attnlab.optim.transforms import INFIMUM
from attnlab.svm import attention_svm
from attnlab.training import train
from attnlab.verify import Check, Claim, Experiment, ExperimentResult, Reading, Revision, RunContext, fit_slope

__all__ = ["Fig2Config", "Fig5Config", "assumption1_note", "run_fixed_decoder"]


@dataclass(frozen=True)
class Fig2Config(Example1Config):
    """Fig. 2: GD, NGD, NGD-mom and Polyak on Example 1 with a fixed decoder.

    Spec: implicit-bias-ngd §9 fig. 2 (all settings [L]), §6.1 (Example 1), §4 A1-A4.

    The paper caps the adaptive step size of NGD, NGD-mom and Polyak (its values were lost): NGD and NGD-mom take
    the spec's proposed cap 10, Polyak ``polyak_cap``. With a cap, NGD turns into GD with step ``ngd_cap`` once
    ``||grad L|| < eta / ngd_cap``, so the theory rows (Theorems 1, 6, Lemma 1: A2 has no cap) read one more run,
    uncapped NGD (``"NGD-uncapped"``). Uncapped, NGD-mom's heavy-ball step ``eta m / ||g||`` grows without bound
    once ``||g||`` shrinks faster than ``momentum`` per step (``||W_t|| ~ 1e72`` after 2000 steps). The paper's
    remark "Polyak is faster than NGD" is judged over the declared grid ``ngd_caps`` x ``polyak_caps`` of caps.

    Attributes
    ----------
    opt_pos : str
        Where the optimal token sits: ``"first"`` (it is the query) or ``"random"``.
    antipodal : bool
        Optimal tokens without noise, equal or antipodal across sequences (Fig. 5).
    init_scale : float
        Standard deviation of the entries of ``W_0`` (small initialisation, Lemma 4).
    ngd_lr : float
        NGD's step length ``eta`` (also NGD-mom's).
    ngd_cap : float or None
        Cap on the step size of the figure's NGD; None is uncapped (A2).
    momentum : float
        Heavy-ball momentum of NGD-mom (A4).
    mom_cap : float or None
        Cap on NGD-mom's step size.
    polyak_cap : float
        Cap on Polyak's step size (A3).
    ngd_caps, polyak_caps : tuple of float
        The grid of caps over which "Polyak is faster than NGD" is judged (``inf``: uncapped); declared before it
        ran (docs/experiments/implicit-bias.md).
    gd_lr : float
        GD's step size (A1).
    steps : int
        Training steps of every method. With ``record_every`` it must leave >= 4 records in the second half (``t >=
        steps // 2``: saturation-slope fits a slope on each of its quarters) and put the record nearest ``steps /
        10`` strictly between 1 and ``steps`` (ngd-decade divides by its ``ln t0``); ours, what the fits need.
    record_every : int
        Steps between recorded rows.
    loss : str
        ``"exp"`` (the theory's) or ``"logistic"``.
    seed : int
        Seed of the data; ``seed + 1`` draws ``W_0``.
    """

    d: int = 128
    opt_pos: str = "first"
    antipodal: bool = False
    init_scale: float = 0.01
    ngd_lr: float = 0.1
    ngd_cap: float | None = 10.0
    momentum: float = 0.9
    mom_cap: float | None = 10.0
    polyak_cap: float = 10.0
    ngd_caps: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0, math.inf)
    polyak_caps: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0, math.inf)
    gd_lr: float = 1.0
    steps: int = 2000
    record_every: int = 10
    loss: str = "exp"
    seed: int = 0

    OURS = (
        "n",
        "T",
        "d",
        "rho",
        "sigma",
        "opt_pos",
        "init_scale",
        "ngd_lr",
        "ngd_cap",
        "momentum",
        "mom_cap",
        "polyak_cap",
        "ngd_caps",
        "polyak_caps",
        "gd_lr",
        "steps",
    )

    POSITIVE = ("rho", "sigma", "ngd_lr", "polyak_cap", "gd_lr")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_in("opt_pos", self.opt_pos, ("first", "random"))
        check_scalar("init_scale", self.init_scale, low=0.0)
        check_scalar("momentum", self.momentum, low=0.0, high=1.0, high_inclusive=False)
        for name in ("ngd_cap", "mom_cap"):
            if getattr(self, name) is not None:
                check_scalar(name, getattr(self, name), low=0.0, low_inclusive=False)
        for name in ("ngd_caps", "polyak_caps"):
            caps = getattr(self, name)
            if not caps or any(not isinstance(c, int | float) or not c > 0 for c in caps):
                raise ValidationError(f"{name} must be a non-empty tuple of caps > 0 (inf: uncapped), got {caps!r}")
            check_distinct(name, caps)
        check_windows("steps", self.steps, "record_every", self.record_every, _short_windows)


@dataclass(frozen=True)
class Fig5Config(Fig2Config):
    """Fig. 5: as Fig. 2 with antipodal optimal tokens and another Polyak cap.

    Spec: implicit-bias-ngd §9 fig. 5 (the cap differs from Fig. 2 [P]; its value is lost, 100 is ours).

    Attributes
    ----------
    antipodal : bool
        True: the optimal tokens are ``y_i rho u``, without noise.
    polyak_cap : float
        Cap on Polyak's step size (ours; the paper's differs from Fig. 2's and is lost).
    """

    antipodal: bool = True
    polyak_cap: float = 100.0


# ---- build ----------------------------------------------------------------------------------------------------------


def _sgd(params, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=lr)  # spec A1


THEORY_NGD = "NGD-uncapped"  # the run the theory rows read: A2 without a cap


def _ngd(config: Fig2Config, cap: float | None) -> Callable:
    """NGD (spec A2) with its step size ``eta / ||g||`` capped at ``cap`` (None or inf: uncapped)."""
    cap = None if cap is None or math.isinf(cap) else cap
    return lambda p: NormalizedGD(p, lr=config.ngd_lr, max_step=cap)


def _polyak(cap: float) -> Callable:
    """Polyak (spec A3) with L_* the infimum: the engine takes L - L_* from the margins, which float64's L loses
    below 2e-16 L; its step size capped at ``cap`` (inf: uncapped)."""
    return lambda p: PolyakStep(p, max_step=cap, optimal_loss=INFIMUM)


def _optimizers(config: Fig2Config) -> dict[str, Callable]:
    """Method name -> optimizer factory on a parameter list (spec §4 A1-A4): the figure's, the theory's NGD, then
    NGD-mom in A4's alternative form (the paper's form was lost)."""
    return {
        "GD": lambda p: _sgd(p, config.gd_lr),  # A1
        "NGD": _ngd(config, config.ngd_cap),  # A2 with the paper's cap
        "NGD-mom": lambda p: NormalizedGD(p, lr=config.ngd_lr, max_step=config.mom_cap, momentum=config.momentum),
        "Polyak": _polyak(config.polyak_cap),
        THEORY_NGD: _ngd(config, None),  # A2 as Theorem 1 states it
        NORMED_MOM: lambda p: NormalizedGD(
            p, lr=config.ngd_lr, max_step=config.mom_cap, momentum=config.momentum, momentum_variant="normalized_buffer"
        ),  # A4's alternative form, with NGD-mom's cap
    }


# ---- measure --------------------------------------------------------------------------------------------------------


def run_fixed_decoder(config: Fig2Config, ctx: RunContext) -> ExperimentResult:
    """Figs. 2 and 5: train every method from one small initialisation and compare with the W-SVM; then NGD and
    Polyak at every cap of the declared grid, for the paper's remark that Polyak is faster."""
    data = example1(
        config.n, config.T, config.d, config.rho, config.sigma, config.opt_pos, config.antipodal, seed=config.seed
    )
    sol = attention_svm(data, norm="fro")
    gen = torch.Generator().manual_seed(config.seed + 1)
    W0 = small_init(config.d, config.init_scale, gen)  # spec §9: N(0, s^2)
    L_star = float(optimal_loss(data.X, data.y, data.v, data.select, config.loss))
    metrics = [alignment(sol.W), opt_softmax(), worst_log_one_minus_opt(), margin()]

    def run(make: Callable, watch: list) -> pd.DataFrame:
        model = Combined(config.d, W0=W0)
        traj = train(
            model, make(model.parameters()), data, config.loss, config.steps, config.record_every, watch,
            progress=ctx.progress,
        )  # fmt: skip
        return traj.frame.assign(status=traj.frame["run"].map(dict(enumerate(traj.status))))

    runs = {method: run(make, metrics) for method, make in ctx.bar(_optimizers(config).items(), desc="methods")}
    frame = pd.concat([rows.assign(method=method) for method, rows in runs.items()], ignore_index=True)
    done = {("NGD", _cap(config.ngd_cap)): runs["NGD"], ("NGD", math.inf): runs[THEORY_NGD]}
    done[("Polyak", _cap(config.polyak_cap))] = runs["Polyak"]
    wanted = [("NGD", _cap(c), _ngd(config, c)) for c in config.ngd_caps]
    wanted += [("Polyak", _cap(c), _polyak(c)) for c in config.polyak_caps]
    grid = {
        (method, cap): done[(method, cap)] if (method, cap) in done else run(make, [alignment(sol.W)])
        for method, cap, make in ctx.bar(wanted, desc="cap grid")
    }
    W_mm_norm = float(sol.W.norm())
    checks = _theory_checks(config, frame, W_mm_norm, L_star, float(largest_gap(data.X, data.y, data.v, data.select)))
    remark, table = cap_grid_remark(config, grid, L_star)
    checks += [*fixed_decoder_remarks(config, frame, L_star), remark]
    figure = fixed_decoder_figure(config, frame, W_mm_norm, L_star)
    notes = [
        f"||W_mm|| = {W_mm_norm:.6g}, L_* = {L_star:.6g}, W-SVM status {sol.status}",
        assumption1_note(data, config.antipodal),
    ]
    return ExperimentResult(
        frame=frame, checks=checks, figures={"fig": figure}, tables={"cap_grid": table}, notes=notes
    )


def _cap(cap: float | None) -> float:
    """A cap as a number: ``inf`` for uncapped (None)."""
    return math.inf if cap is None else float(cap)


def _gap_at(rows: pd.DataFrame, step: float) -> tuple[int, float]:
    """The recorded step nearest ``step`` and ``1 - corr`` there."""
    row = rows.iloc[int(np.abs(rows["step"].to_numpy(float) - step).argmin())]
    return int(row["step"]), float(1 - row["alignment"])


# ---- declared checks ------------------------------------------------------------------------------------------------

SVM_OTHER, NGD_GRADIENT_STEP = svm_other_token(__name__), ngd_gradient_step(__name__)
L_STAR_ZERO = l_star_zero(__name__)
TEMPERATURE, HEAD_SCALED = attention_temperature(__name__), head_scaled(__name__)

_SIZES = ("n", "T", "d", "rho", "sigma", "opt_pos", "antipodal", "init_scale", "loss", "seed")  # the data, W_0, loss
_RUN = "the one Example-1 data set of the config's seed, every method from the same W_0 ~ N(0, init_scale^2)"
NGD_DECADE = Claim(
    "NGD converges in direction at Theorem 1's rate: 1 - corr(W_t, W_mm) falls over the last decade by at least "
    "the O~(1/t) factor",
    "001:Thm1",
    f"{SOURCE} §8.3",
    falsifier=NGD_GRADIENT_STEP.name,
    id="ngd-decade",
    reading=Reading(
        statistic="gap(T) / gap(t0) of uncapped NGD (A2), gap = 1 - corr(W_t, W_mm), W_mm the Frobenius W-SVM",
        window="t0 the recorded step t > 0 nearest T / decade, T the last recorded step",
        subset=_RUN,
        tolerance="<= (t0/T) ln T / ln t0: the factor by which a rate C log t / t shrinks from t0 to T, any C (Thm 1)",
        params={"decade": 10},
        sizes=(*_SIZES, "ngd_lr", "steps", "record_every"),
    ),
)
NGD_RATE = Claim(
    "directional rate (Thm 1): slope of log(1 - corr) against log t over the 2nd half is at most that of "
    "log t / t (NGD)",
    "001:Thm1",
    f"{SOURCE} §8.3",
    falsifier=NGD_GRADIENT_STEP.name,
    id="ngd-rate",
    reading=Reading(
        statistic="least-squares slope of log(1 - corr(W_t, W_mm)) on log t, uncapped NGD (A2)",
        window="every recorded step t >= steps // 2 (the second half)",
        subset=_RUN,
        tolerance="<= -1 + 1/ln t_mid, t_mid the window's median step: the local slope of log t / t (Thm 1's O~)",
        params={"half": 2, "slope": -1.0},
        sizes=(*_SIZES, "ngd_lr", "steps", "record_every"),
    ),
)
LOSS_TO_L_STAR = Claim(
    "NGD's loss tends to L_* > 0 (the loss does not reach 0; all attention on the optimal tokens)",
    "001:Lem1",
    f"{SOURCE} §3, §8.4",
    falsifier=(HEAD_SCALED.name, L_STAR_ZERO.name),
    id="loss-to-l-star",
    reading=Reading(
        statistic="|L(W_T) - L_*| of uncapped NGD (A2), L_* = (1/n) sum_i l(gamma_opt,i)",
        window="the last recorded step T",
        subset=_RUN,
        tolerance="<= ulps * eps64 * L_* + L_T Delta_max (T_tokens - 1) exp(-||W_T|| / ||W_mm||): float64 rounding "
        "of L_* plus the gap Lemma 1 leaves (its o(1) taken as 0; exp loss, |l'| = l)",
        params={"ulps": 4},
        sizes=(*_SIZES, "ngd_lr", "steps"),
    ),
)
_SATURATION_DRIFT = Reading(
    statistic="least-squares slope of max_i log(1 - phi_opt,i) on ||W_t||, uncapped NGD (A2)",
    window="every recorded step t >= steps // 2 (the second half)",
    subset=_RUN,
    tolerance="-1/||W_mm|| +- drift * |slope(3rd quarter) - slope(4th quarter)|, the quarters splitting the window "
    "at its median step: the o(1) of Lemma 1 still moving",
    params={"half": 2, "drift": 3.0},
    sizes=(*_SIZES, "ngd_lr", "steps", "record_every"),
)
SATURATION_SLOPE = Claim(
    "softmax saturation (Lemma 1): slope of max_i log(1 - phi_opt) against ||W_t|| is -1/||W_mm|| (NGD, 2nd half)",
    "001:Lem1",
    f"{SOURCE} §8.4",
    falsifier=(TEMPERATURE.name, SVM_OTHER.name),
    id="saturation-slope",
    reading=dataclasses.replace(
        _SATURATION_DRIFT,
        tolerance="-1/||W_mm|| +- delta(W_T), delta(W) = 1/||W_mm|| - mu(W)/||W|| the margin deficit of W's direction "
        "(mu the attention margin, min_i min_t <A_it, W>) at the window's last record T: the o(1) of Lemma 1's "
        "exponent ||W|| (1/||W_mm|| - o(1)), measured on the run",
        params={"half": 2},
    ),
    revisions=(
        Revision(
            _SATURATION_DRIFT,
            "2026-11-30",
            "the tolerance, 3x the change of the slope between the window's two quarters, shrinks where the local "
            "slope's offset turns, though the offset itself does not vanish there: at full size the row failed at "
            "seeds 2, 3 and 4 of fig. 5 (-1.03195 against -1.0318 +- 6.2e-5 at seed 3, offset -1.5e-4) and passed "
            "at seed 0 because the half averaged across the offset's zero. Lemma 1's o(1) is the margin deficit of "
            "the current direction, which the run measures (2.2e-3 to 4.3e-3 at the full size's last record, seeds "
            "0-4 of both figures; 16 to 150 times the offsets; probed before this reading was adopted). The run "
            "recomputes this reading beside the current row",
            "pass: fig. 2 -2.5549 against -2.55389 +- 1.7e-3, fig. 5 -1.05998 against -1.05993 +- 1.4e-3 (56985d1)",
            "pass: fig. 2 -2.05371 against -2.05357 +- 2.7e-4, fig. 5 -1.03715 against -1.03713 +- 1.4e-4 "
            "(56985d1); fig. 5 fails at seeds 2, 3 and 4 (00a0aea)",
        ),
    ),
)


def _short_windows(records: np.ndarray, steps: int) -> str | None:
    """Why the records of a run of ``steps`` steps leave a window of :func:`_theory_checks` too few points, or None."""
    positive = records[records > 0]  # the theory rows read NGD's records t > 0
    late = positive[positive >= steps // SATURATION_SLOPE.param("half")]
    if len(late) < 4:
        return (
            f"ngd-rate and saturation-slope fit the records t >= steps // 2, saturation-slope one slope on each of "
            f"its two quarters (>= 2 records each), so they need >= 4 records there; it holds {len(late)}"
        )
    t0 = nearest_record(positive, steps / NGD_DECADE.param("decade"))
    if not 1 < t0 < steps:
        return (
            f"ngd-decade reads the record nearest steps / 10, t0 = {t0}, against steps through ln steps / ln t0, "
            "which needs 1 < t0 < steps"
        )
    return None


_SAME_START_READING = Reading(
    statistic="number of distinct values of the loss, ||W_0|| and corr(W_0, W_mm) over the methods",
    window="step 0",
    subset="every method of the run",
    tolerance="exactly one value each, and one step-0 row per method",
)
_QUICK = {"n": 4, "T": 4, "d": 16, "steps": 200, "ngd_lr": 0.3, "record_every": 5}


def _same_start(config_type: type[Fig2Config]) -> Claim:
    """The property that every method starts from one point; its sizes are the data and W_0's (fig. 2 or 5).

    A property of our set-up of the figure, so it names the figure (``001:Fig2`` / ``001:Fig5``), not a theorem: it
    was ``same-start`` under ``001:Thm1`` until 2026-11-29 and was counted among Theorem 1's checks.
    """
    return Claim(
        "all methods start from the same point: loss, ||W_0|| and corr(W_0, W_mm) equal at step 0",
        "001:Fig5" if config_type is Fig5Config else "001:Fig2",
        f"{SOURCE} §9",
        kind="property",
        id="methods-same-start",
        reading=dataclasses.replace(_SAME_START_READING, sizes=_SIZES),
    )


SAME_START = {config_type: _same_start(config_type) for config_type in (Fig2Config, Fig5Config)}
CLAIMS = (NGD_DECADE, NGD_RATE, LOSS_TO_L_STAR, SATURATION_SLOPE)  # and SAME_START of each figure
# gd-behind (NGD a decade below GD in 1 - corr, labelled Thm 6) was retired on 2026-11-29: an ordering passes
# whatever GD converges to; it is fig. 2's remark "NGD is much faster than GD", an observation in remarks.py


def _theory_checks(config: Fig2Config, frame: pd.DataFrame, W_mm_norm: float, L_star: float, delta: float):
    ngd = frame[(frame["method"] == THEORY_NGD) & (frame["step"] > 0)].sort_values("step")
    T = int(ngd["step"].iloc[-1])
    t0, gap0 = _gap_at(ngd, T / NGD_DECADE.param("decade"))
    _, gap_T = _gap_at(ngd, T)
    decade = (t0 / T) * math.log(T) / math.log(t0)  # spec §8.3: C log t / t from t0 to T
    late = ngd[ngd["step"] >= config.steps // NGD_RATE.param("half")]
    t_mid = float(late["step"].median())
    start = frame[frame["step"] == 0]
    checks = [
        NGD_DECADE.less(
            gap_T / gap0,
            decade,
            spread=f"Thm 1: (t0/T) ln T / ln t0 for C log t / t from t0 = {t0} to T = {T} (gap {gap0:.3g} at t0)",
        ),
        NGD_RATE.slope(
            late["step"],
            1 - late["alignment"],
            NGD_RATE.param("slope"),
            1.0 / math.log(t_mid),
            side="at_most",
            spread=f"the local slope of log t / t is -1 + 1/ln t = {-1 + 1 / math.log(t_mid):.3g} at the "
            f"median step {t_mid:g} (one log factor, the O~ of Thm 1)",
        ),  # fmt: skip
        _loss_check(frame, L_star, delta, W_mm_norm, config.T),
        *_saturation_checks(ngd[ngd["step"] >= config.steps // SATURATION_SLOPE.param("half")], W_mm_norm),
        SAME_START[type(config)].holds(
            "one value each",
            f"{start['loss'].nunique()} loss, {start['norm'].nunique()} norm, {start['alignment'].nunique()} corr",
            "exact equality over the methods",
            bool(
                len(start) == frame["method"].nunique() and (start[["loss", "norm", "alignment"]].nunique() == 1).all()
            ),
        ),
    ]
    return checks


def _loss_check(frame: pd.DataFrame, L_star: float, delta: float, W_mm_norm: float, T: int) -> Check:
    """``|L_T - L_*|`` within float64 rounding plus the bound Lemma 1 puts on it at ``||W_T||``.

    With a convex decreasing loss, ``0 <= L - L_* <= max_i l_i Delta_i (1 - phi_opt,i)`` and Lemma 1 bounds
    ``1 - phi_opt <= (T - 1) exp(-||W_t|| / ||W_mm||)`` (its o(1) taken as 0).
    """
    loss, norm = last(frame, THEORY_NGD, "loss"), last(frame, THEORY_NGD, "norm")
    lemma1 = (T - 1) * math.exp(-norm / W_mm_norm)  # spec §8.4
    ulps = LOSS_TO_L_STAR.param("ulps")
    allowed = ulps * np.finfo(np.float64).eps * L_star + loss * delta * lemma1  # exp loss: |l'| = l
    return LOSS_TO_L_STAR.close(
        L_star, loss, atol=allowed,
        spread=f"{ulps} float64 rounding units of L_* plus L Delta_max (T-1) exp(-||W_T||/||W_mm||) = "
        f"{loss * delta * lemma1:.3g} (Lemma 1, ||W_T|| {norm:.4g})",
    )  # fmt: skip


def _saturation_checks(late: pd.DataFrame, W_mm_norm: float) -> list[Check]:
    """Lemma 1's slope on the second half within the margin deficit of the last direction; and revision 1's
    reading (three times the slope's drift between the last two quarters)."""
    predicted = -1.0 / W_mm_norm  # spec §8.4: -min <A, W_mm> / ||W_mm||, min margin 1
    end = late.iloc[-1]
    deficit = 1.0 / W_mm_norm - float(end["margin"]) / float(end["norm"])  # spec §8.4: Lemma 1's o(1) at W_T
    quarter = late["step"] >= late["step"].median()
    early_slope, _ = fit_slope(
        late.loc[~quarter, "norm"], late.loc[~quarter, "log_one_minus_opt"], logx=False, logy=False
    )
    late_slope, _ = fit_slope(late.loc[quarter, "norm"], late.loc[quarter, "log_one_minus_opt"], logx=False, logy=False)
    drift = abs(late_slope - early_slope)
    old = SATURATION_SLOPE.revised(1)
    factor = old.param("drift")
    return [
        SATURATION_SLOPE.slope(
            late["norm"], late["log_one_minus_opt"], predicted, deficit, logx=False, logy=False,
            spread=f"the margin deficit of the last direction, 1/||W_mm|| - mu(W_T)/||W_T|| = {deficit:.3g} at "
            f"||W_T|| = {float(end['norm']):.4g}: the o(1) of Lemma 1",
        ),
        old.slope(
            late["norm"], late["log_one_minus_opt"], predicted, factor * drift, logx=False, logy=False,
            spread=f"{factor:g} x the slope's drift between the third and last quarter ({drift:.3g})",
        ),
    ]  # fmt: skip


_FALSIFIERS = (SVM_OTHER, NGD_GRADIENT_STEP, L_STAR_ZERO, TEMPERATURE, HEAD_SCALED)


def _register(name: str, cost: float, config_type: type[Fig2Config]) -> None:
    """Register one figure of the fixed-decoder runs: Fig. 2 and Fig. 5 differ only in their config."""
    register(
        Experiment(
            name=name,
            cost=cost,
            config_type=config_type,
            run=run_fixed_decoder,
            quick=_QUICK,
            claims=(*CLAIMS, SAME_START[config_type]),
            falsifiers=_FALSIFIERS,
        )
    )


_register("implicit-bias.fig2", 30.0, Fig2Config)
_register("implicit-bias.fig5", 20.0, Fig5Config)
