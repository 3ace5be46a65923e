"""Each implicit-bias experiment runs in its --quick form and its theory checks and properties pass; configs validate
their keys; the cap detector, the cap-grid remark and the geometric record steps behave as documented."""

import math

import numpy as np
import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.implicit_bias import AssumptionsConfig, Fig2Config, Fig3Config
from attnlab.experiments.implicit_bias.fixed_decoder import _saturation_checks
from attnlab.experiments.implicit_bias.remarks import cap_grid_remark, capped_from
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
    assert list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.pdf"))  # quick: PNG only


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


def _run(steps_to_align: int, steps_to_loss: int, L_star: float = 1.0) -> pd.DataFrame:
    """One run recorded every 10 steps that reaches corr 0.99 and L - L_* <= 1e-6 L_* at the given steps."""
    step = np.arange(0, 110, 10)
    return pd.DataFrame({
        "step": step,
        "alignment": np.where(step >= steps_to_align, 0.995, 0.5),
        "loss": L_star + np.where(step >= steps_to_loss, 1e-7, 1e-3),
    })  # fmt: skip


def test_the_cap_grid_remark_lists_the_pairs_where_polyak_is_faster_on_both_metrics():
    config = Fig2Config(ngd_caps=(1.0, math.inf), polyak_caps=(1.0, math.inf))
    runs = {
        ("NGD", 1.0): _run(50, 50),
        ("NGD", math.inf): _run(20, 20),
        ("Polyak", 1.0): _run(40, 60),  # faster than NGD cap 1 in direction only
        ("Polyak", math.inf): _run(10, 10),  # faster than both on both
    }
    row, table = cap_grid_remark(config, runs, L_star=1.0)
    holds = {(r.ngd_cap, r.polyak_cap): r.holds for r in table.itertuples()}
    assert holds == {(1.0, 1.0): False, (1.0, math.inf): True, (math.inf, 1.0): False, (math.inf, math.inf): True}
    assert row.kind == "observation" and row.passed
    assert "holds at 2 of 4 pairs" in row.measured and "NGD cap 1: Polyak cap inf" in row.measured


def test_assumptions_config_refuses_bad_grids_by_name():
    with pytest.raises(ValidationError, match="dims"):
        AssumptionsConfig(dims=(256, 64))
    with pytest.raises(ValidationError, match="delta"):
        AssumptionsConfig(delta=1.5)
    with pytest.raises(ValidationError, match="ngd_caps"):
        Fig2Config(ngd_caps=())


def test_init_linear_standard_error_is_the_variance_of_the_gaussian_logits_second_moment():
    """`init-linear`'s standard error comes from the logits' law, not the draws: one draw's mean of the normalised
    squared logits has the variance 2 sum_kl cos_kl^2 / (n T)^2 that 4000 Gaussian W_0 reproduce."""
    import torch

    from attnlab.data import example1
    from attnlab.experiments.implicit_bias.assumptions import _moment_variance
    from attnlab.models.functional import attention_logits

    data = example1(4, 4, 16, 1.0, 2.0, seed=0)
    W0 = torch.randn(4000, 16, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    scale = data.X.norm(dim=-1) * data.Z.norm(dim=-1, keepdim=True)
    moment = (attention_logits(data.X, W0, data.Z) / scale).square().mean(dim=(-2, -1))
    assert moment.mean().item() == pytest.approx(1.0, abs=4 * math.sqrt(_moment_variance(data) / 4000))
    assert moment.var().item() == pytest.approx(_moment_variance(data), rel=0.1)
    assert _moment_variance(data) > 2.0 / 16  # the tokens correlate at d = 16: more than independent logits' 2 / (n T)


def test_head_preconditioner_at_scale_one_reproduces_the_run_to_the_bit_and_moves_only_the_normalised_methods(tmp_path):
    """The falsifier `head-preconditioned` is only its diagonal: at diag(1) every method's trajectory is the unmutated
    one exactly (the transform sits inside each rule, so the engine's log-scaled path is kept); at 0.95-1.05 GD (a
    torch SGD, with no rule) is untouched and the normalised methods' heads end farther from u_mm."""
    from attnlab.experiments.implicit_bias.falsifiers import head_preconditioned
    from attnlab.verify import RunContext

    experiment = get_experiment("implicit-bias.fig3")
    config = make_config(experiment, quick=True)
    module = "attnlab.experiments.implicit_bias.joint"

    def frame(low, high):
        with head_preconditioned(module, low, high).applied():
            return experiment.run(config, RunContext(out=tmp_path, progress=False, quick=True)).frame

    plain = experiment.run(config, RunContext(out=tmp_path, progress=False, quick=True)).frame
    columns = ["head_alignment", "alignment", "log_loss", "head_norm"]
    pd.testing.assert_frame_equal(frame(1.0, 1.0)[columns], plain[columns], check_exact=True)
    moved = frame(0.95, 1.05)
    last = moved.groupby("method")["head_alignment"].last(), plain.groupby("method")["head_alignment"].last()
    assert last[0]["GD"] == last[1]["GD"]
    for method in ("NGD", "NGD-joint", "Polyak"):
        assert 1 - last[0][method] > 10 * (1 - last[1][method]), (
            method
        )  # measured: 29x (NGD-joint) to 66x (NGD, Polyak)


def _saturation_frame(offset: float, deficit: float, W_mm_norm: float = 0.5) -> pd.DataFrame:
    """A second half whose saturation slope is -1/||W_mm|| + offset and whose last direction falls ``deficit`` short
    of the W-SVM's margin."""
    norm = np.linspace(100.0, 200.0, 21)
    return pd.DataFrame(
        {
            "step": np.arange(1000, 2050, 50),
            "norm": norm,
            "log_one_minus_opt": (-1.0 / W_mm_norm + offset) * norm + 0.3,
            "margin": (1.0 / W_mm_norm - deficit) * norm,
        }
    )


@pytest.mark.parametrize(
    ("offset", "deficit", "verdict"), [(1e-3, 2e-3, "pass"), (-1e-3, 2e-3, "pass"), (3e-3, 2e-3, "fail")]
)
def test_saturation_slope_is_read_within_the_margin_deficit_of_the_last_direction(offset, deficit, verdict):
    current, old = _saturation_checks(_saturation_frame(offset, deficit), 0.5)
    assert current.verdict == verdict
    assert current.predicted.endswith(f"{deficit:g}")  # the tolerance is the last record's deficit, not a constant
    assert old.claim_id == "saturation-slope#rev1" and old.verdict == "fail"  # an exact line has no drift: 3 x 0
