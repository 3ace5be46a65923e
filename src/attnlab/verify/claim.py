"""A check declared once (:class:`Claim`), and the wrong mechanism under which it must fail (:class:`Falsifier`).

An experiment lists its claims and falsifiers when it registers (:class:`~attnlab.verify.experiment.Experiment`);
:func:`check_declared` refuses a theory or property row that no declared claim stands for, and the project's
falsifier test runs every falsifier at the experiment's quick size and asserts that every row naming it fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attnlab._validation import ValidationError, check_in
from attnlab.verify.check import RESULT_ID, Check
from attnlab.verify.compare import (
    check_close,
    check_greater,
    check_less,
    check_ordering,
    check_rate_shape,
    check_slope,
)

__all__ = ["Claim", "Falsifier", "check_declared"]


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
        """Replace ``target`` by ``wrap(original)`` inside the block, and restore it after.

        Yields
        ------
        None
            Inside the block the target is replaced; the original is put back on leaving it, an exception included.
        """
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
        ``"<paper id>:<result>"``, e.g. ``"001:Thm1"`` (paper ids: :data:`attnlab.experiments.catalog.PAPER_IDS`).
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

    @property
    def tags(self) -> dict[str, str]:
        """The row fields a claim fixes besides its text and source: ``kind``, ``result`` and ``falsifier``."""
        return {"kind": self.kind, "result": self.result, "falsifier": self.falsifier}

    def format(self, **values: Any) -> Claim:
        """This claim with its ``{name}`` fields filled in (e.g. the step count of this run).

        Parameters
        ----------
        **values
            The value of each ``{name}`` field of :attr:`claim`, by name (as for :meth:`str.format`).

        Returns
        -------
        Claim
            A copy whose ``claim`` text is filled in; result, source, falsifier and kind are the same, so its rows
            still stand for this declaration (:func:`check_declared`).
        """
        return dataclasses.replace(self, claim=self.claim.format(**values))

    def close(self, predicted: float, measured: float, rtol: float = 0.0, **kwargs: Any) -> Check:
        """Row of :func:`check_close`: passes when ``|measured - predicted| <= atol + rtol * |predicted|``.

        Parameters
        ----------
        predicted : float
            The theory's value.
        measured : float
            The run's value; NaN fails.
        rtol : float, default=0.0
            Relative tolerance; it and ``atol`` (a keyword) may not both be 0.
        **kwargs
            The keywords of :func:`check_close`: ``atol``, ``spread``.

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result and falsifier.
        """
        return check_close(self.claim, predicted, measured, rtol, self.source, **kwargs, **self.tags)

    def less(self, measured: float, bound: float, **kwargs: Any) -> Check:
        """Row of :func:`check_less`: passes when ``measured <= bound`` (``<`` with ``strict=True``).

        Parameters
        ----------
        measured : float
            The run's value; NaN fails.
        bound : float
            The theory's upper bound.
        **kwargs
            The keywords of :func:`check_less`: ``strict``, ``spread``.

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result and falsifier.
        """
        return check_less(self.claim, measured, bound, self.source, **kwargs, **self.tags)

    def greater(self, measured: float, bound: float, **kwargs: Any) -> Check:
        """Row of :func:`check_greater`: passes when ``measured >= bound`` (``>`` with ``strict=True``).

        Parameters
        ----------
        measured : float
            The run's value; NaN fails.
        bound : float
            The theory's lower bound.
        **kwargs
            The keywords of :func:`check_greater`: ``strict``, ``spread``.

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result and falsifier.
        """
        return check_greater(self.claim, measured, bound, self.source, **kwargs, **self.tags)

    def ordering(self, values: Mapping[str, float], order: Sequence[str], **kwargs: Any) -> Check:
        """Row of :func:`check_ordering`: passes when the ``values`` named in ``order`` increase along it.

        Parameters
        ----------
        values : mapping of str to float
            The measured quantity per name (method, norm, activation).
        order : sequence of str
            At least two names of ``values``, from smallest to largest as the theory predicts.
        **kwargs
            The keywords of :func:`check_ordering`: ``margin``, ``spread``.

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result and falsifier.

        Raises
        ------
        ValidationError
            When ``order`` has fewer than two names or names one that ``values`` lacks.
        """
        return check_ordering(self.claim, values, order, self.source, **kwargs, **self.tags)

    def slope(self, x: Sequence[float], y: Sequence[float], predicted: float, tol: float, **kwargs: Any) -> Check:
        """Row of :func:`check_slope`: passes when the fitted slope of ``y`` on ``x`` is ``predicted +- tol``.

        Parameters
        ----------
        x, y : sequence of float
            The points, of equal length (log-log by default; see :func:`fit_slope`).
        predicted : float
            The theory's slope.
        tol : float
            How far the fitted slope may be from ``predicted``.
        **kwargs
            The keywords of :func:`check_slope`: ``side``, ``logx``, ``logy``, ``spread``.

        Returns
        -------
        Check
            The row (measured: the slope), with this claim's text, source, kind, result and falsifier.

        Raises
        ------
        ValidationError
            When ``side`` is not one of ``"both"``, ``"at_most"``, ``"at_least"``.
        """
        return check_slope(self.claim, x, y, predicted, tol, self.source, **kwargs, **self.tags)

    def rate_shape(self, t: Sequence[float], y: Sequence[float], expected: str, **kwargs: Any) -> Check:
        """Row of :func:`check_rate_shape`: passes when ``y`` follows the ``expected`` shape in ``t`` better.

        Parameters
        ----------
        t, y : sequence of float
            Positive times and positive values, of equal length.
        expected : {"log", "power"}
            The shape the theorem predicts: ``y ~ log t`` or ``y ~ t^a``.
        **kwargs
            The keywords of :func:`check_rate_shape`: ``min_decades``.

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result and falsifier; it fails when the points span fewer
            than ``min_decades`` decades of ``t``.

        Raises
        ------
        ValidationError
            When ``expected`` is not ``"log"`` or ``"power"``.
        """
        return check_rate_shape(self.claim, t, y, expected, self.source, **kwargs, **self.tags)

    def holds(self, predicted: Any, measured: Any, tolerance: str, passed: bool) -> Check:
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
            Whether the measurement meets the rule (any truthy value is taken as a bool).

        Returns
        -------
        Check
            The row, with this claim's text, source, kind, result and falsifier.
        """
        return Check(self.claim, predicted, measured, tolerance, bool(passed), self.source, **self.tags)


def check_declared(rows: Sequence[Check], claims: Sequence[Claim], experiment: str) -> None:
    """Refuse theory and property rows that no declared claim of ``experiment`` stands for.

    A row stands for a claim when its kind, result, source and falsifier are the claim's (its text may be the
    claim's template filled in by :meth:`Claim.format`). Observations are declared by :func:`observation` itself.

    Parameters
    ----------
    rows : sequence of Check
        The rows a run wrote.
    claims : sequence of Claim
        The claims ``experiment`` declares.
    experiment : str
        The experiment's name, for the message.

    Raises
    ------
    ValidationError
        When a theory or property row matches no claim; the message lists the rows' claim texts.
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
