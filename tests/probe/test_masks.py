"""capture with attention masks: the captured keys of each query are the ones the module lets it see, so the
captured data reproduce the module's own weights (torch's ``need_weights`` output, transformers'
``output_attentions``, attnlab's encoder) to 1e-12; what no ``x^T W z`` can carry is refused by name."""

import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from attnlab._validation import ValidationError
from attnlab.models.functional import attention_probabilities
from attnlab.probe import capture, head_W

TOL = 1e-12  # float64 round-off of one softmax row


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _mha(heads=2, bias=True, seed=0):
    torch.manual_seed(seed)  # torch initialises the module from the global RNG
    return nn.MultiheadAttention(6, heads, bias=bias, batch_first=True, dtype=torch.float64)


def _weights(mha, x, **masks):
    with torch.no_grad():
        return mha(x, x, x, average_attn_weights=False, **masks)[1]  # (n, heads, L, T)


def _reproduces(data, mha, head, own):
    """The captured data's softmax under the head's W equals the module's weights on the visible keys."""
    mine = attention_probabilities(data.X, head_W(mha, head), data.Z)
    torch.testing.assert_close(mine, own, rtol=0, atol=TOL)


CAUSAL = torch.ones(5, 5, dtype=torch.bool).triu(diagonal=1)  # True: a key after the query, masked


@pytest.mark.parametrize("query", [1, 3, 4])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_a_causal_attn_mask_leaves_each_query_its_prefix(query, kind):
    mha, x = _mha(), _randn(3, 5, 6, seed=1)
    mask = CAUSAL if kind == "bool" else nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    own = _weights(mha, x, attn_mask=mask)
    for head in (0, 1):
        data = capture(_Masked(mha, attn_mask=mask), mha, x, query=query)
        assert data.T == query + 1  # keys 0..query
        torch.testing.assert_close(data.X[..., :6], x[:, : query + 1], rtol=0, atol=0)
        _reproduces(data, mha, head, own[:, head, query, : query + 1])
        assert float(own[:, head, query, query + 1 :].sum()) == 0.0  # the keys after the query got no weight


class _Masked(nn.Module):
    """Calls the module on x with the masks given (a model whose forward passes its masks on)."""

    def __init__(self, module, **masks):
        super().__init__()
        self.module, self.masks = module, masks

    def forward(self, x):
        return self.module(x, x, x, **self.masks)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_a_key_padding_mask_drops_each_sequences_padding(kind):
    """Two padded keys per sequence, at other positions in each: every query sees its sequence's three others."""
    mha, x = _mha(), _randn(3, 5, 6, seed=2)
    padding = torch.tensor([[0, 0, 0, 1, 1], [1, 0, 0, 1, 0], [0, 1, 0, 0, 1]], dtype=torch.bool)
    mask = padding if kind == "bool" else torch.zeros(3, 5, dtype=torch.float64).masked_fill(padding, -math.inf)
    own = _weights(mha, x, key_padding_mask=mask)
    data = capture(_Masked(mha, key_padding_mask=mask), mha, x, query=2)
    assert data.T == 3
    for i in range(3):
        torch.testing.assert_close(data.X[i, :, :6], x[i, ~padding[i]], rtol=0, atol=0)
    for head in (0, 1):
        _reproduces(data, mha, head, own[:, head, 2][~padding].reshape(3, 3))


def test_both_masks_together_and_every_query_with_padding():
    mha, x = _mha(bias=False), _randn(2, 4, 6, seed=3)
    padding = torch.tensor([[0, 0, 0, 1], [1, 0, 0, 0]], dtype=torch.bool)
    window = torch.tensor([[0, 0, 1, 0]] * 4, dtype=torch.bool)  # key 2 hidden from every query
    own = _weights(mha, x, key_padding_mask=padding, attn_mask=window)
    data = capture(_Masked(mha, key_padding_mask=padding, attn_mask=window), mha, x, query="all", head=1)
    assert (data.n, data.T) == (8, 2)  # problem i L + l: sequence i's query l over its two visible keys
    visible = ~(padding[:, None, :] | window[None])  # (n, L, T)
    _reproduces(data, mha, 1, own[:, 1][visible].reshape(8, 2))


def test_a_per_head_attn_mask_is_read_for_the_head_asked_for():
    mha, x = _mha(), _randn(2, 4, 6, seed=4)
    per_head = torch.zeros(4, 4, 4, dtype=torch.bool)  # (n * heads, L, T), row n * 2 + h
    per_head[0::2, :, 3] = True  # head 0 never sees key 3
    per_head[1::2, :, 0] = True  # head 1 never sees key 0
    own = _weights(mha, x, attn_mask=per_head)
    model = _Masked(mha, attn_mask=per_head)
    for head, hidden in ((0, 3), (1, 0)):
        data = capture(model, mha, x, query=1, head=head, select="attended")
        keep = [t for t in range(4) if t != hidden]
        _reproduces(data, mha, head, own[:, head, 1, keep])
        assert data.select.tolist() == own[:, head, 1, keep].argmax(-1).tolist()
    with pytest.raises(ValidationError, match="differs between heads.*head=<index>"):
        capture(model, mha, x, query=1)


def test_the_head_index_is_checked_before_a_mask_is_read():
    """With a mask, head=7 indexed the mask (a bare IndexError) and "x" was ignored; a numpy index read no mask."""
    mha, x = _mha(), _randn(2, 5, 6, seed=7)
    padding = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 1, 1]], dtype=torch.bool)
    model = _Masked(mha, key_padding_mask=padding)
    with pytest.raises(ValidationError, match=r"head == 7, must be in \[0, 1\]: MultiheadAttention has 2 heads"):
        capture(model, mha, x, head=7, select=[0, 0])
    for where in (model, mha):  # with and without a mask
        inputs = x if where is model else (x, x, x)
        with pytest.raises(ValidationError, match=r'head must be an int in \[0, 1\] or "all", got \'x\''):
            capture(where, mha, inputs, head="x")
    per_head = torch.zeros(4, 5, 5, dtype=torch.bool)
    per_head[1::2, :, 0] = True  # head 1 never sees key 0
    data = capture(_Masked(mha, attn_mask=per_head), mha, x, query=1, head=np.int64(1), select="attended")
    _reproduces(data, mha, 1, _weights(mha, x, attn_mask=per_head)[:, 1, 1, 1:])


def test_the_causal_hint_of_an_encoder_layer_is_the_causal_mask():
    """nn.TransformerEncoderLayer calls self_attn with need_weights=False: with is_causal=True torch hands its
    kernel the causal flag (the attn_mask is only a hint). capture reads the causal mask then."""
    torch.manual_seed(5)
    layer = nn.TransformerEncoderLayer(6, 2, dim_feedforward=8, dropout=0.0, batch_first=True, dtype=torch.float64)
    layer.eval()
    x = _randn(3, 5, 6, seed=5)
    data = capture(_Layer(layer), layer.self_attn, x, query=2)
    own = _weights(layer.self_attn, x, attn_mask=CAUSAL)
    assert data.T == 3
    _reproduces(data, layer.self_attn, 0, own[:, 0, 2, :3])


class _Layer(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x, src_mask=CAUSAL, is_causal=True)


def test_what_no_token_selection_data_can_hold_is_refused_by_name():
    mha, x = _mha(), _randn(2, 5, 6, seed=6)
    bias = torch.zeros(5, 5, dtype=torch.float64)
    bias[:, 1] = -0.5  # an additive bias of a key (as ALiBi's): not a bilinear form of the tokens
    with pytest.raises(ValidationError, match=r"finite non-zero entries \(e.g. -0.5\).*bias"):
        capture(_Masked(mha, attn_mask=bias), mha, x)
    with pytest.raises(ValidationError, match=r"different numbers of keys \(problem: keys 0: 1, 1: 2, 2: 3.*query=l"):
        capture(_Masked(mha, attn_mask=CAUSAL), mha, x, query="all")
    ragged = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.bool)
    with pytest.raises(ValidationError, match=r"different numbers of keys \(problem: keys 0: 3, 1: 4\).*equal length"):
        capture(_Masked(mha, key_padding_mask=ragged), mha, x)
    with pytest.raises(ValidationError, match=r"leaves each problem 1 key\(s\)"):
        capture(_Masked(mha, attn_mask=CAUSAL), mha, x, query=0)


def test_attnlab_encoder_key_mask_is_read():
    from attnlab.nets.encoder import SelfAttention, attention_weights

    torch.manual_seed(7)
    attn = SelfAttention(6, 2).double()
    x = _randn(2, 5, 6, seed=7)
    key_mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 0]], dtype=torch.bool)  # True: a real token
    with torch.no_grad():
        own = attention_weights(attn._split(attn.q(x)), attn._split(attn.k(x)), key_mask)  # (n, h, T, T)
    data = capture(_KeyMasked(attn, key_mask), attn, x, query=2)
    for head in (0, 1):
        mine = attention_probabilities(data.X, head_W(attn, head), data.Z)
        torch.testing.assert_close(mine, own[:, head, 2][key_mask].reshape(2, 3), rtol=0, atol=TOL)


class _KeyMasked(nn.Module):
    def __init__(self, attn, key_mask):
        super().__init__()
        self.attn, self.key_mask = attn, key_mask

    def forward(self, x):
        return self.attn(x, key_mask=self.key_mask)


def test_transformers_padding_mask_is_read():
    from tests.probe.test_head import _bert_case

    model, module, ids, _ = _bert_case()  # ids (3, 6); its second layer's self-attention
    attention_mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 0, 1, 1, 0], [0, 1, 1, 1, 1, 0]])  # four keys each
    with torch.no_grad():
        own = model(ids, attention_mask=attention_mask, output_attentions=True).attentions[1]  # (n, h, T, T)
    data = capture(model, module, {"input_ids": ids, "attention_mask": attention_mask}, query=1)
    assert data.T == 4
    for head in range(3):
        mine = attention_probabilities(data.X, head_W(module, head), data.Z)
        torch.testing.assert_close(mine, own[:, head, 1][attention_mask.bool()].reshape(3, 4), rtol=0, atol=TOL)


def test_the_tutorials_causal_example_runs_and_prints_what_it_says():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "tutorial" / "your-model.md").read_text(encoding="utf-8")
    section = text.split("## Causal token selection", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    printed = []
    namespace = {"print": lambda *a: printed.append(a)}
    exec(compile(block, "your-model.md", "exec"), namespace)
    assert printed == [([2, 3, 4, 5, 6],), (True,)]
    for s, data in namespace["prefixes"].items():  # each prefix's SVM separates the head's own selection
        svm = namespace["svms"][s]
        assert svm.margin == pytest.approx(1.0, abs=1e-6) and torch.equal(svm.select, data.select)
