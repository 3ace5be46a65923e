"""Each kq-nuclear experiment runs in its --quick form and its theory checks pass; configs validate their keys."""

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.kq_nuclear import X1Config, X4Config
from attnlab.verify import make_config

NAMES = ["kq-nuclear.x1", "kq-nuclear.x2", "kq-nuclear.x3", "kq-nuclear.x4", "kq-nuclear.x5"]


@pytest.mark.parametrize("name", NAMES)
def test_quick_run_writes_outputs_and_passes_its_checks(name, tmp_path):
    record = run_experiment(name, quick=True, out=tmp_path, progress=False)
    failed = record.checks[~record.checks["passed"] & (record.checks["kind"] == "theory")]  # observations may disagree
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    assert len(record.checks) >= 1  # x5 keeps one row since the predicate-vs-reduced-form row left (issue 12)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert {"run", "step"} <= set(frame.columns)
    assert list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.pdf"))  # quick: PNG only


def test_unknown_set_key_lists_the_valid_keys():
    with pytest.raises(ValidationError, match=r"unknown key 'omega0'.*keys: n, T, d, gap, omegas"):
        make_config(get_experiment("kq-nuclear.x1"), ["omega0=1"])


@pytest.mark.parametrize("name", ["kq-nuclear.x1", "kq-nuclear.x2", "kq-nuclear.x3", "kq-nuclear.x5"])
def test_the_retired_token_count_L_says_it_is_now_T(name):
    with pytest.raises(ValidationError, match=r"key 'L' of X\dConfig is now 'T'; write --set T=4"):
        make_config(get_experiment(name), ["L=4"])
    assert make_config(get_experiment(name), ["T=4"]).T == 4


def test_tuple_fields_parse_from_the_command_line():
    config = make_config(get_experiment("kq-nuclear.x1"), ["omegas=0.2,0.4"])
    assert config.omegas == (0.2, 0.4)


def test_configs_refuse_bad_values_by_name():
    with pytest.raises(ValidationError, match="omegas"):
        X1Config(omegas=(0.1, -1.0))
    with pytest.raises(ValidationError, match="dt"):
        X1Config(dt=0.0)
    with pytest.raises(ValidationError, match="radii"):
        X4Config(radii=(1.0,))


def test_x3_ordering_fails_when_the_two_svms_coincide():
    """Coinciding nuc- and fro-SVMs make the ordering meaningless: the row fails and asks for another seed."""
    from attnlab.experiments.kq_nuclear.x3 import X3Config, _x3_checks

    end = {"step": 10, "mu": 2.0, "nuc_ratio": 1.0, "fro_ratio": 1.0, "corr_nuc": 0.99, "corr_fro": 0.98}
    frame = pd.DataFrame(
        [{**end, "param": "KQ", "run": 0}, {**end, "param": "W", "run": 0, "corr_nuc": 0.98, "corr_fro": 0.99}]
    )
    config = X3Config(steps=10)
    distinct, same = (
        next(c for c in _x3_checks(config, 4, frame, corr_refs=corr) if c.claim_id == "separated")
        for corr in (0.95, 0.9995)
    )
    assert distinct.passed and not same.passed and "untestable" in same.predicted
    assert abs(distinct.margin - 0.01) < 1e-12 and same.margin is None  # 0.99 - 0.98 (rounding); none unread


def test_residual_limit_recovers_the_intercept_of_a_plus_b_over_log_mu():
    """The KKT row's limit a of residual = a + b / ln mu, against the exact values it was built from."""
    import numpy as np

    from attnlab.experiments.kq_nuclear.common import residual_limit

    log_mu = np.linspace(10.4, 10.8, 10)  # the quick run's narrow window of ln mu
    a, b = residual_limit(log_mu, 0.414 + 398.0 / log_mu)
    assert abs(a - 0.414) < 1e-9 and abs(b - 398.0) < 1e-7  # exact data: only rounding (cond ~ 1e4) remains


def test_rate_limit_recovers_the_limit_of_a_power_of_mu():
    """l1-optimum's limit a of dist = a + b mu^-kappa, against exact values: a distance falling faster than 1 / ln mu
    (a power of mu) is read at its limit, where the 1 / ln mu fit lands below it."""
    import numpy as np

    from attnlab.experiments.kq_nuclear.common import rate_limit, residual_limit

    log_mu = np.linspace(12.9, 13.7, 100)  # the full run's window of ln mu
    for limit in (0.0, 0.1):
        dist = limit + 2.0 * np.exp(-0.214 * log_mu)
        a, b = rate_limit(log_mu, dist, 0.214)
        assert abs(a - limit) < 1e-9 and abs(b - 2.0) < 1e-7
        assert residual_limit(log_mu, dist)[0] < limit - 0.05  # the 1 / ln mu fit: a wrong limit 0.1 away read < 0.05


@pytest.mark.parametrize("gap", [3.0, 2.0, 6.0])
def test_zero_entry_rate_is_one_minus_the_largest_off_support_dual_certificate(gap):
    """kappa of x2's data (gap 3) and of x5's gaps from the SVM's duals, against the dual LP solved on its own
    (scipy's HiGHS)."""
    import numpy as np
    from scipy.optimize import linprog

    from attnlab.data import scores_equal
    from attnlab.experiments.kq_nuclear.common import zero_entry_rate
    from attnlab.svm import attention_svm
    from attnlab.training.flow import constraint_vectors

    data = scores_equal(2, 3, 8, gap, seed=0)
    l1 = attention_svm(data, norm="l1-diag")
    B = constraint_vectors(data.X, data.Z, data.select).numpy()
    rows = np.concatenate([np.delete(B[i], int(data.select[i]), axis=0) for i in range(data.n)])  # (n (T - 1), d)
    # dual of min ||beta||_1 s.t. rows beta >= 1: max sum lambda s.t. |rows^T lambda| <= 1, lambda >= 0
    dual = linprog(-np.ones(len(rows)), A_ub=np.vstack([rows.T, -rows.T]), b_ub=np.ones(2 * data.d), method="highs")
    g = rows.T @ dual.x
    zero = np.abs(l1.beta.numpy()) < 1e-6
    kappa = zero_entry_rate(data, l1.beta, l1.duals, 1e-2)
    assert abs(kappa - (1 - np.abs(g[zero]).max())) < 1e-6  # 0.2139 at gap 3, 0.2061 at 2, 0.2217 at 6
