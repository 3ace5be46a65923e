"""Integrability diagnostics: exponential moments of the attention logits in closed form.

Spec: preconditioned-regression §7 (A3, Lemma 7). For independent tokens ``z' ~ N(0, Sigma_z)``, ``x ~ N(0, Sigma)``:
``E exp(c z'^T Q x) = det(I - c^2 C^T C)^{-1/2}``, finite iff ``c ||C||_op < 1``, ``C = Sigma_z^{1/2} Q Sigma^{1/2}``.
For the self-logit ``z^T Q x`` of a token with its own query: ``E exp(x^T B x) = det(I - 2 Sigma^{1/2} B Sigma^{1/2})^{-1/2}``
with ``B = c sym(Q_x + W*^T Q_y) + (c^2 sigma^2 / 2) Q_y^T Q_y`` (``Q_y`` is empty for covariate tokens).
"""

from __future__ import annotations

import torch

from attnlab._validation import check_scalar, check_tensor
from attnlab.regression._checks import check_batched, check_spd, check_tokens
from attnlab.regression.data import token_covariance
from attnlab.regression.linalg import _sym_sqrt

__all__ = ["cross_logit_mgf", "self_logit_mgf"]


def _check(c, Q, Sigma, W_star, noise_std, tokens):  # noqa: ANN001, ANN202 - shared argument checks
    check_tokens(tokens)
    check_scalar("c", c, low=0.0)
    sizes: dict[str, int] = {}
    Sigma = check_spd("Sigma", Sigma, sizes)
    if tokens == "joint":
        W_star = check_tensor("W_star", W_star, "kd", sizes)
        check_scalar("noise_std", noise_std, low=0.0, low_inclusive=False)
    sizes["p"] = sizes["d"] + (sizes["k"] if tokens == "joint" else 0)
    Q = check_batched("Q", Q, "pd", sizes)
    return Q, Sigma, W_star


def _gaussian_quadratic_mgf(K: torch.Tensor) -> torch.Tensor:
    """``det(I - K)^{-1/2}`` for symmetric K, ``inf`` where ``lambda_max(K) >= 1``."""
    eig = torch.linalg.eigvalsh(K)
    value = torch.exp(-0.5 * torch.log1p(-eig.clamp(max=1.0)).sum(-1))
    return torch.where(eig.amax(-1) < 1.0, value, torch.full_like(value, float("inf")))


def cross_logit_mgf(
    c: float,
    Q: object,
    Sigma: object,
    W_star: object | None = None,
    noise_std: float = 0.0,
    *,
    tokens: str = "covariates",
) -> torch.Tensor:
    """``E exp(c z'^T Q x)`` for independent token ``z'`` and query ``x``; ``inf`` when it diverges.

    Spec: preconditioned-regression §7.

    Parameters
    ----------
    c : float
        Multiplier of the logit, >= 0.
    Q : array-like, shape ([R,] p, d), float64
    Sigma : array-like, shape (d, d), float64
    W_star : array-like, shape (k, d), float64, optional
        Needed for joint tokens.
    noise_std : float, default=0.0
        Needed (> 0) for joint tokens.
    tokens : {"covariates", "joint"}, default="covariates"

    Returns
    -------
    torch.Tensor, shape ([R]), float64
    """
    Q, Sigma, W_star = _check(c, Q, Sigma, W_star, noise_std, tokens)
    Sigma_z = token_covariance(Sigma, W_star, noise_std, tokens=tokens)
    C = _sym_sqrt(Sigma_z) @ Q @ _sym_sqrt(Sigma)  # spec §7: C = Sigma^{1/2} Q Sigma^{1/2}
    return _gaussian_quadratic_mgf(c**2 * C.transpose(-1, -2) @ C)  # spec §7: det(I - c^2 C^T C)^{-1/2}


def self_logit_mgf(
    c: float,
    Q: object,
    Sigma: object,
    W_star: object | None = None,
    noise_std: float = 0.0,
    *,
    tokens: str = "covariates",
) -> torch.Tensor:
    """``E exp(c z^T Q x)`` where ``z`` is the query's own token (the self-term of the in-sample loss).

    Spec: preconditioned-regression §7 (Lemma 7).

    Parameters
    ----------
    c : float
        Multiplier of the logit, >= 0.
    Q : array-like, shape ([R,] p, d), float64
        Key-query matrix; p = d (covariate tokens) or d + k (joint tokens).
    Sigma : array-like, shape (d, d), float64
        Covariate covariance, SPD.
    W_star : array-like, shape (k, d), float64, optional
        Needed for joint tokens.
    noise_std : float, default=0.0
        Needed (> 0) for joint tokens.
    tokens : {"covariates", "joint"}, default="covariates"

    Returns
    -------
    torch.Tensor, shape ([R]), float64
        The moment, > 0; ``inf`` when it diverges.

    Raises
    ------
    ValidationError
        ``c < 0``, non-SPD ``Sigma``, mismatched shapes, or joint tokens without ``W_star`` and ``noise_std > 0``.
    """
    Q, Sigma, W_star = _check(c, Q, Sigma, W_star, noise_std, tokens)
    d = Sigma.shape[-1]
    Q_x, Q_y = Q[..., :d, :], Q[..., d:, :]
    B = Q_x if tokens == "covariates" else Q_x + W_star.T @ Q_y
    B = c * (B + B.transpose(-1, -2)) / 2 + (c**2 * noise_std**2 / 2) * Q_y.transpose(-1, -2) @ Q_y
    root = _sym_sqrt(Sigma)
    return _gaussian_quadratic_mgf(2 * root @ B @ root)  # spec §7: det(I - 2 Sigma^{1/2} B Sigma^{1/2})^{-1/2}
