"""Assumption 6.1: rows outside the unit ball are rescaled with a warning that says how."""

import warnings

import pytest
import torch

from attnlab.ntk import to_unit_ball


def test_rows_inside_the_ball_are_returned_unchanged_without_warning():
    X = torch.tensor([[0.6, 0.8], [0.1, 0.0]], dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, scale = to_unit_ball(X)
    assert out is X and scale == 1.0


def test_rows_outside_are_divided_by_the_largest_norm_and_the_warning_says_so():
    X = torch.tensor([[3.0, 4.0], [0.5, 0.0], [0.0, 2.0]], dtype=torch.float64)
    with pytest.warns(UserWarning, match=r"Z: 2 of 3 rows lie outside the unit ball \(largest norm 5\).*divided by 5"):
        out, scale = to_unit_ball(X, "Z")
    assert scale == 5.0 and torch.allclose(out.norm(dim=1).max(), torch.tensor(1.0, dtype=torch.float64))
