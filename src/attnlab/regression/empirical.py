"""In-sample empirical loss of softmax attention on linear regression, with its closed-form batched gradient.

Spec: preconditioned-regression §2 (predictor), §3.1 (loss, self-term), §5.3 (gradient), §6.3 (context option).
Query ``x_i`` attends to the context tokens ``z_l`` with logits ``z_l^T Q x_i``; the prediction is
``V sum_l s_il z_l`` and the loss is ``(1/B) sum_i ||y_i - y_hat_i||^2``.
"""

from __future__ import annotations

import torch

from attnlab._numerics import exp_
from attnlab._validation import ValidationError, check_bool, check_finite_result
from attnlab.regression._checks import check_batched, check_joint, check_tokens
from attnlab.regression.data import _token_matrix

__all__ = ["empirical_loss", "empirical_loss_and_gradient"]

_OVERFLOW = (
    "the logits z^T Q x or the predictions V sum_l s_l z_l overflow float64: V or Q is too large; pass V and Q of "
    "moderate scale (entries of order 1)"
)


def loss_and_gradient(
    V: torch.Tensor,
    Q: torch.Tensor,
    X: torch.Tensor,
    Y: torch.Tensor,
    Z: torch.Tensor,
    include_self: bool = True,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Loss and gradient of the empirical loss without checks (spec §5.3, the gradient in its covariance form).

    ``X`` (..., B, d) and ``Y`` (..., B, k) are the queries and their responses, ``Z`` (..., m, p) the context
    tokens. ``include_self=False`` masks the diagonal (needs the context to be the queries' own tokens, m = B).
    ``out``, contiguous float64 of the logits' shape (..., B, m), takes the logits and softmax weights in place of
    a new tensor (the same values): a caller that reuses it over calls saves the first touch of fresh pages, which
    costs more than the softmax itself at these sizes. Returns ``loss`` (...), ``grad_V`` (..., k, p), ``grad_Q``
    (..., p, d).
    """
    B, p = X.shape[-2], Z.shape[-1]
    # spec §5.3 step 1: L_il = z_l^T Q x_i, (..., B, m)
    logits = torch.matmul(X @ Q.transpose(-1, -2), Z.transpose(-1, -2), out=out)
    if not include_self:
        logits.masked_fill_(torch.eye(B, dtype=torch.bool, device=logits.device), float("-inf"))  # spec §3.1 option
    S = exp_(logits.sub_(logits.amax(dim=-1, keepdim=True)))  # spec §5.3 step 2, in the logits' storage
    S.div_(S.sum(dim=-1, keepdim=True))
    # one pass over S gives the context means and second moments: S [z_l, z_l z_l^T], (..., B, p + p^2)
    moments = S @ torch.cat([Z, (Z[..., :, :, None] * Z[..., :, None, :]).flatten(-2)], dim=-1)
    M, second = moments[..., :p], moments[..., p:].unflatten(-1, (p, p))  # spec §5.3 step 3: mu_i = sum_l S_il z_l
    R = M @ V.transpose(-1, -2) - Y  # spec §5.3 step 4: residuals, (..., B, k)
    loss = (R * R).sum((-2, -1)) / B  # spec §3.1: (1/B) sum_i ||r_i||^2
    U = R @ V  # spec §5.3 step 5: u_i = V^T r_i, (..., B, p)
    # spec §5.3 (covariance form of steps 6-7): sum_l G_il z_l = Cov_{S_i}(z) u_i = (sum_l S_il z_l z_l^T) u_i
    # - mu_i (u_i . mu_i); no (B, m) tensor besides S
    moved = (second @ U[..., None])[..., 0] - M * (U * M).sum(-1, keepdim=True)
    grad_V = 2 / B * R.transpose(-1, -2) @ M  # spec §5.3 step 7: (2/B) R^T M
    grad_Q = 2 / B * moved.transpose(-1, -2) @ X  # spec §5.3 step 7: (2/B) Z^T G^T X = (2/B) sum_i Cov_i u_i x_i^T
    return loss, grad_V, grad_Q


def empirical_loss_and_gradient(
    V: object,
    Q: object,
    X: object,
    Y: object,
    *,
    tokens: str = "covariates",
    include_self: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """In-sample empirical loss (every sample is a query, the whole sample its context) and its gradient.

    Spec: preconditioned-regression §3.1, §5.3.

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
        Value matrix; p = d (covariate tokens) or d + k (joint tokens).
    Q : array-like, shape ([R,] p, d), float64
        Key-query matrix; logits ``z_l^T Q x_i``.
    X : array-like, shape ([R,] n, d), float64
    Y : array-like, shape ([R,] n, k), float64
    tokens : {"covariates", "joint"}, default="covariates"
        Context tokens ``x_l`` (spec §0) or ``(x_l; y_l)`` (spec §10.1).
    include_self : bool, default=True
        Whether query ``x_i`` is part of its own context (spec §3.1 default: yes).

    Returns
    -------
    loss : torch.Tensor, shape ([R]), float64
    grad_V : torch.Tensor, shape ([R,] k, p), float64
    grad_Q : torch.Tensor, shape ([R,] p, d), float64

    Raises
    ------
    ValidationError
        Mismatched shapes, non-finite entries, no samples, fewer than 2 samples without the self-term, a non-bool
        ``include_self``, or ``V`` and ``Q`` so large that the loss or its gradient overflows.
    """
    check_tokens(tokens)
    include_self = check_bool("include_self", include_self)
    sizes: dict[str, int] = {}
    X = check_batched("X", X, "nd", sizes)
    Y = check_batched("Y", Y, "nk", sizes)
    check_joint(X, Y, tokens)
    sizes["p"] = sizes["d"] + (sizes["k"] if tokens == "joint" else 0)
    V = check_batched("V", V, "kp", sizes)
    Q = check_batched("Q", Q, "pd", sizes)
    if sizes["n"] < 1:
        raise ValidationError("X and Y have no samples (n == 0); pass at least one (query, response) pair")
    if not include_self and sizes["n"] < 2:
        raise ValidationError("include_self=False needs n >= 2 samples (each query needs another context token)")
    loss, grad_V, grad_Q = loss_and_gradient(V, Q, X, Y, _token_matrix(X, Y, tokens), include_self)
    for name, value in (("loss", loss), ("grad_V", grad_V), ("grad_Q", grad_Q)):
        check_finite_result(f"empirical_loss_and_gradient {name}", value, _OVERFLOW)
    return loss, grad_V, grad_Q


def empirical_loss(
    V: object, Q: object, X: object, Y: object, *, tokens: str = "covariates", include_self: bool = True
) -> torch.Tensor:
    """In-sample empirical loss ``(1/n) sum_i ||y_i - V sum_j s_j(x_i) z_j||^2``.

    Spec: preconditioned-regression §3.1 (prefactor 1/n, self-term included by default).

    Parameters
    ----------
    V : array-like, shape ([R,] k, p), float64
        Value matrix; p = d (covariate tokens) or d + k (joint tokens).
    Q : array-like, shape ([R,] p, d), float64
        Key-query matrix; logits ``z_l^T Q x_i``.
    X : array-like, shape ([R,] n, d), float64
        Covariates; each is a query, and all of them (with ``Y`` for joint tokens) the context.
    Y : array-like, shape ([R,] n, k), float64
        Responses.
    tokens : {"covariates", "joint"}, default="covariates"
        Context tokens ``x_l`` (spec §0) or ``(x_l; y_l)`` (spec §10.1).
    include_self : bool, default=True
        Whether query ``x_i`` is part of its own context (spec §3.1 default: yes).

    Returns
    -------
    torch.Tensor, shape ([R]), float64

    Raises
    ------
    ValidationError
        As :func:`empirical_loss_and_gradient`.

    Examples
    --------
    >>> import torch
    >>> X = torch.eye(2, dtype=torch.float64); Q = torch.zeros(2, 2, dtype=torch.float64)
    >>> float(empirical_loss(torch.eye(2, dtype=torch.float64), Q, X, X))  # prediction = mean token (1/2, 1/2)
    0.5
    """
    return empirical_loss_and_gradient(V, Q, X, Y, tokens=tokens, include_self=include_self)[0]
