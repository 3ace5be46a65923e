"""RegPath: the l_p regularisation path W_R = argmin_{||W||_p <= R} L(W) turns toward the l_p-AttSVM as R grows.

Spec: docs/theory/mirror-descent-lp.md §8.1 (the regularisation path of the optimal tokens: ``W_R / R ->
W^mm_opt / ||W^mm_opt||_p``; check by solving the constrained ERM for increasing R), §5 (l_p-AttSVM), §3 (dB_p),
§6 (the official synthetic generator). Not one of the paper's figures: the paper proves the path result but shows
no experiment of it.

The constrained risk is minimised by :func:`attnlab.svm.constrained_erm` (SLSQP) along an increasing grid of
radii, each solve started from the previous solution stretched to the new radius; one radius is solved again by
:func:`attnlab.training.projected.projected_mirror_descent` as a second solver.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.data import TokenSelectionData, unit_gaussian
from attnlab.experiments.mirror_descent.common import SOURCE, check_config, neighbours
from attnlab.experiments.registry import register
from attnlab.metrics import directional_bregman, entrywise_norm
from attnlab.models import log_excess_risk
from attnlab.models.functional import loss_gradients, token_scores
from attnlab.plotting import house_figure, label_axes, label_ours, new_figure
from attnlab.svm import SelectionSVMs, constrained_erm, constrained_stationarity
from attnlab.training.projected import projected_mirror_descent
from attnlab.verify import Check, Claim, Experiment, ExperimentResult, Falsifier, Reading, Revision, RunContext
from attnlab.verify.reading import old_sizes

__all__ = ["RegPathConfig", "run_regpath"]


@dataclass(frozen=True)
class RegPathConfig:
    """RegPath: the constrained ERM ``min_{||W||_p <= R} L(W)`` over a geometric grid of radii, for each p.

    Spec: mirror-descent-lp §8.1. All fields are ours (the paper has no experiment of the path); the data are the
    official generator's (§6) at the sizes of E1.

    Attributes
    ----------
    n, T, d : int
        Sequences, tokens per sequence (>= 2) and token dimension of each data set.
    ps : tuple of float
        Exponents p > 1 of the ball (the SVM exponents q of the comparison too); >= 2 distinct ones, since closest's
        revised reading compares each p with the grid's other SVMs (ours).
    datasets : int
        Data sets, seeds ``first_seed, first_seed + 1, ...``.
    first_seed : int
        Seed of the first data set.
    radii : tuple of float
        Radii in units of ``||W^mm_opt,p||_p`` (the norm at which the SVM direction reaches margin 1), increasing;
        the last three give the two slopes the rows compare (the defaults double).
    cross_check : int
        Index into ``radii`` of the radius solved again by projected mirror descent.
    md_steps : int
        Steps of projected normalised l_p mirror descent at that radius.
    md_step_scale : float
        Its step scale ``c`` (:func:`~attnlab.training.projected.projected_mirror_descent`): at 1 its first steps
        cross the ball and can land on a plateau of the non-convex risk (``first_seed`` 4); 0.3 stays in the basin
        of its start, the start of the SLSQP solve it checks.
    """

    n: int = 6
    T: int = 8
    d: int = 10
    ps: tuple[float, ...] = (1.75, 2.0, 3.0)
    datasets: int = 3
    first_seed: int = 1
    radii: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
    cross_check: int = 3
    md_steps: int = 3000
    md_step_scale: float = 0.3

    def __post_init__(self) -> None:
        check_config(self, ("n", "T", "d", "datasets", "first_seed", "md_steps"), ("md_step_scale",))
        if len(self.ps) < 2:  # distinct: check_config
            raise ValidationError(
                f"ps == {self.ps!r} must hold >= 2 distinct exponents, e.g. ps=(1.75, 2.0): closest's revised reading "
                "compares each p's path with the grid's other SVMs, none with one exponent (ours)"
            )
        radii = self.radii
        if len(radii) < 3 or any(b <= a for a, b in zip(radii, radii[1:])) or not 0 < radii[0] <= radii[-1] < math.inf:
            raise ValidationError(
                f"radii must be >= 3 positive, finite, strictly increasing values (two slopes to compare), got {radii}"
            )
        check_scalar("cross_check", self.cross_check, kind=int, low=0, high=len(self.radii) - 1)


_NEXT = {1.75: 2.0, 2.0: 3.0, 3.0: 1.75}  # the default ps, each mapped to the next one, cyclically


def _ball(exponent: Callable[[float], float]) -> Callable[[Callable], Callable]:
    """The patch of ``constrained_erm`` that solves in the ball of ``exponent(p)`` instead of p's."""

    def patch(solve: Callable) -> Callable:
        def wrong(data, p, *args, **kwargs):
            return solve(data, exponent(float(p)), *args, **kwargs)

        return wrong

    return patch


BALL_NORM = Falsifier(
    "ball-of-the-next-p",
    "the constraint ball of the ERM in the l_p' norm of the next entry of ps (1.75 -> 2 -> 3 -> 1.75; others "
    "p + 0.3), so the path follows another SVM",
    "attnlab.experiments.mirror_descent.regpath:constrained_erm",
    _ball(lambda p: _NEXT.get(p, p + 0.3)),
    kind="mechanism",
)


BALL_OFF = Falsifier(
    "ball-p+0.1",
    "the constraint ball of the ERM in the l_(p+0.1) norm while every SVM and dB_p keep p: an exponent slip the grid "
    "of ps does not resolve, its SVM about 1e-3 from p's in dB_p",
    "attnlab.experiments.mirror_descent.regpath:constrained_erm",
    _ball(lambda p: p + 0.1),
    kind="mechanism",
)
_EXT = "002:Ext-RegPath"  # ours: the paper proves the path result in its main text, which the seed lacks
_SIZES = ("n", "T", "d", "ps", "datasets", "first_seed", "radii")
_EVERY = "every data set, the optimal tokens argmax_t gamma_it (globally, hence locally, optimal)"
_CLOSEST_OLD = Reading(
    statistic="per data set, dB_p(W^mm_opt,p, W_R) / min over q != p of dB_p(W^mm_opt,q, W_R); the row reads "
    "its largest value over the data sets",
    window="the largest radius of the grid, R = radii[-1] ||W^mm_opt,p||_p",
    subset=_EVERY,
    tolerance="< 1 on every data set (strict: deterministic solves)",
    params={"bound": 1.0},
    sizes=_SIZES,
)
CLOSEST = Claim(
    "p={p:g}: at the largest radius the path W_R is closer in dB_p to W^mm_opt,p than to W^mm_opt,q of every other "
    "q of ps and of q = p +- delta, on every data set",
    _EXT,
    f"{SOURCE} §8.1",
    (BALL_NORM.name, BALL_OFF.name),
    id="closest",
    reading=Reading(
        statistic="per data set, dB_p(W^mm_opt,p, W_R) / min over the comparison exponents q of dB_p(W^mm_opt,q, "
        "W_R), q every other q of ps and q = p +- delta (l_q-AttSVMs of the optimal tokens); the row reads its "
        "largest value over the data sets",
        window="the largest radius of the grid, R = radii[-1] ||W^mm_opt,p||_p",
        subset=_EVERY,
        tolerance="< 1 on every data set (strict: deterministic solves). delta = 0.1 is ours: W_R / R tends to p's "
        "own SVM direction, so at a large enough radius it is nearer that than any other direction, the SVMs of "
        "p +- 0.1 (about 1e-3 from p's in dB_p) included; the path's own dB_p falls below theirs from R = 32 "
        "||W^mm_opt,p||_p on (at p = 3 the first data set's is still nearer l_3.1's SVM at R = 16)",
        params={"bound": 1.0, "delta": 0.1},
        sizes=_SIZES,
    ),
    revisions=(
        Revision(
            _CLOSEST_OLD,
            "2026-11-28",
            "too weak to fail: compared only with the grid's SVMs (q 0.25 or more from p), it passed the ERM in the "
            "ball of l_(p+0.1) (largest ratios 0.81 / 0.16 / 0.034 quick) and of l_(p-0.1) (0.25 / 0.59 / 0.048), "
            "whose paths turn to the SVMs of p +- 0.1; the row now compares with those SVMs too (the ball in "
            "l_(p+0.1) is the new falsifier ball-p+0.1)",
            "pass: largest ratios 0.24 / 0.19 / 0.036 (p = 1.75 / 2 / 3; 1e039b5); recomputed by every run",
            "pass: 0.088 / 0.078 / 0.015 (1e039b5); recomputed by every full run",
            claim="p={p:g}: at the largest radius the path W_R is closer in dB_p to W^mm_opt,p than to W^mm_opt,q of "
            "every other q of ps, on every data set",
        ),
    ),
)
VANISHES = Claim(
    "p={p:g}: dB_p(W^mm_opt,p, W_R) -> 0: it falls over the last two steps of the radius grid, and its log-log slope "
    "over the last step is no shallower than over the one before (a positive limit would flatten it), on every data set",
    _EXT,
    f"{SOURCE} §8.1",
    BALL_NORM.name,
    id="vanishes",
    reading=Reading(
        statistic="per data set, the log-log slopes of dB_p(W^mm_opt,p, W_R) against R over the last two steps of "
        "the radius grid (previous, last)",
        window="the last three radii of the grid",
        subset=_EVERY,
        tolerance="both slopes < 0 and last <= previous on every data set (no tolerance: a bounded or log-growing "
        "correction to R W^mm steepens the slope toward -2, a positive limit flattens it toward 0)",
        sizes=_SIZES,
    ),
)
_SOLVERS_READING = Reading(
    statistic="the largest KKT residual and | ||W_R||_p / R - 1 | over the radii and data sets; at the cross-check "
    "radius dB_p(W_R, W_MD) / dB_p(W^mm_opt,p, W_R); W_R and W_MD each the lower-risk of its solver from the path's "
    "start and, when the SVM ray's point is already below where that solve ended, from the ray (one rule, _solve); "
    "MD at step scale md_step_scale, from the start of the SLSQP solve it checks",
    window="every radius of the grid",
    subset=_EVERY,
    tolerance="KKT <= 1e-10, radius <= 1e-4, solvers <= 1e-4",
    sizes=(*_SIZES, "cross_check", "md_steps", "md_step_scale"),
)
_SOLVERS_FROM_START = dataclasses.replace(
    _SOLVERS_READING,
    statistic="the largest KKT residual and | ||W_R||_p / R - 1 | over the radii and data sets; at the cross-check "
    "radius dB_p(W_R, W_MD) / dB_p(W^mm_opt,p, W_R), W_MD from the start of the SLSQP solve it checks at step scale "
    "md_step_scale; W_R the lower-risk of the path's solve and the SVM ray's (when tried)",
)
SOLVERS = Claim(
    "p={p:g}: the constrained ERM is solved: every W_R is stationary on the sphere ||W||_p = R (largest KKT residual "
    "1 - cos(-grad L, grad psi)), lies on it, and projected l_p mirror descent reaches the same W_R at the "
    "cross-check radius (dB_p between the two solvers over the dB_p(W^mm_p, W_R) measured there)",
    _EXT,
    f"{SOURCE} §8.1",
    kind="property",
    id="solvers",
    reading=_SOLVERS_READING,
    revisions=(
        Revision(
            None,
            "2026-11-29",
            "declared without a reading; at first_seed 4 the warm-started path and projected MD at step scale 1 both "
            "ended on a plateau of the non-convex risk (log excess risk -3.9 and -4.5 where the SVM ray's solve "
            "reaches -9.0 at R = 8): the row failed, as it should, and the solver was fixed (the ray's solve, MD "
            "at step scale 0.3 from the checked solve's start); its reading is now written out",
            "pass: KKT <= 2e-12, solvers <= 1.8e-5 (p = 3; ec38968); fail at first_seed 4 (KKT 0.22 / 0.19 / 0.36)",
            "pass: KKT <= 8.6e-13, solvers <= 1.0e-14 (ec38968); fail at first_seed 4 (KKT 0.93-0.94)",
            sizes=old_sizes(
                {"n": 6, "T": 8, "d": 10, "ps": (1.75, 2.0, 3.0), "first_seed": 1},
                datasets=(3, 1),
                radii=((1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0), (8.0, 16.0, 32.0)),
                cross_check=(3, 0),
                md_steps=(3000, 1000),
            ),
        ),
        Revision(
            _SOLVERS_FROM_START,
            "2026-11-29",
            "at first_seed 6 (quick, p = 3, R = 8 ||W^mm||_p) SLSQP from 0 reaches the same W_R as from the SVM ray "
            "(log excess risk -9.0654 both, KKT 7e-15), while MD from 0 at step scale 0.3 stops at a local "
            "minimiser on the sphere (-8.0220 after 1000, 3000 and 10000 steps; the ray's point is -8.36): the "
            "solvers row failed (7.2) on MD's basin, not on W_R. MD from the ray reaches W_R (4e-8 after 1000 "
            "steps), so MD now takes the restart rule the path's solve takes",
            "pass at first_seed 1-5, 7 and 8; fail at first_seed 6 (solvers 7.2 at p = 3)",
            "pass: solvers <= 1.7e-14 (a4b3478); at first_seed 6 too (5.1e-13)",
        ),
    ),
)
CLAIMS = (CLOSEST, VANISHES, SOLVERS)
KKT_TOL = 1e-10  # cos = 1 - 1e-10: 1.4e-5 rad off the constraint normal; SLSQP reaches ~1e-13 (measured)
RADIUS_TOL = 1e-4  # the rows are scale-free; this only says the minimiser is on the sphere, not inside the ball
SOLVER_TOL = 1e-4  # dB_p is quadratic in the distance: the solvers agree to 1% of the direction error measured
SOLVER_WHY = (
    "KKT: SLSQP at ftol 1e-12; radius: the rows are scale-free, so only 'on the sphere' matters; solvers: dB_p is "
    "quadratic in a distance, so 1e-4 is 1% of the direction error the rows measure"
)


def _risk_gradient(data: TokenSelectionData):
    """The library's cancellation-free gradient of the logistic risk (its mantissa), independent of SLSQP's."""

    def grad(W: torch.Tensor) -> torch.Tensor:
        return loss_gradients(data.X, data.Z, data.y, data.v, W, "logistic", risk=False)[0].mantissa

    return grad


def _risk(data: TokenSelectionData) -> Callable[[torch.Tensor], float]:
    """``log(L(W) - L_sel)`` (md §2, §8.1), the objective both solvers minimise, as a float."""

    def risk(W: torch.Tensor) -> float:
        return float(log_excess_risk(data.X, data.Z, data.y, data.v, W, "logistic"))

    return risk


def _solve(
    solve: Callable[[torch.Tensor], torch.Tensor],
    risk: Callable[[torch.Tensor], float],
    start: torch.Tensor,
    ray: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``solve`` from ``start``, and again from ``ray`` (p's SVM direction on the sphere) when that point's risk is
    already below where the first solve ended: the risk is not convex, and a local solver can stop on a plateau
    where another token's attention has saturated. Returns the lower-risk solution and the start it came from.
    The path's SLSQP solve and the mirror-descent cross-check both go through this one rule.
    """
    W = solve(start)
    reached = risk(W)
    if start is not ray and risk(ray) < reached:  # the first solve ended at a local minimiser only
        W_ray = solve(ray)
        if risk(W_ray) < reached:
            return W_ray, ray
    return W, start


def _cross_check(
    config: RegPathConfig,
    data: TokenSelectionData,
    p: float,
    R: float,
    solved: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    risk: Callable[[torch.Tensor], float],
    W_mm: torch.Tensor,
) -> dict:
    """Projected l_p mirror descent at the cross-check radius against the path's ``W_R``, under the path's restart
    rule (:func:`_solve`): MD from the start of the SLSQP solve it checks, and from the SVM ray when that point is
    lower than where MD ended. ``solved`` is ``(W_R, its start, the ray)``. Returns the two solvers' dB_p over the
    dB_p(W^mm_p, W_R) measured there (spec §3), the same for MD from the start alone (the reading revision 2
    replaced), and whether MD was solved again from the ray."""
    W, start, ray = solved

    def md(begin: torch.Tensor) -> torch.Tensor:
        return projected_mirror_descent(
            _risk_gradient(data), begin, p=p, radius=R, steps=config.md_steps, step_scale=config.md_step_scale
        ).W

    first = md(start)
    W_md, used = _solve(lambda begin: first if begin is start else md(begin), risk, start, ray)
    scale = directional_bregman(W_mm, W, p)  # spec §3: the dB_p the rows measure at this radius
    return {
        "solvers": float(directional_bregman(W, W_md, p) / scale),
        "solvers_from_start": float(directional_bregman(W, first, p) / scale),
        "md_restart": used is not start,  # MD left the start it shares with the SLSQP solve
    }


def _path(
    config: RegPathConfig, data: TokenSelectionData, solved: SelectionSVMs, run: int, p: float
) -> tuple[list[dict], dict]:
    """One data set's path for exponent ``p``: dB_p to every q's SVM at each radius, and the solver report.
    ``solved`` holds the data set's SVMs, each solved once for all its ``p`` (the grid's serve every ``p``)."""
    select = token_scores(data.X, data.y, data.v).argmax(dim=-1)  # spec §5: the optimal tokens opt_i
    qs = (*config.ps, *neighbours(p, CLOSEST.param("delta")))
    svms = {q: solved.directions(select[None], q)[0] for q in qs}  # spec §5: l_q-AttSVM, the grid's and p +- delta
    unit = float(entrywise_norm(svms[p], p))
    W, previous, rows = torch.zeros(config.d, config.d, dtype=torch.float64), 1.0, []
    kkt, radius_excess, restarts, risk = 0.0, 0.0, 0, _risk(data)
    cross = {"solvers": float("nan"), "solvers_from_start": float("nan"), "md_restart": False}
    for k, rho in enumerate(config.radii):
        start = W * (rho / previous)  # the previous solution stretched to the new radius
        ray = svms[p] * rho  # p's SVM direction on the sphere ||W||_p = R
        solve = partial(constrained_erm, data, p, rho * unit, select=select)
        W, start = _solve(solve, risk, start, ray)  # spec §8.1: W_R
        restarts += start is ray
        if k == config.cross_check:
            cross = _cross_check(config, data, p, rho * unit, (W, start, ray), risk, svms[p])
        kkt = max(kkt, constrained_stationarity(data, p, W, select))
        radius_excess = max(radius_excess, abs(float(entrywise_norm(W, p)) / (rho * unit) - 1.0))
        previous = rho
        for q, W_mm in svms.items():
            bregman = float(directional_bregman(W_mm, W, p))  # spec §3, §8.1: dB_p(W^mm_opt,q, W_R)
            rows.append({"run": run, "p": p, "radius": rho, "R": rho * unit, "q": q, "bregman": bregman})
    report = {"run": run, "p": p, "kkt": kkt, "radius_excess": radius_excess, "restarts": restarts, **cross}
    return rows, report


def _slopes(own: pd.DataFrame) -> tuple[float, float]:
    """Log-log slopes of ``dB_p`` in ``R`` over the last two steps of the radius grid."""
    last = own.sort_values("radius").tail(3)
    r, b = np.log(last["radius"].to_numpy()), np.log(last["bregman"].to_numpy())
    return float((b[1] - b[0]) / (r[1] - r[0])), float((b[2] - b[1]) / (r[2] - r[1]))


def _closest_row(claim: Claim, p: float, final: pd.DataFrame) -> Check:
    """``dB_p`` to p's own SVM over that to the nearest comparison SVM (the columns of ``final`` but p), per data set."""
    ratios = final[p] / final.drop(columns=p).min(axis=1)  # own SVM over the nearest other one, per data set
    nearest = final.drop(columns=p).idxmin(axis=1)
    bound = claim.param("bound")
    return claim.holds(
        f"dB_p to own SVM / to nearest other < {bound:g}",
        f"largest ratio {ratios.max():.3g} over {len(ratios)} data sets (nearest other q = {nearest[ratios.idxmax()]:g}); "
        f"own dB_p {final[p].max():.3g} at most",
        "strict on every data set: deterministic solves",
        bool((ratios < bound).all()),
        margin=bound - float(ratios.max()),
    )


def _regpath_checks(config: RegPathConfig, frame: pd.DataFrame, solvers: pd.DataFrame) -> list:
    checks = []
    for p in config.ps:
        rows = frame[frame["p"] == p]
        final = rows[rows["radius"] == config.radii[-1]].pivot(index="run", columns="q", values="bregman")
        checks.append(_closest_row(CLOSEST.format(p=p), p, final))  # the grid's SVMs and those of p +- delta
        checks.append(_closest_row(CLOSEST.revised(1).format(p=p), p, final[list(config.ps)]))  # the grid's only
        slopes = {run: _slopes(own) for run, own in rows[rows["q"] == p].groupby("run")}
        vanishes = all(last < 0 and prev < 0 and last <= prev for prev, last in slopes.values())
        checks.append(
            VANISHES.format(p=p).holds(
                "slopes < 0, last <= previous",
                "; ".join(f"data set {run}: {prev:.3g} then {last:.3g}" for run, (prev, last) in slopes.items()),
                "no tolerance: a bounded or log-growing correction to R W^mm steepens the slope toward -2 "
                "(dB_p quadratic in the direction error), a positive limit flattens it toward 0",
                vanishes,
                margin=min(min(-prev, -last, prev - last) for prev, last in slopes.values()),
            )
        )
        report = solvers[solvers["p"] == p].max()
        report["md_restart"] = int(solvers.loc[solvers["p"] == p, "md_restart"].sum())  # data sets, not the largest
        for claim, column in ((SOLVERS, "solvers"), (SOLVERS.revised(2), "solvers_from_start")):
            checks.append(_solvers_row(claim.format(p=p), report, column, config))
    return checks


def _solvers_row(claim: Claim, report: pd.Series, column: str, config: RegPathConfig) -> Check:
    """The solver property from the largest KKT residual, radius excess and solver distance (``column``) of one p."""
    passed = report["kkt"] <= KKT_TOL and report["radius_excess"] <= RADIUS_TOL and report[column] <= SOLVER_TOL
    return claim.holds(
        f"KKT <= {KKT_TOL:g}, | ||W_R||_p / R - 1 | <= {RADIUS_TOL:g}, solvers <= {SOLVER_TOL:g}",
        f"KKT {report['kkt']:.2g}, radius {report['radius_excess']:.2g}, solvers {report[column]:.2g} "
        f"(at R = {config.radii[config.cross_check]:g} ||W^mm||_p); from the SVM ray: "
        f"{int(report['restarts'])} of {len(config.radii)} radii at most per data set"
        + (f"; MD from the ray: {report['md_restart']} of {config.datasets} data sets" if column == "solvers" else ""),
        SOLVER_WHY,
        bool(passed),
    )


@house_figure
def _regpath_figure(config: RegPathConfig, frame: pd.DataFrame):
    fig, axes = new_figure(len(config.ps), width=3.4)
    for ax, p in zip(axes, config.ps):
        for q in config.ps:
            mean = frame[(frame["p"] == p) & (frame["q"] == q)].groupby("radius")["bregman"].mean()
            ax.loglog(mean.index, mean, marker="o", ms=3, label=f"$q = {q:g}$")
        label_axes(
            ax,
            r"$R / \|W^{mm}_{opt,p}\|_p$",
            r"$D_{\psi_p}(W^{mm}_{opt,q}, W_R)$",
            f"$\\ell_{{{p:g}}}$ ball",
        )
        ax.legend()
    fig.suptitle(f"Regularisation path: mean over {config.datasets} data sets; the own q = p falls to 0 (§8.1)")
    label_ours(fig, config)
    return fig


def run_regpath(config: RegPathConfig, ctx: RunContext) -> ExperimentResult:
    """The l_p regularisation path of each data set and p, against the l_q-AttSVM of the optimal tokens."""
    rows, solvers = [], []
    datasets = [unit_gaussian(config.n, config.T, config.d, seed=config.first_seed + r) for r in range(config.datasets)]
    solved = [SelectionSVMs([data]) for data in datasets]
    for r, p in ctx.bar([(r, p) for r in range(config.datasets) for p in config.ps], desc="RegPath"):
        path, report = _path(config, datasets[r], solved[r], r, p)
        rows += path
        solvers.append(report)
    frame, solver_table = pd.DataFrame(rows), pd.DataFrame(solvers)
    grid = frame[frame["q"].isin(config.ps)]  # the neighbours p +- delta enter only closest's row
    final = grid[grid["radius"] == config.radii[-1]].groupby(["p", "q"])["bregman"].mean().reset_index()
    notes = [
        f"mean dB_p(W^mm_opt,q, W_R) at R = {config.radii[-1]:g} ||W^mm_opt,p||_p, rows p, columns q:\n"
        + final.pivot(index="p", columns="q", values="bregman").to_string(float_format="%.3g")
    ]
    return ExperimentResult(
        frame=frame,
        checks=_regpath_checks(config, frame, solver_table),
        figures={"regpath": _regpath_figure(config, frame)},
        tables={"final": final, "solvers": solver_table},
        notes=notes,
    )


register(
    Experiment(
        name="mirror-descent.regpath",
        cost=40.0,
        config_type=RegPathConfig,
        run=run_regpath,
        quick={"datasets": 1, "radii": (8.0, 16.0, 32.0), "cross_check": 0, "md_steps": 1000},
        claims=CLAIMS,
        falsifiers=(BALL_NORM, BALL_OFF),
    )
)
