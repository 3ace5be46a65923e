"""A check declared once (:class:`Claim`), and the wrong mechanism under which it must fail (:class:`Falsifier`,
:mod:`attnlab.verify.falsifier`, re-exported here).

An experiment lists its claims and falsifiers when it registers (:class:`~attnlab.verify.experiment.Experiment`);
:func:`check_declared` refuses a theory or property row that no declared claim stands for, and the project's
falsifier test runs every falsifier at the experiment's quick size and asserts that every row naming it fails.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from attnlab._validation import ValidationError, check_bool, check_in
from attnlab.verify._inputs import check_claim_types, number
from attnlab.verify.check import RESULT_ID, Check
from attnlab.verify.compare import (
    check_close,
    check_greater,
    check_less,
    check_ordering,
    check_rate_shape,
    check_slope,
)
from attnlab.verify.declared import check_declared, template_fields, with_revisions
from attnlab.verify.falsifier import FALSIFIER_KINDS, Falsifier
from attnlab.verify.reading import FULL_UNCHANGED, Finding, Reading, Revision, pinned, size_change

__all__ = ["FALSIFIER_KINDS", "Claim", "Falsifier", "check_declared", "with_revisions"]


@dataclass(frozen=True)
class Claim:
    """A check declared once: what it claims, the paper result it tests, how it is read, and its falsifiers.

    Rows come from its methods (:meth:`close`, :meth:`less`, :meth:`greater`, :meth:`ordering`, :meth:`slope`,
    :meth:`rate_shape`, :meth:`holds`), so the claim text, result id, source, falsifiers, reading and finding are
    written once and the tolerance text comes from the numbers the row tests. An experiment lists its claims when it
    registers; the coverage tables of docs/theory and the project's lock of readings (``checks.lock``) are built from
    them.

    Parameters
    ----------
    claim : str
        The claim in words; may hold ``{name}`` fields filled by :meth:`format` at run time.
    result : str
        ``"<paper id>:<result>"``, e.g. ``"001:Thm1"`` (paper ids: :data:`attnlab.experiments.catalog.PAPER_IDS`).
    source : str
        Our theory page and section: ``"docs/theory/implicit-bias-ngd.md §8.3"``.
    falsifier : str or tuple of str, default=""
        The name of the experiment's :class:`Falsifier` (or several names) under which every row of the claim must
        fail; required for ``kind="theory"``, and at least one of them must be of kind ``"mechanism"`` (checked by
        :class:`~attnlab.verify.Experiment`, which holds the falsifiers).
    kind : {"theory", "property"}, default="theory"
        Observations are made with :func:`observation`, which names the paper's figure or remark instead; the rows
        of an old reading have kind ``"revision"`` (:meth:`revised`).
    id : str, default=""
        A short name, unique in its experiment (``"lem20-correlation"``): the claim's key in the lock of readings.
    reading : Reading, optional
        How the rows are computed, declared before the run: statistic, window, subset, tolerance, sizes
        (:class:`~attnlab.verify.Reading`). Its ``params`` fix the tolerance keywords of the row methods.
    revisions : tuple of Revision, default=()
        Earlier readings that ran and were replaced, oldest first, each with its outcome
        (:class:`~attnlab.verify.Revision`); their rows stay in ``checks.csv`` beside the current one. A tuple (or
        list) even for one: ``revisions=(revision,)``.
    finding : Finding, optional
        A written investigation of this claim failing at our settings (:class:`~attnlab.verify.Finding`): a failing
        row then has the verdict ``"finding"`` and does not fail the run.
    """

    claim: str
    result: str
    source: str
    falsifier: str | tuple[str, ...] = ""
    kind: str = "theory"
    id: str = ""
    reading: Reading | None = None
    revisions: tuple[Revision, ...] = ()
    finding: Finding | None = None

    def __post_init__(self) -> None:
        check_claim_types(self)
        check_in("kind", self.kind, ("theory", "property", "revision"))
        names = (self.falsifier,) if isinstance(self.falsifier, str) else tuple(self.falsifier)
        object.__setattr__(self, "falsifier", ",".join(n for n in names if n))
        object.__setattr__(self, "revisions", tuple(self.revisions))
        if not RESULT_ID.match(self.result):
            raise ValidationError(
                f"Claim.result must be '<paper id>:<result>' such as '001:Thm1', got {self.result!r} "
                "(a paper id, a colon, the result's name)"
            )
        if self.kind == "theory" and not self.falsifier:
            raise ValidationError(
                f"theory claim {self.claim!r} names no falsifier; declare the wrong mechanism under which it must "
                "fail, or make it kind='property' if it is a property of our code"
            )
        if self.finding is not None and self.kind != "theory":
            raise ValidationError(f"claim {self.claim!r}: only a theory claim can have a finding, not a {self.kind}")
        wrong = [type(r).__name__ for r in self.revisions if not isinstance(r, Revision)]
        if wrong or (self.revisions and (self.reading is None or not self.id)):
            raise ValidationError(
                f"claim {self.claim!r}: revisions must be Revision objects of a claim with an id and a current "
                f"Reading, got {wrong or 'no id or no reading'}"
            )
        if self.kind != "property" and any(r.reading is None for r in self.revisions):
            raise ValidationError(
                f"claim {self.claim!r}: a revision without an old reading is a property's that had none; a "
                f"{self.kind} claim's revision keeps the Reading it replaced"
            )

    @property
    def falsifiers(self) -> tuple[str, ...]:
        """The names of the claim's falsifiers."""
        return tuple(self.falsifier.split(",")) if self.falsifier else ()

    @property
    def tags(self) -> dict[str, Any]:
        """The row fields a claim fixes besides its text and source (kind, result, falsifiers, id, revisions, finding)."""
        return {
            "kind": self.kind,
            "result": self.result,
            "falsifier": self.falsifier,
            "claim_id": self.id,
            "revisions": len(self.revisions),
            "investigation": self.finding.investigation if self.finding else "",
        }

    def param(self, name: str) -> Any:
        """The value of ``name`` in the claim's declared reading (:meth:`Reading.param`).

        Parameters
        ----------
        name : str
            A key of the reading's ``params``.

        Returns
        -------
        Any

        Raises
        ------
        ValidationError
            When the claim declares no reading, or its reading has no such parameter.
        """
        if self.reading is None:
            raise ValidationError(f"claim {self.claim!r} declares no reading, so it has no parameter {name!r}")
        return self.reading.param(name)

    def format(self, **values: Any) -> Claim:
        """This claim with its ``{name}`` fields filled in (e.g. the step count of this run).

        Every ``{...}`` of a text that is formatted is a field, as for :meth:`str.format`: write a literal brace of
        such a text doubled (``||W||_{{F}}``). A text never formatted keeps its braces as they are.

        Parameters
        ----------
        **values
            The value of each ``{name}`` field of :attr:`claim`, by name (as for :meth:`str.format`).

        Returns
        -------
        Claim
            A copy whose ``claim`` text is filled in; everything else is the same, so its rows still stand for this
            declaration (:func:`check_declared`).

        Raises
        ------
        ValidationError
            When a field of the text is not given, the text is not a template (an unpaired brace), or a value does
            not fit its field's format spec.
        """
        parts = template_fields(self.claim)
        if parts is None:
            raise ValidationError(
                f"claim {self.claim!r} is not a template (an unpaired brace); double a literal brace: '{{{{' '}}}}'"
            )
        named = {field.split(".")[0].split("[")[0] for _, field in parts if field is not None}
        missing = sorted(named - set(values))
        if missing:
            raise ValidationError(
                f"claim {self.claim!r}: format() was not given the field(s) {missing}; pass them by name, or double "
                "the braces of a literal ('||W||_{{F}}')"
            )
        try:
            text = self.claim.format(**values)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as err:
            raise ValidationError(f"claim {self.claim!r}: format({values}) failed: {err!r}") from None
        return dataclasses.replace(self, claim=text)

    def resized(
        self,
        old: Mapping[str, Mapping[str, Any]],
        date: str,
        why: str,
        quick: str,
        full: str = FULL_UNCHANGED,
        *,
        reading: Reading | None = None,
    ) -> Claim:
        """This claim after a change of sizes only: its reading kept as a revision with the old sizes and outcome.

        Parameters
        ----------
        old : mapping
            Every config field's old full and quick value (:func:`~attnlab.verify.old_sizes`). Earlier revisions that
            meant the current sizes are pinned to them (:func:`~attnlab.verify.pinned`), so their digests stay.
        date, why, quick, full
            As :class:`~attnlab.verify.Revision`; ``full`` by default says the full size did not change.
        reading : Reading, optional
            A first reading for a property declared without one (its text was its reading).

        Returns
        -------
        Claim
        """
        grew = size_change(self.reading, old, date, why, quick, full)
        return dataclasses.replace(
            self, reading=reading or self.reading, revisions=(*pinned(self.revisions, old), grew)
        )

    def revised(self, number: int) -> Claim:
        """The claim as its revision ``number`` read it (1 = the oldest): rows of kind ``"revision"``.

        An experiment that can still compute an old reading builds its row from this claim, beside the current row;
        for an old reading it does not compute, the run shows the outcome the revision recorded.

        Parameters
        ----------
        number : int
            1 to ``len(revisions)``.

        Returns
        -------
        Claim
            Kind ``"revision"``, the old reading (and old text, where it changed); its rows carry the claim id
            ``"<id>#rev<number>"``.

        Raises
        ------
        ValidationError
            When the claim has no revision ``number``.
        """
        if isinstance(number, bool) or not isinstance(number, Integral) or not 1 <= number <= len(self.revisions):
            raise ValidationError(f"claim {self.claim!r} has {len(self.revisions)} revisions, not a number {number!r}")
        old = self.revisions[number - 1]
        return dataclasses.replace(
            self,
            claim=old.claim or self.claim,
            kind="revision",
            id=f"{self.id}#rev{number}",
            reading=old.reading,
            revisions=(),
            finding=None,
        )

    def _spread(self, kwargs: dict[str, Any], *more: str) -> dict[str, Any]:
        """``kwargs`` with ``spread`` defaulting to the reading's tolerance text, and the row's tags and origin."""
        if self.reading is not None and not kwargs.get("spread"):
            kwargs = {**kwargs, "spread": self.reading.tolerance}
        return self._tagged(kwargs, "spread", *more)

    def _tagged(self, kwargs: dict[str, Any], *more: str) -> dict[str, Any]:
        """``kwargs`` (``support`` and the keywords ``more``, no other) with the row's tags and its origin: this claim."""
        unknown = sorted(set(kwargs) - {"support", *more})
        if unknown:
            raise ValidationError(
                f"claim {self.claim!r}: the row method takes no keyword {unknown} (it takes {sorted({'support', *more})}"
                "); the claim fixes the row's kind, result, falsifiers and id"
            )
        return {**kwargs, **self.tags, "origin": self}

    def _declared(self, name: str, given: Any, default: Any, row: tuple[str, ...] = ()) -> Any:
        """A row method's tolerance keyword: the reading's value, which a call may repeat but not change.

        ``row`` names all the tolerance keywords of the row method (``("rtol", "atol")`` for :meth:`close`): when the
        reading declares any of them, it declares the row's whole tolerance, and a call may not add another one
        (other than its default value). A reading that declares none of them leaves the tolerance to the row (a
        config size its ``sizes`` lock, or a rule computed in the run and stated in ``spread``).
        """
        params = self.reading.params if self.reading is not None else {}
        declared = params.get(name)
        if given is None:
            return default if declared is None else declared
        if declared is not None and given != declared:
            raise ValidationError(
                f"claim {self.claim!r}: the row uses {name}={given!r} but its reading declares {declared!r}; a reading "
                "is fixed before it runs (change it with a Revision that keeps the old one)"
            )
        fixed = {key: params[key] for key in row if params.get(key) is not None}
        if declared is None and fixed and given != default:
            shown = ", ".join(f"{key}={value!r}" for key, value in fixed.items())
            raise ValidationError(
                f"claim {self.claim!r}: the row adds {name}={given!r} to the tolerance its reading declares ({shown}, "
                f"no {name}); a reading is fixed before it runs (declare {name} with a Revision that keeps the old one)"
            )
        return given

    def close(
        self, predicted: float, measured: float, rtol: float | None = None, *, atol: float | None = None, **kwargs: Any
    ) -> Check:
        """Row of :func:`check_close`: passes when ``|measured - predicted| <= atol + rtol * |predicted|``.

        Parameters
        ----------
        predicted : float
            The theory's value.
        measured : float
            The run's value; NaN fails.
        rtol, atol : float, optional
            Relative and absolute tolerances (not both 0); default: the reading's ``params``, else 0. A reading that
            declares either declares both: a call may repeat a declared value, never change it or add the other.
        **kwargs
            ``spread`` (see :func:`check_close`) and ``support`` (see :class:`Check`).

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result, falsifiers, id and finding.

        Raises
        ------
        ValidationError
            When ``rtol`` or ``atol`` differs from the reading's, or is given where the reading declares only the
            other: a reading is fixed before it runs; or when ``predicted`` or ``measured`` is not a number.
        """
        row = ("rtol", "atol")  # a reading that declares one declares the row's whole tolerance
        rtol, atol = self._declared("rtol", rtol, 0.0, row), self._declared("atol", atol, 0.0, row)
        predicted, measured = number("predicted", predicted), number("measured", measured)
        return check_close(self.claim, predicted, measured, rtol, self.source, atol=atol, **self._spread(kwargs))

    def _bound(self, measured: float, bound: float | None, strict: bool | None) -> tuple[float, float, bool]:
        """``(measured, bound, strict)`` of :meth:`less` and :meth:`greater`: the reading's ``bound`` and ``strict``,
        which a call may repeat but not change; ``strict=True`` only tightens the rule, so a call may always ask it."""
        row = ("bound", "strict")
        bound = self._declared("bound", bound, None, row)
        if bound is None:
            raise ValidationError(f"claim {self.claim!r}: the row needs bound=, or a reading that declares it")
        if strict is not True:
            strict = self._declared("strict", strict, False, row)
        check_bool("strict", strict)
        return number("measured", measured), number("bound", bound), bool(strict)

    def less(self, measured: float, bound: float | None = None, *, strict: bool | None = None, **kwargs: Any) -> Check:
        """Row of :func:`check_less`: passes when ``measured <= bound`` (``<`` with ``strict=True``).

        Parameters
        ----------
        measured : float
            The run's value; NaN fails.
        bound : float, optional
            The theory's upper bound; default: the reading's ``params["bound"]``. Where the reading declares it, a
            call may repeat it, never change it.
        strict : bool, optional
            ``<`` instead of ``<=``; default: the reading's ``params["strict"]``, else False. A call may always ask
            ``strict=True`` (it only tightens the rule), never ``False`` where the reading declares True.
        **kwargs
            ``spread`` (see :func:`check_less`) and ``support`` (see :class:`Check`).

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result, falsifiers, id and finding.

        Raises
        ------
        ValidationError
            When ``bound`` or ``strict`` differs from what the reading declares, no bound is given or declared, or
            ``measured`` or ``bound`` is not a number.
        """
        measured, bound, strict = self._bound(measured, bound, strict)
        return check_less(self.claim, measured, bound, self.source, strict=strict, **self._spread(kwargs))

    def greater(
        self, measured: float, bound: float | None = None, *, strict: bool | None = None, **kwargs: Any
    ) -> Check:
        """Row of :func:`check_greater`: passes when ``measured >= bound`` (``>`` with ``strict=True``).

        Parameters
        ----------
        measured : float
            The run's value; NaN fails.
        bound : float, optional
            The theory's lower bound; default: the reading's ``params["bound"]``. Where the reading declares it, a
            call may repeat it, never change it.
        strict : bool, optional
            ``>`` instead of ``>=``; as for :meth:`less`.
        **kwargs
            ``spread`` (see :func:`check_greater`) and ``support`` (see :class:`Check`).

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result, falsifiers, id and finding.

        Raises
        ------
        ValidationError
            As :meth:`less`.
        """
        measured, bound, strict = self._bound(measured, bound, strict)
        return check_greater(self.claim, measured, bound, self.source, strict=strict, **self._spread(kwargs))

    def ordering(
        self, values: Mapping[str, float], order: Sequence[str], *, margin: float | None = None, **kwargs: Any
    ) -> Check:
        """Row of :func:`check_ordering`: passes when the ``values`` named in ``order`` increase along it.

        Parameters
        ----------
        values : mapping of str to float
            The measured quantity per name (method, norm, activation).
        order : sequence of str
            At least two names of ``values``, from smallest to largest as the theory predicts.
        margin : float, optional
            Each step of the order must exceed it; default: the reading's ``params``, else 0.
        **kwargs
            ``spread`` (see :func:`check_ordering`) and ``support`` (see :class:`Check`).

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result, falsifiers, id and finding.

        Raises
        ------
        ValidationError
            When ``order`` has fewer than two names or names one that ``values`` lacks.
        """
        margin = self._declared("margin", margin, 0.0)
        return check_ordering(self.claim, values, order, self.source, margin=margin, **self._spread(kwargs))

    def slope(
        self, x: Sequence[float], y: Sequence[float], predicted: float, tol: float | None = None, **kwargs: Any
    ) -> Check:
        """Row of :func:`check_slope`: passes when the fitted slope of ``y`` on ``x`` is ``predicted +- tol``.

        Parameters
        ----------
        x, y : sequence of float
            The points, of equal length (log-log by default; see :func:`fit_slope`).
        predicted : float
            The theory's slope.
        tol : float, optional
            How far the fitted slope may be from ``predicted``; default: the reading's ``params``.
        **kwargs
            ``side``, ``logx``, ``logy``, ``spread`` (see :func:`check_slope`) and ``support`` (see :class:`Check`).
            ``side`` is part of the tolerance: default the reading's ``params["side"]``, else ``"both"``; a reading
            that declares ``tol`` without ``side`` declares ``"both"`` (a one-sided test would widen it).

        Returns
        -------
        Check
            The row (measured: the slope), with this claim's text, source, kind, result, falsifiers, id and finding.

        Raises
        ------
        ValidationError
            When ``side`` is not one of ``"both"``, ``"at_most"``, ``"at_least"``, no ``tol`` is given or declared, or
            ``tol`` or ``side`` differs from what the reading declares.
        """
        tol = self._declared("tol", tol, None, ("tol", "side"))
        if tol is None:
            raise ValidationError(f"claim {self.claim!r}: slope() needs tol=, or a reading that declares it")
        side = self._declared("side", kwargs.pop("side", None), "both", ("tol", "side"))
        kwargs = self._spread(kwargs, "logx", "logy")
        return check_slope(self.claim, x, y, number("predicted", predicted), tol, self.source, side=side, **kwargs)

    def rate_shape(
        self, t: Sequence[float], y: Sequence[float], expected: str, *, min_decades: float | None = None, **kwargs: Any
    ) -> Check:
        """Row of :func:`check_rate_shape`: passes when ``y`` follows the ``expected`` shape in ``t`` better.

        Parameters
        ----------
        t, y : sequence of float
            Positive times and positive values, of equal length.
        expected : {"log", "power"}
            The shape the theorem predicts: ``y ~ log t`` or ``y ~ t^a``.
        min_decades : float, optional
            The least decades of ``t`` the points must span; default: the reading's ``params``, else 2.
        **kwargs
            ``support`` (see :class:`Check`).

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result, falsifiers, id and finding; it fails when the
            points span fewer than ``min_decades`` decades of ``t`` (a censored row: no margin).

        Raises
        ------
        ValidationError
            When ``expected`` is not ``"log"`` or ``"power"``.
        """
        min_decades = self._declared("min_decades", min_decades, 2.0)
        kwargs = self._tagged(kwargs)
        return check_rate_shape(self.claim, t, y, expected, self.source, min_decades=min_decades, **kwargs)

    def holds(
        self,
        predicted: Any,
        measured: Any,
        tolerance: str,
        passed: bool,
        *,
        margin: float | None = None,
        support: int | None = None,
    ) -> Check:
        """A row whose rule no helper states; ``tolerance`` must say the rule and where its numbers come from.

        Parameters
        ----------
        predicted : str or float
            What the theory predicts (a number, a bound or a trend).
        measured : str or float
            What the run measured.
        tolerance : str
            The rule the row was judged by, and where its numbers come from.
        passed : bool
            Whether the measurement meets the rule: ``True`` or ``False`` (NumPy's booleans too; not ``"False"``).
        margin : float, optional
            How far the measurement lies inside the rule (negative: outside), in its own units; without it a
            failure of this row does not count as a numeric failure under a falsifier.
        support : int, optional
            How many runs, data sets or samples the statistic was taken over.

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result, falsifiers, id and finding.

        Raises
        ------
        ValidationError
            When ``passed`` is not a bool, ``margin`` is not a number or has the wrong sign for ``passed`` (a row that
            passes lies inside its rule).
        """
        passed = check_bool("passed", passed)
        if margin is not None:
            margin = number("margin", margin)
        if margin is not None and math.isfinite(margin) and (margin >= 0) != bool(passed) and margin != 0:
            raise ValidationError(
                f"claim {self.claim!r}: margin {margin:g} disagrees with passed={bool(passed)}; a margin is how far "
                "the measurement lies inside the rule (negative outside)"
            )
        margin = float(margin) if margin is not None and math.isfinite(margin) else None
        return Check(
            self.claim, predicted, measured, tolerance, passed, self.source, margin=margin, support=support,
            **self._tagged({}),
        )  # fmt: skip
