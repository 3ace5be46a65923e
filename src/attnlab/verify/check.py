"""Theory checks: the row a run writes, the helpers that build rows, and the declarations they come from.

A theory check is declared once, as a :class:`Claim`: the claim in words, the paper result it tests (``"001:Thm1"``),
the theory page section that states it, and the name of its :class:`Falsifier`, a small plausible wrong mechanism
(a wrong temperature, a halved gradient, a mirror map off by 0.3) under which the check must fail. An experiment lists
its claims and falsifiers when it registers; ``tests/experiments/test_falsifiers.py`` runs every falsifier at the
experiment's quick size and asserts that every check naming it fails, and the build fails when a theory check names
no result or no falsifier.

Four kinds of rows:

- ``"theory"``: a theorem's prediction. It must pass, names its result and has a falsifier. A theory row that fails
  while its claim declares a :class:`~attnlab.verify.Finding` (a written investigation that ruled out our own
  defects) has the verdict ``"finding"``: reported and counted, it does not fail the run.
- ``"property"``: a property of our own construction or code (two solvers agree, all methods start from one point),
  reported and counted apart from theorem checks; it must pass too.
- ``"observation"``: a paper's empirical remark about its own figure or table, set against our measurement;
  its verdict is "agrees", "disagrees" or, when the difference is inside the measured spread, "inconclusive"
  (:func:`spread_observation`); never fails a run.
- ``"exploration"``: a remark of ours, not of any paper (e.g. which SVM Adam ends nearest), set against our
  measurement with the same verdicts as an observation but counted apart from the papers' observations; never
  fails a run.
- ``"revision"``: an old reading of a claim (:class:`~attnlab.verify.Revision`), kept beside the current row so a
  reader sees both: "pass" or "fail" when the run recomputed it, "recorded" when it shows the outcome written in
  the revision; never fails a run.

``checks.csv`` keeps ``passed`` a bool (an observation passes when it agrees) and adds a ``verdict`` column:
"pass", "fail" or "finding" for theory checks, "pass" or "fail" for properties, "agrees", "disagrees" or
"inconclusive" for observations, "pass", "fail" or "recorded" for revisions. ``margin`` is how far the measured value
is inside the tolerance (negative: outside), ``support`` how many runs, data sets or samples the statistic was taken
over, ``claim_id`` the declared claim's id, ``revisions`` how many revisions its reading has had, and
``investigation`` the finding's written investigation.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from attnlab._validation import ValidationError, check_scalar

__all__ = ["CHECK_COLUMNS", "CHECK_KINDS", "CHECK_VERDICTS", "RESULT_ID", "Check", "CheckCounts", "count_checks"]

RESULT_ID = re.compile(r"^[0-9][0-9.]*:\S+$")  # "001:Thm1", "000:Lem4", "2308.16898:Conj1"


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
    kind : {"theory", "property", "observation", "exploration", "revision"}, default="theory"
        ``"theory"``: a theorem's prediction; must pass, and names its ``result`` and ``falsifier``.
        ``"property"``: a property of our own construction or code, counted apart from theorem checks; must pass.
        ``"observation"``: a paper's *empirical* remark about its figure or table set against our measurement;
        ``passed`` reads "agrees with the paper", and a disagreement is shown but never fails the run.
    result : str, default=""
        The paper result the row tests, ``"<paper id>:<result>"``, e.g. ``"001:Thm1"`` (the project's paper ids:
        :data:`attnlab.experiments.catalog.PAPER_IDS`).
    falsifier : str, default=""
        Name of the experiment's :class:`Falsifier` under which this row must fail (theory rows).
    inconclusive : bool, default=False
        For an observation: the difference from the paper's remark lies inside the measured spread, so the run
        neither agrees nor disagrees (``passed`` is then False). See :func:`spread_observation`.
    margin : float, optional
        How far ``measured`` lies inside the tolerance, in the measured quantity's units (negative: outside by that
        much); ``None`` when the row has no number to compare (a censored or non-numeric measurement). A falsifier
        fails a row *numerically* when the margin is finite and the row fails.
    support : int, optional
        How many runs, data sets, seeds or samples the statistic was taken over (after the reading's subset filter).
    claim_id : str, default=""
        The id of the declared claim the row stands for (``"<id>#rev<k>"`` for its k-th revision).
    revisions : int, default=0
        How many revisions the claim's reading has had.
    investigation : str, default=""
        For a theory row whose claim declares a finding: the link to the written investigation.
    recorded : bool, default=False
        For a revision row the run did not recompute: it shows the outcome the revision recorded.
    origin : Claim, optional
        The claim whose row method built the row (set by :class:`~attnlab.verify.Claim`); a run's rows are refused
        unless it is the declared claim of their id (:func:`~attnlab.verify.check_declared`). Not a column.
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
    margin: float | None = None
    support: int | None = None
    claim_id: str = ""
    revisions: int = 0
    investigation: str = ""
    recorded: bool = False
    origin: Any = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.support is not None:
            object.__setattr__(self, "support", check_scalar("support", self.support, kind=int, low=0))
        if self.kind not in CHECK_KINDS:
            raise ValidationError(f"Check.kind must be one of {CHECK_KINDS}, got {self.kind!r}")
        if self.inconclusive and (self.kind not in ("observation", "exploration") or self.passed):
            raise ValidationError(
                f"Check {self.claim!r}: only an observation that did not pass can be inconclusive, got "
                f"kind={self.kind!r}, passed={self.passed!r}; a theory check or property passes or fails"
            )

    @property
    def verdict(self) -> str:
        """``"pass"``/``"fail"``/``"finding"`` (theory), ``"pass"``/``"fail"`` (property), ``"agrees"``/``"disagrees"``/
        ``"inconclusive"`` (observation), ``"pass"``/``"fail"``/``"recorded"`` (revision).

        A failing theory row is a ``"finding"`` only when its claim declares one and the row failed numerically (a
        finite margin): a NaN, an infinity or a failure without a number (a diverged run) stays ``"fail"``."""
        if self.recorded:
            return "recorded"
        if self.kind == "theory" and not self.passed and self.investigation and _numeric(self.margin):
            return "finding"
        if self.kind not in ("observation", "exploration"):
            return "pass" if self.passed else "fail"
        if self.inconclusive:
            return "inconclusive"
        return "agrees" if self.passed else "disagrees"

    def as_row(self) -> dict[str, Any]:
        """The ``checks.csv`` row (:data:`CHECK_COLUMNS`): numbers to 6 significant digits, ``passed`` a bool.

        Returns
        -------
        dict of str to Any
            One entry per column of :data:`CHECK_COLUMNS`, in that order: ``predicted``, ``measured`` and
            ``tolerance`` as text (a float written with 6 significant digits), ``passed`` a bool, ``verdict`` as
            :attr:`verdict` says, the other fields as they are.
        """
        row = {key: getattr(self, key) for key in CHECK_COLUMNS}
        for key in ("predicted", "measured", "tolerance"):
            row[key] = format_value(row[key])
        row["margin"] = "" if self.margin is None else format_value(float(self.margin))
        row["support"] = "" if self.support is None else int(self.support)
        row["passed"] = bool(row["passed"])
        return row


CHECK_KINDS = ("theory", "property", "observation", "exploration", "revision")
CHECK_VERDICTS = ("pass", "fail", "finding", "agrees", "disagrees", "inconclusive", "recorded")
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
    "margin",
    "support",
    "claim_id",
    "revisions",
    "investigation",
]


@dataclass(frozen=True)
class CheckCounts:
    """Totals of a check table: theorem checks and properties (must pass), findings, observations, revisions.

    Made by :func:`count_checks`; counts of several tables add up with ``+``.

    Parameters
    ----------
    passed : int
        Theory checks that passed.
    total : int
        Theory checks (``kind="theory"``), findings included.
    agree : int
        Observations that agree with the paper.
    observations : int
        Observations (``kind="observation"``); inconclusive ones count as not agreeing.
    properties_passed : int, default=0
        Properties of our own code that hold.
    properties : int, default=0
        Properties (``kind="property"``).
    findings : int, default=0
        Theory checks that failed with a written investigation (verdict ``"finding"``): reported, never a failure.
    revisions : int, default=0
        Old readings shown beside their current rows (``kind="revision"``).
    ours_agree : int, default=0
        Remarks of ours (``kind="exploration"``) that the measurement agrees with.
    ours : int, default=0
        Remarks of ours: counted apart from the papers' observations.
    """

    passed: int
    total: int
    agree: int
    observations: int
    properties_passed: int = 0
    properties: int = 0
    findings: int = 0
    revisions: int = 0
    ours_agree: int = 0
    ours: int = 0

    @property
    def failed(self) -> int:
        """Theory checks that failed without an investigation: each fails the run."""
        return self.total - self.passed - self.findings

    @property
    def ok(self) -> bool:
        """No theorem check failed without a finding, and every property held (observations never fail a run)."""
        return self.failed == 0 and self.properties_passed == self.properties

    def parts(self) -> list[tuple[str, str]]:
        """The parts of :meth:`describe`, each with the verdict it shows: ``"pass"``, ``"fail"``, ``"finding"``,
        ``"agrees"``, ``"disagrees"`` or ``"revision"`` (the report colours each part by it).

        Returns
        -------
        list of (str, str)
        """
        parts = []
        if self.total or not (self.properties or self.observations):
            theory = f"{self.passed}/{self.total} theorem checks passed"
            if self.findings:
                theory += f", {self.findings} finding{'s' * (self.findings != 1)}"
            if self.failed:
                theory += f", {self.failed} failed"
            parts.append((theory, "fail" if self.failed else ("finding" if self.findings else "pass")))
        if self.properties:
            held = self.properties_passed == self.properties
            parts.append(
                (f"{self.properties_passed}/{self.properties} properties of our code hold", "pass" if held else "fail")
            )
        if self.observations:
            agreed = self.agree == self.observations
            text = f"{self.agree}/{self.observations} observations agree with the paper"
            parts.append((text, "agrees" if agreed else "disagrees"))
        if self.ours:
            text = f"{self.ours_agree}/{self.ours} remarks of ours (no paper's) agree"
            parts.append((text, "agrees" if self.ours_agree == self.ours else "disagrees"))
        if self.revisions:
            many = self.revisions != 1
            text = f"{self.revisions} revised reading{'s' * many} shown beside {'their' if many else 'its'} row"
            parts.append((text, "revision"))
        return parts

    def describe(self) -> str:
        """``"12/12 theorem checks passed"``, then findings, failures, properties, observations and revisions.

        Returns
        -------
        str
            ``"; "``-joined parts (:meth:`parts`): the theorem checks (also when the table has no rows at all, with
            ``", 2 findings"`` and ``", 1 failed"`` where there are any), then the properties, the observations and
            the revised readings where there are any, e.g. ``"3/4 theorem checks passed, 1 finding; 1/2
            observations agree with the paper; 1 revised reading shown beside its row"``.
        """
        return "; ".join(text for text, _ in self.parts())

    def __add__(self, other: CheckCounts) -> CheckCounts:
        return CheckCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))


def count_checks(checks: pd.DataFrame) -> CheckCounts:
    """Count a ``checks.csv`` table (boolean ``passed``); tables written before ``kind`` existed are all theory.

    Parameters
    ----------
    checks : pandas.DataFrame
        A check table with the columns of :data:`CHECK_COLUMNS` (at least ``passed``; without a ``kind`` column
        every row counts as a theory check, without a ``verdict`` column no row is a finding); may be empty.

    Returns
    -------
    CheckCounts
        The rows that passed and the rows in all, per kind.
    """
    if not len(checks):
        return CheckCounts(0, 0, 0, 0)
    passed = checks["passed"].astype(bool)
    kind = checks["kind"] if "kind" in checks else pd.Series("theory", index=checks.index)
    verdict = checks["verdict"] if "verdict" in checks else pd.Series("", index=checks.index)
    theory, prop, obs = (kind == "theory"), (kind == "property"), (kind == "observation")
    return CheckCounts(
        passed=int((passed & theory).sum()),
        total=int(theory.sum()),
        agree=int((passed & obs).sum()),
        observations=int(obs.sum()),
        properties_passed=int((passed & prop).sum()),
        properties=int(prop.sum()),
        findings=int((theory & (verdict == "finding")).sum()),
        revisions=int((kind == "revision").sum()),
        ours_agree=int((passed & (kind == "exploration")).sum()),
        ours=int((kind == "exploration").sum()),
    )


def _numeric(margin: float | None) -> bool:
    """Whether a row's margin is a number: a failure with it is a numeric one."""
    return margin is not None and math.isfinite(margin)


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
