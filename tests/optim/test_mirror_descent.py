"""MirrorDescent and its functional ``mirror_descent`` against the spec (mirror-descent-lp §3-4)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import scipy.optimize
import torch

from attnlab._numerics import mirror_map
from attnlab._validation import ValidationError
from attnlab.metrics import entrywise_norm
from attnlab.optim import MirrorDescent, NormalizedGD, mirror_descent, norm_growth_bounds
from attnlab.optim import transforms as tx
from attnlab.optim.mirror_descent import FLOAT64_EPS, md_rule


def random_tensors(seed, shapes=((3, 3), (3,))):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in shapes]


def lp_norm(t, p):
    return t.abs().pow(p).sum() ** (1.0 / p)


def test_p2_mirror_descent_equals_torch_sgd_bit_for_bit(problem):
    params, sgd_params = problem.params(), problem.params()
    optimizer = MirrorDescent(params, lr=0.3, p=2.0)
    sgd = torch.optim.SGD(sgd_params, lr=0.3)
    for _ in range(20):
        optimizer.step(problem.closure(optimizer, params))
        sgd.step(problem.closure(sgd, sgd_params))
    for a, b in zip(params, sgd_params):
        assert torch.equal(a, b)


def test_normalized_p2_mirror_descent_equals_per_tensor_ngd(problem):
    params, ngd_params = problem.params(), problem.params()
    optimizer = MirrorDescent(params, lr=0.1, p=2.0, normalized=True)
    ngd = NormalizedGD(ngd_params, lr=0.1, normalization="tensor")
    for _ in range(20):
        optimizer.step(problem.closure(optimizer, params))
        ngd.step(problem.closure(ngd, ngd_params))
    for a, b in zip(params, ngd_params):
        # differ only by eps = 2.2e-16 added to norms of order 0.1-1, and rounding, over 20 steps
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_step_solves_the_bregman_proximal_problem(p):
    # spec §4: W_{k+1} = argmin_W eta <G, W> + D_psi(W, W_k), solved here by a generic quasi-Newton method
    W, G = random_tensors(0, shapes=((3, 3),))[0], random_tensors(1, shapes=((3, 3),))[0]
    eta = 0.4
    new = mirror_descent([W], [G], lr=eta, p=p)[0]

    Wk, Gk = W.numpy().ravel(), G.numpy().ravel()

    def objective(w):
        psi = lambda v: (np.abs(v) ** p).sum() / p  # noqa: E731
        grad_psi_k = np.sign(Wk) * np.abs(Wk) ** (p - 1)
        return eta * Gk @ w + psi(w) - psi(Wk) - grad_psi_k @ (w - Wk)

    solution = scipy.optimize.minimize(objective, Wk, method="BFGS", options={"gtol": 1e-12})
    np.testing.assert_allclose(new.numpy().ravel(), solution.x, atol=1e-5)  # BFGS on a non-smooth-at-0 objective


@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
def test_plain_md_norm_growth_stays_within_the_spec_bounds(problem, p):
    # spec §4 (Lemma 22 and Hölder):
    # ‖W_k‖^{p-1} + η<−∇L, W>/‖W‖ <= ‖W_{k+1}‖^{p-1} <= ‖W_k‖^{p-1} + η‖∇L‖_q
    params = problem.params()
    W = params[0]
    optimizer = MirrorDescent([W], lr=0.2, p=p)
    q = p / (p - 1)
    for _ in range(15):
        closure = problem.closure(optimizer, params)
        closure()
        before, grad = W.detach().clone(), W.grad.clone()
        optimizer.step(closure)
        lower = lp_norm(before, p) ** (p - 1) + 0.2 * (-grad * before).sum() / lp_norm(before, p)
        upper = lp_norm(before, p) ** (p - 1) + 0.2 * lp_norm(grad, q)
        middle = lp_norm(W.detach(), p) ** (p - 1)
        assert lower - 1e-12 <= middle <= upper + 1e-12  # slack: rounding of norms of order 1


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_normalized_step_moves_the_mirror_point_by_exactly_lr_in_the_dual_norm(p):
    W, G = random_tensors(2, shapes=((4, 2),))[0], random_tensors(3, shapes=((4, 2),))[0]
    new = mirror_descent([W], [G], lr=0.3, p=p, normalized=True)[0]
    mirror = lambda t: torch.sign(t) * t.abs().pow(p - 1)  # noqa: E731  spec §3: ∇ψ
    q = p / (p - 1)
    torch.testing.assert_close(
        lp_norm(mirror(new) - mirror(W), q), torch.tensor(0.3, dtype=torch.float64), rtol=1e-12, atol=0
    )  # pow and its inverse round-trip to ~1e-15 per entry


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lr=0.1, p=1.0), "p == 1.0, must be > 1"),
        (dict(lr=0.1, p=0.5), "p == 0.5, must be > 1"),
        (dict(lr=0.0, p=2.0), "lr == 0.0, must be > 0"),
        (dict(lr=0.1, p=2.0, eps=-1e-3), "eps == -0.001, must be >= 0"),
        (dict(lr=0.1, p=2.0, normalized="yes"), "normalized == 'yes', must be a bool"),
    ],
)
def test_bad_arguments_raise_errors_naming_the_argument(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        MirrorDescent([torch.nn.Parameter(torch.zeros(2))], **kwargs)


@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
def test_norm_growth_bounds_hold_for_any_gradient_and_are_equalities_along_the_mirror_map(p):
    """Lemmas 4 and 22: lower <= ||W_{k+1}||_p^(p-1) <= upper after one plain MD step; G = -c grad psi(W) gives
    W_{k+1} = (1 + eta c)^(1/(p-1)) W, where both bounds are attained."""
    gen = torch.Generator().manual_seed(4)
    W = torch.randn(6, 3, 3, generator=gen, dtype=torch.float64)
    G = torch.randn(6, 3, 3, generator=gen, dtype=torch.float64)
    lower, upper = norm_growth_bounds(W, G, lr=0.3, p=p)
    after = entrywise_norm(mirror_descent([W], [G], lr=0.3, p=p, run_dims=1)[0], p) ** (p - 1)
    assert bool((lower <= after * (1 + 1e-12)).all()) and bool((after <= upper * (1 + 1e-12)).all())
    assert bool((upper - lower > 1e-3).all())  # random gradients: neither bound is tight
    along = -2.0 * torch.sign(W) * W.abs() ** (p - 1)  # -c grad psi(W), c = 2
    lower, upper = norm_growth_bounds(W, along, lr=0.3, p=p)
    exact = entrywise_norm(W, p) ** (p - 1) * (1 + 0.3 * 2.0)
    torch.testing.assert_close(lower, exact, rtol=1e-12, atol=0)
    torch.testing.assert_close(upper, exact, rtol=1e-12, atol=0)


def test_norm_growth_bounds_refuse_mismatched_shapes_by_name():
    with pytest.raises(ValidationError, match=r"W and grad must be matrices of one shape \(\.\.\., d, d\)"):
        norm_growth_bounds(torch.ones(2, 2), torch.ones(3, 3), lr=0.1, p=2.0)


def mp_dual_norm(G: torch.Tensor, q: float) -> float:
    """``||G||_q`` in 60-digit mpmath from the entries themselves (no rescaling), rounded once to float64."""
    with mpmath.workdps(60):
        q_mp = mpmath.mpf(q)
        total = mpmath.fsum(abs(mpmath.mpf(x)) ** q_mp for x in G.reshape(-1).tolist())
        return float(total ** (1 / q_mp))


SCALES = [1e-300, 1e-200, 1e-100, 1e-30, 1e-10, 1e-4, 1e-3, 1.0, 1e3, 1e30, 1e100, 1e200, 1e300]


@pytest.mark.parametrize("p", [1.01, 1.1, 1.5, 2.0, 3.0])
def test_normalized_dual_step_is_right_at_any_gradient_scale(p):
    # spec §4: the dual step is -eta G / (||G||_q + eps) at any size of G; q = p/(p-1) is 101 at p = 1.01, where the
    # plain ||G||_q overflowed (no step) from |G| ~ 1e3 and underflowed (W to +-inf) below |G| ~ 6e-4
    W, G = random_tensors(0, shapes=((3, 4),))[0], random_tensors(1, shapes=((3, 4),))[0]
    q = p / (p - 1.0)
    for scale in SCALES:
        grad = G * scale
        new = mirror_descent([W], [grad], lr=0.1, p=p, normalized=True)[0]
        assert bool(torch.isfinite(new).all()), f"scale {scale:g}"
        expected = -0.1 * grad / (mp_dual_norm(grad, q) + FLOAT64_EPS)
        dual = mirror_map(new, p) - mirror_map(W, p)  # the step the rule took, read back in the dual space
        # pow and its inverse round-trip to ~1e-15 relative (1/(p-1) = 100 amplifies it in W, not in the dual)
        torch.testing.assert_close(dual, expected, rtol=0, atol=1e-13, msg=f"scale {scale:g}")


@pytest.mark.parametrize("p", [1.01, 1.1, 1.5, 2.0, 3.0])
def test_the_dual_norm_of_true_gradients_is_exact_from_1e_minus_300_to_1e300_per_run(p):
    # runs at wildly different scales in one call: each run is rescaled on its own (no shared scale, no host sync)
    q = p / (p - 1.0)
    G = random_tensors(1, shapes=((3, 4),))[0]
    # 1e-29, 1e-105, 1e-158, 1e-210: largest |entry|^q subnormal at p = 1.1, 1.5, 2, 3 (the plain sum kept few bits)
    scales = [1e-300, 1e-210, 1e-158, 1e-150, 1e-105, 1e-40, 1e-29, 1e-3, 1.0, 1e40, 1e150, 1e300]
    grads = torch.stack([G * s for s in scales] + [torch.zeros_like(G)])
    norms = tx.Context(params=[grads], run_dims=1).block_norms([grads, 2 * grads], [0, 1], q)
    for k, scale in enumerate(scales):
        expected = mp_dual_norm(G * scale, q)
        assert abs(float(norms[0][k]) - expected) <= 1e-13 * expected, f"scale {scale:g}"
        assert abs(float(norms[1][k]) - 2 * expected) <= 2e-13 * expected, f"scale {scale:g}"
    assert float(norms[0][-1]) == 0.0  # a zero gradient: norm 0, no 0 / 0
    assert torch.equal(norms[0][8], torch.linalg.vector_norm(grads[8], q))  # runs in range keep the plain bits
    empty = tx.block_norms([torch.zeros(2, 0, 3)], None, 1, q, rescue=True)[0]  # no entries: norm 0, as the plain one
    assert torch.equal(empty, torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize("p", [1.01, 1.1, 1.5, 2.0, 3.0])
def test_the_torch_optim_class_is_right_at_a_scale_where_the_plain_norm_overflowed(p):
    W0, G = random_tensors(0, shapes=((3, 4),))[0], random_tensors(1, shapes=((3, 4),))[0]
    W = torch.nn.Parameter(W0.clone())
    optimizer = MirrorDescent([W], lr=0.1, p=p, normalized=True)
    W.grad = G * 1e300
    optimizer.step()
    torch.testing.assert_close(W.data, mirror_descent([W0], [G], lr=0.1, p=p, normalized=True)[0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("p", [1.01, 1.1, 1.5, 2.0, 3.0])
def test_an_ordinary_step_is_bit_identical_to_the_plain_norm(p):
    # the rescue only replaces norms that left float64's normal range: experiments' results keep every bit
    params, grads = random_tensors(2, shapes=((2, 3, 3), (2, 3))), random_tensors(3, shapes=((2, 3, 3), (2, 3)))
    q = p / (p - 1.0)
    for g in grads:
        plain = torch.linalg.vector_norm(g, q, dim=tuple(range(1, g.dim())))
        assert torch.equal(tx.Context(params=params, run_dims=1).block_norms([g], None, q)[0], plain)
    new = mirror_descent(params, grads, lr=[0.1, 0.2], p=p, normalized=True, run_dims=1)
    rule = md_rule([0.1, 0.2], [p, p], [True, True], [FLOAT64_EPS, FLOAT64_EPS])
    ctx = tx.Context(params=params, run_dims=1, norms=lambda t, b, o: tx.block_norms(t, b, 1, o))  # before the fix
    step, _ = rule.step(grads, torch.zeros(2, dtype=torch.float64), rule.init(params), ctx)
    for a, b in zip(new, rule.apply(params, step)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("p", [1.1, 1.5, 3.0])
def test_an_entry_whose_gradient_is_zero_does_not_move(p):
    # the round trip through grad psi and its inverse moved it by round-off every step (up to 6e-7 in float32
    # after 200 steps at p = 1.1); psi is separable, so its dual coordinate, and the entry, stay as they are
    W = torch.nn.Parameter(torch.randn(20, 50, generator=torch.Generator().manual_seed(0)))  # float32
    start = W.detach().clone()
    optimizer = MirrorDescent([W], lr=0.01, p=p)
    for _ in range(200):
        W.grad = torch.zeros_like(W)
        W.grad[:, :5] = 1.0  # five columns move, the others have a zero gradient
        optimizer.step()
    assert torch.equal(W.detach()[:, 5:], start[:, 5:])
    assert not torch.equal(W.detach()[:, :5], start[:, :5])
