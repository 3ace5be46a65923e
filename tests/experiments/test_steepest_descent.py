"""steepest-descent.norms runs in its --quick form and its theory check passes (every saved figure is held to the
house style by conftest.py); its config validates its keys."""

import math

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.steepest_descent import SteepestDescentConfig, _neighbours
from attnlab.verify import make_config


def test_quick_run_writes_outputs_and_passes_its_check(tmp_path):
    record = run_experiment("steepest-descent.norms", quick=True, out=tmp_path, progress=False)
    checks = record.checks
    failed = checks[~checks["passed"] & (checks["kind"] == "theory")]  # the Adam row is a remark of ours
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    assert list(checks["kind"]) == ["theory", "revision", "exploration"]  # no paper's observation: counted apart
    assert checks["result"].iloc[0] == "001:Ext-SD"
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert {"rule", "svm", "run", "step", "one_minus_cos"} <= set(frame.columns)
    assert set(frame["rule"]) == {"sd:1.5", "sd:2", "sd:3", "sign", "adam-noeps"}
    grid, neighbours = {"l1.5", "l2", "l3", "linf"}, {"l1.526", "l1.476", "l2.111", "l1.909", "l3.5", "l2.667"}
    assert set(frame["svm"]) == grid | neighbours  # q +- 0.1 around each finite p: 29/19, 31/21, 19/9, 21/11, 7/2, 8/3
    assert list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.pdf"))  # quick: PNG only


def test_config_refuses_bad_values_by_name():
    with pytest.raises(ValidationError, match="seeds"):
        make_config(get_experiment("steepest-descent.norms"), ["seeds=1"])
    with pytest.raises(ValidationError, match="lr"):
        SteepestDescentConfig(lr=0.0)


def test_neighbours_are_the_norms_of_dual_exponent_q_plus_minus_delta():
    for p in (1.5, 2.0, 3.0):
        q = p / (p - 1.0)
        low, high = _neighbours(p, 0.1)
        assert low / (low - 1.0) == pytest.approx(q - 0.1) and high / (high - 1.0) == pytest.approx(q + 0.1)
    assert _neighbours(math.inf, 0.1) == []  # sign descent: compared with the grid only
