"""Each mirror-descent experiment runs in its --quick form and its theory checks pass; configs validate their keys."""

from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import unit_gaussian
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.mirror_descent import BoundsConfig, ConeConfig, E1Config, E2Config, GrowthConfig, RegPathConfig
from attnlab.experiments.mirror_descent.common import neighbours, still_decreasing
from attnlab.experiments.mirror_descent.regpath import _cross_check, _risk, _solve
from attnlab.metrics import entrywise_norm
from attnlab.models.functional import token_scores
from attnlab.svm import SelectionSVMs, constrained_erm, constrained_stationarity, log_excess_risk_and_gradient
from attnlab.verify import make_config

NAMES = [
    "mirror-descent.bounds",
    "mirror-descent.cone",
    "mirror-descent.e1",
    "mirror-descent.e2",
    "mirror-descent.e3",
    "mirror-descent.growth",
    "mirror-descent.regpath",
]


@pytest.mark.parametrize("name", NAMES)
def test_quick_run_writes_outputs_and_passes_its_checks(name, tmp_path):
    record = run_experiment(name, quick=True, out=tmp_path, progress=False)
    failed = record.checks[~record.checks["passed"] & (record.checks["kind"] == "theory")]  # observations may disagree
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    assert len(record.checks) >= 3
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    expected = {"regpath": {"run", "radius", "q", "bregman"}, "bounds": {"scale", "violation", "gradient_ratio"}}
    expected["cone"] = {"radius", "noise", "bregman", "correlation", "slack", "adversarial"}
    assert expected.get(name.split(".")[1], {"run", "step"}) <= set(frame.columns)
    assert list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.pdf"))  # quick: PNG only
    if name == "mirror-descent.e1":
        grid = pd.read_parquet(tmp_path / "grid.parquet")
        assert len(grid) == 9  # 3 iterate exponents p x 3 SVM exponents q
        assert set(grid["q"]) == set(grid["p"]) == {1.75, 2.0, 3.0}
        metrics = pd.read_parquet(tmp_path / "metrics.parquet")
        assert set(metrics["locally_optimal"].unique()) <= {0.0, 1.0}
        claims = record.checks["claim"]
        current = claims[record.checks["kind"] != "revision"]  # a resized property shows its old row once
        # the theorem's hypothesis is checked per p, and the claims name the share they are tested on
        assert current.str.contains("convergence's hypothesis (the final", regex=False).sum() == 3
        computed = claims[record.checks["verdict"] != "recorded"]  # a recorded revision shows its claim's template
        assert computed[computed.str.startswith("selectivity")].str.contains("locally optimal").all()
        near = pd.read_parquet(tmp_path / "neighbours.parquet")  # selectivity's SVMs of p +- 0.1, the last step
        pairs = {(1.75, 1.65), (1.75, 1.85), (2.0, 1.9), (2.0, 2.1), (3.0, 2.9), (3.0, 3.1)}
        assert set(zip(near["p"], near["q"])) == pairs and len(near) == 6 * 24
    if name == "mirror-descent.e2":  # closest-own-svm reads the SVMs of p +- 0.1 beside the grid's
        closest = record.checks[record.checks["claim_id"] == "closest-own-svm"]["measured"]
        assert "q=1.65" in closest.iloc[0] and "q=3.1" in closest.iloc[-1]


def test_neighbours_are_the_svm_exponents_p_plus_minus_delta_above_one():
    assert neighbours(1.75, 0.1) == [1.65, 1.85] and neighbours(3.0, 0.1) == [2.9, 3.1]
    assert neighbours(1.05, 0.1) == [1.15]  # no l_q-AttSVM for q <= 1


def test_unknown_set_key_lists_the_valid_keys():
    with pytest.raises(ValidationError, match=r"unknown key 'p'.*keys: n, T, d, ps, epochs, lr"):
        make_config(get_experiment("mirror-descent.e1"), ["p=2"])


def test_configs_refuse_bad_values_by_name():
    with pytest.raises(ValidationError, match="epochs"):
        E1Config(epochs=(10, 10))
    with pytest.raises(ValidationError, match="ps"):
        E1Config(ps=(1.0, 2.0, 3.0))
    with pytest.raises(ValidationError, match="rate_datasets"):
        E1Config(datasets=2, rate_datasets=3)
    with pytest.raises(ValidationError, match="arrows"):
        E2Config(arrows=(1, 2, 3))
    with pytest.raises(ValidationError, match="arrows"):
        E2Config(epochs=(100, 100, 100))  # the default arrows lie beyond 100 steps
    with pytest.raises(ValidationError, match="radii must be >= 3 positive, finite, strictly increasing"):
        RegPathConfig(radii=(1.0, 4.0, 2.0))
    with pytest.raises(ValidationError, match="cross_check"):
        RegPathConfig(radii=(1.0, 2.0, 4.0), cross_check=3)
    with pytest.raises(ValidationError, match=r"steps == 50, must be >= 100"):
        GrowthConfig(steps=50)
    with pytest.raises(ValidationError, match="lrs must be a non-empty tuple of positive step sizes"):
        GrowthConfig(lrs=(1.0, -10.0))
    with pytest.raises(ValidationError, match="distances must be >= 2 increasing sizes"):
        BoundsConfig(distances=(0.1, 0.01))
    with pytest.raises(ValidationError, match=r"scales must be norms in \(0, 100\]"):
        BoundsConfig(scales=(1.0, 1e3))
    with pytest.raises(ValidationError, match="radii must be >= 2 positive, increasing values"):
        ConeConfig(radii=(8.0,))


def test_every_row_of_the_quick_runs_is_declared_and_e3_claims_no_theorem(tmp_path):
    """E3's rows are observations: the paper's joint results are for the regularisation path, not these iterates."""
    record = run_experiment("mirror-descent.e3", quick=True, out=tmp_path, progress=False)
    assert set(record.checks["kind"]) == {"observation"}
    assert record.checks["result"].str.startswith("002:").all()


def test_growth_runs_every_step_size_on_every_data_set_and_recomputes_the_old_reading(tmp_path):
    """Lemma 30's old reading (log k against a power at lr 100) is recomputed beside the lower-bound row."""
    record = run_experiment("mirror-descent.growth", {"steps": 300, "lrs": (10.0, 100.0), "ps": (2.0,)}, out=tmp_path)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert sorted(frame["lr"].unique()) == [10.0, 100.0] and frame["dataset"].nunique() == 2
    assert set(frame.groupby("run")["step"].max()) == {300}  # every step of every run is kept
    revisions = record.checks[record.checks["kind"] == "revision"]
    recomputed = revisions[revisions["verdict"] != "recorded"]
    assert list(recomputed["claim_id"]) == ["lem30-norm-growth#rev1"]
    assert "log-fit RMS" in recomputed["measured"].iloc[0]
    recorded = {"lem30-norm-growth#rev2", "lem24-monotone-loss#rev1", "lem27-correlation-increment#rev1"}
    recorded |= {"lem28-cone-invariance#rev1", "lem29-direction#rev1"}  # 2026-11-29: texts say what they cannot tell
    assert set(revisions.loc[revisions["verdict"] == "recorded", "claim_id"]) == recorded


def test_the_plateau_of_a_dB_curve_reads_as_a_plateau():
    """A curve that falls by 1e-9 of its value over [K/4, K] is a plateau (inconclusive), not a decrease."""
    steps = np.arange(0, 101)
    settled = 0.0023 + 0.5 * np.exp(-steps / 3.0) + 1e-12 * (100 - steps)  # settles at 0.0023 by k = 25
    row = still_decreasing("the E3 fig.: dB still decreasing", steps, settled, "fig.", result="002:Fig-E3")
    assert row.verdict == "inconclusive" and "(a plateau)" in row.measured
    falling = 1.0 / np.log(np.e + steps)  # a poly-log decay keeps falling
    assert still_decreasing("fig.", steps, falling, "fig.", result="002:Fig-E3").verdict == "agrees"
    rising = 0.01 + 1e-4 * steps
    assert still_decreasing("fig.", steps, rising, "fig.", result="002:Fig-E3").verdict == "disagrees"


def test_growth_rows_fail_with_the_step_where_every_run_stopped():
    """All runs of a p diverging before K (a wrong mechanism can do it) fail every row instead of crashing it."""
    from attnlab.experiments.mirror_descent.growth import _checks

    config = GrowthConfig(steps=300, lrs=(10.0,), ps=(3.0,))
    steps = np.repeat(np.arange(7), 2)
    rows = pd.DataFrame({"run": np.tile([0, 1], 7), "step": steps, "diverged": True, "p": 3.0})
    checks = _checks(config, 3.0, rows)
    assert len(checks) == 6 and not any(c.passed for c in checks)
    assert all("stopped at step 6 of 300: diverged runs [0, 1]" in c.measured for c in checks)


def test_regpath_solves_again_from_the_svm_ray_when_the_warm_start_sits_on_a_plateau():
    """At first_seed 4 the path from 0 at R = 8 ||W^mm||_2 stops where another token's attention has saturated; the
    ray's solve is lower and stationary. At first_seed 1 the path's own solve is kept (the same object back)."""
    risks = {}
    for seed in (4, 1):
        data = unit_gaussian(6, 8, 10, seed=seed)
        select = token_scores(data.X, data.y, data.v).argmax(dim=-1)
        ray = 8.0 * SelectionSVMs([data]).directions(select[None], 2.0)[0]
        R = float(entrywise_norm(ray, 2.0))
        start = torch.zeros(10, 10, dtype=torch.float64)
        W, used = _solve(partial(constrained_erm, data, 2.0, R, select=select), _risk(data), start, ray)
        risks[seed] = (used is ray, log_excess_risk_and_gradient(data, W, select)[0])
        assert constrained_stationarity(data, 2.0, W, select) < 1e-10
    assert risks[4][0] and risks[4][1] < -8.0  # the plateau's log excess risk is -4.3
    assert not risks[1][0]


def test_regpath_mirror_descent_takes_the_path_solves_restart_rule():
    """At first_seed 6, p = 3, R = 8 ||W^mm||_3 (the quick cross-check) SLSQP from 0 reaches W_R, but MD from 0 at
    step scale 0.3 stops at another minimiser on the sphere (log excess risk -8.02 against -9.07): from the start
    alone the solvers disagree by 7.2; with the restart from the SVM ray they agree. At first_seed 1 MD keeps its
    own run (no restart, the same distance both ways)."""
    config = RegPathConfig(**{"datasets": 1, "radii": (8.0, 16.0, 32.0), "cross_check": 0, "md_steps": 1000})
    found = {}
    for seed in (6, 1):
        data = unit_gaussian(6, 8, 10, seed=seed)
        select = token_scores(data.X, data.y, data.v).argmax(dim=-1)
        W_mm = SelectionSVMs([data]).directions(select[None], 3.0)[0]
        R = 8.0 * float(entrywise_norm(W_mm, 3.0))
        start = torch.zeros(10, 10, dtype=torch.float64)
        W, used = _solve(partial(constrained_erm, data, 3.0, R, select=select), _risk(data), start, 8.0 * W_mm)
        found[seed] = _cross_check(config, data, 3.0, R, (W, used, 8.0 * W_mm), _risk(data), W_mm)
    assert found[6]["md_restart"] and found[6]["solvers_from_start"] > 1.0 and found[6]["solvers"] < 1e-4
    assert not found[1]["md_restart"] and found[1]["solvers"] == found[1]["solvers_from_start"] < 1e-4
