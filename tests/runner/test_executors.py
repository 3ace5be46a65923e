"""Executors: a batched in-process sweep, runs of one, and a process pool give the same per-run results."""

import numpy as np
import pytest
from sweep_fixtures import ToyTrain

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


def test_make_executor_builds_each_kind():
    assert isinstance(make_executor("inprocess", batch_size=8), InProcessExecutor)
    assert make_executor("pool", workers=3).workers == 3
    with pytest.raises(ValidationError, match="workers == 0, must be >= 1"):
        make_executor("pool", workers=0)
