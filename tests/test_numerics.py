"""attnlab._numerics.max_column_norm against torch.linalg.vector_norm, the independent reference."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab._numerics import all_finite, max_column_norm


def _reference(M: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(M, dim=0).max())


@pytest.mark.parametrize("shape", [(1, 1), (16, 3), (16, 4096), (3, 70000)])
@pytest.mark.parametrize("scale", [1e-100, 1e-3, 1.0, 1e100])
def test_max_column_norm_agrees_with_vector_norm(shape, scale):
    M = scale * torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(sum(shape)))
    assert max_column_norm(M) == pytest.approx(_reference(M), rel=4e-16)


def test_the_largest_column_is_found():
    M = torch.ones(4, 10, dtype=torch.float64)
    M[:, 7] = torch.tensor([3.0, 4.0, 0.0, 12.0])
    assert max_column_norm(M) == 13.0


@pytest.mark.parametrize("value", [1e200, -1e200, 1e-200, 5e-324])
def test_squares_out_of_range_are_scaled_first(value):
    M = torch.full((16, 5), value, dtype=torch.float64)
    assert max_column_norm(M) == pytest.approx(4 * abs(value), rel=1e-15)  # vector_norm: inf at 1e200


def test_zero_and_non_finite():
    assert max_column_norm(torch.zeros(3, 4, dtype=torch.float64)) == 0.0
    assert max_column_norm(torch.tensor([[1.0, math.inf]], dtype=torch.float64)) == math.inf
    assert math.isnan(max_column_norm(torch.tensor([[1.0, math.nan]], dtype=torch.float64)))


def test_work_receives_the_squares_and_leaves_the_matrix():
    M = torch.tensor([[1.0, -2.0], [2.0, 1.0]], dtype=torch.float64)
    work = torch.empty_like(M)
    assert max_column_norm(M, work=work) == math.sqrt(5.0)
    assert torch.equal(work, M.square()) and torch.equal(M, torch.tensor([[1.0, -2.0], [2.0, 1.0]]).double())


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", [0, 17, -1])
def test_all_finite_finds_every_non_finite_entry(bad, where):
    t = torch.randn(4, 5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert all_finite(t) and bool(torch.isfinite(t).all())
    t.view(-1)[where] = bad
    assert not all_finite(t)


def test_all_finite_on_empty_huge_and_integer_tensors():
    assert all_finite(torch.empty(0, 3, dtype=torch.float64))
    assert all_finite(torch.tensor([1e308, -1e308], dtype=torch.float64))  # finite extremes, no overflow in a sum
    assert all_finite(torch.arange(5))
