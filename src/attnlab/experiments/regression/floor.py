"""The error floor of Algorithm 1 with an expected-gradient oracle (Theorem 2's ``O(1/n)`` term), measured so that
the oracle's own noise stays below the bias it measures.

Spec: docs/theory/preconditioned-regression.md §6.2 (the oracle), §8 T2. Theorem 2 assumes the *exact* expected
empirical gradient ``E grad L_n``; it has no closed form, so the Monte-Carlo oracle averages ``batches`` fresh
samples of size n per step. Its noise adds ``~ v / batches`` to the floor, the bias a ``b`` that does not depend on
``batches``: running every n at ``batches`` and ``batches / 2`` gives both, ``noise = F(B/2) - F(B)`` and
``bias = 2 F(B) - F(B/2)`` (Richardson in 1/B). The oracle is enough when the noise is below the bias.
The preconditioner and the regularizer use the true Sigma (the "true-Sigma oracle"): their sample versions add
an error of their own (Lemma 3, Theorem 5) that would mix with the bias of ``E grad L_n``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from attnlab.experiments.regression.common import SOURCE, gap_metrics
from attnlab.optim.preconditioned import PreconditionedGD
from attnlab.regression import MonteCarloOracle, RegressionProblem, fit
from attnlab.verify import Claim, fit_slope, spread_tolerance

_S8 = f"{SOURCE} §8"
FLOOR_ORACLE = Claim(
    "T2 floor oracle at n = {n}: noise F(B/2) - F(B) below the bias 2F(B) - F(B/2), B = {batches}",
    "000:Thm2",
    _S8,
    kind="property",
)
FLOOR_BOUND = Claim(
    "T2 floor O(1/n): log-log slope of the bias floor over n = {ns}", "000:Thm2", _S8, falsifier="temperature-1.3"
)


def oracle_floors(
    problem: RegressionProblem,
    start: tuple,
    ns: Sequence[int],
    batches: int,
    *,
    steps: int,
    lr: float,
    mu: float,
    seed: int,
    record_every: int = 2,
    bar: Callable = iter,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Algorithm 1 (true-Sigma preconditioner and regularizer) with the Monte-Carlo oracle at every n, at
    ``batches`` and ``batches // 2`` fresh samples per step.

    Returns the per-run floors (columns n, batches, run, floor: the mean gap over the second half of the steps) and
    the trajectories (n, batches, run, step, gap, dist, diverged_at). A run that blows up keeps its last iterate
    and its ``diverged_at`` step (>= 0); its floor is NaN.
    """
    V0, Q0 = start
    runs = V0.shape[0]
    Sigma = problem.Sigma.expand(runs, -1, -1)
    floors, trajectories = [], []
    for n in bar(ns):
        for b in (batches // 2, batches):
            result = fit(
                V0,
                Q0,
                MonteCarloOracle(problem, n, b, seed=seed + n),  # the same seed at B/2 and B
                lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], Sigma, lr=lr),
                steps=steps,
                record_every=record_every,
                regularizer_weight=mu,
                covariance=Sigma,
                metrics=gap_metrics(problem),
            )
            frame = result.frame.assign(n=n, batches=b)
            frame["diverged_at"] = frame.run.map(dict(enumerate(result.diverged_at.tolist())))
            trajectories.append(frame)
            tail = frame[frame.step >= steps // 2].groupby("run").gap.mean()
            for run in range(runs):
                floor = float("nan") if result.diverged[run] else float(tail.get(run, float("nan")))
                floors.append({"n": n, "batches": b, "run": run, "floor": floor})
    return pd.DataFrame(floors), pd.concat(trajectories, ignore_index=True)


def noise_and_bias(floors: pd.DataFrame, batches: int) -> pd.DataFrame:
    """Per (n, run): ``F(B)``, ``noise = F(B/2) - F(B)`` and ``bias = 2 F(B) - F(B/2)`` (Richardson in 1/B)."""
    wide = floors.pivot_table(index=["n", "run"], columns="batches", values="floor", dropna=False)
    full, half = wide[batches], wide[batches // 2]
    return pd.DataFrame({"floor": full, "noise": half - full, "bias": 2 * full - half}).reset_index()


def floor_rows(
    floors: pd.DataFrame,
    batches: int,
    ns: Sequence[int],
) -> tuple[list, pd.DataFrame, float]:
    """T2's floor rows from :func:`oracle_floors`: the oracle is enough at each n (a property of the measurement)
    and the bias floor is O(1/n) (slope <= -1 within the spread over starts); also the per-(n, run) parts and the
    mean slope (NaN when a run diverged)."""
    parts = noise_and_bias(floors, batches)
    rows, slopes = [], []
    for n, at_n in parts.groupby("n"):
        noise, bias = float(at_n.noise.mean()), float(at_n.bias.mean())
        rows.append(
            FLOOR_ORACLE.format(n=n, batches=batches).less(
                noise, bias, strict=True, spread=f"means over {len(at_n)} starts; F(B) = {at_n.floor.mean():.3g}"
            )
        )
    for _, per_run in parts.groupby("run"):
        slopes.append(fit_slope(per_run.n, per_run.bias)[0])
    ns = list(ns)
    if not all(math.isfinite(v) for v in slopes):
        reason = "a floor run diverged or its bias floor is <= 0: no slope"
        rows.append(FLOOR_BOUND.format(ns=ns).holds("<= -1", reason, "every run finite", False))
        return rows, parts, math.nan
    tolerance, text = spread_tolerance(slopes, what="starts' slopes")
    slope = float(np.mean(slopes))
    rows.append(FLOOR_BOUND.format(ns=ns).less(slope, -1.0 + tolerance, spread=f"O(1/n) means slope <= -1; + {text}"))
    return rows, parts, slope
