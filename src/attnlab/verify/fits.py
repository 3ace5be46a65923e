"""Least-squares slopes of one quantity against another (on log scales by default): plain, with the fit's R^2, or
weighted by each point's standard error, with the slope's. :mod:`attnlab.verify.compare` builds slope and rate-shape
check rows from them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["fit_slope", "fit_weighted_slope"]


def _line(points: Sequence[tuple[float, float]], weights: Sequence[float]) -> tuple[float, float, float, float]:
    """Weighted least-squares line through ``points``: slope, ``sxx``, ``sxy``, ``syy`` (weighted, centred)."""
    total = sum(weights)
    mx = sum(w * p[0] for p, w in zip(points, weights)) / total
    my = sum(w * p[1] for p, w in zip(points, weights)) / total
    sxx = sum(w * (p[0] - mx) ** 2 for p, w in zip(points, weights))
    sxy = sum(w * (p[0] - mx) * (p[1] - my) for p, w in zip(points, weights))
    syy = sum(w * (p[1] - my) ** 2 for p, w in zip(points, weights))
    return (sxy / sxx if sxx > 0 else math.nan), sxx, sxy, syy


def fit_slope(x: Sequence[float], y: Sequence[float], *, logx: bool = True, logy: bool = True) -> tuple[float, float]:
    """Least-squares slope of ``y`` on ``x`` (each on a log scale if asked) and the R^2 of the fit.

    Points whose logarithm is undefined (``<= 0`` or not finite) are dropped; fewer than two left gives NaN.
    :func:`fit_weighted_slope` weighs each point by its standard error instead.

    Parameters
    ----------
    x, y : sequence of float
        The points; pairs are taken up to the shorter of the two.
    logx, logy : bool, default=True
        Fit on ``log x`` / ``log y`` (natural logarithm; the slope is the same in any base).

    Returns
    -------
    slope : float
        The least-squares slope; NaN when fewer than two points are left or all ``x`` are equal.
    r2 : float
        The coefficient of determination of the fit; 1.0 when all ``y`` are equal, NaN with the slope.

    Examples
    --------
    >>> slope, r2 = fit_slope([1, 10, 100], [2, 20, 200])
    >>> round(slope, 12), round(r2, 12)
    (1.0, 1.0)
    """
    pts = [(float(a), float(b)) for a, b in zip(x, y)]
    pts = [
        (math.log(a) if logx else a, math.log(b) if logy else b)
        for a, b in pts
        if math.isfinite(a) and math.isfinite(b) and (a > 0 or not logx) and (b > 0 or not logy)
    ]
    if len(pts) < 2:
        return math.nan, math.nan
    slope, _, sxy, syy = _line(pts, [1.0] * len(pts))
    r2 = 1.0 - (syy - slope * sxy) / syy if syy > 0 else 1.0
    return slope, r2


def fit_weighted_slope(
    x: Sequence[float], y: Sequence[float], se: Sequence[float], *, logx: bool = True, logy: bool = True
) -> tuple[float, float]:
    """Weighted least-squares slope of ``y`` on ``x`` (log scales by default), each point weighted by its standard
    error, and the standard error of the slope.

    Parameters
    ----------
    x, y : sequence of float, shape (m,)
    se : sequence of float, shape (m,)
        Standard errors of ``y``, > 0. On a log scale the SE of ``log y`` is ``se / y`` (the delta method).
    logx, logy : bool, default=True
        Fit on ``log x`` and ``log y``.

    Returns
    -------
    slope : float
    slope_se : float
        ``(sum w (x - mean)^2)^{-1/2}`` with ``w = 1 / SE^2``: the spread of the points, carried to the slope.
        Both are NaN when fewer than two points are given or a point is not finite, not > 0 on a log axis, or has
        ``se <= 0`` (a quantity that changed sign has no log-log slope; no point is dropped silently).
    """
    pts = [(float(a), float(b), float(s)) for a, b, s in zip(x, y, se)]
    valid = all(
        math.isfinite(a) and math.isfinite(b) and s > 0 and (a > 0 or not logx) and (b > 0 or not logy)
        for a, b, s in pts
    )
    if len(pts) < 2 or not valid:
        return math.nan, math.nan
    line = [(math.log(a) if logx else a, math.log(b) if logy else b) for a, b, _ in pts]
    weights = [(b / s) ** 2 if logy else s**-2 for _, b, s in pts]  # 1 / Var of the fitted y (delta method)
    slope, sxx, _, _ = _line(line, weights)
    return slope, sxx**-0.5
