"""A transform written by a user as the transforms module docstring shows, asking for the loss by declaration."""

import torch

import attnlab as al
from attnlab.data import example1
from attnlab.engine.spaces import optimal_loss
from attnlab.models.functional import attention_loss
from attnlab.optim.transforms import Rule, Step, Transform

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
    l_star = float(optimal_loss(data.X[None], data.y[None], data.v[None], "exp")[0])  # spec ngd A3: L*
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
