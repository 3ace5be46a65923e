"""The project's lock of readings (``checks.lock``) is current, and a reading cannot change without a revision.

``python -m attnlab.experiments.lock`` prints what differs; ``--write`` records new claims and revisions after review.
"""

import dataclasses
from pathlib import Path

from attnlab.experiments import list_experiments
from attnlab.experiments.lock import main
from attnlab.verify import Revision
from attnlab.verify.lock import lock_entries, lock_problems, read_lock

LOCK = Path(__file__).resolve().parents[2] / "checks.lock"


def test_the_lock_is_current_for_every_experiment():
    pending, refused = lock_problems(lock_entries(list_experiments()), read_lock(LOCK))
    stale = [line for line in refused if "no experiment declares it" not in line]  # retired claims: the test below
    assert not pending and not stale, "\n".join(
        ["checks.lock is not current (python -m attnlab.experiments.lock; --write after review):", *pending, *stale]
    )


def test_no_locked_claim_disappears_without_being_retired():
    pending, refused = lock_problems(lock_entries(list_experiments()), read_lock(LOCK))
    gone = [line for line in refused if "no experiment declares it" in line]
    assert not gone, "\n".join(gone)


def _a_locked_theory_claim():
    for experiment in list_experiments():
        for i, claim in enumerate(experiment.claims):
            if claim.kind == "theory":
                return experiment, i, claim
    raise AssertionError("no experiment declares a theory claim")


def test_editing_a_locked_reading_without_a_revision_fails():
    experiment, i, claim = _a_locked_theory_claim()
    edited_reading = dataclasses.replace(claim.reading, window=claim.reading.window + ", re-read after it ran")
    claims = list(experiment.claims)
    claims[i] = dataclasses.replace(claim, reading=edited_reading)
    edited = dataclasses.replace(experiment, claims=tuple(claims))
    _, refused = lock_problems(lock_entries([edited]), read_lock(LOCK))
    assert any(f"{experiment.name}/{claim.id}: the reading changed without a revision" in r for r in refused)
    # the same edit with a revision that keeps the locked reading is a reviewable change, not a refusal
    revision = Revision(claim.reading, "2026-11-27", "a test", "pass: (test)", "not run")
    claims[i] = dataclasses.replace(claim, reading=edited_reading, revisions=(*claim.revisions, revision))
    revised = dataclasses.replace(experiment, claims=tuple(claims))
    pending, refused = lock_problems(lock_entries([revised]), read_lock(LOCK))
    assert not [r for r in refused if claim.id in r] and any(claim.id in p for p in pending)


def test_the_lock_command_reports_and_exits_nonzero_when_not_current(tmp_path, capsys):
    assert main(["--lock", str(tmp_path / "empty.lock")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith(("refused: ", "pending review (--write records it): ")) for line in lines)


def test_the_lock_is_format_2_and_migrate_refuses_any_other(tmp_path, capsys):
    """checks.lock was migrated once (its revision digests cover date, reason and outcomes); --migrate runs alone."""
    assert read_lock(LOCK)["format"] == 2
    copy = tmp_path / "checks.lock"
    copy.write_text(LOCK.read_text())
    assert main(["--migrate", "--lock", str(copy)]) == 1
    assert "lock format 2, this attnlab reads 1" in capsys.readouterr().out
    assert copy.read_text() == LOCK.read_text()
