"""The readings of implicit-bias.rates revised or added on 2026-11-29, on synthetic paths whose answer is known:
gd-direction (Thm 6), loss-constant (Thm 2's constant), w-log-norm (Lemma 12), norm-ratio's fixed tolerance
(Lemma 7 [D]), and the property row polyak-step-upper under the Polyak step with its gap doubled; and Lemma 2's
reading off W_mm's ray (2026-11-30)."""

import math
import pathlib

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab.data import example1
from attnlab.experiments import get_experiment
from attnlab.experiments.implicit_bias import rates_fixed, rates_joint
from attnlab.svm import attention_svm
from attnlab.verify import make_config

CONFIG = make_config(get_experiment("implicit-bias.rates"), quick=True)
DATA = example1(CONFIG.n, CONFIG.T, CONFIG.d, CONFIG.rho, CONFIG.sigma, seed=CONFIG.seed)
SOL = attention_svm(DATA, norm="fro")


def _iterates(limit: torch.Tensor, offset: torch.Tensor, steps: int = 1000, every: int = 10) -> dict:
    """GD-like iterates ``W_t = limit ln(1 + t) + offset(t)``, ``offset(t) = offset (1 + 1/(1 + t))``: bounded."""
    t = torch.arange(0, steps + 1, every, dtype=torch.float64)
    W = limit * torch.log1p(t)[:, None, None, None] + offset * (1 + 1 / (1 + t))[:, None, None, None]
    return {"step": t, "W": W}


def test_gd_direction_passes_a_bounded_offset_from_w_mm_and_fails_another_limit():
    gen = torch.Generator().manual_seed(0)
    offset = torch.randn(5, CONFIG.d, CONFIG.d, generator=gen, dtype=torch.float64)
    offset = 3.0 * offset / torch.linalg.matrix_norm(offset)[:, None, None]  # ||offset|| = 3, ~8 ||W_mm||
    true = rates_fixed._gd_direction(_iterates(SOL.W.expand(5, -1, -1), offset), SOL.W, 1000)
    assert true.passed and true.measured < 1e-3
    tilt = torch.randn(CONFIG.d, CONFIG.d, generator=gen, dtype=torch.float64)
    other = SOL.W + 0.35 * float(SOL.W.norm()) * tilt / tilt.norm()  # a limit 1 - corr ~ 0.06 off W_mm
    wrong = rates_fixed._gd_direction(_iterates(other.expand(5, -1, -1), offset), SOL.W, 1000)
    limit_gap = 1 - float((other * SOL.W).sum() / (other.norm() * SOL.W.norm()))
    assert not wrong.passed and wrong.margin < 0
    assert wrong.measured == pytest.approx(limit_gap, rel=0.2)  # the displacement reads the limit's own gap


def _joint_frame(gain: np.ndarray, steps: np.ndarray, **columns) -> pd.DataFrame:
    return pd.DataFrame({"step": steps, "log_loss": -gain, **columns})


@pytest.mark.parametrize("offset", [0.0, 5.0])
def test_loss_constant_reads_eta_over_u_mm_squared_and_fails_another_constant(offset):
    T, u_norm, steps = 10_000, 1.3, np.arange(0, 10_001, 10)
    per_step = CONFIG.joint_lr * (np.arange(T) + 1.0) ** -CONFIG.alpha / u_norm**2  # spec A6 [D]
    gain = offset + np.r_[0.0, np.cumsum(per_step)][steps]
    true = rates_joint._loss_constant(_joint_frame(gain, steps), T, CONFIG, u_norm)
    assert true.passed and true.measured == pytest.approx(1 / u_norm**2, rel=1e-12)
    slower = rates_joint._loss_constant(_joint_frame(0.9 * gain, steps), T, CONFIG, u_norm)
    assert not slower.passed and slower.margin < 0  # 10% off: beyond the declared rtol
    assert rates_joint.LOSS_CONSTANT.param("rtol") == 0.05


@pytest.mark.parametrize(
    ("shape", "passes"),
    [
        (lambda t: 0.4 * np.log(t) + 1.0, True),  # Theta(log t): the slope keeps its value
        (lambda t: 3.0 - 2.0 * t**-0.5, False),  # levels off: the last decade's slope falls below half
        (lambda t: 0.3 * t**0.4, False),  # a power: the log fit loses
    ],
)
def test_w_log_norm_passes_log_growth_only(shape, passes):
    T, steps = 10_000, np.arange(0, 10_001, 10)
    norm = np.r_[0.0, shape(steps[1:].astype(float))]
    current, old = rates_joint._w_log_norm(pd.DataFrame({"step": steps, "norm": norm}), T, 10)
    assert current.passed is passes and old.kind == "revision"
    assert (current.margin >= 0) is passes


def test_norm_ratio_tolerance_is_fixed_and_fails_a_constant_shortfall():
    assert rates_fixed.NORM_RATIO.param("atol") == 0.05
    assert rates_fixed.NORM_RATIO.close(1.0, 0.998).passed
    assert not rates_fixed.NORM_RATIO.close(1.0, 0.8).passed  # NGD with steps of 0.8 eta (audit fid1: 0.798)


def test_polyak_step_upper_is_a_property_that_fails_with_the_gap_doubled():
    _, rows = rates_fixed.polyak_bounds(CONFIG, DATA, SOL)
    upper = next(r for r in rows if r.claim_id == "polyak-step-upper")
    assert upper.kind == "property" and upper.passed
    with rates_fixed.POLYAK_DOUBLED.applied():
        _, rows = rates_fixed.polyak_bounds(CONFIG, DATA, SOL)
    doubled = next(r for r in rows if r.claim_id == "polyak-step-upper")
    assert not doubled.passed and math.isfinite(doubled.measured)


def test_gd_behind_is_retired_for_gd_direction_and_its_remark_is_read_by_the_figure():
    claims = {c.id for c in get_experiment("implicit-bias.rates").claims}
    assert "gd-behind" not in claims and {"gd-direction", "loss-constant", "polyak-step-upper"} <= claims
    assert 'result="001:Fig2"' not in pathlib.Path(rates_fixed.__file__).read_text()  # fig2, fig5, flagship read it


def test_lemma2_reads_off_the_ray_where_the_transposed_logits_fail_and_lemma6_polyak_lower_are_unit_tests():
    """2026-11-30: on W_mm's ray the ratio of Lemma 2 is 1 for any model, so the row reads a cone off it, where the
    model with key and query swapped (its max-margin direction W_mm^T) falls below 1 - eps; Lemma 6 and Thm 7's lower
    step bound hold at every W and are tests/experiments/test_implicit_bias_landscape.py."""
    from attnlab.experiments.implicit_bias import rates_landscape

    (row,) = rates_landscape.key_correlation(CONFIG, DATA, SOL)
    assert row.passed and row.measured > 1.0  # the limit is >= 1 / cos(angle) > 1 (theory page §8 item 6)
    with rates_landscape.ATTENTION_TRANSPOSED.applied():
        (wrong,) = rates_landscape.key_correlation(CONFIG, DATA, SOL)
    assert not wrong.passed and wrong.margin < 0
    _, m = rates_landscape.cone_points(CONFIG, SOL)
    assert float(m.min()) == pytest.approx(0.1) and float(m.max()) == pytest.approx(1.0)  # 5.7 to 45 degrees
    claims = {c.id for c in get_experiment("implicit-bias.rates").claims}
    assert not {"lemma6", "polyak-lower"} & claims and {"lemma2", "lemma5"} <= claims
