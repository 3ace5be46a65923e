"""thm2-rate's statistic: each run's per-step contraction over the later half of its window, within twice its drift
across that span, against exact decays whose rate is known (regression.theory, Theorem 2 linearised at M)."""

import numpy as np
import pandas as pd
import pytest

from attnlab.experiments.regression.training import _rate_row

NORMAL = np.array([0.3, 0.4, 1.0])


def _frame(*runs):
    """Records every 5 steps of dist = sqrt(sum_i (c_i rho_i^t)^2), one run per list of (c_i, rho_i)."""
    steps = np.arange(0, 301, 5)
    parts = [
        pd.DataFrame({"run": run, "step": steps, "dist": np.sqrt(sum((c * rho**steps) ** 2 for c, rho in modes))})
        for run, modes in enumerate(runs)
    ]
    return pd.concat(parts, ignore_index=True)


def test_a_single_mode_gives_its_rate_to_round_off():
    row = _rate_row(_frame([(0.05, 0.85)], [(0.02, 0.85)]), 0.85, NORMAL)
    assert row.passed and row.measured == pytest.approx(0.85, abs=1e-12)


@pytest.mark.parametrize("weight", [1.0, 5.0, 20.0])
def test_a_faster_mode_left_in_the_window_pulls_the_rate_less_than_its_drift(weight):
    """Our quick run's mix: the slowest normal mode 0.85 with the next one 0.80 (eta = 0.5, lambda = 0.3, 0.4)."""
    frame = _frame([(0.01, 0.85), (0.01 * weight, 0.80)])
    row = _rate_row(frame, 0.85, NORMAL)
    assert row.passed, (row.measured, row.tolerance)
    assert row.measured < 0.85  # the faster mode pulls the fitted rate down, by less than the tolerance


@pytest.mark.parametrize("rate", [0.8425, 0.855, 0.8636])
def test_a_rate_off_by_half_a_percent_or_more_fails(rate):
    row = _rate_row(_frame([(0.05, rate), (0.05, 0.80)], [(0.03, rate)]), 0.85, NORMAL)
    assert not row.passed and row.margin < 0
