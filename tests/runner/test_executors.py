"""Executors: a batched in-process sweep, runs of one, and a process pool give the same per-run results."""

import json
import os
import signal
import warnings

import numpy as np
import pandas as pd
import pytest
from sweep_fixtures import (
    ThreadCounts,
    ToyTrain,
    Warning1,
    Warns,
    alive,
    log_lines,
    log_pids,
    sweep_process,
    wait_until,
)

from attnlab._validation import ValidationError
from attnlab.runner.executors import InProcessExecutor, PoolExecutor, make_executor
from attnlab.runner.spec import SweepSpec, expand
from attnlab.runner.task import is_finished

SPEC = SweepSpec(task="toy-train", base={"d": 4, "steps": 20}, grid={"lr": [0.1, 0.3], "seed": list(range(6))})


def run_all(executor, tmp_path):
    jobs = expand(SPEC)
    run_dirs = [tmp_path / job.key for job in jobs]
    outcomes = list(executor.map(ToyTrain(), jobs, run_dirs))
    assert sorted(o.key for o in outcomes) == sorted(j.key for j in jobs)  # each job exactly once
    assert all(o.status == "done" for o in outcomes)
    return {job.key: np.load(run_dir / "W.npy") for job, run_dir in zip(jobs, run_dirs)}


def test_batched_runs_equal_runs_of_one_and_pool_runs(tmp_path):
    batched = run_all(InProcessExecutor(), tmp_path / "batched")
    singles = run_all(InProcessExecutor(batch_size=1), tmp_path / "single")
    pooled = run_all(PoolExecutor(workers=2), tmp_path / "pool")
    for key, W in batched.items():
        # 1e-12: the same float64 ops, only batched matmul blocking can change rounding
        np.testing.assert_allclose(singles[key], W, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pooled[key], W, rtol=0, atol=1e-12)


def test_pool_workers_limit_every_blas_pool_as_they_limit_torch(tmp_path, monkeypatch):
    # whatever the environment says: numpy's OpenBLAS reads OMP_NUM_THREADS, not torch's setting (without the limit
    # this fails where the variable is unset, as on CI; a fork server already running keeps the environment it had)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    jobs = expand(SweepSpec(task="thread-counts", base={"d": 3, "steps": 2, "lr": 0.1}, grid={"seed": [0, 1]}))
    run_dirs = [tmp_path / job.key for job in jobs]
    assert all(o.status == "done" for o in PoolExecutor(workers=2).map(ThreadCounts(), jobs, run_dirs))
    expected = max(1, (os.cpu_count() or 1) // 2)
    for run_dir in run_dirs:
        seen = json.loads((run_dir / "threads.json").read_text())
        assert seen["torch"] == expected
        assert seen["pools"] and set(seen["pools"].values()) == {expected}, seen["pools"]


def test_a_pool_workers_warnings_are_raised_again_in_the_caller(tmp_path):
    """A job's warnings reach the caller as they do in process (its display), under their own class where the caller
    can import it and as UserWarning where it cannot; the jobs are not failed by them."""
    jobs = expand(SweepSpec(task="warns", base={"d": 3, "steps": 2, "lr": 0.1}, grid={"seed": [0, 1]}))
    run_dirs = [tmp_path / job.key for job in jobs]
    with pytest.warns(UserWarning) as caught:
        assert all(o.status == "done" for o in PoolExecutor(workers=2).map(Warns(), jobs, run_dirs))
    seen = {(w.category, str(w.message)) for w in caught}
    for seed in (0, 1):
        assert (Warning1, f"importable category, seed {seed}") in seen
        assert (UserWarning, f"local category, seed {seed}") in seen
    ours = [w for w in caught if "category, seed" in str(w.message)]  # not other libraries' (torch's, on first use)
    assert len(ours) == 4 and all(w.filename.endswith("sweep_fixtures.py") for w in ours)  # where the job raised them


@pytest.mark.parametrize("action", ["error", "ignore"])
@pytest.mark.parametrize("executor", [InProcessExecutor(batch_size=1), PoolExecutor(workers=2)], ids=["here", "pool"])
def test_a_job_runs_under_the_callers_warning_filters_wherever_it_runs(tmp_path, executor, action):
    # relayed and raised again in the caller, an error filter's exception stopped the whole pool sweep (jobs done on
    # disk lost their outcome) and a filter by module never matched; in the worker they act as in process
    jobs = expand(SweepSpec(task="warns", base={"d": 3, "steps": 2, "lr": 0.1}, grid={"seed": [0, 1]}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings(action, category=UserWarning, module="sweep_fixtures")  # the module that warns
        outcomes = list(executor.map(Warns(), jobs, [tmp_path / job.key for job in jobs]))
    if action == "error":  # each job fails on its first warning, in its worker
        assert [o.status for o in outcomes] == ["failed", "failed"]
        assert all("Warning1: importable category" in o.error for o in outcomes)
    else:
        assert [o.status for o in outcomes] == ["done", "done"]
    assert not [w for w in caught if "category, seed" in str(w.message)]  # none of the job's reached the caller


def test_batch_size_chunks_a_group(tmp_path):
    calls = []

    class Counting(ToyTrain):
        def run_batch(self, params, run_dirs):
            calls.append(len(params))
            return super().run_batch(params, run_dirs)

    jobs = expand(SPEC)
    list(InProcessExecutor(batch_size=5).map(Counting(), jobs, [tmp_path / j.key for j in jobs]))
    assert calls == [5, 5, 2]
    assert all(is_finished(tmp_path / j.key) for j in jobs)


def test_make_executor_refuses_unknown_names():
    with pytest.raises(ValidationError, match="executor == 'threads', must be one of 'inprocess', 'pool', 'ray'"):
        make_executor("threads")


@pytest.mark.parametrize(
    ("name", "setting", "owner"),
    [
        ("inprocess", {"workers": 7}, "pool"),
        ("inprocess", {"address": "1.2.3.4:10001"}, "ray"),
        ("pool", {"batch_size": 8}, "inprocess"),
        ("pool", {"address": "1.2.3.4:10001"}, "ray"),
        ("ray", {"workers": 2}, "pool"),
        ("ray", {"batch_size": 8}, "inprocess"),
    ],
)
def test_make_executor_refuses_a_setting_another_executor_takes(name, setting, owner):
    # it was ignored: a sweep ran on one process with --workers 7, or locally with --address
    (key, value), option = next(iter(setting.items())), "--" + next(iter(setting)).replace("_", "-")
    expected = f"{key} == {value!r} \\({option}\\) applies to the '{owner}' executor only and would do nothing with "
    with pytest.raises(ValidationError, match=f"^{expected}executor '{name}'; drop it, or choose executor '{owner}'"):
        make_executor(name, **setting)


def test_make_executor_builds_each_kind():
    assert make_executor("inprocess", batch_size=8).batch_size == 8
    assert make_executor("inprocess").batch_size == 256
    assert make_executor("pool", workers=3).workers == 3
    with pytest.raises(ValidationError, match="workers == 0, must be >= 1"):
        make_executor("pool", workers=0)


def recorded_sweep(tmp_path, runs=12, sleep=0.5):
    log = tmp_path / "log"
    proc = sweep_process(
        tmp_path / "out",
        "pool",
        task="sweep_fixtures:Recorded",
        base={"d": 3, "steps": 5, "lr": 0.1, "sleep": sleep, "log": str(log)},
        grid={"seed": list(range(runs))},
    )
    # 60 s: an interpreter and a fork server importing torch on a loaded 2-core machine
    wait_until(lambda: len(log_lines(log, "end")) >= 2, 60, "two finished runs", proc)
    return proc, log


def test_pool_workers_end_when_the_sweep_is_killed(tmp_path):
    proc, log = recorded_sweep(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # the sweep only: its workers are not signalled
    proc.wait()
    workers = log_pids(log) - {proc.pid}
    assert len(workers) == 2
    ended = len(log_lines(log, "end"))
    # 10 s: generous bound for a hang, not a timing claim (the watchdog polls every 0.2 s)
    wait_until(lambda: not any(alive(pid) for pid in workers), 10, "end of the orphaned workers")
    assert len(log_lines(log, "end")) <= ended + 2  # at most the two runs in flight finished; 12 were queued


def test_ctrl_c_stops_a_pool_sweep_and_leaves_a_true_index(tmp_path):
    proc, log = recorded_sweep(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the whole process group
    proc.wait(timeout=10)  # a hang guard, not a timing claim
    workers = log_pids(log) - {proc.pid}
    wait_until(lambda: not any(alive(pid) for pid in workers), 10, "end of the workers")
    out = tmp_path / "out"
    finished = {p.parent.name for p in out.glob("runs/*/manifest.json")}
    index = pd.read_parquet(out / "index.parquet")  # as the interrupted sweep left it, not rebuilt
    assert {d.split("/")[-1] for d in index.loc[index["status"] == "done", "run_dir"]} == finished
    assert set(index["status"]) <= {"done", "pending"} and len(index) == 12
