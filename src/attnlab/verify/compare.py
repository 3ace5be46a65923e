"""The helpers that build check rows: close, bound (less / greater), ordering, slope, rate shape, observations.

The least-squares fits behind the slope rows are :mod:`attnlab.verify.fits` (re-exported here).

Each helper writes the tolerance text from the numbers it tests, so a row's ``tolerance`` is the code's tolerance,
and the row's ``margin``: how far the measured value lies inside the tolerance (negative outside, ``None`` when
there is no number to compare);
``spread`` says where a tolerance comes from (a seed spread, a discretisation error, the theorem), written so that
a reader can redo the derivation, e.g. ``"3 x the std over 5 seeds (0.011)"``. ``**tags`` are the row's ``kind``,
``result`` and ``falsifier`` (see :class:`~attnlab.verify.check.Check`); a declared
:class:`~attnlab.verify.claim.Claim` passes them for you.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from attnlab._validation import ValidationError, check_in
from attnlab.verify.check import Check
from attnlab.verify.fits import fit_slope, fit_weighted_slope

__all__ = [
    "OBSERVATION_MARKS",
    "check_close",
    "check_greater",
    "check_less",
    "check_ordering",
    "check_rate_shape",
    "check_slope",
    "fit_slope",
    "fit_weighted_slope",
    "observation",
    "spread_observation",
    "spread_tolerance",
]

# an observation names one of these: it stands for something the paper showed, never for a theorem
OBSERVATION_MARKS = ("fig.", "table", "remark")


def _why(text: str, spread: str) -> str:
    return f"{text}; {spread}" if spread else text


def _finite(value: float) -> float | None:
    """``value`` as a margin: ``None`` when it is NaN or infinite (no number to compare)."""
    return float(value) if math.isfinite(value) else None


def spread_tolerance(samples: Sequence[float], k: float = 3.0, *, what: str = "seeds") -> tuple[float, str]:
    """``k`` standard errors of the mean of ``samples``, and the sentence that says so (for ``spread=``).

    Parameters
    ----------
    samples : sequence of float, length >= 2
        Independent repetitions of one measurement (seeds, data sets, directions).
    k : float, default=3.0
        Standard errors allowed.
    what : str, default="seeds"
        What the repetitions are, for the text.

    Returns
    -------
    tolerance : float
    text : str
        E.g. ``"3 standard errors over 5 seeds (SE 0.0021)"``.
    """
    values = [float(v) for v in samples]
    if len(values) < 2:
        raise ValidationError(
            f"spread_tolerance needs >= 2 samples to measure a spread, got {len(values)}; run more seeds"
        )
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    se = std / math.sqrt(len(values))
    return k * se, f"{k:g} standard errors over {len(values)} {what} (SE {se:.3g})"


def check_close(
    claim: str,
    predicted: float,
    measured: float,
    rtol: float = 0.0,
    source: str = "",
    *,
    atol: float = 0.0,
    spread: str = "",
    **tags: Any,
) -> Check:
    """A theory :class:`Check` that passes when ``|measured - predicted| <= atol + rtol * |predicted|``.

    ``spread`` says how the tolerance was derived (seed spread, discretisation, the theorem); it is written into
    the row's tolerance text after ``"rel <rtol>"`` / ``"abs <atol>"``.

    Parameters
    ----------
    claim : str
        The claim in words (see :class:`~attnlab.verify.check.Check`).
    predicted : float
        The theory's value.
    measured : float
        The run's value; NaN or an infinity fails.
    rtol : float, default=0.0
        Relative tolerance, ``>= 0``.
    source : str, default=""
        The theory page and section that state the claim.
    atol : float, default=0.0
        Absolute tolerance, ``>= 0``; it and ``rtol`` may not both be 0.
    spread : str, default=""
        Where the tolerance comes from, appended to the row's tolerance text.
    **tags
        The row's ``kind``, ``result``, ``falsifier``, ``support`` and the other fields a
        :class:`~attnlab.verify.claim.Claim` passes (see :class:`~attnlab.verify.check.Check`).

    Returns
    -------
    Check
        ``predicted`` and ``measured`` as floats, the tolerance text ``"abs <atol> + rel <rtol>; <spread>"`` (each
        part only where it is given).

    Raises
    ------
    ValidationError
        When ``rtol`` or ``atol`` is negative, or both are 0.

    Examples
    --------
    >>> check_close("ratio -> 1", 1.0, 1.004, rtol=0.01).passed
    True
    """
    if rtol < 0 or atol < 0 or (rtol == 0 and atol == 0):
        raise ValidationError(f"check_close needs rtol >= 0 and atol >= 0, not both 0; got rtol={rtol}, atol={atol}")
    allowed = atol + rtol * abs(predicted)
    parts = ([f"abs {atol:.3g}"] if atol else []) + ([f"rel {rtol:g}"] if rtol else [])
    margin = _finite(allowed - abs(measured - predicted))
    passed = margin is not None and margin >= 0
    text = _why(" + ".join(parts), spread)
    return Check(claim, float(predicted), float(measured), text, passed, source, margin=margin, **tags)


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _bound(claim: str, measured: float, bound: float, op: str, source: str, spread: str, tags: dict[str, Any]) -> Check:
    """The row of :func:`check_less` and :func:`check_greater`: ``measured op bound``; NaN fails every ``op``."""
    passed = _COMPARE[op](measured, bound)
    margin = _finite(bound - measured if op in ("<", "<=") else measured - bound)
    predicted = f"{op} {bound:.6g}"
    return Check(claim, predicted, float(measured), _why("bound", spread), bool(passed), source, margin=margin, **tags)


def check_less(
    claim: str,
    measured: float,
    bound: float,
    source: str = "",
    *,
    strict: bool = False,
    spread: str = "",
    **tags: Any,
) -> Check:
    """A theory :class:`Check` that passes when ``measured <= bound`` (``<`` if ``strict``); NaN fails.

    Parameters
    ----------
    claim : str
        The claim in words (see :class:`~attnlab.verify.check.Check`).
    measured : float
        The run's value.
    bound : float
        The theory's upper bound.
    source : str, default=""
        The theory page and section that state the claim.
    strict : bool, default=False
        Require ``measured < bound``.
    spread : str, default=""
        Where the tolerance comes from, appended to the row's tolerance text.
    **tags
        The row's ``kind``, ``result``, ``falsifier``, ``support`` and the other fields a
        :class:`~attnlab.verify.claim.Claim` passes (see :class:`~attnlab.verify.check.Check`).

    Returns
    -------
    Check
        ``predicted`` is the bound as text (``"<= 0.5"``), ``measured`` a float, the tolerance text ``"bound"``.
    """
    return _bound(claim, measured, bound, "<" if strict else "<=", source, spread, tags)


def check_greater(
    claim: str,
    measured: float,
    bound: float,
    source: str = "",
    *,
    strict: bool = False,
    spread: str = "",
    **tags: Any,
) -> Check:
    """A theory :class:`Check` that passes when ``measured >= bound`` (``>`` if ``strict``); NaN fails.

    Parameters
    ----------
    claim : str
        The claim in words (see :class:`~attnlab.verify.check.Check`).
    measured : float
        The run's value.
    bound : float
        The theory's lower bound.
    source : str, default=""
        The theory page and section that state the claim.
    strict : bool, default=False
        Require ``measured > bound``.
    spread : str, default=""
        Where the tolerance comes from, appended to the row's tolerance text.
    **tags
        The row's ``kind``, ``result``, ``falsifier``, ``support`` and the other fields a
        :class:`~attnlab.verify.claim.Claim` passes (see :class:`~attnlab.verify.check.Check`).

    Returns
    -------
    Check
        ``predicted`` is the bound as text (``">= 0.5"``), ``measured`` a float, the tolerance text ``"bound"``.
    """
    return _bound(claim, measured, bound, ">" if strict else ">=", source, spread, tags)


def check_ordering(
    claim: str,
    values: Mapping[str, float],
    order: Sequence[str],
    source: str = "",
    *,
    margin: float = 0.0,
    spread: str = "",
    **tags: Any,
) -> Check:
    """A theory :class:`Check` that passes when ``values[order[0]] < values[order[1]] < ...``, each by ``margin``.

    Parameters
    ----------
    claim : str
        The claim in words (see :class:`~attnlab.verify.check.Check`).
    values : mapping of str to float
        The measured quantity per name (method, norm, activation).
    order : sequence of str
        Names from smallest to largest, as the theory predicts; at least two, each a key of ``values``.
    source : str, default=""
        The theory page and section that state the claim.
    margin : float, default=0.0
        Each step of the order must exceed it (a spread of the measurement; say which in ``spread``).
    spread : str, default=""
        Where the tolerance comes from, appended to the row's tolerance text.
    **tags
        The row's ``kind``, ``result``, ``falsifier``, ``support`` and the other fields a
        :class:`~attnlab.verify.claim.Claim` passes (see :class:`~attnlab.verify.check.Check`).

    Returns
    -------
    Check
        ``predicted`` is the order (``"a < b < c"``), ``measured`` lists every value of ``values``.

    Raises
    ------
    ValidationError
        When ``order`` has fewer than two names or names one that ``values`` lacks.
    """
    missing = [name for name in order if name not in values]
    if len(order) < 2 or missing:
        raise ValidationError(f"check_ordering needs >= 2 names of values in order; missing {missing} of {order}")
    steps = [float(values[b]) - float(values[a]) for a, b in zip(order[:-1], order[1:])]
    passed = all(math.isfinite(s) and s > margin for s in steps)
    measured = ", ".join(f"{name} {float(v):.4g}" for name, v in values.items())
    tolerance = _why(f"each step > {margin:.3g}" if margin else "strict order", spread)
    slack = _finite(min(s - margin for s in steps))  # the tightest step of the order
    return Check(claim, " < ".join(order), measured, tolerance, bool(passed), source, margin=slack, **tags)


def check_slope(
    claim: str,
    x: Sequence[float],
    y: Sequence[float],
    predicted: float,
    tol: float,
    source: str = "",
    *,
    side: str = "both",
    logx: bool = True,
    logy: bool = True,
    spread: str = "",
    **tags: Any,
) -> Check:
    """A theory :class:`Check` on the fitted slope of ``y`` against ``x`` (log-log by default).

    Passes when ``|slope - predicted| <= tol`` (``side="both"``), ``slope <= predicted + tol`` (``"at_most"``) or
    ``slope >= predicted - tol`` (``"at_least"``). The row's measured value is the slope; its R^2 and the number
    of points go into the tolerance text.

    Parameters
    ----------
    claim : str
        The claim in words (see :class:`~attnlab.verify.check.Check`).
    x, y : sequence of float
        The points (see :func:`fit_slope`, which drops those whose logarithm is undefined).
    predicted : float
        The theory's slope.
    tol : float
        How far the slope may be from ``predicted`` (on the side(s) ``side`` names).
    source : str, default=""
        The theory page and section that state the claim.
    side : {"both", "at_most", "at_least"}, default="both"
        Which side of ``predicted`` the tolerance bounds.
    logx, logy : bool, default=True
        Fit on ``log x`` / ``log y``.
    spread : str, default=""
        Where the tolerance comes from, appended to the row's tolerance text.
    **tags
        The row's ``kind``, ``result``, ``falsifier``, ``support`` and the other fields a
        :class:`~attnlab.verify.claim.Claim` passes (see :class:`~attnlab.verify.check.Check`).

    Returns
    -------
    Check
        ``predicted`` as text (``"-1 +- 0.1"``, ``"<= 0.5"``), ``measured`` the fitted slope (NaN fails).

    Raises
    ------
    ValidationError
        When ``side`` is not one of its three values.
    """
    check_in("side", side, ("both", "at_most", "at_least"))
    slope, r2 = fit_slope(x, y, logx=logx, logy=logy)
    low, high = predicted - tol, predicted + tol
    if side == "at_most":
        low = -math.inf
    elif side == "at_least":
        high = math.inf
    passed = math.isfinite(slope) and low <= slope <= high
    margin = _finite(min(slope - low, high - slope)) if math.isfinite(slope) else None
    shown = {"both": f"{predicted:g} +- {tol:g}", "at_most": f"<= {high:g}", "at_least": f">= {low:g}"}[side]
    scale = {
        (True, True): "log-log",
        (True, False): "y on log x",
        (False, True): "log y on x",
        (False, False): "linear",
    }
    text = f"{scale[(logx, logy)]} fit over {len(list(x))} points, R^2 {r2:.3f}"
    return Check(claim, shown, float(slope), _why(text, spread), bool(passed), source, margin=margin, **tags)


def check_rate_shape(
    claim: str,
    t: Sequence[float],
    y: Sequence[float],
    expected: str,
    source: str = "",
    *,
    min_decades: float = 2.0,
    **tags: Any,
) -> Check:
    """A theory :class:`Check` that ``y`` grows like ``log t`` rather than a power ``t^a`` (or the reverse).

    Fits both shapes by least squares, ``y ~ a + b log t`` and ``log y ~ c + a log t``, over points spanning at least
    ``min_decades`` decades of ``t``, and passes when the ``expected`` shape has the smaller residual, measured in
    the relative units of ``y`` (each fit's RMS of ``(y_fit - y) / y``). One decade cannot tell ``log t`` from a small
    power; the row says how many decades it had and refuses fewer.

    Parameters
    ----------
    claim : str
        The claim in words (see :class:`~attnlab.verify.check.Check`).
    t, y : sequence of float
        Positive times and positive values (points with ``t <= 0`` or ``y <= 0`` or not finite are dropped).
    expected : {"log", "power"}
        The shape the theorem predicts.
    source : str, default=""
        The theory page and section that state the claim.
    min_decades : float, default=2.0
        The least ``log10(t_max / t_min)`` the points must span.
    **tags
        The row's ``kind``, ``result``, ``falsifier``, ``support`` and the other fields a
        :class:`~attnlab.verify.claim.Claim` passes (see :class:`~attnlab.verify.check.Check`).

    Returns
    -------
    Check
        ``measured`` gives both fits' relative RMS and the power-fit exponent; with fewer than three points or
        fewer than ``min_decades`` decades the row fails and ``measured`` is the number of decades.

    Raises
    ------
    ValidationError
        When ``expected`` is not ``"log"`` or ``"power"``.
    """
    check_in("expected", expected, ("log", "power"))
    pts = [(float(a), float(b)) for a, b in zip(t, y) if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)]
    decades = math.log10(max(p[0] for p in pts) / min(p[0] for p in pts)) if len(pts) >= 3 else 0.0
    if decades < min_decades:
        return Check(
            claim,
            f"{expected} shape",
            f"{decades:.2g} decades",
            f"needs >= {min_decades:g} decades of t",
            False,
            source,
            **tags,
        )
    logt = [math.log(p[0]) for p in pts]
    ys = [p[1] for p in pts]
    b, _ = fit_slope(logt, ys, logx=False, logy=False)  # y ~ a0 + b log t
    a0 = sum(ys) / len(ys) - b * sum(logt) / len(ys)
    a, _ = fit_slope(logt, [math.log(v) for v in ys], logx=False, logy=False)  # log y ~ c + a log t
    c = sum(math.log(v) for v in ys) / len(ys) - a * sum(logt) / len(ys)

    def relative_rms(fit: list[float]) -> float:
        return math.sqrt(sum(((f - v) / v) ** 2 for f, v in zip(fit, ys)) / len(ys))

    log_rms = relative_rms([a0 + b * lt for lt in logt])
    power_rms = relative_rms([math.exp(c + a * lt) for lt in logt])
    advantage = power_rms - log_rms if expected == "log" else log_rms - power_rms
    measured = f"log-fit RMS {log_rms:.3g}, power-fit RMS {power_rms:.3g} (a = {a:.3g})"
    text = f"the {expected} fit has the smaller relative residual over {decades:.2g} decades, {len(pts)} points"
    margin = _finite(advantage)
    return Check(claim, f"{expected} shape", measured, text, advantage > 0, source, margin=margin, **tags)


def observation(
    claim: str,
    paper_says: str,
    measured: Any,
    agrees: bool,
    source: str,
    *,
    tolerance: str = "agrees or not (the paper's remark)",
    result: str = "",
    ours: bool = False,
) -> Check:
    """A paper's *empirical* remark about its figure or table (``paper_says``) set against our measurement.

    ``claim`` or ``source`` must name the figure, table or remark (``"fig. 3"``, ``"Table 1"``, ``"remark"``):
    an observation stands for something the paper showed, never for a theorem's prediction. ``tolerance`` states
    the paper's criterion and the measured spread it is judged within (e.g. "time to alignment 0.99; steps
    recorded every 10").

    Parameters
    ----------
    claim : str
        The paper's remark in words.
    paper_says : str
        What the paper reports (the row's ``predicted``).
    measured : str or float
        What our run measured.
    agrees : bool
        Whether the measurement agrees with the remark (the row's ``passed``).
    source : str
        Our theory page and section that discuss the remark.
    tolerance : str, default="agrees or not (the paper's remark)"
        The criterion and the spread the agreement is judged within.
    result : str, default=""
        The paper result the remark bears on, if any (``"002:Fig-E3"``).
    ours : bool, default=False
        The remark is ours, not any paper's (``paper_says`` is then what we expected): the row has
        ``kind="exploration"`` and is counted apart from the papers' observations.

    Returns
    -------
    Check
        ``kind="observation"`` (or ``"exploration"``): a disagreement is shown but never fails a run.

    Raises
    ------
    ValidationError
        When a paper's observation names no figure, table or remark in ``claim`` or ``source``
        (:data:`OBSERVATION_MARKS`).
    """
    if ours:
        return Check(claim, paper_says, measured, tolerance, bool(agrees), source, kind="exploration", result=result)
    if not any(mark in f"{claim} {source}".lower() for mark in OBSERVATION_MARKS):
        raise ValidationError(
            f"observation {claim!r} names no figure, table or remark of the paper (one of "
            f"{OBSERVATION_MARKS}); a theorem's prediction is a theory check"
        )
    return Check(claim, paper_says, measured, tolerance, bool(agrees), source, kind="observation", result=result)


def spread_observation(
    claim: str,
    samples: Sequence[float],
    reference: float,
    source: str,
    *,
    above: bool = True,
    k: float = 3.0,
    what: str = "seeds",
    result: str = "",
    ours: bool = False,
) -> Check:
    """An observation that the mean of ``samples`` lies above (or below) ``reference``, judged within its spread.

    The tolerance is ``k`` standard errors of the mean over the repetitions (:func:`spread_tolerance`). The row
    agrees when the mean is beyond ``reference`` by more than the tolerance, disagrees when it is on the wrong side
    by more than the tolerance, and is inconclusive in between: a difference the seeds cannot resolve decides
    nothing.

    Parameters
    ----------
    claim, source : str
        As for :func:`observation` (one of them names the paper's figure, table or remark).
    samples : sequence of float, length >= 2
        The measurement per repetition (seed, data set).
    reference : float
        The level the paper's remark compares with (e.g. uniform attention ``1 / T``).
    above : bool, default=True
        The paper says the measurement exceeds ``reference``; ``False``: it stays below.
    k : float, default=3.0
        Standard errors allowed.
    what : str, default="seeds"
        What the repetitions are, for the tolerance text.
    result : str, default=""
        The paper result the remark bears on, if any.
    ours : bool, default=False
        The remark is ours, not any paper's (see :func:`observation`).

    Returns
    -------
    Check
        ``kind="observation"``; ``measured`` is the mean, ``verdict`` one of agrees, disagrees, inconclusive.

    Examples
    --------
    >>> spread_observation("remark: above 0.2", [0.2001, 0.1998], 0.2, "fig. 1").verdict
    'inconclusive'
    >>> spread_observation("remark: above 0.2", [0.31, 0.29], 0.2, "fig. 1").verdict
    'agrees'
    """
    values = [float(v) for v in samples]
    if not values:
        raise ValidationError(f"spread_observation {claim!r} got no samples; pass the measurement of each {what[:-1]}")
    mean = sum(values) / len(values)
    gap = mean - reference if above else reference - mean
    if len(values) < 2:  # no spread measured: nothing can be decided
        tol, text = math.inf, f"no spread from 1 of the {what}; run >= 2 for a verdict"
    else:
        tol, text = spread_tolerance(values, k, what=what)
        text = f"+- {tol:.3g}; {text}; inside it: inconclusive"
    side = ">" if above else "<"
    row = observation(
        claim, f"{side} {reference:.4g}", mean, gap > tol, source, tolerance=text, result=result, ours=ours
    )
    return dataclasses.replace(row, inconclusive=abs(gap) <= tol)
