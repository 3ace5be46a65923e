"""Closed-form Jacobian factors, gradient and tangent of the three networks (spec §3.2, §5.1) vs autograd."""

import math

import pytest
import torch
from torch.func import functional_call, jacrev, jvp

from attnlab._validation import ValidationError
from attnlab.ntk import ExpMLP, ReluMLP, SoftmaxMLP
from attnlab.ntk.network import jacobian_coefficients, output_tangent

NETS = [SoftmaxMLP, ReluMLP, ExpMLP]
TOL = 1e-10  # float64 closed form vs autograd: agreement to round-off (~1e-14) with margin


def _setup(cls, n=6, d_in=4, d_out=3, m=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d_in, generator=g, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    Y = 0.5 * torch.randn(n, d_out, generator=g, dtype=torch.float64)
    net = cls(d_in, d_out, m, seed=seed)
    with torch.no_grad():  # leave the symmetric point so that F != 0 and every term of the gradient is active
        net.W.add_(0.3 * torch.randn(net.W.shape, generator=g, dtype=torch.float64))
    return net, X, Y


def test_softmax_output_is_width_times_softmax_times_a():
    net, X, _ = _setup(SoftmaxMLP)
    expected = net.width * torch.softmax(X @ net.W, dim=1) @ net.a.T  # issue 5: F = width softmax(x^T W) a^T
    assert torch.allclose(net(X), expected, rtol=0, atol=TOL)


def test_softmax_gradient_matches_the_per_neuron_formula_of_the_spec():
    net, X, Y = _setup(SoftmaxMLP, m=6)
    with torch.no_grad():
        S = torch.softmax(X @ net.W, dim=1)
        F = net(X)
        m = net.width
        expected = torch.zeros_like(net.W)
        for r in range(m):  # spec §3.2: Delta w_r = m sum_i sum_l (F - y) <v_{l,r}, S_i> S_{i,r} x_i
            for i in range(X.shape[0]):
                for l in range(net.d_out):
                    v = net.a[l, r] * torch.ones(m, dtype=torch.float64) - net.a[l]
                    expected[:, r] += m * (F[i, l] - Y[i, l]) * (v @ S[i]) * S[i, r] * X[i]
    assert torch.allclose(net.loss_gradient(X, Y), expected, rtol=0, atol=TOL)


@pytest.mark.parametrize("d_out", [1, 3])  # one output takes weight_gradient's factored path where b = 0
@pytest.mark.parametrize("cls", NETS)
def test_closed_form_gradient_matches_autograd(cls, d_out):
    net, X, Y = _setup(cls, d_out=d_out)
    loss = 0.5 * (net(X) - Y).pow(2).sum()
    (auto,) = torch.autograd.grad(loss, net.W)
    assert torch.allclose(net.loss_gradient(X, Y), auto, rtol=0, atol=TOL)


@pytest.mark.parametrize("cls", NETS)
def test_jacobian_factors_match_torch_func_jacobian(cls):
    net, X, _ = _setup(cls)
    J = jacrev(lambda W: functional_call(net, {"W": W}, (X,)))(net.W.detach())  # (n, L, d_in, m)
    C = net.jacobian(X)
    expected = C[:, :, None, :] * X[:, None, :, None]  # dF_l(x_i)/dw_r = C[i, l, r] x_i
    assert torch.allclose(J, expected, rtol=0, atol=TOL)


@pytest.mark.parametrize("cls", NETS)
def test_output_tangent_matches_torch_func_jvp(cls):
    net, X, _ = _setup(cls)
    U = torch.randn(net.W.shape, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    _, auto = jvp(lambda W: functional_call(net, {"W": W}, (X,)), (net.W.detach(),), (U,))
    with torch.no_grad():
        phi, b = net.jacobian_factors(X @ net.W)
        closed = output_tangent(X, U, phi, b, net.a)
    assert torch.allclose(closed, auto, rtol=0, atol=TOL)
    assert torch.allclose(jacobian_coefficients(phi, b, net.a), net.jacobian(X), rtol=0, atol=0)


def test_comparison_nets_use_one_over_sqrt_width():
    net, X, _ = _setup(ReluMLP)
    expected = torch.relu(X @ net.W) @ net.a.T / math.sqrt(net.width)  # spec §5.1
    assert torch.allclose(net(X), expected, rtol=0, atol=TOL)


def test_inputs_of_the_wrong_width_are_refused():
    net = SoftmaxMLP(4, 2, 6)
    with pytest.raises(ValidationError, match=r"X has shape \(3, 5\).*axis 'k' has size 5"):
        net(torch.zeros(3, 5))
    with pytest.raises(ValidationError, match=r"Y has shape \(3, 3\)"):
        net.loss_gradient(torch.zeros(3, 4), torch.zeros(3, 3))


@pytest.mark.parametrize("d_out", [1, 3])
@pytest.mark.parametrize("cls", NETS)
def test_output_and_factors_in_place_match_the_out_of_place_ones(cls, d_out):
    net, X, _ = _setup(cls, d_out=d_out)
    with torch.no_grad():
        Z = X @ net.W
        expected = net.output_and_factors(Z)
        got = net.output_and_factors(Z.clone(), overwrite=True)
    for name, e, g in zip(("F", "phi", "b"), expected, got):
        assert torch.allclose(g, e, rtol=1e-14, atol=1e-14), name
