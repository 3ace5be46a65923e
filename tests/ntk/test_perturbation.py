"""Kernels of moved networks (Lemma 5.1's worst case) and the unit-sphere inputs of the reference setting."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import SoftmaxMLP, gram, perturbed_kernels, unit_rows, with_weights


def test_unit_rows_lie_on_the_sphere_and_successive_draws_differ():
    gen = torch.Generator().manual_seed(0)
    X, Y = unit_rows(5, 3, gen), unit_rows(5, 3, gen)
    torch.testing.assert_close(X.norm(dim=1), torch.ones(5, dtype=torch.float64), rtol=0, atol=1e-15)
    assert X.dtype == torch.float64 and not torch.equal(X, Y)
    with pytest.raises(ValidationError, match="torch.Generator"):
        unit_rows(5, 3, 0)


def test_with_weights_measures_a_copy_and_leaves_the_net_alone():
    X = unit_rows(4, 3, torch.Generator().manual_seed(1))
    net = SoftmaxMLP(3, 2, 6, seed=0)
    before = net.W.detach().clone()
    after = before + 0.1 * torch.randn(before.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    moved = with_weights(net, after)  # not a common shift of every neuron, which the softmax ignores
    assert torch.equal(net.W.detach(), before) and torch.equal(moved.W.detach(), after)
    assert not torch.allclose(gram(moved, X), gram(net, X))
    with pytest.raises(ValidationError, match=r"expected \(3, 6\)"):
        with_weights(net, torch.zeros(3, 5))


def test_kernel_change_is_first_order_in_the_radius():
    """Lemma 5.1's move changes the kernel linearly in R: per_radius settles as R -> 0, and R = 0+ changes little."""
    X = unit_rows(6, 3, torch.Generator().manual_seed(2))
    frame = perturbed_kernels((8, 16), (1e-4, 1e-3), X, d_out=2, sigma_w=1.0, seed=0)
    assert len(frame) == 4 and {"kernel_change", "B", "per_radius"} <= set(frame.columns)
    for _, part in frame.groupby("width"):
        small, large = part.sort_values("radius")["per_radius"].tolist()
        assert small == pytest.approx(large, rel=0.05)  # first order: the ratio to R is constant
    with pytest.raises(ValidationError, match="radii entry"):
        perturbed_kernels((8,), (0.0,), X, d_out=2, sigma_w=1.0, seed=0)
