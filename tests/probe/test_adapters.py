"""The adapter registry: a user's module type plugs in by class or by dotted name; subclasses inherit."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import attnlab.probe.adapters as adapters
from attnlab._validation import ValidationError
from attnlab.probe import Adapter, adapter_for, capture, head_W, linear_projection, register_adapter, registered

TOL = 1e-10  # float64 round-off


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    """Each test registers into a copy of the registry, so no registration leaks into another test."""
    monkeypatch.setattr(adapters, "_REGISTRY", dict(adapters._REGISTRY))


class ScaledAttention(nn.Module):
    """A user's single-module attention with its own temperature: weights softmax(q k^T * temperature)."""

    def __init__(self, d=4, heads=2, temperature=0.3):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.heads, self.temperature = heads, temperature
        self.to_q, self.to_k = nn.Linear(d, d).double(), nn.Linear(d, d).double()
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))

    def forward(self, x):
        n, T, d = x.shape
        q = self.to_q(x).view(n, T, self.heads, -1).transpose(1, 2)
        k = self.to_k(x).view(n, T, self.heads, -1).transpose(1, 2)
        return torch.softmax(q @ k.transpose(-1, -2) * self.temperature, dim=-1)  # (n, h, T, T)


def _adapter():
    return Adapter(
        heads=lambda m: m.heads,
        projection=lambda m, h: linear_projection(m.to_q, m.to_k, h, m.heads, scale=m.temperature),
        tokens=lambda m, args, kwargs: (args[0], args[0]),
    )


def test_a_registered_user_module_reproduces_its_weights():
    register_adapter(ScaledAttention, _adapter())
    module = ScaledAttention()
    x = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    own = module(x)
    for head in range(2):
        data = capture(module, module, x, query=2)
        logits = torch.einsum("ntk,kq,nq->nt", data.X, head_W(module, head), data.Z)
        torch.testing.assert_close(torch.softmax(logits, -1), own[:, head, 2], rtol=0, atol=TOL)
    assert f"{ScaledAttention.__module__}.ScaledAttention" in registered()


def test_registration_by_dotted_name_and_subclasses_inherit():
    class Local(ScaledAttention):
        pass

    class Child(Local):
        pass

    with pytest.raises(TypeError, match="no adapter for"):
        adapter_for(Local())  # pytest-local class: not registered yet under its own name
    register_adapter(f"{Local.__module__}.{Local.__qualname__}", _adapter())
    assert adapter_for(Child()).heads(Child()) == 2
    assert head_W(Child(), 1).shape == (5, 5)  # the projections have biases: homogeneous


def test_mha_subclass_uses_the_mha_adapter():
    class MyMHA(nn.MultiheadAttention):
        pass

    mha = MyMHA(4, 2, bias=False, dtype=torch.float64)
    e = 2
    W_Q, W_K = mha.in_proj_weight[:4].detach(), mha.in_proj_weight[4:8].detach()
    torch.testing.assert_close(head_W(mha, 0), W_K[:e].T @ W_Q[:e] / math.sqrt(e), rtol=0, atol=TOL)


def test_register_adapter_refuses_wrong_arguments():
    with pytest.raises(TypeError, match="adapter must be an attnlab.probe.Adapter"):
        register_adapter(ScaledAttention, {"heads": 2})
    with pytest.raises(TypeError, match="module_type must be a class or a dotted class name"):
        register_adapter(3, _adapter())


def test_a_non_positive_scale_from_an_adapter_is_refused():
    class Zero(ScaledAttention):
        pass

    register_adapter(Zero, _adapter())
    with pytest.raises(ValidationError, match="scale == 0.0, must be > 0.0"):
        head_W(Zero(temperature=0.0), 0)


def test_linear_projection_refuses_heads_that_do_not_split_the_width():
    """heads=3 on a width-4 Linear returned a 5x5 W from one row; a head out of range gave empty tensors."""
    q, k = nn.Linear(4, 4), nn.Linear(4, 4)
    with pytest.raises(ValidationError, match=r"heads == 3 does not divide the projections' width out_features = 4"):
        linear_projection(q, k, 0, 3)
    with pytest.raises(ValidationError, match=r"head == 5, must be in \[0, 1\]"):
        linear_projection(q, k, 5, 2)
    with pytest.raises(ValidationError, match=r"head must be an int in \[0, 1\], got 0.5"):
        linear_projection(q, k, 0.5, 2)
    with pytest.raises(ValidationError, match="query has out_features = 4 but key has 6"):
        linear_projection(q, nn.Linear(4, 6), 0, 2)
    with pytest.raises(ValidationError, match="heads == 0, must be >= 1"):
        linear_projection(q, k, 0, 0)
    with pytest.raises(ValidationError, match="key must be a torch.nn.Linear, got Identity"):
        linear_projection(q, nn.Identity(), 0, 2)
    assert linear_projection(q, k, torch.tensor(1), np.int64(2)).W_q.shape == (2, 4)

    class Three(ScaledAttention):
        pass

    register_adapter(
        Three, Adapter(heads=lambda m: 3, projection=lambda m, h: linear_projection(m.to_q, m.to_k, h, 3), tokens=None)
    )
    with pytest.raises(ValidationError, match="heads == 3 does not divide"):
        head_W(Three(), 0)


@pytest.mark.parametrize(
    ("tokens", "got"),
    [
        (lambda m, args, kwargs: (args[0],), r"\[\(3, 5, 4\)\]"),  # one tensor, no keys
        (lambda m, args, kwargs: args[0], "Tensor"),  # not a tuple
        (lambda m, args, kwargs: (args[0], args[0][0]), r"\[\(3, 5, 4\), \(5, 4\)\]"),  # keys without the batch axis
    ],
)
def test_an_adapter_whose_tokens_are_not_two_batched_tensors_is_named(tokens, got):
    class Broken(ScaledAttention):
        pass

    register_adapter(Broken, Adapter(heads=lambda m: m.heads, projection=_adapter().projection, tokens=tokens))
    module = Broken()
    x = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with pytest.raises(ValidationError, match=rf"adapter of Broken returned {got} from tokens.*fix the adapter"):
        capture(module, module, x, query=2)
