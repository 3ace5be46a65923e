"""Matrix functions of symmetric positive definite matrices used by the regression geometry (spec §1)."""

from __future__ import annotations

import torch

from attnlab.regression._checks import check_batched, check_spd

__all__ = ["empirical_covariance", "spd_inverse", "sym_inv_sqrt", "sym_sqrt"]


def _sym_power(S: torch.Tensor, power: float) -> torch.Tensor:
    eigval, eigvec = torch.linalg.eigh(S)
    if power > 0:
        eigval = eigval.clamp_min(0.0)  # a positive semidefinite S: round-off below 0 is 0 (no change for SPD S)
    return (eigvec * eigval.unsqueeze(-2) ** power) @ eigvec.transpose(-1, -2)


def _sym_sqrt(S: torch.Tensor) -> torch.Tensor:
    """:func:`sym_sqrt` without checks, for validated symmetric positive (semi)definite float64 ``S``."""
    return _sym_power(S, 0.5)


def _sym_inv_sqrt(S: torch.Tensor) -> torch.Tensor:
    """:func:`sym_inv_sqrt` without checks, for validated symmetric positive definite float64 ``S``."""
    return _sym_power(S, -0.5)


def sym_sqrt(S: object) -> torch.Tensor:
    """Symmetric square root ``S^{1/2}`` of an SPD matrix (spec §1: the symmetric root throughout).

    Parameters
    ----------
    S : array-like, shape ([R,] d, d)
        Symmetric (to a relative 1e-10) positive semidefinite matrices; eigenvalues below 0 by round-off (a relative
        1e-12) are read as 0. Converted to float64.

    Returns
    -------
    torch.Tensor, shape ([R,] d, d), float64
        The symmetric root, ``S^{1/2} S^{1/2} = S``.

    Raises
    ------
    ValidationError
        A non-symmetric ``S``, one with a negative eigenvalue, a wrong shape or non-finite entries.
    """
    return _sym_sqrt(check_spd("S", S, {}, require="semidefinite"))


def sym_inv_sqrt(S: object) -> torch.Tensor:
    """Symmetric inverse square root ``S^{-1/2}`` of an SPD matrix.

    Parameters
    ----------
    S : array-like, shape ([R,] d, d)
        Symmetric (to a relative 1e-10) positive definite matrices. Converted to float64.

    Returns
    -------
    torch.Tensor, shape ([R,] d, d), float64
        The inverse of :func:`sym_sqrt` of ``S``.

    Raises
    ------
    ValidationError
        A non-symmetric ``S``, one with an eigenvalue ``<= 0``, a wrong shape or non-finite entries.
    """
    return _sym_inv_sqrt(check_spd("S", S, {}))


def spd_inverse(S: torch.Tensor) -> torch.Tensor:
    """Inverse of an SPD matrix through its Cholesky factor, shape ([R,] d, d)."""
    return torch.cholesky_inverse(torch.linalg.cholesky(S))


def _covariance(X: torch.Tensor, Y: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`empirical_covariance` without checks."""
    left = X if Y is None else Y
    return left.transpose(-1, -2) @ X / X.shape[-2]  # spec §1: Sigma_hat = X^T X / n, Sigma_yx = Y^T X / n


def empirical_covariance(X: object, Y: object | None = None) -> torch.Tensor:
    """Uncentred ``X^T X / n`` (or cross-covariance ``Y^T X / n``) (spec §1, §10.5: the mean is 0).

    Parameters
    ----------
    X : array-like, shape ([R,] n, d), float64
        Covariates, one sample a row, at least one.
    Y : array-like, shape ([R,] n, k), float64, optional
        Responses; given, the cross-covariance is returned.

    Returns
    -------
    torch.Tensor, shape ([R,] d, d) or ([R,] k, d)
        ``Sigma_hat = X^T X / n``, or ``Sigma_yx = Y^T X / n`` when ``Y`` is given.

    Raises
    ------
    ValidationError
        No samples (``n == 0``), mismatched shapes, non-finite entries.
    """
    sizes: dict[str, int] = {}
    X = check_batched("X", X, "nd", sizes, min_size={"n": 1})
    return _covariance(X, None if Y is None else check_batched("Y", Y, "nk", sizes))
