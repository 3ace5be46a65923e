"""run_sweep: results store layout, index, failures recorded without stopping the sweep, resume skips finished runs."""

import json

import pandas as pd
import pytest
from sweep_fixtures import Explodes, ToyTrain

from attnlab._validation import ValidationError
from attnlab.runner import register_task
from attnlab.runner.results import INDEX_COLUMNS, read_index
from attnlab.runner.spec import SweepSpec, expand
from attnlab.runner.sweep import run_sweep

register_task(ToyTrain())
register_task(Explodes())
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


def test_read_index_trusts_the_run_directories_over_a_stale_index(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    next((tmp_path / "runs").glob("*/record.json")).unlink()
    assert sorted(read_index(tmp_path)["status"]) == ["done"] * 5 + ["pending"]


def test_bad_parameters_are_refused_before_anything_runs(tmp_path):
    spec = SweepSpec(task="toy-train", base={"d": 3, "steps": 5, "seed": 0}, grid={"lr": [0.1, -1.0]})
    with pytest.raises(ValidationError, match="lr == -1.0, must be > 0"):
        run_sweep(spec, tmp_path, progress=False)
    assert not (tmp_path / "runs").exists()


def test_read_index_needs_a_sweep_folder(tmp_path):
    with pytest.raises(ValidationError, match="holds no index.parquet"):
        read_index(tmp_path)
