"""Input audit of attnlab.nets: bad input raises ValidationError naming the argument; Hoyer sparsity is scale-safe."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.nets import (
    SelfAttention,
    attention_weights,
    hoyer_sparsity,
    majority_rate,
    make_optimizer,
    projection_entries,
)

F64 = torch.float64


def _qk(n: int = 2, h: int = 1, T: int = 3, e: int = 2, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(n, h, T, e, generator=torch.Generator().manual_seed(0), dtype=dtype)


def _hoyer_mp(values: list[float]) -> float:
    """Hoyer sparsity at 60 digits: the truth the float64 value is compared with."""
    with mpmath.workdps(60):
        w = [mpmath.mpf(v) for v in values]
        m = len(w)
        ratio = mpmath.fsum(abs(a) for a in w) / mpmath.sqrt(mpmath.fsum(a * a for a in w))
        return float((mpmath.sqrt(m) - ratio) / (mpmath.sqrt(m) - 1))


BAD = [
    # 1. Hoyer sparsity of degenerate or non-real entries
    (lambda: hoyer_sparsity(torch.tensor([], dtype=F64)), "values"),
    (lambda: hoyer_sparsity(torch.tensor([2.0], dtype=F64)), "values"),
    (lambda: hoyer_sparsity(torch.zeros(4, dtype=F64)), "values"),
    (lambda: hoyer_sparsity(torch.tensor([1.0, math.nan], dtype=F64)), "values"),
    (lambda: hoyer_sparsity(torch.tensor([1.0, math.inf], dtype=F64)), "values"),
    (lambda: hoyer_sparsity(torch.tensor([1 + 1j, 2 + 0j])), "values"),
    (lambda: hoyer_sparsity(np.array([1 + 1j, 2 + 0j])), "values"),
    # 2. SelfAttention's sizes
    (lambda: SelfAttention(4, -2), "heads"),
    (lambda: SelfAttention(4, 0), "heads"),
    (lambda: SelfAttention(4.0, 2), "dim"),
    (lambda: SelfAttention(0, 1), "dim"),
    (lambda: SelfAttention(4, 2.0), "heads"),
    (lambda: SelfAttention(4, True), "heads"),
    # 3, 6. attention_weights: a row with no kept key, a non-boolean mask, mismatched shapes, NaN
    (lambda: attention_weights(_qk(), _qk(), torch.tensor([[True, True, False], [False, False, False]])), "key_mask"),
    (lambda: attention_weights(_qk(), _qk(), torch.ones(2, 3, dtype=torch.int64)), "key_mask"),
    (lambda: attention_weights(_qk(), _qk(), torch.ones(2, 4, dtype=torch.bool)), "key_mask"),
    (lambda: attention_weights(_qk(), _qk(), torch.ones(3, dtype=torch.bool)), "key_mask"),
    (lambda: attention_weights(_qk(), _qk(), [[True, True, True]] * 2), "key_mask"),
    (lambda: attention_weights(_qk(e=2), _qk(e=3)), "k"),
    (lambda: attention_weights(_qk(n=2), _qk(n=3)), "k"),
    (lambda: attention_weights(_qk(), _qk(dtype=torch.float32)), "k"),
    (lambda: attention_weights(_qk()[0], _qk()[0]), "q"),
    (lambda: attention_weights(_qk().long(), _qk().long()), "q"),
    (lambda: attention_weights(np.zeros((2, 1, 3, 2)), _qk()), "q"),
    (lambda: attention_weights(_qk().index_fill(3, torch.tensor([0]), math.nan), _qk()), "q"),
    (lambda: attention_weights(_qk(), _qk().index_fill(3, torch.tensor([0]), math.inf)), "k"),
    # 4. majority_rate of a non-tensor
    (lambda: majority_rate(np.array([0, 1, 1])), "labels"),
    (lambda: majority_rate([0, 1]), "labels"),
    # 5. projection_entries of a model without attnlab attention
    (lambda: projection_entries(nn.Linear(2, 2)), "model"),
    (lambda: projection_entries("model"), "model"),
    # 7. make_optimizer over no parameters
    (lambda: make_optimizer("gd", []), "params"),
    (lambda: make_optimizer("gd", iter([])), "params"),
    (lambda: make_optimizer("gd", 3), "params"),
    (lambda: make_optimizer("gd", nn.Parameter(torch.zeros(2))), "params"),
]


@pytest.mark.parametrize("call, name", BAD, ids=[f"{i}-{name}" for i, (_, name) in enumerate(BAD)])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises(ValidationError, match=name):
        call()


@pytest.mark.parametrize(
    "values",
    [
        [1e200, 1e200],
        [1e-200, 1e-200],
        [1e300, -2e300, 0.0, 5e299],
        [3e-310, 0.0, 1e-320],
        [1e-170, 2e-170, -3e-170],
        [1.5e307, 1.7e308, -1.0e308],
    ],
)
def test_hoyer_sparsity_is_scale_safe(values):
    got = hoyer_sparsity(torch.tensor(values, dtype=F64))
    assert 0.0 <= got <= 1.0
    assert got == pytest.approx(_hoyer_mp(values), rel=1e-13, abs=1e-15)


def test_hoyer_sparsity_is_bit_identical_in_the_normal_range():
    w = torch.randn(3 * 32 * 32, generator=torch.Generator().manual_seed(3), dtype=F64) * 0.17
    for values in (w, w * 1e-100, w * 1e100, w.float()):
        old = torch.as_tensor(values, dtype=F64).flatten()
        ratio = old.abs().sum() / torch.linalg.vector_norm(old)
        expected = float((old.numel() ** 0.5 - ratio) / (old.numel() ** 0.5 - 1))
        assert hoyer_sparsity(values) == expected  # bit for bit
        assert hoyer_sparsity(values) == pytest.approx(_hoyer_mp(old.tolist()), rel=1e-12)


def test_valid_attention_weights_are_unchanged():
    q, k = _qk(), _qk(T=3, e=2) * 0.5
    mask = torch.tensor([[True, False, True], [True, True, True]])
    logits = torch.einsum("nhse,nhte->nhst", q, k) / math.sqrt(2)
    expected = torch.softmax(logits.masked_fill(~mask[:, None, None, :], float("-inf")), dim=-1)
    assert torch.equal(attention_weights(q, k, mask), expected)
    assert torch.equal(attention_weights(q, k), torch.softmax(logits, dim=-1))


def test_valid_calls_still_work():
    assert majority_rate(torch.tensor([0, 1, 1])) == 2 / 3
    attention = SelfAttention(np.int64(4), 2)
    assert attention.heads == 2
    assert len(projection_entries(nn.Sequential(attention))) == 3 * 16
    optimizer = make_optimizer("gd", (p for p in [nn.Parameter(torch.zeros(2))]), lr=0.1)
    assert len(optimizer.param_groups[0]["params"]) == 1
