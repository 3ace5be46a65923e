"""The diagonal variants of kq-nuclear-norm: each chain rule against autograd of the model's own loss."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import scores_equal
from attnlab.models import Diagonal, DiagonalW, SignedSquares


def _check_chain_rule(model, data, names):
    grads, _ = model.gradients(data)
    model.loss(data).sum().backward()
    for name in names:
        ours = grads[name].mantissa * grads[name].log_scale.exp()
        torch.testing.assert_close(ours, getattr(model, name).grad, rtol=1e-10, atol=1e-14)


def test_signed_squares_chain_rule_matches_autograd():
    """Lemma 4.1's (w_+, w_-) model: its hand-written chain rule against autograd of its own loss."""
    data = scores_equal(n=3, T=3, d=5, gap=2.0, seed=1)
    gen = torch.Generator().manual_seed(0)
    w_plus, w_minus = (torch.randn(5, generator=gen, dtype=torch.float64) for _ in range(2))
    _check_chain_rule(SignedSquares(w_plus, w_minus), data, ("w_plus", "w_minus"))


def test_beta_chain_rule_matches_autograd_and_its_w_is_the_diagonal_models():
    data = scores_equal(n=3, T=3, d=5, gap=2.0, seed=1)
    gen = torch.Generator().manual_seed(0)
    beta0 = torch.randn(5, generator=gen, dtype=torch.float64)
    model = DiagonalW(beta0)
    _check_chain_rule(model, data, ("beta",))
    same = Diagonal(5, xi_k0=beta0, xi_q0=torch.ones_like(beta0))  # beta = xi_k * xi_q
    torch.testing.assert_close(model.W, same.W, rtol=0, atol=0)


def test_signed_squares_start_at_zero_from_equal_halves():
    assert float(SignedSquares(torch.ones(3), torch.ones(3)).W.abs().max()) == 0.0


def test_bad_starts_are_refused():
    with pytest.raises(ValidationError, match=r"beta0 has shape \(2, 2, 2\)"):
        DiagonalW(torch.zeros(2, 2, 2))
    with pytest.raises(ValidationError, match="w_minus0 has shape"):
        SignedSquares(torch.ones(3), torch.ones(4))
