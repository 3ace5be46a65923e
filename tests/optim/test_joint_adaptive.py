"""JointAdaptive and its functional ``joint_adaptive`` against the spec (implicit-bias-ngd §4 A5-A7)."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim import JointAdaptive, NormalizedGD, joint_adaptive


def blocks_of(params):
    """The paper's two blocks, W and u, as two parameter groups."""
    return [{"params": [params[0]]}, {"params": [params[1]]}]


def reference_joint_adaptive(problem, steps, lr, alpha, normalizer):
    """Spec A6, written out: eta_t = lr / (N_t (t+1)^alpha), the same t for both blocks."""
    W, u = (p.detach().clone() for p in problem.params())
    for t in range(steps):
        W.requires_grad_(True)
        u.requires_grad_(True)
        loss = problem.loss([W, u])
        gW, gu = torch.autograd.grad(loss, [W, u])
        W, u = W.detach(), u.detach()
        if normalizer == "loss":
            NW = Nu = float(loss.detach())
        elif normalizer == "block_grad_norm":
            NW, Nu = float(torch.sqrt((gW**2).sum())), float(torch.sqrt((gu**2).sum()))
        else:
            NW = Nu = float(torch.sqrt((gW**2).sum() + (gu**2).sum()))
        W = W - lr / (NW * (t + 1) ** alpha) * gW
        u = u - lr / (Nu * (t + 1) ** alpha) * gu
    return [W, u]


@pytest.mark.parametrize("normalizer", ["loss", "block_grad_norm", "joint_grad_norm"])
def test_matches_a_slow_reference_loop_from_the_spec(problem, normalizer):
    params = problem.params()
    optimizer = JointAdaptive(blocks_of(params), lr=0.2, normalizer=normalizer)
    for _ in range(20):
        optimizer.step(problem.closure(optimizer, params))
    reference = reference_joint_adaptive(problem, 20, lr=0.2, alpha=2.0 / 3.0, normalizer=normalizer)
    for param, value in zip(params, reference):
        torch.testing.assert_close(param.detach(), value, rtol=1e-12, atol=1e-14)  # rounding over 20 steps


@pytest.mark.parametrize("normalizer, normalization", [("block_grad_norm", "group"), ("joint_grad_norm", "global")])
def test_alpha_zero_with_a_gradient_norm_is_ngd_per_block_or_joint(problem, normalizer, normalization):
    # spec A7 (alpha = 0, block norm) is per-block NGD; with the joint norm it is joint NGD (A5)
    params, ngd_params = problem.params(), problem.params()
    optimizer = JointAdaptive(blocks_of(params), lr=0.1, alpha=0.0, normalizer=normalizer)
    ngd = NormalizedGD(blocks_of(ngd_params), lr=0.1, normalization=normalization)
    for _ in range(10):
        optimizer.step(problem.closure(optimizer, params))
        ngd.step(problem.closure(ngd, ngd_params))
    for a, b in zip(params, ngd_params):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)  # lr/N vs min(lr/N, inf): rounding only


def test_a_block_switched_off_takes_the_decayed_plain_step():
    W, u = torch.ones(2, 2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    gW, gu = torch.full((2, 2), 3.0, dtype=torch.float64), torch.full((2,), 2.0, dtype=torch.float64)
    (newW, newu), steps = joint_adaptive(
        [W, u], [gW, gu], [3, 3], lr=0.5, alpha=0.5, loss=4.0, adaptive=[True, False], blocks=[0, 1]
    )
    torch.testing.assert_close(newW, W - 0.5 / (4.0 * 2.0) * gW, rtol=1e-15, atol=0)  # (t+1)^alpha = 2
    torch.testing.assert_close(newu, u - 0.5 / 2.0 * gu, rtol=1e-15, atol=0)  # no normaliser: one rounding
    assert steps == [4, 4]


def test_step_count_advances_and_decays_the_step(problem):
    params = problem.params()
    optimizer = JointAdaptive(params, lr=0.1, alpha=1.0, normalizer="joint_grad_norm")
    for _ in range(3):
        optimizer.step(problem.closure(optimizer, params))
    assert [optimizer.state[p]["step"] for p in params] == [3, 3]


def test_loss_normalizer_refuses_a_missing_closure_or_a_non_positive_loss():
    u = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    u.grad = torch.ones(2, dtype=torch.float64)
    with pytest.raises(ValidationError, match="closure is None, but JointAdaptive"):
        JointAdaptive([u], lr=0.1).step()
    with pytest.raises(ValidationError, match="loss == 0.0, must be a positive number"):
        joint_adaptive([u.detach()], [u.grad], [0], lr=0.1, loss=0.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lr=0.0), "lr == 0.0, must be > 0"),
        (dict(lr=0.1, alpha=-0.5), "alpha == -0.5, must be >= 0"),
        (dict(lr=0.1, normalizer="grad"), "normalizer == 'grad', must be one of"),
        (dict(lr=0.1, adaptive="on"), "adaptive == 'on', must be a bool"),
    ],
)
def test_bad_arguments_raise_errors_naming_the_argument(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        JointAdaptive([torch.nn.Parameter(torch.zeros(2))], **kwargs)
