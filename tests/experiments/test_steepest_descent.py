"""steepest-descent.norms runs in its --quick form and its theory check passes (every saved figure is held to the
house style by conftest.py); its config validates its keys."""

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.steepest_descent import SteepestDescentConfig
from attnlab.verify import make_config


def test_quick_run_writes_outputs_and_passes_its_check(tmp_path):
    record = run_experiment("steepest-descent.norms", quick=True, out=tmp_path, progress=False)
    checks = record.checks
    failed = checks[~checks["passed"] & (checks["kind"] == "theory")]  # the Adam row is a remark of ours
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    assert list(checks["kind"]) == ["theory", "exploration"]  # no paper's observation: counted apart
    assert checks["result"].iloc[0] == "001:Ext-SD"
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert {"rule", "svm", "run", "step", "one_minus_cos"} <= set(frame.columns)
    assert set(frame["rule"]) == {"sd:1.5", "sd:2", "sd:3", "sign", "adam-noeps"}
    assert set(frame["svm"]) == {"l1.5", "l2", "l3", "linf"}
    assert list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.pdf"))  # quick: PNG only


def test_config_refuses_bad_values_by_name():
    with pytest.raises(ValidationError, match="seeds"):
        make_config(get_experiment("steepest-descent.norms"), ["seeds=1"])
    with pytest.raises(ValidationError, match="lr"):
        SteepestDescentConfig(lr=0.0)
