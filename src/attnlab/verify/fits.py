"""Least-squares slopes of one quantity against another (on log scales by default): plain, with the fit's R^2, or
weighted by each point's standard error, with the slope's. :mod:`attnlab.verify.compare` builds slope and rate-shape
check rows from them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["fit_slope", "fit_weighted_slope"]


# Between these magnitudes, points and weights are summed as they are: their weighted squares stay inside float64
_PLAIN = (2.0**-300, 2.0**300)


def _unit(values: Sequence[float]) -> float:
    """1.0 when the largest ``|value|`` lies in :data:`_PLAIN` (or is 0), else a power of two within a factor 2 of
    it: dividing by it is exact in float64 and leaves every value within ``[-2, 2]``, whose squares cannot overflow
    (nor underflow, for the largest)."""
    top = max((abs(v) for v in values), default=0.0)
    return 1.0 if top == 0 or _PLAIN[0] <= top < _PLAIN[1] else math.ldexp(1.0, math.frexp(top)[1] - 1)


def _line(points: Sequence[tuple[float, float]], weights: Sequence[float]) -> tuple[float, float, float]:
    """Weighted least-squares line through ``points`` (finite, as the finite ``weights``): slope, R^2 and ``sxx``
    (the weighted, centred sum of squares of x; inf where it leaves float64's range).

    Coordinates or weights whose largest magnitude is outside :data:`_PLAIN` are first divided by a power of two, so that no square overflows
    (points of 1e200 raised OverflowError); below it the sums are the plain ones.
    """
    kx, ky, kw = _unit([p[0] for p in points]), _unit([p[1] for p in points]), _unit(weights)
    points = [(p[0] / kx, p[1] / ky) for p in points]
    weights = [w / kw for w in weights]
    total = sum(weights)
    mx = sum(w * p[0] for p, w in zip(points, weights)) / total
    my = sum(w * p[1] for p, w in zip(points, weights)) / total
    sxx = sum(w * (p[0] - mx) ** 2 for p, w in zip(points, weights))
    sxy = sum(w * (p[0] - mx) * (p[1] - my) for p, w in zip(points, weights))
    syy = sum(w * (p[1] - my) ** 2 for p, w in zip(points, weights))
    slope = sxy / sxx if sxx > 0 else math.nan
    r2 = 1.0 - (syy - slope * sxy) / syy if syy > 0 else 1.0
    if kx == ky == kw == 1.0:
        return slope, r2, sxx
    return slope * (ky / kx), r2, sxx * kw * kx * kx


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
    slope, r2, _ = _line(pts, [1.0] * len(pts))
    return slope, r2


def _weight(y: float, se: float, logy: bool) -> float:
    """``(y / se)^2`` on a log axis, else ``se^-2``; inf where it leaves float64's range."""
    try:
        return (y / se) ** 2 if logy else se**-2
    except OverflowError:
        return math.inf


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
        ``se <= 0``, or so small against ``y`` that its weight leaves float64's range (a quantity that changed sign
        has no log-log slope; no point is dropped silently).
    """
    pts = [(float(a), float(b), float(s)) for a, b, s in zip(x, y, se)]
    valid = all(
        math.isfinite(a) and math.isfinite(b) and s > 0 and (a > 0 or not logx) and (b > 0 or not logy)
        for a, b, s in pts
    )
    if len(pts) < 2 or not valid:
        return math.nan, math.nan
    line = [(math.log(a) if logx else a, math.log(b) if logy else b) for a, b, _ in pts]
    weights = [_weight(b, s, logy) for _, b, s in pts]  # 1 / Var of the fitted y (delta method)
    if not all(math.isfinite(w) for w in weights):
        return math.nan, math.nan
    slope, _, sxx = _line(line, weights)
    return slope, sxx**-0.5 if sxx > 0 else math.nan
