"""Matrix functions of symmetric positive definite matrices used by the regression geometry (spec §1)."""

from __future__ import annotations

import torch

__all__ = ["empirical_covariance", "spd_inverse", "sym_inv_sqrt", "sym_sqrt"]


def _sym_power(S: torch.Tensor, power: float) -> torch.Tensor:
    eigval, eigvec = torch.linalg.eigh(S)
    return (eigvec * eigval.unsqueeze(-2) ** power) @ eigvec.transpose(-1, -2)


def sym_sqrt(S: torch.Tensor) -> torch.Tensor:
    """Symmetric square root ``S^{1/2}`` of an SPD matrix (spec §1: the symmetric root throughout).

    Parameters
    ----------
    S : torch.Tensor, shape ([R,] d, d)
        Symmetric positive (semi)definite matrices; not checked (:func:`torch.linalg.eigh` reads the lower
        triangle only, and a negative eigenvalue gives ``nan``).

    Returns
    -------
    torch.Tensor, shape ([R,] d, d)
        The symmetric root, ``S^{1/2} S^{1/2} = S``.
    """
    return _sym_power(S, 0.5)


def sym_inv_sqrt(S: torch.Tensor) -> torch.Tensor:
    """Symmetric inverse square root ``S^{-1/2}`` of an SPD matrix.

    Parameters
    ----------
    S : torch.Tensor, shape ([R,] d, d)
        Symmetric positive definite matrices; not checked (a zero eigenvalue gives ``inf``).

    Returns
    -------
    torch.Tensor, shape ([R,] d, d)
        The inverse of :func:`sym_sqrt` of ``S``.
    """
    return _sym_power(S, -0.5)


def spd_inverse(S: torch.Tensor) -> torch.Tensor:
    """Inverse of an SPD matrix through its Cholesky factor, shape ([R,] d, d)."""
    return torch.cholesky_inverse(torch.linalg.cholesky(S))


def empirical_covariance(X: torch.Tensor, Y: torch.Tensor | None = None) -> torch.Tensor:
    """Uncentred ``X^T X / n`` (or cross-covariance ``Y^T X / n``) (spec §1, §10.5: the mean is 0).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, d)
        Covariates, one sample a row.
    Y : torch.Tensor, shape ([R,] n, k), optional
        Responses; given, the cross-covariance is returned.

    Returns
    -------
    torch.Tensor, shape ([R,] d, d) or ([R,] k, d)
        ``Sigma_hat = X^T X / n``, or ``Sigma_yx = Y^T X / n`` when ``Y`` is given.
    """
    left = X if Y is None else Y
    return left.transpose(-1, -2) @ X / X.shape[-2]  # spec §1: Sigma_hat = X^T X / n, Sigma_yx = Y^T X / n
