"""Theorem 2 and Lemma 2 as declared rows: Algorithm 1 with the population oracle from starts at 0.3 rho from M
(rate against the Hessian's), and the floor with the Monte-Carlo oracle (:mod:`.floor`).

Spec: docs/theory/preconditioned-regression.md §5.4, §6.2, §8 (T2, L2).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from attnlab.experiments.regression.common import (
    INSTANCE,
    MOVED_WHY,
    SOURCE,
    THEORY_BEFORE_MOVE,
    TheoryConfig,
    local_radius,
    moved_inside,
    near_points,
    true_sigma_step,
)
from attnlab.experiments.regression.floor import THEORY_FLOOR, floor_rows
from attnlab.experiments.regression.geometry import derived_constants
from attnlab.optim.preconditioned import PreconditionedGD
from attnlab.regression import PopulationOracle, RegressionProblem, gap_metrics
from attnlab.regression.curvature import normal_curvatures, objective_excess, segment_curvature
from attnlab.training.regression import fit, oracle_floors
from attnlab.verify import Claim, Reading, Revision, RunContext, fit_slope, fit_weighted_slope

_S8 = f"{SOURCE} §8"
_RUNS = "mc_runs perturbed-manifold starts theta_R + N(0, start_scale^2) entries (seed + 3), all of them"
_POPULATION_SIZES = (*INSTANCE, "mu", "lr", "start_scale", "steps", "mc_runs")  # as declared before the move
_INSIDE = (
    "mc_runs starts at dist(theta_0, M) = start_distance rho (0.3 rho; rho = 0.25 sigma_d^{1/2}), theta_R moved "
    "along a random normal direction (near_points, seed + 3), all of them: inside Theorem 2's start region"
)
_WHERE = "the T2 starts lay at 4.2-4.5 rho quick and 4.6-5.1 rho full"


def _moved(claim: Claim, quick: str, full: str, more: str = "", **texts: str) -> Claim:
    """``claim`` read from the starts inside rho; the reading from the old starts kept as a revision."""
    why = MOVED_WHY.format(where=_WHERE, more=more)
    return moved_inside(claim, THEORY_BEFORE_MOVE, why, quick, full, {_RUNS: _INSIDE, **texts})


T2_POPULATION = Claim(
    "T2 population oracle: L - L_irr after {steps} steps (geometric decay to round-off)",
    "000:Thm2",
    _S8,
    falsifier=("identity-preconditioner", "preconditioner-twice"),
    id="thm2-population",
    reading=Reading(
        statistic="max over runs of L(theta_T) - L_irr, Algorithm 1 with the population oracle and the true Sigma",
        window="the last step T = steps",
        subset=_RUNS,
        tolerance="<= 1e-20 (round-off of L - L_irr, ~1e-31)",
        params={"bound": 1e-20},
        sizes=_POPULATION_SIZES,
    ),
)
T2_POPULATION = _moved(T2_POPULATION, "pass: 4.87e-24 <= 1e-20 (908f6af)", "pass: 1.25e-32 <= 1e-20 (908f6af)")
_WINDOW_HALVES = (
    "|rate - max |1 - eta lambda|| <= 3 x the difference of the rates fitted on the two halves of the window; lambda "
    "the normal eigenvalues of the Hessian of f at theta_R (whitened, autograd)"
)
_OLD_RATE = Reading(
    statistic="exp of the least-squares slope of log dist(theta_t, M) on t, every run's recorded steps pooled "
    "(record every 5 steps), population oracle",
    window="recorded steps t > 0 with 1e-7 < dist < 1e-2",
    subset=_RUNS,
    tolerance=_WINDOW_HALVES,
    params={"window": (1e-7, 1e-2), "spreads": 3},
    sizes=_POPULATION_SIZES,
)
T2_RATE = Claim(
    "T2 rate (1 - c eta)^T: each run's per-step contraction of dist over the last half of its window, against "
    "max |1 - eta lambda| over the normal Hessian",
    "000:Thm2",
    _S8,
    falsifier=("identity-preconditioner", "loss-gradient-doubled", "preconditioner-1.1-sigma", "preconditioner-diag"),
    id="thm2-rate",
    reading=Reading(
        statistic="per run, exp of the least-squares slope of log dist(theta_t, M) on t over the window's later half "
        "(record every 5 steps), population oracle; the row shows the run's rate farthest from the prediction",
        window="each run's recorded steps t > 0 with 1e-7 < dist < 1e-2, the latest ceil(m / 2) of its m (at least "
        "min_records = 5 of them, else the row fails)",
        subset=_RUNS,
        tolerance="|rate - max |1 - eta lambda|| <= drifts x the largest drift over runs, drift = |rate fitted on "
        "the first half of the run's fitted span - rate on its second half| (the halves share the middle record "
        "when the span is odd), at least float64 eps; lambda the normal eigenvalues of the Hessian of f at "
        "theta_R (whitened, autograd). Ours: the faster normal modes (rate 0.80 next to 0.85 here) pull a fitted "
        "rate below the slowest mode's by an amount that decays geometrically along the run, so its change across "
        "the span bounds what is left of it (0.65 x the drift in our quick run); drifts = 2 leaves room for a "
        "slower-decaying mix. The window's first half, where those modes still matter, is not fitted",
        params={"window": (1e-7, 1e-2), "min_records": 5, "drifts": 2},
        sizes=_POPULATION_SIZES,
    ),
    revisions=(
        Revision(
            _OLD_RATE,
            "2026-11-28",
            "too wide to fail: pooled over runs and the whole window, the fitted rate still carries the faster "
            "modes, and 3 x the difference of its two half-window rates (0.033 quick, 0.0055 full) is about 100 x "
            "the precision of a rate fitted where the slowest mode dominates. Algorithm 1 preconditioned by 1.1 "
            "Sigma, 1.2 Sigma or D^1/2 Sigma D^1/2 (D = diag(linspace(0.9, 1.1))) passed at the quick size: 0.866, "
            "0.876 and 0.855 against 0.85 +- 0.046, 0.041 and 0.034. Each run's rate over the later half of its "
            "window: true 0.8495 and 0.8500 quick (largest drift 7.8e-4), 0.84995 to 0.85000 full (8.1e-5); 1.1 Sigma "
            "0.8636 (now the falsifier 'preconditioner-1.1-sigma'), the diagonal one 0.8597 quick and 0.8613 full "
            "(now 'preconditioner-diag'), 1.2 Sigma 0.8750, the loss gradient x 1.05 0.8419. The run recomputes this "
            "reading beside the current row",
            "pass: 0.8501 against 0.85 +- 0.033 (55b3e6f)",
            "pass: 0.8510 against 0.85 +- 0.0055 (55b3e6f)",
            claim="T2 rate (1 - c eta)^T: per-step contraction of dist, against max |1 - eta lambda| over the normal "
            "Hessian",
        ),
    ),
)
T2_RATE = _moved(
    T2_RATE,
    "pass: 0.84950 against 0.85 +- 0.00157 (908f6af)",
    "pass: 0.84995 against 0.85 +- 0.000161 (908f6af)",
)
_L2_SEGMENT = Reading(
    statistic="min of (f - f*) / dist^2 and max of (f - f*) / dist^2 / (beta_seg / 2) over the records, f* = "
    "L_irr, f by the closed forms; beta_seg the largest eigenvalue of f's whitened Hessian at `points` equally "
    "spaced points of the segment from the record's projection onto M to it (segment_curvature)",
    window="recorded steps (every 5) with dist > 1e-6",
    subset=_RUNS,
    tolerance="min >= 0 and max <= 1: Taylor's formula with integral remainder from the projection, where f = f* "
    "and grad f = 0, bounds (f - f*) / dist^2 by half the largest Hessian eigenvalue on the segment",
    params={"min_dist": 1e-6, "points": 9},
    sizes=_POPULATION_SIZES,
)
_L2_READING = Reading(
    statistic="min and max of (f - f*) / dist^2 over the records, f* = L_irr, f by the closed forms, dist the "
    "Sigma~-distance to M",
    window="recorded steps (every 5) with 1e-6 < dist <= rho = 0.25 sigma_d^{1/2} (the lemma's region; the runs "
    "start outside it, at 4.2-4.5 rho quick, see near-m-outside-rho)",
    subset=_RUNS,
    tolerance="min >= 0 and max <= beta / 2, one beta fixed before the run: beta = 4 sigma_1, Theorem 1.3's "
    "smoothness constant derived by hand (geometry.derived_constants, spec §4.4), independent of f's code",
    params={"min_dist": 1e-6},
    sizes=_POPULATION_SIZES,
)
L2_DESCENT = Claim(
    "L2 descent lemma along the population run within rho: 0 <= (f - f*) / dist^2 <= beta / 2, beta = 4 sigma_1 "
    "derived",
    "000:Lem2",
    _S8,
    falsifier=("irreducible-d-sigma2", "regularizer-transposed"),
    id="lem2-descent",
    reading=_L2_READING,
    revisions=(
        Revision(
            dataclasses.replace(
                _L2_SEGMENT,
                statistic="min and max of (f - f*) / dist^2 with f* = L_irr, f by the closed forms",
                tolerance="min >= 0 and max <= lambda_max(H) / 2 (beta = lambda_max of the Hessian of f at M, "
                "whitened)",
                params={"min_dist": 1e-6},
            ),
            "2026-11-29",
            "beta was the Hessian's largest eigenvalue at M, the lemma's smoothness constant only to second order in "
            "dist. At seed 6 (full) and 7 (quick) the ratio at the runs' starts (dist 0.47-0.54 in the whitened "
            "norm) exceeded it: 0.580 and 0.502 against 0.5, while it fell to 0.25-0.28 as dist shrank to 0.02-0.1; "
            "the largest Hessian eigenvalue on those starts' segments to M is 1.3-3.0 (seed 6, full), not 1. The "
            "lemma holds with the segment's constant, which the reading now uses. The run recomputes this reading "
            "beside the current row",
            "pass at seeds 0-6 and 8; fail at seed 7 (0.502 against 0.5)",
            "pass at seed 0 (0.15 .. 0.380); fail at seed 6 (0.580 against 0.5)",
            claim="L2 descent lemma along the population run: 0 <= (f - f*) / dist^2 <= lambda_max(H) / 2",
        ),
        Revision(
            _L2_SEGMENT,
            "2026-11-29",
            "Taylor's theorem, not the lemma: dividing by beta_seg, the largest Hessian eigenvalue on each record's "
            "own segment to M, cannot fail for any C^2 f with f = f* and grad f = 0 on M (audit fid0 #3); the "
            "lemma's content is one uniform beta. Revision 1's failures came from starts outside rho (dist "
            "0.47-0.54); inside rho its bound held with room (27 of 30 quick records, max ratio 0.214 <= 0.5). The "
            "reading now uses one beta derived before the run and the records within rho. The run recomputes this "
            "reading beside the current row",
            "pass: ratio 0.15 .. 0.438, largest ratio / (beta_seg / 2) 0.432 (8a9b237)",
            "pass: ratio 0.15 .. 0.380, largest ratio / (beta_seg / 2) 0.445 (8a9b237)",
            claim="L2 descent lemma along the population run: 0 <= (f - f*) / dist^2 <= beta / 2, beta the largest "
            "eigenvalue of the Hessian of f on the segment from the point to its projection onto M",
        ),
    ),
)
L2_DESCENT = _moved(
    L2_DESCENT,
    "pass: ratio 0.15 .. 0.214 <= 0.5 at the 27 of 30 records within rho (908f6af)",
    "pass: ratio 0.15 .. 0.184 <= 0.5 at the 40 of 46 records within rho (908f6af)",
    "; the window (records within rho) is unchanged, and now holds every record of the runs",
    **{
        "the runs start outside it, at 4.2-4.5 rho quick, see near-m-outside-rho": "the runs start inside it, at "
        "start_distance rho, so every record with dist > 1e-6 is read"
    },
)


def training_rows(config: TheoryConfig, problem: RegressionProblem, spectrum: np.ndarray, ctx: RunContext):
    """T2 and L2 with the population oracle from the starts at start_distance rho (true Sigma everywhere)."""
    V0, Q0 = near_points(problem, config.singular_values, config.mc_runs, config.start_distance, config.seed + 3)
    Sigma = problem.Sigma.expand(config.mc_runs, -1, -1)
    result = fit(
        V0,
        Q0,
        PopulationOracle(problem),
        lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], Sigma, lr=config.lr),
        steps=config.steps,
        record_every=5,
        regularizer_weight=config.mu,
        covariance=Sigma,
        metrics={
            **gap_metrics(problem),
            "f_gap": lambda s: objective_excess(problem, config.mu, s["V"], s["Q"]),
            "beta_seg": lambda s: segment_curvature(problem, config.mu, s["V"], s["Q"], _L2_SEGMENT.params["points"]),
        },
        progress=ctx.progress,
        desc="T2 population oracle",
    )
    frame = result.frame
    normal = normal_curvatures(spectrum, config.d)
    predicted_rate = float(np.abs(1 - config.lr * normal).max())  # spec §5.4: GD on (A, C), linearised at M
    if not result.ok:
        at = max(result.last_step[r] + 1 for r in result.diverged_runs)
        reason = f"diverged at step {at} (lr {config.lr}): no rate, no floor"
        return [
            T2_POPULATION.format(steps=config.steps).holds("round-off", reason, "run must stay finite", False),
            T2_RATE.holds(predicted_rate, reason, "run must stay finite", False),
            L2_DESCENT.holds("0 <= ratio <= beta / 2", reason, "run must stay finite", False),
        ], frame
    final = float(frame[frame.step == frame.step.max()].gap.max())
    rows = [
        T2_POPULATION.format(steps=config.steps).less(
            final, T2_POPULATION.param("bound"), spread="round-off of L - L_irr (~1e-31)"
        ),
        _rate_row(frame, predicted_rate, normal),
        _old_rate_row(frame, predicted_rate, normal),
        *_descent_rows(config, frame, float(spectrum[-1])),
    ]
    return rows, frame


def _descent_rows(config: TheoryConfig, frame: pd.DataFrame, top_at_m: float) -> list:
    """L2 within rho against one derived beta, and the readings it replaced beside it (revision 1: the Hessian at M
    over every record; revision 2: each record's segment constant)."""
    kept = frame[frame.dist > L2_DESCENT.param("min_dist")]
    ratios = kept.f_gap / kept.dist**2
    low, high, used = float(ratios.min()), float((ratios / (kept.beta_seg / 2)).max()), float(ratios.max())
    seg = f"beta_seg {kept.beta_seg.min():.3g} .. {kept.beta_seg.max():.3g}"
    rho = local_radius(config.singular_values)  # spec §4.4
    _, beta = derived_constants(config.singular_values, config.k, config.mu)
    inside = kept[kept.dist <= rho]
    within = inside.f_gap / inside.dist**2
    w_low, w_high = (float(within.min()), float(within.max())) if len(within) else (math.nan, math.nan)
    return [
        L2_DESCENT.holds(
            f"0 <= ratio <= beta / 2 = {beta / 2:.4g}",
            f"{w_low:.4g} .. {w_high:.4g}",
            f"f* = L_irr is the minimum (ratio >= 0); beta = {beta:.3g} = 4 sigma_1 derived; {len(inside)} of "
            f"{len(kept)} records within rho = {rho:.3g}",
            bool(len(within)) and w_low >= 0 and w_high <= beta / 2,
            margin=min(w_low, beta / 2 - w_high) if len(within) else None,
        ),
        L2_DESCENT.revised(1).holds(
            f"0 <= ratio <= {top_at_m / 2:.4g}",
            f"{low:.4g} .. {used:.4g}",
            "f* = L_irr is the minimum (ratio >= 0) and beta = lambda_max of the Hessian of f at M",
            low >= 0 and used <= top_at_m / 2,
            margin=min(low, top_at_m / 2 - used),
        ),
        L2_DESCENT.revised(2).holds(
            "0 <= ratio, ratio / (beta_seg / 2) <= 1",
            f"ratio {low:.4g} .. {used:.4g}; largest ratio / (beta_seg / 2) {high:.4g} ({seg})",
            "f* = L_irr is the minimum (ratio >= 0); Taylor from the projection onto M (ratio <= beta_seg / 2)",
            low >= 0 and high <= 1,
            margin=min(low, 1 - high),
        ),
    ]


def _rate(steps: pd.Series, dist: pd.Series) -> float:
    """exp of the least-squares slope of log dist on t: the per-step contraction (spec §5.4)."""
    return math.exp(fit_slope(steps, dist, logx=False)[0]) if steps.nunique() > 1 else math.nan


def _in_window(frame: pd.DataFrame, claim: Claim) -> pd.DataFrame:
    low, high = claim.param("window")
    return frame[(frame.step > 0) & (frame.dist > low) & (frame.dist < high)].sort_values("step")


def _rate_row(frame: pd.DataFrame, predicted: float, normal: np.ndarray):
    """T2's rate: each run's rate over the later half of its window, within the largest drift across that span."""
    rates, drifts, short = {}, [], []
    for run, records in _in_window(frame, T2_RATE).groupby("run"):
        if len(records) < T2_RATE.param("min_records"):
            short.append(run)
            continue
        span = records.iloc[len(records) // 2 :]  # the latest ceil(m / 2) records
        first, second = span.iloc[: len(span) - len(span) // 2], span.iloc[len(span) // 2 :]
        rates[run] = _rate(span.step, span.dist)
        drifts.append(abs(_rate(first.step, first.dist) - _rate(second.step, second.dist)))
    if short or not rates:
        need = f"needs >= {T2_RATE.param('min_records')} recorded steps with 1e-7 < dist < 1e-2 in every run"
        return T2_RATE.holds(predicted, f"runs {short} have fewer", need, False)
    worst = max(rates.values(), key=lambda rate: abs(rate - predicted))
    drift = max(max(drifts), np.finfo(float).eps)
    return T2_RATE.close(
        predicted,
        worst,
        atol=T2_RATE.param("drifts") * drift,
        spread=f"{T2_RATE.param('drifts'):g} x the largest drift across a run's fitted span ({drift:.2g}; ours); runs' rates "
        f"{', '.join(f'{rate:.5f}' for rate in rates.values())}; eigenvalues of the normal Hessian "
        f"{', '.join(f'{v:.3g}' for v in normal)}",
    )


def _old_rate_row(frame: pd.DataFrame, predicted: float, normal: np.ndarray):
    """Revision 1 of thm2-rate: every run pooled over the whole window, within 3 x its two halves' difference."""
    old = T2_RATE.revised(1)
    window = _in_window(frame, old)
    half = len(window) // 2
    halves = [part for part in (window.iloc[:half], window.iloc[half:]) if part.step.nunique() > 1]
    rate = _rate(window.step, window.dist) if len(window) > 1 else math.nan
    spread = (
        abs(_rate(halves[0].step, halves[0].dist) - _rate(halves[-1].step, halves[-1].dist))
        if len(halves) == 2
        else math.nan
    )
    if not (math.isfinite(spread) and spread > 0):
        return old.holds(predicted, rate, "needs >= 4 recorded steps with 1e-7 < dist < 1e-2", False)
    return old.close(
        predicted,
        rate,
        atol=old.param("spreads") * spread,
        spread=f"3 x the difference of the rates fitted on the two halves of the window 1e-7 < dist < 1e-2 "
        f"({spread:.2g}); eigenvalues of the normal Hessian {', '.join(f'{v:.3g}' for v in normal)}",
    )


def floor_checks(config: TheoryConfig, problem: RegressionProblem, table: pd.DataFrame, ctx: RunContext):
    """T2's floor rows at ``config.mc_ns``, and a note comparing the floor's rate with Thm 4's bias (``table``)."""
    start = near_points(problem, config.singular_values, config.mc_runs, config.start_distance, config.seed + 3)
    floors, trajectories = oracle_floors(
        problem,
        start,
        config.mc_ns,
        config.mc_batches,
        true_sigma_step(problem, config.mc_runs, config.lr),
        steps=config.mc_steps,
        mu=config.mu,
        seed=config.seed,
        bar=lambda ns: ctx.bar(ns, desc="T2 floors"),
    )
    rows, parts, slope = floor_rows(floors, config.mc_batches, config.mc_ns, THEORY_FLOOR)
    gradient_slope, gradient_se = fit_weighted_slope(table.n, table.grad_bias_sq, table.grad_se)
    note = (
        f"T2 floor: the bias floor falls like n^{slope:.3g}, faster than Theorem 2's O(1/n); Thm 4's squared "
        f"gradient bias falls like n^{gradient_slope:.3g} +- {gradient_se:.2g} (Monte-Carlo SE); the proof's "
        "O(1/n) term is that squared bias, bounded by C/n"
    )
    return rows, parts, trajectories, note
