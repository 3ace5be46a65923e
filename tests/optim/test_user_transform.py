"""A transform written by a user as the transforms module docstring shows, asking for the loss by declaration."""

import pytest
import torch

import attnlab as al
from attnlab.data import example1
from attnlab.models.functional import attention_loss
from attnlab.optim.transforms import Rule, Step, Transform, scale_by_lr
from attnlab.training.spaces import optimal_loss

STEPS = 12


def user_polyak(l_star: float, c: float) -> Rule:
    """The docstring's Polyak-like step, eta_t = (L - L*) / (c ||g||^2), built only from public names."""

    def update(step, state, ctx):
        norm = ctx.block_norms(step.direction, None)[0]  # ||m|| per run, g = m e^s
        gap = (torch.exp(ctx.log_risk) - l_star).clamp(min=0.0)
        log_eta = torch.log(gap / c) - 2 * torch.log(norm) - 2 * step.log_scale  # coefficient of m: eta_t e^s
        coefs = [lc + log_eta for lc in step.log_coef]
        return Step(step.direction, step.log_scale, coefs, step.factor), state

    return Rule((Transform("my_polyak", lambda params: None, update, scale_invariant=False, needs_loss=True),))


def reference(data, W0, l_star, c):
    """A plain loop: autograd gradient, W <- W - (L - L*) / (c ||g||^2) g."""
    W = W0.clone()
    for _ in range(STEPS):
        W.requires_grad_(True)
        loss = attention_loss(data.X, data.Z, data.y, data.v, W)
        (g,) = torch.autograd.grad(loss, W)
        W = (W - (loss - l_star) / (c * (g**2).sum()) * g).detach()
    return W


def test_a_user_transform_that_asks_for_the_loss_runs_through_both_front_doors():
    data = example1(4, 3, 8, seed=0)
    W0 = 0.1 * torch.randn(8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    l_star = float(optimal_loss(data.X[None], data.y[None], data.v[None], loss="exp")[0])  # spec ngd A3: L*
    expected = reference(data, W0, l_star, c=2.0)
    assert float((expected - W0).norm()) > 0.1  # it moved
    model = al.models.Combined(8, W0=W0)
    al.train(model, user_polyak(l_star, 2.0), data, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(model.W.detach(), expected, rtol=1e-10, atol=1e-13)  # autograd vs closed form
    run = al.batched.train(data.X, data.Z, data.y, data.v, W0, optimizer=user_polyak(l_star, 2.0), steps=STEPS)
    torch.testing.assert_close(run.W[0], expected, rtol=1e-10, atol=1e-13)


def test_the_declaration_is_what_brings_the_loss():
    rule = user_polyak(0.0, 2.0)
    assert rule.needs_loss
    quiet = Rule((rule.transforms[0]._replace(needs_loss=False),))
    assert not quiet.needs_loss  # the name says nothing; only the field does


def test_the_docstrings_sign_like_transform_keeps_stepping_after_the_gradient_underflows():
    """The example of "Writing a transform" (optim/transforms/__init__.py), run as a user would: every late step still moves
    the larger entries by lr (1000 steps of 0.01 between the last two records), past the gradient's underflow."""

    def update(step, state, ctx):
        out = []
        for m in step.direction:
            top = m.abs() >= m.abs().amax(dim=tuple(range(1, m.dim())), keepdim=True) / 2
            out.append(torch.sign(m) * top)
        coefs = [c - step.log_scale for c in step.log_coef]
        return Step(out, step.log_scale, coefs, step.factor), state

    mine = Rule((Transform("half_sign", lambda params: None, update, coefficient_only=False), scale_by_lr(0.01)))
    data = example1(n=4, T=3, d=16, seed=0)
    run = al.batched.train(
        data.X, data.Z, data.y, data.v, optimizer=mine, steps=3000, record_every=1000, keep_iterates=True
    )
    W = run.iterates["W"][:, 0]
    assert float((W[-1] - W[-2]).abs().max()) == pytest.approx(10.0, rel=1e-9)  # 1000 steps of 0.01
