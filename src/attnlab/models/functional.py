"""Token-selection attention as pure functions, batched over an optional leading runs axis.

Spec: implicit-bias-ngd §2-3 (model, loss, cancellation-free gradient §3.1), mirror-descent-lp §2,
kq-nuclear-norm §2-3.1 (K, Q and diagonal parametrisations).

Notation: ``X (..., n, T, d)`` tokens, ``Z (..., n, d)`` queries, ``y (..., n)`` labels, ``v (..., d)`` head,
``W (..., d, d)`` combined key-query matrix; ``...`` is an optional runs axis ``R`` that broadcasts (data without
it and weights with it is a sweep over initialisations on one data set). Logits ``s_{it} = x_{it}^T W z_i``.

The gradient is computed from the centred scores ``c_{it} = sum_tau phi_{i tau} (gamma_{it} - gamma_{i tau})``
(no ``1 - phi`` cancellation), and its per-token weights are formed in the log domain and shifted by their
largest value: :func:`loss_gradients` returns ``(mantissa, log_scale)`` with ``gradient = mantissa * exp(log_scale)``,
so the normalised direction stays exact long after the non-selected softmax probabilities underflow.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from attnlab.losses import log_abs_loss_derivative, log_mean_loss

__all__ = [
    "LogScaled",
    "ScoreGaps",
    "attention_logits",
    "attention_probabilities",
    "attention_loss",
    "centred_scores",
    "loss_gradients",
    "margins",
    "outputs",
    "score_gaps",
    "token_scores",
]


class LogScaled(NamedTuple):
    """A tensor stored as ``mantissa * exp(log_scale)``; ``log_scale`` has the runs shape ``(...)``.

    The largest weight behind ``mantissa`` is 1, so its norm is O(1) however small the true value is.
    """

    mantissa: torch.Tensor
    log_scale: torch.Tensor

    def value(self) -> torch.Tensor:
        """The plain tensor (may underflow to 0 where the true value is below 1e-308)."""
        extra = self.mantissa.dim() - self.log_scale.dim()
        return self.mantissa * torch.exp(self.log_scale).reshape(self.log_scale.shape + (1,) * extra)


def attention_logits(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """Softmax logits ``s_{it} = x_{it}^T W z_i``.

    Spec: implicit-bias-ngd §2 (``s = X W x_1``), mirror-descent-lp §2 (``s = X W z``).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    W : torch.Tensor, shape ([R,] d, d)
    Z : torch.Tensor, shape ([R,] n, d)

    Returns
    -------
    torch.Tensor, shape ([R,] n, T)
    """
    # spec ngd §2: s_i = X_i (W z_i); W z_i first costs n d^2 flops per run instead of the n T d^2 of (X_i W) z_i
    WZ = Z @ W.transpose(-1, -2)
    return (X @ WZ[..., None])[..., 0]


def attention_probabilities(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """Softmax attention of each query over its tokens, shape ``([R,] n, T)``."""
    return torch.softmax(attention_logits(X, W, Z), dim=-1)


def token_scores(X: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Token scores ``gamma_{it} = y_i v^T x_{it}``, shape ``([R,] n, T)``. Spec: implicit-bias-ngd §1 (Def. 1)."""
    return y[..., None] * torch.einsum("...ntd,...d->...nt", X, v)  # spec ngd §1: gamma = y v^T x


def outputs(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Model outputs ``f(X_i) = v^T X_i^T softmax(X_i W z_i)``, shape ``([R,] n)``. Spec: implicit-bias-ngd §2 eq. (1)."""
    values = torch.einsum("...ntd,...d->...nt", X, v)
    return (attention_probabilities(X, W, Z) * values).sum(dim=-1)  # spec ngd §2 (1)


def margins(X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Classification margins ``y_i f(X_i) = sum_t phi_{it} gamma_{it}``, shape ``([R,] n)``."""
    return (attention_probabilities(X, W, Z) * token_scores(X, y, v)).sum(dim=-1)


class ScoreGaps(NamedTuple):
    """Token scores and the logs of their pairwise gaps; they depend on ``X, y, v`` only, not on ``W``.

    Attributes
    ----------
    gamma : torch.Tensor, shape ([R,] n, T)
        Token scores.
    log_above, log_below : torch.Tensor, shape ([R,] n, T, T)
        ``log(gamma_t - gamma_tau)`` where ``gamma_t > gamma_tau`` and ``log(gamma_tau - gamma_t)`` where
        ``gamma_t < gamma_tau``; ``-inf`` elsewhere.
    """

    gamma: torch.Tensor
    log_above: torch.Tensor
    log_below: torch.Tensor


def score_gaps(gamma: torch.Tensor) -> ScoreGaps:
    """The ``W``-independent part of :func:`centred_scores`, to compute once per data set rather than per step.

    Parameters
    ----------
    gamma : torch.Tensor, shape ([R,] n, T)
        Token scores (:func:`token_scores`).

    Returns
    -------
    ScoreGaps
    """
    diff = gamma[..., :, None] - gamma[..., None, :]  # (…, n, t, tau): gamma_t - gamma_tau
    neg_inf = torch.tensor(-math.inf, dtype=diff.dtype)
    log_above = torch.where(diff > 0, torch.log(diff.clamp(min=1e-300)), neg_inf)
    log_below = torch.where(diff < 0, torch.log((-diff).clamp(min=1e-300)), neg_inf)
    return ScoreGaps(gamma, log_above, log_below)


def centred_scores(log_phi: torch.Tensor, gamma: torch.Tensor | ScoreGaps) -> tuple[torch.Tensor, torch.Tensor]:
    """``log |c_{it}|`` and ``sign(c_{it})`` for ``c_{it} = sum_tau phi_{i tau} (gamma_{it} - gamma_{i tau})``.

    Spec: implicit-bias-ngd §3.1 (cancellation-free form), kq-nuclear-norm §2 (numerics).

    The positive and negative parts of the sum are each a log-sum-exp over ``tau``; no ``1 - phi`` is formed.

    Parameters
    ----------
    log_phi : torch.Tensor, shape ([R,] n, T)
    gamma : torch.Tensor, shape ([R,] n, T), or ScoreGaps
        Token scores, or their :func:`score_gaps` computed beforehand (same result, less work per call).

    Returns
    -------
    log_abs, sign : torch.Tensor, shape ([R,] n, T)
        ``log |c|`` (``-inf`` where ``c = 0``) and ``sign(c)`` in {-1, 0, +1}.
    """
    gaps = gamma if isinstance(gamma, ScoreGaps) else score_gaps(gamma)
    log_w = log_phi[..., None, :]  # broadcasts over t (and over a runs axis that only W carries)
    neg_inf = torch.tensor(-math.inf, dtype=log_phi.dtype)
    # log_phi <= 0, so adding -inf where a gap is absent gives -inf, as masking the sum would
    log_pos = torch.logsumexp(log_w + gaps.log_above, dim=-1)
    log_neg = torch.logsumexp(log_w + gaps.log_below, dim=-1)
    big = torch.maximum(log_pos, log_neg)
    small = torch.minimum(log_pos, log_neg)
    finite = torch.isfinite(big)
    gap = torch.where(finite, small - torch.where(finite, big, 0.0), neg_inf)
    log_abs = torch.where(finite, big + torch.log1p(-torch.exp(gap)), neg_inf)  # c = e^P - e^N, exactly
    sign = torch.where(log_pos > log_neg, 1.0, torch.where(log_pos < log_neg, -1.0, 0.0)).to(log_phi.dtype)
    return log_abs, sign


def loss_gradients(
    X: torch.Tensor,
    Z: torch.Tensor,
    y: torch.Tensor,
    v: torch.Tensor,
    W: torch.Tensor,
    loss: str = "exp",
    *,
    head: bool = False,
    gaps: ScoreGaps | None = None,
    out: torch.Tensor | None = None,
) -> tuple[LogScaled, LogScaled | None, torch.Tensor]:
    """Gradients of the empirical risk in ``W`` (and ``v``), exact after softmax saturation.

    Spec: implicit-bias-ngd §3.1 (``grad_W L = (1/n) sum_i l'_i X_i^T phi'(s_i) X_i v y_i z_i^T`` in the
    cancellation-free form, log-domain weights) and §4 A5 (``grad_v L = (1/n) sum_i l'_i y_i X_i^T phi_i``).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d)
    y : torch.Tensor, shape ([R,] n)
    v : torch.Tensor, shape ([R,] d)
    W : torch.Tensor, shape ([R,] d, d)
    loss : {"exp", "logistic"}
    head : bool, default=False
        Also return the gradient in ``v``.
    gaps : ScoreGaps, optional
        ``score_gaps(token_scores(X, y, v))`` computed beforehand; a training loop with fixed ``X, y, v`` passes it
        to skip that work at every step (same result).
    out : torch.Tensor, shape ([R,] d, d), optional
        Written with ``grad_W``'s mantissa and returned in it; a loop that reuses one buffer saves a fresh
        ``(R, d, d)`` allocation (and its page faults) per step.

    Returns
    -------
    grad_W : LogScaled
        ``mantissa`` shape ([R,] d, d), ``log_scale`` shape ([R,]).
    grad_v : LogScaled or None
        Same ``log_scale`` as ``grad_W`` (one scale per run, so joint norms are exact).
    log_risk : torch.Tensor, shape ([R,])
        ``log L(W)``.
    """
    logits = attention_logits(X, W, Z)
    log_phi = torch.log_softmax(logits, dim=-1)
    gaps = score_gaps(token_scores(X, y, v)) if gaps is None else gaps
    gamma = gaps.gamma
    z = (log_phi.exp() * gamma).sum(dim=-1)  # margins y_i f_i, a convex combination of scores
    n = logits.shape[-2]
    log_dl = log_abs_loss_derivative(z, loss) - math.log(n)  # log |l'_i| / n
    log_c, sign_c = centred_scores(log_phi, gaps)
    log_w = log_dl[..., None] + log_phi + log_c  # spec ngd §3.1: w_it = l_i phi_it c_it (log domain)
    shift = log_w.flatten(-2).amax(dim=-1)
    log_wv = None
    if head:
        log_wv = log_dl[..., None] + log_phi
        shift = torch.maximum(shift, log_wv.flatten(-2).amax(dim=-1))
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    weights = sign_c * torch.exp(log_w - shift[..., None, None])
    # -grad = sum_i a_i z_i^T with a_i = sum_t w_it x_it; the sign goes on the (n, d) factor, not on the (d, d) result.
    # a_i accumulated over the few tokens in place: no ([R,] n, T, d) temporary per step, and none of the slow
    # one-row batched products that (1, T) @ (T, d) per (run, i) would be
    a = weights[..., 0, None] * X[..., 0, :]  # ([R,] n, d)
    for t in range(1, X.shape[-2]):
        a.addcmul_(weights[..., t, None], X[..., t, :])
    grad_W = torch.matmul(-a.transpose(-1, -2), Z, out=out)
    grad_v = None
    if head:
        weights_v = y[..., None] * torch.exp(log_wv - shift[..., None, None])
        grad_v = LogScaled(-torch.einsum("...nt,...ntd->...d", weights_v, X), shift)  # spec ngd A5
    return LogScaled(grad_W, shift), grad_v, log_mean_loss(z, loss)


class _AttentionLoss(torch.autograd.Function):
    """Empirical risk with the exact (cancellation-free) backward pass in ``W`` and ``v``."""

    @staticmethod
    def forward(ctx, X, Z, y, v, W, loss):  # type: ignore[override]
        grad_W, grad_v, log_risk = loss_gradients(X, Z, y, v, W, loss, head=True)
        ctx.save_for_backward(grad_W.value(), grad_v.value())
        ctx.shapes = (v.shape, W.shape)
        return log_risk.exp()

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        gW, gv = ctx.saved_tensors
        v_shape, W_shape = ctx.shapes
        gW = grad_out[..., None, None] * gW
        gv = grad_out[..., None] * gv
        return None, None, None, _sum_to(gv, v_shape), _sum_to(gW, W_shape), None


def _sum_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Sum a broadcast gradient back to ``shape`` (the runs axis may have been broadcast)."""
    while grad.dim() > len(shape):
        grad = grad.sum(dim=0)
    return grad


def attention_loss(
    X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor, W: torch.Tensor, loss: str = "exp"
) -> torch.Tensor:
    """Empirical risk ``L(W, v) = (1/n) sum_i l(y_i f(X_i))``, one value per run, differentiable in ``W`` and ``v``.

    Spec: implicit-bias-ngd §3. The backward pass uses :func:`loss_gradients` (cancellation-free), not autograd
    through the softmax, so gradients stay exact after saturation. Gradients in ``X``, ``Z`` are not provided.

    Returns
    -------
    torch.Tensor, shape ([R,])
    """
    return _AttentionLoss.apply(X, Z, y, v, W, loss)
