"""The lock of readings: a digest of every claim's reading, frozen in a reviewed file, so that a reading cannot
change after it ran without a visible :class:`~attnlab.verify.Revision`.

A claim's digest covers its text, kind, result, :class:`~attnlab.verify.Reading` and the full and quick values of
the config fields the reading depends on (:func:`claim_digest`). The lock file (the project's is ``checks.lock``)
maps ``"<experiment>/<claim id>"`` to that digest and to the digests of its revisions' old readings. Against the
lock, :func:`lock_problems` reports:

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
from attnlab.verify.reading import Reading, reading_digest

__all__ = [
    "LockEntry",
    "claim_digest",
    "experiment_sizes",
    "lock_entries",
    "lock_problems",
    "only_experiments",
    "read_lock",
    "write_lock",
]

LOCK_FORMAT = 1


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
        The digests of its revisions' old readings, oldest first.
    kind : str
        The claim's kind.
    has_reading : bool
        Whether the claim declares a :class:`Reading`.
    """

    key: str
    digest: str
    revisions: tuple[str, ...]
    kind: str
    has_reading: bool


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
    """The digest of ``claim``'s current reading and those of its revisions' old readings, oldest first.

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
            entries.append(
                LockEntry(f"{experiment.name}/{claim.id}", digest, revisions, claim.kind, claim.reading is not None)
            )
    return entries


def read_lock(path: str | Path) -> dict[str, Any]:
    """The lock file at ``path``: ``{"format", "claims": {key: {"digest", "revisions"}}, "retired": {key: why}}``.

    Parameters
    ----------
    path : path
        A lock file; a missing one reads as empty.

    Returns
    -------
    dict
    """
    path = Path(path)
    if not path.exists():
        return {"format": LOCK_FORMAT, "claims": {}, "retired": {}}
    data = json.loads(path.read_text())
    if data.get("format") != LOCK_FORMAT:
        raise ValidationError(f"{path}: lock format {data.get('format')!r}, this attnlab reads {LOCK_FORMAT}")
    return {"format": LOCK_FORMAT, "claims": data.get("claims", {}), "retired": data.get("retired", {})}


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
        if e.revisions == (*old_revisions, entry["digest"]):
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
