"""One step's loss change split as Lemma E.1 splits it (spec §5), against mpmath, autograd and the step's own orders."""

import mpmath
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import SoftmaxMLP, TwoLayerNet, gram, practical_step, step_terms, unit_rows


def _trained(m=200, steps=30, seed=0):
    """A softmax net some GD steps away from its symmetric start, so that <a_l, S> != 0 (the denominator acts)."""
    gen = torch.Generator().manual_seed(seed)
    X, Y = unit_rows(8, 4, gen), unit_rows(8, 2, gen)
    net = SoftmaxMLP(4, 2, m, seed=seed)
    lr = practical_step(net, X)
    with torch.no_grad():
        for _ in range(steps):
            net.W.sub_(lr * net.loss_gradient(X, Y))
    return net, X, Y, lr


def test_fact_a3_the_terms_add_up_to_the_loss_after_the_step_against_mpmath():
    net, X, Y, lr = _trained()
    terms = step_terms(net, X, Y, lr)
    with torch.no_grad():
        F, F_next = net(X), net.output_from_logits(X @ (net.W - lr * net.loss_gradient(X, Y)))
    mpmath.mp.dps = 50  # Fact A.3 in 50 digits on the float64 outputs: the identity itself, then our float64 sums
    R = [mpmath.mpf(v) for v in (F - Y).reshape(-1).tolist()]
    dF = [mpmath.mpf(b) - mpmath.mpf(a) for a, b in zip(F.reshape(-1).tolist(), F_next.reshape(-1).tolist())]
    direct = mpmath.fsum((r + d) ** 2 for r, d in zip(R, dF))  # ||F(t+1) - Y||^2 from its own entries
    expanded = (
        mpmath.fsum(r * r for r in R) + 2 * mpmath.fsum(r * d for r, d in zip(R, dF)) + mpmath.fsum(d * d for d in dF)
    )
    assert abs(direct - expanded) <= mpmath.mpf(10) ** -40 * direct  # Fact A.3 holds to the working precision
    ours = terms.sq_error + terms.C0 + terms.C1 + terms.C2 + terms.C3
    assert abs(ours - float(direct)) <= 1e-13 * float(direct)  # float64 sums of 16 terms of size ~1: round-off
    assert terms.sq_error_next == pytest.approx(float(direct), rel=1e-13)


def test_first_order_term_is_the_derivative_of_the_loss_along_the_step_by_autograd():
    net, X, Y, lr = _trained()
    terms = step_terms(net, X, Y, lr)
    G = net.loss_gradient(X, Y)
    eta = torch.zeros((), dtype=torch.float64, requires_grad=True)
    loss = (net.output_from_logits(X @ (net.W.detach() - eta * G)) - Y).pow(2).sum()
    (slope,) = torch.autograd.grad(loss, eta)  # d/d eta ||F(W - eta G) - Y||^2 at 0
    assert terms.first_order == pytest.approx(lr * float(slope), rel=1e-10)  # float64 autograd vs closed form
    # with the true gradient the first-order term is the NTK progress -2 eta m R^T H R (Lemma E.1)
    assert terms.first_order == pytest.approx(terms.ntk_progress, rel=1e-10)
    assert terms.C1 < 0  # the numerator part makes progress (Lemma E.4)


def test_the_denominator_term_vanishes_at_the_symmetric_start_and_not_after():
    gen = torch.Generator().manual_seed(1)
    X, Y = unit_rows(8, 4, gen), unit_rows(8, 2, gen)
    net = SoftmaxMLP(4, 2, 200, seed=1)
    assert step_terms(net, X, Y, practical_step(net, X)).C0 == pytest.approx(0.0, abs=1e-15)  # <a_l, S> = 0
    net, X, Y, lr = _trained(seed=1)
    assert abs(step_terms(net, X, Y, lr).C0) > 1e-12


def test_second_and_output_terms_are_second_order_in_the_step():
    net, X, Y, lr = _trained()
    big, small = step_terms(net, X, Y, lr / 8), step_terms(net, X, Y, lr / 16)
    assert abs(big.C2) / abs(small.C2) == pytest.approx(4.0, rel=0.05)  # eta^2: halving the step quarters C_2
    assert big.C3 / small.C3 == pytest.approx(4.0, rel=0.05)
    assert big.first_order / small.first_order == pytest.approx(2.0, rel=1e-12)  # exactly linear in eta


def test_second_and_output_terms_stay_second_order_at_a_small_residual_of_a_wide_net():
    # dF comes from the net's closed form for the change (SoftmaxMLP.output_change), not from the difference of two
    # O(1) outputs: at m = 4000 and ||R|| ~ 1e-6 that difference's round-off (~1e-13 per output) is larger than
    # C_2 itself, and C_2 and C_3 stopped quartering with the step
    gen = torch.Generator().manual_seed(0)
    X = unit_rows(6, 4, gen)
    net = SoftmaxMLP(4, 2, 4000, seed=1)
    with torch.no_grad():
        net.W.add_(0.05 * torch.randn(net.W.shape, generator=gen, dtype=torch.float64))
        Y = net.output_from_logits(X @ net.W) + 1e-6 * torch.randn(6, 2, generator=gen, dtype=torch.float64)
    lr = practical_step(net, X)
    big, small = step_terms(net, X, Y, lr), step_terms(net, X, Y, lr / 2)
    assert abs(big.C2) / abs(small.C2) == pytest.approx(4.0, rel=0.05)
    assert big.C3 / small.C3 == pytest.approx(4.0, rel=0.05)


def test_the_output_change_is_the_difference_of_the_outputs_for_any_net():
    # the base class's default (a difference) and the softmax net's closed form agree where cancellation is mild
    net, X, _, lr = _trained()
    dZ = -lr * (X @ net.loss_gradient(X, torch.zeros(X.shape[0], net.d_out, dtype=torch.float64)))
    with torch.no_grad():
        Z = X @ net.W
        closed = net.output_change(Z, dZ)
        default = TwoLayerNet.output_change(net, Z, dZ)
    assert torch.allclose(closed, default, rtol=1e-9, atol=1e-14)


def test_a_precomputed_gram_gives_the_same_terms():
    net, X, Y, lr = _trained()
    assert step_terms(net, X, Y, lr, gram(net, X)) == step_terms(net, X, Y, lr)


def test_bad_input_is_refused():
    net, X, Y, lr = _trained()
    with pytest.raises(ValidationError, match="lr"):
        step_terms(net, X, Y, 0.0)
    with pytest.raises(ValidationError, match="Y"):
        step_terms(net, X, Y[:, :1], lr)
    with pytest.raises(ValidationError, match="H"):
        step_terms(net, X, Y, lr, torch.eye(3, dtype=torch.float64))
