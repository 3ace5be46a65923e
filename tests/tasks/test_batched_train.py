"""The batched-train task: a batch of R runs equals R runs of one, a process pool and a direct train() call."""

import numpy as np
import pandas as pd
import pytest
import torch
from sweep_fixtures import assert_one_diverging_run_stops_alone

from attnlab._validation import ValidationError
from attnlab.data import example1
from attnlab.runner import InProcessExecutor, PoolExecutor, SweepSpec, expand, run_sweep
from attnlab.tasks import BatchedTrain
from attnlab.training.batched import train

SPEC = SweepSpec(
    task="batched-train",
    base={"n": 4, "T": 3, "d": 8, "steps": 30, "record_every": 10},
    grid={"lr": [0.05, 0.2], "data_seed": [0, 1, 2]},
    repeats=2,
)


def weights(root):
    index = pd.read_parquet(root / "index.parquet")
    assert list(index["status"]) == ["done"] * len(index)
    return {k: np.load(root / d / "W.npy") for k, d in zip(index["key"], index["run_dir"])}


def test_batched_equals_single_runs_and_a_pool(tmp_path):
    batched = weights(run_sweep(SPEC, tmp_path / "b", InProcessExecutor(), progress=False).root)
    single = weights(run_sweep(SPEC, tmp_path / "s", InProcessExecutor(batch_size=1), progress=False).root)
    pooled = weights(run_sweep(SPEC, tmp_path / "p", PoolExecutor(workers=2), progress=False).root)
    for key, W in batched.items():
        # 1e-12: the same float64 program; batching may only change matmul blocking in the last bits
        np.testing.assert_allclose(single[key], W, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pooled[key], W, rtol=0, atol=1e-12)


def test_a_run_equals_a_direct_train_call(tmp_path):
    job = expand(SPEC)[3]
    run_sweep([job], tmp_path, progress=False)
    p = job.params
    data = example1(n=4, T=3, d=8, seed=p["data_seed"])
    direct = train(data.X, data.Z, data.y, data.v, torch.zeros(8, 8), optimizer="ngd", lr=p["lr"], loss="exp", steps=30)
    W = np.load(next((tmp_path / "runs").glob("*/W.npy")))
    np.testing.assert_allclose(W, direct.W[0].numpy(), rtol=0, atol=1e-12)  # float64, same ops
    frame = pd.read_parquet(next((tmp_path / "runs").glob("*/trajectory.parquet")))
    assert list(frame["step"]) == [0, 10, 20, 30]


def test_kq_runs_start_from_seeded_factors(tmp_path):
    spec = SweepSpec(
        task="batched-train",
        base={"n": 4, "T": 3, "d": 6, "steps": 5, "param": "KQ", "d_e": 3, "init_scale": 0.1, "optimizer": "gd"},
        repeats=2,
    )
    result = run_sweep(spec, tmp_path, progress=False)
    assert list(result.index["status"]) == ["done", "done"]


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"momentum": 0.9}, "unknown batched-train parameters"),
        ({"optimizer": "adam"}, "optimizer == 'adam'"),
        ({"lr": 0.0}, "lr == 0.0, must be > 0"),
        ({"param": "KQ"}, "init_scale == 0 with param == 'KQ'"),
        ({"data": "mnist"}, "data == 'mnist'"),
        ({"optimizer": "polyak", "lr": 0.1}, "lr is set for optimizer polyak"),
    ],
)
def test_bad_parameters_name_the_key(params, match):
    with pytest.raises(ValidationError, match=match):
        BatchedTrain().check(params)


@pytest.mark.parametrize("executor", [InProcessExecutor(), PoolExecutor(workers=2)], ids=["inprocess", "pool"])
def test_a_diverging_run_stops_alone_and_the_others_finish(tmp_path, executor):
    assert_one_diverging_run_stops_alone(tmp_path, executor)  # Ray: tests/runner/test_ray.py
