"""Each mirror-descent experiment runs in its --quick form and its theory checks pass; configs validate their keys."""

import math

import pandas as pd
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import unit_gaussian
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.mirror_descent import E1Config, E2Config, GrowthConfig, RegPathConfig
from attnlab.experiments.mirror_descent.regpath import log_excess_risk, projected_md, solve_constrained, stationarity
from attnlab.losses import mean_loss
from attnlab.metrics import directional_bregman, entrywise_norm
from attnlab.models.functional import margins, token_scores
from attnlab.verify import make_config

NAMES = [
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
    assert ({"run", "radius", "q", "bregman"} if name.endswith("regpath") else {"run", "step"}) <= set(frame.columns)
    assert list(tmp_path.glob("*.png")) and list(tmp_path.glob("*.pdf"))
    if name == "mirror-descent.e1":
        grid = pd.read_parquet(tmp_path / "grid.parquet")
        assert len(grid) == 9  # 3 iterate exponents p x 3 SVM exponents q
        assert set(grid["q"]) == set(grid["p"]) == {1.75, 2.0, 3.0}
        metrics = pd.read_parquet(tmp_path / "metrics.parquet")
        assert set(metrics["locally_optimal"].unique()) <= {0.0, 1.0}
        claims = record.checks["claim"]
        # the theorem's hypothesis is checked per p, and the claims name the share they are tested on
        assert claims.str.contains("Lemma 28's hypothesis (the final", regex=False).sum() == 3
        assert claims[claims.str.startswith("selectivity")].str.contains("locally optimal").all()


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
    with pytest.raises(ValidationError, match="radii must be >= 3 positive, strictly increasing"):
        RegPathConfig(radii=(1.0, 4.0, 2.0))
    with pytest.raises(ValidationError, match="cross_check"):
        RegPathConfig(radii=(1.0, 2.0, 4.0), cross_check=3)
    with pytest.raises(ValidationError, match=r"steps == 50, must be >= 100"):
        GrowthConfig(steps=50)


def test_every_row_of_the_quick_runs_is_declared_and_e3_claims_no_theorem(tmp_path):
    """E3's rows are observations: the paper's joint results are for the regularisation path, not these iterates."""
    record = run_experiment("mirror-descent.e3", quick=True, out=tmp_path, progress=False)
    assert set(record.checks["kind"]) == {"observation"}
    assert record.checks["result"].str.startswith("002:").all()


def _seed_one():
    data = unit_gaussian(seed=1)
    return data, token_scores(data.X, data.y, data.v).argmax(dim=-1)


def test_log_excess_risk_is_the_risk_above_its_infimum_with_the_gradient_of_finite_differences():
    """Against the library's risk (where L - L_opt is far above rounding) and central differences."""
    data, select = _seed_one()
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(10, 10, generator=gen, dtype=torch.float64)
    value, grad = log_excess_risk(data, W, select)
    gamma = token_scores(data.X, data.y, data.v)
    floor = mean_loss(gamma.gather(-1, select[:, None]).squeeze(-1), "logistic")  # all attention on the opt tokens
    risk = mean_loss(margins(data.X, data.Z, data.y, data.v, W), "logistic")
    assert value == pytest.approx(math.log(float(risk - floor)), rel=1e-12)
    E = torch.randn(10, 10, generator=gen, dtype=torch.float64)
    h = 1e-6
    numeric = (log_excess_risk(data, W + h * E, select)[0] - log_excess_risk(data, W - h * E, select)[0]) / (2 * h)
    assert float((grad * E).sum()) == pytest.approx(numeric, rel=1e-7)


def test_log_excess_risk_stays_resolved_where_the_risk_rounds_to_its_infimum():
    data, select = _seed_one()
    W = 200.0 * torch.eye(10, dtype=torch.float64)
    value, grad = log_excess_risk(data, 2 * W, select)
    assert math.isfinite(value) and value < log_excess_risk(data, W, select)[0] and torch.isfinite(grad).all()


@pytest.mark.parametrize("p", [1.75, 3.0])
def test_the_two_solvers_of_the_constrained_risk_agree_on_the_sphere(p):
    """SLSQP and projected l_p mirror descent from the same start: same point, on the sphere, stationary."""
    data, select = _seed_one()
    R = 20.0
    start = torch.full((10, 10), R / 100 ** (1 / p), dtype=torch.float64)  # ||start||_p = R
    W = solve_constrained(data, p, R, start, select)
    W_md, value_md = projected_md(data, p, R, start, 2000)
    assert float(entrywise_norm(W, p)) == pytest.approx(R, rel=1e-5)
    assert float(entrywise_norm(W_md, p)) <= R * (1 + 1e-12)
    assert stationarity(data, p, W, select) < 1e-10
    assert value_md >= log_excess_risk(data, W, select)[0] - 1e-9  # mirror descent does not beat the minimiser
    assert float(directional_bregman(W, W_md, p)) < 1e-6  # dB_p is quadratic: the points agree to ~0.1%
