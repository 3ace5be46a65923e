"""Spectral initialization (Algorithm S): a point of the manifold of minima estimated from the sample.

Spec: preconditioned-regression §6.1 (and §10.5: uncentred ``Sigma_hat``, ``M_hat`` with ``Sigma_hat^{-1/2}``).
"""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError
from attnlab.regression._checks import check_batched, check_joint, check_orthonormal, check_tokens
from attnlab.regression.data import _token_matrix
from attnlab.regression.linalg import _covariance, spd_inverse
from attnlab.regression.manifold import _point

__all__ = ["spectral_init"]


def spectral_init(
    X: object, Y: object, *, tokens: str = "covariates", R0: object | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm S: ``theta_0 = theta_{R0}`` on the manifold built from ``(Sigma_hat, M_hat)``.

    Spec: preconditioned-regression §6.1. ``M_hat = Sigma_yx_hat Sigma_hat^{-1/2} = W_OLS Sigma_hat^{1/2}``, thin SVD
    ``M_hat = U S V_M^T``, ``V_0 = U S^{1/2} R0^T Sigma_z_hat^{-1/2}``,
    ``Q_0 = Sigma_z_hat^{-1/2} R0 S^{1/2} V_M^T Sigma_hat^{-1/2}``.

    Parameters
    ----------
    X : array-like, shape ([R,] n, d), float64
    Y : array-like, shape ([R,] n, k), float64
    tokens : {"covariates", "joint"}, default="covariates"
    R0 : array-like, shape ([R,] p, d), float64, optional
        Orthonormal columns; default the first d columns of ``I_p``.

    Returns
    -------
    V0 : torch.Tensor, shape ([R,] k, p), float64
    Q0 : torch.Tensor, shape ([R,] p, d), float64

    Raises
    ------
    ValidationError
        ``k < d`` (A2), ``n`` too small for an invertible ``Sigma_hat``, mismatched shapes.
    """
    check_tokens(tokens)
    sizes: dict[str, int] = {}
    X = check_batched("X", X, "nd", sizes)
    Y = check_batched("Y", Y, "nk", sizes)
    d, k, n = sizes["d"], sizes["k"], sizes["n"]
    if k < d:
        raise ValidationError(
            f"Y has k == {k} responses < d == {d} covariates: the spectral start needs k >= d (assumption A2); "
            f"use data with at least {d} response dimensions"
        )
    check_joint(X, Y, tokens)
    Z = _token_matrix(X, Y, tokens)
    p = Z.shape[-1]
    Sigma_hat, Sigma_z_hat = _covariance(X), _covariance(Z)  # spec §6.1 step 1
    if n < p or float(torch.linalg.eigvalsh(Sigma_z_hat).amin()) <= 1e-12 * float(Sigma_z_hat.abs().amax()):
        raise ValidationError(
            f"the sample covariance of the {p}-dimensional tokens is singular (n == {n}); "
            f"the spectral start needs n >= {p} samples in general position"
        )
    W_ols = _covariance(X, Y) @ spd_inverse(Sigma_hat)  # spec §6.1 step 2: M_hat = W_OLS Sigma_hat^{1/2}
    if R0 is None:
        R0 = torch.eye(p, d, dtype=torch.float64)  # spec §6.1 step 4: R0 = I
    else:
        sizes["p"] = p
        R0 = check_orthonormal("R0", R0, sizes)
    return _point(R0, W_ols, Sigma_hat, Sigma_z_hat)  # spec §6.1 steps 3, 5
