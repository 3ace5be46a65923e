"""The rows of a run against the claims its experiment declares: :func:`check_declared` refuses a row that no
declared claim judged, and :func:`with_revisions` sets every revision of a claim beside its current rows.

A row is judged by the :class:`~attnlab.verify.Claim` whose method built it (its ``origin``). That claim must be the
declared one, or one of its revisions (:meth:`~attnlab.verify.Claim.revised`), with its text filled in at most
(:meth:`~attnlab.verify.Claim.format`): a copy with another reading or finding under the same id is refused, since
the declared reading (the one the lock freezes) is the one that must judge.
"""

from __future__ import annotations

import dataclasses
import json
import re
import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from attnlab._validation import ValidationError
from attnlab.verify.check import Check

if TYPE_CHECKING:  # claim.py imports this module
    from attnlab.verify.claim import Claim
    from attnlab.verify.reading import Revision

__all__ = ["check_declared", "with_revisions"]


def template_fields(template: str) -> list[tuple[str, str | None]] | None:
    """The ``(literal, field)`` parts of a claim's text read as a :meth:`str.format` template; None when it is not
    one (an unpaired brace)."""
    try:
        return [(literal, field) for literal, field, _, _ in string.Formatter().parse(template)]
    except ValueError:
        return None


def _fills(template: str, text: str) -> bool:
    """Whether ``text`` is ``template`` itself or the template with its fields filled in."""
    if text == template:
        return True
    parts = template_fields(template)
    if parts is None:
        return False
    pattern = "".join(re.escape(literal) + ("" if field is None else "(.*?)") for literal, field in parts)
    return re.fullmatch(pattern, text, flags=re.DOTALL) is not None


def _judged_by(claim: Claim) -> str:
    """Everything of a claim that judges its rows except its text: a canonical JSON string. Its revisions do not
    judge (they are history, set beside the rows from the declared claim by :func:`with_revisions`): a module's
    claim may build the rows while the experiment declares it with one more revision (:meth:`Claim.resized`)."""
    data = {
        "tags": claim.tags,
        "source": claim.source,
        "reading": None if claim.reading is None else claim.reading.as_dict(),
        "finding": None if claim.finding is None else dataclasses.asdict(claim.finding),
    }
    return json.dumps(data, sort_keys=True, default=repr)


def _stray(row: Any, declared: dict[str, list[Claim]]) -> str | None:
    """Why ``row`` stands for no declared claim (None when it does)."""
    if not isinstance(row, Check):
        return f"{row!r} is a {type(row).__name__}, not a Check"
    if row.kind in ("observation", "exploration"):
        return None
    key = json.dumps([row.kind, row.result, row.source, row.falsifier, row.claim_id])
    versions = declared.get(key)
    if not versions:
        return f"{row.claim!r}: no declared claim has its kind, result, source, falsifiers and id"
    origin = getattr(row, "origin", None)
    if origin is None:
        return f"{row.claim!r}: not built by a Claim's row method (claim.close(...), claim.holds(...), ...)"
    for claim in versions:
        if _judged_by(origin) == _judged_by(claim) and _fills(claim.claim, origin.claim) and row.claim == origin.claim:
            return None
    return (
        f"{row.claim!r}: built from a claim with the id {row.claim_id!r} whose reading, text, finding or revisions "
        "differ from the declared one; a reading is fixed before it runs (change it with a Revision)"
    )


def check_declared(rows: Sequence[Check], claims: Sequence[Claim], experiment: str) -> None:
    """Refuse theory, property and revision rows that no declared claim of ``experiment`` judged.

    A row stands for a claim when its kind, result, source, falsifiers and id are the claim's and the claim that
    built it (:attr:`Check.origin`) is the declared claim itself, its text at most filled in by
    :meth:`Claim.format`; a revision row stands for a revision of a declared claim (:meth:`Claim.revised`).
    Observations are declared by :func:`observation` itself.

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
        When a row is not a :class:`Check`, matches no claim, or was built from a claim whose reading, text, finding
        or revisions differ from the declared claim of its id; the message lists the rows.
    """
    declared: dict[str, list[Claim]] = {}
    for claim in claims:
        for c in (claim, *(claim.revised(k) for k in range(1, len(claim.revisions) + 1))):
            key = json.dumps([c.kind, c.result, c.source, c.falsifier, c.id])
            declared.setdefault(key, []).append(c)
    stray = [why for why in (_stray(row, declared) for row in rows) if why is not None]
    if stray:
        raise ValidationError(
            f"{experiment!r} wrote checks that no declared Claim stands for: {stray}; build theory checks and "
            "properties with the row methods of a Claim listed in the experiment's claims=(...), naming its paper "
            "result and falsifier"
        )


def with_revisions(rows: Sequence[Check], claims: Sequence[Claim]) -> list[Check]:
    """``rows`` with every revision of a claim beside the claim's rows: recomputed, or as the revision recorded it.

    A revision the run recomputed (a row built from :meth:`Claim.revised`) moves next to the current rows of its
    claim; one it did not gets a ``recorded`` row that shows the old reading and its outcome at quick and full size.
    Its text is the claim's template with each field shown as ``<each name>`` (braces that hold no field name,
    as in ``m^{-1/2}``, are kept).

    Parameters
    ----------
    rows : sequence of Check
        The rows a run wrote.
    claims : sequence of Claim
        The claims of the experiment.

    Returns
    -------
    list of Check
        Every row of ``rows`` once, in order, each claim's revision rows right after its last current row.
    """
    revision_rows: dict[str, list[Check]] = {}
    for row in rows:
        if row.kind == "revision":
            revision_rows.setdefault(row.claim_id, []).append(row)
    pending: dict[str, list[Check]] = {}
    for claim in claims:
        for number, revision in enumerate(claim.revisions, start=1):
            old = claim.revised(number)
            recorded = _recorded(old, revision)
            pending.setdefault(claim.id, []).extend(revision_rows.get(old.id) or [recorded])
    current = [row for row in rows if row.kind != "revision"]
    last = {row.claim_id: i for i, row in enumerate(current) if row.claim_id in pending}
    out: list[Check] = []
    for i, row in enumerate(current):
        out.append(row)
        if last.get(row.claim_id) == i:
            out.extend(pending.pop(row.claim_id))
    return out + [row for extra in pending.values() for row in extra]  # claims with no current row this run


def _each(template: str) -> str:
    """A claim's template with each field ``{p:g}`` shown as ``<each p>``: one row stands for every value. A text
    whose braces hold no field names (``m^{-1/2}``, an unpaired brace) is no template and is kept as written."""
    parts = template_fields(template)
    if parts is None or any(field is not None and not field.isidentifier() for _, field in parts):
        return template
    return "".join(literal + ("" if field is None else f"<each {field}>") for literal, field in parts)


def _recorded(old: Claim, revision: Revision) -> Check:
    """The row of an old reading that the run did not recompute: what the revision recorded of it."""
    reading = revision.reading
    predicted = "as its text says" if reading is None else reading.tolerance
    read = "no reading (its text was its reading)"
    if reading is not None:
        read = f"{reading.statistic}, over {reading.window}, {reading.subset}"
    return Check(
        _each(old.claim),
        predicted,
        f"quick: {revision.quick}; full: {revision.full}",
        f"{read}; replaced {revision.date}: {revision.why}",
        False,
        old.source,
        recorded=True,
        **old.tags,
    )
