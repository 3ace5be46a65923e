"""Cross-attention (queries of width d_q != d): a rectangular W (d, d_q) through the model's math, the modules and
both training front doors, against autograd through the plain softmax, finite differences and each other.

Spec: multi-token §8.
"""

import pytest
import torch

import attnlab as al
from attnlab.data import TokenSelectionData
from attnlab.losses import loss as loss_fn
from attnlab.models import Combined, Factored
from attnlab.models.functional import attention_loss, loss_gradients

N, T, D, D_Q = 5, 4, 6, 3


def _data(seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(N, T, D, generator=gen, dtype=torch.float64)
    Z = torch.randn(N, D_Q, generator=gen, dtype=torch.float64)
    v = torch.randn(D, generator=gen, dtype=torch.float64)
    return TokenSelectionData(X, Z=Z, y=[1, -1, 1, -1, 1], v=v)


def _reference_risk(X, Z, y, v, W, loss):
    """Plain autograd reference: logits x_t^T W z written out, softmax, then the loss."""
    s = torch.einsum("ntd,de,ne->nt", X, W, Z)
    f = (torch.softmax(s, dim=-1) * (X @ v)).sum(-1)
    return loss_fn(y * f, loss).mean()


@pytest.mark.parametrize("loss", ["exp", "logistic"])
def test_rectangular_gradient_matches_autograd_and_finite_differences(loss):
    data = _data()
    W = 0.7 * torch.randn(D, D_Q, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gW, _, _ = loss_gradients(data.X, data.Z, data.y, data.v, W, loss)
    assert gW.mantissa.shape == (D, D_Q)
    Wr = W.clone().requires_grad_()
    (reference,) = torch.autograd.grad(_reference_risk(data.X, data.Z, data.y, data.v, Wr, loss), Wr)
    torch.testing.assert_close(gW.value(), reference, rtol=1e-10, atol=1e-13)
    eps, fd = 1e-6, torch.zeros_like(W)
    for a in range(D):
        for b in range(D_Q):
            E = torch.zeros_like(W)
            E[a, b] = eps
            up = _reference_risk(data.X, data.Z, data.y, data.v, W + E, loss)
            down = _reference_risk(data.X, data.Z, data.y, data.v, W - E, loss)
            fd[a, b] = (up - down) / (2 * eps)
    torch.testing.assert_close(gW.value(), fd, rtol=1e-6, atol=1e-9)
    assert torch.autograd.gradcheck(
        lambda w: attention_loss(data.X, data.Z, data.y, data.v, w, loss), (W.clone().requires_grad_(),)
    )


def test_factored_chain_rule_for_rectangular_keys_and_queries_matches_autograd():
    data = _data(2)
    model = Factored(D, 4, d_q=D_Q, init_scale=0.5, seed=3)
    assert model.K.shape == (D, 4) and model.Q.shape == (D_Q, 4) and model.W.shape == (D, D_Q)
    grads, _ = model.gradients(data, "exp")
    reference = torch.autograd.grad(
        _reference_risk(data.X, data.Z, data.y, data.v, model.K @ model.Q.T, "exp"), (model.K, model.Q)
    )
    for name, ref in zip(("K", "Q"), reference):
        torch.testing.assert_close(grads[name].value(), ref, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_al_train_and_batched_train_take_the_same_rectangular_steps(param):
    data = _data(4)
    gen = torch.Generator().manual_seed(5)
    if param == "W":
        W0 = 0.1 * torch.randn(D, D_Q, generator=gen, dtype=torch.float64)
        model, init = Combined(D, W0=W0, d_q=D_Q), {"W0": W0}
    else:
        K0 = 0.1 * torch.randn(D, 4, generator=gen, dtype=torch.float64)
        Q0 = 0.1 * torch.randn(D_Q, 4, generator=gen, dtype=torch.float64)
        model, init = Factored(D, 4, K0=K0, Q0=Q0, d_q=D_Q), {"K0": K0, "Q0": Q0}
    al.train(model, "ngd:lr=0.3", data, steps=40)
    run = al.batched.train(data.X, data.Z, data.y, data.v, param=param, optimizer="ngd", lr=0.3, steps=40, **init)
    assert run.W.shape == (1, D, D_Q)
    torch.testing.assert_close(model.W.detach(), run.W[0], rtol=1e-12, atol=1e-12)


def test_ngd_on_rectangular_w_aligns_with_the_rectangular_svm():
    data = _data()
    run = al.batched.train(data.X, data.Z, data.y, data.v, optimizer="ngd", lr=0.5, steps=3000)
    svm = al.svm.attention_svm(data, "fro")
    cos = float((run.W[0] * svm.W).sum() / run.W[0].norm() / svm.W.norm())
    assert 1 - cos < 1e-3


def test_a_model_of_another_query_width_is_refused_naming_d_q():
    with pytest.raises(al.ValidationError, match=r"d_q = 4 but the data's queries Z have width 3.*d_q=3"):
        al.train(Combined(D, d_q=4), "ngd", _data(), steps=1)
    with pytest.raises(al.ValidationError, match=r"W0 has shape \(6, 6\), expected \(\[R,\] 6, 3\)"):
        Combined(D, W0=torch.zeros(D, D), d_q=D_Q)
    with pytest.raises(al.ValidationError, match=r"param='diag' needs queries of the tokens' width"):
        d = _data()
        al.batched.train(d.X, d.Z, d.y, d.v, param="diag", xi_k0=torch.ones(D), xi_q0=torch.zeros(D))


def test_the_kernel_coefficient_space_trains_a_rectangular_w_as_a_plain_ngd_loop():
    # n T^2 = 8 <= d^2: the engine trains W through its n T coefficients (engine/spaces.py KernelSpace)
    from attnlab.training.engine import kernel_applies
    from attnlab.training.spaces import Problem

    gen = torch.Generator().manual_seed(6)
    X, Z = (
        torch.randn(2, 2, D, generator=gen, dtype=torch.float64),
        torch.randn(2, D_Q, generator=gen, dtype=torch.float64),
    )
    y, v = torch.tensor([1.0, -1.0], dtype=torch.float64), torch.randn(D, generator=gen, dtype=torch.float64)
    rule = al.optim.spec.OptimizerSpec.parse("ngd").rule(["W"], lr=torch.tensor([0.2]))
    problem = Problem(X[None], Z[None], y[None], v[None], "exp")
    assert kernel_applies("W", {"W": torch.zeros(1, D, D_Q)}, problem, rule)
    run = al.batched.train(X, Z, y, v, optimizer="ngd", lr=0.2, steps=5)  # before saturation spoils autograd
    W = torch.zeros(D, D_Q, dtype=torch.float64, requires_grad=True)
    for _ in range(5):  # plain NGD: W <- W - lr g / ||g||_F, g by autograd through the written-out softmax
        (g,) = torch.autograd.grad(_reference_risk(X, Z, y, v, W, "exp"), W)
        W = (W - 0.2 * g / g.norm()).detach().requires_grad_()
    torch.testing.assert_close(run.W[0], W.detach(), rtol=1e-10, atol=1e-12)
