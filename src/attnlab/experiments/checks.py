"""Theory checks: the row a run writes, the helpers that build rows, and the declarations they come from.

A theory check is declared once, as a :class:`Claim`: the claim in words, the paper result it tests (``"001:Thm1"``),
the theory page section that states it, and the name of its :class:`Falsifier`, a small plausible wrong mechanism
(a wrong temperature, a halved gradient, a mirror map off by 0.3) under which the check must fail. An experiment lists
its claims and falsifiers when it registers; ``tests/experiments/test_falsifiers.py`` runs every falsifier at the
experiment's quick size and asserts that every check naming it fails, and the build fails when a theory check names
no result or no falsifier.

Three kinds of rows:

- ``"theory"``: a theorem's prediction. It must pass, names its result and has a falsifier.
- ``"property"``: a property of our own construction or code (two solvers agree, all methods start from one point),
  reported and counted apart from theorem checks; it must pass too.
- ``"observation"``: a paper's empirical remark about its own figure or table, set against our measurement;
  its verdict is "agrees", "disagrees" or, when the difference is inside the measured spread, "inconclusive"
  (:func:`spread_observation`); never fails a run.

``checks.csv`` keeps ``passed`` a bool (an observation passes when it agrees) and adds a ``verdict`` column:
"pass" or "fail" for theory checks and properties, "agrees", "disagrees" or "inconclusive" for observations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from attnlab._validation import ValidationError, check_in

__all__ = [
    "CHECK_COLUMNS",
    "CHECK_KINDS",
    "OBSERVATION_MARKS",
    "PAPER_IDS",
    "Check",
    "CheckCounts",
    "Claim",
    "Falsifier",
    "check_close",
    "check_declared",
    "check_greater",
    "check_less",
    "check_ordering",
    "check_slope",
    "count_checks",
    "fit_slope",
    "observation",
    "spread_observation",
    "spread_tolerance",
]

# Paper ids used in result names ("001:Thm1"): the seed papers by the number of their theory page.
PAPER_IDS = {
    "preconditioned-regression": "000",
    "implicit-bias-ngd": "001",
    "mirror-descent-lp": "002",
    "kq-nuclear-norm": "003",
    "softmax-ntk-diffusion": "004",
}
_RESULT = re.compile(r"^[0-9][0-9.]*:\S+$")  # "001:Thm1", "000:Lem4", "2308.16898:Conj1"


@dataclass(frozen=True)
class Check:
    """One measured claim: a row of ``checks.csv``.

    Build rows from a declared :class:`Claim` (``claim.close(...)``, ``claim.greater(...)``, ...) so that the
    claim, its result id, source and falsifier are written once.

    Parameters
    ----------
    claim : str
        The claim in words, e.g. ``"||W_t|| / (eta t) -> 1"``.
    predicted : str or float
        What the theory predicts (a number, a bound or a trend).
    measured : str or float
        What the run measured.
    tolerance : str or float
        How far ``measured`` may be from ``predicted`` and still pass, and where that tolerance comes from.
    passed : bool
        For an observation: the measurement agrees with the paper's remark.
    source : str
        The theory page and section that state the claim, e.g. ``"docs/theory/implicit-bias-ngd.md §8.1"``.
    kind : {"theory", "property", "observation"}, default="theory"
        ``"theory"``: a theorem's prediction; must pass, and names its ``result`` and ``falsifier``.
        ``"property"``: a property of our own construction or code, counted apart from theorem checks; must pass.
        ``"observation"``: a paper's *empirical* remark about its figure or table set against our measurement;
        ``passed`` reads "agrees with the paper", and a disagreement is shown but never fails the run.
    result : str, default=""
        The paper result the row tests, ``"<paper id>:<result>"``, e.g. ``"001:Thm1"`` (paper ids: :data:`PAPER_IDS`).
    falsifier : str, default=""
        Name of the experiment's :class:`Falsifier` under which this row must fail (theory rows).
    inconclusive : bool, default=False
        For an observation: the difference from the paper's remark lies inside the measured spread, so the run
        neither agrees nor disagrees (``passed`` is then False). See :func:`spread_observation`.
    """

    claim: str
    predicted: Any
    measured: Any
    tolerance: Any
    passed: bool
    source: str = ""
    kind: str = "theory"
    result: str = ""
    falsifier: str = ""
    inconclusive: bool = False

    def __post_init__(self) -> None:
        if self.kind not in CHECK_KINDS:
            raise ValidationError(f"Check.kind must be one of {CHECK_KINDS}, got {self.kind!r}")
        if self.inconclusive and (self.kind != "observation" or self.passed):
            raise ValidationError(
                f"Check {self.claim!r}: only an observation that did not pass can be inconclusive, got "
                f"kind={self.kind!r}, passed={self.passed!r}; a theory check or property passes or fails"
            )

    @property
    def verdict(self) -> str:
        """``"pass"``/``"fail"`` (theory, property) or ``"agrees"``/``"disagrees"``/``"inconclusive"``."""
        if self.kind != "observation":
            return "pass" if self.passed else "fail"
        if self.inconclusive:
            return "inconclusive"
        return "agrees" if self.passed else "disagrees"

    def as_row(self) -> dict[str, Any]:
        """The ``checks.csv`` row (:data:`CHECK_COLUMNS`): numbers to 6 significant digits, ``passed`` a bool."""
        row = {key: getattr(self, key) for key in CHECK_COLUMNS}
        for key in ("predicted", "measured", "tolerance"):
            row[key] = _format_value(row[key])
        row["passed"] = bool(row["passed"])
        return row


CHECK_KINDS = ("theory", "property", "observation")
CHECK_VERDICTS = ("pass", "fail", "agrees", "disagrees", "inconclusive")
CHECK_COLUMNS = [
    "claim",
    "predicted",
    "measured",
    "tolerance",
    "passed",
    "source",
    "kind",
    "result",
    "falsifier",
    "verdict",
]


@dataclass(frozen=True)
class CheckCounts:
    """Totals of a check table: theorem checks and properties (must pass), observations (agree or disagree)."""

    passed: int
    total: int
    agree: int
    observations: int
    properties_passed: int = 0
    properties: int = 0

    @property
    def ok(self) -> bool:
        """Every theorem check and every property passed (observations never fail a run)."""
        return self.passed == self.total and self.properties_passed == self.properties

    def describe(self) -> str:
        """``"12/12 theorem checks passed"``, then properties and observations; the groups a table has."""
        parts = []
        if self.total or not (self.properties or self.observations):
            parts.append(f"{self.passed}/{self.total} theorem checks passed")
        if self.properties:
            parts.append(f"{self.properties_passed}/{self.properties} properties of our code hold")
        if self.observations:
            parts.append(f"{self.agree}/{self.observations} observations agree with the paper")
        return "; ".join(parts)

    def __add__(self, other: CheckCounts) -> CheckCounts:
        return CheckCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))


def count_checks(checks: pd.DataFrame) -> CheckCounts:
    """Count a ``checks.csv`` table (boolean ``passed``); tables written before ``kind`` existed are all theory."""
    if not len(checks):
        return CheckCounts(0, 0, 0, 0)
    passed = checks["passed"].astype(bool)
    kind = checks["kind"] if "kind" in checks else pd.Series("theory", index=checks.index)
    theory, prop, obs = (kind == "theory"), (kind == "property"), (kind == "observation")
    return CheckCounts(
        passed=int((passed & theory).sum()),
        total=int(theory.sum()),
        agree=int((passed & obs).sum()),
        observations=int(obs.sum()),
        properties_passed=int((passed & prop).sum()),
        properties=int(prop.sum()),
    )


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


# ---- one helper per kind of check: close, bound (less / greater), ordering, slope, rate shape; observations ---------
# Each helper writes the tolerance text from the numbers it tests, so a row's "tolerance" is the code's tolerance.
# ``spread`` says where a tolerance comes from (a seed spread, a discretisation error, the theorem); write it so a
# reader can redo the derivation, e.g. "3 x the std over 5 seeds (0.011)". ``**tags`` are the row's ``kind``,
# ``result`` and ``falsifier`` (see :class:`Check`); a declared :class:`Claim` passes them for you.


def _why(text: str, spread: str) -> str:
    return f"{text}; {spread}" if spread else text


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
    **tags: str,
) -> Check:
    """A theory :class:`Check` that passes when ``|measured - predicted| <= atol + rtol * |predicted|``.

    ``spread`` says how the tolerance was derived (seed spread, discretisation, the theorem); it is written into
    the row's tolerance text after ``"rel <rtol>"`` / ``"abs <atol>"``.
    """
    if rtol < 0 or atol < 0 or (rtol == 0 and atol == 0):
        raise ValidationError(f"check_close needs rtol >= 0 and atol >= 0, not both 0; got rtol={rtol}, atol={atol}")
    allowed = atol + rtol * abs(predicted)
    parts = ([f"abs {atol:.3g}"] if atol else []) + ([f"rel {rtol:g}"] if rtol else [])
    passed = math.isfinite(measured) and abs(measured - predicted) <= allowed
    return Check(
        claim, float(predicted), float(measured), _why(" + ".join(parts), spread), bool(passed), source, **tags
    )


def check_less(
    claim: str,
    measured: float,
    bound: float,
    source: str = "",
    *,
    strict: bool = False,
    spread: str = "",
    **tags: str,
) -> Check:
    """A theory :class:`Check` that passes when ``measured <= bound`` (``<`` if ``strict``); NaN fails."""
    passed = measured < bound if strict else measured <= bound
    op = "<" if strict else "<="
    return Check(claim, f"{op} {bound:.6g}", float(measured), _why("bound", spread), bool(passed), source, **tags)


def check_greater(
    claim: str,
    measured: float,
    bound: float,
    source: str = "",
    *,
    strict: bool = False,
    spread: str = "",
    **tags: str,
) -> Check:
    """A theory :class:`Check` that passes when ``measured >= bound`` (``>`` if ``strict``); NaN fails."""
    passed = measured > bound if strict else measured >= bound
    op = ">" if strict else ">="
    return Check(claim, f"{op} {bound:.6g}", float(measured), _why("bound", spread), bool(passed), source, **tags)


def check_ordering(
    claim: str,
    values: Mapping[str, float],
    order: Sequence[str],
    source: str = "",
    *,
    margin: float = 0.0,
    spread: str = "",
    **tags: str,
) -> Check:
    """A theory :class:`Check` that passes when ``values[order[0]] < values[order[1]] < ...``, each by ``margin``.

    Parameters
    ----------
    values : mapping of str to float
        The measured quantity per name (method, norm, activation).
    order : sequence of str
        Names from smallest to largest, as the theory predicts.
    margin : float, default=0.0
        Each step of the order must exceed it (a spread of the measurement; say which in ``spread``).
    """
    missing = [name for name in order if name not in values]
    if len(order) < 2 or missing:
        raise ValidationError(f"check_ordering needs >= 2 names of values in order; missing {missing} of {order}")
    steps = [float(values[b]) - float(values[a]) for a, b in zip(order[:-1], order[1:])]
    passed = all(math.isfinite(s) and s > margin for s in steps)
    measured = ", ".join(f"{name} {float(v):.4g}" for name, v in values.items())
    tolerance = _why(f"each step > {margin:.3g}" if margin else "strict order", spread)
    return Check(claim, " < ".join(order), measured, tolerance, bool(passed), source, **tags)


def fit_slope(x: Sequence[float], y: Sequence[float], *, logx: bool = True, logy: bool = True) -> tuple[float, float]:
    """Least-squares slope of ``y`` on ``x`` (each on a log scale if asked) and the R^2 of the fit.

    Points whose logarithm is undefined (``<= 0`` or not finite) are dropped; fewer than two left gives NaN.
    """
    pts = [(float(a), float(b)) for a, b in zip(x, y)]
    pts = [
        (math.log(a) if logx else a, math.log(b) if logy else b)
        for a, b in pts
        if math.isfinite(a) and math.isfinite(b) and (a > 0 or not logx) and (b > 0 or not logy)
    ]
    if len(pts) < 2:
        return math.nan, math.nan
    n = len(pts)
    mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    syy = sum((p[1] - my) ** 2 for p in pts)
    slope = sxy / sxx if sxx > 0 else math.nan
    r2 = 1.0 - (syy - slope * sxy) / syy if syy > 0 else 1.0
    return slope, r2


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
    **tags: str,
) -> Check:
    """A theory :class:`Check` on the fitted slope of ``y`` against ``x`` (log-log by default).

    Passes when ``|slope - predicted| <= tol`` (``side="both"``), ``slope <= predicted + tol`` (``"at_most"``) or
    ``slope >= predicted - tol`` (``"at_least"``). The row's measured value is the slope; its R^2 and the number
    of points go into the tolerance text.
    """
    check_in("side", side, ("both", "at_most", "at_least"))
    slope, r2 = fit_slope(x, y, logx=logx, logy=logy)
    low, high = predicted - tol, predicted + tol
    if side == "at_most":
        low = -math.inf
    elif side == "at_least":
        high = math.inf
    passed = math.isfinite(slope) and low <= slope <= high
    shown = {"both": f"{predicted:g} +- {tol:g}", "at_most": f"<= {high:g}", "at_least": f">= {low:g}"}[side]
    scale = {
        (True, True): "log-log",
        (True, False): "y on log x",
        (False, True): "log y on x",
        (False, False): "linear",
    }
    text = f"{scale[(logx, logy)]} fit over {len(list(x))} points, R^2 {r2:.3f}"
    return Check(claim, shown, float(slope), _why(text, spread), bool(passed), source, **tags)


def check_rate_shape(
    claim: str,
    t: Sequence[float],
    y: Sequence[float],
    expected: str,
    source: str = "",
    *,
    min_decades: float = 2.0,
    **tags: str,
) -> Check:
    """A theory :class:`Check` that ``y`` grows like ``log t`` rather than a power ``t^a`` (or the reverse).

    Fits both shapes by least squares, ``y ~ a + b log t`` and ``log y ~ c + a log t``, over points spanning at least
    ``min_decades`` decades of ``t``, and passes when the ``expected`` shape has the smaller residual, measured in
    the relative units of ``y`` (each fit's RMS of ``(y_fit - y) / y``). One decade cannot tell ``log t`` from a small
    power; the row says how many decades it had and refuses fewer.

    Parameters
    ----------
    t, y : sequence of float
        Positive times and positive values (points with ``t <= 0`` or ``y <= 0`` are dropped).
    expected : {"log", "power"}
        The shape the theorem predicts.
    min_decades : float, default=2.0
        The least ``log10(t_max / t_min)`` the points must span.
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
    passed = log_rms < power_rms if expected == "log" else power_rms < log_rms
    measured = f"log-fit RMS {log_rms:.3g}, power-fit RMS {power_rms:.3g} (a = {a:.3g})"
    text = f"the {expected} fit has the smaller relative residual over {decades:.2g} decades, {len(pts)} points"
    return Check(claim, f"{expected} shape", measured, text, bool(passed), source, **tags)


def observation(
    claim: str,
    paper_says: str,
    measured: Any,
    agrees: bool,
    source: str,
    *,
    tolerance: str = "agrees or not (the paper's remark)",
    result: str = "",
) -> Check:
    """A paper's *empirical* remark about its figure or table (``paper_says``) set against our measurement.

    ``claim`` or ``source`` must name the figure, table or remark (``"fig. 3"``, ``"Table 1"``, ``"remark"``):
    an observation stands for something the paper showed, never for a theorem's prediction. ``tolerance`` states
    the paper's criterion and the measured spread it is judged within (e.g. "time to alignment 0.99; steps
    recorded every 10").
    """
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
    row = observation(claim, f"{side} {reference:.4g}", mean, gap > tol, source, tolerance=text, result=result)
    return dataclasses.replace(row, inconclusive=abs(gap) <= tol)


OBSERVATION_MARKS = ("fig.", "table", "remark")


@dataclass(frozen=True)
class Falsifier:
    """A small, plausible wrong mechanism under which the checks that name it must fail.

    It changes the mechanism a theorem is about (the model, the optimizer, the data model, a closed form, a solver's
    program), never a check's own arithmetic, its threshold or the run's recorded output, and it leaves the run
    finite. It is applied without editing source: :meth:`applied` replaces ``target`` (``"module:attribute"``,
    the name *where the experiment looks it up*) by ``wrap(original)`` for the duration of a ``with`` block.

    Parameters
    ----------
    name : str
        Short id the checks name, e.g. ``"temperature-1.3"``.
    mechanism : str
        What is wrong, in words: ``"softmax temperature 1.3 in the empirical loss"``.
    target : str
        ``"package.module:attribute"`` (dotted attributes allowed after the colon, e.g. ``"mod:Class.method"``).
    wrap : callable
        ``wrap(original) -> replacement``.
    slow : bool, default=False
        The quick run under this falsifier takes long: its test is marked slow.

    Examples
    --------
    >>> import math
    >>> f = Falsifier("sqrt-off", "square root off by 10%", "math:sqrt", lambda sqrt: lambda x: 1.1 * sqrt(x))
    >>> with f.applied():
    ...     round(math.sqrt(4.0), 6)
    2.2
    >>> math.sqrt(4.0)
    2.0
    """

    name: str
    mechanism: str
    target: str
    wrap: Callable[[Any], Any]
    slow: bool = False

    def __post_init__(self) -> None:
        if ":" not in self.target:
            raise ValidationError(
                f"Falsifier.target must be 'module:attribute', got {self.target!r}; name the attribute where the "
                "experiment looks the mechanism up, e.g. 'attnlab.experiments.flagship:train'"
            )

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Replace ``target`` by ``wrap(original)`` inside the block, and restore it after."""
        module_name, _, path = self.target.partition(":")
        owner: Any = importlib.import_module(module_name)
        *parents, attribute = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        original = getattr(owner, attribute)
        setattr(owner, attribute, self.wrap(original))
        try:
            yield
        finally:
            setattr(owner, attribute, original)


@dataclass(frozen=True)
class Claim:
    """A check declared once: what it claims, the paper result it tests, where, and its falsifier.

    Rows come from its methods (:meth:`close`, :meth:`less`, :meth:`greater`, :meth:`ordering`, :meth:`slope`,
    :meth:`rate_shape`, :meth:`holds`), so the claim text, result id, source and falsifier are written once and the
    tolerance text comes from the numbers the row tests. An experiment lists its claims when it registers; the
    coverage tables of docs/theory are generated from them.

    Parameters
    ----------
    claim : str
        The claim in words; may hold ``{name}`` fields filled by :meth:`format` at run time.
    result : str
        ``"<paper id>:<result>"``, e.g. ``"001:Thm1"`` (:data:`PAPER_IDS`).
    source : str
        Our theory page and section: ``"docs/theory/implicit-bias-ngd.md §8.3"``.
    falsifier : str, default=""
        The experiment's :class:`Falsifier` under which the row must fail; required for ``kind="theory"``.
    kind : {"theory", "property"}, default="theory"
        Observations are made with :func:`observation`, which names the paper's figure or remark instead.
    """

    claim: str
    result: str
    source: str
    falsifier: str = ""
    kind: str = "theory"

    def __post_init__(self) -> None:
        check_in("kind", self.kind, ("theory", "property"))
        if not _RESULT.match(self.result):
            raise ValidationError(
                f"Claim.result must be '<paper id>:<result>' such as '001:Thm1', got {self.result!r} "
                f"(paper ids: {PAPER_IDS})"
            )
        if self.kind == "theory" and not self.falsifier:
            raise ValidationError(
                f"theory claim {self.claim!r} names no falsifier; declare the wrong mechanism under which it must "
                "fail, or make it kind='property' if it is a property of our code"
            )

    @property
    def tags(self) -> dict[str, str]:
        return {"kind": self.kind, "result": self.result, "falsifier": self.falsifier}

    def format(self, **values: Any) -> Claim:
        """This claim with its ``{name}`` fields filled in (e.g. the step count of this run)."""
        return dataclasses.replace(self, claim=self.claim.format(**values))

    def close(self, predicted: float, measured: float, rtol: float = 0.0, **kwargs: Any) -> Check:
        """Row of :func:`check_close`."""
        return check_close(self.claim, predicted, measured, rtol, self.source, **kwargs, **self.tags)

    def less(self, measured: float, bound: float, **kwargs: Any) -> Check:
        """Row of :func:`check_less`."""
        return check_less(self.claim, measured, bound, self.source, **kwargs, **self.tags)

    def greater(self, measured: float, bound: float, **kwargs: Any) -> Check:
        """Row of :func:`check_greater`."""
        return check_greater(self.claim, measured, bound, self.source, **kwargs, **self.tags)

    def ordering(self, values: Mapping[str, float], order: Sequence[str], **kwargs: Any) -> Check:
        """Row of :func:`check_ordering`."""
        return check_ordering(self.claim, values, order, self.source, **kwargs, **self.tags)

    def slope(self, x: Sequence[float], y: Sequence[float], predicted: float, tol: float, **kwargs: Any) -> Check:
        """Row of :func:`check_slope`."""
        return check_slope(self.claim, x, y, predicted, tol, self.source, **kwargs, **self.tags)

    def rate_shape(self, t: Sequence[float], y: Sequence[float], expected: str, **kwargs: Any) -> Check:
        """Row of :func:`check_rate_shape`."""
        return check_rate_shape(self.claim, t, y, expected, self.source, **kwargs, **self.tags)

    def holds(self, predicted: Any, measured: Any, tolerance: str, passed: bool) -> Check:
        """A row whose rule no helper states; ``tolerance`` must say the rule and where its numbers come from."""
        return Check(self.claim, predicted, measured, tolerance, bool(passed), self.source, **self.tags)


def check_declared(rows: Sequence[Check], claims: Sequence[Claim], experiment: str) -> None:
    """Refuse theory and property rows that no declared claim of ``experiment`` stands for.

    A row stands for a claim when its kind, result, source and falsifier are the claim's (its text may be the
    claim's template filled in by :meth:`Claim.format`). Observations are declared by :func:`observation` itself.
    """
    declared = {(c.kind, c.result, c.source, c.falsifier) for c in claims}
    stray = [
        row.claim
        for row in rows
        if row.kind != "observation" and (row.kind, row.result, row.source, row.falsifier) not in declared
    ]
    if stray:
        raise ValidationError(
            f"{experiment!r} wrote checks that no declared Claim stands for: {stray}; build theory checks and "
            "properties from a Claim listed in the experiment's claims=(...), naming its paper result and falsifier"
        )
