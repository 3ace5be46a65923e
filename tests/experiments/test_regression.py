"""The --quick variants of the regression experiments run, write their outputs, and pass their checks."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.regression.common import theory_problem, weighted_log_slope
from attnlab.experiments.regression.finite_context import _squared_bias, bias_expansion, profile_exponent
from attnlab.experiments.regression.floor import floor_rows
from attnlab.experiments.regression.geometry import whitened_hessian_spectrum
from attnlab.experiments.regression.training import training_rows
from attnlab.verify import RunContext, make_config


@pytest.mark.parametrize("name", ["regression.fig1", "regression.fig2", "regression.theory"])
def test_quick_experiment_runs_and_its_checks_pass(tmp_path, name):
    record = run_experiment(name, quick=True, out=tmp_path, progress=False)
    failed = record.checks[~record.checks.passed & (record.checks.kind == "theory")]  # observations may disagree
    assert failed.empty, failed.to_string()
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert frame.select_dtypes("number").notna().all().all()  # never NaN rows, even when a run blew up
    assert json.loads((tmp_path / "record.json").read_text())["defaults_ours"]
    assert list(tmp_path.glob("*.png"))
    if name == "regression.fig2":  # every method starts from the same random point (spec §6.5), a property of our code
        assert (frame[frame.step == 0].groupby("run").gap.nunique() == 1).all()


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
    assert record.checks[record.checks.kind != "observation"].passed.all(), record.checks.to_string()


def test_bias_expansion_recovers_the_coefficients_of_c_over_n():
    """Weighted least squares on exact data c/n + c2/n^2 returns c, and chi^2 = 0 (numpy's lstsq as the truth)."""
    ns = np.array([25.0, 50.0, 100.0, 200.0])
    c, c_se, chi2, dof = bias_expansion(ns, 2.0 / ns - 5.0 / ns**2, np.full(4, 1e-3))
    assert c == pytest.approx(2.0, rel=1e-9) and chi2 == pytest.approx(0.0, abs=1e-12) and dof == 2
    _, _, chi2_slow, _ = bias_expansion(ns, 0.3 / np.sqrt(ns), np.full(4, 1e-4))  # a slower term does not fit
    assert chi2_slow > 100
    _, _, chi2_offset, _ = bias_expansion(ns, 2.0 / ns + 0.01, np.full(4, 1e-3))  # nor does a constant offset
    assert chi2_offset > 13.8  # above the 99.9% quantile of chi^2 with 2 dof: the row would fail


def test_profile_exponent_finds_the_leading_exponent_under_a_next_order_term():
    """Exact data n^-s (c + c2/n): the profile fit returns s to the grid's resolution, chi^2 ~ 0."""
    ns = np.array([25.0, 50.0, 100.0, 200.0, 400.0])
    for s in (0.5, 1.0, 1.7):
        found, half_width, chi2 = profile_exponent(ns, ns**-s * (3.0 - 20.0 / ns), np.full(5, 1e-6) * ns**-s)
        assert found == pytest.approx(s, abs=1e-3) and chi2 < 1e-3 and half_width < 0.01


def test_weighted_log_slope_is_exact_on_a_power_law_and_carries_the_spread():
    ns = [10.0, 100.0, 1000.0]
    slope, se = weighted_log_slope(ns, [2 * n**-1.5 for n in ns], [0.1 * 2 * n**-1.5 for n in ns])
    assert slope == pytest.approx(-1.5, rel=1e-12)
    # relative SEs of 0.1 on three points one decade apart: SE^2 = 0.01 / sum (log x - mean)^2 = 0.01 / (2 ln(10)^2)
    assert se == pytest.approx(0.1 / (np.sqrt(2) * np.log(10)), rel=1e-12)
    assert np.isnan(weighted_log_slope(ns, [1.0, -1.0, 1.0], [0.1] * 3)[0])  # a sign change has no slope


def test_squared_bias_is_debiased_by_the_sampling_noise():
    """The mean of ||g_bar||^2 - tr Cov / S over repetitions is ||E g||^2 (here 0.25, with unit noise, S = 50)."""
    gen = torch.Generator().manual_seed(0)
    values = [_squared_bias(0.5 + torch.randn(50, 1, generator=gen, dtype=torch.float64))[0] for _ in range(2000)]
    assert np.mean(values) == pytest.approx(0.25, abs=0.01)  # the plain ||g_bar||^2 would average 0.27


def test_a_diverging_run_gives_failing_rows_with_the_reason(tmp_path):
    """A step far too large: the population run and the floor runs blow up; rows fail and say why (no traceback)."""
    config = make_config(get_experiment("regression.theory"), ["lr=40.0", "steps=20"], quick=True)
    problem = theory_problem(config.d, config.k, config.noise_std, config.singular_values, config.problem_seed)
    spectrum = whitened_hessian_spectrum(problem, config.mu, config.seed)
    ctx = RunContext(out=tmp_path, progress=False, quick=True)
    rows, _ = training_rows(config, problem, spectrum, ctx)
    assert rows and not any(row.passed for row in rows)
    assert all("diverged at step" in str(row.measured) for row in rows)
    floors = pd.DataFrame({"n": [25, 25, 50, 50], "batches": [4, 8, 4, 8], "run": 0, "floor": np.nan})
    floor_checks, _, slope = floor_rows(floors, 8, (25, 50))
    theory_rows = [row for row in floor_checks if row.kind == "theory"]
    assert theory_rows and not any(row.passed for row in theory_rows)
    assert all("diverged" in str(row.measured) for row in theory_rows) and np.isnan(slope)
