"""Tests of the E4 text encoder: padding is invisible, the prediction comes from the first token."""

import torch

from attnlab.nets.text_encoder import TextEncoder


def _model(**kwargs):
    return TextEncoder(
        vocab_size=30, max_len=12, dim=16, depth=2, heads=2, mlp_dim=32, seed=0, dtype=torch.float64, **kwargs
    )


def test_padding_does_not_change_the_prediction():
    model = _model()
    ids = torch.tensor([[1, 5, 9, 7, 3]])
    padded = torch.cat([ids, torch.zeros(1, 7, dtype=torch.int64)], dim=1)
    torch.testing.assert_close(model(ids), model(padded), rtol=1e-12, atol=1e-12)  # float64; only masking differs
    assert torch.all(model.attention(padded)[-1][0, :, :, 5:] == 0)


def test_prediction_depends_on_tokens_after_the_first():
    model = _model()
    a, b = torch.tensor([[1, 5, 9, 7]]), torch.tensor([[1, 5, 9, 8]])
    assert not torch.allclose(model(a), model(b))
    assert model(a).shape == (1, 2)
