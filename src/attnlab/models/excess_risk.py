"""The fixed-head risk above its infimum, ``log(L(W) - L_*)``, from the margins: exact however close ``L`` is to ``L_*``.

Spec: implicit-bias-ngd §3 (``L_* = (1/n) sum_i l(gamma_{i,opt_i})``, the infimum of the risk with a fixed head) and
§4 A3 (the Polyak step's ``L - L_*``). ``log L - log L_*`` loses every digit once ``L - L_*`` is below float64's
resolution of ``L`` (about ``2e-16 L``); the margins keep them. With ``delta_i = sum_t phi_it (gamma_{i,opt} -
gamma_it) >= 0`` the margin is ``gamma_{i,opt} - delta_i`` and

- exp loss: ``l(gamma - delta) - l(gamma) = e^{-gamma} expm1(delta)``;
- logistic loss: ``l(gamma - delta) - l(gamma) = log1p(sigmoid(-gamma) expm1(delta))``,

each built from ``log delta``, a log-sum-exp of non-negative terms.
"""

from __future__ import annotations

import torch

from attnlab._numerics import log_mean_exp
from attnlab._validation import ValidationError, check_in
from attnlab.losses import LOSSES, _log_loss
from attnlab.models.functional import attention_logits, token_scores

__all__ = ["log_excess_risk"]


def _log_expm1(log_x: torch.Tensor) -> torch.Tensor:
    """``log(expm1(x))`` from ``log x``, for ``x >= 0`` as small as ``e^-1e300`` (``-inf`` at ``x = 0``), with a
    finite gradient wherever the value is finite: each branch sees only inputs where it is finite (a branch's
    infinite gradient times ``where``'s zero would be NaN, as once ``x = e^{log x}`` underflowed below ``e^-745``)."""
    x = torch.exp(log_x)
    large = x > 1
    x_large = torch.where(large, x, 2.0)  # 2.0: any x > 0 where the large branch is not read
    x_small = torch.where(large, 0.0, x)
    ratio = torch.where(x_small > 0, torch.expm1(x_small) / torch.where(x_small > 0, x_small, 1.0), 1.0)  # -> 1 at 0
    return torch.where(large, x_large + torch.log(-torch.expm1(-x_large)), log_x + torch.log(ratio))


def log_excess_risk(
    X: torch.Tensor,
    Z: torch.Tensor,
    y: torch.Tensor,
    v: torch.Tensor,
    W: torch.Tensor,
    loss: str = "exp",
    *,
    scores: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log(L(W) - L_*)`` per run, with ``L_*`` the infimum of the fixed-head risk; no cancellation.

    Spec: implicit-bias-ngd §3 (``L_*``), §4 A3 (the gap of the Polyak step); see the module notes.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d_q)
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The fixed linear head.
    W : torch.Tensor, shape ([R,] d, d_q)
    loss : {"exp", "logistic"}, default="exp"
    scores : torch.Tensor, shape ([R,] n, T), optional
        :func:`~attnlab.models.functional.token_scores` of ``X, y, v`` computed beforehand; a training loop with
        fixed data passes it to skip that work at every step (same result).

    Returns
    -------
    torch.Tensor, shape ([R,]), float64
        ``-inf`` where ``L = L_*`` to within the smallest double (every non-optimal token's weight underflowed).

    Examples
    --------
    >>> from attnlab.data import example1
    >>> from attnlab.metrics import optimal_loss
    >>> from attnlab.models import attention_loss
    >>> data = example1(n=4, T=3, d=4, seed=0)
    >>> W = torch.zeros(4, 4, dtype=torch.float64)
    >>> gap = attention_loss(data.X, data.Z, data.y, data.v, W) - optimal_loss(data.X, data.y, data.v, data.select)
    >>> bool(torch.isclose(log_excess_risk(data.X, data.Z, data.y, data.v, W), torch.log(gap)))
    True
    """
    check_in("loss", loss, LOSSES)
    if not isinstance(v, torch.Tensor):
        raise ValidationError(f"v must be a fixed linear head (a tensor of shape ([R,] d)), got {type(v).__name__}")
    gamma = token_scores(X, y, v) if scores is None else scores  # ([R,] n, T)
    top = gamma.amax(dim=-1, keepdim=True)  # gamma_{i, opt}
    log_phi = torch.log_softmax(attention_logits(X, W, Z).contiguous(), dim=-1)
    log_delta = torch.logsumexp(log_phi + torch.log(top - gamma), dim=-1)  # ngd §3: the margin lost, log 0 at opt
    log_expm1 = _log_expm1(log_delta)
    if loss == "exp":
        per_sample = log_expm1 - top[..., 0]  # e^{-gamma} expm1(delta)
    else:
        # log log1p(x) = log l(-log x) of the logistic loss, x = sigmoid(-gamma) expm1(delta)
        per_sample = _log_loss(-(torch.nn.functional.logsigmoid(-top[..., 0]) + log_expm1), "logistic")
    return log_mean_exp(per_sample)  # (1/n) sum_i
