"""read_sweep: the rows of every finished run, each beside the parameters that produced it."""

import json

import numpy as np
import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.runner import SweepSpec, Task, read_index, read_sweep, register_task, run_sweep, write_json, write_parquet
from attnlab.runner.read import IncompleteSweepWarning, flatten_params


class _Rows(Task):
    """Writes a trajectory whose loss encodes (lr, seed), a 'seed' column of its own, and a second table."""

    name = "read-rows"

    def run(self, params, run_dir):
        if params.get("fail"):
            raise RuntimeError("asked to fail")
        steps = np.arange(3)
        seed_column = params["seed"] + params.get("seed_offset", 0)  # the task's own seed, maybe not the param's
        write_parquet(
            run_dir / "trajectory.parquet",
            pd.DataFrame(
                {"step": steps, "loss": params["lr"] * 100 + params["seed"] + steps / 10, "seed": seed_column}
            ),
        )
        write_parquet(run_dir / "final.parquet", pd.DataFrame({"norm": [params["lr"]]}))
        write_json(run_dir / "record.json", {"params": params})
        return {}


register_task(_Rows())


def _sweep(tmp_path, **extra):
    raw = {
        "task": "read-rows",
        "base": {"data_args": {"rho": 2.0}, "radii": [1, 2], **extra},
        "grid": {"lr": [0.1, 0.2], "seed": [0, 1]},
    }
    run_sweep(SweepSpec.from_mapping(raw), tmp_path, progress=False)
    return tmp_path


def test_each_runs_rows_carry_its_own_parameters(tmp_path):
    frame = read_sweep(_sweep(tmp_path))
    assert len(frame) == 4 * 3
    assert list(frame.columns) == ["run_key", "data_args.rho", "lr", "radii", "step", "loss", "seed"]
    # the independent truth: each run directory's own table and its recorded params
    for run_dir in (tmp_path / "runs").iterdir():
        params = json.loads((run_dir / "record.json").read_text())["params"]
        key = run_dir.name.rsplit("-", 1)[1]
        mine = frame[frame["run_key"] == key]
        pd.testing.assert_frame_equal(
            mine[["step", "loss", "seed"]].reset_index(drop=True), pd.read_parquet(run_dir / "trajectory.parquet")
        )
        assert (mine["lr"] == params["lr"]).all() and (mine["data_args.rho"] == 2.0).all()
        assert all(r == (1, 2) for r in mine["radii"])
    # tidy: group by a parameter directly
    means = frame[frame["step"] == 0].groupby("lr")["loss"].mean()
    np.testing.assert_allclose(means.to_numpy(), [10.5, 20.5], rtol=1e-12)  # lr*100 + mean seed 0.5; float rounding


def test_a_parameter_that_disagrees_with_the_tasks_column_keeps_both(tmp_path):
    frame = read_sweep(_sweep(tmp_path, seed_offset=10))
    assert "params.seed" in frame and "seed" in frame and "seed_offset" in frame
    assert ((frame["seed"] - frame["params.seed"]) == 10).all()


def test_another_table_and_failed_runs_left_out(tmp_path):
    raw = {"task": "read-rows", "grid": {"lr": [0.1, 0.2, 0.3], "seed": [0]}, "list": [{"fail": False}, {"fail": True}]}
    run_sweep(SweepSpec.from_mapping(raw), tmp_path / "half", progress=False)
    assert sorted(read_index(tmp_path / "half")["status"]) == ["done"] * 3 + ["failed"] * 3
    with pytest.warns(IncompleteSweepWarning, match=r"read 3 of 6 runs .* leaving out 3 failed: runs/read-rows-"):
        final = read_sweep(tmp_path / "half", table="final")
    assert final.sort_values("lr")["norm"].tolist() == [0.1, 0.2, 0.3] and not final["fail"].any()
    left_out = final.attrs["left_out"]
    assert [row["status"] for row in left_out] == ["failed"] * 3 and "asked to fail" in left_out[0]["error"]
    run_sweep(SweepSpec.from_mapping({**raw, "list": [{"fail": True}]}), tmp_path / "none", progress=False)
    with pytest.raises(ValidationError, match=r"\(3 runs, none done: 3 failed\); run `attnlab sweep` to finish"):
        read_sweep(tmp_path / "none")


def test_errors_name_the_missing_table_or_folder(tmp_path):
    _sweep(tmp_path)
    with pytest.raises(ValidationError, match=r"has no table 'nope'; its tables are \['final', 'trajectory'\]"):
        read_sweep(tmp_path, table="nope")
    with pytest.raises(ValidationError, match="holds no index.parquet"):
        read_sweep(tmp_path / "runs")


def test_flatten_params_nests_with_dots_and_freezes_lists():
    flat = flatten_params({"a": {"b": {"c": 1}, "d": [1, [2, 3]]}, "e": "x"})
    assert flat == {"a.b.c": 1, "a.d": (1, (2, 3)), "e": "x"}
    assert hash(flat["a.d"])  # groupby needs hashable values
