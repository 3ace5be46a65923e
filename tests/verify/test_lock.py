"""The lock of readings: new claims are locked after review, a changed reading needs a revision that keeps the
locked one, history cannot be edited, and a retired claim needs a reason."""

import dataclasses
import json
from dataclasses import dataclass

import pytest

from attnlab._validation import ValidationError
from attnlab.verify import Claim, Experiment, ExperimentResult, Falsifier, Reading, Revision
from attnlab.verify.lock import lock_entries, lock_problems, migrate_lock, read_lock, write_lock


@dataclass(frozen=True)
class ToyConfig:
    n: int = 8
    steps: int = 100
    label: str = "toy"


READING = Reading("|ratio - 1|", "the last step", "all seeds", "rel 0.05 (ours)", {"rtol": 0.05}, sizes=("steps",))
CLAIM = Claim("ratio -> 1", "001:Thm1", "docs/theory/x.md §1", "halved", id="ratio", reading=READING)
PROPERTY = Claim("finite", "001:Thm1", "docs/theory/x.md §1", kind="property", id="finite")
HALVED = Falsifier("halved", "the gradient halved", "math:sqrt", lambda f: f, "mechanism")


def _toy(*claims, quick=None):
    return Experiment(
        name="toy.exp",
        config_type=ToyConfig,
        run=lambda config, ctx: ExperimentResult(frame=None),
        quick=quick if quick is not None else {"steps": 10},
        paper="x",
        summary="a toy",
        claims=claims or (CLAIM, PROPERTY),
        falsifiers=(HALVED,),
    )


def _locked(tmp_path, experiment):
    path = tmp_path / "checks.lock"
    pending = write_lock(path, lock_entries([experiment]), read_lock(path))
    assert len(pending) == 2  # both claims were new
    return path


def test_new_claims_are_pending_until_locked_then_the_lock_is_current(tmp_path):
    experiment = _toy()
    pending, refused = lock_problems(lock_entries([experiment]), read_lock(tmp_path / "none.lock"))
    assert refused == [] and [p.split(":")[0] for p in pending] == ["toy.exp/ratio", "toy.exp/finite"]
    path = _locked(tmp_path, experiment)
    assert lock_problems(lock_entries([experiment]), read_lock(path)) == ([], [])
    assert set(json.loads(path.read_text())["claims"]) == {"toy.exp/ratio", "toy.exp/finite"}


@pytest.mark.parametrize(
    "change",
    [
        {"reading": dataclasses.replace(READING, tolerance="rel 0.2 (ours)", params={"rtol": 0.2})},
        {"reading": dataclasses.replace(READING, window="the middle step")},
        {"claim": "ratio -> 1 at the middle step"},
    ],
)
def test_a_reading_changed_without_a_revision_is_refused_and_not_written(tmp_path, change):
    path = _locked(tmp_path, _toy())
    before = path.read_text()
    edited = _toy(dataclasses.replace(CLAIM, **change), PROPERTY)
    pending, refused = lock_problems(lock_entries([edited]), read_lock(path))
    assert pending == [] and len(refused) == 1 and "changed without a revision entry" in refused[0]
    with pytest.raises(ValidationError, match="toy.exp/ratio: the reading changed without a revision"):
        write_lock(path, lock_entries([edited]), read_lock(path))
    assert path.read_text() == before


def test_a_changed_size_is_a_changed_reading(tmp_path):
    path = _locked(tmp_path, _toy())
    resized = _toy(quick={"steps": 20})
    _, refused = lock_problems(lock_entries([resized]), read_lock(path))
    assert [r.split(":")[0] for r in refused] == ["toy.exp/ratio", "toy.exp/finite"]  # both depend on steps
    relabelled = _toy(quick={"steps": 10, "label": "other"})
    _, refused = lock_problems(lock_entries([relabelled]), read_lock(path))
    assert [r.split(":")[0] for r in refused] == ["toy.exp/finite"]  # a property without a reading: every field


def test_a_revision_that_keeps_the_locked_reading_is_recorded(tmp_path):
    path = _locked(tmp_path, _toy())
    revised = dataclasses.replace(
        CLAIM,
        reading=dataclasses.replace(READING, window="the middle step"),
        revisions=(Revision(READING, "2026-11-27", "the last step is past the cap", "pass: 0.01", "fail: 0.3"),),
    )
    entries = lock_entries([_toy(revised, PROPERTY)])
    pending, refused = lock_problems(entries, read_lock(path))
    assert refused == [] and "revision 1 keeps the locked reading" in pending[0]
    write_lock(path, entries, read_lock(path))
    assert lock_problems(entries, read_lock(path)) == ([], [])
    dropped = lock_entries([_toy(dataclasses.replace(revised, revisions=()), PROPERTY)])
    _, refused = lock_problems(dropped, read_lock(path))
    assert "edited or dropped" in refused[0]  # history is kept


def test_a_property_without_a_reading_is_resized_by_a_revision_that_gives_it_one(tmp_path):
    """Its old digest is of no reading and every field: a revision with ``reading=None`` and the old sizes keeps it."""
    path = _locked(tmp_path, _toy())
    old = {"n": {"full": 8, "quick": 8}, "steps": {"full": 100, "quick": 10}, "label": {"full": "toy", "quick": "toy"}}
    grew = Revision(None, "2026-11-28", "the quick size grew", "pass", "the full size did not change", sizes=old)
    reading = Reading("runs that stopped", "every step", "all seeds", "none", sizes=("n", "steps"))
    resized = dataclasses.replace(PROPERTY, reading=reading, revisions=(grew,))
    entries = lock_entries([_toy(CLAIM, resized, quick={"steps": 20})])
    pending, refused = lock_problems(entries, read_lock(path))
    assert [r.split(":")[0] for r in refused] == ["toy.exp/ratio"]  # the theory claim's reading needs its own
    assert "toy.exp/finite: reading revised (revision 1 keeps the locked reading)" in pending
    with pytest.raises(ValidationError, match="a theory claim's revision keeps the Reading"):
        dataclasses.replace(CLAIM, revisions=(grew,))


def test_a_revision_that_does_not_keep_the_locked_reading_is_refused(tmp_path):
    path = _locked(tmp_path, _toy())
    invented = Reading("|ratio - 1|", "some step", "all seeds", "rel 0.5", {"rtol": 0.5}, sizes=("steps",))
    revised = dataclasses.replace(
        CLAIM,
        reading=dataclasses.replace(READING, window="the middle step"),
        revisions=(Revision(invented, "2026-11-27", "why", "pass", "pass"),),
    )
    _, refused = lock_problems(lock_entries([_toy(revised, PROPERTY)]), read_lock(path))
    assert "changed without a revision entry" in refused[0]


def test_a_claim_gone_from_the_experiments_must_be_retired_with_a_reason(tmp_path):
    path = _locked(tmp_path, _toy())
    entries = lock_entries([_toy(CLAIM)])
    _, refused = lock_problems(entries, read_lock(path))
    assert refused == [
        "toy.exp/finite: locked, but no experiment declares it; retire it with a reason (--retire KEY=WHY)"
    ]
    with pytest.raises(ValidationError, match="needs a reason"):
        write_lock(path, entries, read_lock(path), {"toy.exp/finite": " "})
    write_lock(path, entries, read_lock(path), {"toy.exp/finite": "merged into ratio"})
    assert lock_problems(entries, read_lock(path)) == ([], [])


def test_a_theory_claim_needs_a_reading_and_every_claim_an_id(tmp_path):
    bare = Claim("ratio -> 1", "001:Thm1", "docs/theory/x.md §1", "halved", id="ratio")
    anonymous = Claim("finite", "001:Thm1", "docs/theory/x.md §1", kind="property")
    _, refused = lock_problems(lock_entries([_toy(bare, anonymous)]), read_lock(tmp_path / "none.lock"))
    assert "declares no Reading" in refused[0] and "has no id" in refused[1]


REVISED = dataclasses.replace(
    CLAIM,
    reading=dataclasses.replace(READING, window="the middle step"),
    revisions=(Revision(READING, "2026-11-27", "the last step is past the cap", "fail: 0.87", "fail: 0.86"),),
)


@pytest.mark.parametrize(
    "edit", [{"quick": "pass: 0.99"}, {"full": "pass: 0.99"}, {"why": "tidying"}, {"date": "2026-12-01"}]
)
def test_what_a_locked_revision_recorded_cannot_be_edited(tmp_path, edit):
    """s11: the outcome, reason and date of a locked revision could be rewritten without an error."""
    path = _locked(tmp_path, _toy())
    write_lock(path, lock_entries([_toy(REVISED, PROPERTY)]), read_lock(path))
    edited = dataclasses.replace(REVISED, revisions=(dataclasses.replace(REVISED.revisions[0], **edit),))
    _, refused = lock_problems(lock_entries([_toy(edited, PROPERTY)]), read_lock(path))
    assert refused == ["toy.exp/ratio: its recorded revisions were edited or dropped; a revision is history, keep it"]


def _format_1(path, experiment, **digest):
    """A format-1 lock of ``experiment``: revision digests of the old readings alone."""
    claims = {e.key: {"digest": digest.get(e.key, e.digest), "revisions": list(e.readings)} for e in
              lock_entries([experiment])}  # fmt: skip
    path.write_text(json.dumps({"format": 1, "claims": claims, "retired": {"toy.exp/gone": "merged"}}))


def test_a_current_format_1_lock_is_migrated_once_and_a_stale_one_is_not(tmp_path):
    experiment, path = _toy(REVISED, PROPERTY), tmp_path / "checks.lock"
    _format_1(path, experiment)
    with pytest.raises(ValidationError, match="lock format 1, this attnlab reads 2.*--migrate"):
        read_lock(path)
    assert migrate_lock(path, [experiment]) == ["toy.exp/ratio", "toy.exp/finite"]
    assert lock_problems(lock_entries([experiment]), read_lock(path)) == ([], [])
    assert read_lock(path)["retired"] == {"toy.exp/gone": "merged"}
    with pytest.raises(ValidationError, match="lock format 2, this attnlab reads 1"):
        migrate_lock(path, [experiment])  # once
    _format_1(path, experiment, **{"toy.exp/ratio": "0" * 16})  # not what the claims declare under format 1
    before = path.read_text()
    with pytest.raises(ValidationError, match="not current under lock format 1, so it is not migrated"):
        migrate_lock(path, [experiment])
    assert path.read_text() == before
