"""NTK regression (Algorithm D) against the linearized network and its closed-form limit (spec §6.1)."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import SoftmaxMLP, cross_kernel, gram, kernel_regression_limit, practical_step
from attnlab.training.ntk import kernel_regression_path


def _setup():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(6, 3, generator=g, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    Xt = torch.randn(4, 3, generator=g, dtype=torch.float64)
    Xt = Xt / Xt.norm(dim=1, keepdim=True)
    Y = torch.randn(6, 2, generator=g, dtype=torch.float64)
    net = SoftmaxMLP(3, 2, 400, seed=0)
    return net, X, Xt, Y


def test_path_on_training_inputs_is_the_linearized_network():
    net, X, _, Y = _setup()
    H = gram(net, X)
    lr = practical_step(net, X)
    m = net.width
    path = kernel_regression_path(H, H, Y, lr=lr, scale=m, steps=[0, 1, 5]).iterates["F"]
    F = torch.zeros(12, dtype=torch.float64)
    y = Y.T.reshape(-1)
    linear = {0: F.clone()}
    for step in range(1, 6):
        F = F - lr * m * (H @ (F - y))  # spec §6.1: F_ker(t+1) = F_ker(t) - eta m H* (F_ker(t) - Y)
        linear[step] = F.clone()
    for k, step in enumerate([0, 1, 5]):
        assert torch.allclose(path[k].T.reshape(-1), linear[step], rtol=0, atol=1e-12)


def test_path_converges_to_the_closed_form_limit():
    net, X, Xt, Y = _setup()
    H, K = gram(net, X), cross_kernel(net, Xt, X)
    lam_rate = practical_step(net, X) * net.width * float(torch.linalg.eigvalsh(H)[0])
    steps = int(40 / lam_rate)  # e^{-40}: converged to round-off
    path = kernel_regression_path(H, K, Y, lr=practical_step(net, X), scale=net.width, steps=[steps]).iterates["F"]
    limit = kernel_regression_limit(H, K, Y)
    assert torch.allclose(path[-1], limit, rtol=0, atol=1e-8 * float(limit.abs().max()))
    assert torch.allclose(kernel_regression_limit(H, H, Y), Y, atol=1e-8)  # interpolates the training labels


def test_a_gram_of_the_wrong_shape_or_singular_is_refused():
    Y = torch.zeros(4, 1, dtype=torch.float64)
    K = torch.zeros(2, 4, dtype=torch.float64)
    with pytest.raises(ValidationError, match="H has shape"):
        kernel_regression_limit(torch.eye(3, dtype=torch.float64), K, Y)
    with pytest.raises(ValidationError, match="H has shape"):
        kernel_regression_limit(torch.zeros(4, 3, dtype=torch.float64), K, Y)
    with pytest.raises(ValidationError, match="H is singular.*distinct training inputs"):
        kernel_regression_limit(torch.ones(4, 4, dtype=torch.float64), K, Y)  # the Gram of four equal inputs


def test_the_path_refuses_a_gram_of_the_wrong_shape_and_stops_where_its_residual_overflows():
    """H of shape (11, 11) against n L = 12 outputs raised a bare RuntimeError; a residual whose squared norm
    overflows float64 was recorded as inf for a state the guard called good."""
    net, X, Xt, Y = _setup()
    H, K = gram(net, X), cross_kernel(net, Xt, X)
    for bad in (H[:11, :11], H[:, :11], torch.cat([H, H])):
        with pytest.raises(ValidationError, match="H has shape"):
            kernel_regression_path(bad, K, Y, lr=practical_step(net, X), scale=net.width, steps=[1])
    run = kernel_regression_path(H, K, Y, lr=100 * practical_step(net, X), scale=net.width, steps=[0, 10, 100, 1000])
    assert run.status == ["diverged"] and bool(torch.isfinite(torch.tensor(run.frame["sq_residual"].to_numpy())).all())
