"""The theorem's quantities (spec §5, §6.2): plain formulas, checked on hand-computed values."""

import math

import pytest

from attnlab._validation import ValidationError
from attnlab.ntk import contraction_bound, coupling_bound, theorem_B, theorem_log10_width, theorem_step


def test_contraction_bound_is_one_minus_m_eta_lambda_over_two():
    assert contraction_bound(0.01, 100.0, 0.4) == pytest.approx(1 - 100 * 0.01 * 0.4 / 2)


def test_theorem_B_and_step():
    assert theorem_B(1.0, 10, 3, delta=0.1, C=10.0) == pytest.approx(10 * math.sqrt(math.log(300)))
    assert theorem_B(0.01, 2, 1, delta=0.5, C=1.0) == 1.0
    assert theorem_step(0.5, 2, 1, 10, 1.0) == pytest.approx(0.05 / (10 * 4) * math.exp(-16))
    assert theorem_step(0.5, 12, 3, 1000, theorem_B(1.0, 12, 3)) < 1e-150  # e^{-16 B} with B ~ 24
    assert theorem_step(0.5, 12, 3, 1000, 50.0) == 0.0  # e^{-800} underflows float64


def test_coupling_bound():
    assert coupling_bound(0.01, 4, 1, 2.0, 0.5) == pytest.approx(0.01 * 2 * 2 / 0.5)
    with pytest.raises(ValidationError, match="lam == 0.0"):
        coupling_bound(0.01, 4, 1, 2.0, 0.0)


def test_theorem_width_is_lambda_n_d_e18B_log2_in_log10():
    expected = 0.5**-2 * 2**2 * 1**2 * math.exp(18) * math.log(2 / 0.1) ** 2
    assert theorem_log10_width(0.5, 2, 1, 1.0) == pytest.approx(math.log10(expected), rel=1e-12)
    assert theorem_log10_width(0.25, 12, 3, theorem_B(1.0, 12, 3)) > 190  # e^{18 B} with B ~ 24: far beyond any run
