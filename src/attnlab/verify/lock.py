"""The lock of readings: a digest of every claim's reading, frozen in a reviewed file, so that a reading cannot
change after it ran without a visible :class:`~attnlab.verify.Revision`.

A claim's digest covers its text, kind, result, :class:`~attnlab.verify.Reading` and the full and quick values of
the config fields the reading depends on (:func:`claim_digest`). The lock file (the project's is ``checks.lock``)
maps ``"<experiment>/<claim id>"`` to that digest and to the digests of its revisions, each of which covers the old
reading and what the revision recorded of it: date, reason, quick and full outcome (lock format 2; a format-1 lock,
whose revision digests covered the old reading only, is rewritten once by :func:`migrate_lock`). Against the lock,
:func:`lock_problems` reports:

- a claim that is not locked yet (writing the lock records it: a new claim is reviewed, then locked);
- a claim whose reading changed and whose newest revision keeps exactly the locked reading (writing the lock
  records the revision);
- a claim whose reading changed **without** such a revision, or whose revisions were edited or dropped (history is
  kept), a theory claim with no reading, a claim with no id, and a locked claim that no experiment declares any
  more unless it is listed as retired with a reason: writing refuses all of these.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab._validation import ValidationError
from attnlab.runner.store import write_json
from attnlab.verify.claim import Claim
from attnlab.verify.experiment import Experiment
from attnlab.verify.reading import Reading, reading_digest, revision_digest

__all__ = [
    "LockEntry",
    "claim_digest",
    "experiment_sizes",
    "lock_entries",
    "lock_problems",
    "migrate_lock",
    "only_experiments",
    "read_lock",
    "write_lock",
]

LOCK_FORMAT = 2  # 2: a revision's digest covers its date, why, quick and full too (1: its old reading only)


@dataclass(frozen=True)
class LockEntry:
    """What one declared claim commits to now.

    Parameters
    ----------
    key : str
        ``"<experiment>/<claim id>"``.
    digest : str
        :func:`claim_digest` of the current reading.
    revisions : tuple of str
        The digests of its revisions (old reading, date, reason and outcomes), oldest first.
    kind : str
        The claim's kind.
    has_reading : bool
        Whether the claim declares a :class:`Reading`.
    readings : tuple of str, default=()
        The digests of its revisions' old readings alone, oldest first (the newest is the reading a revision
        replaced: the one locked before it; a format-1 lock's revision digests).
    """

    key: str
    digest: str
    revisions: tuple[str, ...]
    kind: str
    has_reading: bool
    readings: tuple[str, ...] = ()


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def experiment_sizes(experiment: Experiment[Any], fields: Sequence[str] | None) -> dict[str, dict[str, Any]]:
    """``{field: {"full": value, "quick": value}}`` of ``experiment``'s config, for ``fields`` (``None``: all).

    Parameters
    ----------
    experiment : Experiment
        Whose config defaults and quick overrides to read.
    fields : sequence of str or None
        Config field names; ``None`` takes every field.

    Returns
    -------
    dict

    Raises
    ------
    ValidationError
        When a field is not one of the config's.
    """
    full = experiment.config_type()
    quick = dataclasses.replace(full, **experiment.quick)
    names = [f.name for f in dataclasses.fields(experiment.config_type)]
    chosen = names if fields is None else list(fields)
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ValidationError(
            f"{experiment.name!r}: a reading's sizes name {unknown}, which are not fields of its config {names}"
        )
    return {n: {"full": _jsonable(getattr(full, n)), "quick": _jsonable(getattr(quick, n))} for n in chosen}


def claim_digest(experiment: Experiment[Any], claim: Claim) -> tuple[str, tuple[str, ...]]:
    """The digest of ``claim``'s current reading and those of its revisions, oldest first.

    A revision's digest (:func:`~attnlab.verify.reading.revision_digest`) covers its old reading (as the claim's
    digest covers the current one) and its date, reason and quick and full outcome.

    Parameters
    ----------
    experiment : Experiment
        The experiment that declares ``claim`` (its config gives the sizes).
    claim : Claim
        A declared claim.

    Returns
    -------
    digest : str
    revisions : tuple of str
    """
    current, readings = _reading_digests(experiment, claim)
    return current, tuple(revision_digest(d, r) for d, r in zip(readings, claim.revisions, strict=True))


def _reading_digests(experiment: Experiment[Any], claim: Claim) -> tuple[str, tuple[str, ...]]:
    """The digest of ``claim``'s current reading and those of its revisions' old readings alone, oldest first."""

    def digest(text: str, reading: Reading | None, sizes: Mapping[str, Any] | None) -> str:
        fields = None if reading is None else reading.sizes
        measured = sizes if sizes is not None else experiment_sizes(experiment, fields)
        return reading_digest(text, claim.kind, claim.result, reading, measured)

    current = digest(claim.claim, claim.reading, None)
    old = tuple(digest(r.claim or claim.claim, r.reading, r.sizes) for r in claim.revisions)
    return current, old


def lock_entries(experiments: Sequence[Experiment[Any]]) -> list[LockEntry]:
    """One :class:`LockEntry` per declared claim of ``experiments``.

    Parameters
    ----------
    experiments : sequence of Experiment

    Returns
    -------
    list of LockEntry
        In the experiments' order, then the claims' order; a claim with no id gets the key ``"<experiment>/"``
        (a problem :func:`lock_problems` reports).
    """
    entries = []
    for experiment in experiments:
        for claim in experiment.claims:
            digest, revisions = claim_digest(experiment, claim)
            readings = _reading_digests(experiment, claim)[1]
            key = f"{experiment.name}/{claim.id}"
            entries.append(LockEntry(key, digest, revisions, claim.kind, claim.reading is not None, readings))
    return entries


def read_lock(path: str | Path, *, format: int = LOCK_FORMAT) -> dict[str, Any]:
    """The lock file at ``path``: ``{"format", "claims": {key: {"digest", "revisions"}}, "retired": {key: why}}``.

    Parameters
    ----------
    path : path
        A lock file; a missing one reads as empty.
    format : int, default=LOCK_FORMAT
        The format it must have (:func:`migrate_lock` reads a format-1 lock).

    Returns
    -------
    dict

    Raises
    ------
    ValidationError
        When the lock has another format; a format-1 lock is migrated once with ``python -m
        attnlab.experiments.lock --migrate``.
    """
    path = Path(path)
    if not path.exists():
        return {"format": format, "claims": {}, "retired": {}}
    data = json.loads(path.read_text())
    if data.get("format") != format:
        raise ValidationError(
            f"{path}: lock format {data.get('format')!r}, this attnlab reads {format}; a format-1 lock is rewritten "
            "once with `python -m attnlab.experiments.lock --migrate` (it must be current first)"
        )
    return {"format": format, "claims": data.get("claims", {}), "retired": data.get("retired", {})}


def lock_problems(entries: Sequence[LockEntry], lock: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """What differs between the declared claims and the lock.

    Parameters
    ----------
    entries : sequence of LockEntry
        From :func:`lock_entries`.
    lock : mapping
        From :func:`read_lock`.

    Returns
    -------
    pending : list of str
        Differences that writing the lock records after review: new claims, and changed readings whose newest
        revision keeps exactly the locked one.
    refused : list of str
        Differences writing refuses: a reading changed without a revision, revisions edited or dropped, a theory
        claim without a reading, a claim without an id or with a repeated key, a locked claim gone without being
        retired.
    """
    locked, retired = lock["claims"], lock["retired"]
    pending: list[str] = []
    refused: list[str] = []
    seen: set[str] = set()
    for e in entries:
        if e.key.endswith("/"):
            refused.append(f"{e.key}: a claim has no id; give it Claim(id='short-name'), unique in its experiment")
            continue
        if e.key in seen:
            refused.append(f"{e.key}: two claims share this id")
        seen.add(e.key)
        if e.kind == "theory" and not e.has_reading:
            refused.append(f"{e.key}: a theory claim declares no Reading (statistic, window, subset, tolerance)")
            continue
        entry = locked.get(e.key)
        if entry is None:
            pending.append(f"{e.key}: new claim, not in the lock yet")
            continue
        old_revisions = tuple(entry.get("revisions", ()))
        if e.digest == entry["digest"] and e.revisions == old_revisions:
            continue
        if e.revisions[:-1] == old_revisions and e.readings[-1:] == (entry["digest"],):
            pending.append(f"{e.key}: reading revised (revision {len(e.revisions)} keeps the locked reading)")
        elif e.revisions[: len(old_revisions)] != old_revisions:
            refused.append(f"{e.key}: its recorded revisions were edited or dropped; a revision is history, keep it")
        else:
            refused.append(
                f"{e.key}: the reading changed without a revision entry (locked {entry['digest']}, now {e.digest}); "
                "add Revision(reading=<the old reading>, date=, why=, quick=<its last quick outcome>, full=...) to "
                "the claim's revisions, or restore the locked reading"
            )
    for key in sorted(set(locked) - seen - set(retired)):
        refused.append(f"{key}: locked, but no experiment declares it; retire it with a reason (--retire KEY=WHY)")
    return pending, refused


def only_experiments(lock: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The part of ``lock`` that belongs to the experiments ``names`` (keys ``"<name>/<id>"``).

    Parameters
    ----------
    lock : mapping
        From :func:`read_lock`.
    names : sequence of str
        Experiment names.

    Returns
    -------
    dict
        A lock with only those experiments' claims and retired keys.
    """
    mine = tuple(f"{name}/" for name in names)
    return {
        "format": LOCK_FORMAT,
        "claims": {k: v for k, v in lock["claims"].items() if k.startswith(mine)},
        "retired": {k: v for k, v in lock["retired"].items() if k.startswith(mine)},
    }


def write_lock(
    path: str | Path,
    entries: Sequence[LockEntry],
    lock: Mapping[str, Any],
    retire: Mapping[str, str] | None = None,
    *,
    keep: Mapping[str, Any] | None = None,
) -> list[str]:
    """Record the pending differences in the lock at ``path``; refuse when any difference is not a pending one.

    Parameters
    ----------
    path : path
        The lock file to write.
    entries : sequence of LockEntry
        From :func:`lock_entries`.
    lock : mapping
        The lock as it is (:func:`read_lock`), or the part of it that ``entries`` cover (:func:`only_experiments`).
    retire : mapping of str to str, optional
        Locked claims that no experiment declares any more, each with the reason it was retired.
    keep : mapping, optional
        The rest of the lock, written unchanged beside ``entries`` (when ``lock`` is only a part of it).

    Returns
    -------
    list of str
        The pending differences it recorded.

    Raises
    ------
    ValidationError
        When a difference is one that writing refuses (see :func:`lock_problems`); nothing is written.
    """
    retired = {**lock["retired"], **(retire or {})}
    empty = [k for k, why in (retire or {}).items() if not str(why).strip()]
    if empty:
        raise ValidationError(f"retiring {empty} needs a reason: --retire KEY='why it no longer runs'")
    pending, refused = lock_problems(entries, {"claims": lock["claims"], "retired": retired})
    if refused:
        raise ValidationError("the lock was not written:\n  " + "\n  ".join(refused))
    claims = {e.key: {"digest": e.digest, "revisions": list(e.revisions)} for e in entries}
    if keep is not None:
        claims = {**keep["claims"], **claims}
        retired = {**keep["retired"], **retired}
    write_json(path, {"format": LOCK_FORMAT, "claims": claims, "retired": retired})
    return pending


def migrate_lock(path: str | Path, experiments: Sequence[Experiment[Any]]) -> list[str]:
    """Rewrite the format-1 lock at ``path`` in format 2, once, after checking that it is current under format 1.

    A format-1 lock's revision digests covered the old readings only; format 2's cover the revisions' date, reason
    and outcomes too. The lock stays a faithful record: the declared claims of ``experiments`` (all of the
    project's) must match it exactly under the format-1 digests (no pending and no refused difference), and only
    then is each claim's entry written with its format-2 digests; retired claims are kept as they are.

    Parameters
    ----------
    path : path
        The format-1 lock file.
    experiments : sequence of Experiment
        Every experiment the lock covers.

    Returns
    -------
    list of str
        The keys whose entries were rewritten.

    Raises
    ------
    ValidationError
        When the lock is not format 1, or differs from the declared claims under the format-1 digests; nothing is
        written.
    """
    old = read_lock(path, format=1)
    entries = lock_entries(experiments)
    as_before = [dataclasses.replace(e, revisions=e.readings) for e in entries]  # format 1's revision digests
    pending, refused = lock_problems(as_before, old)
    if pending or refused:
        raise ValidationError(
            f"{path} is not current under lock format 1, so it is not migrated; bring it up to date with the "
            "attnlab that wrote it first:\n  " + "\n  ".join([*refused, *pending])
        )
    claims = {**old["claims"], **{e.key: {"digest": e.digest, "revisions": list(e.revisions)} for e in entries}}
    write_json(path, {"format": LOCK_FORMAT, "claims": claims, "retired": old["retired"]})
    return [e.key for e in entries]
