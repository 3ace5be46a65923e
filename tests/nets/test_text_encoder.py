"""Tests of the E4 text encoder: padding is invisible, the prediction comes from the first token."""

import pytest
import torch

from attnlab._validation import ValidationError
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


def test_eval_logits_read_the_first_token_alone_and_equal_the_full_pass():
    # real.text's sizes, float32: the eval path (encode_first) gives the full pass's values, to the bit with this
    # machine's MKL; a product over fewer rows may round differently on another BLAS, so the test allows for that
    model = TextEncoder(vocab_size=64, max_len=33, dim=32, depth=2, heads=2, mlp_dim=64, seed=2).eval()
    ids = torch.randint(1, 64, (41, 33), generator=torch.Generator().manual_seed(0))
    ids[:5, 20:] = 0  # padding
    with torch.no_grad():
        states, attention = model.encode(ids)
        torch.testing.assert_close(model(ids), model.head(states[:, 0]), rtol=1e-6, atol=1e-6)  # any BLAS
        assert all(torch.equal(a, b) for a, b in zip(model.attention(ids), attention))


@pytest.mark.parametrize(
    ("ids", "match"),
    [
        (torch.tensor([1, 2, 3]), r"an \(n, L\) tensor of int64 token ids, got \(3,\)"),
        (torch.tensor([[1.0, 2.0]]), "int64 token ids"),
        (torch.tensor([[1, 2, 3, 4, 5, 6, 7]]), "L = 7 tokens > max_len == 6"),
        (torch.tensor([[1, 25]]), r"ids must lie in \[0, 19\]"),
        (torch.tensor([[1, -1]]), r"ids must lie in \[0, 19\]"),
        (torch.tensor([[1, 2], [0, 0]]), "padding only"),
    ],
)
def test_bad_ids_are_refused_by_name(ids, match):
    """Each was a bare IndexError, a size mismatch or, padding only, NaN logits."""
    model = TextEncoder(vocab_size=20, max_len=6, seed=0)
    with pytest.raises(ValidationError, match=match):
        model(ids)


def test_a_dtype_that_is_not_a_float_dtype_is_refused():
    with pytest.raises(ValidationError, match="dtype == 'float64', must be a floating torch.dtype"):
        TextEncoder(vocab_size=20, max_len=6, dtype="float64")
