"""The shared pieces of the optimizers (transforms, the step sizes read off them) and the runs axis of every
functional."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import optim
from attnlab._validation import ValidationError
from attnlab.optim import joint_adaptive, mirror_descent, normalized_gd, normalized_step_size, polyak_step
from attnlab.optim.transforms import block_norms, per_tensor


def random_tensors(seed, shapes):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in shapes]


def test_block_norms_equal_the_norm_of_the_concatenated_block():
    tensors = random_tensors(0, [(2, 3), (4,), (), (3, 1)])
    norms = block_norms(tensors, ["a", "b", "a", "b"])
    a = torch.cat([tensors[0].reshape(-1), tensors[2].reshape(-1)]).norm()
    b = torch.cat([tensors[1].reshape(-1), tensors[3].reshape(-1)]).norm()
    torch.testing.assert_close(torch.stack(norms), torch.stack([a, b, a, b]), rtol=1e-15, atol=0)  # rounding
    glob = torch.cat([t.reshape(-1) for t in tensors]).norm()
    assert all(torch.allclose(n, glob, rtol=1e-15, atol=0) for n in block_norms(tensors))  # summation order only


def test_block_norms_with_a_runs_axis_equal_each_run_alone():
    tensors = random_tensors(1, [(5, 2, 3), (5, 4)])
    norms = block_norms(tensors, None, run_dims=1)[0]
    for r in range(5):
        single = block_norms([t[r] for t in tensors])[0]
        torch.testing.assert_close(norms[r], single, rtol=1e-15, atol=0)  # summation order only


def test_normalized_step_size_is_min_of_ratio_and_cap_and_zero_for_a_zero_norm():
    norms = torch.tensor([2.0, 0.1, 0.0], dtype=torch.float64)
    sizes = normalized_step_size(1.0, norms, max_step=5.0)
    torch.testing.assert_close(sizes, torch.tensor([0.5, 5.0, 0.0], dtype=torch.float64), rtol=1e-15, atol=0)
    uncapped = normalized_step_size(1.0, norms)[:2]  # exp(-log 0.1) rounds in the last place
    torch.testing.assert_close(uncapped, torch.tensor([0.5, 10.0], dtype=torch.float64), rtol=1e-15, atol=0)
    per_run = normalized_step_size(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), norms, max_step=5.0)
    torch.testing.assert_close(per_run, torch.tensor([0.5, 5.0, 0.0], dtype=torch.float64), rtol=1e-15, atol=0)


def test_per_tensor_broadcasts_a_scalar_and_refuses_a_wrong_length():
    assert per_tensor(0.1, 3) == [0.1, 0.1, 0.1]
    assert per_tensor([1, 2], 2) == [1, 2]
    with pytest.raises(ValidationError, match="lr has 2 entries for 3 tensors"):
        per_tensor([1, 2], 3, "lr")


R = 4
FUNCTIONALS = {
    "normalized_gd": lambda ps, gs, run_dims, loss: normalized_gd(
        ps, gs, lr=0.1, max_step=0.3, momentum=0.5, run_dims=run_dims
    )[0],
    "polyak_step": lambda ps, gs, run_dims, loss: polyak_step(
        ps, gs, loss=loss, optimal_loss=0.1, max_step=2.0, c=0.5, run_dims=run_dims
    ),
    "mirror_descent": lambda ps, gs, run_dims, loss: mirror_descent(
        ps, gs, lr=0.1, p=1.5, normalized=True, run_dims=run_dims
    ),
    "joint_adaptive": lambda ps, gs, run_dims, loss: joint_adaptive(
        ps, gs, [2, 2], lr=0.1, loss=loss, adaptive=[True, False], blocks=[0, 1], run_dims=run_dims
    )[0],
}


@pytest.mark.parametrize("name", FUNCTIONALS)
def test_a_batch_of_runs_equals_the_runs_one_at_a_time(name):
    update = FUNCTIONALS[name]
    params = random_tensors(2, [(R, 3, 3), (R, 3)])
    grads = random_tensors(3, [(R, 3, 3), (R, 3)])
    losses = torch.rand(R, generator=torch.Generator().manual_seed(4), dtype=torch.float64) + 0.5
    batched = update(params, grads, 1, losses)
    for r in range(R):
        single = update([p[r] for p in params], [g[r] for g in grads], 0, losses[r])
        for b, s in zip(batched, single):
            torch.testing.assert_close(b[r], s, rtol=1e-14, atol=1e-16)  # same math, reduction order may differ


def test_rule_apply_forms_a_shared_coefficient_once_with_the_same_bits():
    # the old path: exp(log_coef) * factor per tensor; tensors sharing the pair share the one product
    from attnlab.optim.transforms import Rule, Step
    from attnlab.optim.transforms.core import _coefficients

    params = random_tensors(2, [(3, 2, 2), (3, 2, 2), (3, 4)])
    directions = random_tensors(3, [(3, 2, 2), (3, 2, 2), (3, 4)])
    shared, other = torch.tensor([-0.3, 0.2, -1.7], dtype=torch.float64), torch.tensor([0.1, -2.0, 0.4])
    other = other.to(torch.float64)
    step = Step(directions, torch.zeros(3, dtype=torch.float64), [shared, shared, other], [0.5, 0.5, 0.5])
    coefs = _coefficients(step)
    assert coefs[0] is coefs[1] and coefs[2] is not coefs[0]
    for coef, lc, f in zip(coefs, step.log_coef, step.factor):
        assert torch.equal(coef, torch.exp(lc) * f)
    moved = Rule(()).apply(params, step)
    for p, d, lc, f, new in zip(params, directions, step.log_coef, step.factor, moved):
        assert torch.equal(new, torch.addcmul(p, (torch.exp(lc) * f).view(3, *(1,) * (p.dim() - 1)), d, value=-1.0))


def test_divide_by_norm_with_a_zero_float_scale_equals_the_subtraction():
    from attnlab.optim.transforms import divide_by_norm

    norm = torch.tensor([0.0, 1e-300, 2.5, math.inf, math.nan], dtype=torch.float64)
    for log_coef in (0.0, torch.tensor([-1.0, 0.0, 3.0, 2.0, 1.0], dtype=torch.float64)):
        zero = torch.zeros(5, dtype=torch.float64)
        plain = log_coef - torch.log(norm).nan_to_num_(neginf=math.inf) - zero  # the old path: one more op
        for got in (divide_by_norm(log_coef, norm), divide_by_norm(log_coef, norm, zero)):
            assert torch.equal(got.isnan(), plain.isnan())
            assert torch.equal(got.nan_to_num(nan=7.0), plain.nan_to_num(nan=7.0))
            assert torch.equal(got.signbit(), plain.signbit())  # signed zeros too


def test_another_optimizers_state_dict_is_refused_by_name():
    # torch loads any state dict of as many groups: MirrorDescent(p=1.5) given NormalizedGD's stepped as p = 2
    from attnlab.optim import MirrorDescent, NormalizedGD

    W = torch.nn.Parameter(torch.randn(3, 3, dtype=torch.float64))
    md = MirrorDescent([W], lr=0.1, p=1.5)
    with pytest.raises(ValidationError, match="saved by another optimizer; load a state dict saved by a MirrorDescent"):
        md.load_state_dict(NormalizedGD([W], lr=0.1).state_dict())
    with pytest.raises(ValidationError, match="saved by another optimizer"):
        md.load_state_dict(torch.optim.SGD([W], lr=0.1).state_dict())
    md.load_state_dict(MirrorDescent([W], lr=0.2, p=1.5).state_dict())  # its own kind: loaded
    assert md.param_groups[0]["lr"] == 0.2


def test_values_set_after_construction_are_checked_at_the_next_step():
    # a scheduler's or a hand's lr = -1 took an ascent step; '0.1' failed deep inside the step sizes
    from attnlab.optim import NormalizedGD

    W = torch.nn.Parameter(torch.randn(3, 3, dtype=torch.float64))
    W.grad = torch.ones_like(W)
    optimizer = NormalizedGD([W], lr=0.1)
    for bad, message in ((-1.0, "lr == -1.0, must be > 0.0"), ("0.1", "lr must be a Real")):
        optimizer.param_groups[0]["lr"] = bad
        before = W.detach().clone()
        with pytest.raises(ValidationError, match=message):
            optimizer.step()
        assert torch.equal(W, before)  # refused before any write


def test_sparse_gradients_are_refused_by_name():
    from attnlab.optim import NormalizedGD

    embedding = torch.nn.Embedding(5, 2, sparse=True).double()
    embedding(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(ValidationError, match="sparse gradient.*nn.Embedding\\(..., sparse=False\\)"):
        NormalizedGD(embedding.parameters(), lr=0.1).step()


@pytest.mark.parametrize(
    "build, unknown",
    [
        (lambda ps: optim.NormalizedGD(ps, lr=0.1, weight_decay=0.1), "weight_decay"),
        (lambda ps: optim.Adam(ps, lr=0.1, betas=(0.9, 0.99)), "betas"),  # torch's spelling; ours beta1, beta2
        (lambda ps: optim.AdamNoEps(ps, lr=0.1, eps=1e-8), "eps"),
        (lambda ps: optim.PolyakStep(ps, lr=0.1), "lr"),
    ],
)
def test_an_unknown_keyword_is_refused_with_the_arguments_the_class_takes(build, unknown):
    W = torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValidationError, match=rf"takes no \['{unknown}'\]; its arguments are params and \["):
        build([W])
