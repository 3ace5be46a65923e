"""head_W: each supported module's own attention weights are softmax_t(x_t^T W z), to float64 round-off."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.nets.text_encoder import TextEncoder
from attnlab.nets.vit import ViT
from attnlab.probe import has_bias, head_W, module_tokens, weight_part

TOL = 1e-10  # float64 logits formed in another order: round-off only (observed ~1e-16)


def _softmax_weights(module, head, queries, keys):
    """Weights (n, L, T) from attnlab's convention: row s is softmax_t(x_t^T W z_s)."""
    W = head_W(module, head)
    if W.shape[0] == keys.shape[-1] + 1:  # homogeneous: a constant coordinate 1 on every token
        keys = torch.cat([keys, torch.ones(keys.shape[:-1] + (1,), dtype=keys.dtype)], dim=-1)
        queries = torch.cat([queries, torch.ones(queries.shape[:-1] + (1,), dtype=queries.dtype)], dim=-1)
    logits = torch.einsum("ntk,kq,nsq->nst", keys, W, queries)  # x_t^T W z_s
    return torch.softmax(logits, dim=-1)


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _mha(bias, batch_first=True, kdim=None):
    torch.manual_seed(0)  # nn.MultiheadAttention initialises from the global RNG
    mha = nn.MultiheadAttention(6, 3, bias=bias, batch_first=batch_first, kdim=kdim, vdim=kdim, dtype=torch.float64)
    if bias:  # torch initialises the biases to 0: make them matter
        with torch.no_grad():
            mha.in_proj_bias.copy_(_randn(18, seed=5))
    return mha


def _mha_case(bias):
    mha, x = _mha(bias), _randn(4, 5, 6)
    own = lambda: mha(x, x, x, average_attn_weights=False)[1]  # noqa: E731  (n, h, L, T)
    return mha, mha, (x, x, x), own


def _vit_case():
    model = ViT(seed=0, dtype=torch.float64)
    images = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return model, model.encoder.blocks[1].attn, images, lambda: model.attention(images)[1]


def _text_case():
    model = TextEncoder(vocab_size=20, max_len=7, seed=0, dtype=torch.float64)
    ids = torch.randint(1, 20, (3, 7), generator=torch.Generator().manual_seed(2))  # no padding id 0
    return model, model.encoder.blocks[0].attn, ids, lambda: model.attention(ids)[0]


def _bert_case():
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=30,
        hidden_size=12,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=16,
        max_position_embeddings=16,
        attn_implementation="eager",
    )
    torch.manual_seed(0)  # transformers initialises from the global RNG
    model = BertModel(config).double().eval()
    ids = torch.randint(0, 30, (3, 6), generator=torch.Generator().manual_seed(3))
    return model, model.encoder.layer[1].attention.self, ids, lambda: model(ids, output_attentions=True).attentions[1]


def _float64_eager(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' eager attention with its softmax kept in float64 (ViT's own casts the softmax to float32)."""
    weights = torch.softmax(query @ key.transpose(2, 3) * scaling, dim=-1)
    return (weights @ value).transpose(1, 2).contiguous(), weights


def _hf_vit_case(attn_implementation="float64_eager"):
    from transformers import AttentionInterface, ViTConfig, ViTModel

    AttentionInterface.register("float64_eager", _float64_eager)
    config = ViTConfig(
        image_size=8,
        patch_size=2,
        num_channels=1,
        hidden_size=12,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        qkv_bias=True,
        attn_implementation=attn_implementation,
    )
    torch.manual_seed(0)  # transformers initialises from the global RNG
    model = ViTModel(config, add_pooling_layer=False).double().eval()
    images = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    return model, model.layers[0].attention, images, lambda: model(images, output_attentions=True).attentions[0]


CASES = {
    "mha": lambda: _mha_case(False),
    "mha-bias": lambda: _mha_case(True),
    "attnlab-vit": _vit_case,
    "attnlab-text": _text_case,
    "bert": _bert_case,
    "hf-vit": _hf_vit_case,
}


@pytest.mark.parametrize("case", CASES)
def test_head_W_reproduces_the_module_s_own_attention_weights(case):
    model, module, inputs, own_weights = CASES[case]()
    with torch.no_grad():
        expected = own_weights()  # (n, heads, L, T)
    ((queries, keys),) = module_tokens(model, [module], inputs)
    for head in range(expected.shape[1]):
        torch.testing.assert_close(_softmax_weights(module, head, queries, keys), expected[:, head], rtol=0, atol=TOL)


def test_hf_vit_stock_eager_attention_agrees_to_its_float32_softmax():
    """ViT's stock eager kernel rounds the softmax to float32: agreement to float32 precision only."""
    model, module, inputs, own_weights = _hf_vit_case("eager")
    ((queries, keys),) = module_tokens(model, [module], inputs)
    with torch.no_grad():
        expected = own_weights()
    torch.testing.assert_close(
        _softmax_weights(module, 1, queries, keys), expected[:, 1], rtol=0, atol=1e-6
    )  # float32 softmax: ~6e-9 observed


def test_mha_W_is_scaled_key_transpose_times_query_from_in_proj_weight():
    """Written out from torch's layout: rows [0, E) of in_proj_weight are W_Q, [E, 2E) W_K, head h rows h*e..."""
    mha = _mha(False)
    E, e = 6, 2
    W_Q, W_K = mha.in_proj_weight[:E].detach(), mha.in_proj_weight[E:].detach()[:E]
    for head in range(3):
        rows = slice(head * e, (head + 1) * e)
        torch.testing.assert_close(head_W(mha, head), W_K[rows].T @ W_Q[rows] / math.sqrt(e), rtol=0, atol=TOL)


def test_mha_biases_enter_through_the_homogeneous_coordinate():
    mha = _mha(True)
    E, e = 6, 2
    rows = slice(0, e)
    A_Q = torch.cat([mha.in_proj_weight[:E][rows], mha.in_proj_bias[:E][rows, None]], dim=1).detach()
    A_K = torch.cat([mha.in_proj_weight[E : 2 * E][rows], mha.in_proj_bias[E : 2 * E][rows, None]], dim=1).detach()
    W = head_W(mha, 0)
    assert W.shape == (7, 7) and has_bias(mha)
    torch.testing.assert_close(W, A_K.T @ A_Q / math.sqrt(e), rtol=0, atol=TOL)


def test_cross_attention_with_other_key_width_and_sequence_first_layout():
    mha = _mha(True, batch_first=False, kdim=4)
    query, key = _randn(5, 2, 6, seed=1), _randn(3, 2, 4, seed=2)  # (L, n, E), (T, n, kdim)
    with torch.no_grad():
        expected = mha(query, key, key, average_attn_weights=False)[1]
    ((queries, keys),) = module_tokens(mha, [mha], (query, key, key))
    assert head_W(mha, 2).shape == (5, 7)  # (kdim + 1, E + 1)
    torch.testing.assert_close(_softmax_weights(mha, 2, queries, keys), expected[:, 2], rtol=0, atol=TOL)


def test_homogeneous_W_of_a_bias_free_module_pads_zeros():
    mha = _mha(False)
    W, padded = head_W(mha, 1), head_W(mha, 1, homogeneous=True)
    assert padded.shape == (7, 7) and not has_bias(mha)
    torch.testing.assert_close(padded[:6, :6], W, rtol=0, atol=0)
    assert padded[6].abs().max() == 0 and padded[:, 6].abs().max() == 0


def test_weight_part_drops_a_row_that_does_not_change_the_weights():
    mha, x = _mha(True), _randn(2, 4, 6, seed=3)
    W = head_W(mha, 0)
    part = weight_part(W, True)
    assert part[-1].abs().max() == 0 and W[-1].abs().max() > 1e-3  # the row existed and is gone
    tokens = torch.cat([x, torch.ones(2, 4, 1, dtype=torch.float64)], dim=-1)
    logits = lambda M: torch.einsum("ntk,kq,nsq->nst", tokens, M, tokens)  # noqa: E731
    torch.testing.assert_close(torch.softmax(logits(part), -1), torch.softmax(logits(W), -1), rtol=0, atol=TOL)


def test_unknown_module_type_says_how_to_add_an_adapter():
    with pytest.raises(
        TypeError,
        match=r"no adapter for torch.nn.modules.linear.Linear; known types: .*"
        r"MultiheadAttention.*register_adapter\(Linear, attnlab.probe.Adapter",
    ):
        head_W(nn.Linear(3, 3), 0)
    with pytest.raises(TypeError, match="module must be a torch.nn.Module"):
        head_W("attention", 0)


def test_a_layer_around_the_attention_is_refused_with_the_module_to_pass():
    layer = nn.TransformerEncoderLayer(6, 2, batch_first=True)
    with pytest.raises(TypeError, match=r"Pass the attention module itself \(e.g. model.encoder.layers\[0\].self_attn"):
        head_W(layer, 0)
    assert head_W(layer.self_attn, 1).shape == (7, 7)  # TransformerEncoderLayer's attention has biases


def test_head_index_out_of_range_or_not_an_int():
    with pytest.raises(ValidationError, match=r"head == 3, must be in \[0, 2\]: MultiheadAttention has 3 heads"):
        head_W(_mha(False), 3)
    with pytest.raises(ValidationError, match=r"head == -1, must be in \[0, 2\]"):
        head_W(_mha(False), -1)
    with pytest.raises(ValidationError, match=r"head must be an int in \[0, 2\], got 1.0"):
        head_W(_mha(False), 1.0)


def test_a_head_index_of_any_integral_type_is_accepted():
    """head_W refused np.int64(1) ("head must be an int"); the project's checks take any integral type."""
    mha = _mha(True)
    for head in (np.int64(1), np.int32(1), torch.tensor(1)):
        torch.testing.assert_close(head_W(mha, head), head_W(mha, 1), rtol=0, atol=0)
    for head in (np.float64(1.0), torch.tensor(1.0), True):
        with pytest.raises(ValidationError, match=r"head must be an int in \[0, 2\]"):
            head_W(mha, head)
    with pytest.raises(ValidationError, match=r"head == 3, must be in \[0, 2\]"):
        head_W(mha, np.int64(3))


def test_weight_part_takes_only_a_bool():
    """weight_part(W, "no") read "no" as True and zeroed the last real row of a W without a homogeneous row."""
    W = head_W(_mha(False), 0)
    for flag in ("no", 1, None):
        with pytest.raises(ValidationError, match="homogeneous == .*, must be a bool"):
            weight_part(W, flag)
    with pytest.raises(ValidationError, match=r"W must be a tensor of shape \(\.\.\., d_k, d_q\)"):
        weight_part(W[0], True)
    assert weight_part(W, np.False_) is W


def test_biases_without_homogeneous_coordinates_are_refused():
    with pytest.raises(ValidationError, match="homogeneous=False, but MultiheadAttention has query/key biases"):
        head_W(_mha(True), 0, homogeneous=False)


def test_mha_extra_key_tokens_are_refused():
    mha = nn.MultiheadAttention(4, 2, add_bias_kv=True)
    with pytest.raises(ValidationError, match="add_bias_kv=True or add_zero_attn=True"):
        head_W(mha, 0)
