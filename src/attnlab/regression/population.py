"""Closed-form population loss of softmax attention on linear regression, and its gradient.

Spec: preconditioned-regression §3.2-3.3 (closed form, Theorem 1.1), §5.1 (gradient), §10.1 (joint tokens).
Gaussian tilting makes the infinite-context predictor linear, ``y_hat(x) = V Sigma_z Q x``, so
``L(V, Q) = ||(V Sigma_z Q - W*) Sigma^{1/2}||_F^2 + k sigma^2`` with ``Sigma_z = Sigma`` for covariate tokens.
"""

from __future__ import annotations

import torch

from attnlab._validation import check_finite_result, check_scalar, check_tensor
from attnlab.regression._checks import check_batched, check_spd, check_tokens
from attnlab.regression.data import token_covariance

__all__ = ["population_excess_loss", "population_gradient", "population_loss"]

_OVERFLOW = (
    "V Sigma_z Q overflows float64: V or Q is too large; pass V and Q of moderate scale (the loss reads them only "
    "through V Sigma_z Q, so (c V, Q / c) gives the same value)"
)


def _check(V, Q, Sigma, W_star, noise_std, tokens):  # noqa: ANN001, ANN202 - shared argument checks
    check_tokens(tokens)
    sizes: dict[str, int] = {}
    Sigma = check_spd("Sigma", Sigma, sizes)
    W_star = check_tensor("W_star", W_star, "kd", sizes, min_size={"k": 1})
    check_scalar("noise_std", noise_std, low=0.0)
    Sigma_z = token_covariance(Sigma, W_star, noise_std, tokens=tokens)
    sizes["p"] = int(Sigma_z.shape[-1])
    V = check_batched("V", V, "kp", sizes)
    Q = check_batched("Q", Q, "pd", sizes)
    return V, Q, Sigma, Sigma_z, W_star


def excess(
    V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor, W_star: torch.Tensor
) -> torch.Tensor:
    """``||(V Sigma_z Q - W*) Sigma^{1/2}||_F^2`` without checks, shape ([R]) (spec §3.3)."""
    E = V @ Sigma_z @ Q - W_star  # spec §5.1: E = V Sigma Q - W*, (..., k, d)
    return (E @ Sigma * E).sum((-2, -1))  # spec §3.3: tr(E Sigma E^T), no square root, no cancellation


def _gradient(
    V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor, W_star: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grad_V L, grad_Q L)`` without checks, shapes ([R,] k, p), ([R,] p, d) (spec §5.1)."""
    E = V @ Sigma_z @ Q - W_star  # spec §5.1
    grad_V = 2 * E @ Sigma @ Q.transpose(-1, -2) @ Sigma_z  # spec §5.1: 2 E Sigma Q^T Sigma
    grad_Q = 2 * Sigma_z @ V.transpose(-1, -2) @ E @ Sigma  # spec §5.1: 2 Sigma V^T E Sigma
    return grad_V, grad_Q


def population_excess_loss(
    V: object, Q: object, Sigma: object, W_star: object, noise_std: float = 0.0, *, tokens: str = "covariates"
) -> torch.Tensor:
    """Population loss above the irreducible level, ``L(V, Q) - k sigma^2``, computed without cancellation.

    Spec: preconditioned-regression §3.3.

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
        Value matrix; p = d (covariate tokens) or d + k (joint tokens).
    Q : array-like, shape ([R,] p, d), float64
        Key-query matrix.
    Sigma : array-like, shape (d, d), float64
        Covariate covariance, symmetric positive definite (A1).
    W_star : array-like, shape (k, d), float64
        True regression matrix.
    noise_std : float, default=0.0
        Noise standard deviation sigma >= 0 (> 0 for joint tokens).
    tokens : {"covariates", "joint"}, default="covariates"
        Token reading (spec §0, §10.1).

    Returns
    -------
    torch.Tensor, shape ([R]), float64
        ``||(V Sigma_z Q - W*) Sigma^{1/2}||_F^2``, >= 0.

    Raises
    ------
    ValidationError
        Non-SPD ``Sigma``, mismatched or empty shapes, negative ``noise_std``, ``V`` and ``Q`` so large that the
        value overflows.
    """
    return check_finite_result(
        "population_excess_loss", excess(*_check(V, Q, Sigma, W_star, noise_std, tokens)), _OVERFLOW
    )


def population_loss(
    V: object, Q: object, Sigma: object, W_star: object, noise_std: float, *, tokens: str = "covariates"
) -> torch.Tensor:
    """Closed-form population loss ``L(V, Q) = ||(V Sigma_z Q - W*) Sigma^{1/2}||_F^2 + k sigma^2``.

    Spec: preconditioned-regression §3.3 (Theorem 1.1; logits ``x_j^T Q x``).

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
        Value matrix; p = d (covariate tokens) or d + k (joint tokens).
    Q : array-like, shape ([R,] p, d), float64
        Key-query matrix.
    Sigma : array-like, shape (d, d), float64
        Covariate covariance, symmetric positive definite (A1).
    W_star : array-like, shape (k, d), float64
    noise_std : float
        Noise standard deviation sigma >= 0 (> 0 for joint tokens).
    tokens : {"covariates", "joint"}, default="covariates"
        Token reading (spec §0, §10.1).

    Returns
    -------
    torch.Tensor, shape ([R]), float64

    Raises
    ------
    ValidationError
        Non-SPD ``Sigma``, mismatched or empty shapes, negative ``noise_std``, ``V`` and ``Q`` so large that the
        value overflows.

    Notes
    -----
    The infinite-context predictor is ``V Sigma_z Q x`` by Gaussian tilting (spec §3.3), hence
    ``L = tr(E Sigma E^T) + k sigma^2`` with ``E = V Sigma_z Q - W*``.

    Examples
    --------
    >>> import torch
    >>> I = torch.eye(2, dtype=torch.float64)
    >>> round(float(population_loss(I, I, I, I, 0.1)), 12)
    0.02
    """
    V, Q, Sigma, Sigma_z, W_star = _check(V, Q, Sigma, W_star, noise_std, tokens)
    loss = excess(V, Q, Sigma, Sigma_z, W_star) + W_star.shape[0] * float(noise_std) ** 2  # spec §3.3: + k sigma^2
    return check_finite_result("population_loss", loss, _OVERFLOW)


def population_gradient(
    V: object, Q: object, Sigma: object, W_star: object, noise_std: float = 0.0, *, tokens: str = "covariates"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of :func:`population_loss`: ``(2 E Sigma Q^T Sigma_z, 2 Sigma_z V^T E Sigma)``.

    Spec: preconditioned-regression §5.1 (``E = V Sigma_z Q - W*``).

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
        Value matrix; p = d (covariate tokens) or d + k (joint tokens).
    Q : array-like, shape ([R,] p, d), float64
        Key-query matrix.
    Sigma : array-like, shape (d, d), float64
        Covariate covariance, symmetric positive definite (A1).
    W_star : array-like, shape (k, d), float64
        True regression matrix.
    noise_std : float, default=0.0
        Noise standard deviation sigma >= 0 (> 0 for joint tokens).
    tokens : {"covariates", "joint"}, default="covariates"
        Token reading (spec §0, §10.1).

    Returns
    -------
    grad_V : torch.Tensor, shape ([R,] k, p), float64
    grad_Q : torch.Tensor, shape ([R,] p, d), float64

    Raises
    ------
    ValidationError
        Non-SPD ``Sigma``, mismatched or empty shapes, negative ``noise_std``, ``V`` and ``Q`` so large that the
        gradient overflows.
    """
    grad_V, grad_Q = _gradient(*_check(V, Q, Sigma, W_star, noise_std, tokens))
    return check_finite_result("population_gradient grad_V", grad_V, _OVERFLOW), check_finite_result(
        "population_gradient grad_Q", grad_Q, _OVERFLOW
    )
