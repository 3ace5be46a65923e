"""Renormalization along the scaling orbit ``(V, Q) -> (c V, Q / c)`` (workshop version; bounds the softmax parameter).

Spec: preconditioned-regression §3.5 (the scaling symmetry leaves the population loss unchanged), §6.4 (rules [R]).
"""

from __future__ import annotations

import torch

from attnlab.regression.linalg import _sym_sqrt

__all__ = ["RENORMALIZATIONS", "renormalize"]

RENORMALIZATIONS = ("none", "balance", "cap")
"""``balance``: the c minimising the regularizer (spec §6.4 default); ``cap``: keep ``||C||_op <= tau_Q``."""


def renormalize(
    V: torch.Tensor, Q: torch.Tensor, Sigma: torch.Tensor, Sigma_z: torch.Tensor, rule: str, tau_Q: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Move ``(V, Q)`` along its scaling orbit (spec §6.4); the population loss is unchanged.

    Parameters
    ----------
    V : torch.Tensor, shape (R, k, p), float64
    Q : torch.Tensor, shape (R, p, d), float64
    Sigma : torch.Tensor, shape ([R,] d, d), float64
        Sample covariance ``Sigma_hat``.
    Sigma_z : torch.Tensor, shape ([R,] p, p), float64
        Sample token covariance.
    rule : {"none", "balance", "cap"}
        ``balance``: ``c^4 = ||Sigma_z^1/2 Q Sigma Q^T Sigma_z^1/2||_F / ||Sigma_z^1/2 V^T V Sigma_z^1/2||_F``;
        ``cap``: if ``||Sigma_z^1/2 Q Sigma^1/2||_op > tau_Q`` rescale so that it equals ``tau_Q``.
    tau_Q : float, default=1.0

    Returns
    -------
    V, Q : torch.Tensor
        Same shapes.
    """
    if rule == "none":
        return V, Q
    if rule == "balance":
        QSQ = Q @ Sigma @ Q.transpose(-1, -2)
        VV = V.transpose(-1, -2) @ V
        num = (QSQ @ Sigma_z * (Sigma_z @ QSQ).transpose(-1, -2)).sum((-2, -1))  # tr(QSQ Sz QSQ Sz) = ||.||_F^2
        den = (VV @ Sigma_z * (Sigma_z @ VV).transpose(-1, -2)).sum((-2, -1))
        c = (num / den) ** 0.125  # spec §6.4: c^4 = ||b||_F / ||a||_F
    else:
        C = _sym_sqrt(Sigma_z) @ Q @ _sym_sqrt(Sigma)
        c = (torch.linalg.matrix_norm(C, ord=2) / tau_Q).clamp(min=1.0)  # spec §6.4 alternative
    c = c[..., None, None]
    return c * V, Q / c  # spec §3.5: scaling orbit
