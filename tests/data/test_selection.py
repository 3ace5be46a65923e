"""Selection: every form of select= parsed once at the boundary, and passed inward without being checked again."""

import pytest
import torch

import attnlab._validation as validation
import attnlab.data.selection as selection_module
from attnlab._validation import ValidationError
from attnlab.data import Selection, example1
from attnlab.svm import attention_svm


@pytest.mark.parametrize(
    "value,tokens,sets",
    [
        ([0, 2, 1], [0, 2, 1], None),
        (torch.tensor([0, 2, 1]), [0, 2, 1], None),
        ([[0, 1], [2], [1, 3]], None, [[1, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1]]),
        (torch.tensor([[1, 1, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1]], dtype=torch.bool), None, None),
    ],
)
def test_every_form_parses_into_indices_or_a_mask(value, tokens, sets):
    parsed = Selection.parse(value, n=3, T=4)
    assert Selection.parse(parsed, n=3, T=4) is parsed  # a Selection passes through
    if tokens is not None:
        assert parsed.tokens.tolist() == tokens and not parsed.is_sets
    else:
        assert parsed.is_sets and parsed.sets.dtype == torch.bool
        if sets is not None:
            assert parsed.sets.int().tolist() == sets


def test_per_run_indices_and_the_attended_tokens():
    assert Selection.parse([[0, 1, 2], [3, 3, 0]], n=3, T=4, runs=2).tokens.shape == (2, 3)
    logits = torch.tensor([[[0.0, 2.0, 1.0], [5.0, -1.0, 4.9]]])  # (R, n, T)
    assert Selection.attended(logits).tokens.tolist() == [[1, 0]]


@pytest.mark.parametrize(
    "value,message",
    [([0, 4, 1], r"outside \[0, 3\]"), ([0.0, 1.0, 2.0], "floats are not rounded"), ([[0], [], [1]], "empty")],
)
def test_bad_selections_are_refused_by_name(value, message):
    with pytest.raises(ValidationError, match=message):
        Selection.parse(value, n=3, T=4)


def test_a_one_token_program_refuses_sets_by_name():
    sets = Selection.parse([[0, 1], [2], [1, 3]], n=3, T=4)
    with pytest.raises(ValidationError, match="takes one selected token per sequence.*token sets"):
        sets.one_token("the attention SVM")


def test_typed_inputs_are_not_checked_again_inside(monkeypatch):
    """A Selection handed to attention_svm, and data.with_(select=...), check nothing that is checked already."""
    data = example1(n=4, T=3, d=8, seed=0)
    chosen = Selection.parse(data.optimal_tokens(), data.n, data.T)
    calls = []
    for module, name in ((selection_module, "check_select"), (validation, "check_tensor")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k))
    import attnlab.data.dataset as dataset_module

    monkeypatch.setattr(dataset_module, "check_tensor", validation.check_tensor)
    attention_svm(data, "fro", select=chosen)
    assert calls == []  # neither the selection nor the tokens were validated again
    data.with_(select=[0, 0, 0, 0])
    assert calls == ["check_select"]  # the new selection only: X, Z, y, v are kept as checked
