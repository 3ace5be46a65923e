"""Frozen parameters stay frozen in every front door (al.train, al.batched.train, al.flow), as in a plain torch loop."""

import pytest
import torch

import attnlab as al
from attnlab.data import example1
from attnlab.models import Factored
from attnlab.optim import NormalizedGD
from attnlab.training import batched
from attnlab.training.flow import gradient_flow


def _data():
    return example1(n=6, T=4, d=5, seed=0)


def _plain_sgd(model, data, lr, steps):
    """A plain torch loop: autograd through the model's loss, SGD on the parameters that require a gradient."""
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        model.loss(data).backward()
        opt.step()
    return model


def _frozen_q(seed=1):
    model = Factored(5, 5, seed=seed)
    model.Q.requires_grad_(False)
    return model


def test_torch_sgd_in_al_train_leaves_q_alone_and_moves_k_as_a_plain_loop():
    data = _data()
    model, plain = _frozen_q(), _frozen_q()
    Q0 = model.Q.detach().clone()
    al.train(model, torch.optim.SGD(model.parameters(), lr=0.5), data, steps=20)
    _plain_sgd(plain, data, 0.5, 20)
    assert torch.equal(model.Q.detach(), Q0)
    assert torch.allclose(model.K.detach(), plain.K.detach(), rtol=1e-10, atol=1e-13)


def test_ngd_in_al_train_leaves_q_alone_and_normalises_by_k_alone():
    data = _data()
    model = _frozen_q()
    Q0, K0 = model.Q.detach().clone(), model.K.detach().clone()
    al.train(model, NormalizedGD(model.parameters(), lr=0.1), data, steps=1)
    assert torch.equal(model.Q.detach(), Q0)
    # one NGD step on K alone: K - lr g_K / ||g_K|| (the frozen Q has no gradient, so it is out of the norm)
    ref = _frozen_q()
    ref.loss(data).backward()
    g = ref.K.grad
    assert torch.allclose(model.K.detach(), K0 - 0.1 * g / g.norm(), rtol=0, atol=1e-12)


def test_a_tensor_outside_the_optimizer_stays_too():
    data = _data()
    model = Factored(5, 5, seed=1)
    Q0 = model.Q.detach().clone()
    al.train(model, NormalizedGD([model.K], lr=0.1), data, steps=10)
    assert torch.equal(model.Q.detach(), Q0)


@pytest.mark.parametrize("method", ["ngd", "gd", "rk4"])
def test_flow_leaves_q_alone_and_matches_euler_on_k(method):
    data = _data()
    model = _frozen_q()
    Q0 = model.Q.detach().clone()
    gradient_flow(model, data, step=0.05, steps=10, method=method)
    assert torch.equal(model.Q.detach(), Q0)
    if method == "gd":  # explicit Euler on K alone is plain SGD on K
        plain = _plain_sgd(_frozen_q(), data, 0.05, 10)
        assert torch.allclose(model.K.detach(), plain.K.detach(), rtol=1e-10, atol=1e-13)


def test_batched_trainable_masks_a_tensor_and_single_entries():
    data = _data()
    model = _frozen_q()
    K0, Q0 = model.K.detach().clone(), model.Q.detach().clone()
    run = batched.train(
        data.X,
        data.Z,
        data.y,
        data.v,
        param="KQ",
        optimizer="gd",
        lr=0.5,
        steps=20,
        K0=K0,
        Q0=Q0,
        trainable={"Q": False},
    )
    plain = _plain_sgd(_frozen_q(), data, 0.5, 20)
    assert torch.equal(run.params["Q"][0], Q0)
    assert torch.allclose(run.params["K"][0], plain.K.detach(), rtol=1e-10, atol=1e-13)
    mask = torch.ones(5, 5, dtype=torch.bool)
    mask[0] = False  # the first row of K stays
    run = batched.train(
        data.X,
        data.Z,
        data.y,
        data.v,
        param="KQ",
        optimizer="md:3",
        lr=0.1,
        steps=5,
        K0=K0,
        Q0=Q0,
        trainable={"K": mask},
    )
    assert torch.equal(run.params["K"][0, 0], K0[0]) and not torch.equal(run.params["K"][0, 1], K0[1])


def test_batched_trainable_refuses_unknown_names_and_bad_masks():
    data = _data()
    kq = {"K0": torch.zeros(5, 5) + 0.1, "Q0": torch.zeros(5, 5) + 0.1}
    with pytest.raises(al.ValidationError, match=r"trainable names \['W'\] are not tensors"):
        batched.train(data.X, data.Z, data.y, data.v, param="KQ", steps=1, trainable={"W": False}, **kq)
    with pytest.raises(al.ValidationError, match=r"trainable\['K'\] must be a bool or a boolean mask"):
        batched.train(data.X, data.Z, data.y, data.v, param="KQ", steps=1, trainable={"K": [1.0]}, **kq)
