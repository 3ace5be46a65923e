"""Losses in the log domain against the direct formulas and their large-margin asymptotics."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.losses import log_abs_loss_derivative, log_loss, log_mean_loss, loss, mean_loss


@pytest.mark.parametrize("name", ["exp", "logistic"])
def test_log_loss_equals_log_of_loss_where_representable(name):
    z = torch.linspace(-30, 30, 61)
    torch.testing.assert_close(log_loss(z, name), torch.log(loss(z, name)), rtol=1e-13, atol=1e-13)


def test_logistic_log_loss_is_exact_beyond_underflow():
    z = torch.tensor([800.0, 1e4])
    # log(log(1 + e^-z)) = -z - e^-z/2 + ... = -z to double precision
    torch.testing.assert_close(log_loss(z, "logistic"), -z, rtol=1e-15, atol=0.0)


def test_logistic_log_loss_has_its_gradient_beyond_underflow():
    """d/dz log l(z) -> -1 for large z; softplus(-z) = 0 in the unused branch made it NaN past z ~ 745."""
    z = torch.tensor([30.0, 800.0, 1e4], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(log_loss(z, "logistic").sum(), z)
    torch.testing.assert_close(grad, torch.full_like(grad, -1.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["exp", "logistic"])
def test_derivative_against_autograd(name):
    z = torch.linspace(-5, 5, 11, requires_grad=True)
    (grad,) = torch.autograd.grad(loss(z, name).sum(), z)
    torch.testing.assert_close(log_abs_loss_derivative(z.detach(), name), torch.log(-grad), rtol=1e-12, atol=1e-12)


def test_log_mean_loss_is_log_of_mean():
    z = torch.randn(3, 7)
    torch.testing.assert_close(log_mean_loss(z, "logistic").exp(), mean_loss(z, "logistic"))
    assert math.isfinite(float(log_mean_loss(torch.full((4,), 2000.0), "exp")))


def test_unknown_loss_is_refused():
    with pytest.raises(ValidationError, match="loss == 'hinge'"):
        loss(torch.zeros(2), "hinge")
