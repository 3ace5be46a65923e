"""PolyakStep and its functional ``polyak_step`` against the spec (implicit-bias-ngd §4 A3, A8)."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim import PolyakStep, polyak_step


def random_tensors(seed, shapes=((3, 3), (3,))):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in shapes]


def flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


@pytest.mark.parametrize("c", [1.0, 0.5, 3.0])
def test_polyak_step_equals_loss_gap_over_c_grad_norm_sq(c):
    params, grads = random_tensors(0), random_tensors(1)
    new = polyak_step(params, grads, loss=2.5, optimal_loss=0.3, c=c)
    g = flat(grads)
    eta = (2.5 - 0.3) / (c * torch.dot(g, g))  # spec A3/A8, written out over the flattened parameters
    torch.testing.assert_close(flat(new), flat(params) - eta * g, rtol=1e-14, atol=1e-15)  # rounding only


def test_python_float_losses_keep_float64_precision_whatever_the_default_dtype():
    params, grads = random_tensors(8), random_tensors(9)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)  # the library default outside these tests
    try:
        new = polyak_step(params, grads, loss=1.1, optimal_loss=0.3)
    finally:
        torch.set_default_dtype(previous)
    g = flat(grads)
    eta = (1.1 - 0.3) / torch.dot(g, g)  # float64 throughout: a float32 round of 1.1 would show at 1e-8
    torch.testing.assert_close(flat(new), flat(params) - eta * g, rtol=1e-14, atol=1e-15)


def test_polyak_step_is_capped_at_max_step():
    params, grads = random_tensors(2), [1e-4 * g for g in random_tensors(3)]  # gap/||g||^2 is about 1e7
    new = polyak_step(params, grads, loss=1.0, max_step=0.25)
    torch.testing.assert_close(flat(new), flat(params) - 0.25 * flat(grads), rtol=1e-15, atol=0)  # one rounding


def test_sps_with_c_one_half_reaches_the_minimum_of_an_isotropic_quadratic_in_one_step():
    w = torch.nn.Parameter(torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64))
    optimizer = PolyakStep([w], c=0.5)

    def closure():
        optimizer.zero_grad()
        loss = (w**2).sum()  # L* = 0, g = 2w, so eta = |w|^2 / (0.5 * 4 |w|^2) = 1/2 and w - g/2 = 0
        loss.backward()
        return loss

    optimizer.step(closure)
    assert torch.equal(w.detach(), torch.zeros(3, dtype=torch.float64))


def test_a_closure_returning_a_python_float_is_accepted():
    w = torch.nn.Parameter(torch.tensor([2.0], dtype=torch.float64))
    optimizer = PolyakStep([w])

    def closure():
        optimizer.zero_grad()
        loss = (w**2).sum()
        loss.backward()
        return float(loss.detach())

    assert optimizer.step(closure) == 4.0
    assert w.item() == 1.0  # eta = 4 / 16, w - eta * 4 = 1


def test_optimizer_step_on_attention_matches_the_formula_with_autograd_gradients(problem):
    params = problem.params()
    reference = [p.detach().clone().requires_grad_(True) for p in params]
    loss = problem.loss(reference)
    grads = torch.autograd.grad(loss, reference)
    optimal = 0.05
    optimizer = PolyakStep([{"params": [params[0]]}, {"params": [params[1]]}], optimal_loss=optimal, c=0.5)
    optimizer.step(problem.closure(optimizer, params))
    g = flat(grads)
    eta = (loss.detach() - optimal) / (0.5 * torch.dot(g, g))  # one global norm over both groups
    torch.testing.assert_close(
        flat(params).detach(), flat(reference).detach() - eta * g, rtol=1e-13, atol=1e-15
    )  # autograd vs autograd: same gradients, so only rounding of the update


def test_callable_optimal_loss_is_read_once_per_step(problem):
    calls = []

    def optimal_loss():
        calls.append(1)
        return 0.0

    params = problem.params()
    optimizer = PolyakStep(params, optimal_loss=optimal_loss)
    for _ in range(3):
        optimizer.step(problem.closure(optimizer, params))
    assert len(calls) == 3


def test_a_loss_equal_to_the_optimal_loss_or_a_zero_gradient_takes_no_step():
    params, grads = random_tensors(4), random_tensors(5)
    for new in (
        polyak_step(params, grads, loss=0.7, optimal_loss=0.7),
        polyak_step(params, [torch.zeros_like(g) for g in grads], loss=1.0),
    ):
        assert all(torch.equal(a, b) for a, b in zip(new, params))


def test_a_loss_rounding_just_below_the_optimal_loss_counts_as_converged():
    params, grads = random_tensors(6), random_tensors(7)
    below = math.nextafter(0.7, 0.0)  # one unit in the last place below L*
    new = polyak_step(params, grads, loss=below, optimal_loss=0.7)
    assert all(torch.equal(a, b) for a, b in zip(new, params))


def test_an_optimal_loss_above_the_current_loss_is_refused_naming_optimal_loss(problem):
    params = problem.params()
    optimizer = PolyakStep(params, optimal_loss=5.0)  # the loss at the start is about 1
    with pytest.raises(ValidationError, match=r"optimal_loss == 5.0 is above the current loss"):
        optimizer.step(problem.closure(optimizer, params))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_step=0.0), "max_step == 0.0, must be > 0"),
        (dict(max_step=-1.0), "max_step"),
        (dict(c=0.0), "c == 0.0, must be > 0"),
        (dict(optimal_loss=float("nan")), "optimal_loss == nan, must be a finite number"),
        (dict(optimal_loss="zero"), "optimal_loss must be a Real"),
    ],
)
def test_bad_arguments_raise_errors_naming_the_argument(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        PolyakStep([torch.nn.Parameter(torch.zeros(2))], **kwargs)


def test_step_without_closure_says_a_closure_is_needed():
    w = torch.nn.Parameter(torch.ones(2))
    w.grad = torch.ones(2)
    with pytest.raises(ValidationError, match="closure is None, but PolyakStep needs the loss"):
        PolyakStep([w]).step()


def test_log_loss_gap_is_the_log_of_the_gap_and_never_forms_the_loss():
    from attnlab.optim.transforms import log_loss_gap, loss_gap

    log_risk = torch.log(torch.tensor([2.5, 2.5, 2.5], dtype=torch.float64))
    got = log_loss_gap(log_risk, torch.tensor([0.3, 0.0, -0.5], dtype=torch.float64))
    torch.testing.assert_close(got, torch.log(torch.tensor([2.2, 2.5, 3.0], dtype=torch.float64)), rtol=1e-15, atol=0)
    # L = e^-800 underflows in float64; with L* = 0 the gap is L itself, so its log is exact
    assert float(log_loss_gap(torch.tensor(-800.0, dtype=torch.float64), 0.0)) == -800.0
    assert float(loss_gap(torch.tensor(-800.0, dtype=torch.float64), 0.0)) == 0.0  # what exp(log L) - 0 gives
    assert float(log_loss_gap(torch.tensor(0.0, dtype=torch.float64), 1.0)) == -math.inf  # L = L*: no step
    assert float(log_loss_gap(torch.tensor(-math.inf, dtype=torch.float64), 0.0)) == -math.inf  # L = 0 = L*
    with pytest.raises(ValidationError, match=r"optimal_loss == 1.5 is above the current loss"):
        log_loss_gap(torch.tensor(0.0, dtype=torch.float64), 1.5)


def test_uncapped_polyak_keeps_stepping_after_the_loss_underflows():
    """L* = 0 and log L = -800 (L below 1e-308): the step is L / ||g||^2 in the log domain, not a stall at 0."""
    from attnlab.optim import transforms as tx
    from attnlab.optim.polyak import polyak_rule

    rule = polyak_rule(0.0, [1.0], [math.inf])
    norm = torch.tensor([1.5], dtype=torch.float64)  # a mantissa m of norm 1.5; the gradient is g = m e^-400
    coef = tx.step_size(rule, norm, torch.tensor([-400.0]), log_risk=torch.tensor([-800.0], dtype=torch.float64))
    # spec A3: eta = L / ||g||^2 = e^-800 / (1.5^2 e^-800); the coefficient of m is eta e^-400 (about 1e-174)
    expected = math.exp(-400.0) / 1.5**2
    assert float(coef) == pytest.approx(expected, rel=1e-12, abs=0.0)  # exp(log L) - 0 = 0 gave a zero step


def _example():
    from attnlab.data import example1

    return example1(n=6, T=5, d=6, seed=3)


def _the_number(data):
    """``"polyak"`` with the fixed head's ``L_*`` as a float64 number: the gap is then ``L - L_*`` of two numbers."""
    from attnlab.metrics import optimal_loss
    from attnlab.optim import parse_optimizer

    return parse_optimizer("polyak").with_options(optimal_loss=optimal_loss(data.X[None], data.y[None], data.v[None]))


def test_the_infimum_takes_the_same_steps_as_the_number_while_float64_resolves_the_gap():
    """optimal_loss="infimum" (L - L_* from the margins) against L_* as a number, while L - L_* >> 2e-16 L."""
    from attnlab.training.batched import train

    data = _example()
    number = train(data.X, data.Z, data.y, data.v, None, optimizer=_the_number(data), steps=8, keep_iterates=True)
    infimum = train(data.X, data.Z, data.y, data.v, None, optimizer="polyak:optimal_loss=infimum", steps=8,
                    keep_iterates=True)  # fmt: skip
    # the number's gap log L + log(-expm1(log L* - log L)) keeps ~ eps L / (L - L_*) of relative precision
    torch.testing.assert_close(infimum.iterates["W"], number.iterates["W"], rtol=1e-9, atol=1e-12)


def test_the_infimum_keeps_stepping_where_the_numbers_gap_has_rounded_to_zero():
    """spec A3 with L_* > 0: log L carries no gap once L - L_* < 2e-16 L; the margins still do, so the run goes on.
    ``"polyak"`` alone is the infimum: its default was the number, and the default run stopped at step 37."""
    from attnlab.models import log_excess_risk
    from attnlab.training.batched import train

    data = _example()
    runs = {
        name: train(data.X, data.Z, data.y, data.v, None, optimizer=spec, steps=600).W[0]
        for name, spec in (
            ("number", _the_number(data)),
            ("infimum", "polyak:optimal_loss=infimum"),
            ("default", "polyak"),
        )
    }
    gaps = {k: float(log_excess_risk(data.X, data.Z, data.y, data.v, W)) for k, W in runs.items()}
    assert gaps["number"] > -40.0  # stalled: L - L_* ~ 1e-16 L_*, the number's gap is 0 from there on
    assert gaps["infimum"] < -200.0  # went on: ||W|| grows, L - L_* falls like e^{-||W||}
    assert float(runs["infimum"].norm()) > 5 * float(runs["number"].norm())
    assert torch.equal(runs["default"], runs["infimum"])


def test_a_negative_optimal_loss_is_refused_by_the_class_as_by_the_string():
    with pytest.raises(ValidationError, match=r"optimal_loss == -5.0, must be >= 0"):
        PolyakStep([torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))], optimal_loss=-5.0)


def test_the_infimum_through_al_train_and_its_refusals():
    import attnlab as al
    from attnlab.models.heads import ReluHead
    from attnlab.training.batched import train

    data = _example()
    model = al.models.Combined(6)
    al.train(model, PolyakStep(model.parameters(), optimal_loss="infimum"), data, steps=20, record_every=20)
    batched = train(data.X, data.Z, data.y, data.v, None, optimizer="polyak:optimal_loss=infimum", steps=20).W[0]
    torch.testing.assert_close(model.W.detach(), batched, rtol=1e-10, atol=1e-12)  # one engine, two front doors
    w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = PolyakStep([w], optimal_loss="infimum")

    def closure():
        opt.zero_grad()
        loss = (w**2).sum()
        loss.backward()
        return loss

    with pytest.raises(ValidationError, match="only the engine computes"):
        opt.step(closure)  # a closure gives L, never L - L_* from margins
    with pytest.raises(ValidationError, match="trains its head"):
        train(data.X, data.Z, data.y, data.v, None, optimizer="polyak:optimal_loss=infimum", steps=2, train_head=True)
    with pytest.raises(ValidationError, match="nonlinear head"):
        train(data.X, data.Z, data.y, ReluHead(torch.ones(2, 6), torch.ones(2)), None,
              optimizer="polyak:optimal_loss=infimum", steps=2)  # fmt: skip
    with pytest.raises(ValidationError, match="optimal_loss"):
        train(data.X, data.Z, data.y, data.v, None, optimizer="polyak:optimal_loss=lowest", steps=2)
