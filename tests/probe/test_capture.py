"""capture: the tokens entering an attention module, as token-selection data the SVM and explain accept."""

import pytest
import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.models.functional import attention_probabilities
from attnlab.probe import capture, head_W
from attnlab.svm import attention_svm

TOL = 1e-10  # float64 round-off


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _encoder_layer():
    torch.manual_seed(0)  # torch initialises the layer from the global RNG
    return nn.TransformerEncoderLayer(
        6, 2, dim_feedforward=8, dropout=0.0, batch_first=True, dtype=torch.float64
    ).eval()


def test_tokens_entering_self_attention_of_an_encoder_layer_even_on_its_fast_path():
    """Post-LN layer: self_attn gets the layer's input. In eval mode under no_grad torch would skip
    self_attn.forward (its fused fast path); capture runs with gradients enabled so the hook fires."""
    layer, x = _encoder_layer(), _randn(4, 5, 6)
    with torch.no_grad():
        data = capture(layer, layer.self_attn, x, query=1)
    ones = torch.ones(4, 5, 1, dtype=torch.float64)
    torch.testing.assert_close(data.X, torch.cat([x, ones], dim=-1), rtol=0, atol=0)
    torch.testing.assert_close(data.Z, torch.cat([x[:, 1], ones[:, 0]], dim=-1), rtol=0, atol=0)
    assert data.y.tolist() == [1.0] * 4 and data.v is None and data.select is None


def test_attended_selection_is_the_argmax_of_the_module_s_own_weights():
    layer, x = _encoder_layer(), _randn(6, 5, 6, seed=1)
    with torch.no_grad():
        _, own = layer.self_attn(x, x, x, average_attn_weights=False)  # (n, h, L, T)
    data = capture(layer, layer.self_attn, x, query=0, select="attended", head=1)
    assert data.select.tolist() == own[:, 1, 0].argmax(-1).tolist()
    torch.testing.assert_close(
        attention_probabilities(data.X, head_W(layer.self_attn, 1), data.Z), own[:, 1, 0], rtol=0, atol=TOL
    )


def test_causal_keys_and_a_head_and_labels_are_carried():
    mha, x = nn.MultiheadAttention(4, 2, bias=False, batch_first=True, dtype=torch.float64), _randn(3, 6, 4, seed=2)
    causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)  # True: key after the query, masked
    with torch.no_grad():
        _, own = mha(x, x, x, attn_mask=causal, average_attn_weights=False)
    data = capture(mha, mha, (x, x, x), query=3, keys=slice(0, 4), y=[1, -1, 1], v=[1.0, 0.0, 0.0, 0.0])
    assert data.T == 4 and data.y.tolist() == [1.0, -1.0, 1.0]
    torch.testing.assert_close(
        attention_probabilities(data.X, head_W(mha, 0), data.Z), own[:, 0, 3, :4], rtol=0, atol=TOL
    )
    torch.testing.assert_close(data.token_scores(), data.y[:, None] * x[:, :4, 0], rtol=0, atol=0)


def test_homogeneous_head_gets_a_zero_for_the_constant_coordinate():
    layer, x = _encoder_layer(), _randn(2, 3, 6, seed=3)
    data = capture(layer, layer.self_attn, x, v=torch.ones(6))
    assert data.v.tolist() == [1.0] * 6 + [0.0]


def test_captured_tokens_feed_the_attention_svm():
    """The head's own selection on its own tokens is a valid SVM input; the solution separates it (margin 1)."""
    layer, x = _encoder_layer(), _randn(8, 4, 6, seed=4)
    data = capture(layer, layer.self_attn, x, select="attended", head=0)
    solution = attention_svm(data, "fro", method="dual")
    logits = torch.einsum("ntk,kq,nq->nt", data.X, solution.W, data.Z)
    assert logits.argmax(-1).tolist() == data.select.tolist()
    assert solution.margin == pytest.approx(1.0, abs=1e-6)  # the SVM's own KKT tolerance


def test_module_not_called_by_the_model():
    layer, other = _encoder_layer(), nn.MultiheadAttention(6, 2, batch_first=True, dtype=torch.float64)
    with pytest.raises(ValidationError, match="was not called when running model"):
        capture(layer, other, _randn(2, 3, 6))


def test_tokens_of_the_wrong_width_or_layout():
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
    with pytest.raises(
        ValidationError,
        match=r"query entering the attention module has shape \(2, 3, 5\), "
        r"expected \(n, L, d\) with d = 4",
    ):
        capture(_Caller(mha, _randn(2, 3, 5)), mha, None)


class _Caller(nn.Module):
    """Calls an attention module on fixed tokens: capture's pre-hook sees them before torch's own shape check."""

    def __init__(self, module, x):
        super().__init__()
        self.module, self.x = module, x

    def forward(self, _):
        return self.module(self.x, self.x, self.x)


def test_query_keys_and_select_out_of_range():
    mha, x = nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64), _randn(2, 3, 4)
    with pytest.raises(ValidationError, match="query == 3, must be <= 2"):
        capture(mha, mha, (x, x, x), query=3)
    with pytest.raises(ValidationError, match=r"keys must pick at least 2 key tokens among the 3"):
        capture(mha, mha, (x, x, x), keys=[0, 7])
    with pytest.raises(ValidationError, match=r"keys == \[2, -1\] picks a key token twice \(\[2, 2\]\)"):
        capture(mha, mha, (x, x, x), keys=[2, -1])  # the same token twice: no W separates it from itself
    with pytest.raises(ValidationError, match="select == 'attended': pass \"attended\" .* together with head"):
        capture(mha, mha, (x, x, x), select="attended")
    with pytest.raises(ValidationError, match=r"select holds indices outside \[0, 2\]"):
        capture(mha, mha, (x, x, x), select=[0, 5])


def test_every_query_token_is_a_problem_with_query_all():
    """query="all": problem i L + l is sequence i's l-th query over its keys; the attended tokens are the head's."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64, bias=False)
    x = torch.randn(3, 5, 4, dtype=torch.float64)
    data = capture(mha, mha, (x, x, x), query="all", y=[1, -1, 1], select="attended", head=1)
    assert (data.n, data.T, data.d) == (15, 5, 4)
    for i in range(3):
        for q in range(5):
            assert torch.equal(data.Z[5 * i + q], x[i, q]) and torch.equal(data.X[5 * i + q], x[i])
            assert data.y[5 * i + q] == [1, -1, 1][i]
    _, weights = mha(x, x, x, average_attn_weights=False)  # (n, heads, L, T): the module's own softmax
    assert torch.equal(data.select, weights[:, 1].argmax(dim=-1).reshape(-1))


def test_token_sets_pass_through_capture():
    mha = nn.MultiheadAttention(4, 1, batch_first=True, dtype=torch.float64, bias=False)
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    data = capture(mha, mha, (x, x, x), select=[[0, 1], [2]])
    assert data.select.shape == (2, 3) and data.select.dtype == torch.bool


def test_head_all_returns_one_data_set_per_head():
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64)
    x = torch.randn(6, 5, 4, dtype=torch.float64)
    per_head = capture(mha, mha, (x, x, x), select="attended", head="all")
    assert len(per_head) == 2
    _, weights = mha(x, x, x, average_attn_weights=False)  # (n, heads, L, T)
    for h, data in enumerate(per_head):
        assert torch.equal(data.select, weights[:, h, 0].argmax(dim=-1))  # query 0, head h's own arg-max
    with pytest.raises(ValidationError, match='pass select="attended"'):
        capture(mha, mha, (x, x, x), head="all")


@pytest.mark.parametrize("bias", [False, True])
def test_cross_attention_with_another_key_width_reproduces_torchs_weights_per_head(bias):
    # issue 21 item 5 (was issue 23's refusal): kdim = 6 keys, embed_dim = 8 queries, W of each head (d_k, d_q)
    from attnlab.explain import explain

    torch.manual_seed(3)
    mha = nn.MultiheadAttention(embed_dim=8, num_heads=2, kdim=6, vdim=6, bias=bias, batch_first=True)
    mha = mha.to(torch.float64)
    q, k = torch.randn(5, 3, 8, dtype=torch.float64), torch.randn(5, 7, 6, dtype=torch.float64)
    _, weights = mha(q, k, k, need_weights=True, average_attn_weights=False)  # (n, heads, L, T)
    per_head = capture(mha, mha, (q, k, k), query=2, select="attended", head="all")
    extra = 1 if bias else 0  # homogeneous coordinates with biases
    for h, data in enumerate(per_head):
        W = head_W(mha, h)
        assert W.shape == (6 + extra, 8 + extra) and (data.d, data.d_q) == (6 + extra, 8 + extra)
        torch.testing.assert_close(
            attention_probabilities(data.X, W, data.Z), weights[:, h, 2].detach(), rtol=0, atol=1e-10
        )
        assert torch.equal(data.select, weights[:, h, 2].argmax(dim=-1))
    everyone = capture(mha, mha, (q, k, k), query="all", v=torch.ones(6, dtype=torch.float64))
    assert (everyone.n, everyone.d, everyone.d_q) == (15, 6 + extra, 8 + extra)
    with pytest.raises(
        ValidationError, match=r"v has shape \(8,\): axis 'd' has size 8, but earlier arguments fixed d = 6"
    ):
        capture(mha, mha, (q, k, k), v=torch.ones(8, dtype=torch.float64))
    data = per_head[0].with_(v=torch.linspace(-1.0, 1.0, 6 + extra, dtype=torch.float64))
    result = explain(data, "W", "ngd", steps=200, lr=0.3, max_selections=2)
    assert result.W.shape == (6 + extra, 8 + extra)
    assert {"fro", "nuc"} <= set(result.table["candidate"])
    assert any("d_q != d" in reason for reason in result.skipped)


def _two_token_head(scale: float):
    """One head whose logits are ``scale x^T z / sqrt(2)``: keys 0 and 1 tie on top, keys 2 and 3 far below."""
    mha = nn.MultiheadAttention(2, 1, batch_first=True, dtype=torch.float64, bias=False)
    with torch.no_grad():
        eye = torch.eye(2, dtype=torch.float64)
        mha.in_proj_weight.copy_(torch.cat([scale * eye, eye, eye]))
    keys = torch.tensor([[[1.0, 0.5], [1.0, -0.5], [-1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64).repeat(2, 1, 1)
    tokens = torch.cat([torch.tensor([[[1.0, 0.0]]], dtype=torch.float64).repeat(2, 1, 1), keys], dim=1)
    return mha, tokens


def test_attended_sets_are_the_tokens_above_the_threshold_of_the_heads_own_softmax():
    mha, tokens = _two_token_head(scale=40.0)
    q, k = tokens[:, :1], tokens[:, 1:]
    data = capture(mha, mha, (q, k, k), select="attended-sets", head=0)
    assert data.select.tolist() == [[True, True, False, False]] * 2
    # the head's own weights, from torch: two tokens share the mass, the others are below 1e-6
    _, weights = mha(q, k, k, need_weights=True)
    assert torch.allclose(weights[:, 0, :2], torch.full((2, 2), 0.5, dtype=torch.float64), atol=1e-9)
    assert float(weights[:, 0, 2:].max().detach()) < 1e-6
    (per_head,) = capture(mha, mha, (q, k, k), select="attended-sets", head="all")
    assert torch.equal(per_head.select, data.select)


def test_attended_sets_refuse_a_head_that_has_not_saturated_and_name_the_sequences():
    mha, tokens = _two_token_head(scale=4.0)  # weights 0.485, 0.485, 0.0017, 0.029: every one above 1e-3
    q, k = tokens[:, :1], tokens[:, 1:]
    with pytest.raises(ValidationError, match=r"sequences \[0, 1\].*whole sequence"):
        capture(mha, mha, (q, k, k), select="attended-sets", head=0)
    loose = capture(mha, mha, (q, k, k), select="attended-sets", head=0, thresholds=(2e-3, 2e-2))
    assert loose.select.tolist() == [[True, True, False, True]] * 2
