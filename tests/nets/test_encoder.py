"""Tests of the encoder: attention weights against a plain loop and against PyTorch's fused attention."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.nets.encoder import Encoder, SelfAttention, attention_weights, init_weights


def _reference_weights(q, k, key_mask):
    """Slow loop from the formula: softmax over real keys of q_s . k_t / sqrt(e), zero on padded keys."""
    n, h, T, e = q.shape
    out = torch.zeros(n, h, T, T, dtype=q.dtype)
    for b in range(n):
        real = [t for t in range(T) if key_mask[b, t]]
        for head in range(h):
            for s in range(T):
                scores = torch.tensor([float(q[b, head, s] @ k[b, head, t]) / math.sqrt(e) for t in real])
                out[b, head, s, real] = torch.softmax(scores, dim=0).to(q.dtype)
    return out


def test_attention_weights_match_a_plain_loop_and_ignore_padded_keys():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 5, 4, generator=g), torch.randn(2, 3, 5, 4, generator=g)
    key_mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    weights = attention_weights(q, k, key_mask)
    torch.testing.assert_close(weights, _reference_weights(q, k, key_mask), rtol=1e-12, atol=1e-12)  # float64
    assert torch.all(weights[1, :, :, 3:] == 0)


def test_self_attention_equals_torch_scaled_dot_product_attention():
    attention = SelfAttention(dim=8, heads=2).double()
    init_weights(attention, torch.Generator().manual_seed(1), std=0.5)
    x = torch.randn(3, 6, 8, generator=torch.Generator().manual_seed(2))
    key_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 2 + [False] * 4])
    out, weights = attention(x, key_mask)

    def heads(t):
        return t.view(3, 6, 2, 4).transpose(1, 2)

    fused = F.scaled_dot_product_attention(
        heads(attention.q(x)), heads(attention.k(x)), heads(attention.v(x)), attn_mask=key_mask[:, None, None, :]
    )
    expected = attention.out(fused.transpose(1, 2).reshape(3, 6, 8))
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)  # float64, two summation orders
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 6, dtype=torch.float64))


def test_init_weights_depends_only_on_the_generator_and_leaves_the_global_rng_alone():
    first, second = Encoder(8, 2, 2, 16, 0.0, True), Encoder(8, 2, 2, 16, 0.0, True)
    state = torch.get_rng_state()
    init_weights(first, torch.Generator().manual_seed(5))
    init_weights(second, torch.Generator().manual_seed(5))
    assert torch.equal(torch.get_rng_state(), state)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    assert all(torch.all(block.norm1.weight == 1) for block in first.blocks)


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_first_only_is_the_full_encoders_first_token_and_weights(norm_first, dtype):
    # the truth: the full pass (every token through every block), its first token read off; the weights are the
    # same computation, the states the same values up to the rounding of a product over fewer rows (MKL here: the
    # same bits in float32, not always in float64)
    encoder = Encoder(dim=8, depth=2, heads=2, mlp_dim=16, dropout=0.0, norm_first=norm_first).to(dtype)
    init_weights(encoder, torch.Generator().manual_seed(0), std=0.5)
    x = torch.randn(5, 7, 8, generator=torch.Generator().manual_seed(1), dtype=dtype)
    key_mask = torch.ones(5, 7, dtype=torch.bool)
    key_mask[1, 4:] = False
    with torch.no_grad():
        full, weights = encoder(x, key_mask)
        first, first_weights = encoder(x, key_mask, first_only=True)
    assert first.shape == (5, 1, 8)
    torch.testing.assert_close(first, full[:, :1])
    assert all(torch.equal(a, b) for a, b in zip(first_weights, weights))
