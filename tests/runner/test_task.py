"""Running one job: idempotent on finished runs, clean restart of unfinished ones, failures recorded."""

import json

import pytest
from sweep_fixtures import Diverges, Explodes, NoRecord, ToyTrain

from attnlab._validation import ValidationError
from attnlab.runner.claim import claim
from attnlab.runner.task import execute, execute_batch, get_task, is_finished, register_task

PARAMS = {"d": 3, "steps": 5, "lr": 0.1, "seed": 0}


def test_execute_writes_record_last_and_skips_a_finished_run(tmp_path):
    run_dir = tmp_path / "run"
    first = execute(ToyTrain(), "k", PARAMS, run_dir)
    assert first.status == "done" and is_finished(run_dir)
    mtime = (run_dir / "record.json").stat().st_mtime_ns
    again = execute(ToyTrain(), "k", PARAMS, run_dir)
    assert again.summary == {"skipped": True}
    assert (run_dir / "record.json").stat().st_mtime_ns == mtime  # not rewritten


def test_execute_cleans_an_unfinished_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".trajectory.parquet.abc.tmp.parquet").write_text("partial write of a killed run")
    execute(ToyTrain(), "k", PARAMS, run_dir)
    expected = [".lock", "W.npy", "manifest.json", "outcome.json", "record.json", "trajectory.parquet"]  # + bookkeeping
    assert sorted(p.name for p in run_dir.iterdir()) == expected


def test_a_raising_job_becomes_a_failed_outcome_with_its_traceback(tmp_path):
    outcome = execute(Explodes(), "k", {**PARAMS, "explode": True}, tmp_path / "run")
    assert outcome.status == "failed"
    assert "RuntimeError: boom" in outcome.error
    assert "RuntimeError: boom" in (tmp_path / "run" / "error.txt").read_text()
    assert not is_finished(tmp_path / "run")


def test_a_raising_batch_fails_every_run_of_the_batch(tmp_path):
    params = [{**PARAMS, "d": "x"}, PARAMS]  # a bad d makes the batched call raise
    outcomes = execute_batch(ToyTrain(), ["a", "b"], params, [tmp_path / "a", tmp_path / "b"])
    assert [o.status for o in outcomes] == ["failed", "failed"]


def test_get_task_resolves_registered_names_and_import_paths():
    register_task(ToyTrain())
    assert isinstance(get_task("toy-train"), ToyTrain)
    assert isinstance(get_task("sweep_fixtures:SlowToy"), ToyTrain)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("nope", "not a registered task"),
        ("no_such_module:X", "could not be imported"),
        ("sweep_fixtures:toy_problem", "not an attnlab.runner.Task"),
    ],
)
def test_get_task_errors_say_what_to_pass(name, match):
    with pytest.raises(ValidationError, match=match):
        get_task(name)


def test_a_run_claimed_elsewhere_is_left_alone(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "partial.parquet").write_text("being written by another sweep")
    with claim(run_dir) as mine:  # another holder of the claim (a second descriptor: flock refuses it too)
        assert mine
        outcome = execute(ToyTrain(), "k", PARAMS, run_dir)
        batch = execute_batch(ToyTrain(), ["k"], [PARAMS], [run_dir])
    assert outcome.status == "busy" and not outcome.ran
    assert [o.status for o in batch] == ["busy"]
    assert (run_dir / "partial.parquet").exists() and not is_finished(run_dir)  # not wiped, not run


def test_a_finished_run_is_never_wiped_by_a_batch(tmp_path):
    execute(ToyTrain(), "a", PARAMS, tmp_path / "a")
    mtime = (tmp_path / "a" / "W.npy").stat().st_mtime_ns
    outcomes = execute_batch(ToyTrain(), ["a", "b"], [PARAMS, {**PARAMS, "seed": 1}], [tmp_path / "a", tmp_path / "b"])
    assert [(o.status, o.ran) for o in outcomes] == [("done", False), ("done", True)]
    assert (tmp_path / "a" / "W.npy").stat().st_mtime_ns == mtime


def test_a_diverged_summary_is_a_finished_run_with_status_diverged(tmp_path):
    params = [{**PARAMS, "diverge": True}, PARAMS]
    outcomes = execute_batch(Diverges(), ["a", "b"], params, [tmp_path / "a", tmp_path / "b"])
    assert [o.status for o in outcomes] == ["diverged", "done"]
    assert json.loads((tmp_path / "a" / "outcome.json").read_text())["status"] == "diverged"
    again = execute(Diverges(), "a", params[0], tmp_path / "a")  # finished: kept, its status remembered
    assert (again.status, again.ran) == ("diverged", False)


def test_a_task_that_writes_no_record_is_a_failure_that_says_so(tmp_path):
    outcome = execute(NoRecord(), "k", PARAMS, tmp_path / "run")
    assert outcome.status == "failed"
    assert "returned without writing record.json" in outcome.error


def test_a_batch_returning_too_few_summaries_fails_every_run(tmp_path):
    class Short(ToyTrain):
        def run_batch(self, params, run_dirs):
            return super().run_batch(params, run_dirs)[:1]

    outcomes = execute_batch(Short(), ["a", "b"], [PARAMS, {**PARAMS, "seed": 1}], [tmp_path / "a", tmp_path / "b"])
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "returned 1 summaries for a batch of 2 runs" in outcomes[0].error
