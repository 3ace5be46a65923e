"""examples/05_sweep.py runs and reads back its sweep; every examples/sweeps/*.yaml is a valid sweep."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import attnlab.report  # noqa: F401  (registers the "experiment" task that fig2_seeds.yaml uses)
from attnlab.runner import expand, get_task, load_sweep, read_sweep

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("path", sorted((EXAMPLES / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_sweep_file_expands_and_passes_its_tasks_checks(path):
    jobs = expand(load_sweep(path))
    assert jobs
    for job in jobs:
        get_task(job.task).check(job.params)  # what `attnlab sweep` does before any run starts


def test_the_sweep_example_runs_and_its_table_is_every_runs_rows(tmp_path):
    out = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "05_sweep.py"), "--small", "--out", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "small mode:" in done.stdout and "\n18 runs in" in done.stdout  # 2 optimizers x 3 lr x 3 data seeds
    frame = read_sweep(out)
    # independent of read_sweep: each run directory's own record and trajectory
    for run_dir in (out / "runs").iterdir():
        params = json.loads((run_dir / "record.json").read_text())["params"]
        rows = frame[
            (frame["optimizer"] == params["optimizer"])
            & (frame["lr"] == params["lr"])
            & (frame["data_seed"] == params["data_seed"])
        ]
        own = pd.read_parquet(run_dir / "trajectory.parquet")
        assert rows["loss"].tolist() == own["loss"].tolist()
    # NGD takes steps of length lr from W = 0, so ||W_t|| <= lr * t (triangle inequality); 1e-12 for rounding
    ngd = frame[frame["optimizer"] == "ngd"]
    assert (ngd["norm"] <= ngd["lr"] * ngd["step"] + 1e-12).all()
    assert (ngd["norm"] >= 0.9 * ngd["lr"] * ngd["step"]).all()  # and nearly that: the gradient keeps its direction
