"""Symmetric initialization (spec §2.1, Algorithm A)."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import ExpMLP, ReluMLP, SoftmaxMLP, symmetric_init

NETS = [SoftmaxMLP, ReluMLP, ExpMLP]


def test_symmetric_init_pairs_equal_weights_and_opposite_signs():
    W, a = symmetric_init(4, 3, 10, sigma_w=0.7, seed=3)
    assert W.shape == (4, 10) and a.shape == (3, 10) and W.dtype == torch.float64
    assert torch.equal(W[:, 0::2], W[:, 1::2])
    assert torch.equal(a[:, 0::2], -a[:, 1::2])
    assert set(a.unique().tolist()) <= {-1.0, 1.0}


def test_symmetric_init_is_reproducible_and_seed_dependent():
    assert torch.equal(symmetric_init(3, 2, 8, seed=5)[0], symmetric_init(3, 2, 8, seed=5)[0])
    assert not torch.equal(symmetric_init(3, 2, 8, seed=5)[0], symmetric_init(3, 2, 8, seed=6)[0])


def test_symmetric_init_std_matches_sigma_w():
    W, _ = symmetric_init(50, 1, 4000, sigma_w=0.5, seed=0)
    # 1e5 independent draws: the sample std is within ~1% of 0.5 (5 standard errors)
    assert abs(float(W[:, ::2].std()) - 0.5) < 0.01


@pytest.mark.parametrize("cls", NETS)
def test_symmetric_init_output_is_exactly_zero(cls):
    X = torch.randn(7, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    net = cls(4, 3, 64, sigma_w=1.0, seed=2)
    assert (
        float(net(X / X.norm(dim=1, keepdim=True)).detach().abs().max()) == 0.0
    )  # spec §9 P1: exact zero, not round-off


def test_odd_width_is_refused_with_the_fix():
    with pytest.raises(ValidationError, match=r"width == 5, must be even .*pass width=6"):
        SoftmaxMLP(3, 2, 5)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"d_in": 0}, "d_in == 0"), ({"sigma_w": -1.0}, "sigma_w == -1.0"), ({"width": 1.5}, "width must be a int")],
)
def test_bad_sizes_are_refused(kwargs, match):
    args = {"d_in": 3, "d_out": 2, "width": 4, "sigma_w": 1.0} | kwargs
    with pytest.raises(ValidationError, match=match):
        symmetric_init(**args)
