"""Diagnostics of token selection: alignment, margins, softmax saturation, norms, Bregman divergences.

Spec: implicit-bias-ngd §5 (alignment ``corr``), §8.4 (softmax saturation), kq-nuclear-norm §4 (margin ``mu(W)``
and margin-normalised direction), mirror-descent-lp §3 (Bregman and directional Bregman divergence).

Pure functions take tensors with an optional leading runs axis and return one value per run; the metric objects
built on them, which training records, are :mod:`attnlab.metrics.protocol`. Each public function checks its
arguments once (:mod:`attnlab.metrics._checks`: shapes tied together, labels in {-1, +1}, token indices in range,
one dtype) and calls its unchecked ``_`` version, which the training loop's recorder and the metric objects call.
"""

from __future__ import annotations

import math

import torch

from attnlab._validation import ValidationError, check_in, check_nonzero, check_tensor
from attnlab.geometry import (
    _alike,
    _broadcast,
    _floats,
    _unit_scale,
    bregman_divergence,
    directional_bregman,
    entrywise_norm,
    matrix_norm,
)
from attnlab.losses import LOSSES, _log_mean_loss
from attnlab.metrics._checks import attention_args, in_range, nonempty, score_args
from attnlab.models.functional import _attention_probabilities, attention_logits, loss_gradients, token_scores

__all__ = [
    "attention_margin",
    "bregman_divergence",
    "cosine",
    "directional_bregman",
    "entrywise_norm",
    "gradient_direction",
    "largest_gap",
    "log_one_minus_selected",
    "margin_normalized",
    "matrix_norm",
    "optimal_loss",
    "selected_probabilities",
    "selected_probability",
    "selected_logistic_probability",
    "sequence_margins",
    "token_bound",
]


def cosine(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``<A, B> / (||A||_F ||B||_F)`` over the last two axes (or last axis for vectors); shape ``([R,])``.

    Spec: implicit-bias-ngd §5 (``corr(W_t, W_mm)``). Scale-free, so it is computed on ``A`` and ``B`` divided by
    their largest entries: entries near 1e300 or 1e-300 give the same cosine as entries near 1.

    Parameters
    ----------
    A : torch.Tensor, shape ([S,] [R,] d, d_q) or ([S,] [R,] d)
        Matrices (or vectors when either is one-dimensional), e.g. the iterates ``W_t`` of a path; a zero one
        (``W_0 = 0``) has no direction yet: its cosine is nan.
    B : torch.Tensor, shape ([R,] d, d_q) or ([R,] d)
        The reference direction(s), non-zero for every run, broadcast against ``A``.

    Returns
    -------
    torch.Tensor, shape ([S,] [R,])
        The cosine, in [-1, 1] (nan where ``A`` is zero).

    Raises
    ------
    ValidationError
        When ``B`` is zero for some run, either is not real, or their shapes do not broadcast.
    """
    A, B = _floats("A", A), _floats("B", B)
    if A.dim() == 0 or B.dim() == 0:
        raise ValidationError(f"A and B must be matrices or vectors, got shapes {tuple(A.shape)} and {tuple(B.shape)}")
    _broadcast("shapes", A=A.shape, B=B.shape)
    B = check_nonzero("B", B, 2 if A.dim() >= 2 and B.dim() >= 2 else 1)
    return _cosine(*_alike(A, B))


def _cosine(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    dims = (-2, -1) if A.dim() >= 2 and B.dim() >= 2 else (-1,)
    A, _ = _unit_scale(A, dims)
    B, _ = _unit_scale(B, dims)
    inner = (A * B).sum(dim=dims)
    return inner / (torch.linalg.vector_norm(A, dim=dims) * torch.linalg.vector_norm(B, dim=dims))


def _selected(select: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return select.reshape(select.shape + (1,)).expand(shape[:-1] + (1,))


def sequence_margins(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``min_{t != sel_i} (x_{i,sel_i} - x_{it})^T W z_i`` per sequence, shape ``([R,] n)``.

    Spec: implicit-bias-ngd §5 (``<A_it, W>`` with ``A_it = (x_opt - x_t) z_i^T``), kq-nuclear-norm §4 Def. 4.1.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,] n)
        Each sequence's margin; the W-SVM constraint of sequence i holds when it is >= 1.

    Raises
    ------
    ValidationError
        When the shapes do not fit together, or ``select`` is not integer or holds an index outside ``[0, T - 1]``.
    """
    return _sequence_margins(*attention_args(X, Z, W, select))


def _sequence_margins(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    s = attention_logits(X, W, Z)
    idx = _selected(select, s.shape)
    gaps = torch.gather(s, -1, idx) - s  # spec kq §4: (x_sel - x_t)^T W z
    return gaps.scatter(-1, idx, math.inf).amin(dim=-1)


def attention_margin(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``mu(W) = min_{i, t != sel_i} (x_{i,sel_i} - x_{it})^T W z_i``, shape ``([R,])``. Spec: kq-nuclear-norm §4 Def. 4.1.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,])
        The attention margin; negative while some sequence prefers another token.

    Raises
    ------
    ValidationError
        When the shapes do not fit together, or ``select`` is not integer or holds an index outside ``[0, T - 1]``.
    """
    return _attention_margin(*attention_args(X, Z, W, select))


def _attention_margin(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    return _sequence_margins(X, Z, W, select).amin(dim=-1)  # spec kq §4 Def. 4.1: min over sequences


def margin_normalized(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """The margin-normalised direction ``W / mu(W)``. Spec: kq-nuclear-norm §4 (and §8 for runs not yet separating).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence.

    Returns
    -------
    torch.Tensor, shape ([R,] d, d)
        ``W`` divided by its attention margin (:func:`attention_margin`); all ``nan`` for a run whose margin is not
        yet positive.

    Raises
    ------
    ValidationError
        When the shapes do not fit together, or ``select`` is not integer or holds an index outside ``[0, T - 1]``.
    """
    X, Z, W, select = attention_args(X, Z, W, select)
    mu = _attention_margin(X, Z, W, select)
    mu = torch.where(mu > 0, mu, torch.nan)
    return W / mu[..., None, None]


def log_one_minus_selected(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``log(1 - phi_{i,sel_i})`` per sequence from the log-softmax of the other tokens (no ``1 - phi``), ``([R,] n)``.

    Spec: implicit-bias-ngd §8.4 (Lemma 1 slope).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,] n)
        ``log(1 - phi_{i,sel_i})``, finite even when the softmax saturates.

    Raises
    ------
    ValidationError
        When the shapes do not fit together, or ``select`` is not integer or holds an index outside ``[0, T - 1]``.
    """
    return _log_one_minus_selected(*attention_args(X, Z, W, select))


def _log_one_minus_selected(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    log_phi = torch.log_softmax(attention_logits(X, W, Z), dim=-1)
    idx = _selected(select, log_phi.shape)
    others = log_phi.scatter(-1, idx, -math.inf)
    return torch.logsumexp(others, dim=-1)


def selected_probabilities(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """Softmax probability ``phi_{i,sel_i}(W)`` of each sequence's selected token, shape ``([R,] n)``.

    Spec: implicit-bias-ngd §8.12 (iii) (``min_i phi_{i,opt}``), §9 fig. 2.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,] n)

    Raises
    ------
    ValidationError
        When the shapes do not fit together, or ``select`` is not integer or holds an index outside ``[0, T - 1]``.
    """
    return _selected_probabilities(*attention_args(X, Z, W, select))


def _selected_probabilities(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    s = _attention_probabilities(X, W, Z)
    return torch.gather(s, -1, _selected(select, s.shape)).squeeze(-1)


def selected_probability(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """Mean softmax probability of the selected tokens, shape ``([R,])``. Spec: implicit-bias-ngd §9 fig. 2.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d_q)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d_q)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,])
        The mean over sequences of the selected token's attention probability.

    Raises
    ------
    ValidationError
        When the shapes do not fit together, or ``select`` is not integer or holds an index outside ``[0, T - 1]``.
    """
    return _selected_probability(*attention_args(X, Z, W, select))


def _selected_probability(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    return _selected_probabilities(X, Z, W, select).mean(dim=-1)


def selected_logistic_probability(
    X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, select: torch.Tensor
) -> torch.Tensor:
    """Mean logistic probability ``(1/n) sum_i sigmoid(gamma_{i,sel_i})`` of the selected tokens, shape ``([S,] [R,])``.

    Spec: mirror-descent-lp §9 (the official code's "logistic probability": ``(1 + e^{-y_i v^T x_hat_i})^{-1}`` with
    ``x_hat_i`` the token of largest attention).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The linear head.
    select : torch.Tensor of int, shape ([S,] [R,] n)
        The selected token of each sequence; leading axes beyond X's (recorded steps) broadcast.

    Returns
    -------
    torch.Tensor, shape ([S,] [R,])
        In (0, 1).

    Raises
    ------
    ValidationError
        When the shapes do not fit together, ``y`` holds a label other than -1 and +1, or ``select`` is not an
        integer tensor of indices in ``[0, T - 1]``.
    """
    X, y, v, _ = score_args(X, y, v, selects=False)
    integral = isinstance(select, torch.Tensor) and not (select.is_floating_point() or select.dtype == torch.bool)
    if not integral or select.shape[-1:] != X.shape[-3:-2]:
        raise ValidationError(
            f"select must be an integer tensor of shape ([S,] [R,] n) with n = {X.shape[-3]} token indices per row, "
            f"got {getattr(select, 'dtype', type(select).__name__)} of shape {tuple(getattr(select, 'shape', ()))}"
        )
    select = in_range("select", select, X.shape[-2]).to(X.device)
    gamma = token_scores(X, y, v)  # spec md §9: gamma_it = y_i v^T x_it, ([R,] n, T)
    gamma = gamma.expand(select.shape + gamma.shape[-1:]).gather(-1, select[..., None]).squeeze(-1)
    return torch.sigmoid(gamma).mean(dim=-1)  # spec md §9: (1/n) sum (1 + e^{-y_i v^T x_hat_i})^{-1}


def token_bound(X: torch.Tensor) -> torch.Tensor:
    """``B = max_{i,t} ||x_{i,t}||``, the largest token norm, shape ``([R,])``. Spec: implicit-bias-ngd §1.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.

    Returns
    -------
    torch.Tensor, shape ([R,])

    Raises
    ------
    ValidationError
        When ``X`` is not real or has NaN or inf entries, is not of shape ``([R,] n, T, d)``, or has no sequence or
        no token.
    """
    X = check_tensor("X", X)
    if X.dim() not in (3, 4):
        raise ValidationError(f"X has shape {tuple(X.shape)}, expected ([R,] n, T, d): one token matrix per sequence")
    nonempty(X)
    return torch.linalg.vector_norm(X, dim=-1).flatten(-2).amax(dim=-1)  # spec ngd §1: B


def largest_gap(X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``Delta_max = max_i (gamma_{i,sel_i} - max_{t != sel_i} gamma_{it})``, shape ``([R,])``.

    Spec: implicit-bias-ngd §1 (``Delta_i``, the score gap of sequence i).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The linear head.
    select : torch.Tensor of int, shape ([R,] n)
        The optimal token of each sequence.

    Returns
    -------
    torch.Tensor, shape ([R,])

    Raises
    ------
    ValidationError
        When the shapes do not fit together, ``y`` holds a label other than -1 and +1, or ``select`` is not integer
        or holds an index outside ``[0, T - 1]``.
    """
    X, y, v, select = score_args(X, y, v, select)
    gamma = token_scores(X, y, v)  # spec ngd §1: gamma_it = y_i v^T x_it, ([R,] n, T)
    idx = _selected(select, gamma.shape)
    best = torch.gather(gamma, -1, idx).squeeze(-1)
    return (best - gamma.scatter(-1, idx, -math.inf).amax(dim=-1)).amax(dim=-1)  # spec ngd §1: max_i Delta_i


def optimal_loss(
    X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, select: torch.Tensor | None = None, loss: str = "exp"
) -> torch.Tensor:
    """``L_* = (1/n) sum_i l(gamma_{i,sel_i})``: the loss with all attention on the selected tokens, shape ``([R,])``.

    Spec: implicit-bias-ngd §3 (with a fixed head and the optimal tokens, the infimum of the loss, not attained) and
    §4 A3 (the Polyak step's target when none is given).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The fixed linear head.
    select : torch.Tensor of int, shape ([R,] n), optional
        The selected token of each sequence; default the optimal tokens (largest score ``gamma_it``).
    loss : {"exp", "logistic"}, default="exp"

    Returns
    -------
    torch.Tensor, shape ([R,])

    Raises
    ------
    ValidationError
        When ``loss`` is unknown, the shapes do not fit together, ``y`` holds a label other than -1 and +1 (map 0/1
        labels with ``2 * label - 1``), or ``select`` is not integer or holds an index outside ``[0, T - 1]``.
    """
    check_in("loss", loss, LOSSES)
    X, y, v, select = score_args(X, y, v, select, selects=select is not None)
    gamma = token_scores(X, y, v)  # spec ngd §1: gamma_it = y_i v^T x_it, ([R,] n, T)
    best = gamma.amax(dim=-1) if select is None else torch.gather(gamma, -1, _selected(select, gamma.shape))[..., 0]
    return _log_mean_loss(best, loss).exp()  # spec ngd §3: L_* = (1/n) sum_i l(gamma_{i,sel_i}), in the log domain


def gradient_direction(
    X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor, W: torch.Tensor, loss: str = "exp"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The descent direction ``-grad L / ||grad L||_F`` (exact after the gradient underflows), ``log ||grad L||_F``
    and ``log L``.

    Spec: implicit-bias-ngd §5 (NGD moves along ``-grad L / ||grad L||``), §8.5.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d_q)
    y : torch.Tensor, shape ([R,] n)
    v : torch.Tensor, shape ([R,] d)
        The fixed linear head.
    W : torch.Tensor, shape ([R,] d, d_q)
    loss : {"exp", "logistic"}, default="exp"

    Returns
    -------
    direction : torch.Tensor, shape ([R,] d, d_q)
    log_grad_norm : torch.Tensor, shape ([R,])
    log_risk : torch.Tensor, shape ([R,])

    Raises
    ------
    ValidationError
        When ``loss`` is unknown, the shapes do not fit together, or ``y`` holds a label other than -1 and +1.
    """
    check_in("loss", loss, LOSSES)
    X, Z, W, _ = attention_args(X, Z, W, selects=False)
    X, y, v, _ = score_args(X, y, v, selects=False)
    X, Z, y, v, W = _alike(X, Z, y, v, W)
    _broadcast(W=W.shape[:-2], v=v.shape[:-1])
    grad, _, log_risk = loss_gradients(X, Z, y, v, W, loss)  # log-scaled: grad = mantissa * e^{log_scale}
    norm = torch.linalg.matrix_norm(grad.mantissa)
    return -grad.mantissa / norm[..., None, None], torch.log(norm) + grad.log_scale, log_risk
