"""Margin losses of the token-selection papers, computed in the log domain.

Spec: implicit-bias-ngd §3 (exponential loss in theory, logistic allowed), mirror-descent-lp §2 (Assumption A:
logistic and exponential), kq-nuclear-norm §2 (exponential).

All functions act elementwise on margins ``z = y f(X)`` of any shape, so a leading runs axis needs nothing special.
Each public function checks ``z`` (real, finite, copied to float64) and calls its unchecked ``_`` version, which the
training loop and the models call on margins they computed; every one checks the loss ``name`` at each call.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnlab._numerics import log_mean_exp
from attnlab._validation import ValidationError, check_in, check_tensor

__all__ = ["LOSSES", "log_loss", "log_abs_loss_derivative", "loss", "mean_loss", "log_mean_loss"]

LOSSES = ("exp", "logistic")

# Below this value of u = e^{-z}, log1p(u)/u is 1 - u/2 to double precision (the next term is u^2/3).
_SERIES_CUTOFF = 1e-8


def _check(name: str) -> str:
    return str(check_in("loss", name, LOSSES))


def _real_tensor(name: str, value: object) -> torch.Tensor:
    """``value`` as a float64 tensor of finite real numbers (:func:`~attnlab._validation.check_tensor`); booleans are
    refused. A tensor that requires grad is converted on autograd's graph (the same values as the checked copy), so
    gradients still reach the caller's tensor.

    Raises
    ------
    ValidationError
        Naming ``name``: boolean, complex, text or object values, or NaN or inf entries.
    """
    checked = check_tensor(name, value)
    if value.dtype == torch.bool if isinstance(value, torch.Tensor) else np.asarray(value).dtype == np.bool_:
        raise ValidationError(f"{name} is boolean; pass real numbers (e.g. {name}.double() for 0/1 values)")
    return value.to(torch.float64) if isinstance(value, torch.Tensor) and value.requires_grad else checked


def _samples(z: object) -> torch.Tensor:
    """Margins ``z`` of shape ``(..., n)`` with ``n >= 1`` (:func:`_real_tensor`): the samples of a mean."""
    z = _real_tensor("z", z)
    if z.dim() == 0 or z.shape[-1] == 0:
        raise ValidationError(
            f"z has shape {tuple(z.shape)}, expected (..., n) with at least one margin on the last axis (the "
            "samples the mean is over); pass z of shape (n,) or (R, n)"
        )
    return z


def log_loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    """``log l(z)`` for margins ``z`` (any shape), exact for large ``z`` where ``l(z)`` underflows.

    exp: ``log e^{-z} = -z``; logistic: ``log softplus(-z)``, written as ``-z + log(log1p(u)/u)`` with
    ``u = e^{-z}`` for ``z > 0`` so that it never becomes ``log 0``.

    Parameters
    ----------
    z : torch.Tensor of any shape
        Margins ``y f(X)``: real numbers (an array or an integer or float32 tensor is converted to float64).
    name : {"exp", "logistic"}, default="exp"
        The loss.

    Returns
    -------
    torch.Tensor, float64
        ``log l(z)``, the shape of ``z`` (differentiable in ``z``).

    Raises
    ------
    ValidationError
        When ``z`` is not real (complex, boolean, text), has NaN or inf entries, or ``name`` is unknown.
    """
    return _log_loss(_real_tensor("z", z), name)


def _log_loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    _check(name)
    if name == "exp":
        return -z  # spec ngd §3: l(z) = e^{-z}
    u = torch.exp(-z.clamp(min=0.0))
    ratio = torch.where(u < _SERIES_CUTOFF, 1.0 - u / 2.0, torch.log1p(u) / torch.where(u > 0, u, 1.0))
    positive = -z + torch.log(ratio)  # spec ngd §3: log(1 + e^{-z}) for z > 0
    # the other branch sees z <= 0 only: at a large z its log softplus(-z) = log 0 would make where's gradient NaN
    return torch.where(z > 0, positive, torch.log(F.softplus(-torch.where(z > 0, 0.0, z))))


def loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    """``l(z)`` elementwise: ``e^{-z}`` (exp) or ``log(1 + e^{-z})`` (logistic).

    Parameters
    ----------
    z : torch.Tensor of any shape
        Margins ``y f(X)``: real numbers (an array or an integer or float32 tensor is converted to float64).
    name : {"exp", "logistic"}, default="exp"
        The loss.

    Returns
    -------
    torch.Tensor, float64
        ``l(z)``, the shape of ``z`` (differentiable in ``z``).

    Raises
    ------
    ValidationError
        When ``z`` is not real (complex, boolean, text), has NaN or inf entries, or ``name`` is unknown.
    """
    return _loss(_real_tensor("z", z), name)


def _loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    _check(name)
    return torch.exp(-z) if name == "exp" else F.softplus(-z)


def log_abs_loss_derivative(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    """``log |l'(z)|``: ``-z`` (exp, ``l' = -e^{-z}``) or ``-softplus(z)`` (logistic, ``l' = -1/(1+e^z)``).

    Parameters
    ----------
    z : torch.Tensor of any shape
        Margins ``y f(X)``: real numbers (an array or an integer or float32 tensor is converted to float64).
    name : {"exp", "logistic"}, default="exp"
        The loss.

    Returns
    -------
    torch.Tensor, float64
        ``log |l'(z)|``, the shape of ``z``.

    Raises
    ------
    ValidationError
        When ``z`` is not real (complex, boolean, text), has NaN or inf entries, or ``name`` is unknown.
    """
    return _log_abs_loss_derivative(_real_tensor("z", z), name)


def _log_abs_loss_derivative(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    _check(name)
    return -z if name == "exp" else -F.softplus(z)


def log_mean_loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    """``log((1/n) sum_i l(z_i))`` over the last axis by log-sum-exp; shape ``z.shape[:-1]``.

    Parameters
    ----------
    z : torch.Tensor of shape (..., n)
        Margins ``y_i f(X_i)``, the samples on the last axis (a leading runs axis ``R`` is one of ``...``), ``n >= 1``.
    name : {"exp", "logistic"}, default="exp"
        The loss.

    Returns
    -------
    torch.Tensor, float64
        The log of the empirical risk, shape ``z.shape[:-1]``.

    Raises
    ------
    ValidationError
        When ``z`` is not real (complex, boolean, text), has NaN or inf entries, has no axis or no sample on its last
        axis, or ``name`` is unknown.
    """
    return _log_mean_loss(_samples(z), name)


def _log_mean_loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    return log_mean_exp(_log_loss(z, name))  # log((1/n) sum_i l(z_i)), from the log losses


def mean_loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    """Empirical risk ``(1/n) sum_i l(z_i)`` over the last axis; shape ``z.shape[:-1]``.

    Parameters
    ----------
    z : torch.Tensor of shape (..., n)
        Margins ``y_i f(X_i)``, the samples on the last axis (a leading runs axis ``R`` is one of ``...``), ``n >= 1``.
    name : {"exp", "logistic"}, default="exp"
        The loss.

    Returns
    -------
    torch.Tensor, float64
        The empirical risk, shape ``z.shape[:-1]``.

    Raises
    ------
    ValidationError
        When ``z`` is not real (complex, boolean, text), has NaN or inf entries, has no axis or no sample on its last
        axis, or ``name`` is unknown.
    """
    return _mean_loss(_samples(z), name)


def _mean_loss(z: torch.Tensor, name: str = "exp") -> torch.Tensor:
    return _loss(z, name).mean(dim=-1)
