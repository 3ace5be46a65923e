"""The official unit-norm Gaussian generator and the joint toy set (mirror-descent-lp §6)."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import joint_toy, unit_gaussian


def test_unit_gaussian_rows_are_unit_and_labels_signs():
    data = unit_gaussian(n=6, T=8, d=10, seed=1)
    ones = torch.ones(6, 8, dtype=torch.float64)
    assert torch.allclose(data.X.norm(dim=2), ones, rtol=0, atol=1e-15)  # one division, rounding only
    assert torch.allclose(data.Z.norm(dim=1), ones[:, 0], rtol=0, atol=1e-15)
    assert abs(float(data.v.norm()) - 1) < 1e-15
    assert set(data.y.tolist()) <= {-1.0, 1.0}
    assert not torch.equal(data.Z, data.X[:, 0]) and data.select is None


def test_unit_gaussian_draw_order_is_v_y_x_z():
    # spec §6: one generator, draws in the order v, Y, X, Z; rebuilt here from the spec text
    n, T, d, seed = 3, 4, 5, 7
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(d, generator=gen, dtype=torch.float64)
    y_raw = torch.randn(n, generator=gen, dtype=torch.float64)
    X = torch.randn(n, T, d, generator=gen, dtype=torch.float64)
    Z = torch.randn(n, d, generator=gen, dtype=torch.float64)
    data = unit_gaussian(n=n, T=T, d=d, seed=seed)
    assert torch.allclose(data.v, v / v.norm(), rtol=0, atol=1e-15)
    assert torch.equal(data.y, torch.where(y_raw > 0, 1.0, -1.0).double())
    assert torch.allclose(data.X, X / X.norm(dim=2, keepdim=True), rtol=0, atol=1e-15)
    assert torch.allclose(data.Z, Z / Z.norm(dim=1, keepdim=True), rtol=0, atol=1e-15)


def test_unit_gaussian_seeded():
    assert torch.equal(unit_gaussian(seed=2).X, unit_gaussian(seed=2).X)
    assert not torch.equal(unit_gaussian(seed=2).X, unit_gaussian(seed=3).X)


def test_unit_gaussian_bad_sizes():
    with pytest.raises(ValidationError, match="T == 1, must be >= 2"):
        unit_gaussian(T=1)


def test_joint_toy_is_the_published_set():
    data = joint_toy()
    assert data.X.tolist() == [
        [[-2.7, 1.2], [1.4, 2.1], [1.3, -0.1]],
        [[0.4, -2.2], [-1.1, -0.4], [0.9, 0.1]],
    ]
    assert data.y.tolist() == [1.0, -1.0]
    assert torch.equal(data.Z, data.X[:, 0]) and data.v is None
