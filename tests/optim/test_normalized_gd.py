"""NormalizedGD and its functional ``normalized_gd`` against the spec (implicit-bias-ngd §4 A2, A4, A7)."""

from __future__ import annotations

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim import NormalizedGD, normalized_gd


def random_tensors(seed, shapes=((3, 3), (3,), (2, 4))):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in shapes]


def frobenius(tensors):
    return torch.sqrt(sum((t**2).sum() for t in tensors))


# ---- closed forms -------------------------------------------------------------------------------------------


def test_uncapped_step_has_frobenius_length_lr_over_all_parameters_of_all_groups():
    params = [torch.nn.Parameter(t) for t in random_tensors(0)]
    grads = random_tensors(1)
    optimizer = NormalizedGD([{"params": params[:2]}, {"params": params[2:]}], lr=0.37)
    before = [p.detach().clone() for p in params]
    for param, grad in zip(params, grads):
        param.grad = grad
    optimizer.step()
    length = frobenius([p - b for p, b in zip(params, before)])
    torch.testing.assert_close(length, torch.tensor(0.37, dtype=torch.float64), rtol=1e-14, atol=0)  # rounding
    # and the step points along -g: the update equals -lr g/||g|| with one global norm
    for param, old, grad in zip(params, before, grads):
        # rounding, plus the cancellation in param - old for entries much larger than the step
        torch.testing.assert_close(param - old, -0.37 * grad / frobenius(grads), rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize("normalization", ["group", "tensor"])
def test_per_block_normalization_gives_each_block_the_step_length_lr(normalization):
    tensors = random_tensors(2)
    grads = random_tensors(3)
    blocks = [0, 0, 1] if normalization == "group" else [0, 1, 2]
    new, _ = normalized_gd(tensors, grads, lr=0.2, blocks=blocks)
    for block in set(blocks):
        members = [i for i, b in enumerate(blocks) if b == block]
        length = frobenius([new[i] - tensors[i] for i in members])
        torch.testing.assert_close(length, torch.tensor(0.2, dtype=torch.float64), rtol=1e-14, atol=0)  # rounding


@pytest.mark.parametrize("normalization", ["global", "group", "tensor"])
def test_optimizer_step_equals_functional_with_the_matching_blocks(normalization):
    tensors, grads = random_tensors(4), random_tensors(5)
    params = [torch.nn.Parameter(t.clone()) for t in tensors]
    optimizer = NormalizedGD([{"params": params[:2]}, {"params": params[2:]}], lr=0.3, normalization=normalization)
    for param, grad in zip(params, grads):
        param.grad = grad
    optimizer.step()
    blocks = {"global": None, "group": [0, 0, 1], "tensor": [0, 1, 2]}[normalization]
    expected, _ = normalized_gd(tensors, grads, lr=0.3, blocks=blocks)
    for param, value in zip(params, expected):
        assert torch.equal(param.detach(), value)


def test_cap_turns_the_step_into_gd_with_step_max_step_when_the_gradient_is_small():
    tensors = random_tensors(6)
    small = [1e-3 * g for g in random_tensors(7)]  # lr/||g|| is about 1e2, far above the cap
    new, _ = normalized_gd(tensors, small, lr=0.1, max_step=2.0)
    for old, grad, value in zip(tensors, small, new):
        torch.testing.assert_close(value, old - 2.0 * grad, rtol=1e-15, atol=0)  # one rounding per entry
    large = random_tensors(8)  # lr/||g|| is about 0.03, below the cap: the plain NGD step
    new, _ = normalized_gd(tensors, large, lr=0.1, max_step=2.0)
    uncapped, _ = normalized_gd(tensors, large, lr=0.1)
    for value, reference in zip(new, uncapped):
        assert torch.equal(value, reference)


def test_zero_gradient_takes_no_step_instead_of_nan():
    tensors = random_tensors(9)
    zeros = [torch.zeros_like(t) for t in tensors]
    new, _ = normalized_gd(tensors, zeros, lr=0.1, momentum=0.9)
    for old, value in zip(tensors, new):
        assert torch.equal(old, value)


def test_functional_leaves_its_inputs_unchanged():
    tensors, grads = random_tensors(10), random_tensors(11)
    buffers = random_tensors(12)
    copies = [t.clone() for t in tensors + grads + buffers]
    normalized_gd(tensors, grads, buffers, lr=0.1, momentum=0.9)
    assert all(torch.equal(a, b) for a, b in zip(tensors + grads + buffers, copies))


# ---- momentum against slow reference loops written from spec A4 ---------------------------------------------


def reference_ngd_momentum(problem, steps, lr, beta, cap, variant):
    """Spec A4, written out: m = βm + g; θ ← θ − min(η/‖g‖, η_max) m, or θ ← θ − η m/‖m‖."""
    W, u = (p.detach().clone() for p in problem.params())
    mW, mu = torch.zeros_like(W), torch.zeros_like(u)
    for _ in range(steps):
        W.requires_grad_(True)
        u.requires_grad_(True)
        gW, gu = torch.autograd.grad(problem.loss([W, u]), [W, u])
        W, u = W.detach(), u.detach()
        grad_norm = float(torch.sqrt((gW**2).sum() + (gu**2).sum()))
        mW, mu = beta * mW + gW, beta * mu + gu
        if variant == "heavy_ball":
            eta = min(lr / grad_norm, cap)
        else:
            eta = min(lr / float(torch.sqrt((mW**2).sum() + (mu**2).sum())), cap)
        W, u = W - eta * mW, u - eta * mu
    return [W, u]


@pytest.mark.parametrize("variant", ["heavy_ball", "normalized_buffer"])
@pytest.mark.parametrize("cap", [float("inf"), 0.8])
def test_momentum_matches_a_slow_reference_loop_from_the_spec(problem, variant, cap):
    params = problem.params()
    optimizer = NormalizedGD(
        params, lr=0.05, max_step=cap if cap < float("inf") else None, momentum=0.9, momentum_variant=variant
    )
    # 10 steps: uncapped heavy ball multiplies the buffer by η/‖g‖, which blows up as g shrinks (the loss
    # underflows to 0 after ~14 steps here), so the comparison stops before that.
    for _ in range(10):
        optimizer.step(problem.closure(optimizer, params))
    reference = reference_ngd_momentum(problem, 10, lr=0.05, beta=0.9, cap=cap, variant=variant)
    for param, value in zip(params, reference):
        # 10 steps of a contraction-free map: rounding differences (float vs tensor step size) stay ~1e-15
        torch.testing.assert_close(param.detach(), value, rtol=1e-12, atol=1e-14)


def test_heavy_ball_equals_torch_sgd_momentum_with_the_lr_reset_to_the_ngd_value(problem):
    params, sgd_params = problem.params(), problem.params()
    optimizer = NormalizedGD(params, lr=0.05, max_step=0.8, momentum=0.9)
    sgd = torch.optim.SGD(sgd_params, lr=1.0, momentum=0.9)
    for _ in range(10):
        optimizer.step(problem.closure(optimizer, params))
        problem.closure(sgd, sgd_params)()
        grad_norm = torch.sqrt(sum((p.grad**2).sum() for p in sgd_params))
        sgd.param_groups[0]["lr"] = min(0.05 / float(grad_norm), 0.8)  # spec A4: SGD whose lr is the NGD value
        sgd.step()
    for param, value in zip(params, sgd_params):
        torch.testing.assert_close(param, value, rtol=1e-12, atol=1e-14)  # fma in SGD's add_: rounding only


def test_momentum_zero_makes_both_variants_plain_ngd(problem):
    tensors, grads = random_tensors(13), random_tensors(14)
    plain, _ = normalized_gd(tensors, grads, lr=0.1)
    for variant in ("heavy_ball", "normalized_buffer"):
        new, _ = normalized_gd(tensors, grads, lr=0.1, momentum=0.0, momentum_variant=variant)
        assert all(torch.equal(a, b) for a, b in zip(plain, new))


# ---- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lr=0.0), "lr == 0.0, must be > 0"),
        (dict(lr=-1.0), "lr"),
        (dict(lr=0.1, max_step=0.0), "max_step == 0.0, must be > 0"),
        (dict(lr=0.1, max_step=-2.0), "max_step"),
        (dict(lr=0.1, momentum=1.0), "momentum == 1.0, must be < 1"),
        (dict(lr=0.1, momentum=-0.1), "momentum == -0.1, must be >= 0"),
        (dict(lr=0.1, momentum_variant="nesterov"), "momentum_variant == 'nesterov', must be one of"),
        (dict(lr=0.1, normalization="layer"), "normalization == 'layer', must be one of"),
        (dict(lr="0.1"), "lr must be a Real"),
    ],
)
def test_bad_arguments_raise_errors_naming_the_argument(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        NormalizedGD([torch.nn.Parameter(torch.zeros(2))], **kwargs)


def test_a_bad_per_group_value_is_refused_and_the_group_not_added():
    optimizer = NormalizedGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    with pytest.raises(ValidationError, match="momentum == 2"):
        optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(3))], "momentum": 2})
    assert len(optimizer.param_groups) == 1


def test_the_rule_is_built_once_and_kept_across_steps_until_a_hyperparameter_changes():
    tensors, grads = random_tensors(6), random_tensors(7)
    params = [torch.nn.Parameter(t.clone()) for t in tensors]
    optimizer = NormalizedGD(params, lr=0.3, momentum=0.5, max_step=2.0)
    plain = [t.clone() for t in tensors]
    buffers = None
    rules = []
    for _ in range(3):
        for param, grad in zip(params, grads):
            param.grad = grad
        optimizer.step()
        rules.append(optimizer.rule(params))
        plain, buffers = normalized_gd(plain, grads, buffers, lr=0.3, momentum=0.5, max_step=2.0)
    assert rules[0] is rules[1] is rules[2]  # normalize's plan and the chain are kept
    for param, expected in zip(params, plain):
        torch.testing.assert_close(param.detach(), expected, rtol=1e-14, atol=1e-16)  # same steps as the functional
    optimizer.param_groups[0]["lr"] = 0.1  # e.g. a learning-rate scheduler
    assert optimizer.rule(params) is not rules[0]


def test_ngd_with_eps_replays_a_peers_loop_until_its_autograd_gradient_is_rounding_noise():
    """``"ngd:eps=1e-8"`` is ``W <- W - lr g / (||g|| + eps)`` (the Transformers-as-SVMs code's loop): it follows a
    plain autograd loop while that loop's gradient is accurate (the first steps, before the softmax saturates)."""
    from attnlab import batched
    from attnlab.data import example1

    data = example1(4, 3, 16, seed=0)
    lr, eps, steps = 0.5, 1e-8, 10
    W = torch.zeros(16, 16, dtype=torch.float64)
    plain = []
    for _ in range(steps):
        leaf = W.clone().requires_grad_()
        s = torch.softmax(torch.einsum("ntd,de,ne->nt", data.X, leaf, data.Z), -1)
        loss = torch.exp(-data.y * (s * (data.X @ data.v)).sum(-1)).mean()
        (g,) = torch.autograd.grad(loss, leaf)
        W = W - lr * g / (g.norm() + eps)
        plain.append(W)
    run = batched.train(
        data.X, data.Z, data.y, data.v, optimizer=f"ngd:lr={lr},eps={eps}", steps=steps, record_every=1,
        keep_iterates=True,
    )  # fmt: skip
    # ten steps of length 0.5 from W = 0, where autograd's gradient is accurate to ~1e-9 relative (it loses digits as
    # L - L_* shrinks: docs/theory/steepest-descent.md §7); a missing eps would be off by ~1e-8 relative per step
    torch.testing.assert_close(run.iterates["W"][1:, 0], torch.stack(plain), rtol=1e-9, atol=1e-10)
