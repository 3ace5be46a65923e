"""run_sweep: results store layout, index, failures recorded without stopping the sweep, resume skips finished runs."""

import json
import signal

import pandas as pd
import pytest
from sweep_fixtures import (
    Diverges,
    Explodes,
    FailsWhenTold,
    KillAlways,
    ToyTrain,
    log_lines,
    sweep_process,
    wait_until,
)

from attnlab._validation import ValidationError
from attnlab.runner import register_task
from attnlab.runner.executors import InProcessExecutor, PoolExecutor
from attnlab.runner.results import INDEX_COLUMNS, read_index
from attnlab.runner.spec import Job, SweepSpec, expand
from attnlab.runner.sweep import run_sweep
from attnlab.runner.task import execute

register_task(ToyTrain())
register_task(Explodes())
register_task(Diverges())
register_task(FailsWhenTold())
register_task(KillAlways())
SPEC = SweepSpec(task="toy-train", base={"d": 3, "steps": 5}, grid={"lr": [0.1, 0.2], "seed": [0, 1, 2]})


def test_sweep_writes_one_directory_per_config_and_an_index(tmp_path):
    result = run_sweep(SPEC, tmp_path, progress=False)
    index = pd.read_parquet(tmp_path / "index.parquet")
    assert list(index.columns) == INDEX_COLUMNS
    assert list(index["status"]) == ["done"] * 6
    jobs = expand(SPEC)
    assert list(index["key"]) == [j.key for j in jobs]
    for job, run_dir in zip(jobs, index["run_dir"]):
        assert run_dir == f"runs/toy-train-{job.key}"
        assert json.loads((tmp_path / run_dir / "record.json").read_text())["params"] == job.params
    assert result.ran == 6 and result.failed.empty


def test_restart_skips_finished_runs_and_reruns_the_rest(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    jobs = expand(SPEC)
    unfinished = tmp_path / "runs" / f"toy-train-{jobs[2].key}" / "record.json"
    unfinished.unlink()  # as if the sweep had died before this run finished
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").glob("*/record.json")}
    result = run_sweep(SPEC, tmp_path, progress=False)
    assert result.ran == 1 and unfinished.exists()
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())  # finished runs untouched


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path):
    spec = SweepSpec(task="explodes", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0}, grid={"explode": [False, True]})
    result = run_sweep(spec, tmp_path, progress=False)
    assert list(result.index["status"]) == ["done", "failed"]
    assert "RuntimeError: boom" in result.failed["error"].iloc[0]
    assert list(read_index(tmp_path)["status"]) == ["done", "failed"]


def test_a_finished_run_computed_again_is_listed_as_it_ended_now(tmp_path, monkeypatch):
    # The sweep's first scan reads the stored runs while they are finished; recomputed (--fresh, or new code) and
    # failing, they must be listed failed, not as the finished runs read before they ran.
    spec = SweepSpec(task="fails-when-told", base={"d": 3, "steps": 5, "lr": 0.1}, grid={"seed": [0, 1]})
    assert list(run_sweep(spec, tmp_path, progress=False).index["status"]) == ["done", "done"]
    monkeypatch.setattr(FailsWhenTold, "fail", True)
    result = run_sweep(spec, tmp_path, progress=False, fresh=True)
    assert result.ran == 2
    assert list(result.index["status"]) == ["failed", "failed"]
    assert list(pd.read_parquet(tmp_path / "index.parquet")["status"]) == ["failed", "failed"]
    assert (result.index["reason"] == "").all()  # no manifest: nothing of the runs read before they ran


def test_a_run_whose_worker_always_dies_is_listed_failed_with_why(tmp_path):
    spec = SweepSpec(task="kill-always", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0}, grid={"kill": [False, True]})
    result = run_sweep(spec, tmp_path, PoolExecutor(workers=1, retries=0), progress=False)
    assert list(result.index["status"]) == ["done", "failed"]
    assert "a pool worker died 1 times" in result.failed["error"].iloc[0]
    assert list(read_index(tmp_path)["status"]) == ["done", "failed"]


def test_read_index_trusts_the_run_directories_over_a_stale_index(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    first, second = sorted((tmp_path / "runs").iterdir())[:2]
    (first / "manifest.json").unlink()  # as if killed before the runner finished the run
    (second / "record.json").unlink()  # a finished run damaged afterwards
    index = read_index(tmp_path).set_index("run_dir")
    assert sorted(index["status"]) == ["damaged"] + ["done"] * 4 + ["pending"]
    assert index.loc[f"runs/{second.name}", "error"] == "record.json is missing"


def test_bad_parameters_are_refused_before_anything_runs(tmp_path):
    spec = SweepSpec(task="toy-train", base={"d": 3, "steps": 5, "seed": 0}, grid={"lr": [0.1, -1.0]})
    with pytest.raises(ValidationError, match="lr == -1.0, must be > 0"):
        run_sweep(spec, tmp_path, progress=False)
    assert not (tmp_path / "runs").exists()


def test_read_index_needs_a_sweep_folder(tmp_path):
    with pytest.raises(ValidationError, match="holds no index.parquet"):
        read_index(tmp_path)


def test_two_sweeps_on_one_store_both_listed_in_the_index(tmp_path):
    other = SweepSpec(task="toy-train", base={"d": 3, "steps": 5}, grid={"lr": [0.3], "seed": [7, 8]})
    run_sweep(SPEC, tmp_path, progress=False)
    run_sweep(other, tmp_path, progress=False)
    index = pd.read_parquet(tmp_path / "index.parquet")
    keys = {j.key for j in expand(SPEC)} | {j.key for j in expand(other)}
    assert set(index["key"]) == keys and len(index) == 8  # the second sweep did not drop the first one's rows
    assert list(index["status"]) == ["done"] * 8
    assert read_index(tmp_path).equals(index)


class FinishesNext(ToyTrain):
    """Running seed 0 also runs seed 1 to the end, as a second sweep on the same store would meanwhile."""

    name = "finishes-next"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        with open(params["log"], "a") as log:
            log.write(f"start {params['seed']}\n")
        if params["seed"] == 0:
            other = {**params, "seed": 1}
            key = Job(self.name, other).key
            execute(self, key, other, run_dir.parent / f"{self.name}-{key}")
        return super().run(params, run_dir)


def test_what_is_left_to_do_is_decided_when_a_run_is_claimed_not_at_start(tmp_path):
    register_task(FinishesNext())
    log = tmp_path / "log"
    spec = SweepSpec(task="finishes-next", base={"d": 3, "steps": 5, "lr": 0.1, "log": str(log)}, grid={"seed": [0, 1]})
    result = run_sweep(spec, tmp_path / "out", progress=False)
    assert log.read_text().split() == ["start", "0", "start", "1"]  # seed 1 ran once, inside seed 0's run
    assert list(result.index["status"]) == ["done", "done"] and result.ran == 1


@pytest.mark.parametrize("executor", [InProcessExecutor(), PoolExecutor(workers=2)], ids=["inprocess", "pool"])
def test_a_diverged_run_is_finished_recorded_and_not_rerun(executor, tmp_path):
    spec = SweepSpec(task="diverges", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0}, grid={"diverge": [True, False]})
    result = run_sweep(spec, tmp_path, executor, progress=False)
    assert list(result.index["status"]) == ["diverged", "done"] and result.failed.empty
    assert list(pd.read_parquet(tmp_path / "index.parquet")["status"]) == ["diverged", "done"]
    again = run_sweep(spec, tmp_path, executor, progress=False)
    assert again.ran == 0 and list(read_index(tmp_path)["status"]) == ["diverged", "done"]


def test_two_concurrent_sweeps_and_a_kill_lose_nothing_and_compute_no_finished_run_twice(tmp_path):
    log, out = tmp_path / "log", tmp_path / "out"
    spec = {
        "task": "sweep_fixtures:Recorded",
        "base": {"d": 3, "steps": 5, "lr": 0.1, "sleep": 0.3, "log": str(log)},
        "grid": {"seed": list(range(10))},
    }
    first, second = sweep_process(out, **spec), sweep_process(out, **spec)
    # 60 s: two interpreters importing torch on a loaded 2-core machine
    wait_until(lambda: len(log_lines(log, "end")) >= 3, 60, "three finished runs", first)
    first.send_signal(signal.SIGKILL)  # a crash in the middle: no cleanup code runs, its claim dies with it
    first.wait()
    assert second.wait(timeout=60) == 0, second.stdout.read().decode()
    ends = log_lines(log, "end")
    # every run finished, and none twice, except the one the kill may have caught between the task's "end" and its
    # manifest, which the runner writes last: that run was not finished (no manifest), so it is computed again
    assert len(set(ends)) == 10 and len(ends) - len(set(ends)) <= 1, ends
    assert list(read_index(out)["status"]) == ["done"] * 10
    assert list(pd.read_parquet(out / "index.parquet")["status"]) == ["done"] * 10  # the last index is true
    again = run_sweep(SweepSpec(**spec), out, progress=False)
    assert again.ran == 0 and log_lines(log, "end") == ends
