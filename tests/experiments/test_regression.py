"""The --quick variants of the regression experiments run, write their outputs, and pass their checks."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, make_config, run_experiment


@pytest.mark.parametrize("name", ["regression.fig1", "regression.fig2", "regression.theory"])
def test_quick_experiment_runs_and_its_checks_pass(tmp_path, name):
    record = run_experiment(name, quick=True, out=tmp_path, progress=False)
    failed = record.checks[~record.checks.passed & (record.checks.kind == "theory")]  # observations may disagree
    assert failed.empty, failed.to_string()
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert frame.select_dtypes("number").notna().all().all()  # never NaN rows, even when a run blew up
    assert json.loads((tmp_path / "record.json").read_text())["defaults_ours"]
    assert list(tmp_path.glob("*.png"))


def test_figure_records_the_reference_numbers_side_by_side(tmp_path):
    run_experiment("regression.fig1", ["steps=20", "n=500", "seeds=1", "batch_size=64"], out=tmp_path, progress=False)
    table = pd.read_parquet(tmp_path / "reference.parquet")
    assert {"gap_median", "reference_gap"} <= set(table.columns)
    assert table[(table.method == "ours") & (table.step == 0)].reference_gap.item() == 5.2e-5  # spec §9.3


def test_blow_up_in_a_figure_run_is_a_clean_stop_with_a_note(tmp_path):
    """spec §9.3: the regularizer alone from an N(0, 1) start blows up at a large step; no NaN reaches the outputs."""
    run_experiment(
        "regression.fig2",
        ["steps=30", "n=500", "seeds=2", "batch_size=64", "lr=0.05", "methods=reg_only"],
        out=tmp_path,
        progress=False,
    )
    notes = json.loads((tmp_path / "record.json").read_text())["notes"]
    assert any("blew up" in note for note in notes)
    assert pd.read_parquet(tmp_path / "trajectory.parquet").gap.notna().all()


def test_bad_config_is_refused():
    with pytest.raises(ValidationError, match="k == 2 < d == 4"):
        make_config(get_experiment("regression.fig1"), ["k=2"])
    with pytest.raises(ValidationError, match="methods"):
        make_config(get_experiment("regression.fig2"), ["methods=newton"])


@pytest.mark.slow
def test_quick_scaling_experiment_runs_and_its_checks_pass(tmp_path):
    record = run_experiment("regression.scaling", quick=True, out=tmp_path, progress=False)
    assert record.checks.passed.all(), record.checks.to_string()


def test_bias_expansion_recovers_the_coefficients_of_c_over_n():
    """Weighted least squares on exact data c/n + c2/n^2 returns c, and chi^2 = 0 (numpy's lstsq as the truth)."""
    from attnlab.experiments.regression import _bias_expansion

    ns = np.array([25.0, 50.0, 100.0, 200.0])
    c, c_se, chi2, dof = _bias_expansion(ns, 2.0 / ns - 5.0 / ns**2, np.full(4, 1e-3))
    assert c == pytest.approx(2.0, rel=1e-9) and chi2 == pytest.approx(0.0, abs=1e-12) and dof == 2
    _, _, chi2_slow, _ = _bias_expansion(ns, 0.3 / np.sqrt(ns), np.full(4, 1e-4))  # a slower term does not fit
    assert chi2_slow > 100
