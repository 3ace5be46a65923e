"""Token-selection attention as pure functions, batched over an optional leading runs axis.

Spec: implicit-bias-ngd §2-3 (model, loss, cancellation-free gradient §3.1), mirror-descent-lp §2,
kq-nuclear-norm §2-3.1 (K, Q and diagonal parametrisations).

Notation: ``X (..., n, T, d)`` tokens, ``Z (..., n, d)`` queries, ``y (..., n)`` labels, ``v (..., d)`` head,
``W (..., d, d_q)`` combined key-query matrix (``Z (..., n, d_q)``: queries may have another width than the
tokens, cross-attention, multi-token §8); ``...`` is an optional runs axis ``R`` that broadcasts (data without
it and weights with it is a sweep over initialisations on one data set). Logits ``s_{it} = x_{it}^T W z_i``.

The gradient is computed from the centred scores ``c_{it} = sum_tau phi_{i tau} (gamma_{it} - gamma_{i tau})``
(no ``1 - phi`` cancellation), and its per-token weights are formed in the log domain and shifted by their
largest value: :func:`loss_gradients` returns ``(mantissa, log_scale)`` with ``gradient = mantissa * exp(log_scale)``,
so the normalised direction stays exact long after the non-selected softmax probabilities underflow. The log-domain
pieces (centred scores, logit derivatives, :class:`LogScaled`) are :mod:`attnlab.models.logit_derivatives`; they are
re-exported here.
"""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError, check_in
from attnlab.losses import LOSSES
from attnlab.models._checks import formula_args
from attnlab.models.heads import AttentionHeads, Head
from attnlab.models.logit_derivatives import (
    LogitDerivatives,
    LogScaled,
    ScoreGaps,
    centred_scores,
    logit_derivatives,
    score_gaps,
)

__all__ = [
    "LogScaled",
    "LogitDerivatives",
    "ScoreGaps",
    "attention_logits",
    "attention_probabilities",
    "attention_loss",
    "centred_scores",
    "logit_derivatives",
    "logit_kernel",
    "loss_gradients",
    "margins",
    "mixtures",
    "outer_sum",
    "outputs",
    "score_gaps",
    "token_scores",
    "tokens_first",
]


def _matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b``; two stacks of equally many matrices go straight to ``bmm`` (``matmul`` would first broadcast them,
    a handful of view operations that dominate at the papers' sizes)."""
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] == b.shape[0]:
        return torch.bmm(a, b, out=out)
    return torch.matmul(a, b, out=out)


def attention_logits(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """Softmax logits ``s_{it} = x_{it}^T W z_i``.

    Spec: implicit-bias-ngd §2 (``s = X W x_1``), mirror-descent-lp §2 (``s = X W z``).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    W : torch.Tensor, shape ([R,] d, d_q)
    Z : torch.Tensor, shape ([R,] n, d_q)

    Returns
    -------
    torch.Tensor, shape ([R,] n, T)
    """
    return torch.linalg.vecdot(X, _w_z(W, Z).unsqueeze(-2))  # one fused product over d, no batched matrix-vector views


def _w_z(W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """``W z_i`` for every query, shape ([R,] n, d): spec ngd §2, ``s_i = X_i (W z_i)``; ``W z_i`` first costs
    ``n d^2`` flops per run instead of the ``n T d^2`` of ``(X_i W) z_i``."""
    return _matmul(Z, W.transpose(-1, -2))


def tokens_first(X: torch.Tensor) -> torch.Tensor:
    """The tokens with their token axis first, ``(T, R, n, d)`` from ``X (R, n, T, d)``, for :func:`loss_gradients`'
    ``X_first``: computed once per data set, it gives the token-first logits with no copy per step.

    Runs that share one data set (``X.stride(0) == 0``) keep sharing it: one copy, a stride-0 runs axis.

    Parameters
    ----------
    X : torch.Tensor, shape (R, n, T, d)

    Returns
    -------
    torch.Tensor, shape (T, R, n, d)
        Contiguous in ``(n, d)`` per token (and in the runs axis unless it is shared).
    """
    if X.stride(0) == 0:
        return X[0].movedim(-2, 0).contiguous().unsqueeze(1).expand(-1, X.shape[0], -1, -1)
    return X.movedim(-2, 0).contiguous()


def _logits_first(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor, X_first: torch.Tensor | None) -> torch.Tensor:
    """:func:`attention_logits` token-first, ``(T, [R,] n)`` and contiguous (the layout of :class:`ScoreGaps`).

    From ``X_first`` (:func:`tokens_first`) the product lands in that layout directly: every logit is the same sum
    over ``d`` of the same products, by the same row reduction, so the values are the bits of the transposed copy.
    """
    if X_first is None:
        return attention_logits(X, W, Z).movedim(-1, 0).contiguous()
    return torch.linalg.vecdot(X_first, _w_z(W, Z))  # spec ngd §2: s_i = X_i (W z_i), token-first


def attention_probabilities(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """Softmax attention of each query over its tokens, ``phi_i = softmax(X_i W z_i)``.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Attention weights, optionally one per run.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Queries.

    Returns
    -------
    torch.Tensor, shape ([R,] n, T), float64
        Each row sums to 1 (a log-sum-exp softmax: large logits do not overflow).

    Raises
    ------
    ValidationError
        When an argument is not real (complex, boolean, text) or has NaN or inf entries, ``X`` has no sequence or no
        token, or the shapes do not fit together (leading axes that do not broadcast).
    """
    X, Z, W, _, _ = formula_args(X, Z, W)
    return _attention_probabilities(X, W, Z)


def _attention_probabilities(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    return torch.softmax(attention_logits(X, W, Z), dim=-1)


def token_scores(X: torch.Tensor, y: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Token scores ``gamma_{it} = y_i v^T x_{it}``. Spec: implicit-bias-ngd §1 (Def. 1).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Tokens.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The linear head.

    Returns
    -------
    torch.Tensor, shape ([R,] n, T)
    """
    return y[..., None] * torch.einsum("...ntd,...d->...nt", X, v)  # spec ngd §1: gamma = y v^T x


def mixtures(X: torch.Tensor, probabilities: torch.Tensor) -> torch.Tensor:
    """Attended token mixtures ``u_i = X_i^T phi_i``, shape ``([R,] n, d)``, of probabilities ``([R,] n, T)``."""
    return (probabilities.unsqueeze(-1) * X).sum(dim=-2)  # multi-token §1: u = X^T softmax(X W z)


def outputs(X: torch.Tensor, W: torch.Tensor, Z: torch.Tensor, v: torch.Tensor | Head) -> torch.Tensor:
    """Model outputs ``f(X_i) = h(X_i^T softmax(X_i W z_i))``.

    Spec: implicit-bias-ngd §2 eq. (1) (linear head ``h(u) = v^T u``), multi-token §1 (a :class:`Head`).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Attention weights, optionally one per run.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Queries.
    v : torch.Tensor of shape ([R,] d), or Head
        A linear head, a nonlinear :class:`Head` (e.g. ``ReluHead``), or a sum of heads (which then holds the
        heads' own weights, multi-token §9).

    Returns
    -------
    torch.Tensor, shape ([R,] n)
    """
    if isinstance(v, AttentionHeads):
        return v.outputs(X, W, Z)  # multi-token §9: the heads' own attention
    if isinstance(v, Head):
        return v.value_and_gradient(mixtures(X, _attention_probabilities(X, W, Z)))[0]  # multi-token §1
    values = torch.einsum("...ntd,...d->...nt", X, v)
    return (_attention_probabilities(X, W, Z) * values).sum(dim=-1)  # spec ngd §2 (1)


def margins(X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor | Head, W: torch.Tensor) -> torch.Tensor:
    """Classification margins ``y_i f(X_i)`` (``= sum_t phi_{it} gamma_{it}`` for a linear head).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Tokens.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Queries.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor of shape ([R,] d), or Head
        The head.
    W : torch.Tensor, shape ([R,] d, d_q)
        Attention weights, optionally one per run.

    Returns
    -------
    torch.Tensor, shape ([R,] n), float64

    Raises
    ------
    ValidationError
        When an argument is not real (complex, boolean, text) or has NaN or inf entries, ``X`` has no sequence or no
        token, ``y`` holds a label other than -1 and +1 (map 0/1 labels with ``2 * label - 1``), or the shapes do not
        fit together (leading axes that do not broadcast).
    """
    X, Z, W, y, v = formula_args(X, Z, W, y, v)
    return _margins(X, Z, y, v, W)


def _margins(
    X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor | Head, W: torch.Tensor
) -> torch.Tensor:
    if isinstance(v, Head):
        return y * outputs(X, W, Z, v)
    return (_attention_probabilities(X, W, Z) * token_scores(X, y, v)).sum(dim=-1)


# outer_sum's kernel choice by the number of sequences R n (1 thread: at (R, n, T, d) = (1, 6, 8, 10) the broadcast sum
# takes ~3 tensor calls against the loop's 16; at (256, 8, 6, 64) the loop 6.8 ms, the sum 9.1 ms)
_SOME_SEQUENCES = 512


def outer_sum(X: torch.Tensor, Z: torch.Tensor, weights: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_it w_it x_it z_i^T``, shape ``([R,] d, d_q)``: the matrix whose logits change by ``K w`` (:func:`logit_kernel`).

    With ``w = dL/ds`` it is ``grad_W L`` (spec implicit-bias-ngd §3.1).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d_q)
    weights : torch.Tensor, shape ([R,] n, T)
    out : torch.Tensor, shape ([R,] d, d_q), optional
        Written and returned; a loop that reuses one buffer saves an allocation per call.
    """
    # a_i = sum_t w_it x_it, by the kernel that is fastest at this size (same sum; measured with one thread): up to a
    # few hundred sequences one broadcast product and a sum over t; beyond, accumulate over the few tokens in place,
    # with no ([R,] n, T, d) temporary
    sequences = weights.shape[:-1].numel()
    if sequences <= _SOME_SEQUENCES:
        a = (X * weights.unsqueeze(-1)).sum(dim=-2)  # ([R,] n, d)
    else:
        a = weights[..., 0, None] * X[..., 0, :]
        for t in range(1, X.shape[-2]):
            a.addcmul_(weights[..., t, None], X[..., t, :])
    return _matmul(a.transpose(-1, -2), Z, out=out)


def logit_kernel(X: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """``K[(i,t), (j,u)] = (x_it . x_ju)(z_i . z_j)``, shape ``([R,] nT, nT)``, rows and columns ordered ``(i, t)``.

    Spec: implicit-bias-ngd §2 (logits linear in ``W``). Adding ``outer_sum(X, Z, w)`` to ``W`` adds ``K w`` to the
    logits, and ``||outer_sum(X, Z, w)||_F^2 = w^T K w``: every ``W`` of the form ``W_0 + sum_it w_it x_it z_i^T``
    (the span gradient methods move in) can be trained through its ``nT`` coefficients.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d)
    """
    n, T = X.shape[-3], X.shape[-2]
    tokens = X.flatten(-3, -2)  # ([R,] nT, d)
    gram = (tokens @ tokens.transpose(-1, -2)).unflatten(-1, (n, T)).unflatten(-3, (n, T))  # ([R,] n, T, n, T)
    queries = Z @ Z.transpose(-1, -2)  # ([R,] n, n)
    return (gram * queries[..., :, None, :, None]).flatten(-2, -1).flatten(-3, -2)


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
    return_weights: bool = False,
    risk: bool = True,
    X_first: torch.Tensor | None = None,
) -> (
    tuple[LogScaled, LogScaled | None, torch.Tensor | None]
    | tuple[LogScaled, LogScaled | None, torch.Tensor | None, LogScaled]
):
    """Gradients of the empirical risk in ``W`` (and ``v``), exact after softmax saturation.

    Spec: implicit-bias-ngd §3.1 (``grad_W L = (1/n) sum_i l'_i X_i^T phi'(s_i) X_i v y_i z_i^T`` in the
    cancellation-free form, log-domain weights) and §4 A5 (``grad_v L = (1/n) sum_i l'_i y_i X_i^T phi_i``).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d_q)
    y : torch.Tensor, shape ([R,] n)
    v : torch.Tensor, shape ([R,] d), or Head
        The linear head, or a fixed nonlinear :class:`~attnlab.models.heads.Head` (multi-token §1: its token scores
        ``gamma_it = y_i grad h(u_i)^T x_it`` are recomputed at ``W``; ``gaps`` and ``head`` do not apply), or
        :class:`~attnlab.models.heads.AttentionHeads` (a sum of heads, multi-token §9), which computes the gradient
        itself.
    W : torch.Tensor, shape ([R,] d, d_q)
    loss : {"exp", "logistic"}
    head : bool, default=False
        Also return the gradient in ``v`` (a linear head only).
    gaps : ScoreGaps, optional
        ``score_gaps(token_scores(X, y, v))`` computed beforehand; a training loop with fixed ``X, y, v`` passes it
        to skip that work at every step (same result).
    out : torch.Tensor, shape ([R,] d, d_q), optional
        Written with ``grad_W``'s mantissa and returned in it; a loop that reuses one buffer saves a fresh
        ``(R, d, d_q)`` allocation (and its page faults) per step.
    return_weights : bool, default=False
        Also return ``dL/ds`` (the logit weights, :func:`logit_derivatives`) with the same ``log_scale``: the
        integrand of the gradient flow's ``phi`` (kq-nuclear-norm §3.1).
    risk : bool, default=True
        Also compute ``log L``; with False, ``log_risk`` is None (a step that does not read the loss).
    X_first : torch.Tensor, shape (T, R, n, d), optional
        :func:`tokens_first` of ``X`` (with ``X`` of shape (R, n, T, d)), computed beforehand: a training loop with
        fixed ``X`` passes it to skip a transposed copy of the logits at every step (same result).

    Returns
    -------
    grad_W : LogScaled
        ``mantissa`` shape ([R,] d, d_q), ``log_scale`` shape ([R,]).
    grad_v : LogScaled or None
        Same ``log_scale`` as ``grad_W`` (one scale per run, so joint norms are exact).
    log_risk : torch.Tensor, shape ([R,]), or None
        ``log L(W)`` (None with ``risk=False``).
    weights : LogScaled, only with ``return_weights``
        ``dL/ds``: mantissa shape ([R,] n, T), the same ``log_scale`` as ``grad_W``.
    """
    if isinstance(v, AttentionHeads):  # multi-token §9: a sum of heads computes its own gradient
        if head or return_weights:
            raise ValidationError(
                "a sum of attention heads trains W only: loss_gradients(..., head=True or return_weights=True) "
                "needs one attention head; use a rule that does not integrate dL/ds (not gradient flow)"
            )
        return v.loss_gradients(X, Z, y, W, loss, risk=risk)
    logits = _logits_first(X, W, Z, X_first)  # token-first (ScoreGaps)
    margin = None
    if isinstance(v, Head):
        if head:
            raise ValidationError("a nonlinear head is fixed: loss_gradients(..., head=True) needs a linear head v")
        # multi-token §1: dL/ds_it = -(|l'_i|/n) phi_it (gamma_it - sum_tau phi_tau gamma_tau) with the scores of
        # the head's gradient at the current mixture, gamma_it = y_i grad h(u_i)^T x_it
        # softmax on the token-first copy: on attention_logits' own output torch's kernel runs ~1000x slower
        value, grad = v.value_and_gradient(mixtures(X, torch.softmax(logits, dim=0).movedim(0, -1)))
        gaps = score_gaps(y[..., None] * torch.linalg.vecdot(X, grad.unsqueeze(-2)))
        margin = y * value
    elif gaps is None:
        gaps = score_gaps(token_scores(X, y, v))
    derivatives = logit_derivatives(logits, gaps, loss, risk=risk, margin=margin)
    parts = log_wv = floor = None
    if head:
        parts = derivatives.per_sample()
        log_wv = parts[0] + derivatives.log_phi  # (T, [R,] n), relative to top as the weights
        floor = log_wv.amax(dim=(0, -1))
    mantissa, relative_shift, shift = derivatives.scaled_parts(floor, parts)
    per_token = mantissa.movedim(0, -1)  # ([R,] n, T)
    grad_W = outer_sum(X, Z, per_token, out=out)  # spec ngd §3.1: grad = sum_it (dL/ds_it) x_it z_i^T
    grad_v = None
    if head:
        weights_v = y[..., None] * torch.exp(log_wv - relative_shift[..., None]).movedim(0, -1)
        grad_v = LogScaled(-torch.einsum("...nt,...ntd->...d", weights_v, X), shift)  # spec ngd A5
    if return_weights:
        return LogScaled(grad_W, shift), grad_v, derivatives.log_risk, LogScaled(per_token, shift)
    return LogScaled(grad_W, shift), grad_v, derivatives.log_risk


class _AttentionLoss(torch.autograd.Function):
    """Empirical risk with the exact (cancellation-free) backward pass in ``W`` and ``v``."""

    @staticmethod
    def forward(ctx, X, Z, y, v, W, loss):  # type: ignore[override]
        linear = not isinstance(v, Head)  # a nonlinear head is fixed: no gradient in it
        grad_W, grad_v, log_risk = loss_gradients(X, Z, y, v, W, loss, head=linear)
        ctx.save_for_backward(grad_W.value(), *((grad_v.value(),) if linear else ()))
        ctx.shapes = (v.shape if linear else None, W.shape)
        return log_risk.exp()

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        gW, *gv = ctx.saved_tensors
        v_shape, W_shape = ctx.shapes
        gW = grad_out[..., None, None] * gW
        gv = _sum_to(grad_out[..., None] * gv[0], v_shape) if gv else None
        return None, None, None, gv, _sum_to(gW, W_shape), None


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

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Tokens.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Queries.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The linear head (trainable through autograd).
    W : torch.Tensor, shape ([R,] d, d_q)
        Attention weights, optionally one per run.
    loss : {"exp", "logistic"}, default="exp"
        ``l(z) = e^{-z}`` or ``log(1 + e^{-z})`` of the margin ``z``.

    Returns
    -------
    torch.Tensor, shape ([R,]), float64
        Differentiable in ``W`` and ``v`` (a float32 one receives its gradient in float32).

    Raises
    ------
    ValidationError
        When ``loss`` is unknown, an argument is not real (complex, boolean, text) or has NaN or inf entries, ``X``
        has no sequence or no token, ``y`` holds a label other than -1 and +1 (map 0/1 labels with
        ``2 * label - 1``), or the shapes do not fit together (leading axes that do not broadcast).
    """
    check_in("loss", loss, LOSSES)
    X, Z, W, y, v = formula_args(X, Z, W, y, v)
    return _attention_loss(X, Z, y, v, W, loss)


def _attention_loss(
    X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor, W: torch.Tensor, loss: str = "exp"
) -> torch.Tensor:
    return _AttentionLoss.apply(X, Z, y, v, W, loss)
