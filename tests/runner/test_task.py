"""Running one job: idempotent on finished runs, clean restart of unfinished ones, failures recorded."""

import pytest
from sweep_fixtures import Explodes, ToyTrain

from attnlab._validation import ValidationError
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
    assert sorted(p.name for p in run_dir.iterdir()) == ["W.npy", "record.json", "trajectory.parquet"]


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
    [("nope", "not a registered task"), ("no_such_module:X", "could not be imported"), ("sweep_fixtures:toy_problem", "not an attnlab.runner.Task")],
)
def test_get_task_errors_say_what_to_pass(name, match):
    with pytest.raises(ValidationError, match=match):
        get_task(name)
