"""log(L - L_*) from the margins against mpmath, where log L - log L_* has no digits left."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import example1
from attnlab.metrics import optimal_loss
from attnlab.models import attention_loss, log_excess_risk, token_scores
from attnlab.models.heads import ReluHead
from attnlab.svm import attention_svm


def _mp_log_excess(X, Z, y, v, W, loss):
    """``log(L - L_*)`` in mpmath from the float64 logits and scores, straight from the definitions: ``L - L_*``
    is formed by subtraction, with enough digits (60 past the size of the logits) that it keeps 60 of its own."""
    import mpmath as mp

    mp.mp.dps = 60 + int(torch.einsum("ntd,de,ne->nt", X, W, Z).abs().max())
    logits = torch.einsum("ntd,de,ne->nt", X, W, Z)
    gamma = y[:, None] * (X @ v)
    ell = (lambda z: mp.exp(-z)) if loss == "exp" else (lambda z: mp.log(1 + mp.exp(-z)))
    total = mp.mpf(0)
    for i in range(X.shape[0]):
        s = [mp.mpf(float(a)) for a in logits[i]]
        e = [mp.exp(a - max(s)) for a in s]
        g = [mp.mpf(float(a)) for a in gamma[i]]
        z = sum(a * b for a, b in zip(e, g)) / sum(e)
        total += ell(z) - ell(max(g))
    return float(mp.log(total / X.shape[0]))


@pytest.fixture(scope="module")
def setting():
    data = example1(n=6, T=5, d=6, seed=3)
    W_mm = attention_svm(data).W
    return data, W_mm / W_mm.norm()


@pytest.mark.parametrize("loss", ["exp", "logistic"])
@pytest.mark.parametrize("norm", [0.5, 5.0, 40.0, 200.0, 2000.0])
def test_the_gap_matches_a_60_digit_reference_along_the_svm_direction(setting, loss, norm):
    data, direction = setting
    W = norm * direction
    ours = float(log_excess_risk(data.X, data.Z, data.y, data.v, W, loss))
    exact = _mp_log_excess(data.X, data.Z, data.y, data.v, W, loss)
    assert ours == pytest.approx(exact, rel=1e-12, abs=1e-12), (ours, exact)


@pytest.mark.parametrize("loss", ["exp", "logistic"])
@pytest.mark.parametrize("norm", [40.0, 2000.0, 20000.0])
def test_the_gradient_is_finite_and_matches_central_differences_past_exp_underflow(setting, loss, norm):
    """At ||W|| = 2000 every non-optimal weight is below e^-745, where a where() whose unused branch is log 0 made
    the gradient NaN; the value's central differences (the value is exact there) are the reference."""
    data, direction = setting
    W = (norm * direction).requires_grad_()
    (grad,) = torch.autograd.grad(log_excess_risk(data.X, data.Z, data.y, data.v, W, loss), W)
    assert bool(torch.isfinite(grad).all())
    E = torch.randn(W.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    h = 1e-5  # the value's rounding (1e-16 of |log(L - L_*)| <= 2e4) costs 1e-7 of the difference at most
    f = [float(log_excess_risk(data.X, data.Z, data.y, data.v, W.detach() + s * h * E, loss)) for s in (1, -1)]
    assert float((grad * E).sum()) == pytest.approx((f[0] - f[1]) / (2 * h), rel=1e-6)


def test_the_float_gap_is_gone_where_the_margins_still_have_it(setting):
    data, direction = setting
    W = 40.0 * direction
    L = attention_loss(data.X, data.Z, data.y, data.v, W)
    L_star = optimal_loss(data.X, data.y, data.v, data.select)
    assert float(L - L_star) <= 4 * torch.finfo(torch.float64).eps * float(L_star)  # float64 has no gap left
    assert math.isfinite(float(log_excess_risk(data.X, data.Z, data.y, data.v, W)))  # the margins still do


def test_runs_axis_and_the_plain_gap_where_it_is_large(setting):
    data, direction = setting
    W = torch.stack([0.1 * direction, 1.0 * direction, -direction])
    batch = [t.expand(3, *t.shape) for t in (data.X, data.Z, data.y, data.v)]
    ours = log_excess_risk(*batch, W)
    plain = torch.log(attention_loss(*batch, W) - optimal_loss(batch[0], batch[2], batch[3], data.select.expand(3, -1)))
    assert ours.shape == (3,)
    assert torch.equal(log_excess_risk(*batch, W, scores=token_scores(batch[0], batch[2], batch[3])), ours)
    torch.testing.assert_close(ours, plain, rtol=1e-9, atol=0)


def test_a_nonlinear_head_and_an_unknown_loss_are_refused(setting):
    data, direction = setting
    with pytest.raises(ValidationError, match="fixed linear head"):
        log_excess_risk(data.X, data.Z, data.y, ReluHead(torch.ones(2, 6), torch.ones(2)), direction)
    with pytest.raises(ValidationError, match="loss"):
        log_excess_risk(data.X, data.Z, data.y, data.v, direction, "hinge")
