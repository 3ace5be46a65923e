"""shared_encodings: a call on the last call's input reuses its encoder pass, the same values to the bit; a fresh
pass whenever the input, the weights, the mode or autograd make the kept one stale; one encoding kept at a time."""

import pickle
from copy import deepcopy

import torch
from torch import nn

from attnlab.nets import TextEncoder
from attnlab.nets.classifier import _epoch_row, evaluate
from attnlab.nets.datasets.split import Split
from attnlab.nets.probes import first_token_attention
from attnlab.nets.shared_forward import shared_encodings


def _model() -> TextEncoder:
    return TextEncoder(vocab_size=11, max_len=6, dim=8, depth=2, heads=2, mlp_dim=16, dropout=0.1, seed=3).eval()


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    ids = torch.randint(1, 11, (n, 6), generator=torch.Generator().manual_seed(seed))
    ids[:, -2:] = 0  # padding
    return ids


def _counted(model: nn.Module) -> list[int]:
    calls = [0]
    model.encoder.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def test_second_call_on_the_same_input_is_answered_with_the_same_values():
    model, x, y = _model(), _ids(20), torch.randint(0, 2, (20,), generator=torch.Generator().manual_seed(1))
    alone = (evaluate(model, x, y), first_token_attention(model, x))
    calls = _counted(model)
    with torch.no_grad(), shared_encodings(model):
        shared = (evaluate(model, x, y), first_token_attention(model, x))
    assert calls[0] == 1
    assert shared[0] == alone[0]
    assert torch.equal(shared[1], alone[1])
    assert "_shared_encodings" not in vars(model)  # the answers are dropped after the block


def test_an_input_is_the_same_when_its_values_are_whatever_its_memory():
    model, x = _model(), _ids(20)
    calls = _counted(model)
    with torch.no_grad(), shared_encodings(model):
        model(x[0:20])
        model(x)
        model(x.clone())  # equal values, other memory: the same encoding
        model(x[:10])  # other shape
        model(x[:10].int())  # other dtype
    assert calls[0] == 3


def test_writes_through_data_are_seen():
    # .data has a version counter of its own: keyed on versions, these writes were served the stale encoding
    model, x = _model(), _ids(20)
    with torch.no_grad(), shared_encodings(model):
        a = model(x)
        model.tokens.weight.data.mul_(2)
        b = model(x)
        x_b = x.clone()
        x.data[:, 0] = x[:, 0] % 10 + 1  # every first token changes
        c = model(x)
    with torch.no_grad():
        assert torch.equal(b, model(x_b)) and torch.equal(c, model(x))
    assert not torch.equal(a, b) and not torch.equal(b, c)


def test_inference_mode_is_served_like_no_grad():
    model = _model()
    calls = _counted(model)
    with torch.inference_mode(), shared_encodings(model):
        x = _ids(20)  # an inference tensor: it keeps no version counter to key on
        first = model(x)
        again = model(x)
    assert calls[0] == 1 and torch.equal(first, again)


def test_one_encoding_is_kept_at_a_time():
    model, x = _model(), _ids(40)
    calls = _counted(model)
    with torch.no_grad(), shared_encodings(model):
        for batch in x.split(10):  # a batched evaluation: each batch replaces the one before
            model(batch)
            assert len(vars(model)["_shared_encodings"]) == 1
        model(x[30:40])  # the last batch: answered
        model(x[0:10])  # an earlier batch: encoded again
    assert calls[0] == 5


def test_each_shareable_method_is_answered_from_its_own_last_call():
    model, x = _model(), _ids(8)
    calls = _counted(model)
    with torch.no_grad(), shared_encodings(model):
        first = model.encode_first(x)  # what eval-mode logits and attention maps read
        full = model.encode(x)  # the same input, another method: encoded, not answered with the first token alone
        assert model.encode_first(x) is first and model.encode(x) is full
    assert calls[0] == 2
    assert first[0].shape == (8, 1, 8) and full[0].shape == (8, 6, 8)
    torch.testing.assert_close(first[0], full[0][:, :1], rtol=1e-6, atol=1e-6)  # the same values on any BLAS


def test_stale_answers_are_never_given():
    model, x = _model(), _ids(20)
    calls = _counted(model)
    with shared_encodings(model):
        with torch.no_grad():
            before = model(x)
            model.head.weight.add_(1.0)  # the weights changed in place
            after = model(x)
            x[0, 0] = x[0, 0] % 10 + 1  # the input changed in place
            model(x)
            model.train()  # dropout draws: never shared
            model(x)
            model(x)
            model.eval()
        model(x)  # autograd on: never shared
    assert calls[0] == 6
    assert not torch.equal(before, after)


def test_a_copy_taken_inside_the_block_encodes_with_its_own_weights():
    model, x = _model(), _ids(20)
    with torch.no_grad(), shared_encodings(model):
        before = model(x)
        copy = deepcopy(model)
        copy.head.weight.data = copy.head.weight.data + 1.0  # new memory, no version bump
        assert not torch.equal(copy(x), before)
        model.head.weight.data = model.head.weight.data * 2.0  # the same on the model itself: a new answer
        assert not torch.equal(model(x), before)
    assert vars(copy)["_shared_encodings"] is None  # the copy took no answers
    with shared_encodings(model):
        assert vars(pickle.loads(pickle.dumps(model)))["_shared_encodings"] is None  # nor does a pickled one
    with torch.no_grad(), shared_encodings(copy):  # and can open its own block
        calls = _counted(copy)
        copy(x), copy(x)
    assert calls[0] == 1


def test_models_without_a_shareable_encode_and_nested_blocks_are_left_alone():
    class Plain(nn.Linear):
        def encode(self, x):
            return self(x)

    for plain in (nn.Linear(2, 2), Plain(2, 2)):
        with shared_encodings(plain) as same:
            assert same is plain and "_shared_encodings" not in vars(plain)
    model = _model()
    with shared_encodings(model):
        with shared_encodings(model):
            pass
        assert "_shared_encodings" in vars(model)  # the inner block left the outer one's answers
    assert "_shared_encodings" not in vars(model)


def test_an_epoch_row_encodes_the_test_set_once_for_its_loss_and_its_metric():
    model = _model()
    data = Split(_ids(12, 1), torch.zeros(12, dtype=torch.int64), _ids(30, 2), torch.ones(30, dtype=torch.int64))
    metric = {"cls_to_1": lambda state: float(first_token_attention(state["model"], data.x_test)[:, 1].mean())}
    expected = _epoch_row(model, data, 0, 0, metric, 512)
    calls = _counted(model)
    assert _epoch_row(model, data, 0, 0, metric, 512) == expected
    assert calls[0] == 2  # the training set and the test set, each once
