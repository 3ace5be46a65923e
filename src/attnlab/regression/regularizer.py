"""The balancing regularizer (Procrustes-flow template) and its empirical version.

Spec: preconditioned-regression §3.4 (definition), §5.2 (gradient), §10.1 (joint tokens):
``R(V, Q) = ||A^T A - C C^T||_F^2 = tr[((V^T V - Q Sigma Q^T) Sigma_z)^2]``; the empirical version uses the
sample covariances (``Sigma -> Sigma_hat``, ``Sigma_z -> Sigma_z_hat``) and does not depend on ``W*``.
"""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError
from attnlab.regression._checks import check_batched, check_covariances, check_joint, check_tokens
from attnlab.regression.data import _token_matrix
from attnlab.regression.linalg import _covariance

__all__ = ["empirical_regularizer", "regularizer", "regularizer_gradient"]


def _balance(V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor) -> torch.Tensor:
    return V.transpose(-1, -2) @ V - Q @ Sigma @ Q.transpose(-1, -2)  # spec §3.4: V^T V - Q Sigma Q^T, (..., p, p)


def value(V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor) -> torch.Tensor:
    """``tr[((V^T V - Q Sigma Q^T) Sigma_z)^2]`` without checks, shape ([R]) (spec §3.4)."""
    DS = _balance(V, Q, Sigma) @ Sigma_z
    return (DS * DS.transpose(-1, -2)).sum((-2, -1))  # spec §3.4: tr[(D Sigma_z)^2]


def _gradient(
    V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(4 V D~, -4 D~ Q Sigma)`` with ``D~ = Sigma_z (V^T V - Q Sigma Q^T) Sigma_z``, without checks (spec §5.2)."""
    D = Sigma_z @ _balance(V, Q, Sigma) @ Sigma_z  # spec §5.2: D~, symmetric (..., p, p)
    return 4 * V @ D, -4 * D @ Q @ Sigma  # spec §5.2


def _check(V, Q, Sigma, Sigma_z):  # noqa: ANN001, ANN202 - shared argument checks
    Sigma, Sigma_z, sizes = check_covariances(Sigma, Sigma_z)
    V = check_batched("V", V, "kp", sizes)
    Q = check_batched("Q", Q, "pd", sizes)
    return V, Q, Sigma, Sigma_z


def regularizer(V: object, Q: object, Sigma: object, Sigma_z: object | None = None) -> torch.Tensor:
    """Balancing regularizer ``tr[((V^T V - Q Sigma Q^T) Sigma_z)^2]`` (zero on the manifold of minima).

    Spec: preconditioned-regression §3.4.

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
    Q : array-like, shape ([R,] p, d), float64
    Sigma : array-like, shape ([R,] d, d), float64
        Covariate covariance (or its estimate ``Sigma_hat`` for the empirical version), SPD.
    Sigma_z : array-like, shape ([R,] p, p), float64, optional
        Token covariance (spec §10.1); default ``Sigma`` (covariate tokens, p = d).

    Returns
    -------
    torch.Tensor, shape ([R]), float64

    Raises
    ------
    ValidationError
        Non-SPD covariances or mismatched shapes.
    """
    return value(*_check(V, Q, Sigma, Sigma_z))


def regularizer_gradient(
    V: object, Q: object, Sigma: object, Sigma_z: object | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradient of :func:`regularizer`: ``(4 V D~, -4 D~ Q Sigma)``, ``D~ = Sigma_z (V^T V - Q Sigma Q^T) Sigma_z``.

    Spec: preconditioned-regression §5.2.

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
        Value matrix.
    Q : array-like, shape ([R,] p, d), float64
        Key-query matrix.
    Sigma : array-like, shape ([R,] d, d), float64
        Covariate covariance (or its estimate ``Sigma_hat``), SPD.
    Sigma_z : array-like, shape ([R,] p, p), float64, optional
        Token covariance (spec §10.1); default ``Sigma`` (covariate tokens, p = d).

    Returns
    -------
    grad_V : torch.Tensor, shape ([R,] k, p), float64
    grad_Q : torch.Tensor, shape ([R,] p, d), float64
    """
    return _gradient(*_check(V, Q, Sigma, Sigma_z))


def empirical_regularizer(
    V: object, Q: object, X: object, Y: object | None = None, *, tokens: str = "covariates"
) -> torch.Tensor:
    """The empirical regularizer: :func:`regularizer` with ``Sigma_hat = X^T X / n`` and ``Sigma_z_hat = Z^T Z / n``.

    Spec: preconditioned-regression §3.4 (``R_hat``: depends only on the sample).

    Parameters
    ----------
    V, Q : array-like
        As in :func:`regularizer`.
    X : array-like, shape ([R,] n, d), float64
        The sample, at least as many rows as token dimensions (``n >= p``: else the sample covariance is singular).
    Y : array-like, shape ([R,] n, k), float64, optional
        Needed for joint tokens only.
    tokens : {"covariates", "joint"}, default="covariates"

    Returns
    -------
    torch.Tensor, shape ([R]), float64

    Raises
    ------
    ValidationError
        Mismatched shapes, non-finite entries, fewer rows of ``X`` than token dimensions, joint tokens without
        ``Y``, or a singular sample covariance.
    """
    check_tokens(tokens)
    sizes: dict[str, int] = {}
    X = check_batched("X", X, "nd", sizes)
    if tokens == "joint":
        if Y is None:
            raise ValidationError("tokens='joint' reads the tokens (x; y): pass the responses Y")
        Y = check_batched("Y", Y, "nk", sizes)
        check_joint(X, Y, tokens)
    p, which = (sizes["d"], "d") if tokens == "covariates" else (sizes["d"] + sizes["k"], "p = d + k")
    if sizes["n"] < p:
        raise ValidationError(
            f"X has too few rows: n == {sizes['n']} < {which} == {p}, so the sample covariance (rank <= n) is "
            f"singular; pass at least {p} samples"
        )
    Sigma_z = None if tokens == "covariates" else _covariance(_token_matrix(X, Y, tokens))
    return regularizer(V, Q, _covariance(X), Sigma_z)
