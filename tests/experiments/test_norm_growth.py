"""gd-log-norm's statistic (flagship and implicit-bias.rates): the slope of ||W_t|| on ln t over the last decade,
over ||W_mm||, within 1 +- 1/ln t_mid; a ln ln t residual stays inside, a norm that levels off does not."""

import math

import numpy as np
import pytest

from attnlab.experiments.norm_growth import log_growth

_T = np.arange(10.0, 2001.0, 10.0)


@pytest.mark.parametrize("w_mm", [0.3, 0.5])
@pytest.mark.parametrize("offset", [0.0, 4.0])
def test_lemma_1s_growth_reads_one(w_mm, offset):
    growth = log_growth(_T, w_mm * np.log(_T) + offset, w_mm, 10)
    assert growth.ratio == pytest.approx(1.0, abs=1e-12)
    assert (growth.first, growth.last, growth.records) == (200, 2000, 181)
    assert growth.t_mid == 1100.0
    assert growth.tolerance == pytest.approx(1 / math.log(1100.0))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_ln_ln_t_residual_moves_the_ratio_by_about_one_over_ln_t(sign):
    w_mm = 0.4
    unit = log_growth(_T, w_mm * (np.log(_T) + sign * np.log(np.log(_T))), w_mm, 10)
    # d(ln ln t) / d(ln t) = 1/ln t, between 1/ln T and 1/ln(T/10) over the window (0.152 here, 1/ln t_mid 0.143)
    assert 1 / math.log(2000.0) < sign * (unit.ratio - 1) < 1 / math.log(200.0)
    half = log_growth(_T, w_mm * (np.log(_T) + 0.5 * sign * np.log(np.log(_T))), w_mm, 10)
    assert abs(half.ratio - 1) < half.tolerance


def test_a_norm_that_has_levelled_off_reads_near_zero():
    norms = 3.0 - 2.0 * np.exp(-_T / 30.0)  # a bounded norm (weight decay) past its approach
    assert abs(log_growth(_T, norms, 0.4, 10).ratio) < 0.01
