"""loss-rate's statistic: the exponent of -log L read from its per-step gain, which cancels a constant offset that
biases the log-log slope of -log L itself (implicit-bias.rates, Thm 2)."""

import numpy as np
import pytest

from attnlab.experiments.implicit_bias.rates_joint import _gain_exponent
from attnlab.verify import fit_slope


@pytest.mark.parametrize("beta", [0.2, 1 / 3, 0.5])
@pytest.mark.parametrize("offset", [0.0, 7.0, -2.0])
def test_the_gain_exponent_recovers_beta_whatever_the_offset(beta, offset):
    t = np.arange(10.0, 20001.0, 10.0)
    gain = 3.0 * t**beta + offset
    assert _gain_exponent(t, gain, 2000.0, 20000.0) == pytest.approx(beta, abs=1e-4)


@pytest.mark.parametrize("offset", [7.0, -5.0])
def test_an_offset_biases_the_log_log_slope_of_the_gain_itself(offset):
    t = np.arange(10.0, 20001.0, 10.0)
    gain = 3.0 * t ** (1 / 3) + offset  # an offset the old reading could not tell from another rate
    last = t >= 2000.0
    slope, _ = fit_slope(t[last], gain[last])
    assert abs(slope - 1 / 3) > 0.03  # -5 steepens it, as the true runs' offsets do (+0.05 there), 7 flattens it
    assert _gain_exponent(t, gain, 2000.0, 20000.0) == pytest.approx(1 / 3, abs=1e-4)
