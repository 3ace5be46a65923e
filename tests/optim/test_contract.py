"""The contract every attnlab optimizer keeps: a real torch.optim.Optimizer that resumes, keeps dtypes, trains a
transformer, handles the closure, and tells the truth about ``scale_invariant``."""

from __future__ import annotations

import copy

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim import AdamNoEps, JointAdaptive, MirrorDescent, NormalizedGD, PolyakStep, SteepestDescent

# name -> (factory taking parameter groups, whether step() needs a closure)
OPTIMIZERS = {
    "ngd": (lambda groups: NormalizedGD(groups, lr=0.1), False),
    "ngd_capped_heavy_ball": (lambda groups: NormalizedGD(groups, lr=0.1, max_step=0.5, momentum=0.9), False),
    "ngd_normalized_buffer": (
        lambda groups: NormalizedGD(groups, lr=0.1, momentum=0.5, momentum_variant="normalized_buffer"),
        False,
    ),
    "ngd_per_tensor": (lambda groups: NormalizedGD(groups, lr=0.1, normalization="tensor"), False),
    "polyak": (lambda groups: PolyakStep(groups), True),
    "sps_capped": (lambda groups: PolyakStep(groups, max_step=0.5, optimal_loss=lambda: 0.0, c=0.5), True),
    "joint_adaptive": (lambda groups: JointAdaptive(groups, lr=0.1), True),
    "joint_adaptive_block_norm": (
        lambda groups: JointAdaptive(groups, lr=0.1, alpha=0.0, normalizer="block_grad_norm"),
        False,
    ),
    "mirror_descent": (lambda groups: MirrorDescent(groups, lr=0.1, p=3.0), False),
    "mirror_descent_normalized": (lambda groups: MirrorDescent(groups, lr=0.1, p=1.5, normalized=True), False),
    "sign_descent": (lambda groups: SteepestDescent(groups, lr=0.1, p=float("inf")), False),
    "steepest_descent_l1.5": (lambda groups: SteepestDescent(groups, lr=0.1, p=1.5), False),
    "adam_noeps": (lambda groups: AdamNoEps(groups, lr=0.1), False),
    "rmsprop_noeps": (lambda groups: AdamNoEps(groups, lr=0.1, beta1=0.0, beta2=0.99), False),
}


def two_groups(params):
    """W and u in separate parameter groups, so that group handling is exercised."""
    return [{"params": [params[0]]}, {"params": [params[1]]}]


def run_steps(problem, optimizer, params, steps, grad_scale=1.0):
    for _ in range(steps):
        optimizer.step(problem.closure(optimizer, params, grad_scale))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_state_dict_round_trip_resumes_bit_identically(problem, name):
    factory, _ = OPTIMIZERS[name]
    params = problem.params()
    optimizer = factory(two_groups(params))
    run_steps(problem, optimizer, params, 3)
    saved_params = [p.detach().clone() for p in params]
    saved_state = copy.deepcopy(optimizer.state_dict())
    run_steps(problem, optimizer, params, 3)

    resumed = [torch.nn.Parameter(p.clone()) for p in saved_params]
    resumed_optimizer = factory(two_groups(resumed))
    resumed_optimizer.load_state_dict(saved_state)
    run_steps(problem, resumed_optimizer, resumed, 3)
    for original, copy_ in zip(params, resumed):
        assert torch.equal(original, copy_)  # bit-identical: the same float operations in the same order


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_step_keeps_parameter_and_state_dtype(problem, name, dtype):
    factory, _ = OPTIMIZERS[name]
    params = problem.params(dtype)
    optimizer = factory(two_groups(params))
    run_steps(problem, optimizer, params, 2)
    for param in params:
        assert param.dtype == dtype
        assert torch.isfinite(param).all()
        for key, value in optimizer.state[param].items():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                # buffers keep the parameter's dtype; a log-scale (one per run) is a log, float64 like every log
                assert value.dtype == (torch.float64 if key.endswith("log_scale") else dtype)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_trains_a_tiny_transformer_encoder_one_step(name):
    factory, _ = OPTIMIZERS[name]
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    tokens = torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(0))
    before = [p.detach().clone() for p in encoder.parameters()]
    optimizer = factory(encoder.parameters())

    def closure():
        optimizer.zero_grad()
        loss = encoder(tokens).pow(2).mean()
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    assert torch.isfinite(loss)
    after = list(encoder.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(b, a) for b, a in zip(before, after))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_step_returns_the_closure_loss_and_refuses_a_missing_one_only_when_needed(problem, name):
    factory, needs_closure = OPTIMIZERS[name]
    params = problem.params()
    optimizer = factory(two_groups(params))
    closure = problem.closure(optimizer, params)
    with torch.no_grad():
        loss_before = problem.loss(params)
    assert torch.equal(optimizer.step(closure), loss_before)  # same operations, so bit-identical
    closure()  # fresh gradients, then a step without closure
    if needs_closure:
        with pytest.raises(ValidationError, match="closure"):
            optimizer.step()
    else:
        assert optimizer.step() is None


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_scale_invariant_says_whether_rescaled_gradients_change_the_step(problem, name):
    factory, _ = OPTIMIZERS[name]
    results = []
    for scale in (1.0, 1e3):
        params = problem.params()
        optimizer = factory(two_groups(params))
        run_steps(problem, optimizer, params, 1)
        run_steps(problem, optimizer, params, 1, grad_scale=scale)  # only the second step is rescaled
        results.append([p.detach().clone() for p in params])
    unchanged = all(torch.allclose(a, b, rtol=1e-12, atol=0) for a, b in zip(*results))  # rounding only
    assert unchanged == optimizer.scale_invariant


@pytest.mark.parametrize(
    "cls, required",
    [
        (NormalizedGD, dict(lr=0.1)),
        (PolyakStep, dict()),
        (JointAdaptive, dict(lr=0.1)),
        (MirrorDescent, dict(lr=0.1, p=2.0)),
        (SteepestDescent, dict(lr=0.1)),
        (AdamNoEps, dict(lr=0.1)),
    ],
)
def test_scale_invariant_on_the_class_is_a_bool_for_the_defaults_and_live_on_an_instance(cls, required):
    optimizer = cls([torch.nn.Parameter(torch.zeros(2))], **required)
    assert isinstance(cls.scale_invariant, bool)
    assert optimizer.scale_invariant == cls.scale_invariant


def test_scale_invariant_follows_a_group_edited_after_construction():
    optimizer = NormalizedGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    assert optimizer.scale_invariant
    optimizer.param_groups[0]["max_step"] = 1.0  # a cap makes the step depend on the gradient's scale
    assert not optimizer.scale_invariant
