"""The three parametrisations: gradients against finite differences of the plain loss, at random and saturated points."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.losses import loss as loss_fn
from attnlab.models import Combined, Diagonal, Factored


def _data(seed=0, n=3, T=4, d=3):
    g = torch.Generator().manual_seed(seed)
    return TokenSelectionData(torch.randn(n, T, d, generator=g), y=[1, -1, 1][:n], v=torch.randn(d, generator=g))


def _plain_risk(model, data, loss):
    s = torch.einsum("ntd,de,ne->nt", data.X, model.W, data.Z)
    f = (torch.softmax(s, -1) * (data.X @ model.head(data.v))).sum(-1)
    return loss_fn(data.y * f, loss).mean()


def _models(scale):
    g = torch.Generator().manual_seed(7)
    return [
        Combined(3, W0=scale * torch.randn(3, 3, generator=g)),
        Factored(3, 4, K0=scale**0.5 * torch.randn(3, 4, generator=g), Q0=scale**0.5 * torch.randn(3, 4, generator=g)),
        Diagonal(3, xi_k0=scale**0.5 * torch.randn(3, generator=g), xi_q0=scale**0.5 * torch.randn(3, generator=g)),
        Combined(3, W0=scale * torch.randn(3, 3, generator=g), v0=torch.randn(3, generator=g), train_head=True),
    ]


@pytest.mark.parametrize("loss", ["exp", "logistic"])
@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize("index", range(4))
def test_parameter_gradients_match_finite_differences(loss, scale, index):
    data = _data()
    model = _models(scale)[index]
    grads, _ = model.gradients(data, loss)
    h = 1e-6
    for name, p in model.named_parameters():
        fd = torch.zeros_like(p)
        flat = p.data.view(-1)
        with torch.no_grad():
            for j in range(flat.numel()):
                old = float(flat[j])
                flat[j] = old + h
                up = float(_plain_risk(model, data, loss))
                flat[j] = old - h
                down = float(_plain_risk(model, data, loss))
                flat[j] = old
                fd.view(-1)[j] = (up - down) / (2 * h)
        # central differences: truncation O(h^2) and round-off O(1e-16/h) ~ 1e-10; entries are O(1) or smaller
        torch.testing.assert_close(grads[name].value(), fd, rtol=1e-5, atol=2e-8, msg=f"{name} at scale {scale}")
    # the autograd path (custom backward) gives the same gradient
    model.zero_grad()
    model.loss(data, loss).sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].value(), rtol=1e-12, atol=1e-15)


def test_models_expose_combined_matrix():
    K, Q = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(Factored(3, 4, K0=K, Q0=Q).W, K @ Q.T)
    d = Diagonal(3, xi_k0=[1.0, 2.0, 3.0], xi_q0=[2.0, 0.5, -1.0])
    torch.testing.assert_close(d.W, torch.diag(torch.tensor([2.0, 1.0, -3.0])))
    assert Combined(3).W.abs().sum() == 0


def test_default_diagonal_init_is_the_papers_equation_5():
    d = Diagonal(4, omega=0.2)
    assert d.beta.abs().max() == 0  # beta(0) = 0
    torch.testing.assert_close(d.xi_k**2 + d.xi_q**2, 2 * 0.2**2 * torch.ones(4))


def test_bad_shapes_are_named():
    with pytest.raises(ValidationError, match="W0"):
        Combined(3, W0=torch.zeros(2, 2))
    with pytest.raises(ValidationError, match="K0"):
        Factored(3, 2, K0=torch.zeros(3, 3))
    with pytest.raises(ValidationError, match="no head"):
        Combined(3).loss(TokenSelectionData(torch.randn(2, 3, 3), y=[1, -1]))


def test_sizes_of_any_integral_type_and_flags_only_as_booleans():
    import numpy as np

    assert Combined(np.int64(6)).W.shape == (6, 6) and Combined(np.int64(6)).d == 6
    assert Factored(np.int32(3), np.int64(4)).K.shape == (3, 4)
    with pytest.raises(ValidationError, match="train_head == 'no', must be a bool"):
        Combined(3, train_head="no")
