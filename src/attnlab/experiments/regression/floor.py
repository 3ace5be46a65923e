"""Theorem 2's error floor rows: the ``O(1/n)`` bias of Algorithm 1 under the Monte-Carlo oracle, measured where
the oracle's own noise stays below it.

Spec: docs/theory/preconditioned-regression.md §6.2 (the oracle), §8 T2. The floors and their split into noise and
bias are :func:`attnlab.training.regression.oracle_floors` and :func:`attnlab.regression.noise_and_bias`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from attnlab.experiments.regression.common import SOURCE
from attnlab.regression import noise_and_bias
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


def floor_rows(
    floors: pd.DataFrame,
    batches: int,
    ns: Sequence[int],
) -> tuple[list, pd.DataFrame, float]:
    """T2's floor rows from :func:`~attnlab.training.regression.oracle_floors`: the oracle is enough at each n (a property of the measurement)
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
