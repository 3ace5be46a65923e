"""multi-token.equivalence runs in its --quick form, passes its theory checks and writes its tables."""

import pandas as pd
import pytest

from attnlab.experiments import run_experiment


def test_quick_run_passes_its_checks_and_counts_every_draw(tmp_path):
    record = run_experiment("multi-token.equivalence", quick=True, out=tmp_path, progress=False)
    failed = record.checks[~record.checks["passed"] & (record.checks["kind"] == "theory")]
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    acceptance = pd.read_parquet(tmp_path / "acceptance.parquet")
    rejected = acceptance.filter(like="rejected").sum(axis=1)
    assert (acceptance["kept"] + rejected == acceptance["draws"]).all()  # every draw kept or rejected once
    assert (acceptance["kept"] == 10).all()
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert {"alignment_eq", "alignment_mm", "alignment_one"} <= set(frame.columns)
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    # singleton sets: the equivalence direction is the one-token SVM, so their gaps agree
    single = runs[~runs["multi_token"]]
    assert ((single["gap_eq"] - single["gap_one"]).abs() <= 1e-6).all()
    assert list(tmp_path.glob("*.png"))


def test_the_width_trend_is_the_figures_mean_judged_within_three_standard_errors():
    """multi-token §6: the mean over runs (the source's statistic, not the median), d_min against d_max."""
    from attnlab.experiments.multi_token import _width_trend

    falling = _width_trend({4: [0.10, 0.12, 0.08, 0.10], 10: [0.010, 0.012, 0.008, 0.010]})
    assert falling.verdict == "agrees" and falling.measured == pytest.approx(0.09)
    rising = _width_trend({4: [0.010, 0.012, 0.008, 0.010], 6: [0.5, 0.5], 10: [0.10, 0.12, 0.08, 0.10]})
    assert rising.verdict == "disagrees"  # only the ends count: d=6 in between does not
    # the median falls (0.01 < 0.02) but one run at d=10 lifts the mean above d=4's: the figure's mean decides
    skewed = _width_trend({4: [0.02, 0.02, 0.02, 0.02, 0.02], 10: [0.01, 0.01, 0.01, 0.01, 0.9]})
    assert skewed.measured < 0 and skewed.verdict == "inconclusive"  # one outlier: a wide spread, nothing resolved
    close = _width_trend({4: [0.10, 0.20, 0.15], 10: [0.12, 0.18, 0.14]})
    assert close.verdict == "inconclusive" and not close.passed
