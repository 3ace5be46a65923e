"""The batched-train task: a batch of R runs equals R runs of one, a process pool and a direct train() call."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sweep_fixtures import assert_one_diverging_run_stops_alone

from attnlab._io import save_npz
from attnlab._validation import ValidationError
from attnlab.data import example1
from attnlab.runner import InProcessExecutor, PoolExecutor, SweepSpec, expand, read_sweep, run_sweep
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
        ({"optimizer": "lbfgs"}, "unknown name 'lbfgs'"),
        ({"lr": 0.0}, "lr == 0.0, must be > 0"),
        ({"param": "KQ"}, "init_scale == 0 with param == 'KQ'"),
        ({"data": "mnist"}, "data == 'mnist'"),
        ({"optimizer": "polyak", "lr": 0.1}, "lr is set for optimizer polyak"),
    ],
)
def test_bad_parameters_name_the_key(params, match):
    with pytest.raises(ValidationError, match=match):
        BatchedTrain().check(params)


@pytest.mark.parametrize(
    ("data_seed", "match"),
    [
        (-3, r"^data_seed == -3, must be >= 0$"),
        (2**63, rf"^data_seed == {2**63}, must be <= {2**63 - 1}$"),
        (2.5, r"^data_seed must be a int, got 2.5"),
        ("1", r"^data_seed must be a int, got '1'"),
        (True, r"^data_seed must be a int, got True"),
    ],
)
def test_a_bad_data_seed_is_refused_under_its_own_name(data_seed, match):
    # the generator refused it as "seed == -3, must be >= 0", though the run's seed was fine
    with pytest.raises(ValidationError, match=match):
        BatchedTrain().check({"n": 4, "T": 3, "d": 8, "data_seed": data_seed})


def test_a_sweep_with_a_bad_data_seed_names_data_seed_and_runs_nothing(tmp_path):
    spec = SweepSpec.from_mapping({"task": "batched-train", "base": {"steps": 5, "data_seed": -3}})
    with pytest.raises(ValidationError, match=r"^data_seed == -3, must be >= 0$"):
        run_sweep(spec, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_a_data_seed_with_a_data_file_is_to_be_dropped_whatever_its_value(tmp_path):
    _own_file(tmp_path / "mine.npz", 0, with_head=True)
    with pytest.raises(ValidationError, match=r"is a data file, which fixes its sizes and draws nothing: drop"):
        BatchedTrain().check({"data": str(tmp_path / "mine.npz"), "data_seed": -3})


@pytest.mark.parametrize("executor", [InProcessExecutor(), PoolExecutor(workers=2)], ids=["inprocess", "pool"])
def test_a_diverging_run_stops_alone_and_the_others_finish(tmp_path, executor):
    assert_one_diverging_run_stops_alone(tmp_path, executor)  # Ray: tests/runner/test_ray.py


def _own_file(path, seed, with_head=False):
    """A data file as a user writes it: numpy.savez of X and y only (and v when asked)."""
    data = example1(n=4, T=3, d=6, seed=seed)
    arrays = {"X": data.X.numpy(), "y": data.y.numpy(), **({"v": data.v.numpy()} if with_head else {})}
    np.savez(path, **arrays)
    return data


def test_a_data_file_run_equals_a_direct_train_call_and_its_alignment_is_the_attended_svms(tmp_path):
    from attnlab.metrics import cosine
    from attnlab.svm import attention_svm

    data = _own_file(tmp_path / "mine.npz", 0, with_head=True)
    spec = SweepSpec(
        task="batched-train",
        base={"data": str(tmp_path / "mine.npz"), "steps": 40, "record_every": 10, "alignment": ["fro", "nuc"]},
    )
    result = run_sweep(spec, tmp_path / "out", progress=False)
    assert list(result.index["status"]) == ["done"]
    run_dir = next((tmp_path / "out" / "runs").iterdir())
    direct = train(
        data.X, data.Z, data.y, data.v, torch.zeros(6, 6), lr=0.1, steps=40, record_every=10, keep_iterates=True
    )
    W = np.load(run_dir / "W.npy")
    np.testing.assert_allclose(W, direct.W[0].numpy(), rtol=0, atol=1e-12)  # float64, same ops
    frame = pd.read_parquet(run_dir / "trajectory.parquet")
    # independent of the task: the argmax of the final logits, its SVMs, and the cosine at every recorded W_t
    attended = torch.einsum("ntd,de,ne->nt", data.X, direct.W[0], data.Z).argmax(-1)
    for norm in ("fro", "nuc"):
        svm = attention_svm(data.with_(select=None), norm, select=attended)
        expected = [float(cosine(W_t, svm.W)) for W_t in direct.iterates["W"][:, 0]]
        np.testing.assert_allclose(frame[f"alignment_{norm}"].to_numpy()[1:], expected[1:], rtol=0, atol=1e-6)
        assert np.isnan(frame[f"alignment_{norm}"].iloc[0])  # W_0 = 0: no direction yet
    record = json.loads((run_dir / "record.json").read_text())["final"]
    assert record["attended"] == attended.tolist() and record["svm_status"]["alignment_fro"] == "optimal"


def test_a_folder_of_data_files_is_one_run_per_file_and_a_missing_head_is_trained_or_refused(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    for seed in (2, 0, 1):
        _own_file(folder / f"set{seed}.npz", seed)
    spec = SweepSpec(task="batched-train", base={"data": str(folder), "steps": 20, "options": {"train_head": True}})
    jobs = expand(spec)
    assert [job.params["data"] for job in jobs] == [str(folder / f"set{s}.npz") for s in (0, 1, 2)]
    result = run_sweep(spec, tmp_path / "out", progress=False)
    assert list(result.index["status"]) == ["done"] * 3
    frame = read_sweep(tmp_path / "out")
    assert "alignment_fro" in frame and "opt_softmax" not in frame  # a head trained from 0 has no optimal tokens
    task = BatchedTrain()
    with pytest.raises(ValidationError, match="has no head v: add v to the file, name one with v: FILE.npy"):
        task.check({"data": str(folder / "set0.npz")})
    with pytest.raises(ValidationError, match=r"is a data file, which fixes its sizes and draws nothing: drop \['d'"):
        task.check({"data": str(folder / "set0.npz"), "d": 8, "options": {"train_head": True}})
    with pytest.raises(ValidationError, match=r"data file '.*nothere.npz' does not exist"):
        task.check({"data": str(tmp_path / "nothere.npz")})
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValidationError, match="holds no .npz file"):
        expand(SweepSpec(task="batched-train", base={"data": str(empty)}))
    with pytest.raises(ValidationError, match="alignment entries are fro, nuc or a number"):
        task.check({"alignment": ["l1-diag"]})


def test_a_data_file_written_again_with_other_data_makes_its_run_computed_again(tmp_path):
    data = tmp_path / "mine.npz"
    spec = SweepSpec(task="batched-train", base={"data": str(data), "steps": 20, "alignment": []})
    _own_file(data, 0, with_head=True)
    assert run_sweep(spec, tmp_path / "out", progress=False).ran == 1
    _own_file(data, 1, with_head=True)  # the same path, other data
    again = run_sweep(spec, tmp_path / "out", progress=False)
    assert again.ran == 1 and next(iter(again.recomputed.values())).endswith(f"the contents of {data}")
    fresh = run_sweep(spec, tmp_path / "fresh", progress=False)  # the loss of the data as they are now
    assert read_sweep(tmp_path / "out")["loss"].iloc[-1] == read_sweep(tmp_path / "fresh")["loss"].iloc[-1]
    assert fresh.ran == 1


@pytest.mark.parametrize(
    ("write", "match"),
    [
        (
            lambda p: p.write_text("hello"),
            r"v '.*head.npy' is not a .npy array \(it does not start with the .npy header",
        ),
        (lambda p: save_npz(p, {"v": np.ones(6)}), r"v '.*head.npy' is an .npz archive of named arrays"),
        (lambda p: np.save(p, np.array(["1"] * 6)), r"v holds text"),
    ],
)
def test_an_unreadable_head_file_is_refused_naming_v(tmp_path, write, match):
    # numpy.load's own error escaped as a traceback (exit status 1), and an .npz named .npy gave an open archive
    _own_file(tmp_path / "mine.npz", 0)
    write(tmp_path / "head.npy")
    with pytest.raises(ValidationError, match=match):
        BatchedTrain().check({"data": str(tmp_path / "mine.npz"), "v": str(tmp_path / "head.npy")})


def test_the_input_files_of_a_run_are_its_data_file_and_its_heads_file():
    task = BatchedTrain()
    assert task.inputs({"data": "set.npz", "v": "head.npy"}) == [Path("set.npz"), Path("head.npy")]
    assert task.inputs({"data": "set.npz", "v": "v2"}) == [Path("set.npz")]  # v2: a key of the data file
    assert task.inputs({"data": "example1"}) == []  # generated: its parameters are its data
