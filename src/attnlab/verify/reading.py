"""How a claim is read, fixed before it runs: :class:`Reading`; a visible change of it: :class:`Revision`; a
theorem our runs contradict: :class:`Finding`.

A theorem does not say which statistic, window, subset or tolerance a finite run must be judged by: we choose them,
and a reading chosen after seeing the data can make any row pass. So each claim declares its reading (what is
measured, over which steps, on which runs, by which rule, at which sizes) *before* it is run, and the project's
lock (:mod:`attnlab.verify.lock`) freezes a digest of it. Changing a reading afterwards is allowed only as a
:class:`Revision` that keeps the old reading, its last outcome at quick and full size, the date and the reason; the
old reading then still appears in ``checks.csv`` as a row of kind ``"revision"`` next to the current one. A theory
row that fails after an investigation that rules out our own defects is a :class:`Finding`: it is reported as the
verdict ``"finding"``, counted, linked to its written investigation, and does not fail the run.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar

__all__ = ["TOLERANCE_KEYWORDS", "Finding", "Reading", "Revision", "old_sizes", "reading_digest", "revision_digest"]

#: The tolerance keywords of the row methods of :class:`~attnlab.verify.Claim` that a reading's ``params`` may fix:
#: a row takes each from the reading and refuses a call that changes it.
TOLERANCE_KEYWORDS = ("rtol", "atol", "tol", "side", "margin", "min_decades", "bound", "strict")
_SIDES = ("both", "at_most", "at_least")


def _frozen(value: Any) -> Any:
    """A JSON-like value with lists for tuples, so that digests do not depend on the container type."""
    if isinstance(value, Mapping):
        return {str(k): _frozen(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_frozen(v) for v in value]
    return value


@dataclass(frozen=True)
class Reading:
    """How a claim's rows are computed from a run, declared before the run: the part of a check we choose.

    Parameters
    ----------
    statistic : str
        What is measured, in words precise enough to recompute it: ``"min over data sets of <-grad L(W_k), W^mm> /
        ||grad L||"``.
    window : str
        Which steps, iterates, widths or records the statistic is taken over: ``"the last iterate k = K"``.
    subset : str
        Which runs, data sets, seeds or samples enter it, and the hypothesis filter that selects them:
        ``"data sets whose final selection is locally optimal (Def. 3)"``; ``"all"`` when there is no filter.
    tolerance : str
        The pass rule with its numbers and where they come from: ``"> 0 (the lemma's sign)"``.
    params : mapping of str to number, str or tuple, default={}
        The numbers the run reads from the reading (``claim.param("rtol")``): tolerances, window fractions, grids.
        A row method of :class:`~attnlab.verify.Claim` takes a tolerance keyword it is not given
        (:data:`TOLERANCE_KEYWORDS`: ``rtol``, ``atol``, ``tol``, ``side``, ``margin``, ``min_decades``, ``bound``,
        ``strict``) from here, and refuses one that differs from it, or one that adds to a tolerance declared here
        (``rtol`` beside a declared ``atol``, ``side="at_most"`` beside a declared ``tol``). Their values are checked:
        ``rtol``, ``atol``, ``tol``, ``margin`` and ``min_decades`` finite numbers ``>= 0``, ``bound`` a finite
        number, ``strict`` a bool, ``side`` one of ``"both"``, ``"at_most"``, ``"at_least"``. Other keys (``k`` of
        :func:`~attnlab.verify.spread_tolerance`, a window fraction) are read by the run with :meth:`param`.
    sizes : tuple of str, optional
        The config fields whose values (full and quick) the reading depends on; they enter the lock's digest, so
        changing a size is a revision too. ``None`` (the default): every field of the experiment's config. A tuple
        of field names (not one name as a str); :class:`~attnlab.verify.Experiment` refuses a name its config lacks.

    Examples
    --------
    >>> r = Reading("slope of log ||W_t|| on log t", "t in [T/10, T]", "all seeds", "1 +- 0.05", {"tol": 0.05})
    >>> r.param("tol")
    0.05
    """

    statistic: str
    window: str
    subset: str
    tolerance: str
    params: Mapping[str, Any] = field(default_factory=dict)
    sizes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("statistic", "window", "subset", "tolerance"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValidationError(
                    f"Reading.{name} must say it in words (a non-empty str), got {getattr(self, name)!r}, e.g. "
                    "Reading.window='the last step'"
                )
        if not isinstance(self.params, Mapping) or not all(isinstance(k, str) for k in self.params):
            raise ValidationError(f"Reading.params must be a mapping of name (str) to value, got {self.params!r}")
        object.__setattr__(self, "params", dict(self.params))
        for name in TOLERANCE_KEYWORDS:
            if name in self.params:
                _check_tolerance(name, self.params[name])
        if self.sizes is not None:
            if isinstance(self.sizes, str) or not isinstance(self.sizes, tuple | list):
                raise ValidationError(
                    f"Reading.sizes must be a tuple of config field names, got {self.sizes!r}; write "
                    "sizes=('steps',) for one field"
                )
            if not all(isinstance(n, str) for n in self.sizes) or len(set(self.sizes)) != len(self.sizes):
                raise ValidationError(f"Reading.sizes must name config fields (str) once each, got {self.sizes!r}")
            object.__setattr__(self, "sizes", tuple(self.sizes))

    def __hash__(self) -> int:
        return hash(json.dumps(self.as_dict(), sort_keys=True, default=str))

    def param(self, name: str) -> Any:
        """The declared value of ``name`` in :attr:`params`.

        Parameters
        ----------
        name : str
            A key of :attr:`params`.

        Returns
        -------
        Any
            Its value.

        Raises
        ------
        ValidationError
            When the reading declares no such parameter; the message lists those it has.
        """
        try:
            return self.params[name]
        except KeyError:
            raise ValidationError(
                f"the reading declares no parameter {name!r} (it has {sorted(self.params)}); declare it in "
                "Reading(params=...) so that the number is fixed before the run"
            ) from None

    def as_dict(self) -> dict[str, Any]:
        """The reading as plain JSON-able data: the input of :func:`reading_digest`.

        Returns
        -------
        dict
            ``statistic``, ``window``, ``subset``, ``tolerance``, ``params`` (lists for tuples) and ``sizes``.
        """
        data = {k: getattr(self, k) for k in ("statistic", "window", "subset", "tolerance")}
        data["params"] = _frozen(self.params)
        data["sizes"] = None if self.sizes is None else list(self.sizes)
        return data


@dataclass(frozen=True)
class Revision:
    """A reading that was run, then replaced: kept with its outcome so that a reader sees both.

    Parameters
    ----------
    reading : Reading or None
        The old reading, as it was declared; ``None`` only for a property that was declared without one (its text
        was its reading, and its sizes every config field), in the revision that gives it a reading.
    date : str
        When it was replaced, ``"YYYY-MM-DD"``.
    why : str
        Why it changed, including what the old reading measured that made it look wrong (or right).
    quick : str
        The old reading's last outcome at the quick size, with its number: ``"fail: -0.33 (data set 58, p = 3)"``.
    full : str
        The same at the full size (``"not run"`` if it never ran there).
    claim : str, default=""
        The old claim text when it differs from the current one (else the current text is meant).
    sizes : mapping of str to mapping, optional
        The old values of the reading's size fields, ``{field: {"full": value, "quick": value}}``, when the
        revision changed sizes (else the current sizes are meant).
    """

    reading: Reading | None
    date: str
    why: str
    quick: str
    full: str
    claim: str = ""
    sizes: Mapping[str, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.reading is not None and not isinstance(self.reading, Reading):
            raise ValidationError(f"Revision.reading must be the old Reading, got {type(self.reading).__name__}")
        for name in ("date", "why", "quick", "full"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValidationError(
                    f"Revision.{name} must be a non-empty str, got {getattr(self, name)!r}: a revision keeps the date, "
                    "the reason and the old reading's outcome at quick and full size"
                )
        try:
            datetime.date.fromisoformat(self.date if len(self.date) == 10 else "")
        except ValueError:
            raise ValidationError(f"Revision.date must be 'YYYY-MM-DD', got {self.date!r}") from None
        if not isinstance(self.claim, str):
            raise ValidationError(f"Revision.claim must be the old claim text (a str) or '', got {self.claim!r}")
        bad = self.sizes is not None and (
            not isinstance(self.sizes, Mapping)
            or not all(isinstance(v, Mapping) and set(v) == {"full", "quick"} for v in self.sizes.values())
        )
        if bad:
            raise ValidationError(
                f"Revision.sizes must map each field to its old {{'full': value, 'quick': value}} (old_sizes() "
                f"builds it), got {self.sizes!r}"
            )

    def __hash__(self) -> int:
        return hash((self.reading, self.date, self.why, self.quick, self.full, self.claim))


def _check_tolerance(name: str, value: Any) -> None:
    """Refuse a reading's tolerance keyword of the wrong type or range (see :data:`TOLERANCE_KEYWORDS`)."""
    where = f"Reading.params[{name!r}]"
    if name == "strict":
        check_bool(where, value)
    elif name == "side":
        check_in(where, value, _SIDES)
    elif name == "bound":
        check_scalar(where, value)
    else:
        check_scalar(where, value, low=0)


def old_sizes(same: Mapping[str, Any], **changed: tuple[Any, Any]) -> dict[str, dict[str, Any]]:
    """:attr:`Revision.sizes` of a reading that ran at other sizes: ``{field: {"full": value, "quick": value}}``.

    Parameters
    ----------
    same : mapping of str to value
        The fields whose full and quick values were one value then.
    **changed : (full, quick)
        The fields whose full and quick values differed then, as pairs.

    Returns
    -------
    dict

    Examples
    --------
    >>> old_sizes({"n": 3}, runs=(100, 10))
    {'n': {'full': 3, 'quick': 3}, 'runs': {'full': 100, 'quick': 10}}
    """
    return {
        **{name: {"full": value, "quick": value} for name, value in same.items()},
        **{name: {"full": full, "quick": quick} for name, (full, quick) in changed.items()},
    }


FULL_UNCHANGED = "the full size did not change: the current row's full outcome is this reading's"


def size_change(
    reading: Reading | None,
    old: Mapping[str, Mapping[str, Any]],
    date: str,
    why: str,
    quick: str,
    full: str = FULL_UNCHANGED,
    *,
    claim: str = "",
) -> Revision:
    """The revision of a reading whose sizes changed and whose statistic, window, subset and tolerance did not.

    Parameters
    ----------
    reading : Reading or None
        The reading as it ran (None: a property declared without one, whose sizes were every config field).
    old : mapping
        Every config field's old full and quick value (:func:`old_sizes`); the revision keeps those ``reading``
        names (all of them for a reading without ``sizes`` and for None).
    date, why, quick, full, claim
        As :class:`Revision`; ``full`` by default says the full size did not change.

    Returns
    -------
    Revision
    """
    fields = None if reading is None else reading.sizes
    sizes = {name: value for name, value in old.items() if fields is None or name in fields}
    return Revision(reading, date, why, quick, full, claim=claim, sizes=sizes)


def pinned(revisions: tuple[Revision, ...], old: Mapping[str, Mapping[str, Any]]) -> tuple[Revision, ...]:
    """``revisions`` with the old sizes named where they meant the current ones, which have since changed.

    Parameters
    ----------
    revisions : tuple of Revision
        A claim's revisions; those with ``sizes=None`` ran at the sizes that were current until now.
    old : mapping
        Every config field's old full and quick value, as :func:`size_change` takes them.

    Returns
    -------
    tuple of Revision
        The same revisions, each with explicit sizes, so that its lock digest stays the one it had.
    """
    return tuple(
        r if r.sizes is not None else size_change(r.reading, old, r.date, r.why, r.quick, r.full, claim=r.claim)
        for r in revisions
    )


@dataclass(frozen=True)
class Finding:
    """A theory row that fails at our settings after an investigation: the paper's claim contradicted, reported.

    A failing row whose claim declares a finding gets the verdict ``"finding"``: it is counted and shown, linked to
    the investigation, and does not fail the run. A failure without an investigation still fails.

    Parameters
    ----------
    summary : str
        What our runs show against the claim, with numbers.
    investigation : str
        Where the written investigation is: a docs page and anchor, ``"docs/findings.md#lemma-29-log-growth"``.
    ruled_out : tuple of str
        What was ruled out before calling it a finding, one item each (seeds, step size, float64 range, the
        hypothesis, our own code against an independent truth), each with its number.
    """

    summary: str
    investigation: str
    ruled_out: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in ("summary", "investigation"):
            if not isinstance(getattr(self, name), str):
                raise ValidationError(f"Finding.{name} must be a str, got {getattr(self, name)!r}")
        if not isinstance(self.ruled_out, tuple | list) or not all(isinstance(r, str) for r in self.ruled_out):
            raise ValidationError(
                f"Finding.ruled_out must be a tuple of str, one item each, got {self.ruled_out!r}; write "
                "ruled_out=('seeds 0-4: ...',) for one"
            )
        object.__setattr__(self, "ruled_out", tuple(self.ruled_out))
        if not self.summary.strip() or "#" not in self.investigation or not self.ruled_out:
            raise ValidationError(
                "a Finding needs a summary, an investigation link 'page.md#anchor' and what was ruled_out (seeds, "
                "step size, float64, the hypothesis, our code); a failure without an investigation is a failure"
            )


def reading_digest(claim: str, kind: str, result: str, reading: Reading | None, sizes: Mapping[str, Any]) -> str:
    """A short digest of what a claim commits to: its text, kind, result, reading and sizes.

    Parameters
    ----------
    claim : str
        The claim's text (its template, before run-time values are filled in).
    kind, result : str
        The claim's kind and paper result.
    reading : Reading or None
        Its reading (a property may have none: its text is then its reading).
    sizes : mapping
        ``{field: {"full": value, "quick": value}}`` of the config fields the reading depends on.

    Returns
    -------
    str
        16 hex digits of the SHA-256 of the canonical JSON.
    """
    payload = {
        "claim": claim,
        "kind": kind,
        "result": result,
        "reading": None if reading is None else reading.as_dict(),
        "sizes": _frozen(sizes),
    }
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def revision_digest(reading: str, revision: Revision) -> str:
    """A short digest of a revision as recorded: its old reading's digest, its date, reason and outcomes.

    Parameters
    ----------
    reading : str
        :func:`reading_digest` of the revision's old reading (its text, kind, result, reading and sizes).
    revision : Revision
        The revision; its ``date``, ``why``, ``quick`` and ``full`` enter the digest, so that the lock refuses an
        edit of the recorded history.

    Returns
    -------
    str
        16 hex digits of the SHA-256 of the canonical JSON.
    """
    record = {"reading": reading, **{k: getattr(revision, k) for k in ("date", "why", "quick", "full")}}
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
