"""Bad input to the optimizers is refused by name: the grammar's mirror exponent near 1, the public step functions'
hyperparameters, an empty or complex parameter list, a negative loss, a boolean step size of the batched trainer.

Each case failed before the audit's fixes (a wrong step, a raw Python or torch error, or a message about another
value); valid input still gives the same step, bit for bit.
"""

import math

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import example1
from attnlab.optim import (
    JointAdaptive,
    MirrorDescent,
    PolyakStep,
    joint_adaptive,
    mirror_descent,
    normalized_gd,
    normalized_step_size,
    parse_optimizer,
    polyak_step,
    polyak_step_size,
    preconditioned_gd,
)
from attnlab.optim import transforms as tx
from attnlab.optim.mirror_descent import md_rule
from attnlab.optim.normalized_gd import ngd_rule
from attnlab.optim.polyak import polyak_rule
from attnlab.training import batched


def _tensors():
    W = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
    return [W], [torch.full_like(W, 0.5)]


G = torch.tensor(5.0, dtype=torch.float64)

# --- 3: the mirror exponent near 1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: parse_optimizer("md:1.0000001"),
        lambda: parse_optimizer("md:p=1.0005,normalized=false"),
        lambda: MirrorDescent([torch.nn.Parameter(_tensors()[0][0])], lr=0.1, p=1.0009),
        lambda: mirror_descent(*_tensors(), lr=0.1, p=1.0000001),
    ],
    ids=["grammar", "grammar-keyword", "class", "functional"],
)
def test_a_mirror_exponent_within_1e_3_of_1_is_refused_saying_why(make):
    with pytest.raises(ValidationError, match=r"p == 1\.000\d* is too close to 1, must be >= 1\.001: the l_p mirror"):
        make()


def test_the_mirror_exponent_at_the_floor_still_steps():
    params, grads = _tensors()
    assert bool(torch.isfinite(mirror_descent(params, grads, lr=0.1, p=1.001)[0]).all())
    W = torch.nn.Parameter(params[0].clone())
    W.grad = grads[0].clone()
    parse_optimizer("md:1.001").build([W]).step()
    assert bool(torch.isfinite(W).all())


# --- 4: the public step functions check their hyperparameters --------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: normalized_step_size(-1.0, G), "lr"),
        (lambda: normalized_step_size(torch.tensor([0.1, -0.1]), torch.tensor([1.0, 2.0])), "lr"),
        (lambda: normalized_step_size(True, G), "lr"),
        (lambda: normalized_step_size(0.1, float("nan")), "norm"),
        (lambda: normalized_step_size(0.1, -1.0), "norm"),
        (lambda: normalized_step_size(0.1, G, max_step=0.0), "max_step"),
        (lambda: normalized_gd(*_tensors(), lr=-1.0), "lr"),
        (lambda: normalized_gd(*_tensors(), lr=0.1, momentum=1.0), "momentum"),
        (lambda: normalized_gd(*_tensors(), lr=0.1, momentum_variant="nesterov"), "momentum_variant"),
        (lambda: normalized_gd(*_tensors(), lr=0.1, max_step=-1.0), "max_step"),
        (lambda: mirror_descent(*_tensors(), lr=0.1, p=0.5), "p"),
        (lambda: mirror_descent(*_tensors(), lr=0.1, p=1.0), "p"),
        (lambda: mirror_descent(*_tensors(), lr=0.1, p=math.inf), "p"),
        (lambda: mirror_descent(*_tensors(), lr=-0.1, p=2.0), "lr"),
        (lambda: mirror_descent(*_tensors(), lr=0.1, p=2.0, eps=-1.0), "eps"),
        (lambda: mirror_descent(*_tensors(), lr=0.1, p=2.0, normalized="yes"), "normalized"),
        (lambda: polyak_step_size(1.0, 0.0, G, c=0.0), "c"),
        (lambda: polyak_step_size(1.0, 0.0, G, max_step=0.0), "max_step"),
        (lambda: polyak_step_size(float("nan"), 0.0, G), "loss"),
        (lambda: polyak_step_size(-1.0, 0.0, G), "loss"),
        (lambda: polyak_step_size(1.0, -0.5, G), "optimal_loss"),
        (lambda: polyak_step_size(1.0, 0.0, float("inf")), "grad_sq_norm"),
        (lambda: polyak_step_size(1.0, 0.0, G, log_scale=torch.tensor(float("nan"))), "log_scale"),
        (lambda: polyak_step(*_tensors(), loss=1.0, c=-1.0), "c"),
        (lambda: polyak_step(*_tensors(), loss=-1.0), "loss"),
        (lambda: joint_adaptive(*_tensors(), [0], lr=-1.0, loss=1.0), "lr"),
        (lambda: joint_adaptive(*_tensors(), [0], lr=0.1, alpha=-1.0, loss=1.0), "alpha"),
        (lambda: joint_adaptive(*_tensors(), [0], lr=0.1, normalizer="norm", loss=1.0), "normalizer"),
        (lambda: preconditioned_gd(*_tensors(), lr=-1.0, left_inverses=[None], right_inverses=[None]), "lr"),
        (lambda: normalized_gd(_tensors()[0], [], lr=0.1), "params"),
        (lambda: normalized_gd(_tensors()[0], [torch.ones(2)], lr=0.1), "params"),
        (lambda: mirror_descent([], [], lr=0.1, p=2.0), "params"),
        (lambda: polyak_step(*_tensors(), loss=1.0, run_dims=-1), "run_dims"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_public_step_functions_refuse_bad_input_by_name(call, name):
    with pytest.raises(ValidationError, match=rf"^{name}\b"):
        call()


def test_checked_step_functions_give_the_unchecked_step_bit_for_bit():
    """The checks add nothing to the arithmetic: each function against its chain of transforms, run directly."""
    params, grads = _tensors()
    zero = torch.zeros((), dtype=torch.float64)
    md = tx.run_rule(md_rule([0.1], [1.5], [True], [2.0**-52]), params, grads)[0][0]
    assert torch.equal(mirror_descent(params, grads, lr=0.1, p=1.5, normalized=True)[0], md)
    ngd = tx.run_rule(ngd_rule([0.2], [None], [0.0], ["heavy_ball"]), params, grads)[0][0]
    assert torch.equal(normalized_gd(params, grads, lr=0.2)[0][0], ngd)
    size = tx.step_size(ngd_rule([0.5], [None], [0.0], ["heavy_ball"]), G, zero)
    assert torch.equal(normalized_step_size(0.5, G), size)
    log_risk = torch.log(torch.tensor(2.0, dtype=torch.float64))
    polyak = tx.step_size(
        polyak_rule(0.0, [1.0], [math.inf]), torch.tensor(2.0, dtype=torch.float64), zero, log_risk=log_risk
    )
    assert torch.equal(polyak_step_size(2.0, 0.0, torch.tensor(4.0)), polyak)


# --- 8: an empty parameter list, complex parameters -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["gd", "ngd", "polyak", "md", "sd", "sign", "joint", "adam", "adam-noeps"])
def test_an_empty_parameter_list_is_refused_naming_params(name):
    with pytest.raises(ValidationError, match=r"^params is empty"):
        parse_optimizer(name).build([])


def test_mirror_descent_refuses_complex_parameters():
    W = torch.nn.Parameter(torch.ones(2, dtype=torch.complex128))
    with pytest.raises(ValidationError, match=r"^params \[0\] of parameter group 0 are complex"):
        MirrorDescent([W], lr=0.1, p=2.0)
    optimizer = MirrorDescent([torch.nn.Parameter(torch.ones(2, dtype=torch.float64))], lr=0.1, p=2.0)
    with pytest.raises(ValidationError, match=r"^params \[0\] of parameter group 1 are complex"):
        optimizer.add_param_group({"params": [W]})


# --- 9: a negative loss from the closure is named as it is ------------------------------------------------------------


@pytest.mark.parametrize(
    "make", [lambda ps: JointAdaptive(ps, lr=0.1), lambda ps: PolyakStep(ps)], ids=["joint", "polyak"]
)
def test_a_negative_loss_from_the_closure_is_refused_as_it_is(make):
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0], dtype=torch.float64))
    optimizer = make([w])

    def closure():
        optimizer.zero_grad()
        loss = (w**2).sum() - 10.0  # -5: not a loss
        loss.backward()
        return loss

    with pytest.raises(ValidationError, match=r"^loss == -5\.0, what the closure returned, must be >= 0"):
        optimizer.step(closure)
    assert w.tolist() == [1.0, 2.0]  # untouched


# --- 6: the batched trainer takes booleans only as booleans -------------------------------------------------------------


@pytest.mark.parametrize(
    "lr", [True, np.bool_(True), [True], torch.tensor([True])], ids=["bool", "np", "list", "tensor"]
)
def test_batched_train_refuses_a_boolean_lr(lr):
    data = example1(n=4, T=3, d=4, seed=0)
    with pytest.raises(ValidationError, match=r"^lr == .* holds booleans"):
        batched.train(data.X, data.Z, data.y, data.v, optimizer="gd", lr=lr, steps=1)


def test_batched_train_still_takes_a_numeric_lr():
    data = example1(n=4, T=3, d=4, seed=0)
    run = batched.train(data.X, data.Z, data.y, data.v, optimizer="gd", lr=np.array([0.5]), steps=2)
    assert run.status == ["completed"]
