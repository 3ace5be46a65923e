"""Input audit of attnlab.probe: bad input raises ValidationError naming the argument, never a raw error or NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.probe import additive_mask, attended_tokens, homogeneous_tokens

F64 = torch.float64


def _tokens(n: int = 3, T: int = 4, d: int = 2, d_q: int = 2) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(n, T, d, generator=g, dtype=F64),
        torch.randn(n, d_q, generator=g, dtype=F64),
        torch.randn(d, d_q, generator=g, dtype=F64),
    )


def _with_nan(t: torch.Tensor) -> torch.Tensor:
    t = t.clone()
    t.view(-1)[0] = math.nan
    return t


X, Z, W = _tokens()

BAD = [
    # 3. NaN passthrough
    (lambda: additive_mask("m", torch.tensor([[np.nan, 0.0]])), "m"),
    (lambda: additive_mask("attn_mask", torch.tensor([[0.0, math.inf]])), "attn_mask"),
    (lambda: attended_tokens(_with_nan(X), Z, W), "X"),
    (lambda: attended_tokens(X, _with_nan(Z), W), "Z"),
    (lambda: attended_tokens(X, Z, _with_nan(W)), "W"),
    (lambda: attended_tokens(X, Z * 1e200, W * 1e200), "logits"),
    # 8. homogeneous_tokens of a non-tensor or a 0-d tensor
    (lambda: homogeneous_tokens(np.ones((2, 3))), "X"),
    (lambda: homogeneous_tokens(torch.tensor(1.0)), "X"),
    # 9. attended_tokens of mismatched shapes
    (lambda: attended_tokens(X, Z, torch.randn(3, 2, dtype=F64)), "W"),
    (lambda: attended_tokens(X, torch.randn(3, 3, dtype=F64), W), "Z"),
    (lambda: attended_tokens(X, torch.randn(5, 2, dtype=F64), W), "Z"),
    (lambda: attended_tokens(X[0], Z, W), "X"),
    (lambda: attended_tokens(X, Z[0], W), "Z"),
    (lambda: attended_tokens(X, Z, W[0]), "W"),
    (lambda: attended_tokens(X.numpy(), Z, W), "X"),
    (lambda: attended_tokens(X, Z.float(), W), "Z"),
    (lambda: attended_tokens(X.long(), Z, W), "X"),
    (lambda: attended_tokens(X.expand(2, -1, -1, -1), Z, W.expand(3, -1, -1)), "W"),
]


@pytest.mark.parametrize("call, name", BAD, ids=[f"{i}-{name}" for i, (_, name) in enumerate(BAD)])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises(ValidationError, match=name):
        call()


def test_valid_calls_are_unchanged():
    assert torch.equal(attended_tokens(X, Z, W), (X @ (W @ Z[..., None])).squeeze(-1).argmax(dim=-1))
    runs = attended_tokens(X.expand(2, -1, -1, -1), Z, W.expand(2, -1, -1))  # broadcast runs axis
    assert torch.equal(runs, attended_tokens(X, Z, W).expand(2, -1))
    mask = torch.tensor([[0.0, -math.inf]])
    assert torch.equal(additive_mask("m", mask), mask)
    assert torch.equal(additive_mask("m", torch.tensor([[True, False]])), torch.tensor([[-math.inf, 0.0]]))
    assert torch.equal(homogeneous_tokens(torch.zeros(2)), torch.tensor([0.0, 0.0, 1.0]))
