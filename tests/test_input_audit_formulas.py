"""Input audit of the formula functions (attnlab.losses, the model's functions in attnlab.models, token_bound): bad
input raises ValidationError naming the argument, valid input of any real dtype computes in float64 on autograd's
graph; the Bregman divergence is exact near A = B and at 1e200 (against mpmath)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

import attnlab as al
import attnlab.losses as losses
from attnlab._validation import ValidationError
from attnlab.data import example1
from attnlab.losses import log_abs_loss_derivative, log_loss, log_mean_loss, loss, mean_loss
from attnlab.metrics import bregman_divergence, token_bound
from attnlab.models import SummedHeads, attention_loss, attention_probabilities, margins, side_by_side

F32, F64 = torch.float32, torch.float64
DATA = example1(n=4, T=3, d=4, seed=0)
X, Z, Y, V = DATA.X, DATA.Z, DATA.y, DATA.v
W = torch.randn(4, 4, generator=torch.Generator().manual_seed(1), dtype=F64)
LOSS_FUNCTIONS = [log_loss, loss, log_abs_loss_derivative, mean_loss, log_mean_loss]
MEANS = [mean_loss, log_mean_loss]
NAN = W.clone().index_fill_(0, torch.tensor([1]), math.nan)


def _call(function, **changed):
    """``function`` of the example's arguments, with ``changed`` ones replaced."""
    args = {"X": X, "Z": Z, "y": Y, "v": V, "W": W, **changed}
    if function is attention_probabilities:
        return function(args["X"], args["W"], args["Z"])
    return function(args["X"], args["Z"], args["y"], args["v"], args["W"])


MODEL_FUNCTIONS = [attention_loss, attention_probabilities, margins]
LABELLED = [attention_loss, margins]

BAD = [
    # 1. the losses' margins and name
    *[(lambda f=f: f(torch.tensor([1.0, 1 + 1j])), "z") for f in LOSS_FUNCTIONS],
    *[(lambda f=f: f(np.array([1.0, 1 + 1j])), "z") for f in LOSS_FUNCTIONS],
    *[(lambda f=f: f(torch.tensor([1.0, math.nan])), "z") for f in LOSS_FUNCTIONS],
    *[(lambda f=f: f(torch.tensor([1.0, math.inf])), "z") for f in LOSS_FUNCTIONS],
    *[(lambda f=f: f(torch.tensor([True, False])), "z") for f in LOSS_FUNCTIONS],
    *[(lambda f=f: f(np.array([True, False])), "z") for f in LOSS_FUNCTIONS],
    *[(lambda f=f: f(np.array(["1.0"])), "z") for f in LOSS_FUNCTIONS],
    *[(lambda f=f: f(torch.zeros(0)), "z") for f in MEANS],
    *[(lambda f=f: f(torch.zeros(3, 0)), "z") for f in MEANS],
    *[(lambda f=f: f(torch.tensor(1.0)), "z") for f in MEANS],
    # 2. the model's functions: non-finite, non-real, mis-shaped or empty arguments, 0/1 labels
    *[(lambda f=f: _call(f, W=NAN), "W") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, W=W + math.inf), "W") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, X=X.clone().fill_(math.nan)), "X") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, Z=Z.to(torch.complex128)), "Z") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, X=X > 0), "X") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, X=X[0]), "X") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, X=X[:0], Z=Z[:0], y=Y[:0]), "X") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, X=X[:, :0]), "X") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, W=W[:3]), "W") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, Z=Z[:3]), "Z") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, W=torch.stack([W] * 2), X=torch.stack([X] * 3)), "leading") for f in MODEL_FUNCTIONS],
    *[(lambda f=f: _call(f, y=(Y + 1) / 2), "y") for f in LABELLED],
    *[(lambda f=f: _call(f, y=Y[:3]), "y") for f in LABELLED],
    *[(lambda f=f: _call(f, y=Y + math.nan), "y") for f in LABELLED],
    *[(lambda f=f: _call(f, v=V[:3]), "v") for f in LABELLED],
    *[(lambda f=f: _call(f, v=V + math.nan), "v") for f in LABELLED],
    *[(lambda f=f: _call(f, v=torch.stack([V] * 2), W=torch.stack([W] * 3)), "leading") for f in LABELLED],
    (lambda: attention_loss(X, Z, Y, SummedHeads(torch.eye(4)[:2]), W), "W"),  # two heads need 8 columns
    # 3. token_bound of no tokens
    (lambda: token_bound(X[:0]), "X"),
    (lambda: token_bound(X[:, :0]), "X"),
    # 4. a Bregman divergence that is not finite
    (lambda: bregman_divergence(W * 1e200, W * 1.1e200, 2.0), "A or B"),
    (lambda: bregman_divergence(NAN, W, 2.0), "A or B"),
]


@pytest.mark.parametrize(("call", "name"), BAD)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValidationError, match=name):
        call()


CONVERTED = [
    lambda z: z.numpy(),
    lambda z: z.to(F32),
    lambda z: z.tolist(),
    lambda z: z.to(torch.int64),
]


@pytest.mark.parametrize("convert", CONVERTED)
@pytest.mark.parametrize("function", LOSS_FUNCTIONS)
def test_losses_compute_in_float64_from_any_real_input(function, convert):
    z = torch.tensor([[-3.0, 0.0, 2.0], [1.0, 40.0, -1.0]], dtype=F64)
    for name in losses.LOSSES:
        got = function(convert(z), name)
        assert isinstance(got, torch.Tensor) and got.dtype == F64
        assert torch.equal(got, function(z, name))


@pytest.mark.parametrize("convert", [CONVERTED[0], CONVERTED[1], CONVERTED[3]])
@pytest.mark.parametrize("function", MODEL_FUNCTIONS)
def test_model_functions_compute_in_float64_from_any_real_input(function, convert):
    got = _call(function, X=convert(X), W=convert(W))
    assert isinstance(got, torch.Tensor) and got.dtype == F64
    assert torch.equal(
        got, _call(function, X=torch.as_tensor(convert(X)).to(F64), W=torch.as_tensor(convert(W)).to(F64))
    )


def test_a_float32_leaf_gets_its_gradient_through_the_float64_computation():
    W32 = W.to(F32).requires_grad_()
    attention_loss(X, Z, Y, V, W32).backward()
    W64 = W32.detach().to(F64).requires_grad_()
    attention_loss(X, Z, Y, V, W64).backward()
    assert W32.grad.dtype == F32 and torch.equal(W32.grad, W64.grad.to(F32))
    z = torch.tensor([30.0, 800.0], dtype=F32, requires_grad=True)
    (grad,) = torch.autograd.grad(log_loss(z, "logistic").sum(), z)
    assert grad.dtype == F32 and torch.equal(grad, torch.tensor([-1.0, -1.0], dtype=F32))


def test_heads_and_runs_pass_the_checks_unchanged():
    heads = SummedHeads(torch.eye(4)[:2])
    wide = side_by_side(torch.stack([W, -W]))
    assert torch.isfinite(attention_loss(X, Z, Y, heads, wide))
    runs = torch.stack([W, 2 * W])
    torch.testing.assert_close(attention_loss(X, Z, Y, V, runs)[1], attention_loss(X, Z, Y, V, 2 * W), rtol=0, atol=0)


def test_training_calls_the_formula_functions_unchecked(monkeypatch):
    """The engine, its recorder and the metric objects call the unchecked versions: no margin or model check runs."""

    def refuse(*args, **kwargs):
        raise AssertionError("a formula function's check ran inside training")

    monkeypatch.setattr(losses, "_real_tensor", refuse)
    monkeypatch.setattr("attnlab.models.functional.formula_args", refuse)
    select = DATA.select
    metrics = [al.metrics.opt_softmax(select), al.metrics.margin(select)]
    model = al.models.Combined(4)
    al.train(model, "polyak:optimal_loss=infimum", DATA, steps=3, record_every=1, loss="logistic", metrics=metrics)


def _bregman_mp(A: torch.Tensor, B: torch.Tensor, p: float) -> mpmath.mpf:
    """``sum |a|^p/p - |b|^p/p - sign(b) |b|^(p-1) (a - b)`` at 60 digits from the float64 entries."""
    with mpmath.workdps(60):
        P, total = mpmath.mpf(p), mpmath.mpf(0)
        for a, b in zip(A.flatten().tolist(), B.flatten().tolist()):
            a, b = mpmath.mpf(a), mpmath.mpf(b)
            total += abs(a) ** P / P - abs(b) ** P / P - mpmath.sign(b) * abs(b) ** (P - 1) * (a - b)
        return total


def _relative_error(value: torch.Tensor, truth: mpmath.mpf) -> float:
    with mpmath.workdps(60):
        return float(abs((mpmath.mpf(float(value)) - truth) / truth))


@pytest.mark.parametrize("u", [1e-12, 1e-8, 1e-4, 0.1, 1.0, -0.5])
@pytest.mark.parametrize("p", [1.1, 1.5, 2.0, 3.0, 10.0])
def test_bregman_divergence_is_exact_near_a_equals_b(p, u):
    gen = torch.Generator().manual_seed(round(p * 10))
    B = torch.randn(3, 4, generator=gen, dtype=F64)
    A = B * (1 + u * torch.rand(3, 4, generator=gen, dtype=F64))  # each entry moved by up to u of itself
    A[0, 0], B[1, 1], A[2, 3] = 0.0, 0.0, -A[2, 3]  # a zero on each side and one sign change
    near = B * (1 + u)  # every entry moved by u of itself
    for a, b in ((A, B), (near, B), (B, near)):
        assert _relative_error(bregman_divergence(a, b, p), _bregman_mp(a, b, p)) < 1e-12


@pytest.mark.parametrize("p", [1.5, 2.0, 10.0])
def test_bregman_divergence_of_nearby_random_matrices(p):
    gen = torch.Generator().manual_seed(7)
    A = torch.randn(5, 5, generator=gen, dtype=F64)
    B = A + 1e-8 * torch.randn(5, 5, generator=gen, dtype=F64)  # the audit's case: relative error 0.9 to 7 before
    assert _relative_error(bregman_divergence(A, B, p), _bregman_mp(A, B, p)) < 1e-12


@pytest.mark.parametrize(("p", "scale", "u"), [(1.5, 1e205, 1e-3), (2.0, 1e154, 1e-3), (10.0, 1e31, 1e-4)])
def test_bregman_divergence_is_finite_where_the_powers_of_the_entries_overflow(p, scale, u):
    A = torch.randn(3, 3, generator=torch.Generator().manual_seed(3), dtype=F64) * scale
    B = A * (1 + u)  # |A|^p passes 1.8e308 (inf - inf was nan), the divergence ~ u^2 |A|^p does not
    assert _relative_error(bregman_divergence(A, B, p), _bregman_mp(A, B, p)) < 1e-12
