"""Each implicit-bias experiment runs in its --quick form and its theory checks and properties pass; configs validate
their keys; the cap detector and the geometric record steps behave as documented."""

import numpy as np
import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.implicit_bias import Fig2Config, Fig3Config
from attnlab.experiments.implicit_bias.remarks import capped_from
from attnlab.verify import make_config

NAMES = [
    "implicit-bias.assumptions",
    "implicit-bias.fig2",
    "implicit-bias.fig3",
    "implicit-bias.fig5",
    "implicit-bias.rates",
]


@pytest.mark.parametrize("name", NAMES)
def test_quick_run_writes_outputs_and_passes_its_checks(name, tmp_path):
    record = run_experiment(name, quick=True, out=tmp_path, progress=False)
    must_pass = record.checks["kind"].isin(["theory", "property"])  # observations may disagree
    failed = record.checks[~record.checks["passed"] & must_pass]
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    assert len(record.checks) >= 3
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert {"run", "step"} <= set(frame.columns)
    assert list(tmp_path.glob("*.png")) and list(tmp_path.glob("*.pdf"))


def test_unknown_set_key_lists_the_valid_keys():
    with pytest.raises(ValidationError, match=r"unknown key 'eta'.*keys: n, T, d, rho"):
        make_config(get_experiment("implicit-bias.fig2"), ["eta=0.1"])


def test_fig5_differs_from_fig2_only_in_the_documented_defaults():
    fig2, fig5 = make_config(get_experiment("implicit-bias.fig2")), make_config(get_experiment("implicit-bias.fig5"))
    changed = {k for k in vars(fig2) if getattr(fig2, k) != getattr(fig5, k)}
    assert changed == {"antipodal", "polyak_cap"}


def test_configs_refuse_bad_values_by_name():
    with pytest.raises(ValidationError, match="ngd_lr"):
        Fig2Config(ngd_lr=0.0)
    with pytest.raises(ValidationError, match="momentum"):
        Fig2Config(momentum=1.0)
    with pytest.raises(ValidationError, match="sigma_opt"):
        Fig3Config(sigma_opt=0.5, sigma_oth=1.0)


def test_the_cap_binds_from_the_first_step_after_which_every_gradient_is_below_eta_over_cap():
    grad = pd.DataFrame({"step": np.arange(6) * 10, "grad_norm": [0.5, 0.005, 0.02, 1e-3, 1e-90, 0.0]})
    assert capped_from(grad, eta=0.1, cap=10.0) == 30  # 0.1 / 10 = 0.01: step 10 binds, 20 does not, 30 on do
    assert capped_from(grad, eta=0.1, cap=None) is None  # uncapped: never
    assert capped_from(grad, eta=0.1, cap=1e-3) == 0  # eta / cap = 100: every gradient is below, from the start
    assert capped_from(grad.assign(grad_norm=1.0), eta=0.1, cap=10.0) is None
