"""The project's lock of readings (``checks.lock``) is current, and a reading cannot change without a revision.

``python -m attnlab.experiments.lock`` prints what differs; ``--write`` records new claims and revisions after review.
"""

import dataclasses
from pathlib import Path

import pytest

from attnlab.experiments import list_experiments
from attnlab.experiments.lock import main
from attnlab.verify import Revision
from attnlab.verify.lock import lock_entries, lock_problems, read_lock
from tests.experiments import migrating

LOCK = Path(__file__).resolve().parents[2] / "checks.lock"


def _experiments(migrated: bool):
    return [e for e in list_experiments() if (e.name not in migrating.EXPERIMENTS) == migrated]


def test_the_lock_is_current_for_every_migrated_experiment():
    pending, refused = lock_problems(lock_entries(_experiments(True)), read_lock(LOCK))
    stale = [line for line in refused if "no experiment declares it" not in line]  # unmigrated ones are not listed
    assert not pending and not stale, "\n".join(
        ["checks.lock is not current (python -m attnlab.experiments.lock; --write after review):", *pending, *stale]
    )


def test_no_locked_claim_disappears_without_being_retired():
    pending, refused = lock_problems(lock_entries(list_experiments()), read_lock(LOCK))
    gone = [line for line in refused if "no experiment declares it" in line]
    assert not gone, "\n".join(gone)


@pytest.mark.parametrize("name", sorted(migrating.EXPERIMENTS))
def test_a_migrating_experiment_is_not_yet_locked(name):
    experiment = next(e for e in list_experiments() if e.name == name)
    pending, refused = lock_problems(lock_entries([experiment]), read_lock(LOCK))
    assert pending or refused, f"{name} meets the lock's rules: remove it from tests/experiments/migrating.py"


def _a_locked_theory_claim():
    for experiment in _experiments(True):
        for i, claim in enumerate(experiment.claims):
            if claim.kind == "theory":
                return experiment, i, claim
    pytest.skip("no experiment is migrated yet")  # pragma: no cover - only while the migration starts


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
