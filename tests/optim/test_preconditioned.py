"""PreconditionedGD (spec preconditioned-regression §5.4): the optimizer contract, then the rule against references."""

from __future__ import annotations

import copy

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim.preconditioned import PreconditionedGD, preconditioned_gd
from attnlab.regression import make_problem, population_gradient, whiten


def spd(d: int, seed: int) -> torch.Tensor:
    G = torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return G @ G.T / d + torch.eye(d, dtype=torch.float64)


def factory(groups):
    """W (d, d) preconditioned on both sides, u (d,) plain (no covariance): both kinds of group."""
    W_group, u_group = groups
    d = W_group["params"][0].shape[0]
    return PreconditionedGD([{**W_group, "left": spd(d, 1), "right": spd(d, 2)}, u_group], lr=0.1)


def two_groups(params):
    return [{"params": [params[0]]}, {"params": [params[1]]}]


# ---- the shared optimizer contract (tests/optim/test_contract.py), run on this optimizer -------------------------


def test_state_dict_round_trip_resumes_bit_identically(problem):
    params = problem.params()
    optimizer = factory(two_groups(params))
    for _ in range(3):
        optimizer.step(problem.closure(optimizer, params))
    saved_params, saved_state = [p.detach().clone() for p in params], copy.deepcopy(optimizer.state_dict())
    for _ in range(3):
        optimizer.step(problem.closure(optimizer, params))
    resumed = [torch.nn.Parameter(p.clone()) for p in saved_params]
    resumed_optimizer = factory(two_groups(resumed))
    resumed_optimizer.load_state_dict(saved_state)
    for _ in range(3):
        resumed_optimizer.step(problem.closure(resumed_optimizer, resumed))
    assert all(torch.equal(a, b) for a, b in zip(params, resumed))  # same float operations in the same order


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_step_keeps_parameter_dtype_and_returns_closure_loss(problem, dtype):
    params = problem.params(dtype)
    optimizer = factory(two_groups(params))
    closure = problem.closure(optimizer, params)
    with torch.no_grad():
        before = problem.loss(params)
    assert torch.equal(optimizer.step(closure), before)
    assert all(p.dtype == dtype and bool(torch.isfinite(p).all()) for p in params)
    closure()
    assert optimizer.step() is None  # no closure needed
    assert optimizer.scale_invariant is False


def test_trains_a_tiny_transformer_encoder_one_step():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
    tokens = torch.randn(3, 4, 8, generator=torch.Generator().manual_seed(0))
    linear = encoder.layers[0].linear1.weight  # (16, 8): preconditioned on the right by an 8 x 8 covariance
    others = [p for p in encoder.parameters() if p is not linear]
    optimizer = PreconditionedGD([{"params": [linear], "right": spd(8, 0)}, {"params": others}], lr=0.01)
    before = linear.detach().clone()
    optimizer.zero_grad()
    encoder(tokens).pow(2).mean().backward()
    optimizer.step()
    assert bool(torch.isfinite(linear).all()) and not torch.equal(before, linear)


# ---- the rule ---------------------------------------------------------------------------------------------------


def test_functional_step_equals_plain_reference():
    gen = torch.Generator().manual_seed(0)
    P, G = (
        torch.randn(2, 5, 3, generator=gen, dtype=torch.float64),
        torch.randn(2, 5, 3, generator=gen, dtype=torch.float64),
    )
    L, R = spd(5, 3), torch.stack([spd(3, 4), spd(3, 5)])  # one shared left, one right per run
    (new,) = preconditioned_gd(
        [P], [G], lr=0.3, left_inverses=[torch.linalg.inv(L)], right_inverses=[torch.linalg.inv(R)]
    )
    for r in range(2):
        expected = P[r] - 0.3 * torch.linalg.solve(L, G[r]) @ torch.linalg.inv(R[r])
        torch.testing.assert_close(new[r], expected, rtol=1e-12, atol=1e-14)  # two exact inverses, round-off


def test_step_is_gradient_descent_on_the_whitened_pair():
    """spec §5.4: the preconditioned step on (V, Q) equals plain GD on (A, C) = (V S^1/2, S^1/2 Q S^1/2)."""
    problem = make_problem(d=3, k=5, seed=1)
    Sigma = problem.Sigma
    gen = torch.Generator().manual_seed(2)
    V, Q = torch.randn(5, 3, generator=gen, dtype=torch.float64), torch.randn(3, 3, generator=gen, dtype=torch.float64)
    A, C = whiten(V, Q, Sigma, Sigma)
    A_, C_ = A.clone().requires_grad_(), C.clone().requires_grad_()
    (((A_ @ C_ - problem.target) ** 2).sum()).backward()  # spec §3.3: L - L_irr = ||A C - M*||^2
    V.grad, Q.grad = population_gradient(V, Q, Sigma, problem.W_star)
    PreconditionedGD.for_attention(V, Q, Sigma, lr=0.05).step()
    A_new, C_new = whiten(V, Q, Sigma, Sigma)
    torch.testing.assert_close(A_new, A - 0.05 * A_.grad, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(C_new, C - 0.05 * C_.grad, rtol=1e-12, atol=1e-14)


def test_bad_covariance_and_lr_are_refused():
    V = torch.zeros(4, 3, dtype=torch.float64)
    with pytest.raises(
        ValidationError, match="right covariance of parameter group 0 is not symmetric positive definite"
    ):
        PreconditionedGD([V], lr=0.1, right=torch.diag(torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)))
    with pytest.raises(ValidationError, match="left covariance of parameter group 0 has shape"):
        PreconditionedGD([V], lr=0.1, left=spd(3, 0))
    with pytest.raises(ValidationError, match="lr"):
        PreconditionedGD([V], lr=-1.0)
